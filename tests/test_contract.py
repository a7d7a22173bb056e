"""The stage contract and the config loader: every stage's config rejects a bad value at plan time
(`--dry-run` rejects what a run would), configs load the same from YAML, --set and flags, and the CLI's
flags come from the config fields."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cotforge.curate.core.config import ConfigError, build, load
from cotforge.pipelines.config import RecipeError, load_recipe
from cotforge.pipelines.planning import plan
from cotforge.pipelines.stages import GROUPS, ORDER, get_stage

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "pipelines" / "demo.yaml"
EVALS = ["stages.eval_base.benchmarks=[demo_olympiad]", "stages.evaluate.benchmarks=[demo_olympiad]"]

# One bad value per stage's config, and the YAML field the error must name.
BAD = {
    "data": ("generate.n_code=-1", "generate.n_code"),
    "ingest": ("strict=maybe", "strict: expected true or false"),  # ingest's only setting is the recipe's
    "decontaminate": ("stages.decontaminate.threshold=7", "stages.decontaminate.threshold"),
    "dedup": ("stages.dedup.bands=0", "stages.dedup.bands"),
    "generate": ("stages.generate.n=0", "stages.generate.n"),
    "verify": ("stages.verify.math_timeout_s=0", "stages.verify.math_timeout_s"),
    "difficulty": ("stages.difficulty.n_samples=0", "stages.difficulty.n_samples"),
    "profile": ("stages.profile.stats_dirs=somewhere", "stages.profile.stats_dirs"),
    "select": ("stages.select.policy.easy=bogus", "stages.select.policy"),
    "mix": ("stages.mix.budget_rows=-5", "stages.mix.budget_rows"),
    "model": ("stages.model.hidden_size=0", "stages.model.hidden_size"),
    "eval_base": ("stages.eval_base.k=0", "stages.eval_base.k"),
    "sft": ("stages.sft.mask_mode=everything", "stages.sft.mask_mode"),
    "rl_data": ("stages.rl_data.min_tests=0", "min_tests: must be >= 1"),
    "rl": ("stages.rl.loss=grpo2", "'loss'"),
    "rl_code": ("stages.rl_code.minibatch_rule=sometimes", "minibatch_rule"),
    "evaluate": ("stages.evaluate.temperature=-1", "stages.evaluate.temperature"),
}
# Stages the demo does not run, and the overrides that add them to it.
ENABLE = {"rl_data": ["stages.rl_data.sources=[{name: extra, path: extra.jsonl, preset: acereason_math}]"],
          "rl_code": ["stages.rl_code.seed=1"]}


def test_every_stage_has_a_bad_value_case():
    assert set(BAD) == set(ORDER)


@pytest.mark.parametrize("stage", ORDER)
def test_dry_run_rejects_a_bad_value_of_every_stage(stage):
    override, field = BAD[stage]
    base = [*EVALS, *ENABLE.get(stage, [])]
    good = load_recipe(DEMO, base)
    assert stage in [s.name for s in plan(good)]  # the demo + two eval stages plans cleanly...
    with pytest.raises(RecipeError) as e:  # ...and one bad value fails at plan time, naming the field
        plan(load_recipe(DEMO, [*base, override]))
    assert field in str(e.value)


def test_issue_dry_run_example_fails_before_anything_runs(tmp_path):
    from cotforge.pipelines.cli.main import main

    res = CliRunner().invoke(main, ["run", str(DEMO), "--dry-run", "--set", "stages.dedup.bands=0", "--set",
                                    "stages.decontaminate.threshold=7", "--run-dir", str(tmp_path / "r")])
    assert res.exit_code != 0 and "stages.decontaminate.threshold: must be in [0, 1] (got 7)" in res.output
    res = CliRunner().invoke(main, ["run", str(DEMO), "--dry-run", "--set", "stages.dedup.bands=0"])
    assert res.exit_code != 0 and "stages.dedup.bands: must be >= 1 (got 0)" in res.output
    assert not (tmp_path / "r").exists()


def test_stages_are_objects_with_one_run_signature():
    import inspect

    for module, names in GROUPS.items():
        __import__(module)
        assert list(sys.modules[module].STAGES) == list(names), module
    assert list(ORDER) == [n for names in GROUPS.values() for n in names]
    for name in ORDER:
        st = get_stage(name)
        assert dataclasses.is_dataclass(st.config) and callable(st.run), name
        params = list(inspect.signature(st.run).parameters)
        assert params == ["cfg", "ctx"], (name, params)


def test_code_hash_follows_imports(tmp_path, monkeypatch):
    """Editing a module a stage only reaches through imports changes its hash; an unrelated one does not."""
    from cotforge.pipelines import codehash

    dedup = get_stage("dedup").code_seeds
    assert "cotforge.curate.text.normalize" in codehash.closure(dedup)  # reached through dedup.core
    assert "cotforge.curate.verify.math" not in codehash.closure(dedup)
    real = codehash.module_file
    before = codehash.code_hash.__wrapped__(dedup)
    fake = tmp_path / "normalize.py"
    fake.write_text(real("cotforge.curate.text.normalize").read_text() + "\n# edited\n")
    monkeypatch.setattr(codehash, "module_file",
                        lambda m: fake if m == "cotforge.curate.text.normalize" else real(m))
    assert codehash.code_hash.__wrapped__(dedup) != before


def test_loader_reports_unknown_keys_types_and_yaml_surprises(tmp_path):
    from cotforge.curate.dedup.config import DedupConfig
    from cotforge.curate.select.sources import SelectConfig

    with pytest.raises(ConfigError, match=r"x.yaml: unknown key 'bandz' \(did you mean 'bands'\?"):
        build(DedupConfig, {"bandz": 3}, "x.yaml")
    with pytest.raises(ConfigError, match=r"x.yaml: threshold: expected a number, got 'high'"):
        build(DedupConfig, {"threshold": "high"}, "x.yaml")
    with pytest.raises(ConfigError, match=r"cfg: policy.hard: expected a string"):
        build(SelectConfig, {"policy": {"hard": 3}}, "cfg")
    assert build(DedupConfig, {"threshold": "7e-1"}, "x").threshold == 0.7  # YAML 1.1 reads 7e-1 as a string
    y = tmp_path / "c.yaml"
    y.write_text("bands: 10\nthreshold: 0.5\n")
    cfg = load(DedupConfig, y, ["threshold=0.4"], {"ngram": 4})  # YAML < --set < flags
    assert (cfg.bands, cfg.threshold, cfg.ngram) == (10, 0.4, 4)


def test_curation_commands_take_the_same_executor_flags():
    from cotforge.pipelines.cli.curate import COMMANDS, CURATE_STAGES

    executor = {"--executor", "--workers", "--tasks", "--rows-per-task", "--executor-option", "--keep-work"}
    for name, command in COMMANDS.items():
        flags = {o for p in command.params for o in getattr(p, "opts", [])}
        assert {"-o", "--strict", "--rows-per-shard", "--config", "--set"} <= flags, name
        assert (executor <= flags) == CURATE_STAGES[name].datatrove, name
    assert {"decontaminate", "dedup", "generate", "verify", "difficulty"} == {
        n for n, s in CURATE_STAGES.items() if s.datatrove}


def test_executor_options_reach_the_executor_config(tmp_path):
    """--executor-option KEY=VALUE and --tasks go into ExecutorConfig (their meaning is the executor's)."""
    from cotforge.curate.engine import ExecutorConfig
    from cotforge.pipelines.cli.curate import COMMANDS, stage_command

    seen = {}
    stage = get_stage("dedup")
    spy = dataclasses.replace(stage, run=lambda cfg, ctx: seen.update(cfg=cfg, ctx=ctx) or
                              {"rows_in": 0, "kept": 0, "removed": 0})
    src = tmp_path / "a.jsonl"
    src.write_text('{"prompt": "p", "response": "r"}\n')
    res = CliRunner().invoke(stage_command(spy), [str(src), "-o", str(tmp_path / "o"), "--executor", "slurm",
                                                  "--tasks", "3", "--executor-option", "partition=gpu",
                                                  "--executor-option", "cpus_per_task=4", "--bands", "10",
                                                  "--no-number-guard", "--set", "threshold=0.5",
                                                      "--allow-empty"])
    assert res.exit_code == 0, res.output
    assert seen["ctx"].executor == ExecutorConfig(executor="slurm", tasks=3,
                                                  options={"partition": "gpu", "cpus_per_task": 4})
    assert (seen["cfg"].bands, seen["cfg"].number_guard, seen["cfg"].threshold) == (10, False, 0.5)
    bad = CliRunner().invoke(COMMANDS["dedup"], [str(src), "-o", str(tmp_path / "p"), "--executor", "spark"])
    assert bad.exit_code == 2


def test_help_is_generated_from_field_metadata():
    from cotforge.curate.dedup.config import DedupConfig
    from cotforge.pipelines.cli.main import main

    res = CliRunner().invoke(main, ["curate", "dedup", "--help"])
    for f in dataclasses.fields(DedupConfig):
        if f.metadata.get("cli") is not False:
            words = f.metadata["help"].split()[:3]
            assert " ".join(words) in " ".join(res.output.split()), f.name
    assert "LSH bands (datatrove num_buckets). [default: 25]" in " ".join(res.output.split())  # from the field


def test_curate_help_does_not_import_torch():
    code = ("import sys; from cotforge.pipelines.cli.main import main\n"
            "try:\n    main(['curate', 'dedup', '--help'])\nexcept SystemExit:\n    pass\n"
            "print('HEAVY', sorted(m for m in ('torch', 'transformers', 'trl') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "HEAVY []" in out
