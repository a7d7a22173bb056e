"""Variant generators of the generated dedup pairs: text edits that keep a problem (synonyms, wrappers,
reformatting) or change it (numbers, names, variables, question words, objects).

Two families, each used by the frozen sets listed in bench/frozen.py: `make_variant` (the labelled set's
tune / held parts and the fresh set: one edit per kind, plus combinations) and `reworded_variants` (the fresh2
set: LaTeX spacing and `$` reformatting, two synonyms, reworded negatives). Each generator takes the problem
text and a seeded random.Random (pool-specific ones the pool name of bench/dedup/pools.py) and returns the
variant, or None when the problem offers nothing to change."""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from bench.dedup.pools import (
    BUILTIN_WRAPPERS_AT_BUILD,
    NAMES,
    OBJECT_SWAPS,
    QUESTION_SWAPS,
    SYNONYMS,
    WRAPPERS,
)

_MATH = re.compile(r"\$\$.+?\$\$|\$.+?\$|\\\(.+?\\\)|\\\[.+?\\\]|\\begin\{.+?\\end\{[a-z*]+\}", re.DOTALL)
_NUM = re.compile(r"(?<![\w.])\d+(?![\w.])")
_FIXED = re.compile(r"\b(how|so|as|too|in) $", re.IGNORECASE)  # "how many", "in total": fixed phrases, not swapped
_ARTICLE = re.compile(r"\b(the|a|an) ", re.IGNORECASE)
_TAILS = (" Show your work.", " Give your answer in simplest form.", " Explain your reasoning.", " Justify your answer.")
_COMMON_NAMES = frozenset("""James John Robert Michael William David Richard Joseph Thomas Charles Mary Patricia Jennifer
Linda Elizabeth Barbara Susan Jessica Sarah Karen Nancy Lisa Betty Margaret Sandra Ashley Emily Donna Michelle Carol
Amanda Melissa Deborah Stephanie Rebecca Laura Sharon Cynthia Kathleen Amy Angela Anna Brenda Emma Pamela Nicole
Samantha Katherine Christine Rachel Janet Catherine Maria Heather Diane Julie Joyce Victoria Kelly Christina Lauren
Joan Evelyn Olivia Judith Megan Cheryl Martha Andrea Frances Hannah Jacqueline Ann Gloria Jean Kathryn Alice Teresa
Sara Janice Doris Madison Julia Grace Judy Abigail Marie Denise Beverly Amber Theresa Marilyn Danielle Diana Brittany
Natalie Sophia Rose Isabella Alexis Kayla Charlotte Tom Tim Jim Bob Bill Joe Sam Ben Dan Max Jack Mark Paul Steven
Kevin Brian George Edward Ronald Anthony Jason Matthew Gary Timothy Jose Larry Jeffrey Frank Scott Eric Stephen Andrew
Raymond Gregory Joshua Jerry Dennis Walter Patrick Peter Harold Douglas Henry Carl Arthur Ryan Roger Juan Jacob Albert
Nathan Tyler Aaron Adam Zachary Kyle Ethan Noah Liam Mason Logan Lucas Oliver Leo Carlos Luis Mike Alex Chris Tony
Greg Jane Kate Lily Mia Ella Chloe Zoe Lucy Ruby Ivy Nina Tina Jenny Penny Molly Holly Sally Jill Jen Beth Amy
Natalia Weng Betty Julie James Albert Tobias Randy Mrs Mr""".split())


def _prose_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of the text outside LaTeX math regions."""
    spans, pos = [], 0
    for m in _MATH.finditer(text):
        spans.append((pos, m.start()))
        pos = m.end()
    spans.append((pos, len(text)))
    return [(a, b) for a, b in spans if b > a]


def substitute(text: str, pairs: tuple[tuple[str, str], ...], rng: random.Random,
               both_ways: bool = False) -> str | None:
    """Replace one whole-word occurrence (outside math) of a pair's first word by its second, chosen at random."""
    pairs = pairs + tuple((b, a) for a, b in pairs) if both_ways else pairs
    found: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for a, b in pairs:
        pat = re.compile(rf"(?<![\w\\-]){re.escape(a)}(?![\w-])")
        for s, e in _prose_spans(text):
            found.setdefault((a, b), []).extend((m.start(), m.end()) for m in pat.finditer(text, s, e)
                                                if not _FIXED.search(text[max(0, m.start() - 6):m.start()]))
    present = sorted(k for k, v in found.items() if v)
    if not present:
        return None
    a, b = rng.choice(present)  # a random pair first (not a random spot: frequent words would dominate)
    s, e = rng.choice(found[(a, b)])
    return text[:s] + b + text[e:]


def synonym_variant(text: str, rng: random.Random, part: str, category: str) -> str | None:
    return substitute(text, SYNONYMS[part][category], rng)


def any_synonym(text: str, rng: random.Random, part: str) -> str | None:
    cats = list(SYNONYMS[part])
    rng.shuffle(cats)
    return next((v for c in cats if (v := synonym_variant(text, rng, part, c))), None)


def wrap(text: str, rng: random.Random, part: str, side: str) -> str:
    """Put one of the part's instructions before or after the problem (random separator and case)."""
    w = rng.choice(WRAPPERS[part][side])
    w = w.lower() if rng.random() < 0.15 else w
    sep = rng.choice(["\n\n", "\n", " "])
    return f"{w}{sep}{text}" if side == "before" else f"{text.rstrip()}{sep}{w}"


def reformat(text: str, rng: random.Random) -> str:
    """Change presentation only: LaTeX delimiters / \\dfrac / \\left( / spacing, whitespace, case, punctuation."""
    t = re.sub(r"(?<!\\)\(", r"\\left(", text).replace(")", "\\right)") if rng.random() < 0.25 else text
    t = t.replace("\\right\\right)", "\\right)").replace("\\\\right)", "\\)")
    t = re.sub(r"\$([^$\d][^$]*)\$", lambda m: rf"\({m.group(1)}\)", t) if rng.random() < 0.4 else t  # not $5 ... $6
    t = t.replace("\\frac", "\\dfrac") if rng.random() < 0.4 else t
    t = re.sub(r"([=+<>])", r" \1 ", t) if rng.random() < 0.4 else t
    t = t.replace(", ", " , ") if rng.random() < 0.3 else t
    t = t.rstrip(".") if rng.random() < 0.3 else t
    t = re.sub(r" ", lambda m: rng.choice([" ", " ", "  ", "\n", " \t"]), t)
    t = t.lower() if rng.random() < 0.25 else t
    return t if t != text else text + "  \n"


def number_changed(text: str, rng: random.Random) -> str | None:
    nums = list(_NUM.finditer(text))
    if not nums:
        return None
    m = rng.choice(nums)
    old = int(m.group())
    return text[:m.start()] + str(old + rng.choice([1, 2, 3, 5, 10]) if old < 10_000 else old + 1) + text[m.end():]


def numbers_swapped(text: str, rng: random.Random) -> str | None:
    nums = list(_NUM.finditer(text))
    pairs = [(a, b) for i, a in enumerate(nums) for b in nums[i + 1:] if a.group() != b.group()]
    if not pairs:
        return None
    a, b = rng.choice(pairs)
    return text[:a.start()] + b.group() + text[a.end():b.start()] + a.group() + text[b.end():]


def name_changed(text: str, rng: random.Random, part: str) -> str | None:
    """Every occurrence of one common first name replaced by a name from the part's pool."""
    found = sorted({w for w in re.findall(r"\b[A-Z][a-z]+\b", text) if w in _COMMON_NAMES})
    if not found:
        return None
    old = rng.choice(found)
    new = rng.choice([n for n in NAMES[part] if n not in text])
    return re.sub(rf"\b{old}\b", new, text)


def variable_changed(text: str, rng: random.Random) -> str | None:
    """In one math region, one variable replaced by another variable the problem already uses."""
    asy = [(m.start(), m.end()) for m in re.finditer(r"\[asy\].*?\[/asy\]", text, re.DOTALL)]
    regions = [r for r in _MATH.finditer(text) if not any(a <= r.start() < b for a, b in asy)]  # not figure labels
    var = re.compile(r"(?<![\\A-Za-z])([a-zA-Z])(?![A-Za-z])")
    letters = {m.group(1) for r in regions for m in var.finditer(r.group())}
    cands = [(r, v) for r in regions for v in sorted({m.group(1) for m in var.finditer(r.group())})]
    cands = [(r, v) for r, v in cands if len(letters - {v}) >= 1]
    if len(letters) < 2 or not cands:
        return None
    r, v = rng.choice(cands)
    w = rng.choice(sorted(letters - {v}))
    body = var.sub(lambda m: w if m.group(1) == v else m.group(1), r.group())
    return text[:r.start()] + body + text[r.end():]


def near_copy_small(text: str, rng: random.Random) -> str:
    """The old small edits: drop an article or add a short tail."""
    spots = list(_ARTICLE.finditer(text))
    if spots and rng.random() < 0.5:
        m = rng.choice(spots)
        return text[:m.start()] + text[m.end():]
    return text.rstrip() + rng.choice(_TAILS)


def make_variant(kind: str, part: str) -> Callable[[str, random.Random], str | None]:
    """The variant function of a generated kind for one part."""
    if kind.startswith("synonym_"):
        return lambda t, r: synonym_variant(t, r, part, kind.removeprefix("synonym_"))
    side_of = {"wrapper_unseen_before": "before", "wrapper_unseen_after": "after"}
    if kind in side_of:
        return lambda t, r: wrap(t, r, part, side_of[kind])

    def wrapped_syn(t: str, r: random.Random, fmt: bool) -> str | None:
        v = any_synonym(t, r, part)
        v = reformat(v, r) if v and fmt else v
        return wrap(v, r, part, r.choice(["before", "after"])) if v else None

    return {
        "reformat": reformat,
        "combo_reformat_synonym": lambda t, r: (reformat(v, r) if (v := any_synonym(t, r, part)) else None),
        "combo_wrapper_synonym": lambda t, r: wrapped_syn(t, r, False),
        "combo_wrapper_reformat_synonym": lambda t, r: wrapped_syn(t, r, True),
        "wrapper_builtin": lambda t, r: (f"{r.choice(BUILTIN_WRAPPERS_AT_BUILD)}\n\n{t}" if r.random() < 0.5
                                         else f"{t}\n{r.choice(BUILTIN_WRAPPERS_AT_BUILD)}"),
        "near_copy_small": near_copy_small,
        "number_changed": number_changed,
        "numbers_swapped": numbers_swapped,
        "question_changed": lambda t, r: substitute(t, QUESTION_SWAPS[part], r, both_ways=True),
        "object_changed": lambda t, r: substitute(t, OBJECT_SWAPS[part], r, both_ways=True),
        "name_changed": lambda t, r: name_changed(t, r, part),
        "variable_changed": variable_changed,
    }[kind]


# --------------------------------------------------------------------------- second family (fresh2)

_INLINE = re.compile(r"\$([^$\s]*[A-Za-z\\^_][^$\s]*)\$")  # $x^2$, $\pi$ (no spaces: never "$5 and $")
_BARE_NUM = re.compile(r"(?<![\w$.,\\{^_])(\d+)(?![\w$.,%}])")
_MATH_BODY = re.compile(r"\$([^$]+)\$")


def synonym(text: str, rng: random.Random, pool: str, category: str | None = None) -> str | None:
    """One synonym of the pool substituted (a random category, in sorted order before the shuffle, when none
    is given)."""
    cats = [category] if category else sorted(SYNONYMS[pool])
    rng.shuffle(cats)
    for c in cats:
        if (v := substitute(text, SYNONYMS[pool][c], rng)) is not None:
            return v
    return None


def two_synonyms(text: str, rng: random.Random, pool: str) -> str | None:
    """Two different synonym substitutions in one statement (the second must find another source word)."""
    first = synonym(text, rng, pool)
    if first is None:
        return None
    for _ in range(4):
        second = synonym(first, rng, pool)
        if second is not None and second != first:
            return second
    return None


def wrap_stripped(text: str, rng: random.Random, pool: str, side: str) -> str:
    """One of the pool's instructions before or after the stripped problem, with a random separator (case kept)."""
    w = rng.choice(WRAPPERS[pool][side])
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


def reformat_ops(text: str, rng: random.Random) -> str | None:
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


def _then(
    first: Callable[[str, random.Random], str | None], second: Callable[[str, random.Random], str | None]
) -> Callable[[str, random.Random], str | None]:
    def both(t: str, r: random.Random) -> str | None:
        v = first(t, r)
        return second(v, r) if v is not None else None

    return both


def reworded_variants(pool: str) -> dict[str, Callable[[str, random.Random], str | None]]:
    """The second family's generator of each kind, with the pool's words."""

    def syn(t: str, r: random.Random, c: str | None = None) -> str | None:
        return synonym(t, r, pool, c)

    def question(t: str, r: random.Random) -> str | None:
        return substitute(t, QUESTION_SWAPS[pool], r, both_ways=True)

    def obj(t: str, r: random.Random) -> str | None:
        return substitute(t, OBJECT_SWAPS[pool], r, both_ways=True)

    def wrapper_any(t: str, r: random.Random) -> str:
        return wrap_stripped(t, r, pool, r.choice(["before", "after"]))

    return {
        **{f"synonym_{c}": (lambda t, r, c=c: syn(t, r, c)) for c in SYNONYMS[pool]},
        "wrapper_before": lambda t, r: wrap_stripped(t, r, pool, "before"),
        "wrapper_after": lambda t, r: wrap_stripped(t, r, pool, "after"),
        "reformat": reformat_ops,
        "combo_reformat_synonym": _then(syn, lambda v, r: reformat_ops(v, r) or v + "\n"),
        "combo_wrapper_synonym": _then(syn, wrapper_any),
        "combo_two_synonyms": lambda t, r: two_synonyms(t, r, pool),
        "number_changed": number_changed,
        "numbers_swapped": numbers_swapped,
        "object_changed": obj,
        "question_changed": question,
        "name_changed": lambda t, r: name_changed(t, r, pool),
        "combo_question_synonym": _then(question, syn),
        "combo_object_wrapper": _then(obj, wrapper_any),
        "combo_number_reformat": _then(number_changed, lambda v, r: reformat_ops(v, r) or v + "\n"),
    }
