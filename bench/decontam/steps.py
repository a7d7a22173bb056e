"""Per-step cost of the decontamination stage, for bench/decontam/probe.py's `steps` table.

The stage runs with its defaults in ONE process (1 worker: datatrove runs the tasks in-process), with timing
wrappers around the functions that make up each step, so the table shows where a whole run's seconds go.
Each wrapper records its *exclusive* seconds (its own time minus that of wrapped functions it calls), so the
rows add up to the wrapped total; `_subset` calls (the normaliser's passes on the rows a mask selects) also
record the share of texts they touch. Nothing here changes what the stage computes (the wrappers call the
original functions), and the flagged count is printed next to the table.
"""

from __future__ import annotations

import inspect
import linecache
import sys
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

# (module, attribute, label); classes as "Class.method". Order = table order.
WRAPPED = [
    ("cotforge.curate.decontam.stage", "_fresh_index", "index build (main process)"),
    ("cotforge.curate.decontam.index", "DecontamIndex.__init__", "index load (per task)"),
    ("cotforge.curate.decontam.scan", "matcher_norm", "norm: function renaming detection + request canon"),
    ("cotforge.curate.decontam.canon", "rename_functions", "norm python: rename_functions (per text)"),
    ("cotforge.curate.decontam.canon", "normalize_column", "norm: normaliser (kernel, or polars masks + scatter)"),
    ("cotforge.curate.text.normalize", "_polars_chars", "norm: math replace_many (all rows) + subset masks"),
    ("cotforge.curate.text.normalize", "_ascii_punctuation", "norm: ASCII punctuation + case (numpy bytes)"),
    ("cotforge.curate.text.normalize", "_split_letter_digit", "norm: letter/digit split (numpy bytes)"),
    ("cotforge.curate.text.normalize", "_polars_wrappers", "norm: wrapper candidate masks"),
    ("cotforge.curate.decontam.scan", "word_and_ngram_hashes", "hash: word + n-gram hashes"),
    ("cotforge.curate.decontam.scan", "ngram_hashes", "hash: bigram / shingle hashes"),
    ("cotforge.curate.decontam.scan", "HashedBatch.__init__", "hash: batch bookkeeping"),
    ("cotforge.curate.decontam.scan", "HashedBatch.row_ngrams", "lookup: row n-grams in the index (per candidate)"),
    ("cotforge.curate.decontam.match", "ngram_candidates", "lookup: n-gram candidates (prefilter, pair counts)"),
    ("cotforge.curate.decontam.match", "short_candidates", "lookup: short keys"),
    ("cotforge.curate.decontam.match", "shingle_candidates", "lookup: fuzzy shingle candidates"),
    ("cotforge.curate.decontam.match", "text_keys", "lookup: exact keys"),
    ("cotforge.curate.decontam.match", "copy_score", "check: copy_score (per candidate)"),
    ("cotforge.curate.decontam.match", "_reordered_words", "check: word-level reorder (inside copy_score)"),
    ("cotforge.curate.decontam.match", "pair_runs", "check: aligned runs (word-level reorder)"),
    ("cotforge.curate.decontam.match", "batch_runs", "check: aligned runs of all candidate pairs (batch)"),
    ("cotforge.curate.decontam.match", "_chain", "check: chain (inside copy_score)"),
    ("cotforge.curate.decontam.match", "Matcher.fuzzy", "check: fuzzy LSH query + containment"),
    ("cotforge.curate.decontam.match", "Matcher.side", "match: per-side Python around the steps"),
    ("cotforge.curate.decontam.match", "Matcher.prompt_side", "match: prompt cache"),
    ("cotforge.curate.decontam.match", "Matcher.match_batch", "match: batch bookkeeping, Match objects"),
    ("cotforge.curate.decontam.stage", "describe_matches", "describe: spans of flagged rows"),
    ("cotforge.curate.decontam.report", "ReportParts.add", "describe: report parts (counts, sample, records)"),
    ("cotforge.curate.io.writer", "TaskShards.keep_table", "task: write kept shards (Parquet zstd)"),
    ("cotforge.curate.io.writer", "TaskShards.remove_table", "task: write removed shards (Parquet zstd)"),
    ("cotforge.curate.io.writer", "TaskShards.close", "task: close shards, counts + report part"),
    ("cotforge.curate.decontam.stage", "DecontamSplit.run", "task: read batches, removed columns, stats"),
    ("cotforge.curate.decontam.stage", "start_stage", "ingest (engine: read + work shards)"),
    ("cotforge.curate.decontam.stage", "adopt_task_shards", "collect (task shards published by link)"),
    ("cotforge.curate.decontam.stage", "finish_stage", "publish (stage writer close)"),
    ("cotforge.curate.decontam.report", "write_contamination_report", "report (md/json/png/parquet)"),
]


class StepTimer:
    """Exclusive seconds and call counts per label, kept with a stack of open calls."""

    def __init__(self) -> None:
        self.excl: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.subset_rows: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # touched, seen
        self._stack: list[list[float]] = []  # [child seconds] per open call

    @contextmanager
    def timed(self, label: str):
        self._stack.append([0.0])
        t = time.perf_counter()
        try:
            yield
        finally:
            dt = time.perf_counter() - t
            child = self._stack.pop()[0]
            self.excl[label] += dt - child
            self.calls[label] += 1
            if self._stack:
                self._stack[-1][0] += dt

    def wrap(self, fn, label: str):
        if inspect.isgeneratorfunction(fn):  # a datatrove step's run: time each step of the generator
            def gen(*a, **k):
                it = fn(*a, **k)
                while True:
                    with self.timed(label):
                        try:
                            item = next(it)
                        except StopIteration:
                            return
                    yield item
            return gen

        def inner(*a, **k):
            with self.timed(label):
                return fn(*a, **k)
        return inner

    def wrap_subset(self, fn):
        """normalize._subset: labelled by its call site's source line, with the share of rows it touches."""
        def inner(s, mask, f):
            line = linecache.getline(sys._getframe(1).f_code.co_filename, sys._getframe(1).f_lineno).strip()
            label = "norm pass: " + line.replace("s = ", "").replace("return ", "")[:70]
            n = len(mask)
            got = self.subset_rows[label]
            got[0] += int(mask.sum()) if n else 0
            got[1] += n
            with self.timed(label):
                return fn(s, mask, f)
        return inner


def install(timer: StepTimer) -> list[tuple[object, str, object]]:
    """Wrap every function of WRAPPED (and normalize._subset); returns what to restore."""
    import importlib

    undo = []
    for mod_name, attr, label in WRAPPED:
        owner = importlib.import_module(mod_name)
        *path, name = attr.split(".")
        for p in path:
            owner = getattr(owner, p)
        orig = owner.__dict__[name]
        undo.append((owner, name, orig))
        setattr(owner, name, staticmethod(timer.wrap(orig.__func__, label)) if isinstance(orig, staticmethod)
                else timer.wrap(orig, label))
    norm = importlib.import_module("cotforge.curate.text.normalize")
    undo.append((norm, "_subset", norm._subset))
    norm._subset = timer.wrap_subset(norm._subset)
    return undo


def run_steps_table(path: Path, shared: Path, text_kernel: str = "auto") -> tuple[StepTimer, dict, float]:
    """The stage with its defaults on `path`, one process, wrapped: (timer, stats, wall seconds)."""
    import tempfile

    from cotforge.curate.core.benchmarks import local_benchmark_names
    from cotforge.curate.decontam.config import DecontamConfig
    from cotforge.curate.engine import ExecutorConfig
    from cotforge.curate.io.readers import InputSpec
    from cotforge.pipelines.stages import run_stage

    names = local_benchmark_names(shared / "benchmarks")
    cfg = DecontamConfig(benchmarks=names, benchmarks_dir=str(shared / "benchmarks"), text_kernel=text_kernel)
    timer = StepTimer()
    undo = install(timer)
    try:
        with tempfile.TemporaryDirectory() as d:
            t = time.perf_counter()
            with timer.timed("stage: rest (datatrove, benchmark files)"):
                stats = run_stage("decontaminate", [InputSpec(str(path), "corpus")], Path(d) / "o", cfg, ExecutorConfig(workers=1))
            wall = time.perf_counter() - t
    finally:
        for owner, name, orig in reversed(undo):
            setattr(owner, name, orig)
    return timer, stats, wall


def print_table(name: str, timer: StepTimer, stats: dict, wall: float, base_s: float, load: float) -> None:
    """The per-step table (exclusive seconds, share of the whole, baseline whole run / step) and the ceiling."""
    print(f"\n### {name}: {stats['rows_in']} rows, {stats['removed']} flagged; stage in one process {wall:.1f} s; "
          f"baseline whole run {base_s:.1f} s; load {load:.2f}\n")
    print("| step | calls | s (exclusive) | share of run | baseline / step | texts touched |\n|---|---:|---:|---:|---:|---:|")
    labels = [lab for _, _, lab in WRAPPED] + sorted(k for k in timer.excl if k.startswith("norm pass"))
    labels.append("stage: rest (datatrove, benchmark files)")
    for lab in labels:
        s = timer.excl.get(lab, 0.0)
        if not timer.calls.get(lab):
            continue
        rows = timer.subset_rows.get(lab)
        touched = f"{rows[0] / max(rows[1], 1):.1%}" if rows else ""
        print(f"| {lab} | {timer.calls[lab]} | {s:.2f} | {s / wall:.1%} | {base_s / max(s, 1e-9):.1f}x | {touched} |")
    ceiling(timer, wall, base_s)


def group(timer: StepTimer) -> dict[str, float]:
    """Exclusive seconds by kind: serial stage parts, kernels (normaliser, hashing, lookup), Python checks."""
    out: dict[str, float] = defaultdict(float)
    for lab, s in timer.excl.items():
        head = lab.split(":")[0].split(" (")[0]
        kind = {"norm python": "python", "index build": "serial", "ingest": "serial", "collect": "serial", "publish": "serial",
                "report": "serial", "stage": "serial", "norm": "kernel", "norm pass": "kernel", "hash": "kernel",
                "lookup": "kernel", "index load": "task", "task": "task", "check": "python", "match": "python",
                "describe": "python"}.get(head, "python")
        out[kind] += s
    return out


def ceiling(timer: StepTimer, wall: float, base_s: float, workers: int = 2) -> None:
    """What these kernels allow end to end on `workers` cores: serial parts + per-task work / workers."""
    g = group(timer)
    par = g["kernel"] + g["task"] + g["python"]
    now = g["serial"] + par / workers
    kern = g["serial"] + (g["kernel"] + g["task"]) / workers
    target = base_s / 5
    print(f"\nserial (main process: index, ingest, collect, publish, report, rest) {g['serial']:.1f} s; per-task "
          f"kernels (normaliser, hashing, lookup) {g['kernel']:.1f} s; per-task I/O and index load {g['task']:.1f} s; "
          f"per-task Python (checks, describe, bookkeeping) {g['python']:.1f} s.")
    print(f"- modelled on {workers} workers: {now:.1f} s = {base_s / now:.2f}x the baseline; with the per-task Python "
          f"at zero: {kern:.1f} s = {base_s / kern:.2f}x; with the serial parts at zero too: "
          f"{base_s / max((g['kernel'] + g['task']) / workers, 1e-9):.2f}x.")
    print(f"- 5x needs <= {target:.1f} s end to end: serial + per-task / {workers} <= {target:.1f} s (now "
          f"{g['serial']:.1f} + {par / workers:.1f}); even with every serial part at zero, the per-task work would "
          f"have to fall from {par:.1f} s to {workers * target:.1f} s ({workers * target / max(par, 1e-9):.0%} of now).")
