"""Whether two content words of a changed span are the same word, for the graded pair check (pairs.py).

Same word: equal up to inflection or British / American spelling, one group of lexicon.REWORD_SYNONYMS or of
the carriers, WordNet synonyms (synonyms.py), or a misspelling of a word WordNet does not know. Content words
are ordinary words outside the closed classes of lexicon.FUNCTION_WORDS (carriers always count).
"""

from __future__ import annotations

from cotforge.curate.dedup.lexicon import CARRIERS, FUNCTION_WORDS, REWORD_GROUP
from cotforge.curate.dedup.synonyms import known, synonyms


def content_words(side: list[tuple[str, str]]) -> list[str]:
    """Content words of one side of a change: ordinary words that are not closed-class and not -ly adverbs
    (manner rarely changes a problem). Carriers count: one replaced by an unrelated word is a change too."""
    return [t for t, k in side if k == "word" and (t not in FUNCTION_WORDS or t in CARRIERS)
            and not (len(t) > 4 and t.endswith("ly"))]


def content_replaced(ka: list[tuple[str, str]], kb: list[tuple[str, str]]) -> bool:
    """Some content word on each side has no counterpart (the same word up to inflection or spelling, a
    REWORD_SYNONYMS group, WordNet) on the other, or content words were replaced by closed-class words only
    ("at least 5 consecutive" -> "at least 5 of the")."""
    ca, cb = content_words(ka), content_words(kb)
    lone_a = [x for x in ca if not any(_same_word(x, y) for y in cb)]
    lone_b = [y for y in cb if not any(_same_word(x, y) for x in ca)]
    return bool((lone_a and lone_b) or (lone_a and _particles(kb)) or (lone_b and _particles(ka)))


def _particles(side: list[tuple[str, str]]) -> bool:
    """Only short closed-class words ("of the", "only"), not ones that may carry content ("number", "needs")."""
    return all(k == "word" and t in FUNCTION_WORDS and len(t) <= 4 for t, k in side)


_SUFFIXES = (("ies", "y"), ("ied", "y"), ("ing", ""), ("es", ""), ("ed", ""), ("s", ""))
_SPELLING = (("our", "or"), ("ise", "ize"), ("yse", "yze"), ("tre", "ter"), ("ll", "l"))


def _stem(w: str) -> str:
    """A crude stem: British spellings made American, one inflection suffix dropped (metres = meter)."""
    for a, b in _SPELLING:
        w = w.replace(a, b)
    for suf, rep in _SUFFIXES:
        if len(w) > len(suf) + 2 and w.endswith(suf):
            return w[: -len(suf)] + rep
    return w


def _same_word(x: str, y: str) -> bool:
    """Inflection / spelling variants, one group of REWORD_SYNONYMS or of the carriers, WordNet synonyms, or
    a typo (see `_typo`)."""
    g, c = REWORD_GROUP.get(x), CARRIERS.get(x)
    return (x == y or _stem(x) == _stem(y) or (g is not None and g == REWORD_GROUP.get(y))
            or (c is not None and c == CARRIERS.get(y)) or synonyms(x, y) or _typo(x, y))


def _typo(x: str, y: str) -> bool:
    """A misspelling: both words >= 6 letters, edit distance <= 1 (<= 2 from 9 letters), and one of them is
    no word WordNet knows ("encounted" for "encountered"; "preorder" / "inorder" differ by 3)."""
    if min(len(x), len(y)) < 6 or abs(len(x) - len(y)) > 2 or (known(x) and known(y)):
        return False
    limit = 2 if min(len(x), len(y)) >= 9 else 1
    prev = list(range(len(y) + 1))
    for i, cx in enumerate(x, 1):
        cur = [i]
        for j, cy in enumerate(y, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (cx != cy)))
        if min(cur) > limit:
            return False
        prev = cur
    return prev[-1] <= limit


__all__ = ["content_words", "content_replaced"]
