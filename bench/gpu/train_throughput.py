"""SFT and RL-step throughput at real model shapes through cotforge's own SFT trainer path (GPU; tiny on CPU).

Models are built from their published config values with random weights (no hub access: only throughput is
measured). Qwen3 values from the `config.json` of Qwen/Qwen3-1.7B, Qwen/Qwen3-4B and Qwen/Qwen3-8B on the
hub (vendored copies read through the code search: e.g. the QWEN3_8B_CONFIG_JSON test fixture of a public
repo, the qwen3:4b model card of akougkas/warpio-cli). All three share vocab_size 151936, head_dim 128,
8 KV heads, rope_theta 1e6, rms_norm_eps 1e-6 and max_position_embeddings 40960.

SFT, per (shape, tokens per packed sequence, attention implementation): chat-templated long-CoT rows
(the demo generator's math + code rows with their `<think>` blocks lengthened) -> `prepare_sft_dataset`
(qwen3 template, Qwen3-Base-style tokenizer: eos <|endoftext|>, turns end with <|im_end|>) -> TRL BFD
packing, padding-free, assistant-only labels, activation checkpointing, bf16 autocast over fp32 master
weights (bf16 weights for the 8B shape: fp32 + AdamW would need ~131 GB), one packed row per step.
`build_trainer` runs the packed-sample leak probe on the device with the implementation under test.

    MFU = (6 N T + 6 V d T_lab + 6 n_layers n_heads d_head sum_i l_i^2) / (t_step * R)

N = parameters of the decoder's linear layers, T = tokens, T_lab = labelled tokens (TRL 1.16's fused LM
head projects only them through the V x d head), l_i = lengths of the packed samples (causal attention:
QK^T and PV are l^2 d_head per head forward, x3 for forward + backward). Recomputation from activation
checkpointing is not counted. R = dense bf16 matmul rate measured on the device in the same run (fp32 on
CPU). t_step = wall time of an optimizer step (after `--warmup` steps, which include compilation).

RL: one GPPO optimizer step (`cotforge.train.rl.losses.policy_loss` on the model's log-probs of
`--rl-batch` completions of `--rl-completion-len` tokens after `--rl-prompt-len` prompt tokens; token values
are random, which does not change the cost), same FLOP count. Rollout: HF `generate` throughput (sampling,
KV cache, sdpa) for `--gen-batch` prompts x `--gen-tokens` new tokens.

One file (~490 lines) on purpose: it is the single script run on an offline GPU node (bench/gpu/run.sh). The
test suite runs it (`--describe-shapes`, and a tiny CPU run) as a command, never importing it.

    python -m bench.gpu.train_throughput --out-dir out/gpu            # GPU defaults (see bench/gpu/run.sh)
    python -m bench.gpu.train_throughput --shapes tiny --seq-lens 128,256 --steps 2 --rl-completion-len 32 --gen-tokens 8
    python -m bench.gpu.train_throughput --describe-shapes qwen3-8b   # parameter counts on the meta device, JSON
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")

log = logging.getLogger("gpu_train")

COMMON = dict(vocab_size=151936, head_dim=128, num_key_value_heads=8, max_position_embeddings=40960,
              rope_theta=1000000.0, rms_norm_eps=1e-6, hidden_act="silu", attention_bias=False)
SHAPES: dict[str, dict[str, Any]] = {
    "qwen3-1.7b": dict(COMMON, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                       num_attention_heads=16, tie_word_embeddings=True),
    "qwen3-4b": dict(COMMON, hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
                     num_attention_heads=32, tie_word_embeddings=True),
    "qwen3-8b": dict(COMMON, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                     num_attention_heads=32, tie_word_embeddings=False),
    "tiny": dict(COMMON, vocab_size=0, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=16, tie_word_embeddings=True),
}
WEIGHTS_DTYPE = {"qwen3-8b": "bfloat16"}  # the others: float32 master weights + bf16 autocast (the default)


def build_model(shape: str, vocab: int, device, dtype: str):
    """A random-weight Qwen3 model of `shape` built directly on `device` (vocab 0 = the tokenizer's)."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    values = dict(SHAPES[shape])
    values["vocab_size"] = values["vocab_size"] or vocab
    cfg = Qwen3Config(**values, use_cache=False)
    torch.manual_seed(0)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(cfg, dtype=getattr(torch, dtype))


def flop_terms(config) -> dict[str, int]:
    """Per-token matmul parameter counts and attention dimensions for the MFU formula (module docstring)."""
    d, f, n = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    h, kv, dh = config.num_attention_heads, config.num_key_value_heads, config.head_dim
    per_layer = d * h * dh + 2 * d * kv * dh + h * dh * d + 3 * d * f
    return {"body": n * per_layer, "head": config.vocab_size * d, "attn": n * h * dh}


def describe_shape(shape: str) -> dict[str, Any]:
    """The shape built on the meta device: its FLOP terms, the weights of its decoder linear layers (what
    `body` must count), its hidden size and whether the head is tied to the embedding."""
    import torch

    model = build_model(shape, 0, torch.device("meta"), "bfloat16")
    linear = sum(m.weight.numel() for name, m in model.named_modules()
                 if isinstance(m, torch.nn.Linear) and ".layers." in f".{name}")
    return {"flop_terms": flop_terms(model.config), "linear_in_layers": linear,
            "hidden_size": model.config.hidden_size, "tie_word_embeddings": model.config.tie_word_embeddings}


def matmul_rate(device, seconds: float = 2.0) -> float:
    """Measured dense matmul FLOP/s: bf16 8192^3 on CUDA, fp32 1024^3 on CPU."""
    import torch

    cuda = device.type == "cuda"
    n, dtype = (8192, torch.bfloat16) if cuda else (1024, torch.float32)
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    _sync(device)
    iters, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            a @ b
        _sync(device)
        iters += 10
    return 2 * n**3 * iters / (time.perf_counter() - t0)


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def write_rows(folder: Path, tok, seq_len: int, n_tokens: int, seed: int) -> Path:
    """Parquet of chat rows (demo math + code problems) whose `<think>` bodies are lengthened to lognormal lengths."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cotforge.pipelines.demo_data import DemoDataConfig, generate_demo_data

    src = folder / "demo"
    generate_demo_data(src, DemoDataConfig(n_longcot_math=40, n_shortcot_math=0, n_code=20, n_benchmark=1,
                                           exact_dups=0, near_dups=0, humaneval_leaks=0, bench_leaks=0,
                                           malformed=0, seed=seed))
    base = [json.loads(line) for f in ("longcot_math.jsonl", "code_tests.jsonl")
            for line in (src / f).read_text().splitlines()]
    rng = random.Random(seed)
    sample = "\n".join(r["response"] for r in base[:8])
    per_char = len(tok(sample, add_special_tokens=False)["input_ids"]) / len(sample)
    overhead = max(len(tok(r["problem"] + r["response"].partition("</think>")[2], add_special_tokens=False)
                       ["input_ids"]) for r in base) + 32  # prompt, answer, template tokens
    rows, total = [], 0
    while total < n_tokens:
        rec = rng.choice(base)
        body, _, answer = rec["response"].partition("</think>")
        target = int(min(0.9 * seq_len - overhead, max(seq_len / 16, rng.lognormvariate(0, 0.6) * seq_len / 4)))
        lines = body.removeprefix("<think>\n").strip().splitlines()
        text, k = [], 0
        while len("\n".join(text)) * per_char < target:
            text.append(f"Check {k}: {lines[k % len(lines)]}")
            k += 1
        rows.append({"id": f"g{len(rows)}", "prompt": rec["problem"],
                     "response": "<think>\n" + "\n".join(text) + "\n</think>" + answer})
        total += target
    out = folder / "sft"
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), out / "part-000.parquet")
    return out


class StepMeter:
    """Wall time of each optimizer step (callback) and token counts of each batch (training_step wrapper)."""

    def __init__(self, device):
        self.device, self.times, self.batches, self._t0 = device, [], [], 0.0

    def callback(self):
        from transformers import TrainerCallback

        meter = self

        class _Cb(TrainerCallback):
            def on_step_begin(self, args, state, control, **kw):
                _sync(meter.device)
                meter._t0 = time.perf_counter()

            def on_step_end(self, args, state, control, **kw):
                _sync(meter.device)
                meter.times.append(time.perf_counter() - meter._t0)

        return _Cb()

    def wrap(self, trainer) -> None:
        """Record tokens, labelled tokens and sum of squared sample lengths of every batch trained on."""
        inner = trainer.training_step

        def counted(model, inputs, num_items_in_batch=None):
            pos = inputs.get("position_ids")
            if pos is not None:  # padding-free: samples restart at position 0
                starts = (pos[0] == 0).nonzero().flatten().tolist() + [pos.shape[1]]
                lengths = [b - a for a, b in zip(starts, starts[1:], strict=False)]
            else:
                lengths = inputs["attention_mask"].sum(-1).tolist()
            self.batches.append({"tokens": int(sum(lengths)), "labels": int((inputs["labels"] != -100).sum()),
                                 "sq": int(sum(n * n for n in lengths)), "samples": len(lengths)})
            return inner(model, inputs, num_items_in_batch)

        trainer.training_step = counted


def sft_case(model, tok, shape: str, seq_len: int, attn: str, args, work: Path, rate: float) -> dict[str, Any]:
    """Train warmup + steps packed steps through build_trainer; tokens/s, MFU, peak memory, probe result."""
    import torch

    from cotforge.train.sft.trainer import CotSFTConfig, build_trainer

    device = model.device
    model.set_attn_implementation(attn)
    data = write_rows(work / f"{shape}-{seq_len}", tok, seq_len, int(seq_len * (args.warmup + args.steps) * 1.5), 0)
    cuda = device.type == "cuda"
    cfg = CotSFTConfig(output_dir=str(work / "run"), data=[str(data)], max_length=seq_len, packing=True,
                       max_steps=args.warmup + args.steps, per_device_train_batch_size=1, learning_rate=1e-5,
                       lr_scheduler_type="constant", save_strategy="no", report_to="none", logging_steps=10**6,
                       disable_tqdm=True, dataloader_num_workers=0, use_cpu=not cuda, bf16=cuda,
                       activation_checkpointing=True, seed=0)
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    meter = StepMeter(device)
    try:
        trainer, stats = build_trainer(cfg, [meter.callback()], model=model, tokenizer=tok)
        meter.wrap(trainer)
        trainer.train()
        ran = str(model.config._attn_implementation)
        del trainer
    finally:  # the next case reuses the model: drop the forward wrappers TRL (fused LM head) and accelerate added
        for attr in ("forward", "_original_forward"):
            model.__dict__.pop(attr, None)
        gc.collect()
    terms = flop_terms(model.config)
    head_tokens = "labels"  # TRL 1.16's fused LM head projects only positions with a label
    steps = list(zip(meter.times, meter.batches, strict=False))[args.warmup:]
    t = sum(s for s, _ in steps)
    tokens = sum(b["tokens"] for _, b in steps)
    flops = sum(6 * terms["body"] * b["tokens"] + 6 * terms["head"] * b[head_tokens] + 6 * terms["attn"] * b["sq"]
                for _, b in steps)
    probe = stats.packing.get("probe", {})
    return {"shape": shape, "seq_len": seq_len, "attn_requested": attn, "attn_ran": ran, "dtype": str(model.dtype),
            "packed": bool(stats.packing.get("packed")), "leak_check": probe.get("isolated"),
            "probe": probe, "steps": len(steps), "first_step_s": round(meter.times[0], 3) if meter.times else None,
            "step_s": round(t / max(len(steps), 1), 4), "tokens_per_step": tokens / max(len(steps), 1),
            "samples_per_step": sum(b["samples"] for _, b in steps) / max(len(steps), 1),
            "tokens_per_s": tokens / t if t else 0.0, "mfu": flops / t / rate if t else 0.0,
            "lm_head_counted_on": head_tokens, "peak_mem_gib": _peak_gib(device), "rows": stats.rows_kept}


def _peak_gib(device) -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 2) if device.type == "cuda" else None


def _logprobs(model, ids, prompt_len: int, chunk: int):
    """Per-token log-probs of ids[:, prompt_len:], the LM head recomputed per chunk in backward (memory)."""
    import torch
    from torch.utils.checkpoint import checkpoint

    hidden = model.model(input_ids=ids).last_hidden_state[:, prompt_len - 1:-1]
    head, targets = model.get_output_embeddings(), ids[:, prompt_len:]

    def piece(h, t):
        return torch.log_softmax(head(h).float(), -1).gather(-1, t.unsqueeze(-1)).squeeze(-1)

    return torch.cat([checkpoint(piece, hidden[:, i:i + chunk], targets[:, i:i + chunk], use_reentrant=False)
                      for i in range(0, targets.shape[1], chunk)], dim=1)


def rl_step(model, vocab: int, args, rate: float) -> dict[str, Any]:
    """GPPO optimizer steps (log-prob + policy_loss + backward + AdamW) on completions of a given length."""
    import contextlib

    import torch

    from cotforge.train.rl.losses import policy_loss

    device = model.device
    cuda = device.type == "cuda"
    b, p, n = args.rl_batch, args.rl_prompt_len, args.rl_completion_len
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (b, p + n), generator=gen).to(device)
    adv = (torch.randint(0, 2, (b,), generator=gen).float() * 2 - 1).to(device)
    mask = torch.ones(b, n, device=device)
    model.set_attn_implementation("sdpa")
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, fused=cuda)
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if cuda and model.dtype == torch.float32 else contextlib.nullcontext()
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    times, metrics = [], {}
    for _ in range(args.warmup + args.rl_steps):
        _sync(device)
        t0 = time.perf_counter()
        with amp:
            logp = _logprobs(model, ids, p, args.logprob_chunk)
        old = logp.detach() + 0.05 * torch.randn(logp.shape, generator=gen).to(device)
        loss, metrics = policy_loss("gppo", logp, old, adv, mask)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        _sync(device)
        times.append(time.perf_counter() - t0)
    del opt
    gc.collect()
    terms = flop_terms(model.config)
    flops = b * (6 * terms["body"] * (p + n) + 6 * terms["head"] * n + 6 * terms["attn"] * (p + n) ** 2)
    t = sum(times[args.warmup:]) / max(args.rl_steps, 1)
    return {"batch": b, "prompt_len": p, "completion_len": n, "step_s": round(t, 4), "tokens_per_s": b * (p + n) / t,
            "mfu": flops / t / rate, "peak_mem_gib": _peak_gib(device), "loss": metrics.get("loss"),
            "dtype": str(model.dtype), "attn": "sdpa"}


def rollout(model, vocab: int, args) -> dict[str, Any]:
    """HF generate throughput: `gen_batch` random prompts, exactly `gen_tokens` sampled tokens each."""
    import contextlib

    import torch

    device = model.device
    model.gradient_checkpointing_disable()
    model.config.use_cache = True
    model.set_attn_implementation("sdpa")
    model.eval()
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (args.gen_batch, args.gen_prompt_len), generator=gen).to(device)
    cuda = device.type == "cuda"
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if cuda and model.dtype == torch.float32 else contextlib.nullcontext()
    kw = dict(attention_mask=torch.ones_like(ids), do_sample=True, temperature=1.0, top_k=0, pad_token_id=0,
              use_cache=True)
    with torch.no_grad(), amp:
        model.generate(ids, max_new_tokens=4, min_new_tokens=4, **kw)
        _sync(device)
        t0 = time.perf_counter()
        out = model.generate(ids, max_new_tokens=args.gen_tokens, min_new_tokens=args.gen_tokens, **kw)
        _sync(device)
    t = time.perf_counter() - t0
    new = (out.shape[1] - ids.shape[1]) * ids.shape[0]
    model.config.use_cache = False
    return {"batch": args.gen_batch, "prompt_len": args.gen_prompt_len, "new_tokens": args.gen_tokens,
            "seconds": round(t, 3), "tokens_per_s": new / t, "dtype": str(model.dtype), "attn": "sdpa"}


def plan(args) -> list[tuple[str, Any]]:
    """Cases in priority order: per shape, the middle sequence length first, then RL and rollout on the first shape."""
    seqs = sorted(args.seq_lens, key=lambda s: (s != args.seq_lens[len(args.seq_lens) // 2], s))
    out: list[tuple[str, Any]] = []
    for i, shape in enumerate(args.shapes):
        out += [("sft", (shape, s, a)) for s in seqs for a in args.attn]
        if i == 0:
            out += [("rl", shape), ("rollout", shape)]
    return out


def table(result: dict[str, Any]) -> str:
    """Markdown tables of the SFT cases, the RL step and the rollout."""
    lines = [f"device: {result['device']}; dense matmul rate {result['matmul_tflops']:.3g} TFLOP/s "
             f"({result['matmul_dtype']}); torch {result['torch']}, transformers {result['transformers']}, trl "
             f"{result['trl']}", "",
             "| shape | tokens/seq | attention (ran) | dtype | tokens/s | MFU | peak GiB | leak check | step s | "
             "first step s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["sft"]:
        if "error" in r:
            lines.append(f"| {r['shape']} | {r['seq_len']} | {r['attn_requested']} | | {r['error']} | | | | | |")
            continue
        leak = {True: "passed", False: "FAILED (trained unpacked)"}.get(r["leak_check"], "not probed")
        lines.append(f"| {r['shape']} | {r['seq_len']} | {r['attn_requested']} ({r['attn_ran']}) | {r['dtype']} | "
                     f"{r['tokens_per_s']:,.0f} | {100 * r['mfu']:.1f}% | {r['peak_mem_gib']} | {leak} | {r['step_s']} "
                     f"| {r['first_step_s']} |")
    for key in ("rl", "rollout"):
        r = result.get(key)
        if r:
            lines.append(f"\n{key}: " + ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                                                  for k, v in r.items()))
    if result["skipped"]:
        lines.append(f"\nskipped (budget): {result['skipped']}")
    return "\n".join(lines)


def main() -> None:
    """Run the plan within --budget-s; write gpu_train.json and gpu_train.md to --out-dir."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="qwen3-1.7b,qwen3-4b,qwen3-8b", help=f"comma list of {sorted(SHAPES)}")
    ap.add_argument("--seq-lens", default="8192,16384,32768", help="tokens per packed sequence")
    ap.add_argument("--attn", default="sdpa,flex_attention", help="attention implementations to try")
    ap.add_argument("--steps", type=int, default=3, help="measured optimizer steps per SFT case")
    ap.add_argument("--warmup", type=int, default=1, help="steps not measured (compilation, allocator warm-up)")
    ap.add_argument("--rl-batch", type=int, default=8)
    ap.add_argument("--rl-prompt-len", type=int, default=256)
    ap.add_argument("--rl-completion-len", type=int, default=4096)
    ap.add_argument("--rl-steps", type=int, default=2)
    ap.add_argument("--logprob-chunk", type=int, default=1024, help="positions per LM-head chunk in the RL step")
    ap.add_argument("--gen-batch", type=int, default=16)
    ap.add_argument("--gen-prompt-len", type=int, default=256)
    ap.add_argument("--gen-tokens", type=int, default=256)
    ap.add_argument("--budget-s", type=float, default=420.0, help="start no case after this many seconds")
    ap.add_argument("--rate-seconds", type=float, default=2.0, help="time spent measuring the matmul rate")
    ap.add_argument("--out-dir", type=Path, default=Path("gpu_train_out"))
    ap.add_argument("--describe-shapes", help="comma list: print each shape's parameter counts as JSON and stop")
    args = ap.parse_args()
    if args.describe_shapes:
        print(json.dumps({s: describe_shape(s) for s in args.describe_shapes.split(",")}))
        return
    args.shapes = [s for s in args.shapes.split(",") if s]
    args.seq_lens = [int(s) for s in args.seq_lens.split(",") if s]
    args.attn = [a for a in args.attn.split(",") if a]
    unknown = [s for s in args.shapes if s not in SHAPES]
    if unknown:
        ap.error(f"unknown shapes {unknown}; known: {sorted(SHAPES)}")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    log.setLevel(logging.INFO)
    import datasets
    import torch
    import transformers
    import trl

    from cotforge.train.tiny_chat import chat_tokenizer

    datasets.disable_progress_bars()
    start = time.perf_counter()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rate = matmul_rate(device, args.rate_seconds)
    tok = chat_tokenizer("qwen3_base")
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)",
        "matmul_tflops": rate / 1e12, "matmul_dtype": "bf16" if device.type == "cuda" else "fp32",
        "torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__,
        "args": {k: v if not isinstance(v, Path) else str(v) for k, v in vars(args).items()},
        "sft": [], "skipped": []}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    models: dict[str, Any] = {}
    longest = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for kind, what in plan(args):
            left = args.budget_s - (time.perf_counter() - start)
            if left < max(1.5 * longest, 5.0):
                result["skipped"].append(f"{kind} {what}")
                continue
            shape = what[0] if kind == "sft" else what
            if shape not in models:
                models.clear()
                gc.collect()
                if device.type == "cuda":
                    torch.cuda.empty_cache()
                models[shape] = build_model(shape, len(tok), device, WEIGHTS_DTYPE.get(shape, "float32"))
            model, t0 = models[shape], time.perf_counter()
            try:
                if kind == "sft":
                    result["sft"].append(sft_case(model, tok, *what, args, Path(tmp), rate))
                elif kind == "rl":
                    result["rl"] = dict(rl_step(model, len(tok), args, rate), shape=shape)
                else:
                    result["rollout"] = dict(rollout(model, len(tok), args), shape=shape)
            except Exception as e:  # one failing case (OOM, a kernel without backward, ...) must not end the run
                oom = isinstance(e, torch.cuda.OutOfMemoryError)
                error = "out of memory" if oom else f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
                log.warning("%s %s failed: %s", kind, what, error, exc_info=not oom)
                if kind == "sft":
                    result["sft"].append({"shape": what[0], "seq_len": what[1], "attn_requested": what[2],
                                          "error": error})
                else:
                    result[kind] = {"shape": shape, "error": error}
                models.clear()  # the model may be left half-updated or fragmented: rebuild it
                gc.collect()
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            longest = max(longest, time.perf_counter() - t0)
            log.info("%s %s done in %.1f s (%.0f s elapsed)", kind, what, time.perf_counter() - t0,
                     time.perf_counter() - start)
            (args.out_dir / "gpu_train.json").write_text(json.dumps(result, indent=1))  # partial results survive
    result["wall_s"] = round(time.perf_counter() - start, 1)
    (args.out_dir / "gpu_train.json").write_text(json.dumps(result, indent=1))
    (args.out_dir / "gpu_train.md").write_text(table(result) + "\n")
    print(table(result))


if __name__ == "__main__":
    main()
