"""What bounds decontamination's speed: the vectorised steps alone, no matching, against the baseline's whole run.

One process, on the corpora of bench/decontam/corpora.py, in record batches of `batch_bytes` of text
(`DecontamConfig.batch_bytes`), prompt and response columns:
- `read`: the two columns read from Parquet (pyarrow);
- `lean`: read + lower-case + every non-[a-z0-9] run to one space (polars) + word hashes + 8-gram hashes
  (numpy, `cotforge.curate.text.hashing`) + the bit-array prefilter of the index: the baseline's work
  (lower-case, split, 8-grams, set membership) on compiled kernels;
- `coarse`: read + the response side's coarse candidate tier (`decontam/coarse.py`) with its weak-entry
  fallback ignored: its cost, and the share of responses it would pass on to the full path;
- `norm`: read + cotforge's whole normalisation (`decontam.canon.matcher_norm`: Unicode math, LaTeX, wrappers,
  request templates) + word and 8-gram hashes, still no matching;
- `steps`: the whole stage with its defaults in one process (1 worker), every step timed (bench/decontam/steps.py):
  each normaliser pass with the share of texts it touches, hashing, candidate lookup, per-candidate checks,
  describe, per-task I/O, and the stage's index / ingest / collect / report; then what the same seconds give on
  2 workers (serial parts + per-task work / 2), with the per-task Python at zero, and what 5x would need.
Printed with the baseline's whole run (bench/decontam/measure.py's, same process count: 1) measured in the same run
and the load: the ratio `baseline / norm` times the worker count bounds what any matcher on top of this
normalisation can reach. Run it under `flock /work/coord/cpu.lock` (`steps`: about 1.5 min per corpus).

    python -m bench.decontam.probe [--corpora short,longcot] [--steps read,lean,norm,steps,coarse]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench.decontam.corpora import ensure_corpora
from bench.decontam.measure import measure
from bench.decontam.steps import print_table, run_steps_table
from cotforge.curate.decontam.config import DecontamConfig

passed = [0, 0]  # responses the coarse step passed / saw


def probe(path: Path, step: str, index_dir: str, batch_bytes: int) -> float:
    """Seconds for `step` (read | lean | norm) over the whole corpus, in one process."""
    import polars as pl
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cotforge.curate.decontam.canon import matcher_norm
    from cotforge.curate.decontam.index import DecontamIndex
    from cotforge.curate.text.hashing import hash_words_arrow, ngram_hashes

    index = DecontamIndex(index_dir)
    cfg = DecontamConfig()
    t = time.time()
    pf = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)
    md = pf.metadata
    size = sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
    rows = max(1, min(8192, batch_bytes * md.num_rows // max(size, 1)))
    hits = 0
    passed[:] = [0, 0]
    for b in pf.iter_batches(batch_size=rows, columns=["prompt", "response"]):
        if step == "read":
            continue
        if step == "coarse":  # the response side's coarse tier alone, weak entries ignored (what it would pass)
            tier = index.coarse_tier()
            tier.weak = False
            keep = tier.candidates(pl.Series("t", b.column("response")).fill_null(""))
            hits += int(keep.sum())
            passed[0] += int(keep.sum())
            passed[1] += len(keep)
            continue
        for col in ("prompt", "response"):
            s = pl.Series("t", b.column(col)).fill_null("")
            if step == "lean":
                arr = s.str.to_lowercase().str.replace_all("[^a-z0-9]+", " ").str.strip_chars(" ").cast(
                    pl.String).to_arrow()
                arr = arr.combine_chunks() if hasattr(arr, "combine_chunks") else arr
                arr = arr.cast(pa.large_string())
            else:
                arr = matcher_norm(s, cfg.norm, index.defined_names)
            wh, wr, _ = hash_words_arrow(arr)
            h, _, _ = ngram_hashes(wh, wr, cfg.ngram)
            hits += int(index.prefilter.maybe(h).sum())
    return time.time() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", default="short,longcot")
    ap.add_argument("--rows-short", type=int, default=200_000)
    ap.add_argument("--rows-long", type=int, default=10_000)
    ap.add_argument("--steps", default="read,lean,norm,steps", help="of read,lean,norm,coarse,steps")
    ap.add_argument("--text-kernel", default="auto", help="DecontamConfig.text_kernel of the steps table")
    args = ap.parse_args()
    steps = args.steps.split(",")
    from bench.decontam.corpora import SHARED
    from cotforge.curate.core.benchmarks import load_benchmarks, local_benchmark_names
    from cotforge.curate.decontam.index import build_index

    names = local_benchmark_names(SHARED / "benchmarks")
    cfg = DecontamConfig(benchmarks=names, coarse_tier="coarse" if "coarse" in steps else "none")
    index_dir = tempfile.mkdtemp(prefix="decontam_probe_")
    build_index(load_benchmarks(names, SHARED / "benchmarks"), cfg, index_dir)
    corpora = ensure_corpora(rows_short=args.rows_short, rows_long=args.rows_long,
                             which=tuple(args.corpora.split(",")))
    for name, path in corpora.items():
        base = measure("baseline", path)
        print(f"\n## {name}\n\n| corpus | rows | step (1 process) | s | rows/s | baseline whole run s | baseline / step | load |")
        print("|---|---:|---|---:|---:|---:|---:|---|")
        for step in [s for s in steps if s != "steps"]:
            s = probe(path, step, index_dir, cfg.batch_bytes)
            extra = f" (passes {passed[0] / max(passed[1], 1):.1%} of responses)" if step == "coarse" else ""
            print(f"| {name} | {base['rows']} | {step}{extra} | {s:.1f} | {base['rows'] / s:,.0f} | {base['wall_s']:.1f} | "
                  f"{base['wall_s'] / s:.2f}x | {os.getloadavg()[0]:.2f} |", flush=True)
        if "steps" in steps:
            timer, stats, wall = run_steps_table(path, SHARED, args.text_kernel)
            print_table(name, timer, stats, wall, base["wall_s"], os.getloadavg()[0])


if __name__ == "__main__":
    main()
