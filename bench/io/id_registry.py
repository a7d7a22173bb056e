"""The ingest id registry alone: time and peak RSS of making N ids unique (`IdRegistry`), in a fresh interpreter
per checkout, so this checkout and another (`--other /work/main`) are measured in one run.

Ids are `g0, g1, ...` with every `--repeat-every`-th one a repeat of an earlier id (renamed `~2`, ...), fed in batches of 2048 (what a record
batch of ingest gives): through `unique_all` where the checkout has it, else `unique` id by id. Peak RSS is
reported above the interpreter's RSS before the first id. Run it under `/tmp/tools/heavy`.

    python -m bench.io.id_registry --ids 10000000 --other /work/main
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from bench.io.ingest_speed import run_in
from bench.paths import REPO

CHILD = """
import json, resource, sys, time
from cotforge.curate.io.ingest import IdRegistry
n, every = int(sys.argv[1]), int(sys.argv[2])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
reg = IdRegistry()
batch_path = hasattr(reg, "unique_all")
t = time.time()
renamed = 0
for start in range(0, n, 2048):
    ids = [f"g{i}" if i % every else f"g{i // 3}" for i in range(start, min(n, start + 2048))]
    out = reg.unique_all(ids) if batch_path else [reg.unique(i) for i in ids]
    renamed += sum(a != b for a, b in zip(ids, out))
wall = time.time() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("RESULT " + json.dumps({"ids": n, "renamed": renamed, "wall_s": round(wall, 2), "batch_path": batch_path,
                              "peak_rss_above_start_mb": round(peak - base)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ids", type=int, default=10_000_000)
    ap.add_argument("--repeat-every", type=int, default=100_000)
    ap.add_argument("--other", type=Path, default=None, help="another checkout to time in the same run (main)")
    args = ap.parse_args()
    for label, checkout in (("this", REPO), ("other", args.other)):
        if checkout is not None:
            t = time.time()
            r = run_in(checkout, CHILD, str(args.ids), str(args.repeat_every), timeout=3600)
            print(f"[{label} {checkout}] {r} (total {time.time() - t:.1f}s, load {os.getloadavg()[0]:.2f})", flush=True)


if __name__ == "__main__":
    main()
