"""The semantic tier's flags on real training rows that are not benchmark items (GSM8K train, MATH train) against
gsm8k_test + math500: every flag here is a false positive unless a row really rephrases a test item, so each
printed pair is read by hand.

    python -m bench.semantic.real [--rows N] [--benchmarks gsm8k_test,math500] [--set-opt key=value ...]

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
from dataclasses import replace

import numpy as np

from bench.semantic.sets import SHARED
from cotforge.curate.core.benchmarks import load_benchmarks
from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.decontam.semantic import thresholds
from cotforge.curate.dedup.pairs.semantic import pair_verdict, question_of
from cotforge.curate.text.embed import Embedder, cache_dir, embedder_for

SOURCES = ("gsm8k_train_human.jsonl.gz", "deepscaler_math_train.jsonl.gz")


def _rows(n: int | None) -> list[tuple[str, str]]:
    out = []
    for name in SOURCES:
        with gzip.open(SHARED / "sft_sources" / name, "rt") as f:
            rows = [json.loads(line) for line in f]
        out += [(r["id"], r["problem"]) for r in rows[:n] if r.get("problem")]
    return out


def encode_cached(emb: Embedder, texts: list[str], tag: str) -> np.ndarray:
    """emb.encode(texts), cached per text in the cotforge cache folder (one store per model and `tag`), so a
    change of a few texts (another question sentence) embeds only those."""
    key = hashlib.sha256(f"{emb.cache_tag}\0{tag}".encode()).hexdigest()[:24]
    store = cache_dir() / "semantic" / f"bench-{key}.npz"
    have: dict[str, np.ndarray] = {}
    if store.is_file():
        with np.load(store) as z:
            have = dict(zip(z["keys"].tolist(), z["vecs"], strict=True))
    keys = [hashlib.sha256(t.encode("utf-8", "replace")).hexdigest()[:32] for t in texts]
    todo = [i for i, k in enumerate(dict.fromkeys(keys)) if k not in have]
    if todo:
        uniq = list(dict.fromkeys(keys))
        first = {k: i for i, k in reversed(list(enumerate(keys)))}
        new = [uniq[i] for i in todo]
        have.update(zip(new, emb.encode([texts[first[k]] for k in new]), strict=True))
        store.parent.mkdir(parents=True, exist_ok=True)
        tmp = store.with_suffix(f".tmp{time.time_ns()}.npz")
        np.savez(tmp, keys=np.array(list(have), dtype="U32"), vecs=np.stack(list(have.values())))
        tmp.rename(store)
    return np.stack([have[k] for k in keys]) if texts else np.zeros((0, emb.dim), np.float32)


def dedup_real(rows: list[tuple[str, str]]) -> None:
    """The semantic tier of dedup on real rows: the merges it adds to the graded check's, printed for reading."""
    from cotforge.curate.dedup.config import DedupConfig
    from cotforge.curate.dedup.semantic import RECHECK, check_pairs, neighbour_pairs, thresholds

    cfg = DedupConfig(semantic=True)
    emb = embedder_for(cfg)
    texts = [t for _, t in rows]
    vecs = encode_cached(emb, texts, "row")
    cands = [(i, j, c) for i, j, c in neighbour_pairs(vecs, cfg.semantic_top_k, cfg.semantic_cosine)
             if texts[i].strip() != texts[j].strip()]
    graded, _ = check_pairs(cands, texts, emb, thresholds(cfg), cfg, frozenset(), graded_only=True)
    merged, stats = check_pairs(cands, texts, emb, thresholds(cfg), cfg, RECHECK)
    before = {(i, j) for i, j, _ in graded}
    new = [(i, j, c) for i, j, c in merged if (i, j) not in before]
    for i, j, c in new:
        print(f"=== MERGE {rows[i][0]} ~ {rows[j][0]} cos={c:.3f}\n  A: {texts[i][:400]!r}\n  B: {texts[j][:400]!r}")
    print(f"{len(rows)} rows: {len(cands)} candidate pairs; graded check alone merges {len(before)}; with the "
          f"semantic check {len(merged)} ({len(new)} new); {stats}")


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=None, help="first N rows of each source (default: all)")
    ap.add_argument("--benchmarks", default="gsm8k_test,math500")
    ap.add_argument("--dedup", action="store_true", help="instead: the dedup tier's merges within the rows (graded "
                    "check first, as in the stage); each merge the graded check alone would not make is printed")
    ap.add_argument("--set-opt", action="append", default=[], help="DecontamConfig override key=value "
                    "(e.g. semantic_cosine=0.75)")
    args = ap.parse_args()
    if args.dedup:
        return dedup_real(_rows(args.rows))
    cfg = DecontamConfig()
    for opt in args.set_opt:
        key, value = opt.split("=", 1)
        cfg = replace(cfg, **{key: type(getattr(cfg, key))(value)})
    th = thresholds(cfg)
    items = [it.problem for its in load_benchmarks(args.benchmarks.split(","), SHARED / "benchmarks").values()
             for it in its]
    rows = _rows(args.rows)
    emb = embedder_for(cfg)
    t0 = time.time()
    iv, iq = encode_cached(emb, items, "item"), encode_cached(emb, [question_of(t) for t in items], "question")
    rv, rq = encode_cached(emb, [t for _, t in rows], "row"), encode_cached(emb, [question_of(t) for _, t in rows], "rowq")
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
