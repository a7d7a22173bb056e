"""Throughput of the verifiers: math verdicts/s and sandboxed executions/s, with same-run baselines.

Math: `verify_math_batch` (killable pool) vs the same pairs through in-process `verify_math` on one core.
Code: `run_tests_batch` (sandboxed: a jail for the program and a test process per run, `--code-workers` at a
time, default `default_workers()`) vs, on the same programs in the same run: the previous harness (the
`curate/` tree of `--baseline-ref`, default the commit this branch left main at, loaded in a child process
from `git archive`), at the same concurrency; and bare `subprocess.run([python, -c, program])` (no isolation,
no tests run), sequentially and at the same concurrency.
Inputs come from ../shared/data when present (MATH-style model outputs + GSM8K, DeepCoder references),
else synthetic pairs.

    python bench/verify.py [--math N] [--code N] [--workers W] [--code-workers W] [--baseline-ref REF|none]
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cotforge.curate.verify import (
    default_workers,
    extract_program,
    run_tests_batch,
    tests_from_row,
    verify_math,
    verify_math_batch,
)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "sft_sources"
REPO = Path(__file__).resolve().parents[1]
# Runs in a child process: the package `cotforge` pointed at an extracted old tree, its run_tests_batch timed.
_OLD_HARNESS = """
import json, sys, time, types
pkg = types.ModuleType("cotforge"); pkg.__path__ = [sys.argv[1]]; sys.modules["cotforge"] = pkg
from cotforge.curate.verify.code import run_tests_batch
items = [tuple(x) for x in json.load(open(sys.argv[2]))]
workers = int(sys.argv[3])
run_tests_batch(items[:workers], workers=workers)
t0 = time.perf_counter()
verdicts = run_tests_batch(items, workers=workers)
dt = time.perf_counter() - t0
print(json.dumps({"rate": len(items) / dt, "passed": sum(v.status == "pass" for v in verdicts)}))
"""


def _jsonl(name: str, n: int) -> list[dict]:
    rows = []
    with gzip.open(DATA / f"{name}.jsonl.gz", "rt") as f:
        for line in f:
            rows.append(json.loads(line))
            if len(rows) >= n:
                break
    return rows


def math_pairs(n: int) -> list[tuple[str, str]]:
    """Half MATH-style boxed model outputs, half GSM8K solutions (synthetic when data is absent)."""
    if DATA.exists():
        rows = _jsonl("qwen25_math_rm_example", n // 2) + _jsonl("gsm8k_train_human", n - n // 2)
        return [(r["response"], r["ground_truth"]) for r in rows]
    return [(f"so the result is \\boxed{{\\frac{{{i}}}{{2}}}}", f"{i / 2}") for i in range(n)]


def code_items(n: int) -> list[tuple[str, object]]:
    """DeepCoder LeetCode reference solutions with their tests (synthetic stdio programs without data)."""
    if DATA.exists():
        rows = _jsonl("deepcoder_leetcode_train", n)
        return [(extract_program(r["response"], None), tests_from_row(r)) for r in rows]
    return [(f"print(int(input()) + {i})", {"kind": "stdio", "cases": [{"input": "1\n", "output": str(i + 1)}]})
            for i in range(n)]


def bench_math(n: int, workers: int) -> None:
    pairs = math_pairs(n)
    verify_math_batch(pairs[:8], workers=workers)  # start the pool
    t0 = time.perf_counter()
    batch = verify_math_batch(pairs, workers=workers)
    dt_pool = time.perf_counter() - t0
    base_n = min(len(pairs), 200)
    t0 = time.perf_counter()
    single = [verify_math(r, a) for r, a in pairs[:base_n]]
    dt_single = time.perf_counter() - t0
    same = sum(a.correct == b.correct for a, b in zip(batch[:base_n], single, strict=True))
    pool_rate, base_rate = len(pairs) / dt_pool, base_n / dt_single
    print(f"math: {len(pairs)} pairs, pool({workers}) {pool_rate:8.1f} verdicts/s | in-process 1 core "
          f"{base_rate:8.1f} verdicts/s | ratio {pool_rate / base_rate:.2f}x | agree {same}/{base_n}")


def previous_harness(items: list, workers: int, ref: str) -> dict | None:
    """Executions/s of the harness in `ref`'s curate/ tree on `items` (None when git cannot provide it)."""
    if ref == "none":
        return None
    if ref == "auto":
        res = subprocess.run(["git", "-C", str(REPO), "merge-base", "HEAD", "main"], capture_output=True,
                             text=True, check=False)
        if res.returncode:
            return None
        ref = res.stdout.strip()
    with tempfile.TemporaryDirectory(prefix="cf-bench-") as tmp:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "curate"], capture_output=True, check=False)
        if archive.returncode:
            return None
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        (Path(tmp) / "items.json").write_text(json.dumps(items))
        res = subprocess.run([sys.executable, "-c", _OLD_HARNESS, tmp, str(Path(tmp) / "items.json"), str(workers)],
                             capture_output=True, text=True, check=False, cwd=tmp)
        if res.returncode:
            print(f"previous harness ({ref[:10]}) failed: {res.stderr[-500:]}")
            return None
        return {"ref": ref[:10], **json.loads(res.stdout.strip().splitlines()[-1])}


def bench_code(n: int, workers: int, baseline_ref: str = "auto") -> None:
    items = code_items(n)
    old = previous_harness(items, workers, baseline_ref)
    run_tests_batch(items[:workers], workers=workers)  # start the test server
    t0 = time.perf_counter()
    verdicts = run_tests_batch(items, workers=workers)
    dt = time.perf_counter() - t0
    passed = sum(v.status == "pass" for v in verdicts)
    base_n = min(len(items), 60)

    def bare(program: str) -> None:
        subprocess.run([sys.executable, "-I", "-S", "-c", program], capture_output=True, check=False)

    t0 = time.perf_counter()
    for program, _ in items[:base_n]:
        bare(program)
    dt_base = time.perf_counter() - t0
    from concurrent.futures import ThreadPoolExecutor

    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        list(ex.map(bare, [p for p, _ in items[:base_n]]))
    dt_conc = time.perf_counter() - t0
    rate, base_rate, conc_rate = len(items) / dt, base_n / dt_base, base_n / dt_conc
    print(f"code: {len(items)} programs, sandboxed({workers} concurrent) {rate:7.1f} executions/s "
          f"({passed} pass) | bare subprocess, no isolation: sequential {base_rate:7.1f}/s, {workers} concurrent "
          f"{conc_rate:7.1f}/s | ratio {rate / base_rate:.2f}x / {rate / conc_rate:.2f}x | "
          f"load {os.getloadavg()[0]:.1f}")
    if old is not None:
        print(f"code: previous harness ({old['ref']}, {workers} concurrent) {old['rate']:7.1f} executions/s "
              f"({old['passed']} pass) | this harness / previous {rate / old['rate']:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--math", type=int, default=1000, help="Math pairs (0 to skip).")
    ap.add_argument("--code", type=int, default=300, help="Programs (0 to skip).")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="Math processes.")
    ap.add_argument("--code-workers", type=int, default=None, help="Concurrent sandboxes (default_workers()).")
    ap.add_argument("--baseline-ref", default="auto", help="Git ref whose curate/ tree is the previous harness "
                    "(auto: merge-base of HEAD and main; none: skip).")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print(f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
    if args.math:
        bench_math(args.math, args.workers)
    if args.code:
        bench_code(args.code, args.code_workers or default_workers(), args.baseline_ref)


if __name__ == "__main__":
    main()
