"""bench/gpu/train_throughput.py, run as a command (tests never import bench): the real shapes match Qwen3's
published sizes, and the whole script runs at tiny size on CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[1]
MODULE = "bench.gpu.train_throughput"
SHAPES = {"qwen3-1.7b": 1.4e9, "qwen3-4b": 3.6e9, "qwen3-8b": 6.95e9}  # model cards: non-embedding parameters


@pytest.fixture(scope="module")
def described() -> dict:
    run = subprocess.run([sys.executable, "-m", MODULE, "--describe-shapes", ",".join(SHAPES)], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # one interpreter that imports transformers: ~10 s on the loaded 2-core machine
@pytest.mark.parametrize("shape", list(SHAPES))
def test_shapes_have_qwen3s_published_sizes_and_flop_terms_count_the_real_modules(described, shape):
    """Model cards: 1.7B (1.4B non-embedding), 4.0B (3.6B), 8.2B (6.95B)."""
    d = described[shape]
    terms, non_embedding = d["flop_terms"], SHAPES[shape]
    assert terms["body"] == d["linear_in_layers"]
    assert abs(terms["body"] - non_embedding) / non_embedding < 0.02
    assert terms["head"] == 151936 * d["hidden_size"]
    assert d["tie_word_embeddings"] == (shape != "qwen3-8b")


@pytest.mark.slow
def test_bench_runs_end_to_end_at_tiny_size_on_cpu(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", MODULE, "--shapes", "tiny", "--seq-lens", "256", "--attn", "sdpa", "--steps", "1",
           "--warmup", "1", "--rl-batch", "2", "--rl-prompt-len", "16", "--rl-completion-len", "32", "--rl-steps", "1",
           "--gen-batch", "2", "--gen-prompt-len", "8", "--gen-tokens", "8", "--rate-seconds", "0.2",
           "--out-dir", str(out)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads((out / "gpu_train.json").read_text())
    assert result["matmul_dtype"] == "fp32" and result["matmul_tflops"] > 0 and not result["skipped"]
    (sft,) = result["sft"]
    assert "error" not in sft, sft
    assert (sft["attn_ran"], sft["packed"], sft["leak_check"]) == ("sdpa", True, True)
    assert sft["steps"] == 1 and sft["tokens_per_step"] > 128 and sft["samples_per_step"] >= 1
    assert sft["tokens_per_s"] > 0 and 0 < sft["mfu"] < 1 and sft["lm_head_counted_on"] == "labels"
    assert result["rl"]["tokens_per_s"] > 0 and 0 < result["rl"]["mfu"] < 1
    assert result["rollout"]["tokens_per_s"] > 0 and result["rollout"]["new_tokens"] == 8
    assert "| tiny | 256 | sdpa (sdpa) |" in (out / "gpu_train.md").read_text()
