"""A local Ray instance: the two-stage pipeline under `executor: ray` publishes the same bytes as the local
executor, and a step of many small tasks runs in at most `workers` Ray jobs. Skips when ray is not
installed (`pip install 'cotforge[ray]'`; .ci/run installs it)."""

from __future__ import annotations

import json
import os
import signal
import sys

import pytest
from engine_cases import assert_same_outputs, make_data, recipe

from cotforge.curate.engine import ExecutorConfig
from cotforge.curate.engine.options import RayOptions
from cotforge.curate.engine.ray import make_ray_executor
from cotforge.pipelines.runner import run_recipe

ray = pytest.importorskip("ray", reason="ray not installed (pip install 'cotforge[ray]')")


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray instance for this module (2 CPUs), shut down afterwards.

    Ray first has to run one trivial task within a minute: a machine where Ray itself cannot start or schedule
    (no shared memory, a sandbox without the sockets it needs) skips these tests with Ray's reason instead of
    waiting on it."""
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        ray.get(ray.remote(lambda: 1).remote(), timeout=60)
    except Exception as e:  # ray raises its own types (GetTimeoutError, RaySystemError, ...)
        ray.shutdown()
        pytest.skip(f"Ray cannot run a task on this machine: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    # the steps below are defined in this test module, which Ray's workers cannot import: send them by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        yield
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_two_stage_pipeline_on_ray_matches_local(local_ray, tmp_path):
    data = make_data(tmp_path)
    run_recipe(recipe(data, {"executor": "local", "workers": 1, "rows_per_task": 30}), tmp_path / "local")
    run_recipe(recipe(data, {"executor": "ray", "workers": 2, "rows_per_task": 30, "keep_work": True}),
               tmp_path / "ray")
    assert_same_outputs(tmp_path / "local", tmp_path / "ray")
    # dedup's bucket step has one task per LSH band on Ray; they ran in at most `workers` Ray jobs
    logs = next((tmp_path / "ray" / "dedup" / "_work" / "dedup" / "logs").glob("2_buckets"))
    ex = json.loads((logs / "executor.json").read_text())
    assert ex["tasks"] > 2 and ex["tasks_per_job"] * 2 >= ex["tasks"] and ex["workers"] <= 2
    assert len(list((logs / "completions").iterdir())) == ex["tasks"]


def test_ray_options_checked_by_name():
    with pytest.raises(ValueError, match=r"options.adress: unknown Ray option \(did you mean 'address'\?"):
        ExecutorConfig(executor="ray", options={"adress": "auto"})
    cfg = ExecutorConfig(executor="ray", options={"address": "auto", "cpus_per_task": "2", "jobs": 3})
    opts = cfg.parsed_options()
    assert (opts.address, opts.cpus_per_task, opts.jobs) == ("auto", 2, 3)


def _die_on_rank_zero(data, rank: int = 0, world_size: int = 1):
    """A pipeline step whose rank 0 is killed the way the kernel kills a process out of memory."""
    if rank == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    yield from data or ()


@pytest.mark.timeout(240)
def test_a_killed_rank_fails_the_step_instead_of_hanging(local_ray, tmp_path):
    ex = make_ray_executor([_die_on_rank_zero], tasks=3, logging_dir=tmp_path / "logs", opts=RayOptions(),
                           workers=1)
    ex.run()  # returns: the killed rank is reported, the job's other ranks still ran
    assert ex.get_incomplete_ranks(skip_completed=True) == [0]
