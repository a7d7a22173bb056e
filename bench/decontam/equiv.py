"""Decontamination verdicts of two code versions are the same: removed rows (id, benchmark, benchmark_id,
match_kind, side, match offsets) of the decontaminate stage with its defaults on the speed corpora.

A speed change must not change which rows are flagged or why. `--save REF` writes the verdicts of the code
checked out now (run it on main first); `--against REF` runs the current code and lists every difference
(exit status 1 when there is one). The stage's stats.json timings are printed too (seconds per stage).
Run it under `flock /work/coord/cpu.lock` (about a minute per corpus).

    python -m bench.decontam.equiv --save /tmp/decontam_main.json
    python -m bench.decontam.equiv --against /tmp/decontam_main.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from bench.decontam.corpora import SHARED, ensure_corpora
from bench.verdicts import load_reference, report, save_and_exit

KEY_COLUMNS = ("id", "benchmark", "benchmark_id", "match_kind", "side", "match_start", "match_end")


def verdicts(path: Path, workers: int = 2) -> tuple[dict[str, list], dict]:
    """Removed rows as {id: [benchmark, benchmark_id, match_kind, side, match_start, match_end]} and the
    stage's timings, from one decontaminate stage run with its defaults."""
    import pyarrow.parquet as pq

    from cotforge.curate.core.benchmarks import local_benchmark_names
    from cotforge.curate.decontam.config import DecontamConfig
    from cotforge.curate.engine import ExecutorConfig
    from cotforge.curate.io.readers import InputSpec
    from cotforge.pipelines.stages import run_stage

    names = local_benchmark_names(SHARED / "benchmarks")
    cfg = DecontamConfig(benchmarks=names, benchmarks_dir=str(SHARED / "benchmarks"))
    with tempfile.TemporaryDirectory() as d:
        t = time.time()
        stats = run_stage("decontaminate", [InputSpec(str(path), "corpus")], Path(d) / "o", cfg, ExecutorConfig(workers=workers))
        wall = time.time() - t
        out: dict[str, list] = {}
        for f in sorted((Path(d) / "o" / "removed").glob("*.parquet")):
            for r in pq.read_table(f, columns=list(KEY_COLUMNS)).to_pylist():
                out[r["id"]] = [r[k] for k in KEY_COLUMNS[1:]]
        out[DIGESTS] = digests(Path(d) / "o")
    return out, {**stats.get("timings", {}), "wall_s": round(wall, 2), "removed": len(out) - 1}


DIGESTS = "__digests__"


def digests(folder: Path) -> list[str]:
    """sha256 of what a user reads from a finished folder: the kept and removed rows (all columns, in file
    order), every contamination_matches record, the report JSON without its config, the md and html bytes.
    Shard file names and Parquet encoding are left out: a change may re-cut files, not change rows."""
    import hashlib

    import pyarrow.parquet as pq

    def rows(sub: str) -> str:
        h = hashlib.sha256()
        for f in sorted((folder / sub).glob("*.parquet")):
            for r in pq.read_table(f).to_pylist():
                h.update(json.dumps(r, sort_keys=True, default=str).encode())
        return h.hexdigest()

    def file_bytes(name: str, drop: str | None = None) -> str:
        p = folder / name
        if not p.exists():
            return f"{name}: missing"
        if drop is None:
            return hashlib.sha256(p.read_bytes()).hexdigest()
        doc = json.loads(p.read_text())
        doc.pop(drop, None)
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()

    matches = folder / "contamination_matches.parquet"
    match_digest = (hashlib.sha256(json.dumps(pq.read_table(matches).to_pylist(), sort_keys=True, default=str)
                                   .encode()).hexdigest() if matches.exists() else "missing")
    return [f"kept {rows('kept')}", f"removed {rows('removed')}", f"matches {match_digest}",
            f"report.json {file_bytes('contamination_report.json', drop='config')}",
            f"report.md {file_bytes('contamination_report.md')}",
            f"report.html {file_bytes('contamination_report.html')}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", default="short,longcot")
    ap.add_argument("--save", help="write the verdicts of this checkout to this JSON file")
    ap.add_argument("--against", help="compare with verdicts saved by --save")
    args = ap.parse_args()
    corpora = ensure_corpora(which=tuple(args.corpora.split(",")))
    ref = load_reference(args.against)
    saved, bad = {}, 0
    for name, path in corpora.items():
        got, timings = verdicts(path)
        saved[name] = got
        print(f"{name}: {timings['removed']} removed, timings {json.dumps(timings)}, load {os.getloadavg()[0]:.2f}")
        bad += report(name, got, ref, by_item=(DIGESTS,))
    save_and_exit(saved, args.save, bad)


if __name__ == "__main__":
    main()
