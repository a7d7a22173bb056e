"""bench/gpu_train.py: the real shapes match Qwen3's published sizes, and the whole script runs at tiny size on CPU."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "gpu_train.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("gpu_train", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("shape, non_embedding", [("qwen3-1.7b", 1.4e9), ("qwen3-4b", 3.6e9), ("qwen3-8b", 6.95e9)])
def test_shapes_have_qwen3s_published_sizes_and_flop_terms_count_the_real_modules(bench, shape, non_embedding):
    """Model cards: 1.7B (1.4B non-embedding), 4.0B (3.6B), 8.2B (6.95B)."""
    model = bench.build_model(shape, 0, torch.device("meta"), "bfloat16")
    terms = bench.flop_terms(model.config)
    linear = sum(m.weight.numel() for name, m in model.named_modules()
                 if isinstance(m, torch.nn.Linear) and ".layers." in f".{name}")
    assert terms["body"] == linear
    assert abs(terms["body"] - non_embedding) / non_embedding < 0.02
    assert terms["head"] == 151936 * model.config.hidden_size
    assert model.config.tie_word_embeddings == (shape != "qwen3-8b")


@pytest.mark.slow
def test_bench_runs_end_to_end_at_tiny_size_on_cpu(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, str(SCRIPT), "--shapes", "tiny", "--seq-lens", "256", "--attn", "sdpa", "--steps", "1",
           "--warmup", "1", "--rl-batch", "2", "--rl-prompt-len", "16", "--rl-completion-len", "32", "--rl-steps", "1",
           "--gen-batch", "2", "--gen-prompt-len", "8", "--gen-tokens", "8", "--rate-seconds", "0.2",
           "--out-dir", str(out)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
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
