"""Throughput of decontamination and dedup with the semantic tier off and on, on the speed corpora of
bench/decontam/corpora.py (short 200k rows, long-CoT 10k rows), in the same run.

    /tmp/tools/heavy python -m bench.semantic.throughput --stage decontam --corpus short [--rows N] [--workers 2]

One invocation per (stage, corpus), so that no hold of the CPU lock is long. `--rows N`: the first N rows of the
corpus (written once as their own Parquet file), when the whole corpus would take too long. Each mode runs in its
own subprocess (with a timeout) after the embedding caches (the benchmark items' vectors, the model folder) are
warmed; "on" is the tier with its defaults. Per mode one RESULT line: rows, wall s, rows/s, removed rows, the
tier's own counts, peak RSS (the largest single process, and the largest sum over the process tree, sampled every
0.2 s), and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq

from bench.decontam.corpora import DEFAULT_OUT, ensure_corpora
from bench.paths import SHARED
from bench.semantic.cost import warm
from bench.semantic.eval import BENCHMARKS
from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.dedup.config import DedupConfig
from cotforge.curate.engine import ExecutorConfig
from cotforge.curate.io.readers import InputSpec
from cotforge.pipelines.stages import run_stage

SIZES = {"short": 200_000, "longcot": 10_000}


def corpus_path(corpus: str, rows: int) -> Path:
    """The speed corpus, or its first `rows` rows as a file of their own (rows 0: all of it)."""
    full = ensure_corpora(DEFAULT_OUT, SIZES["short"], SIZES["longcot"], (corpus,))[corpus]
    if not rows or rows >= SIZES[corpus]:
        return full
    part = DEFAULT_OUT / f"{full.stem}_first{rows}.parquet"
    if not part.is_file():
        tmp = part.with_suffix(".tmp.parquet")
        pq.write_table(pq.read_table(full).slice(0, rows), tmp)
        tmp.rename(part)
    return part


class TreeRss:
    """Peak RSS of this process and its descendants, sampled on a thread: the largest single process and the
    largest sum (psutil; without it, getrusage's largest single process only)."""

    def __init__(self, every: float = 0.2):
        self.single = self.total = 0
        self._stop = threading.Event()
        self._every = every
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        try:
            import psutil
        except ImportError:
            return
        me = psutil.Process()
        while not self._stop.is_set():
            rss = []
            for p in [me, *me.children(recursive=True)]:
                try:
                    rss.append(p.memory_info().rss)
                except psutil.Error:
                    pass
            self.single, self.total = max(self.single, max(rss)), max(self.total, sum(rss))
            self._stop.wait(self._every)


def one(stage: str, path: Path, mode: str, workers: int) -> dict:
    """One stage on one corpus with the tier off or on: wall s, rows/s, removed rows, the tier's counts, RSS."""
    sem = {"semantic": mode == "on"}
    with tempfile.TemporaryDirectory() as d, TreeRss() as rss:
        t = time.time()
        if stage == "decontam":
            cfg = DecontamConfig(benchmarks=list(BENCHMARKS), benchmarks_dir=str(SHARED / "benchmarks"), **sem)
            st = run_stage("decontaminate", [InputSpec(str(path), "corpus")], Path(d) / "o", cfg,
                           ExecutorConfig(workers=workers))
            extra = {"timings": st.get("timings", {}),
                     "by_kind": st.get("contamination", {}).get("by_match_kind", {})}
        else:
            st = run_stage("dedup", [InputSpec(str(path), "corpus")], Path(d) / "o", DedupConfig(**sem),
                           ExecutorConfig(workers=workers))
            dd = st["dedup"]
            extra = {"timings": dd.get("timings", {}), "removed_by": {k: v for k, v in dd.items() if
                                                                    k.endswith("_duplicate") or k.endswith("_removed")},
                     "semantic": {k: v for k, v in dd.items() if k.startswith("semantic_")}}
        wall = time.time() - t
    import resource

    ru = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    return {"stage": stage, "corpus": path.name, "mode": mode, "rows": st["rows_in"], "wall_s": round(wall, 1),
            "rows_per_s": round(st["rows_in"] / wall, 1), "removed": st["removed"],
            "peak_rss_mb_process": max(rss.single, ru * 1024) // 2**20, "peak_rss_mb_tree": rss.total // 2**20,
            **extra}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stage", choices=("decontam", "dedup"), required=True)
    ap.add_argument("--corpus", choices=tuple(SIZES), required=True)
    ap.add_argument("--rows", type=int, default=0, help="the first N rows (0: the whole corpus)")
    ap.add_argument("--modes", default="off,on")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=1500, help="seconds per mode")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # path,mode: a child run
    args = ap.parse_args()
    if args.one:
        path, mode = args.one.rsplit(",", 1)
        print("RESULT", json.dumps(one(args.stage, Path(path), mode, args.workers)), flush=True)
        return
    path = corpus_path(args.corpus, args.rows)
    warm()
    for mode in args.modes.split(","):
        load0 = os.getloadavg()
        cmd = [sys.executable, "-m", "bench.semantic.throughput", "--stage", args.stage, "--corpus", args.corpus,
               "--workers", str(args.workers), "--one", f"{path},{mode}"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=args.timeout)
            lines = [ln for ln in out.splitlines() if ln.startswith("RESULT")]
            print(*lines or [f"FAILED {mode} rc={proc.returncode} {err[-2000:]}"], sep="\n", flush=True)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the run and its worker processes
            proc.communicate(timeout=60)
            print("TIMEOUT", args.stage, path.name, mode, args.timeout, flush=True)
        print("load before", [round(x, 2) for x in load0], "after", [round(x, 2) for x in os.getloadavg()],
              flush=True)


if __name__ == "__main__":
    main()
