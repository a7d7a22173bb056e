"""RL trainer on the tiny model: a verifiable synthetic task end to end, resume, config, data and reward adapters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from cotforge.curate.config import parse_set  # noqa: E402
from cotforge.train.data.rl import load_rl_dataset, to_trl_row  # noqa: E402
from cotforge.train.rl.rewards import RewardConfig, format_penalty, make_reward_func  # noqa: E402
from cotforge.train.rl.trainer import RLConfig, run_rl  # noqa: E402


def sevens_score(texts: list[str], truths: list[str]) -> list[float]:
    """Synthetic verifiable task "reply with the digit 7": reward = share of characters equal to the target digit."""
    return [t.count(str(g)) / max(len(t), 1) for t, g in zip(texts, truths, strict=True)]


def _rows(n: int = 4) -> list[dict]:
    return [{"data_source": "synthetic", "prompt": [{"role": "user", "content": f"Reply with the digit 7 ({i})."}],
             "ability": "sevens", "reward_model": {"style": "rule", "ground_truth": "7"},
             "extra_info": {"id": f"s{i}", "tests": None}} for i in range(n)]


@pytest.fixture()
def rl_parquet(tmp_path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "rl" / "part-0.parquet"
    path.parent.mkdir()
    pq.write_table(pa.Table.from_pylist(_rows()), path)
    return path.parent


def _cfg(tiny_model_dir, rl_parquet, out, **kw) -> RLConfig:
    base = dict(model=str(tiny_model_dir), train_files=[str(rl_parquet)], output_dir=str(out), loss="gppo",
                num_generations=4, prompts_per_rollout=2, micro_batch_size=4, grad_accum=1,
                max_completion_length=10, learning_rate=0.05, warmup_steps=0, max_steps=3, save_steps=100,
                report_to=[], sft_alpha=0.1, filter_zero_variance=True, seed=0)
    base.update(kw)
    return RLConfig(**base)


def _reward():
    return [make_reward_func(RewardConfig(require_think=False), custom={"sevens": sevens_score})]


def test_e2e_all_params_change_rewards_logged_and_resume(tiny_model_dir, rl_parquet, tmp_path):
    """2 GPPO steps (one rollout batch, two mini-batches) change every trainable parameter and log rewards and
    clip/ratio metrics; a resume from checkpoint-2 adds step 3 (a new rollout, at an epoch boundary)."""
    from transformers import AutoModelForCausalLM

    out = tmp_path / "run"
    trainer = run_rl(_cfg(tiny_model_dir, rl_parquet, out, max_steps=2, save_steps=2), reward_funcs=_reward())
    before = dict(AutoModelForCausalLM.from_pretrained(tiny_model_dir).named_parameters())
    unchanged = [n for n, p in trainer.model.named_parameters()
                 if p.requires_grad and torch.equal(p.detach(), before[n].detach())]
    assert not unchanged, f"parameters did not change: {unchanged}"
    logs = [r for r in trainer.state.log_history if "policy_loss" in r]
    assert len(logs) == 2
    for r in logs:
        for k in ("entropy", "clip/frac_high", "clip/frac_low", "clip/ppo_zero_grad_frac", "ratio/mean"):
            assert k in r and r[k] == r[k], k
    for k in ("reward", "accuracy", "completions/mean_length", "filtered_group_frac"):  # once per rollout batch
        assert k in logs[0] and logs[0][k] == logs[0][k], k
    # one rollout batch feeds 2 optimizer steps (off-policy mini-batches): step 2 sees ratios != 1
    assert logs[0]["ratio/min"] == logs[0]["ratio/max"] == 1.0
    assert logs[1]["ratio/min"] < 1.0 < logs[1]["ratio/max"]
    lines = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]
    assert [x["reward"] for x in lines if "reward" in x] == [logs[0]["reward"]]
    assert (out / "log.csv").exists() and (out / "curves.png").stat().st_size > 0
    assert (out / "checkpoint-2").is_dir() and (out / "final" / "config.json").exists()

    cfg2 = _cfg(tiny_model_dir, rl_parquet, out, max_steps=3, save_steps=1, resume_from_checkpoint="latest")
    trainer2 = run_rl(cfg2, reward_funcs=_reward())
    assert trainer2.state.global_step == 3 and (out / "checkpoint-3").is_dir()
    lines = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines if "policy_loss" in r] == [1, 2, 3], "the resumed run logs only the new step"
    assert [r["step"] for r in lines if "reward" in r] == [1, 3], "the resumed run starts a fresh rollout batch"


def test_cli_math_task_zero_variance_groups_are_filtered(tiny_model_dir, tmp_path):
    """`cotforge train rl` on math rows with the real verifier: the random model never answers 7, every group's
    rewards are equal (-1), dynamic sampling masks them all, so no parameter moves (no weight decay, alpha 0)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from click.testing import CliRunner
    from safetensors.torch import load_file

    from cotforge.pipelines.cli.train import train

    pytest.importorskip("cotforge.curate.verify", reason="cotforge.curate.verify not written yet")
    rows = [dict(r, ability="math") for r in _rows()]
    (tmp_path / "rl").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "rl" / "p.parquet")
    y = tmp_path / "c.yaml"
    y.write_text(f"model: {tiny_model_dir}\nnum_generations: 4\nprompts_per_rollout: 2\nmicro_batch_size: 8\n"
                 "grad_accum: 1\nmax_completion_length: 8\nlearning_rate: 0.05\nweight_decay: 0.0\n"
                 "warmup_steps: 0\nsft_alpha: 0.0\nreport_to: []\nreward: {require_think: false}\n")
    out = tmp_path / "run"
    res = CliRunner().invoke(train, ["rl", "--config", str(y), "--data", str(tmp_path / "rl"), "-o", str(out),
                                     "--max-steps", "1", "--set", "save_steps=100"])
    assert res.exit_code == 0, res.output + repr(res.exception)
    log = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines() if "reward" in x][0]
    assert log["reward"] == -1.0 and log["filtered_group_frac"] == 1.0 and log["accuracy"] == 0.0
    before, after = load_file(tiny_model_dir / "model.safetensors"), load_file(out / "final" / "model.safetensors")
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert json.loads((out / "rl_config.json").read_text())["max_steps"] == 1


def test_config_yaml_overrides_and_errors(tmp_path):
    y = tmp_path / "c.yaml"
    y.write_text("model: m\ntrain_files: [a]\nloss: cispo\nreward: {code_signed: true}\n")
    cfg = RLConfig.from_yaml(y, {"max_steps": 5, "eps_high": 0.2})
    assert cfg.loss == "cispo" and cfg.max_steps == 5 and cfg.eps_high == 0.2 and cfg.reward["code_signed"]
    assert parse_set("dual_clip=10") == ("dual_clip", 10)
    y.write_text("model: m\nbogus: 1\n")
    with pytest.raises(ValueError, match="bogus"):
        RLConfig.from_yaml(y)
    with pytest.raises(ValueError, match="loss"):
        RLConfig(loss="grpo2")
    with pytest.raises(ValueError, match="micro batches"):
        RLConfig(prompts_per_rollout=3, num_generations=3, micro_batch_size=2)


def test_rl_data_rows_and_errors(rl_parquet):
    ds = load_rl_dataset([str(rl_parquet)])
    assert len(ds) == 4 and ds[0]["ground_truth"] == "7" and ds[0]["prompt"][0]["role"] == "user"
    assert ds[1]["id"] == "s1"
    bad = dict(_rows(1)[0], prompt="just text")
    with pytest.raises(ValueError, match="f.parquet:3: field 'prompt'"):
        to_trl_row(bad, "f.parquet:3")
    code = dict(_rows(1)[0], ability="code", extra_info={"id": "c", "tests": '{"kind": "stdio", "cases": []}'})
    assert to_trl_row(code, "x")["tests"].startswith('{"kind"')


def test_format_penalties_and_routing():
    cfg = RewardConfig()
    assert format_penalty("no tags", cfg) == -0.5
    assert format_penalty("x </think> y", cfg) == -2.0
    assert format_penalty("<think>x</think> y", cfg) is None
    assert format_penalty("x</think> y", RewardConfig(think_start_in_prompt=True)) is None
    f = make_reward_func(cfg, custom={"sevens": sevens_score})
    text = "<think>a</think>77"
    out = f(completions=["no think", text], ability=["math", "sevens"], ground_truth=["1", "7"])
    assert out == [-0.5, 2 / len(text)]  # math row is format-penalised before any verifier call
    with pytest.raises(ValueError, match="ability 'poetry'"):
        f(completions=["x"], ability=["poetry"], ground_truth=[""])


def test_math_reward_via_verifier():
    verify = pytest.importorskip("cotforge.curate.verify", reason="cotforge.curate.verify not written yet")
    assert hasattr(verify, "verify_math_batch")
    f = make_reward_func(RewardConfig())
    out = f(completions=["<think>2+2</think> \\boxed{4}", "<think>2+2</think> \\boxed{5}"],
            ability=["math", "math"], ground_truth=["4", "4"])
    assert out == [1.0, -1.0]


def test_code_reward_soft_pass_fraction_via_sandbox():
    pytest.importorskip("cotforge.curate.verify", reason="cotforge.curate.verify not written yet")
    tests = json.dumps({"kind": "stdio", "cases": [{"input": "2\n", "output": "4\n"},
                                                    {"input": "3\n", "output": "6\n"},
                                                    {"input": "5\n", "output": "25\n"}]})
    prog = "<think>double it</think>\n```python\nn = int(input())\nprint(n * 2)\n```"
    f = make_reward_func(RewardConfig(workers=2))
    out = f(completions=[prog, "<think>x</think> no code here", "no think"], ability=["code"] * 3,
            ground_truth=[""] * 3, tests=[tests] * 3)
    assert out[0] == pytest.approx(2 / 3) and out[2] == -0.5
    assert out[1] <= 0.0  # no runnable program: nothing passes
    signed = make_reward_func(RewardConfig(code_signed=True, workers=2))(
        completions=[prog], ability=["code"], ground_truth=[""], tests=[tests])
    assert signed[0] == pytest.approx(2 * 2 / 3 - 1)
