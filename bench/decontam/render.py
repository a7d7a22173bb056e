"""Renderings of a benchmark item that keep it the same problem (positives of the contamination sets) or
change it (negatives), used by the frozen contamination sets' builders (bench/decontam/forms.py).

- `unicode_math`: LaTeX rendered to Unicode by the `unicodeit` package (x², √, ≤, ×, π, ₁), fractions written
  a/b, `$` delimiters dropped; `plain_text_math`: LaTeX rendered to text by `pylatexenc`'s latex2text (√(3),
  3/4, ·, dropped `$`). Both are faithful: operator names stay words (unicodeit's prefix replacement turned
  `\\log` into `łog`), a bare `%` is no comment, \\frac{a+1}{b} is (a+1)/b; tests/test_decontam_forms.py
  checks them through `python -m bench.decontam.render`.
- `latex_variant`, `reordered`: \\dfrac/\\tfrac, \\left/\\right, spacing, delimiters; sentences in another order.
- `code_request`, `renamed_humaneval`: an MBPP statement behind another request template; HumanEval with the
  function renamed everywhere and a re-indented docstring.
- `change_number`: one number changed (another problem).

    echo '["Find $\\log_2 8$."]' | python -m bench.decontam.render unicode    # JSON list in, JSON list out
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from functools import lru_cache

from cotforge.curate.core.benchmarks import BenchmarkItem

_MATH_SEG = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)
REQUEST_RE = re.compile(r"^\s*Write (?:a |an )?(?:python )?function (?:to|that|for|which) ", re.I)



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


def code_request(statement: str, rng: random.Random, requests: tuple[str, ...], chats: tuple[str, ...]) -> str:
    """An MBPP statement behind another request template, in a chat template half of the time ("Write a
    function that matches ..." is in the third person already: "matches", not "matcheses")."""
    m = REQUEST_RE.match(statement.strip())
    v = REQUEST_RE.sub("", statement.strip()).rstrip(". ")
    third = bool(m) and m.group(0).split()[-1].lower() in ("that", "which")
    v, v3 = (base_form(v), v) if third else (v, third_person(v))
    text = rng.choice(requests).format(v=v, v3=v3)
    return rng.choice(chats).format(p=text) if rng.random() < 0.5 else text


def renamed_humaneval(it: BenchmarkItem, rng: random.Random, names: tuple[str, ...], chats: tuple[str, ...]) -> str:
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


def main() -> None:
    ap = argparse.ArgumentParser(description="Render a JSON list of LaTeX texts (stdin) as a JSON list (stdout).")
    ap.add_argument("form", choices=["unicode", "plain_text"])
    args = ap.parse_args()
    render = unicode_math if args.form == "unicode" else plain_text_math
    json.dump([render(t) for t in json.load(sys.stdin)], sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
