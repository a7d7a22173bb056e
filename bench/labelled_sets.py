"""A labelled near-duplicate problem set built from ../shared/data, for choosing and checking dedup defaults.

Positives (same problem): MATH-500 items paired with their MATH test-set copy (matched by identical
solution), and variants generated from real problems that only change presentation (instruction
wrappers, LaTeX delimiters/spacing, whitespace/case) or make a small wording edit that keeps every
number (drop an article, swap a verb like "Find" -> "Compute", add a trailing phrase).
Negatives (different problems that look alike): the same real problem with one number changed or two
numbers swapped, and
real pairs of *different* problems mined from MATH test/train, AIME and GSM8K that share most of their
wording (word-3-gram Jaccard >= 0.4) but have different answers.
Everything is seeded, so the set is the same on every run.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cotforge.curate.text.normalize import INSTRUCTION_WRAPPERS, normalize

POSITIVE_KINDS = ("math500_vs_math_test", "wrapper", "latex_whitespace_case", "near_copy")
NEGATIVE_KINDS = ("number_changed", "numbers_swapped", "same_template")

_VERB_SWAPS = (("Find", "Compute"), ("Compute", "Find"), ("Determine", "Find"), ("What is", "Find"),
               ("Calculate", "Compute"), ("How many", "Find how many"))
_TAILS = (" Show your work.", " Give your answer in simplest form.", " Explain your reasoning.",
          " Justify your answer.")
_ARTICLE = re.compile(r"\b(the|a|an) ", re.IGNORECASE)
_NUM = re.compile(r"(?<![\w.])\d+(?![\w.])")


@dataclass(frozen=True)
class LabelledPair:
    """Two problem statements, whether they are the same problem, and how the pair was made."""

    a: str
    b: str
    duplicate: bool
    kind: str


def _jsonl(path: Path) -> Iterator[dict]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def load_problems(shared: Path) -> list[dict]:
    """Real problems with answers: MATH test (5000), MATH train pool, AIME 1983-2023, GSM8K train."""
    out = []
    for r in _jsonl(shared / "benchmarks" / "math_test5000.jsonl.gz"):
        out.append({"problem": r["problem"], "answer": r.get("answer"), "solution": r.get("solution"),
                    "origin": "math_test5000"})
    for name in ("deepscaler_math_train", "deepscaler_aime_1983_2023", "gsm8k_train_human"):
        for r in _jsonl(shared / "sft_sources" / f"{name}.jsonl.gz"):
            out.append({"problem": r["problem"], "answer": r.get("ground_truth"), "solution": None, "origin": name})
    return [p for p in out if p["problem"] and p["answer"]]


# --------------------------------------------------------------------------- generated variants


def wrapper_variant(text: str, rng: random.Random) -> str:
    """Wrap a problem in a stock instruction (random case/spacing), before or after it."""
    w = rng.choice(INSTRUCTION_WRAPPERS)
    w = w.upper() if rng.random() < 0.2 else w
    return f"{w}\n\n{text}" if rng.random() < 0.5 else f"{text}\n{w}"


def latex_variant(text: str, rng: random.Random) -> str:
    """Change LaTeX delimiters/spacing, whitespace and case without touching the words or numbers."""
    t = re.sub(r"\$([^$]+)\$", lambda m: rf"\({m.group(1)}\)", text) if rng.random() < 0.5 else text
    t = t.replace("\\frac", "\\dfrac") if rng.random() < 0.5 else t
    t = t.replace("(", "\\left(").replace(")", "\\right)") if rng.random() < 0.3 else t
    t = re.sub(r" ", lambda m: rng.choice([" ", "  ", "\n", " \t"]), t)
    return t.lower() if rng.random() < 0.3 else t


def near_copy_variant(text: str, rng: random.Random) -> str | None:
    """A small wording edit that keeps the problem: drop an article, swap the verb, or add a tail."""
    edits = []
    if _ARTICLE.search(text):
        edits.append("article")
    if any(text.startswith(a) for a, _ in _VERB_SWAPS):
        edits.append("verb")
    edits.append("tail")
    kind = rng.choice(edits)
    if kind == "article":
        spots = list(_ARTICLE.finditer(text))
        m = rng.choice(spots)
        return text[:m.start()] + text[m.end():]
    if kind == "verb":
        for a, b in _VERB_SWAPS:
            if text.startswith(a):
                return b + text[len(a):]
    return text.rstrip() + rng.choice(_TAILS)


def number_changed_variant(text: str, rng: random.Random) -> str | None:
    """The same wording with one standalone number replaced by a different one (a different problem)."""
    nums = list(_NUM.finditer(text))
    if not nums:
        return None
    m = rng.choice(nums)
    old = int(m.group())
    new = old + rng.choice([1, 2, 3, 5, 10]) if old < 10_000 else old + 1
    return text[:m.start()] + str(new) + text[m.end():]


def numbers_swapped_variant(text: str, rng: random.Random) -> str | None:
    """The same words and numbers with two different numbers swapped ("3n square, 2n cube" -> "2n ..., 3n")."""
    nums = list(_NUM.finditer(text))
    pairs = [(a, b) for i, a in enumerate(nums) for b in nums[i + 1:] if a.group() != b.group()]
    if not pairs:
        return None
    a, b = rng.choice(pairs)
    return text[:a.start()] + b.group() + text[a.end():b.start()] + a.group() + text[b.end():]


# --------------------------------------------------------------------------- mined real pairs


def _answer_key(ans: str) -> str:
    return " ".join(t for t in normalize(str(ans)).split(" ") if t not in ("frac", "dfrac", "tfrac", "text"))


def mine_same_template(problems: list[dict], limit: int, min_jaccard: float = 0.4) -> list[LabelledPair]:
    """Real pairs of different problems (different answers) whose word-3-gram Jaccard >= min_jaccard."""
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=min_jaccard, num_perm=64)
    grams: list[set[str]] = []
    out: list[LabelledPair] = []
    seen: set[tuple[int, int]] = set()
    for i, p in enumerate(problems):
        toks = normalize(p["problem"]).split(" ")
        g = {" ".join(toks[k:k + 3]) for k in range(max(1, len(toks) - 2))}
        grams.append(g)
        mh = MinHash(num_perm=64, seed=7)
        mh.update_batch([s.encode() for s in g])
        for j in lsh.query(mh):
            a, b = problems[j], p
            if (j, i) in seen or normalize(a["problem"]) == normalize(b["problem"]):
                continue
            if _answer_key(a["answer"]) == _answer_key(b["answer"]):
                continue
            if a.get("solution") and a.get("solution") == b.get("solution"):
                continue
            jac = len(grams[j] & g) / max(1, len(grams[j] | g))
            if jac >= min_jaccard:
                seen.add((j, i))
                out.append(LabelledPair(a["problem"], b["problem"], False, "same_template"))
        lsh.insert(i, mh)
    out.sort(key=lambda p: (p.a, p.b))
    return random.Random(0).sample(out, min(limit, len(out)))


def math500_pairs(shared: Path) -> list[LabelledPair]:
    """MATH-500 items and their MATH test copies, matched by identical reference solution."""
    by_sol = {r["solution"].strip(): r for r in _jsonl(shared / "benchmarks" / "math_test5000.jsonl.gz")}
    out = []
    for r in _jsonl(shared / "benchmarks" / "math500.jsonl"):
        twin = by_sol.get((r.get("solution") or "").strip())
        if twin is not None:
            out.append(LabelledPair(r["problem"], twin["problem"], True, "math500_vs_math_test"))
    return out


def build_labelled_pairs(shared: str | Path, n_per_kind: int = 300, seed: int = 0) -> list[LabelledPair]:
    """The full labelled set: `n_per_kind` pairs of each generated kind plus the real ones (seeded)."""
    shared = Path(shared)
    rng = random.Random(seed)
    problems = load_problems(shared)
    base = [p for p in problems if 8 <= len(p["problem"].split()) <= 300]
    pick = rng.sample(base, min(len(base), 4 * n_per_kind))
    pairs: list[LabelledPair] = rng.sample(math500_pairs(shared), min(n_per_kind, 500))
    makers = (("wrapper", True, wrapper_variant), ("latex_whitespace_case", True, latex_variant),
              ("near_copy", True, near_copy_variant), ("number_changed", False, number_changed_variant),
              ("numbers_swapped", False, numbers_swapped_variant))
    for kind, dup, make in makers:
        made = 0
        for p in pick:
            if made >= n_per_kind:
                break
            v = make(p["problem"], rng)
            if v and v != p["problem"]:
                pairs.append(LabelledPair(p["problem"], v, dup, kind))
                made += 1
        rng.shuffle(pick)
    pairs.extend(mine_same_template(problems, n_per_kind))
    return pairs
