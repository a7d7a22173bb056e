"""Profile + select over ../shared/data/sft_sources and print the source ranking table.

    python -m bench.select.profile_sources                 # all sources, characters as the length unit
    python -m bench.select.profile_sources --quick         # the three smallest-but-informative files
    python -m bench.select.profile_sources --decontam      # run curate.decontam first: contamination penalties
    python -m bench.select.profile_sources --stats DIR     # penalties from an earlier decontam/dedup folder
    python -m bench.select.profile_sources --tokenizer DIR # lengths in tokens of a local tokenizer

Figures: the ranking table (score and its components per source), and the wall time of profile and of
select as a ratio over a baseline measured in the same run: just reading the rows (iter_input_rows).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import polars as pl  # noqa: E402

from bench.paths import SHARED  # noqa: E402
from cotforge.curate.io.inputs import iter_input_rows, resolve_inputs  # noqa: E402
from cotforge.curate.select.profile import ProfileConfig, markdown_table
from cotforge.curate.select.sources import SCORE_COLUMNS, SelectConfig

DATA = SHARED
QUICK = ("skyt1_longcot_eval_traces.jsonl.gz", "gsm8k_gpt3_model_solutions.jsonl.gz", "marco_o1_cot_demo.jsonl.gz")
BENCHMARKS = ("aime2024", "aime2025", "amc2023", "math500", "minerva_math", "gsm8k", "olympiadbench")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DATA), help="shared data folder (has sft_sources/)")
    ap.add_argument("--quick", action="store_true", help="three files only")
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--tokenizer", default=None)
    ap.add_argument("--decontam", action="store_true", help="run the decontaminate stage first (penalties)")
    ap.add_argument("--stats", action="append", default=[], help="reuse an earlier stage folder's stats.json")
    ap.add_argument("--out", default=None, help="keep outputs here (default: a temporary folder)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    src = Path(args.data) / "sft_sources"
    files = [str(src / f) for f in QUICK] if args.quick else sorted(str(p) for p in src.glob("*.jsonl.gz"))
    if not files:
        sys.exit(f"no sft_sources under {args.data}")
    out = Path(args.out or tempfile.mkdtemp(prefix="profile_sources_"))
    specs = resolve_inputs(files)

    t0 = time.perf_counter()
    n = sum(1 for _ in iter_input_rows(specs))
    t_read = time.perf_counter() - t0

    stats_dirs: list[str] = list(args.stats)
    if args.decontam:
        from cotforge.curate.decontam.config import DecontamConfig
        from cotforge.pipelines.stages import run_stage

        t0 = time.perf_counter()
        dc = DecontamConfig(benchmarks=list(BENCHMARKS), benchmarks_dir=str(Path(args.data) / "benchmarks"))
        run_stage("decontaminate", specs, out / "decontam", dc)
        print(f"decontaminate: {time.perf_counter() - t0:.1f}s")
        stats_dirs.append(str(out / "decontam"))

    t0 = time.perf_counter()
    run_stage("profile", specs, out / "profile", ProfileConfig(tokenizer=args.tokenizer, stats_dirs=stats_dirs,
                                                      passthrough=False))
    t_prof = time.perf_counter() - t0
    t0 = time.perf_counter()
    stats = run_stage("select", specs, out / "select", SelectConfig(top_k=args.top_k, tokenizer=args.tokenizer,
                                                           stats_dirs=stats_dirs, policy=None))
    t_sel = time.perf_counter() - t0

    table = pl.read_parquet(out / "select" / "selection.parquet")
    unit = stats["length_unit"]
    print(f"\n# Source ranking over {len(files)} files, {n} rows (lengths in {unit}, top-k {args.top_k})\n")
    print(markdown_table(table, [c for c in SCORE_COLUMNS if c != "mix_weight"]))
    print(f"read rows (baseline): {t_read:.2f}s | profile: {t_prof:.2f}s ({t_prof / t_read:.2f}x) | "
          f"select: {t_sel:.2f}s ({t_sel / t_read:.2f}x) | kept {stats['kept']} of {stats['rows_in']}")
    print(f"outputs: {out}")


if __name__ == "__main__":
    main()
