"""Where the dedup stage's time goes: one run on a generated corpus with every function profiled (cProfile), in
this one process (`--workers 1`: datatrove's local executor runs the tasks in-process) or with a pool.

    python -m bench.dedup.probe --rows 50000 [--workers 1] [--top 30]

Prints the fixed per-process costs first (interpreter + imports of the stage, the text kernel's first load),
then the stage's step timings (stats.json) and the functions with the most exclusive and inclusive time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.dedup.speed import generate


def fixed_costs() -> dict[str, float]:
    """Seconds of a bare interpreter, of importing the stage in a fresh one, and of the kernel's first call."""
    def timed(code: str) -> float:
        t = time.time()
        subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
        return round(time.time() - t, 3)

    return {"python_s": timed("pass"),
            "import_stage_s": timed("import cotforge.pipelines.stages, cotforge.curate.dedup.stage"),
            "import_stage_and_kernel_first_call_s": timed(
                "import cotforge.curate.dedup.stage\n"
                "from cotforge.curate.text.columns import normalize_list\n"
                "from cotforge.curate.text.normalize import DEFAULT_NORM\n"
                "normalize_list(['A b c'], DEFAULT_NORM, 'auto')")}


class RssSampler:
    """Samples this process's RSS every `every` seconds in a thread, and marks phases (the stage's log lines
    "dedup: step NAME"), so the peak of each step can be read off: memory that grows with the input shows up
    as a step whose peak grows with the row count."""

    def __init__(self, every: float = 0.05):
        import logging
        import threading

        self.every, self.phase, self.peaks, self.starts = every, "ingest", {}, {"ingest": self.rss_mb()}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        sampler = self

        class Marks(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                msg = record.getMessage()
                if ": step " in msg:
                    sampler.mark(msg.split(": step ")[1].split(" ")[0])

        self.handler = Marks()

    def mark(self, phase: str) -> None:
        """A new phase starts now (its RSS at the start is kept: peak - start = the phase's own growth)."""
        self.starts[phase] = self.rss_mb()
        self.phase = phase

    def growth(self) -> dict[str, int]:
        """Per phase, peak RSS minus RSS at its start (MB): the memory the phase itself added."""
        return {k: round(self.peaks.get(k, v) - v) for k, v in self.starts.items()}

    @staticmethod
    def rss_mb() -> float:
        with open("/proc/self/status") as f:
            return next(int(x.split()[1]) for x in f if x.startswith("VmRSS:")) / 1024

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            r = self.rss_mb()
            self.peaks[self.phase] = max(self.peaks.get(self.phase, 0.0), r)

    def __enter__(self) -> RssSampler:
        import logging

        logging.getLogger("cotforge").addHandler(self.handler)
        logging.getLogger("cotforge").setLevel(logging.INFO)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        import logging

        self._stop.set()
        self._thread.join(timeout=5)
        logging.getLogger("cotforge").removeHandler(self.handler)


def rss_per_step(path: Path, out: Path, workers: int) -> tuple[dict[str, int], dict[str, int]]:
    """(peak RSS, peak minus RSS at the step's start), MB, of this process in each step of one stage run (tasks
    run here with 1 worker; the report and collect count in `filter`)."""
    from cotforge.curate.dedup.config import DedupConfig
    from cotforge.curate.engine import ExecutorConfig
    from cotforge.curate.io.readers import InputSpec
    from cotforge.pipelines.stages import run_stage

    with RssSampler() as s:
        run_stage("dedup", [InputSpec(str(path), source_name="gen")], out, DedupConfig(),
                  ExecutorConfig(workers=workers, rows_per_task=25_000))
    return {k: round(v) for k, v in s.peaks.items()}, s.growth()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--no-fixed", action="store_true", help="skip the fixed-cost subprocess timings")
    ap.add_argument("--rss", default=None, help="instead: peak RSS per step for these generated files (comma list)")
    args = ap.parse_args()
    if args.rss:
        for f in args.rss.split(","):
            with tempfile.TemporaryDirectory() as d:
                t = time.time()
                peaks, growth = rss_per_step(Path(f), Path(d) / "o", args.workers)
                print(f"{f}: peak RSS per step (MB) {json.dumps(peaks)}, growth within the step {json.dumps(growth)}; "
                      f"{time.time() - t:.0f} s, "
                      f"load {os.getloadavg()[0]:.2f}", flush=True)
        return
    if not args.no_fixed:
        print("fixed per-process costs:", json.dumps(fixed_costs()), flush=True)
    from cotforge.curate.dedup.config import DedupConfig
    from cotforge.curate.engine import ExecutorConfig
    from cotforge.curate.io.readers import InputSpec
    from cotforge.pipelines.stages import run_stage

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "gen.parquet"
        generate(path, args.rows)
        prof = cProfile.Profile()
        t = time.time()
        prof.enable()
        stats = run_stage("dedup", [InputSpec(str(path), source_name="gen")], Path(d) / "o", DedupConfig(),
                          ExecutorConfig(workers=args.workers, rows_per_task=25_000))
        prof.disable()
        wall = time.time() - t
    print(f"{args.rows} rows, {args.workers} worker(s): wall {wall:.2f} s, load {os.getloadavg()[0]:.2f}")
    print("steps:", json.dumps(stats["dedup"]["timings"]))
    for key in ("tottime", "cumulative"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(args.top)
        print(f"\n--- by {key} ---\n" + "\n".join(buf.getvalue().splitlines()[6:]))


if __name__ == "__main__":
    main()
