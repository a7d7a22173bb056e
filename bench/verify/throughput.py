"""Throughput of the verifiers: math verdicts/s and sandboxed executions/s, with same-run baselines.

Math: `verify_math_batch` (killable pool, lenient and strict mode) vs math-verify called in-process on one
core the way the field calls it (`verify(parse(gold), parse(text after </think>))`, gold wrapped as
``\boxed{}`` when bare), on the same pairs: the conformance suites (tests/data/math_conformance, 303
cases) and ../shared/data (MATH-style model outputs + GSM8K), synthetic pairs when the data is absent.
Code: `run_tests_batch` (sandboxed: a jail for the program and a test process per run, `--code-workers` at a
time, default `default_workers()`) vs, on the same programs in the same run: the previous harness (the
`curate/` tree of `--baseline-ref`, default the tree before the bubblewrap sandbox, loaded in a child process
from `git archive`), at the same concurrency; and bare `subprocess.run([python, -c, program])` (no isolation,
no tests run), sequentially and at the same concurrency.

    python -m bench.verify.throughput [--math N] [--code N] [--workers W] [--code-workers W] [--data DIR]
                           [--baseline-ref REF|none]
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
from collections import Counter
from pathlib import Path

from bench.paths import REPO, SHARED
from cotforge.curate.verify.code import default_workers, extract_program, run_tests_batch, tests_from_row
from cotforge.curate.verify.conformance import SUITES, embed, load_suite
from cotforge.curate.verify.math import split_after_reasoning, verify_math_batch

DATA = SHARED / "sft_sources"
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


def suite_pairs() -> list[tuple[str, str]]:
    """The conformance suites' cases as (response, gold), embedded the way the suite tests run them."""
    pairs = []
    for suite in SUITES:
        _, cases = load_suite(REPO / "tests" / "data" / "math_conformance" / f"{suite}.jsonl")
        pairs += [(embed(c, suite), c.gold) for c in cases]
    return pairs


def math_verify_direct(response: str, gold: str) -> bool:
    """math-verify as the field calls it: parse both (gold boxed when bare), verify, default settings."""
    from math_verify import parse, verify

    text = response.rsplit("</think>", 1)[-1]
    g = gold if ("\\boxed" in gold or "$" in gold) else "\\boxed{" + gold + "}"
    return bool(verify(parse(g, parsing_timeout=None), parse(text, parsing_timeout=None), timeout_seconds=None))


def bench_math_on(name: str, pairs: list[tuple[str, str]], workers: int, base_n: int) -> None:
    """Verdicts/s of the pool in both modes vs in-process math-verify on one core (first base_n pairs)."""
    verify_math_batch(pairs[:8], workers=workers)  # start the pool
    rates, verdicts = {}, {}
    # strict: the box rule after the reasoning block; these sources mark it in several ways or not at all, so
    # the text after it (split_after_reasoning) is passed with think_end=None (as bench/verify/agreement.py)
    strict_pairs = [(split_after_reasoning(r) or "", a) for r, a in pairs]
    for mode, items, think_end in (("lenient", pairs, "</think>"), ("strict", strict_pairs, None)):
        t0 = time.perf_counter()
        verdicts[mode] = verify_math_batch(items, think_end=think_end, workers=workers, timeout_s=10.0, mode=mode)
        rates[mode] = len(pairs) / (time.perf_counter() - t0)
    base = pairs[:base_n]
    t0 = time.perf_counter()
    direct = [math_verify_direct(r, a) for r, a in base]
    base_rate = len(base) / (time.perf_counter() - t0)
    same = sum(bool(v.correct) == d for v, d in zip(verdicts["lenient"], direct, strict=False))
    print(f"math {name}: {len(pairs)} pairs | pool({workers}) lenient {rates['lenient']:7.1f}/s, strict "
          f"{rates['strict']:7.1f}/s | math-verify in-process 1 core {base_rate:7.1f}/s ({len(base)} pairs) | "
          f"ratio {rates['lenient'] / base_rate:.2f}x / {rates['strict'] / base_rate:.2f}x | "
          f"lenient = math-verify on {same}/{len(base)}", flush=True)
    for mode in ("lenient", "strict"):
        print(f"  {mode} statuses: {dict(Counter(v.status for v in verdicts[mode]))}")


def bench_math(n: int, workers: int) -> None:
    bench_math_on("conformance suites", suite_pairs(), workers, 303)
    bench_math_on("shared data" if DATA.exists() else "synthetic", math_pairs(n), workers, min(n, 400))


def previous_harness(items: list, workers: int, ref: str) -> dict | None:
    """Executions/s of the harness in `ref`'s curate/ tree on `items` (None when git cannot provide it)."""
    if ref == "none":
        return None
    if ref == "auto":  # the tree just before the bubblewrap sandbox came in (the commit adding jail.py)
        res = subprocess.run(["git", "-C", str(REPO), "log", "--diff-filter=A", "--format=%H", "--",
                              "curate/verify/jail.py"], capture_output=True, text=True, check=False)
        if res.returncode or not res.stdout.strip():
            return None
        ref = res.stdout.split()[-1] + "^"
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
                    "(auto: the parent of the commit that added curate/verify/jail.py; none: skip).")
    ap.add_argument("--data", type=Path, default=None, help="The shared data folder (default ../shared/data).")
    args = ap.parse_args()
    if args.data is not None:
        global DATA
        DATA = args.data / "sft_sources"
    logging.basicConfig(level=logging.WARNING)
    print(f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
    if args.math:
        bench_math(args.math, args.workers)
    if args.code:
        bench_code(args.code, args.code_workers or default_workers(), args.baseline_ref)


if __name__ == "__main__":
    main()
