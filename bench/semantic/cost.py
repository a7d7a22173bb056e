"""Cost of the semantic tier: decontamination and dedup with the tier off and on, in the same run.

    /tmp/tools/heavy python -m bench.semantic.cost [--short 2000] [--long 200] [--workers 2]

The corpora are bench/decontam/corpora.py's short and long-CoT builders (the same rows as its 200k / 10k
corpora, fewer of them: the tier embeds every distinct prompt with a transformer, tens of rows/s on 2 cores, so
a 200k-row run would take hours). Decontamination runs against the benchmarks of bench/semantic/eval.py (their
item vectors are cached after the first run; the index time with the tier is reported apart). Prints rows/s
of each stage off / on (decontamination also with the static prefilter, `--prefilter`).
"""

from __future__ import annotations

import argparse
import json
import os
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


def one(stage: str, path: Path, semantic: bool, workers: int, prefilter: float = -1.0) -> dict:
    with tempfile.TemporaryDirectory() as d:
        t = time.time()
        if stage == "decontam":
            cfg = DecontamConfig(benchmarks=list(BENCHMARKS), benchmarks_dir=str(SHARED / "benchmarks"), semantic=semantic,
                                 semantic_prefilter=prefilter)
            st = run_stage("decontaminate", [InputSpec(str(path), "corpus")], Path(d) / "o", cfg,
                           ExecutorConfig(workers=workers))
            extra = {"removed": st["removed"], "timings": st.get("timings", {})}
        else:
            st = run_stage("dedup", [InputSpec(str(path), "corpus")], Path(d) / "o", DedupConfig(semantic=semantic),
                           ExecutorConfig(workers=workers))
            dd = st["dedup"]
            extra = {"removed": st["removed"], "timings": dd.get("timings", {}),
                     "semantic": {k: v for k, v in dd.items() if k.startswith("semantic_")}}
        wall = time.time() - t
    return {"stage": stage, "corpus": path.name, "semantic": semantic, "prefilter": prefilter, "rows": st["rows_in"], "wall_s": round(wall, 1),
            "rows_per_s": round(st["rows_in"] / wall, 1), **extra}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--short", type=int, default=2000)
    ap.add_argument("--long", type=int, default=200)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--stages", default="decontam,dedup")
    ap.add_argument("--prefilter", type=float, default=0.70, help="decontam: also run with this semantic_prefilter")
    args = ap.parse_args()
    paths = ensure_corpora(Path("/tmp/cotforge_semantic_corpora"), args.short, args.long)
    print("load", os.getloadavg())
    for stage in args.stages.split(","):
        for name in ("short", "longcot"):
            for semantic in (False, True):
                print("RESULT", json.dumps(one(stage, paths[name], semantic, args.workers)), flush=True)
            if stage == "decontam" and args.prefilter > -1:  # the static fast path in front of the transformer
                print("RESULT", json.dumps(one(stage, paths[name], True, args.workers, args.prefilter)), flush=True)
    print("load", os.getloadavg())


if __name__ == "__main__":
    main()
