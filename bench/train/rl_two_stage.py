"""The Klear recipe's two RL stages in miniature: SFT -> math RL -> code RL (from the math stage's model).

The task of `bench/train/rl_real.py` (one-digit +/- two-digit word problems, the tiny Qwen2 after cotforge's SFT) in two
domains: a math version (answer in `\\boxed{}` after `</think>`, verified by the math verifier) and a code version of
other facts ("Write a Python program that prints the answer", one stdin/stdout test run in the sandbox). Every
arithmetic fact (a, op, b) is in exactly one split: math test, code test, math RL, code RL, or SFT (where both its
math and its code form are trained on), so held-out accuracy is on facts never seen in any wording or domain.

The stages use the recipe's settings in miniature: reward mode `official` (any answer after `</think>`; mean of +-1
over <= 16 sampled tests), the ceil(kept groups / mini-batch) rule (`--steps` count loop steps, taken or left out), math stage mini-batch = rollout / 8 (8 optimizer steps per rollout) at `--lr`, code stage
mini-batch = rollout / 4 (4 steps per rollout) at `--lr` / 2 (the report's 1e-6 -> 5e-7 ratio), warmup in rollout
batches, `abilities` picking each stage's rows. Held-out accuracy per domain (avg@k at temperature 0.6) before RL,
after the math stage and after the code stage, per seed; wall time and load.

    /tmp/tools/heavy python -m bench.train.rl_two_stage --quick     # a smoke run: 1 seed, few steps
    /tmp/tools/heavy python -m bench.train.rl_two_stage             # 2 seeds

Writes OUT/results.json and OUT/table.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path
from typing import Any

from bench.train import rl_real
from bench.train.rl_real import problem, scratchpad, split_hash

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

CODE_SUFFIX = " Write a Python program that prints the answer."


def code_problem(row: dict[str, Any], op: str, a: int, b: int) -> dict[str, Any]:
    """The code form of a word problem: a program printing the answer, one stdin/stdout test."""
    prompt = row["prompt"].replace(" Put the answer in \\boxed{}.", CODE_SUFFIX)
    gold = f"<think>{scratchpad(op, a, b)}</think>\n```python\nprint({row['answer']})\n```"
    tests = json.dumps({"kind": "stdio", "cases": [{"input": "", "output": f"{row['answer']}\n"}]})
    return {"prompt": prompt, "answer": row["answer"], "gold": gold, "tests": tests, "key": row["key"]}


def splits(seed: int, n_test: int, n_rl: int) -> dict[str, list[dict[str, Any]]]:
    """math_test, code_test, math_rl, code_rl: disjoint facts; sft: the rest, each fact in both forms."""
    rng = random.Random(seed)
    facts = [(op, a, b) for op in "+-" for a in range(10, 100) for b in range(1, 10)]
    rng.shuffle(facts)
    math = [problem(rng, *f) for f in facts]
    code = [code_problem(m, *f) for m, f in zip(math, facts, strict=True)]
    cut = [0, n_test, 2 * n_test, 2 * n_test + n_rl, 2 * n_test + 2 * n_rl]
    out = {"math_test": math[cut[0]:cut[1]], "code_test": code[cut[1]:cut[2]], "math_rl": math[cut[2]:cut[3]],
           "code_rl": code[cut[3]:cut[4]]}
    out["sft"] = math[cut[4]:] + code[cut[4]:]
    return out


def sft_checkpoint(out: Path, data: dict[str, list[dict[str, Any]]], steps: int, seed: int) -> Path:
    """The tiny model after cotforge's SFT on both forms of the SFT facts (cached in OUT/sft): rl_real's, with
    room for the longer code form."""
    return rl_real.sft_checkpoint(out, data, steps, seed, max_length=160, logging_steps=50)


def accuracy(model: Any, tok: Any, rows: list[dict[str, Any]], domain: str, k: int, seed: int = 0) -> float:
    """avg@k at temperature 0.6 / top_p 0.95: share of samples whose official-mode reward is +1."""
    from cotforge.train.rl.rewards import RewardConfig, make_reward_func
    from cotforge.train.rollout import HFGenerator, SamplingConfig

    gen = HFGenerator(model, tok, batch_size=64)
    outs = gen.generate([[{"role": "user", "content": r["prompt"]}] for r in rows],
                        SamplingConfig(n=k, temperature=0.6, top_p=0.95, max_new_tokens=56, seed=seed))
    flat = [c for o in outs for c in o]
    reward = make_reward_func(RewardConfig(mode="official"), tokenizer=tok)
    vals = reward(completions=[c.text for c in flat], completion_ids=[c.token_ids for c in flat],
                  ability=[domain] * len(flat), ground_truth=[str(r["answer"]) for r in rows for _ in range(k)],
                  tests=[r.get("tests") for r in rows for _ in range(k)])
    return sum(v == 1.0 for v in vals) / len(flat)


def evaluate(path: Path, data: dict[str, list[dict[str, Any]]], k: int) -> dict[str, float]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model, tok = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    return {"math": accuracy(model, tok, data["math_test"], "math", k),
            "code": accuracy(model, tok, data["code_test"], "code", k)}


def stage(out: Path, start: Path, rows: list[dict[str, Any]], domain: str, seed: int, steps: int, rollout: int,
          per_rollout: int, lr: float) -> tuple[float, int, int]:
    """One RL stage from `start` (`steps` loop steps); returns its wall time and the optimizer steps taken and
    left out (the ceil rule's empty mini-batch slots). The model goes to OUT/final."""
    from datasets import Dataset
    from transformers import AutoTokenizer

    from cotforge.train.rl.config import GPPOConfig
    from cotforge.train.rl.trainer import run_rl

    tok = AutoTokenizer.from_pretrained(start)
    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": r["prompt"]}], "ability": domain,
                             "ground_truth": str(r["answer"]), "tests": r.get("tests") or ""} for r in rows])
    mini = rollout // per_rollout
    cfg = GPPOConfig(model=str(start), output_dir=str(out), seed=seed, num_generations=8, rollout_prompts=rollout,
                     mini_batch_prompts=mini, per_device_train_batch_size=mini * 8, oversample=2,
                     max_completion_length=56, learning_rate=lr, warmup_rollouts=1, max_steps=steps,
                     save_steps=100000, report_to=[], logging_steps=1, abilities=[domain],
                     reward={"mode": "official", "workers": 2}, minibatch_rule="ceil")
    t0 = time.time()
    trainer = run_rl(cfg, train_dataset=ds, processing_class=tok)
    return time.time() - t0, trainer.state.global_step, trainer.left_out_steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("runs/rl_two_stage"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--sft-steps", type=int, default=600)
    ap.add_argument("--math-steps", type=int, default=32)
    ap.add_argument("--code-steps", type=int, default=12)
    ap.add_argument("--math-rollout", type=int, default=32)
    ap.add_argument("--code-rollout", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--k", type=int, default=2, help="samples per held-out problem")
    ap.add_argument("--n-test", type=int, default=64)
    ap.add_argument("--quick", action="store_true", help="1 seed, 8 + 4 steps, 200 SFT steps")
    a = ap.parse_args()
    if a.quick:
        a.seeds, a.math_steps, a.code_steps, a.sft_steps, a.math_rollout, a.code_rollout = a.seeds[:1], 8, 4, 200, 16, 8
    import torch

    torch.set_num_threads(1)
    a.out.mkdir(parents=True, exist_ok=True)
    data = splits(0, n_test=a.n_test, n_rl=300)
    t0 = time.time()
    sft = sft_checkpoint(a.out, data, a.sft_steps, seed=0)
    before = evaluate(sft, data, a.k)
    meta = {"math_test_sha256": split_hash(data["math_test"]), "code_test_sha256": split_hash(data["code_test"]),
            "n_test": a.n_test, "k": a.k, "sft_steps": a.sft_steps, "sft_s": time.time() - t0,
            "args": {k: str(v) for k, v in vars(a).items()}, "before": before}
    print(f"SFT: held-out math {before['math']:.3f}, code {before['code']:.3f} ({meta['sft_s']:.0f} s, load "
          f"{os.getloadavg()})", flush=True)
    runs = []
    for s in a.seeds:
        run: dict[str, Any] = {"seed": s, "before": before}
        w1, *run["math_steps_taken_left_out"] = stage(a.out / f"math_s{s}", sft, data["math_rl"], "math", s,
                                                       a.math_steps, a.math_rollout, 8, a.lr)
        run["after_math"], run["math_wall_s"], run["load_math"] = evaluate(a.out / f"math_s{s}" / "final", data,
                                                                           a.k), w1, os.getloadavg()
        w2, *run["code_steps_taken_left_out"] = stage(a.out / f"code_s{s}", a.out / f"math_s{s}" / "final",
                                                       data["code_rl"], "code", s, a.code_steps, a.code_rollout, 4,
                                                       a.lr / 2)
        run["after_code"], run["code_wall_s"], run["load_code"] = evaluate(a.out / f"code_s{s}" / "final", data,
                                                                           a.k), w2, os.getloadavg()
        runs.append(run)
        print(f"seed {s}: math {before['math']:.3f} -> {run['after_math']['math']:.3f} -> "
              f"{run['after_code']['math']:.3f}; code {before['code']:.3f} -> {run['after_math']['code']:.3f} -> "
              f"{run['after_code']['code']:.3f}; wall {w1:.0f} + {w2:.0f} s; optimizer steps taken / left out: "
              f"math {run['math_steps_taken_left_out']}, code {run['code_steps_taken_left_out']}; "
              f"load {run['load_code']}", flush=True)
        (a.out / "results.json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=1))
    meta["total_wall_s"] = time.time() - t0
    (a.out / "results.json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=1))
    lines = [f"held-out avg@{a.k} (T 0.6), {a.n_test} math + {a.n_test} code facts never trained on; SFT "
             f"{a.sft_steps} steps", "",
             "| seed | math: SFT -> after math RL -> after code RL | code: SFT -> after math RL -> after code RL "
             "| wall s (math + code stage) | load 1/5/15 at end |", "|---|---|---|---|---|"]
    for r in runs:
        lines.append(f"| {r['seed']} | {before['math']:.3f} -> {r['after_math']['math']:.3f} -> "
                     f"{r['after_code']['math']:.3f} | {before['code']:.3f} -> {r['after_math']['code']:.3f} -> "
                     f"{r['after_code']['code']:.3f} | {r['math_wall_s']:.0f} + {r['code_wall_s']:.0f} | "
                     f"{' / '.join(f'{x:.1f}' for x in r['load_code'])} |")
    text = "\n".join(lines) + f"\n\ntotal wall {meta['total_wall_s']:.0f} s"
    (a.out / "table.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
