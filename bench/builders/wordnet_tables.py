"""Build curate/dedup/pairs/wordnet_synonyms.txt.gz, the synonym table of the graded pair check, from WordNet 3.0.

    apt-get install wordnet-base          # Princeton WordNet 3.0 database files under /usr/share/wordnet
    python -m bench.builders.wordnet_tables [--wordnet /usr/share/wordnet] [--senses 3]

Why WordNet: the graded check (curate/dedup/pairs/text.py) treats a content word replaced by another content word
as a changed problem ("numerator" -> "denominator") unless the two are synonyms. A hand-written synonym list
would only hold the words someone looked at (the labelled set's pools); WordNet is an independent, general
table, so the held-out parts measure how the rule generalises.

What is kept: for each synset, its single-word lemmas for which the synset is among their `--senses` most
frequent senses (WordNet's index order), so rare senses ("volume" = a book) do not make look-alikes merge;
an adjective satellite also gets its head's lemmas ("tiny" ~ "small"). Synsets left with one lemma are
dropped. The morphological exception lists (bought -> buy, mice -> mouse) are kept for lemmatising.
Output lines: `S lemma lemma ...` and `X inflected base ...`, after a header with WordNet's licence.
"""

from __future__ import annotations

import argparse
import gzip
import re
from collections import defaultdict
from pathlib import Path

from bench.paths import REPO

OUT = REPO / "curate" / "dedup" / "pairs" / "wordnet_synonyms.txt.gz"
REL_OUT = OUT.with_name("wordnet_relations.txt.gz")
# WordNet's lexicographer files in file-number order (lexnames(5WN)): a synset's number says its domain.
LEXNAMES = ("adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body "
            "noun.cognition noun.communication noun.event noun.feeling noun.food noun.group noun.location "
            "noun.motive noun.object noun.person noun.phenomenon noun.plant noun.possession noun.process "
            "noun.quantity noun.relation noun.shape noun.state noun.substance noun.time verb.body verb.change "
            "verb.cognition verb.communication verb.competition verb.consumption verb.contact verb.creation "
            "verb.emotion verb.motion verb.perception verb.possession verb.social verb.stative verb.weather "
            "adj.ppl").split()
_LEMMA = re.compile(r"^[a-z]+(?:_[a-z]+){0,2}$")
# pointer symbols kept in the relation table: hypernyms (@, @i: instance), "near" links that WordNet uses
# between words of close meaning (& similar to, ^ also see, $ verb group, + derivationally related form,
# = attribute / value) and antonyms (!).
_HYPER, _NEAR, _ANT = {"@", "@i"}, {"&", "^", "$", "+", "="}, {"!"}
# gloss words that are never the genus of a definition ("a", "one", "any" are WordNet nouns too)
_GLOSS_SKIP = frozenset("a an the one any some each every all either other another its their his her".split())
POS = {"noun": "n", "verb": "v", "adj": "a", "adv": "r"}
# Lexicographer files of everyday nouns whose hypernym may stand in for them (money ~ cash, house ~ home):
# act, animal, artifact, body, event, food, group, location, object, person, plant, possession, substance.
# Not: attribute, cognition, communication, quantity, relation, shape, time ... where math objects nest
# (square < rectangle < polygon, numerator < dividend) and a hypernym is a different question.
EVERYDAY_NOUNS = frozenset({4, 5, 6, 8, 11, 13, 14, 15, 17, 18, 20, 21, 27})
LICENCE = """# Derived from Princeton WordNet 3.0 (https://wordnet.princeton.edu) by bench/builders/wordnet_tables.py.
# WordNet Release 3.0 This software and database is being provided to you, the LICENSEE, by Princeton
# University under the following license. By obtaining, using and/or copying this software and database,
# you agree that you have read, understood, and will comply with these terms and conditions.: Permission
# to use, copy, modify and distribute this software and database and its documentation for any purpose and
# without fee or royalty is hereby granted, provided that you agree to comply with the following copyright
# notice and statements, including the disclaimer, and that the same appear on ALL copies of the software,
# database and documentation, including modifications that you make for internal use or for distribution.
# WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved. THIS SOFTWARE AND DATABASE IS
# PROVIDED "AS IS" AND PRINCETON UNIVERSITY MAKES NO REPRESENTATIONS OR WARRANTIES, EXPRESS OR IMPLIED. BY
# WAY OF EXAMPLE, BUT NOT LIMITATION, PRINCETON UNIVERSITY MAKES NO REPRESENTATIONS OR WARRANTIES OF
# MERCHANT- ABILITY OR FITNESS FOR ANY PARTICULAR PURPOSE OR THAT THE USE OF THE LICENSED SOFTWARE,
# DATABASE OR DOCUMENTATION WILL NOT INFRINGE ANY THIRD PARTY PATENTS, COPYRIGHTS, TRADEMARKS OR OTHER
# RIGHTS. The name of Princeton University or Princeton may not be used in advertising or publicity
# pertaining to distribution of the software and/or database. Title to copyright in this software,
# database and any associated documentation shall at all times remain with Princeton University and
# LICENSEE agrees to preserve same.
"""


def _lines(path: Path):
    with open(path, encoding="latin-1") as fh:
        for line in fh:
            if line and not line.startswith(" "):
                yield line.split()


def top_senses(wn: Path, k: int) -> dict[tuple[str, str], set[str]]:
    """(pos, lemma) -> offsets of its k most frequent senses."""
    out: dict[tuple[str, str], set[str]] = {}
    for name, pos in POS.items():
        for f in _lines(wn / f"index.{name}"):
            n = int(f[2])
            out[(pos, f[0].lower())] = set(f[-n:][:k])
    return out


def synsets(wn: Path) -> dict[tuple[str, str], tuple[list[str], str | None, list[str]]]:
    """(pos, offset) -> (single-word lemmas, head offset for adjective satellites, hypernym offsets)."""
    out = {}
    for name, pos in POS.items():
        for f in _lines(wn / f"data.{name}"):
            n = int(f[3], 16)
            words = [f[4 + 2 * i].lower().split("(")[0] for i in range(n)]
            rest = f[4 + 2 * n:]
            ptrs = [rest[1 + 4 * i: 5 + 4 * i] for i in range(int(rest[0]))]
            head = next((q[1] for q in ptrs if q[0] == "&"), None) if f[2] == "s" else None
            hyper = [q[1] for q in ptrs if q[0] == "@" and q[2] == pos]
            if pos == "v" or (pos == "n" and int(f[1]) in EVERYDAY_NOUNS):
                out[(pos, f[0])] = ([w for w in words if w.isalpha()], head, hyper)
            else:
                out[(pos, f[0])] = ([w for w in words if w.isalpha()], head, [])
    return out


def build(wn: Path, k: int, hypernyms: int) -> tuple[list[list[str]], list[list[str]]]:
    """(synonym groups, exception lines)."""
    top = top_senses(wn, k)
    syn = synsets(wn)
    groups = []
    for (pos, off), (words, head, hyper) in sorted(syn.items()):
        p = "a" if pos == "s" else pos
        keep = {w for w in words if off in top.get((p, w), ())}
        if head is not None and (p, head) in syn:
            keep |= {w for w in syn[(p, head)][0] if head in top.get((p, w), ())}
        ups, frontier = set(), list(hyper)
        for _ in range(hypernyms if keep else 0):  # a word and its hypernyms (cash ~ currency), never siblings
            ups.update(frontier)
            frontier = [g for h in frontier if (pos, h) in syn for g in syn[(pos, h)][2]]
        keep |= {w for h in ups if (pos, h) in syn for w in syn[(pos, h)][0] if h in top.get((p, w), ())}
        if len(keep) >= 2:
            groups.append(sorted(keep))
    exc: dict[str, set[str]] = defaultdict(set)
    for name in POS:
        for f in _lines(wn / f"{name}.exc"):
            if f[0].isalpha():
                exc[f[0]].update(b for b in f[1:] if b.isalpha())
    return groups, [[w, *sorted(b)] for w, b in sorted(exc.items()) if b]


def relations(wn: Path) -> tuple[list[str], list[str]]:
    """The relation table of curate/dedup/pairs/relations.py.

    One `Y lexnum hypernyms near antonyms genus` line per synset (ids = order of the Y lines, lists
    comma-joined, '-' when empty). `genus`: for a noun synset, the first two noun senses of the first word of
    its gloss that is mainly a noun ("cash: money in the form of bills or coins" -> money; "pizza: Italian
    open pie ..." -> pie): the word a definition defines by, a relation WordNet's pointers often lack.
    One `L lemma n;v;a;r counts` line per lemma: its synset ids per part of speech in WordNet's sense order
    (most frequent first), then its SemCor tag counts per part of speech (cntlist.rev: which part of speech
    the word mostly is in running text). Lemmas: lower-case, one to three words joined by '_' ("use_up",
    "at_random"; hyphens become '_'); all senses are kept."""
    ids: dict[tuple[str, str], int] = {}
    rows: list[tuple[int, list[tuple[str, str, str]], str, list[str]]] = []
    for name, pos in POS.items():
        for f in _lines(wn / f"data.{name}"):
            n = int(f[3], 16)
            rest = f[4 + 2 * n:]
            ptrs = [(q[0], "a" if q[2] == "s" else q[2], q[1]) for q in
                    (rest[1 + 4 * i: 5 + 4 * i] for i in range(int(rest[0])))]
            gloss = " ".join(f[f.index("|") + 1:]) if "|" in f else ""
            ids[(pos, f[0])] = len(rows)
            rows.append((int(f[1]), ptrs, pos, re.findall(r"[a-z]+", gloss.split(";")[0].lower())))
    senses: dict[str, dict[str, list[int]]] = defaultdict(dict)
    for name, pos in POS.items():
        for f in _lines(wn / f"index.{name}"):
            lemma = f[0].lower().replace("-", "_")
            if _LEMMA.match(lemma):
                n = int(f[2])
                senses[lemma].setdefault(pos, []).extend(ids[(pos, o)] for o in f[-n:])
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for f in _lines(wn / "cntlist.rev"):  # sense_key sense_number tag_count (SemCor frequencies)
        lemma, _, rest = f[0].partition("%")
        counts[lemma.lower().replace("-", "_")]["0123".index(str(min(int(rest[0]), 3) - 1)) if rest[0] != "5" else 2] \
            += int(f[2])

    def mainly_noun(w: str) -> bool:
        c, s = counts.get(w, [0, 0, 0, 0]), senses.get(w, {})
        return "n" in s and w not in _GLOSS_SKIP and all((c[0], len(s["n"])) >= (c[i], len(s.get(p, [])))
                                                         for i, p in enumerate("var", 1))

    ys = []
    for lex, ptrs, pos, gloss in rows:
        cols = [sorted({ids[(p, o)] for sym, p, o in ptrs if sym in kind and (p, o) in ids})
                for kind in (_HYPER, _NEAR, _ANT)]
        genus = next((w for w in gloss[:8] if mainly_noun(w)), None) if pos == "n" else None
        cols.append(sorted(senses[genus]["n"][:2]) if genus else [])
        ys.append(f"Y {lex} " + " ".join(",".join(map(str, c)) or "-" for c in cols))
    ls = [f"L {w} " + ";".join(",".join(map(str, s.get(p, []))) or "-" for p in "nvar")
          + " " + ",".join(map(str, counts.get(w, [0, 0, 0, 0]))) for w, s in sorted(senses.items())]
    return ys, ls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wordnet", default="/usr/share/wordnet")
    ap.add_argument("--senses", type=int, default=5, help="most frequent senses of a lemma that count")
    ap.add_argument("--hypernyms", type=int, default=1, help="levels of hypernyms a verb or everyday noun also matches (0: synonyms only)")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    groups, exc = build(Path(args.wordnet), args.senses, args.hypernyms)
    text = LICENCE + f"# --senses {args.senses} --hypernyms {args.hypernyms}\n" + "".join("S " + " ".join(g) + "\n" for g in groups) \
        + "".join("X " + " ".join(e) + "\n" for e in exc)
    with gzip.GzipFile(args.out, "wb", mtime=0) as fh:  # mtime 0: the same input gives the same bytes
        fh.write(text.encode())
    print(f"{args.out}: {len(groups)} synonym groups, {len(exc)} exceptions, {Path(args.out).stat().st_size} bytes")
    ys, ls = relations(Path(args.wordnet))
    rel_out = Path(args.out).with_name(REL_OUT.name)
    with gzip.GzipFile(rel_out, "wb", mtime=0) as fh:
        fh.write((LICENCE + "# lexnames: " + " ".join(LEXNAMES) + "\n" + "\n".join(ys + ls) + "\n").encode())
    print(f"{rel_out}: {len(ys)} synsets, {len(ls)} lemmas, {rel_out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
