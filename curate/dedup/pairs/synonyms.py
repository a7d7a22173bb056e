"""Synonyms for the graded pair check: WordNet 3.0 synonym groups shipped as wordnet_synonyms.txt.gz.

Built by bench/builders/wordnet_tables.py (its docstring says what is kept: each word's 3 most frequent senses, adjective
satellites with their heads). A word is looked up as itself, through WordNet's exception lists (bought ->
buy) and through WordNet's suffix rules (morphy: "purchases" -> "purchase", "biggest" -> "big"); two words are
synonyms when some lemma of each shares a group. Loaded once per process, on the first lookup.
"""

from __future__ import annotations

import gzip
import logging
from functools import lru_cache
from pathlib import Path

log = logging.getLogger(__name__)
TABLE = Path(__file__).with_name("wordnet_synonyms.txt.gz")
MORPHY = (("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"), ("men", "man"),
           ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", ""),
           ("er", ""), ("est", ""), ("er", "e"), ("est", "e"))
SPELLING = (("our", "or"), ("ise", "ize"), ("yse", "yze"), ("tre", "ter"))


@lru_cache(maxsize=1)
def _table() -> tuple[dict[str, frozenset[int]], dict[str, tuple[str, ...]]]:
    """(word -> ids of its groups, inflected form -> base forms). Empty (with a warning) if the file is missing."""
    groups: dict[str, set[int]] = {}
    exc: dict[str, tuple[str, ...]] = {}
    if not TABLE.exists():
        log.warning("synonym table %s missing: content-word replacements never count as synonyms", TABLE)
        return {}, {}
    with gzip.open(TABLE, "rt", encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            f = line.split()
            if not f or f[0] == "#":
                continue
            if f[0] == "S":
                for w in f[1:]:
                    groups.setdefault(w, set()).add(i)
            elif f[0] == "X":
                exc[f[1]] = tuple(f[2:])
    return {w: frozenset(g) for w, g in groups.items()}, exc


@lru_cache(maxsize=1 << 16)
def lemmas(word: str) -> frozenset[str]:
    """Forms of `word` the table knows: itself, its exception bases, its morphy bases, American spellings."""
    groups, exc = _table()
    forms = {word}
    for a, b in SPELLING:
        if a in word:
            forms.add(word.replace(a, b))
    out = set()
    for w in forms:
        out.add(w)
        out.update(exc.get(w, ()))
        out.update(w[: -len(s)] + r for s, r in MORPHY if w.endswith(s) and len(w) > len(s) + 1)
    return frozenset({w for w in out if w in groups} | {word})


def exceptions() -> dict[str, tuple[str, ...]]:
    """WordNet's inflection exceptions: inflected form -> base forms (bought -> buy)."""
    return _table()[1]


def known(word: str) -> bool:
    """Whether WordNet's table (through `lemmas`) knows the word at all."""
    groups, _ = _table()
    return any(w in groups for w in lemmas(word))


@lru_cache(maxsize=1 << 16)
def synonyms(x: str, y: str) -> bool:
    """Whether some lemma of `x` and some lemma of `y` share a WordNet synonym group (or are equal)."""
    lx, ly = lemmas(x), lemmas(y)
    if lx & ly:
        return True
    groups, _ = _table()
    gx = set().union(*(groups.get(w, frozenset()) for w in lx))
    return any(groups.get(w, frozenset()) & gx for w in ly)


__all__ = ["synonyms", "lemmas", "known", "exceptions", "TABLE", "MORPHY", "SPELLING"]
