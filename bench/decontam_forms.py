"""Second labelled contamination set: the forms real scraped and generated data take, from ../shared/data.

Positives (label 1) are copies of benchmark items (LABEL_BENCHMARKS of bench/labelled_contamination.py):
- `unicode_math`: LaTeX rendered to Unicode by the `unicodeit` package (x², √, ≤, ×, π, ₁), fractions written
  a/b, `$` delimiters dropped;
- `plain_text_math`: LaTeX rendered to text by `pylatexenc`'s latex2text (√(3), 3/4, ·, dropped `$`);
- `latex_variant`: \\dfrac/\\tfrac, \\left/\\right, spacing commands, \\( \\) and \\[ \\] delimiters, \\leqslant, braces;
- `reordered`: the item's sentences in another order;
- `chat_template`: the item inside a chat template (ChatML, Llama 2/3, Alpaca, Vicuna, Phi);
- `mid_response`: the item quoted half-way through a long response (1,700-3,000 words of clean real responses);
- `suffix_copy`: the last 60% of a long item;
- `short_code`: an MBPP statement behind another request template ("Implement a Python function which ..."),
  often inside a chat template; HumanEval with the function renamed everywhere and a re-indented docstring;
- `one_line`: items of at most 12 words inside a chat template or behind a lead-in.
Negatives (label 0): MBPP statements of the other splits in the same templates (`mbpp_other_split`), items with
one number changed (`number_changed`, rendered like the positives), clean pool prompts rendered to Unicode or put
in chat templates (`pool_unicode`, `pool_chat`), stock one-liners in chat templates (`stock_one_line`), and clean
long-CoT responses of 1,700-3,000 words and of ~10k words (`clean_longcot`, `clean_longcot_10k`), built from
pools `CopyChecker` finds clean.

Every example carries `split`: items (and pool rows) are assigned to `tuning` or `heldout` by a hash of their
id, so no held-out item is ever seen while tuning. `heldout_digest` is the SHA-256 recorded in
bench/decontam_heldout.json before any tuning (bench/decontam.py checks it).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import sys
from functools import lru_cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from labelled_contamination import (  # noqa: E402
    LABEL_BENCHMARKS,
    NEGATIVE_POOLS,
    CopyChecker,
    LabelledExample,
    normalize,
)

from cotforge.curate.core.benchmarks import BenchmarkItem, load_benchmarks  # noqa: E402
from cotforge.curate.io.inputs import iter_input_rows  # noqa: E402
from cotforge.curate.io.readers import InputSpec  # noqa: E402

CHAT_TEMPLATES = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n{p}<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n{p}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    "<s>[INST] <<SYS>>\nYou are a careful math and coding assistant.\n<</SYS>>\n\n{p} [/INST]",
    "Below is an instruction that describes a task. Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n{p}\n\n### Response:\n",
    "A chat between a curious user and an artificial intelligence assistant. USER: {p} ASSISTANT:",
    "<|user|>\n{p}<|end|>\n<|assistant|>\n",
)
LEAD_INS = ("Quick question: {p}", "Help me with this one. {p}", "{p} Thanks in advance!", "Homework:\n{p}")
QUOTES = ("Wait, let me re-read the problem statement: \"{p}\" Okay.", "Let me restate the original question. {p}",
          "Hmm, going back to what was asked:\n\n{p}\n\nSo I need to be careful here.")
CODE_REQUESTS = ("Implement a Python function which {v3}.", "Create a Python function that {v3}.",
                 "Can you write Python code to {v}?", "I need a function to {v}. Please write it in Python.",
                 "Your task: {v}. Write the solution as a Python function.")
NEW_NAMES = ("solution", "f", "check_values", "my_func", "answer")
STOCK_ONE_LINERS = ("Simplify the expression.", "Find the value of x.", "What is the answer?", "Solve for y.",
                    "Write a function to reverse a string.", "Compute the sum.", "Find the remainder.",
                    "Write a python function to check whether a number is even or not.", "Evaluate the integral.")
_MATH_SEG = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)
_REQUEST = re.compile(r"^\s*Write (?:a |an )?(?:python )?function (?:to|that|for|which) ", re.I)


def split_of(key: str) -> str:
    """`heldout` for about half of the keys (a fixed hash of the item or pool row id), else `tuning`."""
    return "heldout" if hashlib.blake2b(key.encode(), digest_size=4).digest()[0] & 1 else "tuning"


def _frac_to_slash(s: str) -> str:
    """\\frac{a}{b} -> a/b, with parentheses around parts of more than one token (innermost first)."""
    pat = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")

    def rep(m: re.Match) -> str:
        a, b = (x.strip() for x in m.groups())
        a = a if re.fullmatch(r"[\w.]+", a) else f"({a})"
        b = b if re.fullmatch(r"[\w.]+", b) else f"({b})"
        return f"{a}/{b}"

    s = re.sub(r"(?<=[0-9A-Za-z])\s*(\\[dt]?frac)", r" \1", s)  # 2\frac{3}{4} -> 2 3/4; \lfloor\frac -> \lfloor x/2
    for _ in range(4):
        s = pat.sub(rep, s)
    return s


# Operator names a Unicode / plain-text writer spells as words (unicodeit knows none of them, and its prefix
# replacement turned `\\log` into `łog`, `\\pmod` into `±od`, `\\left` into `≤ft`: not faithful copies).
FUNCTION_NAMES = frozenset("log ln lg exp sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh coth lim "
                           "liminf limsup max min sup inf gcd lcm det deg dim ker arg mod bmod Pr".split())
# Presentation-only commands whose argument is kept as it is ({...} unwrapped).
UNWRAP = ("text", "textrm", "textbf", "textit", "texttt", "textnormal", "mathrm", "mathbf", "mathit", "mathsf",
          "mathtt", "mathnormal", "emph", "mbox", "hbox", "operatorname", "boldsymbol", "bm")
DROP = ("left", "right", "displaystyle", "textstyle", "limits", "nolimits", "big", "Big", "bigl", "bigr", "Bigl",
        "Bigr", "bigg", "Bigg")
_SPACING = re.compile(r"\\[,;:! ]|\\q?quad(?![A-Za-z])")
_ENV = re.compile(r"\\begin\{((?:align|aligned|alignat|cases|array|equation|eqnarray|gather|gathered|split|multline|"
                  r"[pbvV]?matrix)\*?)\}(?:\{[^{}]*\})?(.*?)\\end\{\1\}", re.S)  # math environments (not tikz)
_DOLLAR = "\x02"
_ARG = r"(?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*"  # a command argument with up to two levels of braces inside  # an escaped dollar while math segments are found


def _op_name(name: str) -> str:
    """How an operator name is written out (\\bmod is "mod")."""
    return "mod" if name == "bmod" else name


def _currency(body: str) -> bool:
    """A `$...$` "segment" that is two dollar amounts and the words between them (GSM8K: "$3.00 for ... $1.50")."""
    return bool(re.match(r"\d", body)) and not re.search(r"[\\^_{}=<>]", body) and bool(re.search(r"[A-Za-z]{3,}", body))


def _unwrap(body: str) -> str:
    """\\text{..}, \\mathrm{..}, \\operatorname{..} ... -> their argument; \\pmod{n} -> (mod n); \\binom{a}{b} -> C(a, b)."""
    for _ in range(3):
        body = re.sub(r"\\(?:" + "|".join(UNWRAP) + r")\s*\{([^{}]*)\}", r"\1", body)
    body = re.sub(r"\\pmod\s*\{([^{}]*)\}", r"(mod \1)", body)
    body = re.sub(r"\\pmod\s*(\w+)", r"(mod \1)", body)
    body = re.sub(r"\\[dt]?binom\s*\{([^{}]*)\}\s*\{([^{}]*)\}", r"C(\1, \2)", body)
    body = re.sub(r"\\(?:" + "|".join(DROP) + r")(?![A-Za-z])", "", body)
    return _SPACING.sub(" ", body)


def _script(m: re.Match) -> str:
    """^{..} / _{..} / ^c: Unicode super/subscripts when every character has one, else ^(..) / _(..)."""
    import unicodeit

    mark, body = m.group(1), (m.group(2) if m.group(2) is not None else m.group(3))
    out = unicodeit.replace("".join(f"{mark}{c}" for c in body))
    if mark not in out:
        return out
    return f"{mark}{body}" if len(body) == 1 else f"{mark}({body})"


@lru_cache(maxsize=1)
def _unicode_commands() -> dict[str, str]:
    """unicodeit's table of whole commands (\\leq -> ≤), looked up by the exact command name."""
    from unicodeit.data import REPLACEMENTS

    table = {k: v for k, v in REPLACEMENTS if re.fullmatch(r"\\[A-Za-z]+", k)}
    return {**table, "\\dots": "…", "\\dotsc": "…", "\\dotsb": "⋯", "\\cdots": "⋯", "\\lvert": "|",
            "\\rvert": "|", "\\vert": "|", "\\lVert": "‖", "\\rVert": "‖", "\\colon": ":"}


def _combining(body: str) -> str:
    """\\bar{x}, \\overline{AB}, \\vec{v}, \\hat{x}, \\overleftrightarrow{OP}: each character (spaces aside) followed by
    the combining mark unicodeit has for the command."""
    import unicodedata

    from unicodeit.data import COMBININGMARKS

    marks = dict(COMBININGMARKS)
    marks.update({k: v for k, v in _unicode_commands().items() if len(v) == 1 and unicodedata.combining(v)})
    for cmd in sorted(marks, key=len, reverse=True):
        body = re.sub(re.escape(cmd) + r"\s*\{([^{}]*)\}",
                      lambda k, _m=marks[cmd]: "".join(c + _m if not c.isspace() else c for c in k.group(1)), body)
    return body


def _math_to_unicode(body: str) -> str:
    """One math segment as a Unicode writer types it: operator names as words, fractions a/b, √, x², ≤ ..."""
    table = _unicode_commands()
    body = _unwrap(body)
    body = re.sub(r"\\sqrt\s*\[\s*([34])\s*\]", lambda k: "∛" if k.group(1) == "3" else "∜", body)
    body = re.sub(r"\\sqrt\s*\[([^\]]*)\]\s*\{(" + _ARG + r")\}", r"(\2)^(1/\1)", body)
    body = re.sub(r"(?:\\sqrt|([∛∜]))\s*\{(" + _ARG + r")\}", lambda k: (k.group(1) or "√") + (
        "(" + k.group(2) + ")" if len(k.group(2)) > 2 else k.group(2)), body)
    body = _combining(_frac_to_slash(body))

    def cmd(k: re.Match) -> str:
        name = k.group(1)
        if name in FUNCTION_NAMES:  # "\\gcd(a, b)" -> "gcd(a, b)", "\\log x" -> "log x", "\\sin\\theta" -> "sin θ"
            nxt = body[k.end():k.end() + 1] or " "
            return _op_name(name) + (k.group(2) or ("" if re.match(r"[\s(\[_^{]", nxt) else " "))
        return table.get("\\" + name, "\\" + name) + k.group(2)

    body = re.sub(r"\\([A-Za-z]+)(\s?)", cmd, body)
    for _ in range(3):  # grouping braces that are no command's argument: {n}_{{i}} -> n_{i}, {~m} -> m
        body = re.sub(r"(?<![\^_A-Za-z\\])\{\s*~?([^{}]*)(?<!\\)\}", r"\1", body)
    for _ in range(3):  # innermost scripts first: 2^{\\log_{4} T}
        body = re.sub(r"([\^_])(?:\{([^{}]*)\}|([A-Za-z0-9]))", _script, body)
    return body.replace("\\{", "{").replace("\\}", "}").replace("\\%", "%")


def unicode_math(p: str) -> str:
    """Math segments written in Unicode (unicodeit's symbols, whole commands only; x², √, ≤, ×, π, ₁),
    fractions a/b, operator names as words, `$` delimiters dropped; `\\$` and `\\%` outside math as `$`, `%`."""
    q = p.replace("\\$", _DOLLAR)
    q = _ENV.sub(lambda m: _math_to_unicode(m.group(2).replace("&", " ").replace("\\\\", "\n")), q)

    def seg(m: re.Match) -> str:
        body = next(g for g in m.groups() if g is not None)
        return m.group(0) if _currency(body) else _math_to_unicode(body)

    q = _MATH_SEG.sub(seg, q)
    return q.replace(_DOLLAR, "$").replace("\\%", "%")


def plain_text_math(p: str) -> str:
    """The whole text through pylatexenc's latex2text, after the rewrites it gets wrong are made first: a bare
    `%` is a per cent sign (not a comment), \\frac{a+1}{b} -> (a+1)/b (latex2text writes a+1/b), \\binom ->
    C(a, b) (it writes ab), \\pmod{n} -> (mod n) (it drops it), multi-character scripts ^{n+1} -> ^(n+1)."""
    from pylatexenc.latex2text import LatexNodes2Text

    q = re.sub(r"\\[dt]frac", r"\\frac", p.replace("\\$", _DOLLAR))  # latex2text drops \\dfrac / \\tfrac
    q = re.sub(r"(?<!\\)%", r"\\%", q)

    def seg(m: re.Match) -> str:
        body = next(g for g in m.groups() if g is not None)
        if _currency(body):
            return m.group(0).replace("$", _DOLLAR)
        body = re.sub(r"\\sqrt\s*\[\s*([34])\s*\]", lambda k: "∛" if k.group(1) == "3" else "∜", body)
        body = re.sub(r"\\sqrt\s*\[([^\]]*)\]\s*\{(" + _ARG + r")\}", r"(\2)^(1/\1)", body)
        body = _frac_to_slash(_unwrap(body))
        # latex2text drops \\gcd, \\lcm, \\det, \\mod, \\bmod, \\triangle, \\neg ... (writes nothing): spell them out
        body = re.sub(r"\\(" + "|".join(sorted(FUNCTION_NAMES, key=len, reverse=True)) + r")(?![A-Za-z])(\s?)",
                      lambda k: _op_name(k.group(1)) + (k.group(2) or ("" if k.group(1)[-1:].isalpha() and
                                                                         re.match(r"[\s(\[_^{]", body[k.end():k.end() + 1] or " ") else " ")), body)
        body = re.sub(r"\\(?:triangle|neg|choose|over)(?![A-Za-z])",
                      lambda k: {"\\triangle": "△", "\\neg": "¬", "\\choose": " choose ", "\\over": "/"}[k.group(0)], body)
        for _ in range(3):  # innermost first: 2^{\\log_{4} T} -> 2^(\\log_4 T)
            body = re.sub(r"([\^_])\{([^{}]*)\}", lambda k: k.group(1) + (k.group(2) if len(k.group(2)) < 2
                                                                           else f"({k.group(2)})"), body)
        return "$" + body + "$"

    q = _MATH_SEG.sub(seg, q)
    try:
        out = LatexNodes2Text(math_mode="text").latex_to_text(q)
    except Exception:  # pylatexenc gives up on some malformed input: keep the text as it is
        out = q
    return out.replace(_DOLLAR, "$")


def latex_variant(p: str, rng: random.Random) -> str:
    """Presentation-only LaTeX edits: fraction/relation aliases, \\left \\right, spacing, delimiters, braces."""
    q = p.replace("\\frac", rng.choice(["\\dfrac", "\\tfrac"]))
    q = re.sub(r"\\le(?![A-Za-z])", r"\\leqslant", q)
    q = re.sub(r"\\ge(?![A-Za-z])", r"\\geqslant", q)
    q = re.sub(r"\^(\w)", r"^{\1}", q)
    q = re.sub(r"(?<!\\left)\((?=[^()$]{1,30}\)[^$]*\$)", r"\\left(", q, count=1)
    q = q.replace(")$", r"\right)$", 1) if "\\left(" in q else q
    q = q.replace(" = ", rng.choice([r" \, = \, ", r"\;=\;", " = "]))
    q = re.sub(r"\$\$(.+?)\$\$", r"\\[\1\\]", q, flags=re.S)
    return re.sub(r"\$(.+?)\$", r"\\(\1\\)", q, flags=re.S)


def sentences(p: str) -> list[str]:
    """Sentences split at '. ', '? ', '! ' outside math ($...$), keeping their punctuation."""
    out, start, depth = [], 0, 0
    for i, ch in enumerate(p):
        if ch == "$":
            depth ^= 1
        elif ch in ".?!" and not depth and i + 1 < len(p) and p[i + 1] in " \n" and i - start > 15:
            out.append(p[start:i + 1].strip())
            start = i + 1
    if p[start:].strip():
        out.append(p[start:].strip())
    return out


def reordered(p: str, rng: random.Random) -> str | None:
    """The sentences in another order (last one first, or two swapped); None when there are fewer than 2."""
    s = sentences(p)
    if len(s) < 2:
        return None
    if rng.random() < 0.5:
        s = [s[-1]] + s[:-1]
    else:
        i, j = rng.sample(range(len(s)), 2)
        s[i], s[j] = s[j], s[i]
    return " ".join(s)


def third_person(v: str) -> str:
    """"find the ..." -> "finds the ..." (the request's first verb in the third person)."""
    w, _, rest = v.partition(" ")
    w3 = w[:-1] + "ies" if w.endswith("y") and w[-2:-1] not in "aeiou" else w + ("es" if w.endswith(("s", "sh", "ch", "x")) else "s")
    return f"{w3} {rest}".strip()


def base_form(v: str) -> str:
    """"matches a word ..." -> "match a word ..." (a statement already in the third person: "... that matches")."""
    w, _, rest = v.partition(" ")
    w0 = (w[:-3] + "y" if w.endswith("ies") else w[:-2] if w.endswith(("ches", "shes", "sses", "xes", "zes"))
          else w[:-1] if w.endswith("s") and not w.endswith("ss") else w)
    return f"{w0} {rest}".strip()


def code_request(statement: str, rng: random.Random, requests: tuple[str, ...] = CODE_REQUESTS,
                 chats: tuple[str, ...] = CHAT_TEMPLATES) -> str:
    """An MBPP statement behind another request template, in a chat template half of the time ("Write a
    function that matches ..." is in the third person already: "matches", not "matcheses")."""
    m = _REQUEST.match(statement.strip())
    v = _REQUEST.sub("", statement.strip()).rstrip(". ")
    third = bool(m) and m.group(0).split()[-1].lower() in ("that", "which")
    v, v3 = (base_form(v), v) if third else (v, third_person(v))
    text = rng.choice(requests).format(v=v, v3=v3)
    return rng.choice(chats).format(p=text) if rng.random() < 0.5 else text


def renamed_humaneval(it: BenchmarkItem, rng: random.Random, names: tuple[str, ...] = NEW_NAMES,
                      chats: tuple[str, ...] = CHAT_TEMPLATES) -> str:
    """HumanEval prompt with the entry point renamed everywhere and the docstring re-indented."""
    name = str(it.meta.get("entry_point") or "")
    new = rng.choice(names)
    # an identifier (has_close_elements) is renamed everywhere; a plain word (digits, median) only where it is the
    # function (def line and calls): renaming "the odd digits" in the prose would be another text
    tail = "" if "_" in name or any(c.isdigit() or c.isupper() for c in name[1:]) else r"(?=\s*\()"
    q = re.sub(rf"\b{re.escape(name)}\b{tail}", new, it.problem) if name else it.problem
    indent = rng.choice(["\t", "  ", "      "])
    q = "\n".join(re.sub(r"^( {4})+", lambda m: indent * (len(m.group(0)) // 4), ln) for ln in q.splitlines())
    text = f"Complete the following function.\n```python\n{q}\n```"
    return rng.choice(chats).format(p=text) if rng.random() < 0.5 else text


def change_number(p: str, rng: random.Random) -> str | None:
    """The item with one of its numbers changed (another problem); None when it has no number."""
    nums = list(re.finditer(r"(?<![\w.])\d+(?![\w.])", p))
    if not nums:
        return None
    m = rng.choice(nums)
    return p[:m.start()] + str(int(m.group()) + rng.randint(1, 9)) + p[m.end():]


class Filler:
    """Long clean responses made of real responses from the clean pools (copies of benchmark items removed)."""

    def __init__(self, texts: list[str], rng: random.Random):
        self.texts, self.rng = texts, rng

    def words(self, lo: int, hi: int) -> str:
        target, parts, n = self.rng.randint(lo, hi), [], 0
        while n < target:
            parts.append(self.rng.choice(self.texts))
            n += len(parts[-1].split())
        return "\n\n".join(parts)


def setup(shared: Path, names: tuple[str, ...], rng: random.Random
          ) -> tuple[dict[str, list[BenchmarkItem]], CopyChecker, dict[str, list[dict]], Filler]:
    """What every forms builder starts from: the benchmarks, a copy checker over their items, the clean pools and
    a filler of long clean responses from them."""
    benchmarks = load_benchmarks(names, shared / "benchmarks")
    is_copy = CopyChecker([normalize(it.problem) for items in benchmarks.values() for it in items])
    pools = _pool_rows(shared)
    clean_resp = [r["response"] for rows in pools.values() for r in rows
                  if r.get("response") and len(r["response"]) > 200 and not is_copy(normalize(r["response"]))]
    return benchmarks, is_copy, pools, Filler(clean_resp, rng)


def _pool_rows(shared: Path) -> dict[str, list[dict]]:
    return {pool: [r for r in iter_input_rows([InputSpec(str(shared / "sft_sources" / f"{pool}.jsonl.gz"))])
                   if isinstance(r, dict)] for pool in NEGATIVE_POOLS}


def build_forms_set(shared_data: str | Path, *, per_benchmark: int = 40, per_pool: int = 150, seed: int = 7
                    ) -> tuple[dict[str, list[BenchmarkItem]], list[LabelledExample]]:
    """(benchmarks to index, labelled examples with `.split`); deterministic for a given seed."""
    shared = Path(shared_data)
    rng = random.Random(seed)
    benchmarks, is_copy, pools, filler = setup(shared, LABEL_BENCHMARKS, rng)
    out: list[LabelledExample] = []

    def add(text: str | None, label: int, kind: str, key: str, side: str = "prompt", bench: str = "",
            item: str = "") -> None:
        if text:
            ex = LabelledExample(text, label, kind, side, bench, item)
            ex.split = split_of(key)  # type: ignore[attr-defined]
            ex.key = key  # type: ignore[attr-defined]  # item or pool row (not in the digest): forms2 leaves these out
            out.append(ex)

    for name, items in benchmarks.items():
        k = 2 * per_benchmark if name in ("mbpp", "humaneval") else per_benchmark  # short_code's only sources
        for it in rng.sample(items, min(k, len(items))):
            p, key = it.problem.strip(), f"{name}/{it.id}"

            def pos(text: str | None, kind: str, side: str = "prompt", _k: str = key, _n: str = name,
                    _i: str = it.id) -> None:
                add(text, 1, kind, _k, side, _n, _i)

            n_words = len(normalize(p).split())
            if name == "mbpp":
                pos(code_request(p, rng), "short_code")
            elif name == "humaneval":
                pos(renamed_humaneval(it, rng), "short_code")
            else:
                pos(unicode_math(p), "unicode_math")
                pos(plain_text_math(p), "plain_text_math")
                pos(latex_variant(p, rng), "latex_variant")
                pos(reordered(p, rng), "reordered")
                changed = change_number(p, rng)
                if changed:
                    add(rng.choice([unicode_math, plain_text_math])(changed), 0, "number_changed", key)
            pos(rng.choice(CHAT_TEMPLATES).format(p=p), "chat_template")
            pos(filler.words(800, 1500) + "\n\n" + rng.choice(QUOTES).format(p=p) + "\n\n" + filler.words(800, 1500),
                "mid_response", side="response")
            if n_words >= 30:
                words = p.split(" ")
                pos(" ".join(words[int(len(words) * 0.4):]), "suffix_copy")
    short = [(name, it) for name, items in benchmarks.items() for it in items if len(normalize(it.problem).split()) <= 12]
    for name, it in rng.sample(short, min(3 * per_benchmark, len(short))):  # one-line problems, all benchmarks
        lead = rng.choice(CHAT_TEMPLATES) if rng.random() < 0.5 else rng.choice(LEAD_INS)
        text = lead.format(p=unicode_math(it.problem) if rng.random() < 0.3 else it.problem.strip())
        add(text, 1, "one_line", f"{name}/{it.id}", "prompt", name, it.id)

    test_mbpp = {normalize(it.problem) for it in benchmarks["mbpp"]}
    other = [r for r in load_benchmarks(["mbpp_all"], shared / "benchmarks", {"mbpp_all": _mbpp_all_spec()})["mbpp_all"]
             if r.meta.get("split") != "test" and normalize(r.problem) not in test_mbpp and not is_copy(normalize(r.problem))]
    for r in rng.sample(other, min(per_pool, len(other))):
        add(code_request(r.problem, rng), 0, "mbpp_other_split", f"mbpp_other/{r.id}")
    for pool, rows in pools.items():
        for r in rng.sample(rows, min(per_pool, len(rows))):
            if is_copy(normalize(r["prompt"])):
                continue
            key = f"{pool}/{r['id']}"
            add(unicode_math(r["prompt"]) if rng.random() < 0.5 else plain_text_math(r["prompt"]), 0, "pool_unicode", key)
            add(rng.choice(CHAT_TEMPLATES).format(p=r["prompt"]), 0, "pool_chat", key)
    for i, s in enumerate(STOCK_ONE_LINERS * 4):
        add(rng.choice(CHAT_TEMPLATES).format(p=s), 0, "stock_one_line", f"stock/{i}")
    for i in range(per_pool):
        add(filler.words(1700, 3000), 0, "clean_longcot", f"longcot/{i}", side="response")
    for i in range(per_pool // 3):
        add(filler.words(9000, 11000), 0, "clean_longcot_10k", f"longcot10k/{i}", side="response")
    return benchmarks, out


def _mbpp_all_spec():
    """All 974 MBPP tasks (the registry's `mbpp` keeps the test split only)."""
    from dataclasses import replace

    from cotforge.curate.core.benchmarks import REGISTRY

    return replace(REGISTRY["mbpp"], name="mbpp_all", local_file="mbpp", local_where={})


def assign_splits(examples: list[LabelledExample]) -> list[LabelledExample]:
    """Tuning / held-out split for the first labelled set (bench/labelled_contamination.py): by item for
    positives, by the text for negatives."""
    for e in examples:
        key = f"{e.benchmark}/{e.item_id}" if e.item_id else "neg/" + hashlib.blake2b(
            e.text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
        e.split = split_of(key)  # type: ignore[attr-defined]
    return examples


def heldout_digest(examples: list[LabelledExample]) -> str:
    """SHA-256 of the held-out examples (text, label, kind, side, benchmark, item), in order."""
    h = hashlib.sha256()
    for e in examples:
        if getattr(e, "split", "") == "heldout":
            h.update(json.dumps([e.text, e.label, e.kind, e.side, e.benchmark, e.item_id]).encode("utf-8", "surrogatepass"))
            h.update(b"\n")
    return h.hexdigest()


def main() -> None:
    from decontam_corpora import SHARED
    from labelled_contamination import build_labelled_set

    _, first = build_labelled_set(SHARED)
    print("first set heldout sha256:", heldout_digest(assign_splits(first)), "examples:", len(first))
    _, ex = build_forms_set(SHARED)
    by: dict[tuple[str, str, int], int] = {}
    for e in ex:
        k = (e.kind, e.split, e.label)  # type: ignore[attr-defined]
        by[k] = by.get(k, 0) + 1
    for k in sorted(by):
        print(k, by[k])
    print("heldout sha256:", heldout_digest(ex), "examples:", len(ex))


if __name__ == "__main__":
    main()
