"""Variant generators of the second fresh dedup set (bench/dedup_fresh2.py), with the pools of
bench/dedup_pools2.py. Each takes the problem text and a seeded random.Random and returns the variant, or None
when the problem offers nothing to change. The number edits reuse bench/dedup_variants.py."""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dedup_pools2 import NAMES2, OBJECT_SWAPS2, QUESTION_SWAPS2, SYNONYMS2, WRAPPERS2  # noqa: E402
from dedup_variants import _COMMON_NAMES, number_changed, numbers_swapped, substitute  # noqa: E402

_INLINE = re.compile(r"\$([^$\s]*[A-Za-z\\^_][^$\s]*)\$")  # $x^2$, $\pi$ (no spaces: never "$5 and $")
_BARE_NUM = re.compile(r"(?<![\w$.,\\{^_])(\d+)(?![\w$.,%}])")
_MATH_BODY = re.compile(r"\$([^$]+)\$")


def synonym(
    text: str, rng: random.Random, category: str | None = None, avoid: str | None = None
) -> str | None:
    """One pool synonym substituted (a random category when none is given; not the `avoid` source)."""
    cats = [category] if category else sorted(SYNONYMS2)
    rng.shuffle(cats)
    for c in cats:
        pool = tuple(p for p in SYNONYMS2[c] if p[0] != avoid)
        if (v := substitute(text, pool, rng)) is not None:
            return v
    return None


def two_synonyms(text: str, rng: random.Random) -> str | None:
    """Two different synonym substitutions in one statement (the second must find another source word)."""
    first = synonym(text, rng)
    if first is None:
        return None
    for _ in range(4):
        second = synonym(first, rng)
        if second is not None and second != first:
            return second
    return None


def wrap(text: str, rng: random.Random, side: str) -> str:
    """One of the pool's instructions before or after the problem, with a random separator."""
    w = rng.choice(WRAPPERS2[side])
    sep = rng.choice(["\n\n", "\n", " ", "\n\n\n"])
    return f"{w}{sep}{text.strip()}" if side == "before" else f"{text.rstrip()}{sep}{w}"


def _latex_spacing(body: str, rng: random.Random) -> str:
    """Inside one math body: thin / medium spaces around = and +, or \\left( \\right)."""
    if "(" in body and ")" in body and "\\left" not in body and rng.random() < 0.5:
        return body.replace("(", "\\left(").replace(")", "\\right)")
    return re.sub(
        r"\s*([=+])\s*",
        lambda m: rng.choice([r"\,", r"\;", r"\ "]) + m.group(1) + rng.choice([r"\,", r"\;", " "]),
        body,
    )


def reformat(text: str, rng: random.Random) -> str | None:
    """Presentation only, 2-3 random edits of: LaTeX spacing (\\, \\; \\left \\right) inside $...$, simple $x$
    delimiters dropped, bare numbers put in $...$, whitespace runs / newlines, space before punctuation,
    trailing period dropped or doubled spaces after sentences. None when nothing changed."""
    ops = ["latex", "drop_dollars", "add_dollars", "whitespace", "punct", "period"]
    rng.shuffle(ops)
    t = text
    for op in ops[: rng.choice([2, 3, 3])]:
        if op == "latex":
            t = _MATH_BODY.sub(
                lambda m: "$" + _latex_spacing(m.group(1), rng) + "$", t, count=rng.choice([1, 2, 9])
            )
        elif op == "drop_dollars" and "$" in t:
            t = _INLINE.sub(lambda m: m.group(1), t)
        elif op == "add_dollars" and "$" not in t:
            t = _BARE_NUM.sub(lambda m: f"${m.group(1)}$", t)
        elif op == "whitespace":
            t = re.sub(r"(?<=[.?!:]) ", lambda m: rng.choice(["\n", "  ", " ", "\n\n"]), t)
            t = re.sub(r"\n", lambda m: rng.choice(["\n", " ", "\n "]), t) if rng.random() < 0.5 else t
        elif op == "punct":
            t = re.sub(r"([a-z]),\s", lambda m: m.group(1) + rng.choice([" , ", ",  ", ",\n"]), t)
            t = re.sub(r"\?$", " ?", t.rstrip())
        elif op == "period":
            t = t.rstrip().removesuffix(".") if t.rstrip().endswith(".") else t.rstrip() + " ."
    return t if t.strip() != text.strip() else None


def name_changed(text: str, rng: random.Random) -> str | None:
    """Every occurrence of one common first name replaced by a name from NAMES2."""
    found = sorted({w for w in re.findall(r"\b[A-Z][a-z]+\b", text) if w in _COMMON_NAMES})
    if not found:
        return None
    old = rng.choice(found)
    return re.sub(rf"\b{old}\b", rng.choice([n for n in NAMES2 if n not in text]), text)


def _then(
    first: Callable[[str, random.Random], str | None], second: Callable[[str, random.Random], str | None]
) -> Callable[[str, random.Random], str | None]:
    def both(t: str, r: random.Random) -> str | None:
        v = first(t, r)
        return second(v, r) if v is not None else None

    return both


def _question(t: str, r: random.Random) -> str | None:
    return substitute(t, QUESTION_SWAPS2, r, both_ways=True)


def _object(t: str, r: random.Random) -> str | None:
    return substitute(t, OBJECT_SWAPS2, r, both_ways=True)


def _wrapper_any(t: str, r: random.Random) -> str:
    return wrap(t, r, r.choice(["before", "after"]))


POSITIVE_KINDS2 = (
    "synonym_verb",
    "synonym_noun",
    "synonym_quantifier",
    "synonym_adjective",
    "wrapper_before",
    "wrapper_after",
    "reformat",
    "combo_reformat_synonym",
    "combo_wrapper_synonym",
    "combo_two_synonyms",
)
NEGATIVE_KINDS2 = (
    "number_changed",
    "numbers_swapped",
    "object_changed",
    "question_changed",
    "name_changed",
    "combo_question_synonym",
    "combo_object_wrapper",
    "combo_number_reformat",
)
# Kinds whose edit is a number: only math bases (a changed constraint or example in a code statement is not
# clearly another problem).
MATH_ONLY = ("number_changed", "numbers_swapped", "combo_number_reformat", "name_changed")

VARIANTS2: dict[str, Callable[[str, random.Random], str | None]] = {
    **{f"synonym_{c}": (lambda t, r, c=c: synonym(t, r, c)) for c in SYNONYMS2},
    "wrapper_before": lambda t, r: wrap(t, r, "before"),
    "wrapper_after": lambda t, r: wrap(t, r, "after"),
    "reformat": reformat,
    "combo_reformat_synonym": _then(synonym, lambda v, r: reformat(v, r) or v + "\n"),
    "combo_wrapper_synonym": _then(synonym, _wrapper_any),
    "combo_two_synonyms": two_synonyms,
    "number_changed": number_changed,
    "numbers_swapped": numbers_swapped,
    "object_changed": _object,
    "question_changed": _question,
    "name_changed": name_changed,
    "combo_question_synonym": _then(_question, synonym),
    "combo_object_wrapper": _then(_object, _wrapper_any),
    "combo_number_reformat": _then(number_changed, lambda v, r: reformat(v, r) or v + "\n"),
}
