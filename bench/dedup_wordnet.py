"""Build curate/dedup/wordnet_synonyms.txt.gz, the synonym table of the graded pair check, from WordNet 3.0.

    apt-get install wordnet-base          # Princeton WordNet 3.0 database files under /usr/share/wordnet
    python bench/dedup_wordnet.py [--wordnet /usr/share/wordnet] [--senses 3]

Why WordNet: the graded check (curate/dedup/pairs.py) treats a content word replaced by another content word
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
from collections import defaultdict
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "curate" / "dedup" / "wordnet_synonyms.txt.gz"
POS = {"noun": "n", "verb": "v", "adj": "a", "adv": "r"}
# Lexicographer files of everyday nouns whose hypernym may stand in for them (money ~ cash, house ~ home):
# act, animal, artifact, body, event, food, group, location, object, person, plant, possession, substance.
# Not: attribute, cognition, communication, quantity, relation, shape, time ... where math objects nest
# (square < rectangle < polygon, numerator < dividend) and a hypernym is a different question.
EVERYDAY_NOUNS = frozenset({4, 5, 6, 8, 11, 13, 14, 15, 17, 18, 20, 21, 27})
LICENCE = """# Derived from Princeton WordNet 3.0 (https://wordnet.princeton.edu) by bench/dedup_wordnet.py.
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


if __name__ == "__main__":
    main()
