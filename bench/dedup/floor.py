"""The floor of dedup's speed: the least work any stage that gives the same verdicts must do, timed in one run
with the plain datasketch MinHash-LSH loop of bench/dedup/speed.py (its `measure("baseline", ...)`), on the same
generated corpus (`speed.generate`).

Levels, cumulative, each with 1 and 2 processes (rows split into equal contiguous ranges, one per process, as
the stage's tasks are contiguous row ranges; each process reads its rows from the input Parquet in record
batches and writes its own kept Parquet, zstd, as the stage's split step does):
- `io`: read every input row + write it to kept (all rows count as kept for the floor);
- `sig`: `io` + the signature step's own computation for every row (`batch_keys`: the text kernel's normalise of
  each distinct prompt and of every response, problem and pair keys; the source priority and preference order
  (`ProblemSignature._priorities`, `pack_order`); `first_new`: the first row of each problem key; `dedup_texts`,
  `number_keys`, `band_signatures`: MinHash with the number guard's salt), with the stage's default
  `DedupConfig`, in the stage's function calls (`sign_batch` below; tests/test_dedup_floor.py checks its
  signatures equal the stage's band files). Not written: the step's key, head and band files;
- `buckets`: `sig` + the candidate pairs of the LSH bands with numpy: per band one 64-bit hash of its
  `rows_per_band` values, a stable argsort, and the pairs of each run of equal hashes (`buckets._run_pairs`,
  the stage's rule); no pair checks, no clustering, no decision files. With 2 processes each writes its
  heads' band hashes (band-major .npy) and then takes every second band, as the stage's bucket step splits bands.
With 2 processes, the processes come from a fork server that preloads the text kernel and the signature
step's modules (`PRELOAD`: the stage's local executor starts its task processes from such a server), all in the
time; with 1 process the fresh interpreter does the work itself.

Each level runs in a fresh interpreter, timed from its start of work to its last shard written (as speed.py times
the baseline). Printed per level: seconds with 1 and 2 processes, and for each the speed-up vs the baseline
and the level's time as a share of the budget (baseline / 6 at >= 1M rows, baseline / 4 below, the issue's
targets): above 1.00 the floor alone is over the budget. Best of `--repeats` runs per level. Run it under the
CPU lock (50k and 1M rows: ~6 minutes on a quiet machine):

    /tmp/tools/heavy python -m bench.dedup.floor --sizes 50000 1000000 --procs 1 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.child import child_result
from bench.paths import REPO

LEVELS = ("io", "sig", "buckets")
SOURCE = "gen"  # speed.run_ours's source name: every row has it
BAND_MULT = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93,
             0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53, 0x94D049BB133111EB, 0xBF58476D1CE4E5B9)


# What the fork server imports before it forks the worker processes: for `io` the reader helpers; else also the
# stage's own preload (`engine.executor.FORKSERVER_PRELOAD`: the text kernel loaded; listed here, not imported:
# that import costs this process ~0.3 s) and the signature step, so each worker starts with them.
PRELOAD = {"io": ("bench.decontam.floor",),
           "sig": ("cotforge.curate.engine.warm", "cotforge.curate.dedup.signature", "bench.decontam.floor")}


def target_of(n_rows: int) -> int:
    """The issue's target speed-up at this size: 6x at 1M rows, 4x at 50k (below 1M)."""
    return 6 if n_rows >= 1_000_000 else 4


class Signer:
    """The signature step's per-batch computation (`ProblemSignature._sign_task`'s loop body, the same calls),
    for rows of one process: returns each batch's problem heads (global row index) and their band signatures."""

    def __init__(self, rank: int, cfg=None):
        from cotforge.curate.dedup.config import DedupConfig
        from cotforge.curate.dedup.signature import ProblemSignature

        self.cfg = cfg or DedupConfig()
        self.rank = rank
        self.seen: set[int] = set()
        self.prio_of: dict[str, int] = {}
        # only for its `_priorities` (nothing is written: the folders are never opened)
        self._step = ProblemSignature(tempfile.gettempdir(), tempfile.gettempdir(), self.cfg)

    def sign_batch(self, prompts: list, responses: list, sources, start: int):
        import numpy as np

        from cotforge.curate.dedup.core import (
            band_signatures,
            batch_keys,
            dedup_texts,
            number_keys,
            pack_order,
        )
        from cotforge.curate.dedup.signature import first_new

        cfg = self.cfg
        kb = batch_keys(prompts, responses, cfg.norm, with_numbers=False, kernel=cfg.text_kernel)
        idx = np.arange(start, start + len(prompts), dtype=np.int64)
        prio = self._step._priorities(sources, self.prio_of)
        pack_order(prio, self.rank, idx)  # the rows' preference order (the stage keeps it in its key files)
        new = first_new(kb.pkey, self.seen)
        texts = dedup_texts([prompts[i] for i in new.tolist()], [kb.norm_prompts[i] for i in new.tolist()], cfg)
        num = number_keys(texts)
        sig, has = band_signatures(texts, num, cfg)
        return idx[new[has]], sig[has]


def band_hashes(sig, cfg):
    """(bands x heads) uint64: one hash of each band's `rows_per_band` values (two heads with equal values in a
    band get equal hashes; the stage compares the values themselves)."""
    import numpy as np

    r = cfg.rows_per_band
    mult = np.array([BAND_MULT[i % len(BAND_MULT)] | 1 for i in range(r)], dtype=np.uint64)
    out = np.empty((cfg.bands, len(sig)), dtype=np.uint64)
    for b in range(cfg.bands):
        out[b] = (sig[:, b * r:(b + 1) * r] * mult).sum(axis=1, dtype=np.uint64)
    return out


def band_pairs(key, ids):
    """Candidate pairs (row a, row b) of one band: heads `ids` whose band hash `key` is equal (the stage's
    `_run_pairs` rule on a stable sort, heads in row order as the stage orders ties)."""
    import numpy as np

    from cotforge.curate.dedup.buckets import _run_pairs

    if len(key) < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.argsort(key, kind="stable")
    ks = key[order]
    a, b = _run_pairs(ks[1:] == ks[:-1])
    return ids[order[a]], ids[order[b]]


def work(level: str, path: str, out: str, k: int, procs: int, n_rows: int, rows_per_batch: int) -> dict:
    """One process's share: rows of range k of `procs` to out/kept-k.parquet (+ signatures, + band hashes).
    With one process `buckets` also finds the pairs here; with more, the band hashes go to out/bands-k.npy."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bench.decontam.floor import _batches, _row_range

    lo, hi = _row_range(k, procs, n_rows)
    signer = Signer(k) if level != "io" else None
    heads, band_keys = [], []
    writer = None
    at = lo
    try:
        for b in _batches(path, lo, hi, rows_per_batch):
            if signer is not None:
                h, s = signer.sign_batch(b.column("problem").to_pylist(), b.column("solution").to_pylist(),
                                         pa.array([SOURCE] * b.num_rows, pa.string()), at)
                heads.append(h)
                # `buckets` keeps only the band hashes (25 per head, made per batch), `sig` nothing more
                band_keys.append(band_hashes(s, signer.cfg) if level == "buckets" else s[:0])
            at += b.num_rows
            writer = writer or pq.ParquetWriter(Path(out) / f"kept-{k}.parquet", b.schema, compression="zstd")
            writer.write_batch(b)
    finally:
        if writer is not None:
            writer.close()
    res = {"rows": at - lo, "heads": int(sum(len(h) for h in heads)), "pairs": 0,
           "bands": signer.cfg.bands if signer else 0}
    if level == "buckets":
        cfg = signer.cfg
        ids = np.concatenate(heads) if heads else np.zeros(0, np.int64)
        keys = np.concatenate(band_keys, axis=1) if band_keys else np.zeros((cfg.bands, 0), np.uint64)
        if procs == 1:
            res["pairs"] = sum(len(band_pairs(keys[band], ids)[0]) for band in range(cfg.bands))
        else:
            np.save(Path(out) / f"bands-{k}.npy", keys)
            np.save(Path(out) / f"ids-{k}.npy", ids)
    return res


def bucket_work(out: str, procs: int, bands: list[int]) -> int:
    """The candidate pairs of `bands` from every process's band hashes (out/bands-K.npy, in row order)."""
    import numpy as np

    ids = np.concatenate([np.load(Path(out) / f"ids-{k}.npy") for k in range(procs)])
    maps = [np.load(Path(out) / f"bands-{k}.npy", mmap_mode="r") for k in range(procs)]
    n = 0
    for band in bands:
        n += len(band_pairs(np.concatenate([np.asarray(m[band]) for m in maps]), ids)[0])
    return n


def run_procs(level: str, path: str, out: str, procs: int) -> dict:
    """The whole file at one level with `procs` processes (this one alone, or a fork-server pool)."""
    import pyarrow.parquet as pq

    from bench.decontam.floor import BATCH_BYTES

    md = pq.ParquetFile(path).metadata
    n_rows = md.num_rows
    avg = max(md.row_group(0).total_byte_size / max(md.row_group(0).num_rows, 1), 1.0) if md.num_row_groups else 1.0
    rows_per_batch = max(16, int(BATCH_BYTES / avg))
    if procs == 1:
        return work(level, path, out, 0, 1, n_rows, rows_per_batch)
    import multiprocessing as mp

    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD["io" if level == "io" else "sig"]))
    with ctx.Pool(procs) as pool:
        parts = pool.starmap(work, [(level, path, out, k, procs, n_rows, rows_per_batch) for k in range(procs)])
        res = {key: sum(p[key] for p in parts) for key in ("rows", "heads", "pairs")}
        if level == "buckets":
            bands = parts[0]["bands"]
            res["pairs"] = sum(pool.starmap(bucket_work, [(out, procs, list(range(k, bands, procs)))
                                                          for k in range(procs)]))
    return res


def _stage_outputs(rows, work: Path) -> tuple[dict, dict]:
    """The signature step's band values per head (row index -> num_perm values) and the bucket step's candidate
    pairs per band (sets of (row, row)), on `rows` (a pyarrow Table of generated rows) as one task of rank 0."""
    import numpy as np
    import pyarrow as pa

    from cotforge.curate.dedup.buckets import ArrayBuckets, band_dtype
    from cotforge.curate.dedup.config import DedupConfig
    from cotforge.curate.dedup.signature import ProblemSignature

    cfg = DedupConfig()
    batches = [(b.column("problem").to_pylist(), b.column("solution").to_pylist(),
                pa.array([SOURCE] * b.num_rows, pa.string())) for b in rows.to_batches(max_chunksize=4096)]
    ProblemSignature(str(work / "sigs"), str(work), cfg)._sign_task(iter(batches), 0)
    r = cfg.rows_per_band
    sigs: dict[int, np.ndarray] = {}
    for band in range(cfg.bands):
        rec = np.fromfile(work / "sigs" / f"bucket_{band:03d}" / "00000.minhash.sig", dtype=band_dtype(r))
        for row in rec:
            sigs.setdefault(int(row["doc"]), np.zeros(cfg.num_perm, np.uint64))[band * r:(band + 1) * r] = \
                [row[f"h{i}"] for i in range(r)]
    list(ArrayBuckets(str(work / "sigs"), str(work / "buckets"), cfg).run())
    pairs = {}
    for band in range(cfg.bands):
        dups = np.fromfile(work / "buckets" / f"{band:05d}_00.dups", dtype="<u4").reshape(-1, 4)
        pairs[band] = {(min(a, b), max(a, b)) for a, b in dups[:, [1, 3]].tolist()}
    return sigs, pairs


def check(n_rows: int) -> list[str]:
    """On `n_rows` generated rows: every level runs with 1 and 2 processes and keeps every row; the `sig` level's
    signatures (made in batches of 150 rows) equal the signature step's band files, the `buckets` level's pairs
    per band equal the bucket step's `.dups`, and one process finds as many pairs as the stage's one task.
    Returns what differs (empty: the floor times the stage's own work)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bench.dedup.speed import generate
    from cotforge.curate.engine.executor import FORKSERVER_PRELOAD

    bad = [] if set(FORKSERVER_PRELOAD) <= set(PRELOAD["sig"]) else ["PRELOAD lacks the stage's fork-server preload"]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "gen.parquet"
        generate(path, n_rows, seed=3)
        counts = {}
        for level in LEVELS:
            for procs in (1, 2):
                out = Path(d) / f"{level}-{procs}"
                out.mkdir()
                res = run_procs(level, str(path), str(out), procs)
                kept = sum(pq.ParquetFile(f).metadata.num_rows for f in out.glob("kept-*.parquet"))
                if res["rows"] != n_rows or kept != n_rows:
                    bad.append(f"{level} x{procs}: {res['rows']} rows read, {kept} kept of {n_rows}")
                if (res["heads"] > 0) != (level != "io") or (res["pairs"] > 0) != (level == "buckets"):
                    bad.append(f"{level} x{procs}: {res['heads']} heads, {res['pairs']} pairs")
                counts[level, procs] = res
        rows = pq.read_table(path)
        want_sigs, want_pairs = _stage_outputs(rows, Path(d) / "stage")
    signer = Signer(0)
    heads, sigs, at = [], [], 0
    for b in rows.to_batches(max_chunksize=150):  # other batches than the stage's: the same heads
        h, s = signer.sign_batch(b.column("problem").to_pylist(), b.column("solution").to_pylist(),
                                 pa.array([SOURCE] * b.num_rows, pa.string()), at)
        at += b.num_rows
        heads.append(h)
        sigs.append(s)
    ids, sig = np.concatenate(heads), np.concatenate(sigs)
    if sorted(ids.tolist()) != sorted(want_sigs):
        bad.append(f"heads: {len(ids)} vs the stage's {len(want_sigs)}")
    else:
        bad += [f"signature of row {i} differs" for i, row in zip(ids.tolist(), sig, strict=True)
                if not np.array_equal(row, want_sigs[i])]
    keys = band_hashes(sig, signer.cfg)
    got = 0
    for band in range(signer.cfg.bands):
        a, b = band_pairs(keys[band], ids)
        if {(min(x, y), max(x, y)) for x, y in zip(a.tolist(), b.tolist(), strict=True)} != want_pairs[band]:
            bad.append(f"band {band}: pairs differ")
        got += len(a)
    if got == 0 or counts["buckets", 1]["pairs"] != got:
        bad.append(f"pairs: buckets x1 {counts['buckets', 1]['pairs']}, per band {got}")
    return bad


def _child(level: str, path: str, procs: int) -> None:
    """One level in this (fresh) interpreter; prints RESULT json."""
    t = time.time()
    with tempfile.TemporaryDirectory() as out:
        res = run_procs(level, path, out, procs)
        res["shards"] = len(list(Path(out).glob("kept-*.parquet")))
    res["wall_s"] = time.time() - t
    print("RESULT " + json.dumps(res))


def run_level(level: str, path: Path, procs: int, timeout: float = 1800) -> dict:
    """One level in a fresh interpreter (bounded by `timeout`)."""
    return child_result(["bench.dedup.floor", "--child", level, str(path), "--child-procs", str(procs)],
                        f"floor level {level} x{procs}", timeout)


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def best_of(repeats: int, fn, label: str) -> dict:
    """The fastest of `repeats` runs of `fn()`, each logged with the load average (1/5/15 min) before and after."""
    runs = []
    for i in range(repeats):
        before = _load()
        r = fn()
        print(f"    {label} run {i + 1}: {r['wall_s']:.2f} s, load before {before}, after {_load()}", flush=True)
        runs.append(r)
    return min(runs, key=lambda r: r["wall_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[50_000, 1_000_000], help="generated row counts")
    ap.add_argument("--procs", type=int, nargs="+", default=[1, 2], help="process counts")
    ap.add_argument("--levels", nargs="+", default=list(LEVELS), choices=LEVELS)
    ap.add_argument("--repeats", type=int, default=2, help="runs per level and process count (best counts)")
    ap.add_argument("--baseline-repeats", type=int, default=1, help="runs of the datasketch baseline (best counts)")
    ap.add_argument("--data-dir", default=None, help="keep the generated files here and reuse them")
    ap.add_argument("--check", type=int, metavar="ROWS", default=0,
                    help="instead: check on ROWS generated rows that the levels run and time the stage's own work "
                         "(signatures and band pairs equal the signature and bucket steps'); exit 1 if not")
    ap.add_argument("--child", nargs=2, metavar=("LEVEL", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--child-procs", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child[0], args.child[1], args.child_procs)
        return
    if args.check:
        bad = check(args.check)
        print("\n".join(bad) or f"OK: {args.check} rows, levels {', '.join(LEVELS)} x1 x2, signatures and pairs "
              "equal the stage's")
        sys.exit(1 if bad else 0)
    from bench.dedup.speed import generate, measure

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip()
    tables = []
    with tempfile.TemporaryDirectory() as d:
        folder = Path(args.data_dir or d)
        folder.mkdir(parents=True, exist_ok=True)
        for n in args.sizes:
            path = folder / f"gen_{n}.parquet"
            if not path.exists():
                generate(path.with_suffix(".tmp"), n)
                path.with_suffix(".tmp").rename(path)
            print(f"\n{n} rows ({path}), commit {commit}", flush=True)
            base = best_of(args.baseline_repeats, lambda p=path: measure("baseline", p, 1), "baseline")
            budget = base["wall_s"] / target_of(n)
            rows = []
            for level in args.levels:
                cells = {}
                for procs in args.procs:
                    cells[procs] = best_of(args.repeats, lambda lv=level, p=path, k=procs: run_level(lv, p, k),
                                           f"{level} x{procs}")
                rows.append((level, cells))
            tables.append((n, base, budget, rows))
            print("  heads / raw candidate pairs: "
                  + ", ".join(f"{lv} x{k}: {c['heads']} / {c['pairs']}" for lv, cells in rows for k, c in cells.items()))
    for n, base, budget, rows in tables:
        t = target_of(n)
        print(f"\n{n} rows: baseline {base['wall_s']:.1f} s, {t}x budget {budget:.2f} s (commit {commit})")
        print("| level | " + " | ".join(f"{k} process{'es' if k > 1 else ''}" for k in args.procs)
              + " | speed-up vs baseline (per process count) | share of the budget (per process count) |")
        print("|---|" + "---:|" * (len(args.procs) + 2))
        for level, cells in rows:
            print(f"| {level} | " + " | ".join(f"{c['wall_s']:.2f} s" for c in cells.values())
                  + " | " + " / ".join(f"{base['wall_s'] / c['wall_s']:.2f}x" for c in cells.values())
                  + " | " + " / ".join(f"{c['wall_s'] / budget:.2f}" for c in cells.values()) + " |")


if __name__ == "__main__":
    main()
