"""A labelled contamination set built from ../shared/data, for choosing and checking decontam settings (the
frozen set `decontam_first` of bench/frozen.py, split by bench/decontam/forms.py `assign_splits`).

Positives are copies of benchmark items made the ways leaks happen: verbatim, case/whitespace
changes, LaTeX re-spacing and delimiter swaps, wrapped in an instruction (not one of the stock
wrappers that normalisation strips), truncated to the first 60% of a long problem, code prompts
with re-indented docstrings, light rewording (a few function words changed, numbers kept), and
model responses that restate the problem (response side).
Negatives are problems from training pools that are not copies of a benchmark item (checked by a
transparent rule, `CopyChecker`), plus stock-phrase hard negatives: clean problems with "find the
remainder when ... is divided by 1000", "return the answer modulo 10^9 + 7", or a common function
signature added. Templated MATH-train variants of MATH-500 problems (same sentence, other numbers)
stay negatives: with numbers kept they are different problems.
"""

from __future__ import annotations

import logging
import random
import re
from dataclasses import dataclass
from pathlib import Path

from cotforge.curate.core.benchmarks import BenchmarkItem, load_benchmarks
from cotforge.curate.io.inputs import iter_input_rows
from cotforge.curate.io.readers import InputSpec

log = logging.getLogger(__name__)


def normalize(text: str | None) -> str:
    """The builders' own fixed normalisation (NFKC, lower case, alphanumeric words), independent of
    `cotforge.curate.text.normalize`, so the labelled sets (and their held-out digests) do not change
    when the matcher's normaliser does."""
    import unicodedata

    return " ".join(re.sub(r"[\W_]+", " ", unicodedata.normalize("NFKC", text or "").lower()).split())

LABEL_BENCHMARKS = ("aime2024", "aime2025", "hmmt_feb", "amc2023", "math500", "minerva_math", "olympiadbench",
                    "gsm8k", "humaneval", "mbpp")
# (pool file, side) -> negatives; none of these pools is a copy of the benchmarks above except the
# few rows `is_copy` removes (DeepScaleR AIME holds some MATH-500 problems, see MANIFEST.md).
NEGATIVE_POOLS = ("gsm8k_train_human", "deepscaler_math_train", "deepscaler_aime_1983_2023",
                  "deepcoder_leetcode_train", "marco_o1_cot_demo")

WRAPPERS = (
    "You are a helpful tutor. A student asks you the following.\n\n{p}\n\nExplain each step, then give the answer.",
    "Here is a competition question I could not solve:\n{p}\nCan you help me?",
    "### Task\n{p}\n\n### Instructions\nThink carefully and answer at the end.",
)
STOCK_SUFFIXES = (
    "Find the remainder when the answer is divided by 1000.",
    "Return the answer modulo 10^9 + 7.",
    "Find the remainder when $N$ is divided by $1000$.",
    "Express your answer as a common fraction.",
    "The answer can be written as $\\frac{m}{n}$, where $m$ and $n$ are relatively prime positive integers. "
    "Find $m+n$.",
)
STOCK_PREFIXES = (
    "from typing import List\n\n\ndef solve(numbers: List[int]) -> int:\n    \"\"\" ",
    "def solution(nums: List[int], target: int) -> List[int]:\n    ",
    "class Solution:\n    def maxProfit(self, prices: List[int]) -> int:\n        ",
)
REWORD = ((r"\bFind\b", "Determine"), (r"\bWhat is\b", "Compute"), (r"\bthe\b", "this"), (r"\bHow many\b",
          "What number of"), (r"\bLet\b", "Suppose"), (r"\bIf\b", "Suppose that"), (r"\bwhich\b", "that"))


@dataclass
class LabelledExample:
    """One labelled text: `label` 1 = contains a benchmark item; `kind` names the variant or pool."""

    text: str
    label: int
    kind: str
    side: str = "prompt"  # which side of a row the text is (response: a model output restating the problem)
    benchmark: str = ""
    item_id: str = ""


class CopyChecker:
    """Transparent copy rule for cleaning negatives: a pool text equal to a benchmark item after
    normalisation, containing one (items of >= 6 words), or being >= 60% of one as a substring."""

    K = 6

    def __init__(self, item_norms: list[str]):
        self.items = item_norms
        self.exact = set(item_norms)
        self.prefix: dict[str, list[int]] = {}
        self.grams: dict[str, list[int]] = {}
        for i, t in enumerate(item_norms):
            w = t.split(" ")
            if len(w) >= self.K:
                self.prefix.setdefault(" ".join(w[: self.K]), []).append(i)
                for j in range(len(w) - self.K + 1):
                    self.grams.setdefault(" ".join(w[j:j + self.K]), []).append(i)

    def __call__(self, row_norm: str) -> bool:
        if not row_norm:
            return False
        if row_norm in self.exact:
            return True
        w = row_norm.split(" ")
        if len(w) < self.K:
            return False
        padded = f" {row_norm} "
        for j in range(len(w) - self.K + 1):
            for i in self.prefix.get(" ".join(w[j:j + self.K]), ()):
                if f" {self.items[i]} " in padded:
                    return True
        for i in self.grams.get(" ".join(w[: self.K]), ()):
            if len(row_norm) >= 0.6 * len(self.items[i]) and padded in f" {self.items[i]} ":
                return True
        return False


# --------------------------------------------------------------------------- positive variants


def case_ws(p: str, rng: random.Random) -> str:
    """Random case flips of whole words and changed whitespace between them."""
    out = []
    for w in p.split(" "):
        r = rng.random()
        out.append(w.upper() if r < 0.1 else w.capitalize() if r < 0.2 else w.lower() if r < 0.3 else w)
    seps = [" ", "  ", "\n", " \t ", "   "]
    return "\n " + "".join(w + rng.choice(seps) for w in out).rstrip() + "  \n"


def latex_respace(p: str, rng: random.Random) -> str:
    """Re-space LaTeX and swap delimiters: $x$ -> \\( x \\), \\frac{a}{b} -> \\dfrac {a} {b}, braces padded."""
    q = re.sub(r"\$\$(.+?)\$\$", lambda m: f"\\[ {m.group(1)} \\]", p, flags=re.S)
    q = re.sub(r"\$(.+?)\$", lambda m: f"\\( {m.group(1)} \\)" if rng.random() < 0.5 else f"$ {m.group(1)} $", q,
               flags=re.S)
    q = q.replace("\\frac", "\\dfrac").replace("}{", "} {").replace("^{", "^ {").replace("(", "\\left( ", 1)
    q = q.replace("\\left( ", "\\left(", 1) if "\\right)" in q else q.replace("\\left( ", "( ", 1)
    return q.replace(",", " ,").replace("=", " = ")


def wrap(p: str, rng: random.Random) -> str:
    return rng.choice(WRAPPERS).format(p=p)


def truncate60(p: str) -> str:
    words = p.split(" ")
    return " ".join(words[: max(1, int(len(words) * 0.6))])


def reindent_code(p: str, rng: random.Random) -> str:
    """Re-indent every line (tabs or 2 spaces instead of 4), and put the prompt in a code fence."""
    indent = rng.choice(["\t", "  ", "      "])
    lines = [re.sub(r"^( {4})+", lambda m: indent * (len(m.group(0)) // 4), ln) for ln in p.splitlines()]
    return "Complete this function:\n```python\n" + "\n".join(lines) + "\n```"


def docstring_code(p: str, rng: random.Random) -> str:
    """An MBPP-style text problem put into a re-indented docstring of a stub."""
    indent = rng.choice(["\t", "  "])
    return f"```python\ndef f(*args):\n{indent}\"\"\"\n{indent}{p}\n{indent}\"\"\"\n```"


def reword(p: str, rng: random.Random) -> str:
    """Two or three function-word substitutions (numbers and content words kept)."""
    q = p
    subs = rng.sample(REWORD, k=min(len(REWORD), 3))
    for pat, rep in subs:
        q = re.sub(pat, rep, q, count=1)
    return q


def restating_response(p: str, answer: str | None, rng: random.Random) -> str:
    """A model-style response that restates the problem before solving it."""
    return (f"<think>\nOkay, let me read the problem again. {p}\nSo we need to work this out carefully. "
            f"First I set up the quantities and then simplify.\n</think>\nThe answer is {answer or 'unknown'}.")


def positives(benchmarks: dict[str, list[BenchmarkItem]], per_benchmark: int, rng: random.Random) -> list[LabelledExample]:
    """Variant copies of a sample of items from every benchmark."""
    out: list[LabelledExample] = []
    for name, items in benchmarks.items():
        sample = rng.sample(items, min(per_benchmark, len(items)))
        code = name in ("humaneval", "mbpp")
        for it in sample:
            p = it.problem.strip()

            def add(text: str, kind: str, side: str = "prompt", _it: BenchmarkItem = it, _n: str = name) -> None:
                out.append(LabelledExample(text, 1, kind, side, _n, _it.id))

            add(p, "verbatim")
            add(case_ws(p, rng), "case_whitespace")
            add(wrap(p, rng), "wrapped")
            add(restating_response(p, it.answer, rng), "response_restates", side="response")
            if len(p.split()) >= 30:
                add(truncate60(p), "truncated60")
            if code:
                add(reindent_code(p, rng) if name == "humaneval" else docstring_code(p, rng), "code_reindent")
            else:
                add(latex_respace(p, rng), "latex_respace")
                if len(normalize(p).split()) >= 12:
                    add(reword(p, rng), "reworded")
    return out


# --------------------------------------------------------------------------- negatives


def negatives(shared_data: Path, benchmarks: dict[str, list[BenchmarkItem]], per_pool: int,
              rng: random.Random) -> list[LabelledExample]:
    """Clean training-pool prompts and responses, plus stock-phrase hard negatives."""
    is_copy = CopyChecker([normalize(it.problem) for items in benchmarks.values() for it in items])
    out: list[LabelledExample] = []
    dropped = 0
    for pool in NEGATIVE_POOLS:
        path = shared_data / "sft_sources" / f"{pool}.jsonl.gz"
        rows = [r for r in iter_input_rows([InputSpec(str(path))]) if isinstance(r, dict)]
        sample = rng.sample(rows, min(per_pool, len(rows)))
        for r in sample:
            if is_copy(normalize(r["prompt"])):
                dropped += 1
                continue
            out.append(LabelledExample(r["prompt"], 0, f"pool:{pool}"))
            resp = r.get("response")
            if resp and rng.random() < 0.5 and not is_copy(normalize(resp)):
                out.append(LabelledExample(resp, 0, f"pool_response:{pool}", side="response"))
        clean = [e.text for e in out if e.kind == f"pool:{pool}"]
        for t in rng.sample(clean, min(len(clean), per_pool // 4)):
            if pool == "deepcoder_leetcode_train":
                out.append(LabelledExample(rng.choice(STOCK_PREFIXES) + t, 0, "stock_signature"))
            else:
                out.append(LabelledExample(t.rstrip() + " " + rng.choice(STOCK_SUFFIXES), 0, "stock_phrase"))
    log.info("labelled set: %d pool rows dropped as copies of benchmark items", dropped)
    return out


def build_labelled_set(shared_data: str | Path, *, per_benchmark: int = 40, per_pool: int = 600, seed: int = 0,
                       benchmark_names: tuple[str, ...] = LABEL_BENCHMARKS
                       ) -> tuple[dict[str, list[BenchmarkItem]], list[LabelledExample]]:
    """(benchmarks to index, labelled examples); deterministic for a given seed."""
    shared = Path(shared_data)
    rng = random.Random(seed)
    benchmarks = load_benchmarks(benchmark_names, shared / "benchmarks")
    ex = positives(benchmarks, per_benchmark, rng) + negatives(shared, benchmarks, per_pool, rng)
    return benchmarks, ex
