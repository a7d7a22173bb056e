"""A real one-node Slurm (.ci/slurm_localhost.sh: slurm-wlm + munge on 127.0.0.1): curation stages and a
two-stage pipeline under `executor: slurm` publish the same bytes as the local executor; a stage that
returns without waiting is resumed by the next invocation, which reuses the finished jobs. Skips (saying
why) where Slurm cannot run: not root, or slurm-wlm/munge not installed (.ci/run installs them)."""

from __future__ import annotations

import json

import pytest
from engine_cases import assert_same_outputs, make_data, recipe, shard_bytes

from cotforge.curate.engine import ExecutorConfig, JobsFailed, JobsPending, Step, run_steps
from cotforge.curate.engine import slurm as slurm_mod
from cotforge.pipelines.runner import run_recipe
from cotforge.pipelines.stages import run_stage

SLURM = {"executor": "slurm", "workers": 2, "rows_per_task": 30, "poll_s": 0.3,
         "options": {"partition": "cpu", "time": "00:10:00", "mem_per_cpu_gb": 1}}




@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    """The reference: the same recipe on the local executor."""
    root = tmp_path_factory.mktemp("engines")
    data = make_data(root)
    run_recipe(recipe(data, {"executor": "local", "workers": 1, "rows_per_task": 30}), root / "local")
    return root, data


@pytest.mark.slow
def test_two_stage_pipeline_on_slurm_matches_local(slurm, local_run, tmp_path):
    root, data = local_run
    result = run_recipe(recipe(data, SLURM), tmp_path / "run")
    assert result.statuses == {"ingest": "ran", "decontaminate": "ran", "dedup": "ran", "verify": "ran"}
    assert_same_outputs(root / "local", tmp_path / "run")
    for st in ("decontaminate", "dedup", "verify"):
        assert not (tmp_path / "run" / st / "_work").exists()  # published, work folder cleaned up
    launch = (tmp_path / "run" / "decontaminate").glob("**/launch_script.slurm")
    assert not list(launch)


@pytest.mark.slow
def test_verify_cli_on_slurm_matches_local(slurm, local_run, tmp_path):
    """`cotforge curate verify --executor slurm` (the user's door: the command line) publishes the rows and
    verdict counts a local run publishes; sandboxed code tests run inside the Slurm jobs."""
    from click.testing import CliRunner

    from cotforge.pipelines.cli.curate import curate

    root, _ = local_run
    common = ["verify", str(root / "local" / "dedup"), "--verify-workers", "1", "--rows-per-task", "30"]
    local = CliRunner().invoke(curate, [*common, "-o", str(tmp_path / "local"), "--workers", "1"])
    assert local.exit_code == 0, local.output
    opts = [x for k, v in SLURM["options"].items() for x in ("--executor-option", f"{k}={v}")]
    res = CliRunner().invoke(curate, [*common, "-o", str(tmp_path / "slurm"), "--executor", "slurm", "--workers", "2",
                                      "--poll-s", "0.3", *opts])
    assert res.exit_code == 0, res.output
    assert shard_bytes(tmp_path / "slurm") == shard_bytes(tmp_path / "local") and shard_bytes(tmp_path / "local")
    stats = [json.loads((tmp_path / d / "stats.json").read_text())["verify"] for d in ("local", "slurm")]
    assert stats[0] == stats[1] and stats[0]["by_status"].get("pass", 0) > 0


@pytest.mark.slow
def test_stage_returns_then_second_invocation_publishes(slurm, local_run, tmp_path, monkeypatch):
    """wait=false: submit and return; the next invocation finds the jobs (queued, running or done), submits
    nothing again, and publishes what the local executor publishes."""
    from cotforge.curate.decontam.stage import DecontamConfig
    from cotforge.curate.io.inputs import resolve_inputs

    root, data = local_run
    specs = resolve_inputs([str(root / "local" / "ingest")])  # the reference run's ingest shards
    cfg = DecontamConfig(ngram=8, threshold=0.5, benchmarks=["demo_olympiad"],
                         benchmarks_dir=str(data / "benchmarks"), registry_yaml=str(data / "benchmarks/registry.yaml"))
    ref = tmp_path / "local"
    run_stage("decontaminate", specs, ref, cfg, ExecutorConfig(workers=1, rows_per_task=30))
    out = tmp_path / "decontaminate"
    with pytest.raises(JobsPending, match="run the same command again"):
        run_stage("decontaminate", specs, out, cfg, ExecutorConfig(**{**SLURM, "wait": False}))
    assert not (out / "stats.json").exists() and (out / "_work" / "decontaminate" / "_state.json").exists()
    import datatrove.executor.slurm as dt_slurm

    sbatch_calls: list[tuple] = []
    real = dt_slurm.launch_slurm_job
    monkeypatch.setattr(dt_slurm, "launch_slurm_job", lambda *a: sbatch_calls.append(a) or real(*a))
    run_stage("decontaminate", specs, out, cfg, ExecutorConfig(**SLURM))  # waits for the same jobs, then publishes
    assert sbatch_calls == []  # nothing submitted twice: queued jobs were waited for, finished ranks kept
    assert shard_bytes(out) == shard_bytes(ref) and shard_bytes(ref)
    assert (out / "stats.json").exists() and not (out / "_work" / "decontaminate").exists()


def test_failed_step_names_ranks_and_log(tmp_path, monkeypatch):
    """Jobs gone, ranks without completion files: JobsFailed names the step, ranks and the task's log."""
    d = tmp_path / "logs" / "1_filter"
    (d / "completions").mkdir(parents=True)
    (d / "completions" / "00000").touch()
    (d / "logs").mkdir()
    (d / "logs" / "task_00001.log").write_text("starting\nValueError: row 7 field 'prompt': boom\n")
    monkeypatch.setattr(slurm_mod, "active_jobs", lambda names: [])
    with pytest.raises(JobsFailed, match=r"(?s)step filter: 1 of 2 tasks.*ranks \[1\].*row 7 field 'prompt'"):
        slurm_mod.wait_for_steps([("filter", d, 2)], ["cotforge-x-filter-1"], "x", poll_s=0.01)


def test_jobs_still_running_are_waited_for_not_resubmitted(tmp_path, monkeypatch):
    """A second invocation that finds this work folder's jobs in the queue waits and submits nothing."""
    queue = [[slurm_mod.Job("9_0", "n", "RUNNING", "None")], []]
    seen: list[list[str]] = []

    def fake_active(names):
        seen.append(list(names))
        return queue.pop(0) if queue else []

    monkeypatch.setattr("cotforge.curate.engine.executor.active_jobs", fake_active)
    monkeypatch.setattr(slurm_mod, "active_jobs", fake_active)
    monkeypatch.setattr("cotforge.curate.engine.executor.make_executor",
                        lambda *a, **k: pytest.fail("submitted again while jobs were queued"))
    d = tmp_path / "logs" / "1_x"
    (d / "completions").mkdir(parents=True)
    (d / "completions" / "00000").touch()
    cfg = ExecutorConfig(executor="slurm", poll_s=0.01)
    assert run_steps(tmp_path, [Step("x", [], 1)], cfg, "st") == {}
    assert len(seen) >= 2 and seen[0][0].startswith("cotforge-st-")


def test_dry_run_shows_the_sbatch_script_and_rejects_misspelt_options(tmp_path):
    from cotforge.pipelines.config import RecipeError
    from cotforge.pipelines.runner import describe_plan

    data = make_data(tmp_path)
    opts = {"partition": "long", "time": "12:00:00", "cpus_per_task": 4, "mem_per_cpu_gb": 3, "qos": "high",
            "account": "proj1", "env_command": "source /shared/venvs/cf/bin/activate", "logs": "/shared/slurm"}
    text = describe_plan(recipe(data, {"executor": "slurm", "workers": 8, "options": opts}), tmp_path / "run")
    for line in ("#SBATCH --partition=long", "#SBATCH --time=12:00:00", "#SBATCH --cpus-per-task=4",
                 "#SBATCH --mem-per-cpu=3G", "#SBATCH --qos=high", "#SBATCH --account=proj1",
                 "#SBATCH --array=0-<tasks-1>%8", "#SBATCH --output=/shared/slurm/decontaminate/%A_%a.out",
                 "source /shared/venvs/cf/bin/activate; export PATH=",
                 f"launch_pickled_pipeline {tmp_path}/run/decontaminate/_work/decontaminate/logs/1_decontaminate/"):
        assert line in text, line
    assert not (tmp_path / "run").exists()  # a dry run creates nothing
    with pytest.raises(RecipeError, match=r"options.partiton: unknown Slurm option \(did you mean 'partition'\?"):
        recipe(data, {"executor": "slurm", "options": {"partiton": "cpu"}})
    with pytest.raises(RecipeError, match=r"options.cpus_per_task: expected int, got 'four'"):
        recipe(data, {"executor": "slurm", "options": {"cpus_per_task": "four"}})
    with pytest.raises(RecipeError, match=r"'slrum' is not one of local, slurm, ray \(did you mean 'slurm'\?\)"):
        recipe(data, {"executor": "slrum"})
