"""WordNet relations between two content words, for the graded pair check (words.py): are they related
(the same thing said another way), opposed, or different members of one category?

The table, wordnet_relations.txt.gz, is built by bench/builders/wordnet_tables.py from Princeton WordNet 3.0: every
synset with its lexicographer file (its domain: noun.quantity, noun.shape, verb.motion ...), hypernyms,
"near" links (similar to, also see, verb group, derivationally related form, attribute) and antonyms, and
every lemma (one to three words, "use_up") with its synsets in WordNet's sense order. Unlike the synonym
table (synonyms.py: each word's 5 most frequent senses) it keeps all senses, so it is used in two ways:

- `related`: some senses share a synset, one is a direct hypernym of the other, or they are linked by a near
  link (directly, or as two satellites of one adjective head: "huge" ~ "enormous"). Broad on purpose: the
  evidence functions below decide first whether the replacement changes the problem.
- evidence that a replacement changes the problem: `opposed` (antonyms, also through a similar-to head or a
  direct hypernym: "adults" vs "children" via adult / juvenile), `technical` (a measurement, number, shape,
  time, relation or attribute word: units, figures, numerator, height), `siblings` (two different members of
  one category among the words' most frequent senses: square / circle, minutes / hours, men / women);
  for two words WordNet does not relate also `cousins` (apples / oranges, cats / dogs).
Loaded once per process, on the first lookup.
"""

from __future__ import annotations

import gzip
import logging
from functools import lru_cache
from pathlib import Path

from cotforge.curate.dedup.pairs.synonyms import MORPHY, SPELLING, exceptions

log = logging.getLogger(__name__)
TABLE = Path(__file__).with_name("wordnet_relations.txt.gz")
MATH_WORDS = Path(__file__).with_name("math_words.txt")  # built by bench/builders/math_words.py
POS = "nvar"
# Domains whose words name what a math problem measures or counts (WordNet lexicographer files):
# quantity (units, numbers, numerator), shape (figures, chord, diameter), time (minute, decade), relation
# (percent, ratio, north), attribute (height, width, area, speed, colour).
TECHNICAL_DOMAINS = frozenset({"noun.quantity", "noun.shape", "noun.time", "noun.relation", "noun.attribute"})
SYNONYM_SENSES = 5  # as bench/builders/wordnet_tables.py --senses for the synonym table
COUSIN_DEPTH = 2
TOP_SENSES = 2  # noun senses that say what a word is, for `siblings`

_Synset = tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]  # lex, hyper, near, ant, genus


def _ints(col: str) -> tuple[int, ...]:
    return () if col == "-" else tuple(int(x) for x in col.split(","))


@lru_cache(maxsize=1)
def _table() -> tuple[list[str], list[str], dict[str, str]]:
    """(lexnames, synset lines, lemma -> the rest of its line), kept as text and parsed on use (`_synset`,
    `_entry`): about a third of the memory of parsed tuples, and half the load time. Empty if missing."""
    lexnames: list[str] = []
    synsets: list[str] = []
    index: dict[str, str] = {}
    if not TABLE.exists():
        log.warning("relation table %s missing: no WordNet relations beyond the synonym table", TABLE)
        return lexnames, synsets, index
    with gzip.open(TABLE, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("Y "):
                synsets.append(line[2:].rstrip("\n"))
            elif line.startswith("L "):
                word, _, rest = line[2:].rstrip("\n").partition(" ")
                index[word] = rest
            elif line.startswith("# lexnames:"):
                lexnames = line.split()[2:]
    return lexnames, synsets, index


@lru_cache(maxsize=1 << 17)
def _synset(i: int) -> _Synset:
    """(lexicographer file number, hypernyms, near links, antonyms, gloss genus) of synset `i`."""
    lex, hyp, near, ant, genus = _table()[1][i].split()
    return int(lex), _ints(hyp), _ints(near), _ints(ant), _ints(genus)


@lru_cache(maxsize=1 << 16)
def _entry(word: str) -> tuple[tuple[tuple[int, ...], ...], str]:
    """(synset ids per part of speech n, v, a, r; the part of speech the word mostly is in SemCor)."""
    cols, counts = _table()[2][word].split()
    ids = tuple(_ints(c) for c in cols.split(";"))
    n = [int(c) for c in counts.split(",")]
    return ids, POS[max(range(4), key=lambda i: (n[i], len(ids[i]), i == 0))]


def _bases(word: str) -> set[str]:
    """The word, its American spellings, WordNet exception bases (bought -> buy) and morphy bases."""
    out = {word}
    out.update(word.replace(a, b) for a, b in SPELLING if a in word)
    for w in list(out):
        out.update(exceptions().get(w, ()))
        out.update(w[: -len(s)] + r for s, r in MORPHY if w.endswith(s) and len(w) > len(s) + 1)
    return out


@lru_cache(maxsize=1 << 16)
def _forms(word: str) -> frozenset[str]:
    """Base forms the relation table knows: "used_up" -> "use_up", "purchases" -> "purchase"; a phrase is
    inflected on its first word."""
    index = _table()[2]
    head, _, tail = word.partition("_")
    return frozenset(f for f in (f"{h}_{tail}" if tail else h for h in _bases(head)) if f in index)


@lru_cache(maxsize=1 << 16)
def senses(word: str, top: int | None = None) -> frozenset[int]:
    """Synset ids of `word` (all its base forms), the first `top` per part of speech when given."""
    return frozenset(s for f in _forms(word) for ids in _entry(f)[0] for s in ids[:top])


def base_form(word: str) -> str:
    """The shortest base form WordNet knows ("vertices" -> "vertex"), else the word itself."""
    return min(_forms(word), key=lambda f: (len(f), f), default=word)


@lru_cache(maxsize=1)
def _math_words() -> frozenset[str]:
    if not MATH_WORDS.exists():
        log.warning("math word list %s missing: only WordNet's domains mark technical words", MATH_WORDS)
        return frozenset()
    lines = MATH_WORDS.read_text(encoding="utf-8").splitlines()
    return frozenset(line.split()[0] for line in lines if line and not line.startswith("#"))


def math_word(word: str) -> bool:
    """The word (or its base form) is in math_words.txt: >= 10x more frequent in competition math prose than
    in grade-school word problems (bench/builders/math_words.py): "diagonal", "vertex", "inscribed", "digit"."""
    words = _math_words()
    return word in words or base_form(word) in words


def idiom(phrase: str) -> bool:
    """A WordNet phrase of 2-3 words with no noun sense ("one_and_only", "first_of_all", "at_once")."""
    return "_" in phrase and phrase in _table()[2] and not _entry(phrase)[0][0]


def known(word: str) -> bool:
    """Whether WordNet has the word (or one of its base forms) at all."""
    return bool(_forms(word))


def _hyper(ids: frozenset[int]) -> set[int]:
    return {h for s in ids for h in _synset(s)[1]}


def _genus(ids: frozenset[int]) -> set[int]:
    return {h for s in ids for h in _synset(s)[4]}


def _near(ids: frozenset[int] | set[int]) -> set[int]:
    return {h for s in ids for h in _synset(s)[2]}


@lru_cache(maxsize=1 << 16)
def synonym(x: str, y: str) -> bool:
    """The two words (or phrases) share a synset among their SYNONYM_SENSES most frequent senses (per part of
    speech): the synonym table's rule (synonyms.py), for phrases as well ("integer" ~ "whole_number")."""
    return bool(senses(x, SYNONYM_SENSES) & senses(y, SYNONYM_SENSES))


@lru_cache(maxsize=1 << 16)
def related(x: str, y: str) -> bool:
    """Some senses of the two words share a synset, one is a direct hypernym or the gloss genus of the other
    ("cash: money in the form of ..."), or a near link joins them (directly or through one adjective head).
    All senses count: see the module docstring."""
    sx, sy = senses(x), senses(y)
    if not sx or not sy:
        return False
    if sx & sy or _hyper(sx) & sy or _hyper(sy) & sx or _genus(sx) & sy or _genus(sy) & sx:
        return True
    nx, ny = _near(sx), _near(sy)
    return bool(nx & sy or ny & sx or nx & ny)


@lru_cache(maxsize=1 << 16)
def opposed(x: str, y: str) -> bool:
    """Antonyms in WordNet: a sense of one (or its similar-to head, or its direct hypernym) is the antonym
    of a sense of the other (or of its head or direct hypernym): larger / smaller, arrives / leaves, huge /
    tiny (through large / small), adults / children (adult / juvenile)."""
    syn = _synset
    sx, sy = senses(x), senses(y)
    if not sx or not sy:
        return False
    wide_x = sx | _hyper(sx) | {h for s in sx for h in syn(s)[2] if syn(h)[0] == syn(s)[0]}
    wide_y = sy | _hyper(sy) | {h for s in sy for h in syn(s)[2] if syn(h)[0] == syn(s)[0]}
    return any(a in wide_y for s in wide_x for a in syn(s)[3])


def _nouns(word: str, top: int, mainly: bool = True) -> frozenset[int]:
    """The first `top` noun senses of the word's base forms that are mainly nouns in running text (SemCor
    counts: "constant", "gives", "sees" are mainly adjectives / verbs, so their noun senses do not count);
    `mainly=False`: of every base form."""
    return frozenset(s for f in _forms(word) if not mainly or _entry(f)[1] == "n" for s in _entry(f)[0][0][:top])


@lru_cache(maxsize=1 << 16)
def technical(word: str) -> bool:
    """The word is mainly a noun and its most frequent noun sense is in a TECHNICAL_DOMAINS file (a unit,
    number, shape, time unit, relation or measured attribute: "minutes", "digit", "height", "chord"; not
    "box", whose second sense is the quantity a box holds)."""
    tech = {i for i, n in enumerate(_table()[0]) if n in TECHNICAL_DOMAINS}
    return any(_synset(s)[0] in tech for s in _nouns(word, 1))


def _ancestors(ids: frozenset[int], depth: int) -> set[int]:
    out, frontier = set(), set(ids)
    for _ in range(depth):
        frontier = _hyper(frozenset(frontier))
        out |= frontier
    return out


@lru_cache(maxsize=1 << 16)
def cousins(x: str, y: str) -> bool:
    """Two words WordNet does not relate (`related`) share an ancestor within COUSIN_DEPTH hypernym steps
    among their TOP_SENSES senses as nouns (both mainly nouns): apples / oranges (edible fruit), cats / dogs
    (carnivore), tables / chairs (furniture). Evidence for unrelated words only (`word_relations="flip"`).
    Not verbs: with verb cousins (walked / ran) the old held-out part lost 21 synonym pairs (recall 0.949 ->
    0.939) for no negative kept apart on the labelled sets."""
    if related(x, y):
        return False
    for pos in "n":
        sx, sy = _main_senses(x, pos), _main_senses(y, pos)
        if sx and sy and _ancestors(sx, COUSIN_DEPTH) & _ancestors(sy, COUSIN_DEPTH):
            return True
    return False


def _main_senses(word: str, pos: str) -> frozenset[int]:
    """The first TOP_SENSES senses of part of speech `pos` of the base forms that mainly are that part."""
    i = POS.index(pos)
    return frozenset(s for f in _forms(word) if _entry(f)[1] == pos for s in _entry(f)[0][i][:TOP_SENSES])


@lru_cache(maxsize=1 << 16)
def siblings(x: str, y: str) -> bool:
    """Different members of one category: the two words share a direct hypernym among their first noun
    senses, and no sense (square / circle, city / town, men / women). Words that are mainly nouns: their
    TOP_SENSES noun senses; others by their first noun sense ("red" / "blue": chromatic colours, which
    WordNet's adjective clusters put side by side like "huge" / "enormous"). Verb hierarchies are left out:
    they are shallow, so near-synonyms share hypernyms (gives / hands)."""
    sx, sy = _nouns(x, TOP_SENSES) or _nouns(x, 1, False), _nouns(y, TOP_SENSES) or _nouns(y, 1, False)
    return bool(sx and sy and not senses(x) & senses(y) and _hyper(sx) & _hyper(sy))


__all__ = ["idiom", "synonym", "related", "opposed", "technical", "siblings", "cousins", "math_word", "base_form", "senses", "known", "TABLE",
           "MATH_WORDS", "TECHNICAL_DOMAINS"]
