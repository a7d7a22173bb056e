"""Cost of the semantic tier: decontamination and dedup with the tier off, with the transformer encoder and with
the static+rerank fast path, on several corpus sizes, in the same run.

    /tmp/tools/heavy python -m bench.semantic.cost [--sizes 1000,10000] [--workers 2] [--stages decontam,dedup]

The corpus is bench/decontam/corpora.py's short builder (the rows of its 200k corpus, fewer of them).
Decontamination runs against the benchmarks of bench/semantic/eval.py. Each configuration runs in its own
subprocess (with a timeout), so its peak RSS (the largest of the process and its worker processes, from
getrusage) is its own. The embedding caches (item vectors, the static token table) are warmed first, so the
figures are those of a machine that has run the tier once. Prints one RESULT line per configuration.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.decontam.corpora import ensure_corpora
from bench.paths import SHARED
from bench.semantic.eval import BENCHMARKS
from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.dedup.config import DedupConfig
from cotforge.curate.engine import ExecutorConfig
from cotforge.curate.io.readers import InputSpec
from cotforge.pipelines.stages import run_stage

CORPORA = Path("/tmp/cotforge_semantic_corpora")
MODES = ("off", "transformer", "static+rerank")


def one(stage: str, path: Path, mode: str, workers: int) -> dict:
    """Run one stage on one corpus with the tier in `mode`; wall time, rows/s, removed rows, tier counts."""
    sem = {"semantic": mode != "off", "semantic_encoder": "transformer" if mode == "off" else mode}
    with tempfile.TemporaryDirectory() as d:
        t = time.time()
        if stage == "decontam":
            cfg = DecontamConfig(benchmarks=list(BENCHMARKS), benchmarks_dir=str(SHARED / "benchmarks"), **sem)
            st = run_stage("decontaminate", [InputSpec(str(path), "corpus")], Path(d) / "o", cfg,
                           ExecutorConfig(workers=workers))
            extra = {"timings": st.get("timings", {})}
        else:
            st = run_stage("dedup", [InputSpec(str(path), "corpus")], Path(d) / "o", DedupConfig(**sem),
                           ExecutorConfig(workers=workers))
            dd = st["dedup"]
            extra = {"timings": dd.get("timings", {}),
                     "semantic": {k: v for k, v in dd.items() if k.startswith("semantic_")}}
        wall = time.time() - t
    rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    return {"stage": stage, "corpus": path.name, "mode": mode, "rows": st["rows_in"], "wall_s": round(wall, 1),
            "rows_per_s": round(st["rows_in"] / wall, 1), "removed": st["removed"], "peak_rss_mb": rss // 1024,
            **extra}


def warm() -> None:
    """Fill the embedding caches (item vectors, static token table) so that no configuration pays for them."""
    from cotforge.curate.core.benchmarks import load_benchmarks
    from cotforge.curate.decontam.index import build_index
    from cotforge.curate.text.embed import Embedder, StaticEmbedder

    cfg = DecontamConfig(benchmarks=list(BENCHMARKS), semantic=True)
    with tempfile.TemporaryDirectory() as d:
        build_index(load_benchmarks(BENCHMARKS, SHARED / "benchmarks"), cfg, d)
    StaticEmbedder(Embedder())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--stages", default="decontam,dedup")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--timeout", type=int, default=900, help="seconds per configuration")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # stage,path,mode: a child run
    args = ap.parse_args()
    if args.one:
        stage, path, mode = args.one.split(",")
        print("RESULT", json.dumps(one(stage, Path(path), mode, args.workers)), flush=True)
        return
    sizes = [int(x) for x in args.sizes.split(",")]
    paths = {n: ensure_corpora(CORPORA, n, 100, ("short",))["short"] for n in sizes}
    warm()
    print("load", os.getloadavg(), flush=True)
    for n in sizes:
        for stage in args.stages.split(","):
            for mode in args.modes.split(","):
                cmd = [sys.executable, "-m", "bench.semantic.cost", "--workers", str(args.workers),
                       "--one", f"{stage},{paths[n]},{mode}"]
                try:
                    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout).stdout
                    print(*[ln for ln in out.splitlines() if ln.startswith("RESULT")] or [f"FAILED {cmd}"],
                          sep="\n", flush=True)
                except subprocess.TimeoutExpired:
                    print("TIMEOUT", stage, n, mode, args.timeout, flush=True)
                print("load", os.getloadavg(), flush=True)


if __name__ == "__main__":
    main()
