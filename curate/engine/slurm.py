"""Slurm: datatrove's SlurmPipelineExecutor with cotforge's options, the sbatch script it would submit (for
--dry-run), and waiting for the submitted jobs.

datatrove's executor submits job arrays and returns at once. cotforge names every job after the step and a
hash of its work folder (`cotforge-dedup-buckets-1a2b3c4d`), so any later invocation can find the jobs of
that work folder with `squeue --name` whether it submitted them or not: it waits for jobs still queued or
running instead of submitting them twice, and submits only the ranks that left no completion file.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from datatrove.executor.slurm import SlurmPipelineExecutor

from cotforge.curate.engine.options import SlurmOptions, current_venv_line

log = logging.getLogger(__name__)

ACTIVE = ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING",
          "STAGE_OUT", "REQUEUE_HOLD", "REQUEUE_FED")


class JobsPending(RuntimeError):  # noqa: N818 - a state the caller reports, not a bug
    """Jobs were submitted (or are still queued/running) and the caller asked not to wait for them."""


class JobsFailed(RuntimeError):  # noqa: N818
    """A step's jobs ended and some of its ranks left no completion file."""


def job_name(prefix: str | None, step: str, logging_dir: str | Path) -> str:
    """`<prefix>-<step>-<8 hex of the work folder>`: unique per work folder, the same on every invocation."""
    token = hashlib.sha1(str(Path(logging_dir).resolve()).encode()).hexdigest()[:8]
    return f"{prefix or 'cotforge'}-{step}-{token}"


def executor_kwargs(opts: SlurmOptions, workers: int) -> dict:
    """SlurmPipelineExecutor keyword arguments for these options (qos/account omitted when unset)."""
    sbatch = dict(opts.sbatch_args)
    if opts.account:
        sbatch["account"] = opts.account
    return {"time": opts.time, "partition": opts.partition, "cpus_per_task": opts.cpus_per_task,
            "mem_per_cpu_gb": opts.mem_per_cpu_gb, "gpus_per_task": opts.gpus_per_task, "qos": opts.qos or "",
            "env_command": opts.env_line(), "sbatch_args": sbatch, "max_array_size": opts.max_array_size,
            "requeue": opts.requeue, "with_srun": opts.srun, "workers": workers if workers > 0 else -1}


def tasks_per_job(opts: SlurmOptions, tasks: int, workers: int) -> int:
    """The option, else the tasks spread over `workers` array jobs."""
    return opts.tasks_per_job or max(1, -(-tasks // max(1, workers)))


def env_line(opts: SlurmOptions, logging_dir: str | Path) -> str:
    """The job's setup line: the user's environment, then the step's `bin/` first on PATH.

    `bin/launch_pickled_pipeline` runs datatrove's launcher with the job's Python (`python -m`), so a
    virtualenv that sees datatrove through the base interpreter (no console script of its own) still runs
    the pickled pipeline with the interpreter that can import cotforge."""
    first = opts.env_line()
    path = f"export PATH={Path(logging_dir).resolve() / 'bin'}:$PATH"
    if first is None:
        first = f"export PATH={os.path.dirname(sys.executable)}:$PATH"
    return f"{first}; {path}"


def write_launcher(logging_dir: str | Path, opts: SlurmOptions) -> None:
    """`<logging_dir>/bin/launch_pickled_pipeline`: datatrove's launcher under the job's Python."""
    python = sys.executable if opts.env_line() == current_venv_line() else "python"
    d = Path(logging_dir) / "bin"
    d.mkdir(parents=True, exist_ok=True)
    f = d / "launch_pickled_pipeline"
    f.write_text(f'#!/bin/bash\nexec {python} -m datatrove.tools.launch_pickled_pipeline "$@"\n')
    f.chmod(0o755)


def make_slurm_executor(pipeline: list, tasks: int, logging_dir: str | Path, opts: SlurmOptions, workers: int,
                        step: str, depends: SlurmPipelineExecutor | None = None,
                        dry_run: bool = False) -> SlurmPipelineExecutor:
    """A SlurmPipelineExecutor for one step (skip_completed: a rerun submits only unfinished ranks)."""
    logs = Path(opts.logs) / step if opts.logs else None
    if not dry_run:
        write_launcher(logging_dir, opts)
    kwargs = executor_kwargs(opts, workers)
    kwargs["env_command"] = env_line(opts, logging_dir)
    kwargs["tasks_per_job"] = tasks_per_job(opts, tasks, workers)
    return SlurmPipelineExecutor(pipeline=pipeline, tasks=tasks, logging_dir=str(logging_dir), depends=depends,
                                 job_name=job_name(opts.job_name, step, logging_dir), skip_completed=True,
                                 slurm_logs_folder=str(logs) if logs else None, **kwargs)


def sbatch_script(opts: SlurmOptions, tasks: int | None, logging_dir: str | Path, workers: int, step: str) -> str:
    """The sbatch script datatrove would submit for one step (nothing is created or submitted).

    `tasks=None` (not known before ingest) shows the array as `0-<tasks-1>`."""
    ex = make_slurm_executor([], tasks or 1, logging_dir, opts, workers, step, dry_run=True)
    real_logs = ex.slurm_logs_folder
    with tempfile.TemporaryDirectory() as tmp:  # get_sbatch_args creates the log folder: point it elsewhere
        ex.slurm_logs_folder = tmp
        jobs = -(-(tasks or 1) // ex.tasks_per_job)
        args = ex.get_sbatch_args(min(jobs, opts.max_array_size))
    args["output"] = args["error"] = os.path.join(real_logs, "%A_%a.out")
    if tasks is None:
        args["array"] = "0-<tasks-1>" + (f"%{workers}" if workers > 0 else "")
    run = f"launch_pickled_pipeline {ex.logging_dir.resolve_paths('executor.pik')}"
    return ex.get_launch_file_contents(args, f"srun -l -n {ex.nodes_per_task} {run}" if opts.srun else run)


# --------------------------------------------------------------------------- waiting


@dataclass
class Job:
    id: str
    name: str
    state: str
    reason: str


def slurm_available() -> bool:
    return shutil.which("sbatch") is not None and shutil.which("squeue") is not None


def active_jobs(names: Sequence[str]) -> list[Job]:
    """Queued or running jobs with these names (any user), from squeue."""
    if not names:
        return []
    res = subprocess.run(["squeue", "-h", "--name", ",".join(names), "-o", "%i|%j|%T|%r"], capture_output=True,
                         text=True)
    if res.returncode != 0:
        raise RuntimeError(f"squeue failed ({res.returncode}): {res.stderr.strip()}")
    jobs = []
    for line in res.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 4 and parts[2] in ACTIVE:
            jobs.append(Job(*parts))
    return jobs


def cancel(jobs: Sequence[Job]) -> None:
    ids = sorted({j.id.split("_")[0] for j in jobs})
    if ids:
        subprocess.run(["scancel", *ids], capture_output=True, text=True)


def incomplete_ranks(logging_dir: Path, tasks: int) -> list[int]:
    """Ranks of a step without a datatrove completion file."""
    done = {p.name for p in (logging_dir / "completions").glob("*")} if (logging_dir / "completions").is_dir() else set()
    return [r for r in range(tasks) if f"{r:05d}" not in done]


def failure_detail(logging_dir: Path, ranks: Sequence[int], lines: int = 12) -> str:
    """The end of the first failed rank's datatrove log (else of the newest Slurm output file)."""
    for r in ranks[:1]:
        f = logging_dir / "logs" / f"task_{r:05d}.log"
        if f.exists():
            tail = f.read_text(errors="replace").splitlines()[-lines:]
            return f"{f}:\n  " + "\n  ".join(tail)
    outs = sorted((logging_dir / "slurm_logs").glob("*.out"), key=lambda p: p.stat().st_mtime)
    if outs:
        tail = outs[-1].read_text(errors="replace").splitlines()[-lines:]
        return f"{outs[-1]}:\n  " + "\n  ".join(tail)
    return f"no task log under {logging_dir} (the job may not have started: check the partition and sbatch options)"


def _stuck(job: Job) -> bool:
    """A job that will never start: something it depends on failed."""
    return job.state == "PENDING" and "DependencyNeverSatisfied" in job.reason


def wait_for_steps(steps: Sequence[tuple[str, Path, int]], names: Sequence[str], stage: str, *,
                   poll_s: float = 5.0, timeout_s: float | None = None) -> None:
    """Block until the jobs of every step (`names[i]` for `steps[i]` = (name, logging_dir, tasks)) ended,
    checking each step's completion files as soon as its jobs are gone.

    A step whose jobs ended with ranks unfinished cancels the jobs still waiting on it and raises JobsFailed
    (the step, its ranks and the end of a failed task's log); jobs left pending because a dependency failed
    count as ended. JobsPending when `timeout_s` passes first (the jobs keep running)."""
    t0, last_note = time.time(), time.time()
    pending = list(range(len(steps)))
    while pending:
        jobs = active_jobs(names)
        for i in list(pending):
            mine = [j for j in jobs if j.name == names[i]]
            if mine and not all(_stuck(j) for j in mine):
                continue
            name, d, tasks = steps[i]
            missing = incomplete_ranks(d, tasks)
            if missing:
                cancel(jobs)
                raise JobsFailed(f"{stage}: step {name}: {len(missing)} of {tasks} tasks did not finish (ranks "
                                 f"{missing[:10]}{' ...' if len(missing) > 10 else ''}); fix the cause and run the "
                                 "same command again: finished tasks are kept, only these are resubmitted.\n"
                                 f"{failure_detail(d, missing)}")
            if mine:  # a finished step's leftover (datatrove's stats merge waiting on nothing)
                cancel(mine)
            pending.remove(i)
        if not pending:
            return
        if timeout_s is not None and time.time() - t0 > timeout_s:
            raise JobsPending(f"{stage}: Slurm jobs still queued or running after {timeout_s:.0f}s "
                              f"({', '.join(names[i] for i in pending)}); run the same command again to wait for "
                              "them and publish (finished work is reused)")
        if time.time() - last_note > 60:
            done = sum(t - len(incomplete_ranks(d, t)) for _, d, t in steps)
            log.info("%s: waiting for %d Slurm jobs (%d of %d tasks done)", stage, len(jobs), done,
                     sum(t for *_, t in steps))
            last_note = time.time()
        time.sleep(poll_s)
