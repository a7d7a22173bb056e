"""Run every file of ../shared/data/sft_sources through `cotforge curate dedup` and print the per-source table.

    python -m bench.dedup.sources [--workers 2] [--out DIR] [--priority a,b,...] [--compare OLD_OUT] [--show N]
                                  [--arg=--no-code-sections]

Each file is one source (`--source-name FILE=STEM`), so the table shows rows in / kept / removed per reason
per file, plus the wall time of the whole command and the cluster counts from stats.json. `--compare OLD_OUT`
(the output folder of an earlier run, e.g. of the previous code) lists the rows removed now but kept then and
the other way round, each with its prompt and the kept prompt it was merged into (`--show` of each), for
checking the new merges by hand.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.paths import REPO, SHARED

SOURCES = SHARED / "sft_sources"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=None, help="output folder (default: a temporary one)")
    ap.add_argument("--priority", default="", help="--source-priority for the command (comma list)")
    ap.add_argument("--compare", default=None, help="output folder of an earlier run to diff the removed rows with")
    ap.add_argument("--show", type=int, default=40, help="changed rows to print with --compare (each way)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the sample printed with --compare")
    ap.add_argument("--arg", action="append", default=[], metavar="FLAG",
                    help="extra `curate dedup` argument, e.g. --arg=--no-code-sections (a run as before a rule)")
    args = ap.parse_args()
    files = sorted(SOURCES.glob("*.jsonl.gz"))
    if not files:
        sys.exit(f"no files under {SOURCES}")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or Path(tmp) / "dedup")
        cmd = [sys.executable, "-m", "cotforge.pipelines.cli", "curate", "dedup", *map(str, files), "-o", str(out),
               "--workers", str(args.workers)]
        for f in files:
            cmd += ["--source-name", f"{f}={f.name.removesuffix('.jsonl.gz')}"]
        if args.priority:
            cmd += ["--source-priority", args.priority]
        cmd += args.arg
        t = time.time()
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        wall = time.time() - t
        if proc.returncode:
            sys.exit(f"dedup failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        stats = json.loads((out / "stats.json").read_text())
        if args.compare:
            compare(out, Path(args.compare), args.show, args.seed)
    reasons = sorted({r for s in stats["per_source"].values() for r in s["removed"]})
    head = f"{'source':40s} {'rows_in':>8s} {'kept':>8s} " + " ".join(f"{r:>16s}" for r in reasons)
    print(head)
    print("-" * len(head))
    for name, s in stats["per_source"].items():
        print(f"{name:40s} {s['rows_in']:8d} {s['kept']:8d} " + " ".join(f"{s['removed'].get(r, 0):16d}" for r in reasons))
    print("-" * len(head))
    print(f"{'total':40s} {stats['rows_in']:8d} {stats['kept']:8d} "
          + " ".join(f"{stats['removed_by_reason'].get(r, 0):16d}" for r in reasons))
    d = stats["dedup"]
    print(f"\nwall {wall:.1f}s for {stats['rows_in']} rows ({stats['rows_in'] / wall:.0f} rows/s, {args.workers} workers, "
          f"{d['tasks']} tasks); steps {d['timings']}")
    graded = {k.removeprefix("pairs_rejected_"): v for k, v in d.items()
              if k.startswith("pairs_rejected_") and k not in ("pairs_rejected_number_guard", "pairs_rejected_edit_guard")}
    print(f"problems {d['problems']}, candidate pairs {d['candidate_pairs']} (number guard -{d['pairs_rejected_number_guard']}"
          f", graded check -{d['pairs_rejected_edit_guard']} {graded}, below threshold -{d['pairs_below_threshold']}), "
          f"accepted {d['pairs_accepted']}, clusters {d['clusters']}, problems merged {d['problems_merged']}")


def compare(out: Path, old: Path, show: int, seed: int) -> None:
    """Rows removed in one run but not the other, with the prompt each was merged into (a seeded sample)."""
    import random

    import polars as pl

    def removed(folder: Path) -> pl.DataFrame:
        return pl.read_parquet(folder / "removed" / "*.parquet").filter(pl.col("reason") != "malformed")

    prompts = pl.concat([pl.read_parquet(f / part / "*.parquet").select("id", "prompt")
                         for f in (out, old) for part in ("kept", "removed")]).unique("id")
    text = dict(zip(prompts["id"], prompts["prompt"], strict=True))
    new, was = removed(out), removed(old)
    for title, a, b in (("removed now, kept before", new, was), ("kept now, removed before", was, new)):
        diff = a.filter(~pl.col("id").is_in(b["id"].implode()))
        print(f"\n{title}: {diff.height} rows {dict(diff['reason'].value_counts().iter_rows())}")
        rows = list(diff.iter_rows(named=True))
        for r in random.Random(seed).sample(rows, min(show, len(rows))):
            print(f"  [{r['reason']}] {r['id']}  ->  {r['duplicate_of']}")
            print(f"     A: {text.get(r['id'], '')[:400]!r}")
            print(f"     B: {text.get(r['duplicate_of'], '')[:400]!r}")


if __name__ == "__main__":
    main()
