"""Ingest alone: wall time and peak RSS of `materialize` (what every datatrove stage does first) on the dedup
speed corpus (generated Parquet, not in the row schema) and the decontamination corpora (schema Parquet), each
in a fresh interpreter, optionally with another checkout's code in the same run (`--other /work/main`).

    python -m bench.io.ingest_speed --rows 1000000 --other /work/main
    python -m bench.io.ingest_speed --corpora short,longcot

The stage defaults are used (20,000 rows per task, 1 GiB budget: 128 MiB per task, 16 MiB row groups).
Run it under `/tmp/tools/heavy`.
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

from bench.paths import REPO

CACHE = Path(tempfile.gettempdir()) / "cotforge_ingest_equiv"
DECONTAM = Path(tempfile.gettempdir()) / "cotforge_decontam_corpora"

CHILD = """
import json, resource, sys, tempfile, time
from pathlib import Path
t0 = time.time()
from cotforge.curate.core.schema import removed_schema
from cotforge.curate.engine.work import IngestLog
from cotforge.curate.io.ingest import materialize
from cotforge.curate.io.inputs import input_schema
from cotforge.curate.io.readers import InputSpec
imports = time.time() - t0
specs = [InputSpec(sys.argv[1], source_name=sys.argv[2] or None)]
with tempfile.TemporaryDirectory() as d:
    schema = input_schema(specs)
    log = IngestLog(Path(d) / "ingest", removed_schema(schema))
    t = time.time()
    files = materialize(specs, Path(d) / "input", log, rows_per_task=20_000, schema=schema,
                        bytes_per_task=128 << 20, buffer_bytes=16 << 20)
    log.save()
    wall = time.time() - t
print("RESULT " + json.dumps({"ingest_s": round(wall, 2), "imports_s": round(imports, 2), "shards": len(files),
      "rows": sum(log.rows_in.values()), "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))
"""


def corpus(name: str, rows: int) -> tuple[Path, str]:
    """(path, source name) of one corpus, generated when missing."""
    if name == "gen":
        from bench.dedup.speed import generate

        path = CACHE / f"gen_{rows}.parquet"  # the name bench.dedup.speed --data-dir uses
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            generate(path.with_suffix(".tmp"), rows)
            path.with_suffix(".tmp").rename(path)
        return path, "gen"
    path = DECONTAM / {"short": "short_200000.parquet", "longcot": "longcot_10000.parquet"}[name]
    if not path.exists():
        sys.exit(f"{path}: build it first (python -m bench.decontam.corpora)")
    return path, ""


def run_in(checkout: Path, code: str, *args: str, timeout: int = 1800) -> dict:
    """Run `code` (which prints one `RESULT {json}` line) in a fresh interpreter of `checkout`, with its own venv
    where it has one; returns the JSON."""
    python = checkout / ".venv" / "bin" / "python"
    p = subprocess.run([str(python) if python.exists() else sys.executable, "-c", code, *args],
                       capture_output=True, text=True, cwd=checkout, timeout=timeout)
    line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"failed in {checkout}:\n{p.stderr[-3000:]}")
    return json.loads(line[7:])


def run(checkout: Path, path: Path, source: str) -> dict:
    """One ingest in a fresh interpreter of `checkout`."""
    return run_in(checkout, CHILD, str(path), source)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", default="gen", help="comma list of gen, short, longcot")
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the generated corpus")
    ap.add_argument("--other", type=Path, default=None, help="another checkout to time in the same run (main)")
    args = ap.parse_args()
    for name in args.corpora.split(","):
        path, source = corpus(name, args.rows)
        for label, checkout in (("this", REPO), ("other", args.other)):
            if checkout is None:
                continue
            t = time.time()
            r = run(checkout, path, source)
            print(f"{name} {path.name} [{label} {checkout}]: {r} (total {time.time() - t:.1f}s, "
                  f"load {os.getloadavg()[0]:.2f})", flush=True)


if __name__ == "__main__":
    main()
