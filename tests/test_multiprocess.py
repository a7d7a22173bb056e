"""Multi-process training on CPU (gloo) says what it does: 2 processes reproduce the 1-process SFT losses
with the same global batch, RL trains with 2 processes, and launches that would silently fall back (an FSDP
config on CPU, N processes that each train alone into one output_dir) are refused (train/distributed.py)."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("accelerate")

from cotforge.train.distributed import DistributedLaunchError, check_launch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SFT_FAST = ["use_cpu=true", "report_to=none", "activation_checkpointing=false", "dataloader_num_workers=0",
            "disable_tqdm=true", "logging_steps=1", "max_length=128", "seed=7", "max_steps=4",
            "save_strategy=no", "packing=false"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(procs: int, args: list[str], *launch: str, script: Path | None = None) -> subprocess.CompletedProcess:
    """`cotforge ARGS` (or `script ARGS`) in `procs` processes (accelerate launch --multi_gpu on CPU gives
    gloo), or in this interpreter's one process when procs == 1."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    cli = [str(script), *args] if script else ["-m", "cotforge.pipelines.cli", *args]
    if procs == 1 and not launch:
        cmd = [sys.executable, *cli]
    else:
        cmd = [sys.executable, "-m", "accelerate.commands.launch", *(launch or ("--multi_gpu",)),
               "--num_processes", str(procs), "--num_machines", "1", "--mixed_precision", "no",
               "--dynamo_backend", "no", "--main_process_port", str(_port()), *cli]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=REPO)


def _losses(out: Path) -> list[float]:
    return [r["loss"] for r in map(json.loads, (out / "log.jsonl").read_text().splitlines()) if "loss" in r]


@pytest.fixture(scope="module")
def sft_shard(tmp_path_factory) -> Path:
    """24 arithmetic rows with <think> blocks, in one shard (SFT schema columns + messages)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng, rows = random.Random(0), []
    for i in range(24):
        a, b = rng.randint(0, 9), rng.randint(0, 9)
        p, r = f"What is {a} + {b}?", f"<think>{a} plus {b} is {a + b}.</think> The answer is \\boxed{{{a + b}}}."
        rows.append({"id": f"r{i}", "source": "syn", "domain": "math", "prompt": p, "response": r,
                     "answer": str(a + b), "tests": "", "meta": "{}",
                     "messages": [{"role": "user", "content": p}, {"role": "assistant", "content": r}]})
    out = tmp_path_factory.mktemp("mp_shard") / "sft"
    out.mkdir()
    pq.write_table(pa.Table.from_pylist(rows), out / "part-000.parquet")
    return out


def _sft_args(model: Path, data: Path, out: Path, *extra: str) -> list[str]:
    sets = [a for kv in (*SFT_FAST, *extra) for a in ("--set", kv)]
    return ["train", "sft", "--model", str(model), "--data", str(data), "-o", str(out), *sets]


# --------------------------------------------------------------------------- the checks (no processes)


def test_n_processes_that_each_train_alone_are_refused():
    env = {"WORLD_SIZE": "2", "ACCELERATE_USE_FSDP": "true"}
    with pytest.raises(DistributedLaunchError, match=r"2 processes were launched .* all write runs/x"):
        check_launch("NO", 1, None, env=env, output_dir="runs/x")


def test_fsdp_or_deepspeed_that_would_be_plain_ddp_is_refused():
    with pytest.raises(DistributedLaunchError, match=r"FSDP was asked for .* MULTI_CPU with 2 process"):
        check_launch("MULTI_CPU", 2, "gloo", env={"WORLD_SIZE": "2", "ACCELERATE_USE_FSDP": "true"})
    with pytest.raises(DistributedLaunchError, match=r"DEEPSPEED was asked for .* NO with 1 process"):
        check_launch("NO", 1, None, env={}, deepspeed="ds.json")
    # on GPUs accelerate turns MULTI_GPU into FSDP / DeepSpeed: allowed; plain gloo/NCCL DDP is described
    assert check_launch("MULTI_GPU", 8, "nccl", 3, env={"WORLD_SIZE": "8", "ACCELERATE_USE_FSDP": "true"}).rank == 3
    rep = check_launch("MULTI_CPU", 2, "gloo", env={"WORLD_SIZE": "2"})
    assert rep.describe() == "MULTI_CPU, 2 processes (gloo), rank 0"
    assert check_launch("NO", 1, None, env={}).num_processes == 1


# --------------------------------------------------------------------------- real launches


@pytest.mark.slow
def test_two_gloo_processes_reproduce_one_process_sft_losses(tiny_model_dir, sft_shard, tmp_path):
    one = _launch(1, _sft_args(tiny_model_dir, sft_shard, tmp_path / "one", "per_device_train_batch_size=4"))
    assert one.returncode == 0, one.stderr[-3000:]
    two = _launch(2, _sft_args(tiny_model_dir, sft_shard, tmp_path / "two", "per_device_train_batch_size=2"))
    assert two.returncode == 0, two.stderr[-3000:]
    assert "distributed training: MULTI_CPU, 2 processes (gloo), rank 1" in two.stderr
    a, b = _losses(tmp_path / "one"), _losses(tmp_path / "two")
    assert len(a) == len(b) == 4
    assert a == pytest.approx(b, rel=1e-5, abs=1e-6), (a, b)  # same global batch of 4: same losses
    assert (tmp_path / "two" / "model.safetensors").exists()


RL_SCRIPT = """
import json, logging, sys
logging.basicConfig(level=logging.INFO)
from cotforge.train.rl.rewards import RewardConfig, make_reward_func
from cotforge.train.rl.config import GPPOConfig
from cotforge.train.rl.trainer import run_rl
from cotforge.train.distributed import finish_distributed

def sevens(texts, truths):  # a verifiable toy task with varied rewards: share of characters that are "7"
    return [t.count("7") / max(len(t), 1) for t in texts]

model, data, out = sys.argv[1:4]
extra = json.loads(sys.argv[4] if len(sys.argv) > 4 else "{}")
if extra.pop("fake_vllm", False):  # vLLM without vLLM: HF generation, constant sampler log-probs near the model's
    import math
    from trl import GRPOTrainer
    from cotforge.train.rl.trainer import GPPOTrainer

    def generate(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        self.use_vllm = False
        try:
            ids, _ = GRPOTrainer._generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations)
        finally:
            self.use_vllm = True
        base = -math.log(self.model.config.vocab_size)
        return ids, [[base + 0.1 * (j % 3 - 1) for j in range(len(c))] for c in ids]

    def train(self, *a, **kw):
        self.use_vllm = True
        return GRPOTrainer.train(self, *a, **kw)

    GPPOTrainer._generate_single_turn, GPPOTrainer.train = generate, train
# 2 prompts x 4 samples per rollout, mini-batches of 1 prompt (2 optimizer steps per rollout), 2 per device x 2 processes
cfg = GPPOConfig(model=model, train_files=[data], output_dir=out, loss_type="gppo", num_generations=4,
                 rollout_prompts=2, mini_batch_prompts=1, per_device_train_batch_size=2, max_completion_length=10,
                 learning_rate=0.05, warmup_steps=0, max_steps=2, save_steps=100, report_to=[], sft_alpha=0.0,
                 **{"filter_groups": False, "oversample": 1, **extra},
                 overlong_filter=False, seed=0, use_cpu=True)
run_rl(cfg, reward_funcs=[make_reward_func(RewardConfig(require_think=False), custom={"sevens": sevens})])
finish_distributed()  # as `cotforge train rl` does at its end
"""


TOP_UP = {"filter_groups": True, "filter_groups_metric": "reward", "oversample": 2}


@pytest.mark.slow
@pytest.mark.parametrize("extra", [{}, {**TOP_UP, "group_balance": "first", "minibatch_rule": "ceil"},
                                   {**TOP_UP, "group_balance": "tokens", "minibatch_rule": "ceil"},
                                   {**TOP_UP, "group_balance": "tokens", "minibatch_rule": "fixed"},
                                   {**TOP_UP, "group_balance": "tokens", "minibatch_rule": "ceil", "fake_vllm": True}],
                         ids=["plain", "first-ceil", "tokens-ceil", "tokens-fixed", "tokens-ceil-vllm-is"])
def test_rl_trains_with_two_processes(tiny_model_dir, tmp_path, extra):
    """GPPO on 2 gloo processes: both join one process group, 2 steps run, every parameter moves. With the
    top-up, the first 2 of 4 sampled groups are kept, both generated on process 0. `first` leaves them there:
    process 1 has no row to compute old log-probs for and no row in either mini-batch of the ceil rule, and still
    joins every forward and backward pass. `tokens` moves one of them to process 1: one group on each; with a
    faked vLLM sampler, the IS weights are computed after the move from the kept rows' old log-probs."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch
    from safetensors.torch import load_file

    rows = [{"data_source": "synthetic", "prompt": [{"role": "user", "content": f"Reply with the digit 7 ({i})."}],
             "ability": "sevens", "reward_model": {"style": "rule", "ground_truth": "7"},
             "extra_info": {"id": f"s{i}", "tests": None}} for i in range(8)]
    (tmp_path / "rl").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "rl" / "p.parquet")
    (tmp_path / "rl_job.py").write_text(RL_SCRIPT)
    out = tmp_path / "run"
    res = _launch(2, [str(tiny_model_dir), str(tmp_path / "rl"), str(out), json.dumps(extra)],
                  script=tmp_path / "rl_job.py")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "distributed training: MULTI_CPU, 2 processes (gloo), rank 1" in res.stderr
    log = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "loss" in r and "train_runtime" not in r] == [1, 2]
    per_proc = [(r["balance/groups_per_process_min"], r["balance/groups_per_process_max"]) for r in log
                if "balance/groups_per_process_min" in r]
    if extra.get("group_balance") == "tokens":
        assert per_proc and all(x == (1.0, 1.0) for x in per_proc), per_proc
    if extra.get("fake_vllm"):
        ratios = [(r["sampling/importance_sampling_ratio/min"], r["sampling/importance_sampling_ratio/max"])
                  for r in log if "sampling/importance_sampling_ratio/min" in r]
        assert ratios and all(0.0 < lo < hi <= 2.0 for lo, hi in ratios), ratios  # not TRL's placeholder values
    elif extra.get("group_balance") == "first":
        assert per_proc and all(x == (0.0, 2.0) for x in per_proc), per_proc
    before, after = load_file(tiny_model_dir / "model.safetensors"), load_file(out / "final" / "model.safetensors")
    assert all(not torch.equal(before[k], after[k]) for k in before)


@pytest.mark.slow
def test_fsdp2_config_on_cpu_is_refused(tiny_model_dir, sft_shard, tmp_path):
    """pipelines/accelerate/fsdp2.yaml on a CPU machine: with use_cpu it would be plain DDP, without it two
    independent trainers writing one output_dir; both refused before any training."""
    conf = (REPO / "pipelines" / "accelerate" / "fsdp2.yaml").read_text()
    (tmp_path / "fsdp2.yaml").write_text(conf.replace("mixed_precision: bf16", "mixed_precision: 'no'"))
    launch = ("--config_file", str(tmp_path / "fsdp2.yaml"))
    res = _launch(2, _sft_args(tiny_model_dir, sft_shard, tmp_path / "a", "per_device_train_batch_size=2"), *launch)
    assert res.returncode != 0 and "FSDP was asked for" in res.stderr and "MULTI_CPU" in res.stderr
    res = _launch(2, _sft_args(tiny_model_dir, sft_shard, tmp_path / "b", "use_cpu=false"), *launch)
    assert res.returncode != 0 and "2 processes were launched (WORLD_SIZE=2) but this one trains alone" in res.stderr
    assert not (tmp_path / "a" / "log.jsonl").exists() and not (tmp_path / "b" / "log.jsonl").exists()
