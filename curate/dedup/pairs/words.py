"""Whether two content words of a changed span are the same word, for the graded pair check (pairs.py).

Same word: equal up to inflection or British / American spelling, one group of lexicon.REWORD_SYNONYMS or of
the carriers, WordNet synonyms (synonyms.py), or a misspelling of a word WordNet does not know. Content words
are ordinary words outside the closed classes of lexicon.FUNCTION_WORDS (carriers always count).
"""

from __future__ import annotations

from cotforge.curate.dedup.pairs import relations
from cotforge.curate.dedup.pairs.lexicon import CARRIERS, FUNCTION_WORDS, REWORD_GROUP
from cotforge.curate.dedup.pairs.synonyms import known, synonyms


def content_words(side: list[tuple[str, str]]) -> list[str]:
    """Content words of one side of a change: ordinary words that are not closed-class and not -ly adverbs
    (manner rarely changes a problem). Carriers count: one replaced by an unrelated word is a change too."""
    return [t for t, k in side if k == "word" and (t not in FUNCTION_WORDS or t in CARRIERS)
            and not (len(t) > 4 and t.endswith("ly"))]


def content_replaced(ka: list[tuple[str, str]], kb: list[tuple[str, str]], mode: str = "wordnet") -> bool:
    """Some content word on each side has no counterpart on the other, or content words were replaced by
    closed-class words only ("at least 5 consecutive" -> "at least 5 of the").

    A counterpart (`mode`): "synonyms": the same word up to inflection or spelling, a REWORD_SYNONYMS group,
    the WordNet synonym table, a typo. "wordnet" compares content units (`units`: WordNet phrases count as one,
    "spent" ~ "used up") and adds the words WordNet relates (relations.related: any sense, direct hypernyms,
    near links) when no evidence says the replacement changes the problem (`_changes`). "flip" also pairs two
    known words WordNet does not relate unless there is such evidence (the burden of proof on the change)."""
    if mode == "synonyms":
        ca, cb = content_words(ka), content_words(kb)
        lone_a = [x for x in ca if not any(_same_word(x, y) for y in cb)]
        lone_b = [y for y in cb if not any(_same_word(x, y) for x in ca)]
    else:
        ua, ub = units(ka), units(kb)
        lone_a = [x for x in ua if not any(_counterpart(x, y) for y in ub)]
        lone_b = [y for y in ub if not any(_counterpart(x, y) for x in ua)]
        if mode == "flip" and lone_a and lone_b and not any(_changes(x, y, unrelated=True)
                                                            for x in lone_a for y in lone_b):
            return False
    return bool((lone_a and lone_b) or (lone_a and _particles(kb)) or (lone_b and _particles(ka)))


def units(side: list[tuple[str, str]]) -> list[str]:
    """Content units of one side: runs of 2-3 ordinary words WordNet knows as one lemma ("used up" ->
    "used_up", "surface area" -> "surface_area", "in all"; longest first, left to right), and the other
    content words. A compound is one unit: "surface area" vs "side length" is not "surface"
    ~ "side" plus "area" vs "length"."""
    content = set(content_words(side))
    toks = [t for t, k in side if k == "word"]
    out: list[str] = []
    i = 0
    while i < len(toks):
        for n in (3, 2):
            run = toks[i:i + n]
            if len(run) == n and relations.known(p := "_".join(run)):
                out.append(p)
                i += n
                break
        else:
            if toks[i] in content:
                out.append(toks[i])
            i += 1
    return out


def said_by(word: str, side: list[tuple[str, str]]) -> bool:
    """Some run of 1-3 words of `side` is the same word or a WordNet synonym of `word` ("altogether" and
    "in all": the other side of a replacement says what the word said)."""
    toks = [t for t, _ in side]
    return any(_same_word(word, r) or relations.synonym(word, r) for n in (1, 2, 3)
               for r in ("_".join(toks[i:i + n]) for i in range(len(toks) - n + 1)))


def idioms(side: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Number words inside a WordNet phrase that is no noun ("one and only" = unique, "first of all") are
    ordinary words, not counts: (token, kind) pairs with their kind set to "word"."""
    out = list(side)
    for n in (3, 2):
        for i in range(len(out) - n + 1):
            run = out[i:i + n]
            if any(k == "num" and t.isalpha() for t, k in run) and all(t.isalpha() for t, _ in run) \
                    and relations.idiom("_".join(t for t, _ in run)):
                out[i:i + n] = [(t, "word" if k == "num" else k) for t, k in run]
    return out


def _counterpart(x: str, y: str) -> bool:
    """Same word (`_same_word`), WordNet synonyms among their 5 most frequent senses (phrases too:
    "integer" ~ "whole_number"), or related by WordNet without evidence of a change (`_close`); never two
    antonyms that share no frequent sense (the synonym table's hypernym groups hold some: "boy" and "girl"
    under "scout"; "used" and "utilized" share a synset and an antonym sense)."""
    if relations.synonym(x, y):
        return True
    return not relations.opposed(x, y) and (_same_word(x, y) or _close(x, y))


def _changes(x: str, y: str, unrelated: bool = False) -> bool:
    """Evidence that replacing `x` by `y` changes the problem: a word WordNet does not know, antonyms (also a
    negating prefix), a technical word (relations.technical: units, numbers, shapes, time, measured
    attributes) or two members of one category (relations.siblings). For words WordNet does not relate
    (`unrelated`) also weaker evidence: a competition-math word (relations.math_word: measured, blind to the
    part of speech, so it does not undo a WordNet relation: "constant" ~ "steady") or cousins."""
    return (not relations.known(x) or not relations.known(y) or relations.opposed(x, y) or negated(x, y)
            or relations.technical(x) or relations.technical(y) or relations.siblings(x, y)
            or (unrelated and (relations.math_word(x) or relations.math_word(y) or relations.cousins(x, y))))


def _close(x: str, y: str) -> bool:
    """A counterpart by WordNet's relations: related and without evidence of a change."""
    return x != y and relations.related(x, y) and not _changes(x, y)


_NEG_PREFIXES = ("in", "un", "non", "im", "il", "ir", "dis")


def negated(x: str, y: str) -> bool:
    """One word is the other with a negating prefix (distinguishable / indistinguishable)."""
    short, long_ = sorted((x, y), key=len)
    return len(short) >= 3 and any(long_ == p + short for p in _NEG_PREFIXES)


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


__all__ = ["content_words", "content_replaced", "units", "idioms", "negated", "said_by"]
