"""RL trainer on the tiny model: a verifiable synthetic task end to end, resume, config, data and reward adapters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from cotforge.curate.core.config import load, parse_set  # noqa: E402
from cotforge.train.rl.config import GPPOConfig  # noqa: E402
from cotforge.train.rl.data import load_rl_dataset, to_trl_row  # noqa: E402
from cotforge.train.rl.rewards import RewardConfig, format_penalty, make_reward_func  # noqa: E402
from cotforge.train.rl.trainer import config_from_dict, run_rl  # noqa: E402


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


def _cfg(tiny_model_dir, rl_parquet, out, **kw) -> GPPOConfig:
    """One rollout batch of 2 prompts x 4 samples, mini-batches of 1 prompt: 2 optimizer steps per rollout."""
    base = dict(model=str(tiny_model_dir), train_files=[str(rl_parquet)], output_dir=str(out), loss_type="gppo",
                num_generations=4, rollout_prompts=2, mini_batch_prompts=1, per_device_train_batch_size=4,
                oversample=2, filter_groups_metric="reward", overlong_filter=False, max_completion_length=10,
                learning_rate=0.05, warmup_steps=0, max_steps=3, save_steps=100, report_to=[], sft_alpha=0.1, seed=0)
    base.update(kw)
    return GPPOConfig(**base)


def _reward():
    return [make_reward_func(RewardConfig(require_think=False), custom={"sevens": sevens_score})]


@pytest.mark.slow
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
    for k in ("reward", "accuracy", "completions/mean_length", "filter/dropped_group_frac"):  # once per rollout
        assert k in logs[0] and logs[0][k] == logs[0][k], k
    # one rollout batch feeds 2 optimizer steps (off-policy mini-batches): step 2 sees ratios != 1
    assert logs[0]["ratio/min"] == logs[0]["ratio/max"] == 1.0
    assert logs[1]["ratio/min"] < 1.0 < logs[1]["ratio/max"]
    assert [r["rollout/minibatch"] for r in logs] == [0, 1] and [r["rollout/index"] for r in logs] == [0, 0]
    # 4 prompts sampled (oversample 2), the first 2 groups whose rewards differ trained on: 8 rows per rollout
    assert logs[0]["filter/groups_sampled"] == 4 and logs[0]["filter/groups_kept"] <= 2
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
    """`cotforge train rl` on math rows with the real verifier: the random model never answers 7, no group has a
    correct answer, the accuracy filter drops them all, so no parameter moves (no weight decay, alpha 0)."""
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
    y.write_text(f"model: {tiny_model_dir}\nnum_generations: 4\nrollout_prompts: 2\nmini_batch_prompts: 1\n"
                 "per_device_train_batch_size: 4\noversample: 1\nmax_completion_length: 8\nlearning_rate: 0.05\n"
                 "weight_decay: 0.0\n"
                 "warmup_steps: 0\nsft_alpha: 0.0\nreport_to: []\nreward: {require_think: false}\n")
    out = tmp_path / "run"
    res = CliRunner().invoke(train, ["rl", "--config", str(y), "--data", str(tmp_path / "rl"), "-o", str(out),
                                     "--max-steps", "1", "--set", "save_steps=100"])
    assert res.exit_code == 0, res.output + repr(res.exception)
    log = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines() if "reward" in x][0]
    assert log["reward"] == -1.0 and log["filter/dropped_group_frac"] == 1.0 and log["accuracy"] == 0.0
    # the one loop step trained nothing, so it was left out: no optimizer step taken, none logged
    assert log["filter/kept_rows"] == 0 and "tokens/trained" not in log and log["step"] == 0
    before, after = load_file(tiny_model_dir / "model.safetensors"), load_file(out / "final" / "model.safetensors")
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert json.loads((out / "rl_config.json").read_text())["max_steps"] == 1


def test_config_yaml_overrides_and_errors(tmp_path):
    y = tmp_path / "c.yaml"
    y.write_text("model: m\ntrain_files: [a]\nloss_type: cispo\nreward: {code_signed: true}\n")
    cfg = load(GPPOConfig, y, ["max_steps=5", "epsilon_high=0.2"], what="RL config key")
    assert cfg.loss_type == "cispo" and cfg.max_steps == 5 and cfg.epsilon_high == 0.2
    assert cfg.reward_config().code_signed
    assert parse_set("delta=10") == ("delta", 10)
    with pytest.raises(ValueError, match="bogus"):
        config_from_dict({"model": "m", "bogus": 1}, "c.yaml")
    with pytest.raises(ValueError, match="loss_type"):
        GPPOConfig(loss_type="grpo2")
    with pytest.raises(ValueError, match="per_device_train_batch_size"):
        GPPOConfig(rollout_prompts=6, mini_batch_prompts=3, num_generations=3, per_device_train_batch_size=2)
    with pytest.raises(ValueError, match="reward"):
        GPPOConfig(reward={"corect": 1.0})
    with pytest.raises(ValueError, match="beta"):
        GPPOConfig(beta=0.04)  # KL is not implemented by GPPOTrainer's loss: refused rather than ignored


def test_rl_data_rows_and_errors(rl_parquet):
    ds = load_rl_dataset([str(rl_parquet)])
    assert len(ds) == 4 and ds[0]["ground_truth"] == "7" and ds[0]["prompt"][0]["role"] == "user"
    assert ds[1]["id"] == "s1"
    bad = dict(_rows(1)[0], prompt="just text")
    with pytest.raises(ValueError, match="f.parquet:3: field 'prompt'"):
        to_trl_row(bad, "f.parquet:3")
    case = '{"kind": "stdio", "cases": [{"input": "1", "output": "2"}]}'
    code = dict(_rows(1)[0], ability="code", extra_info={"id": "c", "tests": case})
    assert to_trl_row(code, "x")["tests"].startswith('{"kind"')
    with pytest.raises(ValueError, match="x: field 'extra_info.tests': tests: kind 'stdio' needs a non-empty"):
        to_trl_row(dict(code, extra_info={"id": "c", "tests": '{"kind": "stdio", "cases": []}'}), "x")


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
    assert out[1] == -1.0  # no ```python block: the official format-error score, below a truncated response
    signed = make_reward_func(RewardConfig(code_signed=True, workers=2))(
        completions=[prog], ability=["code"], ground_truth=[""], tests=[tests])
    assert signed[0] == pytest.approx(2 * 2 / 3 - 1)


def test_code_without_code_block_is_a_format_error_and_never_runs(monkeypatch):
    """A prose answer (or code outside a ```python fence, or before </think>) scores format_error = -1 without
    reaching the sandbox (official code_r1_compute: no block -> format_error_score); a fenced program runs."""
    import cotforge.curate.verify.code as verify
    from cotforge.train.rl.rewards import code_rewards, has_code_block

    ran: list[str] = []

    def fake_run(items, limits, workers):
        ran.extend(p for p, _ in items)
        return [type("V", (), {"status": "ok", "pass_fraction": 0.0, "details": []})() for _ in items]

    monkeypatch.setattr(verify, "run_tests_batch", fake_run)
    texts = ["<think>x</think> The answer is to loop over the list.",
             "<think>```python\nprint(1)\n```</think> so print one",  # the block is inside the reasoning
             "<think>x</think>\n```\nprint(1)\n```",                    # untagged fence
             "<think>x</think>\n```python\nprint(1)\n```",
             "no think at all"]
    out = code_rewards(texts, ['{"kind": "stdio", "cases": []}'] * 5, RewardConfig(format_error=-1.0))
    assert out == [-1.0, -1.0, -1.0, 0.0, -0.5]
    assert ran == ["print(1)\n"]
    assert has_code_block("```py\nx=1\n```", think_end="") and not has_code_block("x = 1", think_end="")


# R1-distill's generation prompt (its tokenizer_config.json chat_template, reduced to the parts that matter):
# the assistant turn opens the reasoning block, so completions start inside it and never contain <think>.
_R1_TEMPLATE = ("{% for m in messages %}{% if m['role'] == 'user' %}<｜User｜>{{ m['content'] }}{% endif %}{% endfor %}"
                "{% if add_generation_prompt %}<｜Assistant｜><think>\n{% endif %}")
_CLOSED_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                    "{% if add_generation_prompt %}<|im_start|>assistant\n{% if enable_thinking is defined and "
                    "enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{% endif %}")


def test_math_reward_when_the_prompt_opens_think():
    pytest.importorskip("cotforge.curate.verify")
    from cotforge.train.rl.rewards import opens_reasoning, prompt_opened
    from cotforge.train.tiny import build_tokenizer

    tok = build_tokenizer(["a b c 1 2 3 think"], vocab_size=64)
    cfg = RewardConfig()
    done = ["2+2 is 4.</think> \\boxed{4}", "2+2 is 5.</think> \\boxed{5}", "still thinking 2+2"]
    conv = [[{"role": "user", "content": "2+2? Box it."}]] * 3
    tok.chat_template = _R1_TEMPLATE
    f = make_reward_func(cfg, tokenizer=tok)
    # the completion text is taken from `completions` (no ids): correct/incorrect/truncated, none penalised -2
    assert f(completions=done, prompts=conv, ability=["math"] * 3, ground_truth=["4"] * 3) == [1.0, -1.0, -0.5]
    assert f(completions=done, ability=["math"] * 3, ground_truth=["4"] * 3) == [1.0, -1.0, -0.5]  # template probe
    # a plain-text prompt that ends inside <think> counts too; one that closed it does not
    assert f(completions=done[:1], prompts=["Q: 2+2?\n<think>\n"], ability=["math"], ground_truth=["4"]) == [1.0]
    assert f(completions=done[:1], prompts=["Q <think></think>"], ability=["math"], ground_truth=["4"]) == [-2.0]
    # a template that does not open <think> (or closes it: Qwen3 enable_thinking=False) keeps the -2 penalty
    tok.chat_template = _CLOSED_TEMPLATE
    assert f(completions=done[:1], prompts=conv[:1], ability=["math"], ground_truth=["4"]) == [-2.0]
    g = make_reward_func(cfg, tokenizer=tok, chat_template_kwargs={"enable_thinking": False})
    assert g(completions=done[:1], prompts=conv[:1], ability=["math"], ground_truth=["4"]) == [-2.0]
    assert not opens_reasoning(tok.apply_chat_template(conv[0], tokenize=False, add_generation_prompt=True,
                                                       enable_thinking=False), cfg)
    # forcing it either way overrides the detection
    assert prompt_opened(conv, 3, RewardConfig(think_start_in_prompt=False), tok) == [False] * 3
    assert make_reward_func(RewardConfig(think_start_in_prompt=True))(
        completions=done[:1], ability=["math"], ground_truth=["4"]) == [1.0]


def test_math_reward_is_strict_and_gets_the_problem(monkeypatch):
    """RL math rewards use the strict extraction (the last box after </think>) and pass each row's problem."""
    pytest.importorskip("cotforge.curate.verify.math")
    import cotforge.curate.verify.math as vmath
    from cotforge.curate.verify.math_pool import MathVerdict

    texts = ["<think>2+2</think> The answer is 4.", "<think>2+2</think> \\boxed{4}", "<think>\\boxed{4}</think> 5"]
    f = make_reward_func(RewardConfig(workers=1))
    assert f(completions=texts, ability=["math"] * 3, ground_truth=["4"] * 3) == [-1.0, 1.0, -1.0]
    lenient = make_reward_func(RewardConfig(math_mode="lenient", workers=1))
    assert lenient(completions=texts[:1], ability=["math"], ground_truth=["4"]) == [1.0]
    with pytest.raises(ValueError, match="math_mode"):
        RewardConfig(math_mode="loose")
    seen: dict = {}

    def spy(pairs, *a, **kw):
        seen.update(kw, n=len(pairs))
        return [MathVerdict(status="correct", correct=True, extracted="4") for _ in pairs]

    monkeypatch.setattr(vmath, "verify_math_batch", spy)
    conv = [[{"role": "system", "content": "be brief"}, {"role": "user", "content": "List 1, 2 in order."}],
            "Plain prompt?"]
    f(completions=texts[1:], prompts=conv, ability=["math", "math"], ground_truth=["1, 2", "4"])
    assert seen["mode"] == "strict" and seen["problems"] == ["List 1, 2 in order.", "Plain prompt?"]
