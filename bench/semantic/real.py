"""The semantic tier's flags on real training rows that are not benchmark items (GSM8K train, MATH train) against
gsm8k_test + math500: every flag here is a false positive unless a row really rephrases a test item, so each
printed pair is read by hand.

    python -m bench.semantic.real [--rows N] [--benchmarks gsm8k_test,math500]

Only the semantic pair check is run (the lexical tiers are `bench/decontam_sources.py`'s business): each row's
`semantic_top_k` nearest items by cosine >= `semantic_cosine`, then `pair_verdict` with the question cosine.
Row and item vectors are cached on disk (cotforge cache folder) by model and texts, so a change of the pair
check is re-checked in seconds.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import logging
import time
from collections import Counter

import numpy as np

from bench.semantic.sets import SHARED
from cotforge.curate.core.benchmarks import load_benchmarks
from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.decontam.semantic import thresholds
from cotforge.curate.dedup.pairs.semantic import pair_verdict, question_of
from cotforge.curate.text.embed import Embedder, cache_dir, cached_array

SOURCES = ("gsm8k_train_human.jsonl.gz", "deepscaler_math_train.jsonl.gz")


def _rows(n: int | None) -> list[tuple[str, str]]:
    out = []
    for name in SOURCES:
        with gzip.open(SHARED / "sft_sources" / name, "rt") as f:
            rows = [json.loads(line) for line in f]
        out += [(r["id"], r["problem"]) for r in rows[:n] if r.get("problem")]
    return out


def _encode(emb: Embedder, texts: list[str], tag: str) -> np.ndarray:
    h = hashlib.sha256(f"{emb.model_dir.resolve()}\0{emb.max_tokens}\0{tag}".encode())
    for t in texts:
        h.update(t.encode("utf-8", "replace") + b"\0")
    return cached_array(cache_dir() / "semantic" / f"{h.hexdigest()[:32]}.npy", (len(texts), emb.dim),
                        lambda: emb.encode(texts))


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=None, help="first N rows of each source (default: all)")
    ap.add_argument("--benchmarks", default="gsm8k_test,math500")
    args = ap.parse_args()
    cfg = DecontamConfig()
    th = thresholds(cfg)
    items = [it.problem for its in load_benchmarks(args.benchmarks.split(","), SHARED / "benchmarks").values()
             for it in its]
    rows = _rows(args.rows)
    emb = Embedder(cfg.semantic_model)
    t0 = time.time()
    iv, iq = _encode(emb, items, "item"), _encode(emb, [question_of(t) for t in items], "question")
    rv, rq = _encode(emb, [t for _, t in rows], "row"), _encode(emb, [question_of(t) for _, t in rows], "rowq")
    t1 = time.time()
    sims = rv @ iv.T
    k = min(cfg.semantic_top_k, sims.shape[1])
    top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    why: Counter = Counter()
    flagged = 0
    for i, (rid, text) in enumerate(rows):
        hit = False
        for e in top[i].tolist():
            c = float(sims[i, e])
            if c < th.min_cosine:
                continue
            v = pair_verdict(items[e], text, c, float(rq[i] @ iq[e]), th)
            why[v or "flagged"] += 1
            if v is None:
                hit = True
                print(f"=== FLAG {rid} cos={c:.3f}\n  ITEM: {items[e][:400]!r}\n  ROW : {text[:400]!r}")
        flagged += hit
    print(f"{len(rows)} rows vs {len(items)} items: {flagged} flagged; pair verdicts {dict(why)}; "
          f"vectors {t1 - t0:.1f}s")


if __name__ == "__main__":
    main()
