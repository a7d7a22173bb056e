"""The pair check of the semantic tier: is an embedding neighbour the same problem in other words?

Embeddings put a rephrased problem next to its original, but they put a look-alike with one number changed
(or another question asked about the same story) just as close. So a neighbour pair (a, b) found by cosine
(`curate/text/embed.py`) is decided here, by what embeddings do not see:

1. **cosine** of the whole texts >= `min_cosine`;
2. **numbers** (`numbers_of`): the numeric values of both texts, digits and number words alike ("three" = 3,
   "$1,200" = 1200, "20 percent" = "20%" = 20); a pair is `number_changed` when the values of `a` are not all in
   `b` (as often as in `a`), or when `b` has more than `max_extra_numbers` values `a` lacks (symmetric use:
   dedup checks both ways);
3. **math** (`math_of`): the tokens of the LaTeX math regions must be the same (`math_changed`: "$f(f(x))$" vs
   "$f(f(g(x)))$", "$z = c$" vs "$\\phi = c$", which keep every number);
4. **question** (`question_of`): the question sentence of each text (the last sentence ending in "?", else the
   last one opening with an imperative such as "Find"); `question_changed` when a carrier word of the two
   questions differs (dedup's closed word classes, `curate/dedup/lexicon.py`: sum / product, largest /
   smallest, even / odd, area / perimeter, ...; a strict one -- negation, comparison, parity, sign -- added or
   dropped), or when the cosine of the two question sentences is below `min_question_cosine` (another quantity
   of the same story asked).

Everything here is per pair, in plain Python: the tier calls it only for the few nearest neighbours that pass
the cosine bound.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from cotforge.curate.dedup.pairs.lexicon import CARRIERS, FORMAT_WORDS, FUNCTION_WORDS, STRICT_CATEGORIES

_WORD_NUMBERS: dict[str, str] = {
    w: str(i) for i, w in enumerate("zero _ two three four five six seven eight nine ten eleven twelve thirteen "
                                    "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split())
    if w != "_"}  # "one" is left out: a pronoun or an article as often as a count
_WORD_NUMBERS.update({w: str(10 * i) for i, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), 3)})
_NUM = re.compile(r"(?<![A-Za-z_])\d+(?:,\d{3})*(?:\.\d+)?|[A-Za-z]+")
_SENT = re.compile(r"(?<=[.?!])\s+|\n\s*\n")  # sentence ends and blank lines; a single newline (display math) is not one
_IMPERATIVE = re.compile(r"(?:find|compute|calculate|determine|what|how|which|evaluate|simplify|express|give|work out|"
                         r"who|when|where|why|is|are|does|do|can)\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z]+")
_ONE = re.compile(r"\bone\b", re.IGNORECASE)
_MATH = re.compile(r"\$\$.+?\$\$|\$.+?\$|\\\(.+?\\\)|\\\[.+?\\\]|\\begin\{.+?\\end\{[a-z*]+\}", re.DOTALL)
_PROSE_RUN = re.compile(r"(?<![\\{A-Za-z])[A-Za-z]{3,}\s+[A-Za-z]{3,}\s+[A-Za-z]{2,}(?![A-Za-z}])")  # 3 words in a row
_MATH_TOK = re.compile(r"\\[A-Za-z]+|[A-Za-z]|\d+|[^\s\w{}\\$.,;:]")  # sentence punctuation left out


def math_of(text: str) -> Counter:
    """The tokens of the LaTeX math regions of `text` (commands, letters, digits, operators; layout commands
    such as \\left or \\dfrac vs \\frac left out): a rewording keeps the formulas, a look-alike changes one."""
    out: Counter = Counter()
    for region in _MATH.findall(text or ""):
        if _PROSE_RUN.search(region):
            continue  # not math: prose between two currency signs ("costs $2 per egg ... sells for $3")
        for tok in _MATH_TOK.findall(region):
            if tok.startswith("\\"):
                name = tok[1:]
                if name in FORMAT_WORDS or name in ("dfrac", "tfrac", ","):
                    continue
                tok = "\\" + name
            out[tok] += 1
    return out


def numbers_of(text: str) -> Counter:
    """The numeric values of `text` as canonical strings (commas and a trailing ".0" dropped, leading zeros
    stripped), digits and number words ("three") alike."""
    out: Counter = Counter()
    for tok in _NUM.findall(text or ""):
        if tok[0].isdigit():
            v = tok.replace(",", "")
            if "." in v:
                v = v.rstrip("0").rstrip(".") or "0"
            v = v.lstrip("0") or "0"
            out[v] += 1
        else:
            w = _WORD_NUMBERS.get(tok.lower())
            if w is not None:
                out[w] += 1
    return out


def question_of(text: str) -> str:
    """The sentence that asks: the last one ending in "?", else the last one opening like a question or an
    instruction ("Find ...", "How many ..."), else the last sentence. A line break inside a sentence (display
    math: "What is the area of the region defined by\n$|x| + |y| \\le 1$?") does not end it."""
    sents = [s.strip() for s in _SENT.split((text or "").strip()) if s and s.strip()]
    if not sents:
        return ""
    for s in reversed(sents):
        if s.endswith("?"):
            return s
    for s in reversed(sents):
        if _IMPERATIVE.match(s):
            return s
    return sents[-1]


# Question carriers beyond dedup's lexicon: what is left vs what was used of a stock ("How much does Samuel have
# left?" vs "... have used?").
_EXTRA_CARRIERS: dict[str, tuple[str, str]] = {
    **{w: ("complement", "left") for w in "left remaining remain remains leftover".split()},
    **{w: ("complement", "used") for w in "used eaten consumed".split()},
}


def carriers(text: str) -> dict[str, set[str]]:
    """{category: {carrier group}} of the words of `text` (dedup's lexicon and `_EXTRA_CARRIERS`)."""
    got: dict[str, set[str]] = {}
    for w in _WORD.findall((text or "").lower()):
        c = CARRIERS.get(w) or _EXTRA_CARRIERS.get(w)
        if c is not None:
            got.setdefault(c[0], set()).add(c[1])
    return got


def _stem(w: str) -> str:
    return w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w


def _content(text: str) -> set[str]:
    return {_stem(w) for w in _WORD.findall((text or "").lower()) if len(w) > 2 and w not in FUNCTION_WORDS
            and w not in _WORD_NUMBERS}


def asks_other_quantity(a: str, qa: str, b: str, qb: str) -> bool:
    """Whether one question asks about another thing of the story: a content word of one question is missing
    from the other question but occurs elsewhere in the other text ("How many vegetables ..." vs "How many
    potatoes ...", when the story mentions potatoes). A reworded question uses new words instead (synonyms
    the story does not hold), so it is not caught here."""
    ca, cb = _content(qa), _content(qb)
    rest_a, rest_b = _content(a) - ca, _content(b) - cb
    return bool((cb - ca) & rest_a) or bool((ca - cb) & rest_b)


def carriers_differ(qa: str, qb: str) -> bool:
    """Whether the two questions ask with different carriers: a category present in both with other groups, or
    a strict category (negation, comparison, parity, ...) in one question only."""
    ca, cb = carriers(qa), carriers(qb)
    for cat in set(ca) | set(cb):
        a, b = ca.get(cat, set()), cb.get(cat, set())
        if a and b and a != b:
            return True
        if cat in STRICT_CATEGORIES and bool(a) != bool(b):
            return True
    return False


@dataclass(frozen=True)
class PairThresholds:
    """The bounds of `pair_verdict` (each stage's config holds its own copy)."""

    min_cosine: float = 0.80
    min_question_cosine: float = 0.75
    max_extra_numbers: int = 0


def _ones(text: str) -> int:
    return len(_ONE.findall(text or ""))


def number_verdict(a: str, b: str, max_extra: int, symmetric: bool = False) -> tuple[bool, list[str]]:
    """(numbers agree, the values both hold): every value of `a` is in `b` as often, and `b` adds at most
    `max_extra` values (`symmetric`: or the same with a and b swapped -- one holds the other's values). The word
    "one" is not a value of its own, but it may stand for a 1 the other text writes as a digit."""
    na, nb = numbers_of(a), numbers_of(b)
    miss_b, miss_a = na - nb, nb - na
    miss_b["1"] = max(0, miss_b["1"] - _ones(b))
    miss_a["1"] = max(0, miss_a["1"] - _ones(a))
    missing, extra = sum(miss_b.values()), sum(miss_a.values())
    ok = missing == 0 and extra <= max_extra
    if symmetric:
        ok = ok or (extra == 0 and missing <= max_extra)
    return ok, sorted((na & nb).elements(), key=lambda v: (len(v), v))


def pair_verdict(a: str, b: str, cosine: float, question_cosine: float | None, th: PairThresholds,
                 symmetric: bool = False) -> str | None:
    """None when `b` is `a` in other words, else the reason it is not: `below_cosine`, `number_changed`,
    `math_changed`, `question_changed` (see the module docstring). `question_cosine`: the cosine of `question_of(a)` and
    `question_of(b)` (None: not computed; only the carrier words are compared)."""
    if cosine < th.min_cosine:
        return "below_cosine"
    ok, _ = number_verdict(a, b, th.max_extra_numbers, symmetric)
    if not ok:
        return "number_changed"
    if math_of(a) != math_of(b):
        return "math_changed"
    qa, qb = question_of(a), question_of(b)
    if carriers_differ(qa, qb) or asks_other_quantity(a, qa, b, qb):
        return "question_changed"
    if question_cosine is not None and question_cosine < th.min_question_cosine:
        return "question_changed"
    return None
