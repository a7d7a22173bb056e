"""All ../shared/data/sft_sources/* against all ../shared/data/benchmarks/*: per-source table + MANIFEST checks.

Runs the real `decontaminate` stage (datatrove, kept/removed/stats/report) with one source name per
file, prints the per-source contamination table and checks the facts listed in
../shared/data/MANIFEST.md:
- the eval-output sources hit their benchmarks fully (every item of aime2024 / amc2023 / math500 /
  minerva_math / gsm8k that they were generated on);
- DeepScaleR's AIME 1983-2023 pool contains MATH-500 items (MANIFEST: 7 verbatim, 9 with near copies);
- GSM8K train vs GSM8K test (the clean control) stays near zero.

    python bench/decontam_sources.py [-o OUT] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cotforge.curate.benchmarks import local_benchmark_names  # noqa: E402
from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.decontam.stage import run_decontam  # noqa: E402
from cotforge.curate.engine import ExecutorConfig  # noqa: E402
from cotforge.curate.io.readers import InputSpec  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"

# (source, benchmark, expected items hit): "full" = every item of the benchmark
EXPECT_FULL = [
    ("skyt1_longcot_eval_traces", "aime2024"), ("skyt1_longcot_eval_traces", "amc2023"),
    ("skyt1_longcot_eval_traces", "math500"), ("skyt1_longcot_eval_traces", "minerva_math"),
    ("baseline_shortcot_eval_outputs", "aime2024"), ("baseline_shortcot_eval_outputs", "amc2023"),
    ("baseline_shortcot_eval_outputs", "math500"), ("baseline_shortcot_eval_outputs", "minerva_math"),
    ("qwen25_32b_instruct_aime24", "aime2024"), ("gsm8k_gpt3_model_solutions", "gsm8k"),
]


def items_hit_by_source(report: dict) -> dict[tuple[str, str], set[str]]:
    """(source, benchmark) -> benchmark item ids hit, from contamination_report.json's matches."""
    out: dict[tuple[str, str], set[str]] = {}
    for m in report["matches"]:
        for a in m["all"]:
            out.setdefault((m["source"], a["benchmark"]), set()).add(a["benchmark_id"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--out", default=None)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    if not (SHARED / "MANIFEST.md").exists():
        sys.exit(f"needs {SHARED}")
    out = Path(args.out or tempfile.mkdtemp(prefix="decontam_sources_"))
    files = sorted((SHARED / "sft_sources").glob("*.jsonl.gz"))
    specs = [InputSpec(str(f), f.name.removesuffix(".jsonl.gz")) for f in files]
    names = local_benchmark_names(SHARED / "benchmarks")
    cfg = DecontamConfig(benchmarks=names, benchmarks_dir=str(SHARED / "benchmarks"))
    t0 = time.perf_counter()
    stats = run_decontam(specs, out, cfg, ExecutorConfig(workers=args.workers, rows_per_task=5000))
    wall = time.perf_counter() - t0
    report = json.loads((out / "contamination_report.json").read_text())
    print(f"{stats['rows_in']} rows, {len(names)} benchmarks, {wall:.1f}s ({stats['rows_in'] / wall:,.0f} rows/s "
          f"incl. index build, ingest and report) -> {out}\n")
    print("| source | rows | contaminated | prompt side | response only | rate | benchmarks (rows) |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for s, v in report["per_source"].items():
        by = ", ".join(f"{b} {n}" for b, n in sorted(v["by_benchmark"].items(), key=lambda x: -x[1]))
        print(f"| {s} | {v['rows']} | {v['contaminated']} | {v['prompt_side']} | {v['response_only']} | "
              f"{v['rate']:.1%} | {by} |")
    print("\n| benchmark | items | items hit | rows removed |")
    print("|---|---:|---:|---:|")
    for b, v in report["per_benchmark"].items():
        print(f"| {b} | {v['items']} | {v['items_hit']} | {v['rows_removed']} |")

    hits = items_hit_by_source(report)
    sizes = {b: v["items"] for b, v in report["per_benchmark"].items()}
    print("\nMANIFEST checks:")
    ok_all = True
    for src, b in EXPECT_FULL:
        n = len(hits.get((src, b), ()))
        ok = n == sizes[b]
        ok_all &= ok
        print(f"- [{'ok' if ok else 'FAIL'}] {src} hits {b} fully: {n}/{sizes[b]}")
    n = len(hits.get(("deepscaler_aime_1983_2023", "math500"), ()))
    ok = n >= 7
    ok_all &= ok
    print(f"- [{'ok' if ok else 'FAIL'}] deepscaler_aime_1983_2023 contains MATH-500 items: {n} "
          f"(MANIFEST: 7 verbatim, 9 incl. near copies)")
    g = report["per_source"].get("gsm8k_train_human", {})
    ok = g.get("contaminated", 0) <= 0.001 * max(g.get("rows", 1), 1) + 2
    ok_all &= ok
    print(f"- [{'ok' if ok else 'FAIL'}] gsm8k_train_human vs gsm8k test near zero: {g.get('contaminated')} of "
          f"{g.get('rows')} rows (MANIFEST: 1 near-duplicate)")
    print("\nall checks passed" if ok_all else "\nSOME CHECKS FAILED")


if __name__ == "__main__":
    main()
