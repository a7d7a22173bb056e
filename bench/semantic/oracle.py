"""What a perfect judge over the semantic tier's embedding candidates could reach, and how much it would read.

    python -m bench.semantic.oracle --part tune|held

The tier has two halves: embedding neighbours propose candidates, the pair check decides. This probe separates
them on the hand-written sets (bench/semantic/written.py). Decontamination: for each rephrasing, the rank and
cosine of its own benchmark item among every problem of the eval benchmarks; the recall of an oracle judge that
accepts the true item whenever it is among the row's top k by cosine >= c. Its cost: the candidate pairs (row,
item) with cosine >= c among the top k a judge would have to read per 1,000 real training rows (the
`bench.semantic.real` rows: GSM8K train + MATH train against gsm8k_test + math500), nearly every one a "no".
Dedup: for each reworded pair, whether one text is among the other's top k neighbours in the part's pooled
texts at cosine >= c, and the candidate pairs per 1,000 texts of the part.

The recall of today's pair check on the same part is `bench.semantic.eval`'s; the gap between the two is what the
pair check loses, the gap between the oracle and 1.0 what the embeddings lose.
"""

from __future__ import annotations

import argparse
import logging

import numpy as np

from bench.semantic.eval import BENCHMARKS
from bench.semantic.real import _rows, encode_cached
from bench.semantic.sets import SHARED
from bench.semantic.written import build_written_decontam, build_written_dedup
from cotforge.curate.core.benchmarks import load_benchmarks
from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.text.embed import embedder_for

KS = (1, 5)
COSINES = (0.5, 0.6, 0.7, 0.8)
REWORDED = ("light", "moderate", "heavy")


def _top(sims: np.ndarray, k: int) -> np.ndarray:
    """Per row, the columns of its k largest values (unordered)."""
    k = min(k, sims.shape[1])
    return np.argpartition(-sims, k - 1, axis=1)[:, :k]


def _found(sims: np.ndarray, truth: np.ndarray, k: int, c: float) -> np.ndarray:
    """Whether each row's true column is among its top k with a cosine >= c."""
    top = _top(sims, k)
    rows = np.arange(len(truth))
    return (top == truth[:, None]).any(axis=1) & (sims[rows, truth] >= c)


def _per_1000(sims: np.ndarray, k: int, c: float) -> float:
    """Candidate pairs (top k, cosine >= c) per 1,000 rows."""
    top = _top(sims, k)
    return 1000.0 * float((np.take_along_axis(sims, top, axis=1) >= c).sum()) / len(sims)


def oracle_decontam(part: str, emb) -> None:
    items = [(name, it.id, it.problem) for name, its in load_benchmarks(BENCHMARKS, SHARED / "benchmarks").items()
             for it in its]
    where = {(n.split("_")[0], i): j for j, (n, i, _) in enumerate(items)}
    rows = [r for r in build_written_decontam(SHARED) if r.part == part and r.kind in REWORDED]
    truth = np.array([where[(r.benchmark.split("_")[0], r.item_id)] for r in rows])
    iv = encode_cached(emb, [t for _, _, t in items], "oracle-items")
    sims = encode_cached(emb, [r.prompt for r in rows], f"oracle-rows-{part}") @ iv.T
    real = _rows(None)
    real_items = [t for n, _, t in items if n in ("gsm8k_test", "math500")]
    real_sims = encode_cached(emb, [t for _, t in real], "row") @ encode_cached(emb, real_items, "item").T
    rank = (sims > sims[np.arange(len(rows)), truth][:, None]).sum(axis=1) + 1
    print(f"decontamination, written {part} part: {len(rows)} rephrasings vs {len(items)} items; true item rank 1 for "
          f"{int((rank == 1).sum())}, <= 5 for {int((rank <= 5).sum())}")
    for kind in REWORDED:
        sel = np.array([r.kind == kind for r in rows])
        cs = sims[np.arange(len(rows)), truth][sel]
        print(f"  {kind:9s} n={int(sel.sum()):3d} true-item cosine p10/p50 {np.percentile(cs, 10):.3f}/"
              f"{np.median(cs):.3f}")
    for k in KS:
        for c in COSINES:
            ok = _found(sims, truth, k, c)
            per = {kind: f"{int(ok[[r.kind == kind for r in rows]].sum())}" for kind in REWORDED}
            print(f"  oracle top-{k} cos>={c:.1f}: recall {ok.mean():.3f} (light/moderate/heavy "
                  f"{per['light']}/{per['moderate']}/{per['heavy']}); a judge reads "
                  f"{_per_1000(real_sims, k, c):.0f} pairs per 1,000 real training rows")


def oracle_dedup(part: str, emb) -> None:
    pairs = [p for p in build_written_dedup(SHARED) if p.part == part]
    texts = list(dict.fromkeys(t for p in pairs for t in (p.a, p.b)))
    at = {t: i for i, t in enumerate(texts)}
    v = encode_cached(emb, texts, f"oracle-dedup-{part}")
    sims = v @ v.T
    np.fill_diagonal(sims, -1.0)
    dup = [p for p in pairs if p.duplicate and p.kind in REWORDED and p.a != p.b]
    a = np.array([at[p.a] for p in dup])
    b = np.array([at[p.b] for p in dup])
    print(f"dedup, written {part} part: {len(dup)} reworded pairs among {len(texts)} texts")
    for k in KS:
        for c in COSINES:
            ok = _found(sims[a], b, k, c) | _found(sims[b], a, k, c)
            print(f"  oracle top-{k} cos>={c:.1f}: recall {ok.mean():.3f}; a judge reads "
                  f"{_per_1000(sims, k, c) / 2:.0f} pairs per 1,000 texts of the part")


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=("tune", "held"), default="tune")
    args = ap.parse_args()
    emb = embedder_for(DecontamConfig())
    oracle_decontam(args.part, emb)
    oracle_dedup(args.part, emb)


if __name__ == "__main__":
    main()
