"""Dedup verdicts of two code versions are the same: every removed row (id, reason, duplicate_of) and the
kept row ids of the dedup stage with its defaults, on the generated speed corpora and the real SFT sources.

A speed change must not change which rows are removed or why. `--save REF` writes the verdicts of the code
checked out now (run it on main first); `--against REF` runs the current code and lists every difference (exit
status 1 when there is one). The stage's step timings are printed too. Run it under `/tmp/tools/heavy`.

    python -m bench.dedup.equiv --save /tmp/dedup_main.json
    python -m bench.dedup.equiv --against /tmp/dedup_main.json [--corpora gen50k,real] [--workers 1]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from bench.dedup.speed import generate
from bench.paths import SHARED
from bench.verdicts import load_reference, report, save_and_exit

GENERATED = {"gen50k": 50_000, "gen200k": 200_000}


def corpus_specs(name: str, tmp: Path) -> list:
    """The stage's inputs for one named corpus: a generated Parquet file, or every real SFT source file."""
    from cotforge.curate.io.readers import InputSpec

    if name in GENERATED:
        path = tmp / f"{name}.parquet"
        if not path.exists():
            generate(path, GENERATED[name])
        return [InputSpec(str(path), source_name="gen")]
    if name == "real":
        files = sorted((SHARED / "sft_sources").glob("*.jsonl.gz"))
        if not files:
            sys.exit(f"no files under {SHARED / 'sft_sources'}")
        return [InputSpec(str(f), source_name=f.name.removesuffix(".jsonl.gz")) for f in files]
    sys.exit(f"unknown corpus {name!r} (known: {', '.join([*GENERATED, 'real'])})")


def verdicts(specs: list, workers: int) -> tuple[dict[str, list], dict]:
    """({removed id: [reason, duplicate_of]} plus a '#kept' entry [count, sha256 of the sorted kept ids],
    stage timings) from one dedup stage run with its defaults."""
    import pyarrow.parquet as pq

    from cotforge.curate.dedup.config import DedupConfig
    from cotforge.curate.engine import ExecutorConfig
    from cotforge.pipelines.stages import run_stage

    with tempfile.TemporaryDirectory() as d:
        t = time.time()
        stats = run_stage("dedup", specs, Path(d) / "o", DedupConfig(), ExecutorConfig(workers=workers))
        wall = time.time() - t
        out: dict[str, list] = {}
        for f in sorted((Path(d) / "o" / "removed").glob("*.parquet")):
            for r in pq.read_table(f, columns=["id", "reason", "duplicate_of"]).to_pylist():
                out[r["id"]] = [r["reason"], r["duplicate_of"]]
        kept = sorted(i for f in sorted((Path(d) / "o" / "kept").glob("*.parquet"))
                      for i in pq.read_table(f, columns=["id"]).column(0).to_pylist())
        out["#kept"] = [len(kept), hashlib.sha256("\n".join(kept).encode()).hexdigest()]
    return out, {**stats["dedup"].get("timings", {}), "wall_s": round(wall, 2), "removed": len(out) - 1}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", default="gen50k,gen200k,real")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--save", help="write the verdicts of this checkout to this JSON file")
    ap.add_argument("--against", help="compare with verdicts saved by --save")
    args = ap.parse_args()
    ref = load_reference(args.against)
    saved, bad = {}, 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.corpora.split(","):
            got, timings = verdicts(corpus_specs(name, Path(tmp)), args.workers)
            saved[name] = got
            print(f"{name}: {timings['removed']} removed, kept {got['#kept'][0]}, timings {json.dumps(timings)}, "
                  f"load {os.getloadavg()[0]:.2f}", flush=True)
            bad += report(name, got, ref)
    save_and_exit(saved, args.save, bad)


if __name__ == "__main__":
    main()
