"""The floor of decontamination's speed: the least work any stage that gives the same verdicts must do, timed in
one run with the lean 8-gram baseline of bench/decontam/measure.py, on its speed corpora (short 200k rows,
long-CoT 10k rows).

Levels, each with 1 and 2 processes (rows split into equal contiguous ranges, one per process; each process
reads its rows from the input Parquet in record batches and writes its own kept / removed Parquet, zstd, as
the baseline does):
- `io`: read the input Parquet + write kept / removed, no matching at all (every row kept);
- `kernel`: `io` + the text kernel's normalise + word 8-gram hashes of every prompt and response
  (`kernel.normalize_many` + `kernel.hash_words_ngrams`, the functions the stages call);
- `lookup`: `kernel` + one vectorised set membership of every 8-gram against the benchmark 8-gram set
  (`hashing.BitPrefilter` then `hashing.sorted_lookup` on the sorted hashes of the benchmark problems,
  normalised by the same kernel, as the stage's index looks them up; a plain binary search of every 8-gram
  cost 2.5x the kernel on short rows);
  a row whose prompt or response has a hit goes to removed.
- `bare`: `lookup` with the text kernel and the lookup replaced by the issue's bare byte kernel, fused with the
  lookup (`bare_scan` below: ASCII lower-case of the UTF-8 bytes, words split at every byte that is not an
  ASCII letter or digit or >= 0x80, FNV-1a word hashes, one multiply-add hash per word 8-gram, each tested
  against the benchmark set's bit table as it is made, straight from Arrow's string buffers). It gives
  other verdicts (no Unicode, LaTeX or number canonicalisation), so it is not a stage: it bounds from below
  what any kernel with these verdicts can cost, since such a kernel reads the same bytes and writes the same
  8-grams with more work per byte.
The benchmark set of `lookup` is built once in the parent and sent to the processes (spawned, as datatrove's
workers are started fresh); each process loads the kernel's tables and machine code (numba's disk cache), all
in the time. No canonicalisation
(function names, request templates), no fuzzy tier, no spans, no report: a stage needs all of those on top.

Each method runs in a fresh interpreter, timed from its start of work to its last shard written (as
measure.py times the baseline and the stage). Printed per level: wall seconds, speed-up vs the baseline and
the level's time as a share of the 5x budget (baseline / 5): above 1.00 the floor alone is over the budget.
Run it under the CPU lock (both corpora: ~3 minutes on a quiet machine):

    /tmp/tools/heavy python -m bench.decontam.floor --corpora short,longcot
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from bench.child import child_result
from bench.decontam.corpora import ensure_corpora
from bench.decontam.measure import measure
from bench.paths import SHARED

LEVELS = ("io", "bare", "kernel", "lookup")
BATCH_BYTES = 32 << 20  # text per record batch (about the stage's matcher batches)


def _row_range(k: int, procs: int, n: int) -> tuple[int, int]:
    return k * n // procs, (k + 1) * n // procs


def _batches(path: str, lo: int, hi: int, rows_per_batch: int):
    """Record batches of rows [lo, hi) of a Parquet file (only the row groups that hold them are read)."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    md = pf.metadata
    start, groups, first = 0, [], None
    for g in range(md.num_row_groups):
        n = md.row_group(g).num_rows
        if start < hi and start + n > lo:
            groups.append(g)
            first = start if first is None else first
        start += n
    at = first or 0
    for b in pf.iter_batches(batch_size=rows_per_batch, row_groups=groups):
        a, z = max(lo - at, 0), min(hi - at, b.num_rows)
        at += b.num_rows
        if z > a:
            yield b.slice(a, z - a)
        if at >= hi:
            break


@functools.cache
def _bare_kernel():
    """The bare byte kernel (numba, compiled once and cached on disk like the text kernel; built once per
    process: each build would load it from the disk cache again)."""
    import numba
    import numpy as np

    @numba.njit(cache=True, nogil=True, inline="always")
    def is_word(c):  # pragma: no cover - compiled
        return (48 <= c <= 57) or (97 <= c <= 122) or (65 <= c <= 90) or c >= 128

    @numba.njit(cache=True, nogil=True)
    def bare_scan(data, offsets, n, table, shift, keys, collect):  # pragma: no cover - compiled
        """One pass over an Arrow string array's (data, offsets) buffers, hashing every word n-gram. `collect`:
        returns (the n-gram hashes, their row, -), sized by a first pass that counts the words; else (-, -, per
        row whether any n-gram is one of the sorted `keys`), each tested as it is made (the bit table of
        `hashing.BitPrefilter` first, a binary search only on a set bit)."""
        rows = len(offsets) - 1
        total = 0
        for r in range(rows if collect else 0):
            words = 0
            prev = False
            for i in range(offsets[r], offsets[r + 1]):
                w = is_word(data[i])
                if w and not prev:
                    words += 1
                prev = w
            total += max(words - n + 1, 0)
        out = np.empty(total, dtype=np.uint64)
        row_of = np.empty(total, dtype=np.int64)
        hit = np.zeros(0 if collect else rows, dtype=np.bool_)
        ring = np.zeros(n, dtype=np.uint64)
        k = 0
        for r in range(rows):
            words = 0
            h = np.uint64(14695981039346656037)
            inword = False
            end = offsets[r + 1]
            for i in range(offsets[r], end + 1):
                c = data[i] if i < end else 32
                if is_word(c):
                    if 65 <= c <= 90:
                        c += 32
                    h = (h ^ np.uint64(c)) * np.uint64(1099511628211)
                    inword = True
                elif inword:
                    ring[words % n] = h
                    words += 1
                    if words >= n and (collect or not hit[r]):
                        g = np.uint64(0)
                        for j in range(words - n, words):
                            g = g * np.uint64(0x9E3779B97F4A7C15) + ring[j % n]
                        if collect:
                            out[k] = g
                            row_of[k] = r
                            k += 1
                        else:
                            slot = g >> shift
                            if (table[slot >> np.uint64(3)] >> (slot & np.uint64(7))) & np.uint64(1):
                                pos = np.searchsorted(keys, g)
                                hit[r] = pos < len(keys) and keys[pos] == g
                    h = np.uint64(14695981039346656037)
                    inword = False
        return out, row_of, hit

    return bare_scan


def _buffers(col):
    """(UTF-8 bytes, int64 offsets) of a pyarrow string array, from its buffers (no Python strings)."""
    import numpy as np
    import pyarrow as pa

    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    col = col.cast(pa.large_string())
    _, off_buf, data_buf = col.buffers()
    offsets = np.frombuffer(off_buf, dtype=np.int64)[col.offset:col.offset + len(col) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return data, offsets


def _bare_hashes(col, n: int = 8):
    """(n-gram hashes, their row) of a pyarrow string array by `bare_scan`."""
    import numpy as np

    none = np.zeros(0, np.uint64)
    return _bare_kernel()(*_buffers(col), n, np.zeros(1, np.uint8), np.uint64(0), none, True)[:2]


def _bare_flag_column(col, keys, n: int = 8):
    """Per row of a pyarrow string array: whether `bare_scan` finds one of `benchmark_ngrams(bare=True)`."""
    import numpy as np

    sorted_keys, pre = keys
    return _bare_kernel()(*_buffers(col), n, pre.table, np.uint64(pre.shift), sorted_keys, False)[2]


def benchmark_ngrams(bare: bool = False) -> tuple:
    """Sorted unique 8-gram hashes of every shared benchmark problem, normalised by the kernel, and the bit-array
    prefilter of them (hashing.BitPrefilter, as the stage's index has)."""
    import numpy as np
    import pyarrow as pa

    from cotforge.curate.core.benchmarks import load_benchmarks, local_benchmark_names
    from cotforge.curate.text import kernel
    from cotforge.curate.text.hashing import BitPrefilter

    bm = load_benchmarks(local_benchmark_names(SHARED / "benchmarks"), SHARED / "benchmarks")
    problems = [it.problem for items in bm.values() for it in items]
    if bare:
        keys = np.unique(_bare_hashes(pa.array(problems, pa.large_string()))[0])
    else:
        keys = np.unique(kernel.hash_words_ngrams(kernel.normalize_many(problems), 8)[3])
    return keys, BitPrefilter(keys)


def _flag_column(col, keys, bare: bool = False):
    """Per row of a string column: whether any of its 8-grams is in `keys` (`benchmark_ngrams`; None: hash only);
    `bare`: hashed by the bare byte kernel instead of the text kernel."""
    import numpy as np

    from cotforge.curate.text import kernel
    from cotforge.curate.text.hashing import sorted_lookup

    if bare:
        return _bare_flag_column(col, keys)
    norm = kernel.normalize_many(col)
    _, _, _, gh, grow, _ = kernel.hash_words_ngrams(norm, 8)
    if keys is None:
        return None
    hit = keys[1].maybe(gh)  # the stage's own lookup: a bit-array prefilter, then a binary search of the few left
    hit[hit] = sorted_lookup(keys[0], gh[hit])[1]
    return np.bincount(grow[hit], minlength=len(col)) > 0


def work(level: str, path: str, out: str, k: int, procs: int, n_rows: int, rows_per_batch: int, keys) -> int:
    """One process's share: rows of range k of `procs`, to out/kept-k.parquet and out/removed-k.parquet.
    Returns the rows it removed."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    lo, hi = _row_range(k, procs, n_rows)
    kept_w = removed_w = None
    removed = 0
    try:
        for b in _batches(path, lo, hi, rows_per_batch):
            flags = None
            if level != "io":
                fp = _flag_column(b.column("prompt"), keys, level == "bare")
                fr = _flag_column(b.column("response"), keys, level == "bare")
                flags = None if fp is None else pa.array(fp | fr)
            if kept_w is None:
                kept_w = pq.ParquetWriter(Path(out) / f"kept-{k}.parquet", b.schema, compression="zstd")
                removed_w = pq.ParquetWriter(Path(out) / f"removed-{k}.parquet", b.schema, compression="zstd")
            if flags is None:
                kept_w.write_batch(b)
            else:
                kept_w.write_batch(b.filter(pc.invert(flags)))
                removed_w.write_batch(b.filter(flags))
                removed += int(pc.sum(flags).as_py() or 0)
    finally:
        for w in (kept_w, removed_w):
            if w is not None:
                w.close()
    return removed


def _child(level: str, path: str, procs: int) -> None:
    """One level in this (fresh) interpreter: the whole corpus with `procs` processes; prints RESULT json."""
    import multiprocessing as mp

    import pyarrow.parquet as pq

    t = time.time()
    md = pq.ParquetFile(path).metadata
    n_rows = md.num_rows
    avg = max(md.row_group(0).total_byte_size / max(md.row_group(0).num_rows, 1), 1.0)
    rows_per_batch = max(16, int(BATCH_BYTES / avg))
    keys = benchmark_ngrams(bare=level == "bare") if level in ("lookup", "bare") else None
    with tempfile.TemporaryDirectory() as out:
        if procs == 1:
            removed = work(level, path, out, 0, 1, n_rows, rows_per_batch, keys)
        else:
            # spawn, not fork: a process forked after polars ran can deadlock in polars' thread pool
            with mp.get_context("spawn").Pool(procs) as pool:
                res = pool.starmap_async(work, [(level, path, out, k, procs, n_rows, rows_per_batch, keys)
                                                for k in range(procs)])
                removed = sum(res.get(timeout=1800))
        files = len(list(Path(out).glob("*.parquet")))
    print("RESULT " + json.dumps({"rows": n_rows, "removed": removed, "shards": files,
                                  "wall_s": time.time() - t}))


def run_level(level: str, path: Path, procs: int, timeout: float = 1800) -> dict:
    """One level in a fresh interpreter (bounded by `timeout`)."""
    return child_result(["bench.decontam.floor", "--child", level, str(path), "--procs", str(procs)],
                        f"floor level {level} x{procs}", timeout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", default="short,longcot", help="comma list of short, longcot")
    ap.add_argument("--rows-short", type=int, default=200_000)
    ap.add_argument("--rows-long", type=int, default=10_000)
    ap.add_argument("--levels", default=",".join(LEVELS), help=f"comma list of {', '.join(LEVELS)}")
    ap.add_argument("--child", nargs=2, metavar=("LEVEL", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--procs", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child[0], args.child[1], args.procs)
        return
    if not (SHARED / "MANIFEST.md").exists():
        sys.exit(f"needs {SHARED}")
    which = tuple(args.corpora.split(","))
    corpora = ensure_corpora(rows_short=args.rows_short, rows_long=args.rows_long, which=which)
    print("| corpus | rows | method | processes | wall s | removed | speed-up vs baseline | share of the 5x budget "
          "| load |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---|")
    for name, path in corpora.items():
        base = measure("baseline", path)
        budget = base["wall_s"] / 5
        print(f"| {name} | {base['rows']} | lean baseline | 1 | {base['wall_s']:.1f} | {base['flagged']} | 1.00x | "
              f"{base['wall_s'] / budget:.2f} | {os.getloadavg()[0]:.2f} |", flush=True)
        for level in args.levels.split(","):
            for procs in (1, 2):
                r = run_level(level, path, procs)
                print(f"| {name} | {r['rows']} | floor: {level} | {procs} | {r['wall_s']:.1f} | {r['removed']} | "
                      f"{base['wall_s'] / r['wall_s']:.2f}x | {r['wall_s'] / budget:.2f} | "
                      f"{os.getloadavg()[0]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
