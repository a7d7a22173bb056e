"""Run every file of ../shared/data/sft_sources through `cotforge curate dedup` and print the per-source table.

    python bench/dedup_sources.py [--workers 2] [--out DIR] [--priority a,b,...]

Each file is one source (`--source-name FILE=STEM`), so the table shows rows in / kept / removed per reason
per file, plus the wall time of the whole command and the cluster counts from stats.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = REPO.parent / "shared" / "data" / "sft_sources"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=None, help="output folder (default: a temporary one)")
    ap.add_argument("--priority", default="", help="--source-priority for the command (comma list)")
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
        t = time.time()
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        wall = time.time() - t
        if proc.returncode:
            sys.exit(f"dedup failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        stats = json.loads((out / "stats.json").read_text())
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
    print(f"problems {d['problems']}, candidate pairs {d['candidate_pairs']} (number guard -{d['pairs_rejected_number_guard']}"
          f", edit guard -{d['pairs_rejected_edit_guard']}, below threshold -{d['pairs_below_threshold']}), "
          f"accepted {d['pairs_accepted']}, clusters {d['clusters']}, problems merged {d['problems_merged']}")


if __name__ == "__main__":
    main()
