"""Build curate/dedup/pairs/math_words.txt: words much more frequent in competition math problems than in
grade-school word problems, for the graded pair check (curate/dedup/pairs/relations.py `math_word`).

    python -m bench.builders.math_words [--ratio 10] [--min-count 10]

Why: a word replaced by a word WordNet does not relate merges under `word_relations="flip"` unless there is
evidence that the replacement changes the problem. WordNet's domains (noun.quantity, noun.shape ...) miss
much of the vocabulary of geometry and number theory ("diagonal", "vertex", "inscribed" are mostly
adjectives / verbs or everyday nouns there). Here the evidence is distributional and measured, not listed:
the prose (outside LaTeX math) of the MATH train problems and AIME 1983-2023 (the DeepScaleR pools in
../shared/data/sft_sources) against the GSM8K train problems, whose vocabulary is everyday life (money,
pizza, tickets, friends). A base form (WordNet morphy through relations.py) is a math word when its rate in
the competition text is >= `--ratio` times its (add-2 smoothed) rate in GSM8K and it occurs >= `--min-count`
times there. Output: one `word ratio competition_count gsm8k_count` line per word, sorted by word.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import re
import sys
from pathlib import Path

from bench.paths import REPO, SHARED

SOURCES = SHARED / "sft_sources"
OUT = REPO / "curate" / "dedup" / "pairs" / "math_words.txt"
COMPETITION = ("deepscaler_math_train", "deepscaler_aime_1983_2023")
EVERYDAY = ("gsm8k_train_human",)
_MATH = re.compile(r"\$\$.+?\$\$|\$.+?\$|\\\(.+?\\\)|\\\[.+?\\\]|\[asy\].*?\[/asy\]", re.DOTALL)


def base_counts(files: tuple[str, ...]) -> collections.Counter[str]:
    """Counts of the base forms (shortest form WordNet knows, else the word) of the prose words."""
    from cotforge.curate.dedup.pairs.relations import base_form

    words: collections.Counter[str] = collections.Counter()
    for name in files:
        with gzip.open(SOURCES / f"{name}.jsonl.gz", "rt", encoding="utf-8") as fh:
            for line in fh:
                words.update(re.findall(r"[a-z]+", _MATH.sub(" ", json.loads(line)["problem"]).lower()))
    out: collections.Counter[str] = collections.Counter()
    for w, n in words.items():
        out[base_form(w)] += n
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ratio", type=float, default=10.0)
    ap.add_argument("--min-count", type=int, default=10)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    if not SOURCES.is_dir():
        sys.exit(f"no {SOURCES}")
    comp, every = base_counts(COMPETITION), base_counts(EVERYDAY)
    nc, ne = sum(comp.values()), sum(every.values())
    rows = []
    for w, n in sorted(comp.items()):
        ratio = (n / nc) / ((every[w] + 2) / ne)
        if n >= args.min_count and ratio >= args.ratio and len(w) >= 3:
            rows.append(f"{w} {ratio:.1f} {n} {every[w]}")
    head = (f"# bench/builders/math_words.py --ratio {args.ratio} --min-count {args.min_count}: {', '.join(COMPETITION)} "
            f"({nc} prose words) vs {', '.join(EVERYDAY)} ({ne})\n# word ratio competition_count gsm8k_count\n")
    Path(args.out).write_text(head + "\n".join(rows) + "\n", encoding="utf-8")
    print(f"{args.out}: {len(rows)} words")


if __name__ == "__main__":
    main()
