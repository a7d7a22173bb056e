"""SFT trainer: recipe defaults and YAML config, packing isolation, loss falls, resume, CLI, logs."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

torch = pytest.importorskip("torch")

from cotforge.train.callbacks import CsvJsonLogger, plot_curves, read_jsonl  # noqa: E402
from cotforge.train.sft.data import PackingProbe  # noqa: E402
from cotforge.train.sft.trainer import (  # noqa: E402
    CotSFTConfig,
    SFTConfigError,
    decide_packing,
    load_sft_config,
    run_sft,
)

FAST = ["use_cpu=true", "report_to=none", "activation_checkpointing=false", "dataloader_num_workers=0",
        "disable_tqdm=true", "logging_steps=1", "max_length=128", "per_device_train_batch_size=2",
        "seed=7"]


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny models are slower with 2 contending threads; restore the setting afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    """A small curated SFT shard (schema columns + messages) of arithmetic with <think> blocks."""
    rng = random.Random(0)
    rows = []
    for i in range(24):
        a, b = rng.randint(0, 9), rng.randint(0, 9)
        prompt = f"What is {a} + {b}?"
        response = f"<think>{a} plus {b} is {a + b}.</think> The answer is \\boxed{{{a + b}}}."
        rows.append({"id": f"r{i}", "source": "syn", "domain": "math", "prompt": prompt, "response": response,
                     "answer": str(a + b), "tests": "", "meta": "{}",
                     "messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}]})
    out = tmp_path_factory.mktemp("sft_shard") / "sft"
    out.mkdir()
    pq.write_table(pa.Table.from_pylist(rows[:12]), out / "part-000.parquet")
    pq.write_table(pa.Table.from_pylist(rows[12:]), out / "part-001.parquet")
    return out


def _cfg(model_dir, data, out, *extra: str) -> CotSFTConfig:
    return load_sft_config(None, [*FAST, *extra], model=str(model_dir), data=[str(data)], output_dir=str(out))


def _losses(out_dir) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in read_jsonl(out_dir / "log.jsonl") if "loss" in r}


# --------------------------------------------------------------------------- config


def test_recipe_defaults_and_schedule_floor():
    from transformers import get_scheduler

    cfg = CotSFTConfig(output_dir="unused", use_cpu=True)
    assert (cfg.learning_rate, cfg.num_train_epochs, cfg.max_length) == (8e-5, 4.0, 32768)
    assert str(cfg.lr_scheduler_type.value) == "cosine_with_min_lr" and cfg.lr_scheduler_kwargs == {"min_lr": 4e-5}
    assert cfg.packing and cfg.activation_checkpointing and cfg.bf16 is False  # no bf16 on CPU
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=cfg.learning_rate)
    sched = get_scheduler(cfg.lr_scheduler_type, opt, num_warmup_steps=0, num_training_steps=10,
                          scheduler_specific_kwargs=cfg.lr_scheduler_kwargs)
    lrs = []
    for _ in range(10):
        lrs.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    assert lrs[0] == pytest.approx(8e-5) and all(a >= b for a, b in zip(lrs, lrs[1:], strict=False))
    assert sched.get_last_lr()[0] == pytest.approx(4e-5)


def test_yaml_config_overrides_and_errors(tmp_path):
    cfg_file = tmp_path / "cfg.yaml"
    cfg_file.write_text("model: m\ndata: d\nlearning_rate: 5e-5\nsave_strategy: no\nnum_train_epochs: 2\n"
                        "lr_scheduler_kwargs:\n  min_lr: 1e-5\nuse_cpu: true\n")
    cfg = load_sft_config(cfg_file, ["num_train_epochs=3", "lr_scheduler_kwargs.min_lr=2e-5"], output_dir="o")
    assert cfg.learning_rate == 5e-5 and cfg.num_train_epochs == 3 and cfg.data == ["d"]
    assert str(cfg.save_strategy.value) == "no" and cfg.lr_scheduler_kwargs == {"min_lr": 2e-5}
    assert cfg.output_dir == "o"
    with pytest.raises(SFTConfigError, match=r"learning_rat.*did you mean 'learning_rate'"):
        load_sft_config(cfg_file, ["learning_rat=1"])
    with pytest.raises(SFTConfigError, match="mask_mode"):
        load_sft_config(cfg_file, ["mask_mode=everything"])
    with pytest.raises(SFTConfigError, match="KEY=VALUE"):
        load_sft_config(cfg_file, ["max_steps"])
    linear = load_sft_config(cfg_file, ["lr_scheduler_type=linear"])
    assert "min_lr" not in (linear.lr_scheduler_kwargs or {})


def test_example_configs_load():
    from pathlib import Path

    from accelerate.commands.config.config_args import load_config_from_file

    root = Path(__file__).resolve().parents[1] / "pipelines"
    cfg = load_sft_config(root / "sft_example.yaml", ["use_cpu=true", "report_to=none"])
    assert (cfg.learning_rate, cfg.lr_scheduler_kwargs, cfg.num_train_epochs, cfg.max_length) == \
        (8e-5, {"min_lr": 4e-5}, 4, 32768)
    kinds = {load_config_from_file(str(root / "accelerate" / f)).distributed_type.value
             for f in ("deepspeed_zero3.yaml", "fsdp2.yaml")}
    assert kinds == {"DEEPSPEED", "FSDP"}


# --------------------------------------------------------------------------- packing


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_packed_samples_do_not_see_each_other(tiny_model_dir, impl):
    from transformers import AutoModelForCausalLM

    from cotforge.train.sft.data import packing_leak

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation=impl)
    assert packing_leak(model, lengths=(11, 5, 8)) < 1e-4
    # the probe can fail: with a KV cache transformers drops the packed-sequence mask and samples leak
    assert packing_leak(model, lengths=(11, 5, 8), use_cache=True) > 1e-2


def test_packing_fallback_is_explicit(tiny_model_dir, monkeypatch):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    cfg = CotSFTConfig(output_dir="unused", use_cpu=True)
    assert decide_packing(cfg, model) is True
    leaky = PackingProbe(leak=0.5, vs_alone=0.5, scale=3.0, dtype="torch.float32", device="cpu",
                         attn_implementation="sdpa")
    monkeypatch.setattr("cotforge.train.sft.model.packing_probe", lambda m, **kw: leaky)
    assert decide_packing(cfg, model) is False
    cfg_err = CotSFTConfig(output_dir="unused", use_cpu=True, packing_fallback="error")
    with pytest.raises(SFTConfigError, match="does not isolate packed samples"):
        decide_packing(cfg_err, model)


# --------------------------------------------------------------------------- training


def test_loss_falls_on_a_small_shard_and_outputs_are_written(tiny_model_dir, shard, tmp_path):
    from transformers import AutoModelForCausalLM

    out = tmp_path / "run"
    result = run_sft(_cfg(tiny_model_dir, shard, out, "max_steps=14", "learning_rate=3e-3", "save_strategy=no",
                          f"eval_data={shard}", "eval_strategy=steps", "eval_steps=7"))
    losses = _losses(out)
    evals = [r["eval_loss"] for r in read_jsonl(out / "log.jsonl") if "eval_loss" in r]
    assert len(evals) == 2 and evals[1] < evals[0]
    assert result.packed and result.global_step == 14 and len(losses) == 14
    first, last = sum(list(losses.values())[:3]) / 3, sum(list(losses.values())[-3:]) / 3
    assert last < 0.8 * first, losses
    for name in ("log.csv", "log.jsonl", "loss.png", "sft_data_stats.json", "config.json", "tokenizer.json"):
        assert (out / name).exists(), name
    assert json.loads((out / "sft_data_stats.json").read_text())["rows_kept"] == 24
    AutoModelForCausalLM.from_pretrained(out)  # the final model loads back like a hub id


@pytest.mark.slow
def test_resume_reproduces_the_uninterrupted_trajectory(tiny_model_dir, shard, tmp_path):
    from transformers import TrainerCallback

    common = ["max_steps=4", "save_steps=2", "learning_rate=1e-3", "per_device_train_batch_size=1"]
    full = tmp_path / "full"
    run_sft(_cfg(tiny_model_dir, shard, full, *common))

    class StopAt2(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 2:
                control.should_training_stop = True

    part = tmp_path / "part"
    run_sft(_cfg(tiny_model_dir, shard, part, *common), callbacks=[StopAt2()])
    assert sorted(_losses(part)) == [1, 2]
    resumed = run_sft(_cfg(tiny_model_dir, shard, part, *common, "resume=latest"))
    assert resumed.global_step == 4
    a, b = _losses(full), _losses(part)
    assert sorted(b) == [1, 2, 3, 4]  # earlier records kept once, no duplicates
    for step in (1, 2, 3, 4):
        assert b[step] == pytest.approx(a[step], rel=1e-5, abs=1e-6), (step, a, b)
    assert a[3] != pytest.approx(a[1])  # the trajectory moves, so equality is not trivial


def test_cli_trains_unpacked_from_yaml(tiny_model_dir, shard, tmp_path):
    from click.testing import CliRunner

    from cotforge.pipelines.cli.train import train

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("\n".join(s.replace("=", ": ", 1) for s in FAST) + "\nsave_strategy: no\npacking: false\n")
    out = tmp_path / "cli"
    runner = CliRunner()
    args = ["sft", "--config", str(cfg), "--model", str(tiny_model_dir), "--data", str(shard),
            "--output-dir", str(out), "--set", "max_steps=2", "--set", "activation_checkpointing=true"]
    dry = runner.invoke(train, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    resolved = json.loads(dry.stdout)  # the resolved config on stdout; what was checked goes to stderr
    assert resolved["max_steps"] == 2 and resolved["activation_checkpointing"] is True
    res = runner.invoke(train, args)
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout.strip().splitlines()[-1])  # stderr (progress bars) is not in stdout
    assert summary["global_step"] == 2 and summary["packed"] is False
    bad = runner.invoke(train, [*args, "--set", "no_such_key=1"])
    assert bad.exit_code != 0 and "no_such_key" in bad.output


# --------------------------------------------------------------------------- logging utils


def test_csv_json_logger_and_plot(tmp_path):
    from transformers import TrainerControl, TrainerState, TrainingArguments

    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none")
    state, control = TrainerState(), TrainerControl()
    logger = CsvJsonLogger(tmp_path, curves=["loss", "reward"])
    logger.on_train_begin(args, state, control)
    for step in (1, 2, 3):
        state.global_step, state.epoch = step, step / 3
        logger.on_log(args, state, control, logs={"loss": 3.0 - step, "reward": torch.tensor(0.1 * step)})
    logger.on_log(args, state, control, logs={"train_runtime": 1.5})
    logger.on_train_end(args, state, control)
    header = (tmp_path / "log.csv").read_text().splitlines()[0].split(",")
    assert header[:2] == ["step", "epoch"] and {"loss", "reward", "train_runtime"} <= set(header)
    assert [r.get("loss") for r in read_jsonl(tmp_path / "log.jsonl")] == [2.0, 1.0, 0.0, None]
    assert (tmp_path / "loss.png").stat().st_size > 1000
    assert plot_curves(tmp_path / "log.csv", ["absent"], tmp_path / "none.png") is None
    # a resumed run keeps the records up to the checkpoint step only
    state.global_step = 2
    CsvJsonLogger(tmp_path).on_train_begin(args, state, control)
    assert [r["step"] for r in read_jsonl(tmp_path / "log.jsonl")] == [1, 2]


# --------------------------------------------------------------------------- real templates, GPU defaults


@pytest.mark.slow
def test_saved_generation_config_stops_at_the_templates_end_of_turn(shard, tmp_path):
    """Qwen-base style (eos <|endoftext|>, turns end with <|im_end|>): the trained model must stop at <|im_end|>."""
    from transformers import AutoModelForCausalLM, GenerationConfig, LogitsProcessor, LogitsProcessorList

    from cotforge.train.tiny import build_tiny_model
    from cotforge.train.tiny_chat import chat_tokenizer

    tok = chat_tokenizer("qwen2_5_base")
    model_dir = build_tiny_model(tmp_path / "base", tokenizer=tok)
    assert GenerationConfig.from_pretrained(model_dir).eos_token_id == tok.eos_token_id  # <|endoftext|> only
    out = tmp_path / "run"
    run_sft(_cfg(model_dir, shard, out, "max_steps=2", "save_strategy=no", "max_length=256"))
    im_end, eot = tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")
    stats = json.loads((out / "sft_data_stats.json").read_text())
    assert (stats["end_of_turn"], stats["end_of_turn_id"], stats["eos_token"]) == ("<|im_end|>", im_end,
                                                                                   "<|endoftext|>")
    assert GenerationConfig.from_pretrained(out).eos_token_id == [im_end, eot]

    class ForceAt(LogitsProcessor):
        """Force <|im_end|> as the 3rd generated token, a random token before."""

        def __init__(self, start: int):
            self.start = start

        def __call__(self, input_ids, scores):
            if input_ids.shape[1] - self.start == 2:
                scores[:] = -1e9
                scores[:, im_end] = 0
            return scores

    model = AutoModelForCausalLM.from_pretrained(out)
    prompt = tok.apply_chat_template([{"role": "user", "content": "What is 2 + 2?"}], add_generation_prompt=True,
                                     return_tensors="pt", return_dict=True)["input_ids"]
    n = prompt.shape[1]

    def generate(**kw):
        return model.generate(prompt, max_new_tokens=12, do_sample=False, pad_token_id=tok.pad_token_id,
                              logits_processor=LogitsProcessorList([ForceAt(n)]), **kw)[0, n:].tolist()

    stopped = generate()  # the saved generation config
    assert stopped[-1] == im_end and len(stopped) == 3
    assert len(generate(eos_token_id=eot)) == 12  # with eos alone it would run on past the turn


def test_packing_probe_catches_a_kv_cache_leak(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    from cotforge.train.sft.data import packing_probe

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    ok = packing_probe(model, lengths=(11, 5, 8))
    assert ok.isolated() and ok.leak == 0.0 and ok.scale > 0
    leaky = packing_probe(model, lengths=(11, 5, 8), use_cache=True)
    assert not leaky.isolated() and leaky.leak > 1e-2


def test_gpu_defaults_one_packed_row_and_flash_when_installed(monkeypatch, caplog):
    import importlib.util

    from cotforge.train.sft.trainer import check_packing, default_attn_implementation

    cfg = CotSFTConfig(output_dir="unused")
    assert cfg.per_device_train_batch_size == 1
    assert default_attn_implementation(CotSFTConfig(output_dir="unused", use_cpu=True)) is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "flash_attn"
                        else real_find_spec(name, *a))
    assert default_attn_implementation(cfg) is None  # no flash-attn: the model's default (sdpa)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "flash_attn"
                        else real_find_spec(name, *a))
    assert default_attn_implementation(cfg) == "flash_attention_2"

    class Model:  # only what check_packing reads before probing
        config = type("C", (), {"_attn_implementation": "sdpa"})()
        dtype = torch.float32

        def parameters(self):
            return iter([torch.zeros(1)])

    wide = CotSFTConfig(output_dir="unused", use_cpu=True, per_device_train_batch_size=8, packing_fallback="error")
    monkeypatch.setattr("cotforge.train.sft.model.packing_probe", lambda m, **kw: PackingProbe(0.0, 0.0, 1.0, "f", "c", "sdpa"))
    with caplog.at_level("WARNING", logger="cotforge.train.sft.trainer"):
        packed, info = check_packing(wide, Model())
    assert packed and info["probe"]["isolated"] and "flattens 8 packed rows" in caplog.text


@pytest.mark.parametrize("key, value", [("reasoning_markers", "<nope>"), ("strict", "yes"),
                                        ("repair_rows", 1), ("chat_template_kwargs", "enable_thinking")])
def test_new_data_options_are_validated(key, value):
    with pytest.raises(SFTConfigError, match=key):
        CotSFTConfig(output_dir="unused", use_cpu=True, **{key: value})
