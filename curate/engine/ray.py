"""Ray: connect (or start a local instance), and datatrove's RayPipelineExecutor with tasks grouped into a
few Ray jobs.

Starting a Ray worker costs ~1.5 s here, so one Ray job per datatrove task made small steps slow (dedup's
bucket step: one job per LSH band). `GroupedRayExecutor` launches at most `jobs` (default: `workers`) Ray
jobs per step; each runs its share of ranks one after the other, every rank in a fresh process, so a
rank's memory never adds to the next one's and the memory budget per worker holds; a rank whose process dies is
a failed rank, never a wait. A dependency that left
ranks unfinished raises at once (datatrove's own executor would poll it every two minutes, forever).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

from datatrove.executor.ray import RankWorker, RayPipelineExecutor

from cotforge.curate.engine.options import RayOptions
from cotforge.curate.engine.slurm import JobsFailed, failure_detail

log = logging.getLogger(__name__)


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def ensure_ray(opts: RayOptions, workers: int) -> str:
    """Join the cluster at `opts.address` (or $RAY_ADDRESS), or start a local Ray instance; returns which.

    A cluster that rejects the connection for authentication gets an error saying which variables to set."""
    try:
        import ray
    except ImportError as e:
        raise RuntimeError("executor ray needs the ray package: pip install 'cotforge[ray]'") from e
    if ray.is_initialized():
        return "already connected"
    address = opts.address or os.environ.get("RAY_ADDRESS")
    try:
        if address:
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            return f"joined {address}"
        ray.init(num_cpus=opts.num_cpus or max(1, workers), include_dashboard=False, log_to_driver=False,
                 logging_level=logging.WARNING)
        return "started a local Ray instance"
    except Exception as e:  # ray raises several types; auth failures mention the token
        text = str(e)
        if "auth" in text.lower() or "token" in text.lower():
            raise RuntimeError(f"ray: cannot join {address}: {text.splitlines()[0]}. A cluster started with token "
                               "authentication (Ray >= 2.60) needs RAY_AUTH_MODE=token and its token in this "
                               "process's environment") from e
        raise


# imported once by each actor's fork server (with the modules of the executor's steps), so a rank's process
# does not import them again
PRELOAD = ("datatrove.executor.base", "polars", "pyarrow.parquet", "numpy")


def preload_modules(pipeline: list) -> list[str]:
    """`PRELOAD` and the modules that define the pipeline's steps."""
    steps = {getattr(step, "__module__", None) or type(step).__module__ for step in pipeline}
    return [*PRELOAD, *sorted(m for m in steps if m and m != "__main__")]


class SequentialRankWorker(RankWorker):
    """datatrove's Ray actor, running its ranks one after the other, each in a fresh process.

    Each rank's process comes from a fork server (a clean single-threaded process started once per actor):
    forking the actor itself would copy locks that Ray's gRPC threads may hold at that instant into a child
    that can never release them. One `Process` per rank, joined and its exit code checked, rather than a
    `Pool`: a pool whose worker dies (killed for memory, a native crash) waits for its lost task forever,
    while a dead process is a failed rank that the step reports."""

    def run_for_rank(self, executor_ref, ranks, node_ips, node_idx):
        import multiprocessing

        from datatrove.utils.stats import PipelineStats
        from ray import cloudpickle

        ctx = multiprocessing.get_context("forkserver")
        blob = cloudpickle.dumps(executor_ref)
        ctx.set_forkserver_preload(preload_modules(executor_ref.pipeline))
        rank_ids = list(range(len(ranks))) if executor_ref.log_first else list(range(1, len(ranks) + 1))
        failed: list[str] = []
        for rank, rank_id in zip(ranks, rank_ids, strict=True):
            # not daemonic: a rank may start worker processes of its own (the math verifier's pool)
            proc = ctx.Process(target=run_one_rank, args=(blob, rank, rank_id, node_ips, node_idx))
            proc.start()
            proc.join()
            if proc.exitcode != 0:
                failed.append(f"rank {rank}: {exit_reason(proc.exitcode)}")
        if failed:
            raise RuntimeError(f"{len(failed)} of {len(ranks)} ranks of this Ray job failed: " + "; ".join(failed))
        return PipelineStats()


def run_one_rank(blob: bytes, rank: int, rank_id: int, node_ips: list[str], node_idx: int) -> None:
    """One datatrove rank in this (fresh) process; `blob` is the executor, cloudpickled by the actor."""
    from ray import cloudpickle

    executor_ref = cloudpickle.loads(blob)
    os.environ["RAY_NODELIST"] = ",".join(node_ips)
    os.environ["RAY_NODEID"] = str(node_idx)
    time.sleep(random.randint(0, executor_ref.randomize_start_duration))
    node_rank = -1 if executor_ref.nodes_per_task == 1 else node_idx
    executor_ref._run_for_rank(rank, rank_id, node_rank=node_rank)


def exit_reason(code: int | None) -> str:
    """A child's exit code in words: 'exit 1', or the signal that killed it ('killed by SIGKILL')."""
    if code is not None and code < 0:
        import signal

        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"


@contextlib.contextmanager
def _sequential_workers() -> Iterator[None]:
    """datatrove's task manager builds actors from the module's `RankWorker`: swap ours in for one run."""
    import datatrove.executor.ray as dt_ray

    old, dt_ray.RankWorker = dt_ray.RankWorker, SequentialRankWorker
    try:
        yield
    finally:
        dt_ray.RankWorker = old


class GroupedRayExecutor(RayPipelineExecutor):
    """RayPipelineExecutor whose tasks run in at most `jobs` Ray jobs, failing fast on a broken dependency."""

    def __init__(self, *args, jobs: int = 1, **kwargs):
        super().__init__(*args, **kwargs)
        self.tasks_per_job = max(1, -(-self.tasks // max(1, jobs)))
        self.workers = min(self.workers, max(1, jobs))

    def run(self) -> None:
        dep, self.depends = self.depends, None
        if dep is not None:
            dep.run()
            check_completed(dep)
        with _sequential_workers():
            super().run()


def check_completed(ex: RayPipelineExecutor) -> None:
    missing = ex.get_incomplete_ranks(skip_completed=True)
    if missing:
        d = Path(ex.logging_dir.path)
        raise JobsFailed(f"ray: {len(missing)} of {ex.world_size} tasks did not finish (ranks {missing[:10]}); run "
                         f"the same command again to rerun only them.\n{failure_detail(d, missing)}")


def make_ray_executor(pipeline: list, tasks: int, logging_dir: str | Path, opts: RayOptions, workers: int,
                      depends: RayPipelineExecutor | None = None) -> GroupedRayExecutor:
    """A grouped Ray executor for one step (skip_completed: a rerun runs only unfinished ranks)."""
    jobs = min(tasks, opts.jobs or max(1, workers))
    return GroupedRayExecutor(pipeline=pipeline, tasks=tasks, workers=max(1, workers), logging_dir=str(logging_dir),
                              depends=depends, skip_completed=True, cpus_per_task=opts.cpus_per_task,
                              mem_per_cpu_gb=opts.mem_per_cpu_gb, gpus_per_task=opts.gpus_per_task,
                              time=opts.time_s, jobs=jobs)
