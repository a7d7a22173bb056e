"""All ../shared/data/sft_sources/* against all ../shared/data/benchmarks/*: per-source table + MANIFEST checks.

Runs the real `decontaminate` stage (datatrove, kept/removed/stats/report) with one source name per
file, prints the per-source contamination table and checks the facts listed in
../shared/data/MANIFEST.md:
- the eval-output sources hit their benchmarks fully (every item of aime2024 / amc2023 / math500 /
  minerva_math / gsm8k that they were generated on);
- DeepScaleR's AIME 1983-2023 pool contains MATH-500 items (MANIFEST: 7 verbatim, 9 with near copies);
- GSM8K train vs GSM8K test (the clean control) stays near zero.

    python -m bench.decontam.sources [-o OUT] [--workers 2]
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

from bench.paths import SHARED  # noqa: E402
from cotforge.curate.core.benchmarks import local_benchmark_names  # noqa: E402
from cotforge.curate.decontam.config import DecontamConfig  # noqa: E402
from cotforge.curate.engine import ExecutorConfig  # noqa: E402
from cotforge.curate.io.readers import InputSpec  # noqa: E402
from cotforge.pipelines.stages import run_stage  # noqa: E402

# The previous stop's table (closing notes of stops 10 and 11): contaminated rows per source.
TODAY = {"baseline_shortcot_eval_outputs": 2596, "skyt1_longcot_eval_traces": 1464, "qwen25_32b_instruct_aime24": 90,
         "gsm8k_gpt3_model_solutions": 5276, "qwen25_math_rm_example": 800, "deepscaler_aime_1983_2023": 82,
         "deepscaler_math_train": 109, "deepcoder_leetcode_train": 50, "gsm8k_train_human": 0, "marco_o1_cot_demo": 0}

# (source, benchmark, expected items hit): "full" = every item of the benchmark
EXPECT_FULL = [
    ("skyt1_longcot_eval_traces", "aime2024"), ("skyt1_longcot_eval_traces", "amc2023"),
    ("skyt1_longcot_eval_traces", "math500"), ("skyt1_longcot_eval_traces", "minerva_math"),
    ("baseline_shortcot_eval_outputs", "aime2024"), ("baseline_shortcot_eval_outputs", "amc2023"),
    ("baseline_shortcot_eval_outputs", "math500"), ("baseline_shortcot_eval_outputs", "minerva_math"),
    ("qwen25_32b_instruct_aime24", "aime2024"), ("gsm8k_gpt3_model_solutions", "gsm8k"),
]


def items_hit_by_source(out_dir: Path) -> dict[tuple[str, str], set[str]]:
    """(source, benchmark) -> benchmark item ids hit, from contamination_matches.parquet."""
    import pyarrow.parquet as pq

    t = pq.read_table(out_dir / "contamination_matches.parquet", columns=["source", "benchmark", "benchmark_id"])
    out: dict[tuple[str, str], set[str]] = {}
    for src, b, i in zip(*(t.column(c).to_pylist() for c in ("source", "benchmark", "benchmark_id")), strict=True):
        out.setdefault((src, b), set()).add(i)
    return out


def sample_matches(out_dir: Path, sources: list[str], k: int = 4) -> None:
    """A few primary matches per source, for inspection by hand: where, the original span, the item."""
    import polars as pl

    t = pl.read_parquet(out_dir / "contamination_matches.parquet").filter(pl.col("rank") == 0)
    for src in sources:
        sub = t.filter(pl.col("source") == src)
        if not len(sub):
            continue
        kinds = {f"{side}/{kind}": n for side, kind, n in sub.group_by(["side", "match_kind"]).len().iter_rows()}
        print(f"\n{src}: {len(sub)} rows; by side/kind {kinds}")
        for r in sub.sample(min(k, len(sub)), seed=0).iter_rows(named=True):
            where = f"@{r['match_start']} ({r['match_share']:.0%})" if r["match_start"] is not None else "@?"
            print(f"- {r['id']} {r['side']} {r['match_kind']} {r['score']:.2f} {where} {r['benchmark']}/{r['benchmark_id']}"
                  f"\n    row:  {(r['matched_text'] or '')[:220]!r}\n    item: {(r['item_text'] or '')[:220]!r}")


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
    stats = run_stage("decontaminate", specs, out, cfg, ExecutorConfig(workers=args.workers, rows_per_task=5000))
    wall = time.perf_counter() - t0
    report = json.loads((out / "contamination_report.json").read_text())
    print(f"{stats['rows_in']} rows, {len(names)} benchmarks, {wall:.1f}s ({stats['rows_in'] / wall:,.0f} rows/s "
          f"incl. index build, ingest and report) -> {out}\n")
    print(f"report JSON {(out / 'contamination_report.json').stat().st_size / 1e3:.0f} kB, matches Parquet "
          f"{(out / 'contamination_matches.parquet').stat().st_size / 1e6:.1f} MB\n")
    print("| source | rows | contaminated | previous stop | prompt side | response only | rate | benchmarks (rows) |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for s, v in report["per_source"].items():
        by = ", ".join(f"{b} {n}" for b, n in sorted(v["by_benchmark"].items(), key=lambda x: -x[1]))
        print(f"| {s} | {v['rows']} | {v['contaminated']} | {TODAY.get(s, '?')} | {v['prompt_side']} | "
              f"{v['response_only']} | {v['rate']:.1%} | {by} |")
    print("\n| benchmark | items | items hit | rows removed |")
    print("|---|---:|---:|---:|")
    for b, v in report["per_benchmark"].items():
        print(f"| {b} | {v['items']} | {v['items_hit']} | {v['rows_removed']} |")

    hits = items_hit_by_source(out)
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
    for src, b, least, note in (("deepscaler_math_train", "math_test5000", 40, "MANIFEST: 40 exact, 190 near"),
                                ("deepscaler_math_train", "math500", 1, "MANIFEST: 1 exact, 13 incl. near"),
                                ("deepcoder_leetcode_train", "leetcode_contest_2023h2", 40, "MANIFEST: 47 fuzzy")):
        n = len(hits.get((src, b), ()))
        ok = n >= least
        ok_all &= ok
        print(f"- [{'ok' if ok else 'FAIL'}] {src} hits {b}: {n} items ({note})")
    g = report["per_source"].get("gsm8k_train_human", {})
    ok = g.get("contaminated", 0) <= 0.001 * max(g.get("rows", 1), 1) + 2
    ok_all &= ok
    print(f"- [{'ok' if ok else 'FAIL'}] gsm8k_train_human vs gsm8k test near zero: {g.get('contaminated')} of "
          f"{g.get('rows')} rows (MANIFEST: 1 near-duplicate)")
    print("\nall checks passed" if ok_all else "\nSOME CHECKS FAILED")
    sample_matches(out, [s for s in report["per_source"] if report["per_source"][s]["contaminated"]
                         != TODAY.get(s, -1)])


if __name__ == "__main__":
    main()
