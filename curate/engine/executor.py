"""How datatrove runs a stage: `ExecutorConfig` (local, Slurm or Ray and their options), the executor for one
step, and `run_steps`, which runs a stage's steps in order on any executor and returns only when every rank
finished (Slurm: chained job arrays, found again and waited for by a rerun)."""

from __future__ import annotations

import dataclasses
import difflib
import gzip
import json
import logging
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from datatrove.executor import LocalPipelineExecutor
from datatrove.executor.base import PipelineExecutor

from cotforge.curate.engine.options import RayOptions, SlurmOptions, parse_options
from cotforge.curate.engine.ray import ensure_ray, make_ray_executor
from cotforge.curate.engine.slurm import (
    JobsFailed,
    JobsPending,
    active_jobs,
    failure_detail,
    incomplete_ranks,
    job_name,
    make_slurm_executor,
    sbatch_script,
    wait_for_steps,
)
from cotforge.curate.io.budget import DEFAULT_BUDGET_MB, MemoryBudget
from cotforge.curate.io.ingest import DEFAULT_ROWS_PER_TASK
from cotforge.curate.io.inputs import iter_input_rows
from cotforge.curate.io.readers import InputSpec

log = logging.getLogger(__name__)


EXECUTORS = ("local", "slurm", "ray")


@dataclass
class ExecutorConfig:
    """How datatrove runs a stage: `local` (default), `slurm` or `ray`, with their options.

    The same settings serve every datatrove-based stage (the recipe's `executor:` section, or the generated
    `--executor --workers --tasks --rows-per-task --executor-option KEY=VALUE --keep-work ...` flags). `options` are
    checked by name against `curate.engine.options.SlurmOptions` / `RayOptions`. Slurm stages wait for
    their jobs (`wait`), or return and are resumed by the next invocation, which reuses finished work."""

    executor: str = field(default="local", metadata={"help": "datatrove executor.", "choices": EXECUTORS})
    workers: int = field(default=2, metadata={"help": "Tasks run at once (local processes, Slurm/Ray concurrency)."})
    tasks: int | None = field(default=None, metadata={
        "help": "Split the input into about this many datatrove tasks (replaces rows_per_task)."})
    rows_per_task: int = field(default=DEFAULT_ROWS_PER_TASK, metadata={
        "help": "Most rows per datatrove task (a task also ends at the memory budget's bytes per task)."})
    options: dict[str, Any] = field(default_factory=dict, metadata={
        "help": "Option of the Slurm/Ray executor, e.g. partition=cpu or cpus_per_task=4 (repeatable; see "
                "SlurmOptions / RayOptions).", "flag": "--executor-option", "metavar": "KEY=VALUE"})
    keep_work: bool = field(default=False, metadata={
        "help": "Keep OUT/_work (work shards, datatrove logs, indexes) after publishing."})
    memory_budget_mb: int = field(default=DEFAULT_BUDGET_MB, metadata={
        "help": "Peak memory per worker process in MiB: tasks, batches and buffered writes are cut by bytes to "
                "stay under it whatever the row length."})
    wait: bool = field(default=True, metadata={
        "help": "Wait for Slurm jobs and publish; false: submit and return (JobsPending), and let a later "
                "invocation of the same command wait or publish."})
    poll_s: float = field(default=5.0, metadata={"help": "Seconds between Slurm queue checks while waiting."})
    wait_timeout_s: float | None = field(default=None, metadata={
        "help": "Stop waiting after this many seconds (the jobs keep running; rerun to pick them up)."})

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            hint = difflib.get_close_matches(str(self.executor), EXECUTORS, n=1)
            raise ValueError(f"executor: {self.executor!r} is not one of {', '.join(EXECUTORS)}"
                             + (f" (did you mean {hint[0]!r}?)" if hint else ""))
        for name in ("workers", "rows_per_task"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1 (got {getattr(self, name)})")
        if self.tasks is not None and self.tasks < 1:
            raise ValueError(f"tasks: must be >= 1 or null (got {self.tasks})")
        if not isinstance(self.options, dict):
            raise ValueError(f"options: expected a mapping of executor options, got {self.options!r}")
        if self.poll_s <= 0:
            raise ValueError(f"poll_s: must be > 0 (got {self.poll_s})")
        self.parsed_options()
        self.budget()

    def parsed_options(self) -> SlurmOptions | RayOptions | None:
        """`options` validated for this executor (ValueError naming a misspelt key)."""
        return parse_options(self.executor, self.options)

    def budget(self) -> MemoryBudget:
        return MemoryBudget(self.memory_budget_mb)

    def for_inputs(self, specs: list[InputSpec]) -> ExecutorConfig:
        """This config with `tasks` turned into rows per task for these inputs (unchanged without `tasks`)."""
        if not self.tasks:
            return self
        return dataclasses.replace(self, tasks=None, rows_per_task=max(1, math.ceil(count_rows(specs) / self.tasks)))

    def describe(self, stages: list[str] | None = None, run_dir: str | Path = "<run>") -> list[str]:
        """Dry-run lines: the executor and its options; for Slurm the sbatch script of the first stage's
        first step, as it would be submitted into `run_dir`."""
        opts = self.parsed_options()
        lines = [f"curation executor: {self.executor} ({self.workers} workers, <= {self.rows_per_task} rows and "
                 f"<= {self.budget().task_bytes >> 20} MiB of rows per task, memory budget "
                 f"{self.memory_budget_mb} MiB per worker)"]
        if opts is not None:
            lines.append(f"  options: {json.dumps(dataclasses.asdict(opts), sort_keys=True, default=str)}")
        if isinstance(opts, SlurmOptions):
            step = (stages or ["stage"])[0]
            lines.append(f"  sbatch script of {step} (one job array per datatrove step; "
                         f"{'waits for the jobs' if self.wait else 'returns after submitting, a rerun resumes'}):")
            logs = Path(run_dir) / step / "_work" / step / "logs" / f"1_{step}"
            lines += ["    " + ln for ln in sbatch_script(opts, None, logs, self.workers, step).splitlines()]
        elif isinstance(opts, RayOptions):
            lines.append(f"  ray: {opts.address or 'RAY_ADDRESS, else a local instance'}; at most "
                         f"{opts.jobs or self.workers} Ray jobs per step")
        return lines


def count_rows(specs: list[InputSpec]) -> int:
    """Cheap row count for `tasks`: Parquet metadata, JSONL line counts (other inputs are read)."""
    total = 0
    for spec in specs:
        p = Path(spec.path)
        if p.is_file() and p.name.endswith(".parquet"):
            total += pq.ParquetFile(p).metadata.num_rows
        elif p.is_file() and p.name.endswith((".jsonl", ".jsonl.gz")):
            opener = gzip.open if p.name.endswith(".gz") else open
            with opener(p, "rb") as fh:
                total += sum(1 for line in fh if line.strip())
        else:
            total += sum(1 for _ in iter_input_rows([spec]))
    return total


def make_executor(pipeline: list, tasks: int, logging_dir: str | Path, cfg: ExecutorConfig,
                  depends: PipelineExecutor | None = None, name: str = "cotforge") -> PipelineExecutor:
    """A datatrove executor for `pipeline` over `tasks` tasks (local, Slurm or Ray); reruns skip finished ranks."""
    opts = cfg.parsed_options()
    if isinstance(opts, SlurmOptions):
        return make_slurm_executor(pipeline, tasks, logging_dir, opts, cfg.workers, name, depends=depends)
    if isinstance(opts, RayOptions):
        return make_ray_executor(pipeline, tasks, logging_dir, opts, cfg.workers, depends=depends)
    return SharedCoresExecutor(pipeline=pipeline, tasks=tasks, workers=min(cfg.workers, tasks),
                               logging_dir=str(logging_dir), depends=depends, skip_completed=True)


# imported by the fork server the local executor starts its task processes from (curate/engine/warm.py)
FORKSERVER_PRELOAD = ("cotforge.curate.engine.warm",)


class SharedCoresExecutor(LocalPipelineExecutor):
    """datatrove's local executor telling each task its share of the cores (DATATROVE_CPUS_PER_TASK = usable
    cores / workers, as its Slurm and Ray executors tell theirs cpus_per_task; the local one says -1), so a task
    running a torch model (the semantic tier) uses that many threads instead of one per core in every task.

    With several workers, datatrove starts each step's task processes from a fork server (started once per
    process); `run` asks it to preload `FORKSERVER_PRELOAD` first, so the text kernel is loaded once, not in
    every task process of every step. The preload cannot change results: it only loads code."""

    def run(self):
        if self.workers != 1 and self.start_method == "forkserver":
            import multiprocess

            multiprocess.get_context("forkserver").set_forkserver_preload(list(FORKSERVER_PRELOAD))
        return super().run()

    def get_distributed_env(self, node_rank: int = -1):
        env = super().get_distributed_env(node_rank)
        env["datatrove_cpus_per_task"] = str(max(1, usable_cores() // max(1, self.workers)))
        return env


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask; os.cpu_count() where there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


@dataclass
class Step:
    """One datatrove executor run of a stage: its pipeline over `tasks` tasks."""

    name: str
    pipeline: list
    tasks: int


def run_steps(work: Path, steps: list[Step], cfg: ExecutorConfig, stage: str) -> dict[str, float]:
    """Run a stage's steps in order and return only when every rank of every step finished.

    Local and Ray run step after step (seconds per step are returned). Slurm submits the steps as chained job
    arrays, or finds the arrays of this work folder still queued or running from an earlier invocation and
    does not submit them again; then waits for them (`cfg.wait`) or raises JobsPending. Every executor skips
    ranks that already finished, so a rerun after a failure runs only the rest. Logs: work/logs/<i>_<step>."""
    logs = [work / "logs" / f"{i}_{s.name}" for i, s in enumerate(steps, 1)]
    timings: dict[str, float] = {}
    if cfg.executor == "slurm":
        opts = cfg.parsed_options()
        names = [job_name(opts.job_name, _step_id(stage, s, steps), d) for s, d in zip(steps, logs, strict=True)]
        queued = active_jobs(names)
        if queued:
            log.info("%s: %d Slurm jobs of this work folder are still queued or running: waiting for them",
                     stage, len(queued))
        else:
            prev = None
            for s, d in zip(steps, logs, strict=True):
                prev = make_executor(s.pipeline, s.tasks, d, cfg, depends=prev, name=_step_id(stage, s, steps))
            prev.run()
            log.info("%s: submitted %d steps to Slurm (%s)", stage, len(steps), ", ".join(names))
        if not cfg.wait:
            raise JobsPending(f"{stage}: Slurm jobs submitted ({', '.join(names)}); run the same command again to "
                              "wait for them and publish kept/, removed/ and stats.json (finished work is reused)")
        wait_for_steps([(s.name, d, s.tasks) for s, d in zip(steps, logs, strict=True)], names, stage,
                       poll_s=cfg.poll_s, timeout_s=cfg.wait_timeout_s)
        return timings
    if cfg.executor == "ray":
        log.info("%s: ray: %s", stage, ensure_ray(cfg.parsed_options(), cfg.workers))
    for s, d in zip(steps, logs, strict=True):
        t = time.time()
        log.info("%s: step %s (%d tasks, %d workers)", stage, s.name, s.tasks, min(cfg.workers, s.tasks))
        make_executor(s.pipeline, s.tasks, d, cfg, name=_step_id(stage, s, steps)).run()
        missing = incomplete_ranks(d, s.tasks)
        if missing:
            raise JobsFailed(f"{stage}: step {s.name}: {len(missing)} of {s.tasks} tasks did not finish (ranks "
                             f"{missing[:10]}); run the same command again to rerun only them.\n"
                             f"{failure_detail(d, missing)}")
        timings[f"{s.name}_s"] = round(time.time() - t, 3)
    return timings


def _step_id(stage: str, step: Step, steps: list[Step]) -> str:
    """`stage` for a one-step stage, else `stage-step` (Slurm job names, datatrove job names)."""
    return stage if len(steps) == 1 else f"{stage}-{step.name}"

