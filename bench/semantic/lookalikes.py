"""Hand-written look-alike pairs of the classes the tier's extra dedup merges got wrong on real problems
(docs/semantic.md, round 5), for the tuning part only: each pair is a real training problem from
../shared/data and the same problem with one condition added or swapped (`clause_added`), another question
asked over the same story and numbers (`other_question`), or a formula with a term added or dropped
(`term_added`). Three pairs are the real pairs found in that reading (both texts real). No held-out item is used: no text of a pair may be
a base problem or a text of the held-out part of either set (`sets.build_dedup` / `build_decontam`; checked
when the set is built).

    python -m bench.semantic.lookalikes     # print the pairs and the part of each base problem
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

from bench.semantic.sets import DedupPair, build_decontam, build_dedup

CLASSES = ("clause_added", "other_question", "term_added")
LC, MATH, GSM, MARCO = ("deepcoder_leetcode_train.jsonl.gz", "deepscaler_math_train.jsonl.gz",
                        "gsm8k_train_human.jsonl.gz", "marco_o1_cot_demo.jsonl.gz")

# (class, file of the base problem, a substring that finds it, then either ("real", file, substring) for a second
# real problem, or (old, new) replacements that make the look-alike)
SPECS: tuple[tuple, ...] = (
    ("clause_added", LC, "return the researcher's h-index.\nAccording", ("real", LC, "sorted in ascending order, return the researcher")),
    ("clause_added", LC, "The digits are stored in reverse order", ("real", LC, "The most significant digit comes first")),
    ("clause_added", LC, "find the subarray with the largest sum", ("Given an integer array nums,", "Given an integer array nums sorted in non-decreasing order,")),
    ("clause_added", LC, "strictly smaller and a strictly greater element", ("appear in nums.", "appear in nums. All the elements of nums are unique.")),
    ("clause_added", LC, "two integers target and start, find an index i", ("Given an integer array nums (0-indexed)", "Given an integer array nums (0-indexed) sorted in descending order")),
    ("clause_added", MATH, "has three positive integer roots. What is the smallest", ("three positive integer roots", "three distinct positive integer roots")),
    ("clause_added", MATH, "such that $\\frac{n+18}{n}$ is an integer", ("is an integer?", "is an integer and $n$ is a perfect square?")),
    ("clause_added", GSM, "Nancy has a bag containing 22 tortilla chips", ("keeping the rest for herself.", "keeping the rest for herself. Her brother returns half of his chips.")),
    ("clause_added", MATH, "positive integer that satisfies the congruence $4x", ("smallest positive integer that", "smallest positive integer with distinct digits that")),
    ("other_question", MATH, "second number in the row of Pascal's triangle that has 43", ("real", MATH, "How many rows of Pascal's Triangle contain the number $43$")),
    ("other_question", MATH, "What is the sum of the integers from $-30$ to $50$", ("What is the sum of the integers", "How many integers are there")),
    ("other_question", GSM, "A box is 8 inches in height, 10 inches in width", ("How many building blocks can fit into the box?", "What is the volume of the box in cubic inches?")),
    ("other_question", GSM, "Yolanda scored 345 points over the entire season", ("How many three-point baskets did she average a game?", "How many points did she average per game?")),
    ("other_question", GSM, "Paula bought 3 fewer cookies than Paul", ("How many cookies do they have altogether?", "How many cookies did Paula buy?")),
    ("other_question", GSM, "Arwen was able to get 20 tulips", ("How many tulips were they able to get in total?", "How many tulips was Elrond able to get?")),
    ("other_question", MATH, "has three positive integer roots. What is the smallest", ("What is the smallest possible value of $a$?", "How many such polynomials are there?")),
    ("other_question", MATH, "What is the largest value of $x$, if", ("What is the largest value of $x$, if", "How many real values of $x$ are there, if")),
    ("term_added", MATH, "What is $\\left(\\frac{7}{8}\\right)^3 \\cdot \\left(\\frac{7}{8}\\right)^{-3}$?", ("real", MARCO, "\\left(\\frac{2}{3}\\right)^2 \\cdot \\left(\\frac{2}{3}\\right)^{-2}")),
    ("term_added", MATH, "sum of the squares of the coefficients of $4(x^4", ("$4(x^4 + 3x^2 + 1)$", "$4(x^4 + 3x^2 + 1) + x$")),
    ("term_added", MATH, "$\\frac{x}{5} + \\frac{1}{5x} = \\frac{1}{2}$", ("\\frac{1}{5x} =", "\\frac{1}{5x} + \\frac{x}{5} =")),
    ("term_added", MATH, "\\frac{1}{a+b}+\\frac{1}{a+c}+\\frac{1}{b+c}", ("+\\frac{1}{b+c}\\right)", "\\right)")),
    ("term_added", MATH, "congruence $13(3x-2)\\equiv 26\\pmod 8$", ("13(3x-2)\\equiv", "13(3x-2)+x\\equiv")),
)


@cache
def _problems(path: Path) -> tuple[str, ...]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return tuple(json.loads(line).get("problem") or "" for line in fh if line.strip())


def _find(shared: Path, name: str, needle: str) -> str:
    for p in _problems(shared / "sft_sources" / name):
        if needle in p:
            return p
    raise ValueError(f"{name}: no problem holds {needle!r}")


def build_lookalikes(shared: Path) -> list[DedupPair]:
    """The pairs of SPECS as dedup look-alikes of the tuning part (kind = the class)."""
    held = {t for p in build_dedup(shared) if p.part == "held" for t in (p.a, p.b)}
    held |= {r.prompt for r in build_decontam(shared) if r.part == "held"}
    out = []
    for kind, name, needle, edit in SPECS:
        a = _find(shared, name, needle)
        if edit[0] == "real":
            b = _find(shared, edit[1], edit[2])
        else:
            assert edit[0] in a, (needle, edit[0])
            b = a.replace(edit[0], edit[1], 1)
        if a in held or b in held:
            raise ValueError(f"{name}: {needle!r} is in the held-out part; the look-alikes stay in the tuning part")
        out.append(DedupPair(a, b, kind, False, "tune"))
    return out


def main() -> None:
    from bench.paths import SHARED

    for p in build_lookalikes(SHARED):
        print(f"[{p.kind}] {p.a[:150]!r}\n    -> {p.b[:150]!r}")


if __name__ == "__main__":
    main()
