"""Peak RSS per process of decontaminate, dedup and verify on long-CoT rows (~60k characters each), with the
memory budget (bytes cut work: tasks, batches, row groups) against rows-only cutting in the same run.

Rows are built from real long-CoT traces (`../shared/data/sft_sources/skyt1_longcot_eval_traces`): each row
joins the reasoning of consecutive real traces into one `<think>` block of about `--chars` characters, then
the last trace's final answer; its prompt is that trace's problem plus a variant number (unique prompts, so
dedup keeps them apart with its number guard; decontamination removes most: the traces are on benchmark
problems). `--part tune` and `--part report` use disjoint halves of the traces (tune on one, report on the
other; the report set's SHA-256 is printed before anything runs).

Each stage runs in a child process; a sampler reads VmHWM (the kernel's peak RSS) of that process and of
every process below it (datatrove workers, verification pool) every 50 ms. "main" is the stage process
(ingest, collecting outputs, verification batches), "worker" the largest of its descendants.

    flock /work/coord/cpu.lock python -m bench.io.longcot_rss --rows 20000 --part report
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.paths import SHARED

TRACES = SHARED / "sft_sources" / "skyt1_longcot_eval_traces.jsonl.gz"
BENCH_DIR = SHARED / "benchmarks"
ROWS_ONLY_MB = 1 << 20  # a budget so large that only the row counts cut work: the rows-only baseline

STAGE_CODE = r"""
import json, sys, time
from cotforge.curate.engine import ExecutorConfig
from cotforge.curate.io.readers import InputSpec
stage, src, out, budget, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
spec = [InputSpec(src, "longcot", domain="math")]
ex = ExecutorConfig(workers=workers, memory_budget_mb=budget)
t = time.time()
if stage == "decontaminate":
    from cotforge.curate.decontam.stage import DecontamConfig
    from cotforge.pipelines.stages import run_stage
    cfg = DecontamConfig(benchmarks=["aime2024", "math500", "amc2023", "minerva_math"], benchmarks_dir=sys.argv[6])
    stats = run_stage("decontaminate", spec, out, cfg, ex)
elif stage == "dedup":
    from cotforge.pipelines.stages import run_stage
    stats = run_stage("dedup", spec, out, executor=ex)
else:
    from cotforge.curate.verify.stage import VerifyConfig
    from cotforge.pipelines.stages import run_stage
    stats = run_stage("verify", spec, out, VerifyConfig(), ex)
print(json.dumps({"wall_s": round(time.time() - t, 1), "rows_in": stats["rows_in"], "kept": stats["kept"],
                  "removed": stats["removed"], "tasks": stats.get("dedup", {}).get("tasks")}))
"""


def build_rows(path: Path, n: int, chars: int, part: str) -> str:
    """Write `n` long-CoT rows to `path` (JSONL); returns the file's SHA-256."""
    traces = [json.loads(line) for line in gzip.open(TRACES, "rt")]
    traces = [t for t in traces if t.get("response") and t.get("problem")]
    half = len(traces) // 2
    pool = traces[:half] if part == "tune" else traces[half:]
    h = hashlib.sha256()
    with open(path, "w") as f:
        k = 0
        for i in range(n):
            body, last = [], None
            while sum(map(len, body)) < chars:
                last = pool[k % len(pool)]
                k += 1
                body.append(last.get("reasoning") or last["response"])
            think = "\n\n".join(body)[:chars]
            answer = last.get("final_answer") or last.get("ground_truth") or ""
            row = {"id": f"lc-{part}-{i}", "problem": f"{last['problem']}\n(Variant {i}.)",
                   "response": f"<think>\n{think}\n</think>\nThe answer is $\\boxed{{{answer}}}$.",
                   "answer": str(answer), "domain": "math"}
            line = json.dumps(row) + "\n"
            h.update(line.encode())
            f.write(line)
    return h.hexdigest()


def _vmhwm_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for t in Path(f"/proc/{p}/task").glob("*") if Path(f"/proc/{p}/task").exists() else []:
            try:
                kids = [int(c) for c in (t / "children").read_text().split()]
            except OSError:
                kids = []
            out += kids
            todo += kids
    return out


def run_stage(stage: str, src: Path, out: Path, budget: int, workers: int) -> dict:
    """Run one stage in a child process; peak RSS (MiB) of it and of its largest descendant."""
    cmd = [sys.executable, "-c", STAGE_CODE, stage, str(src), str(out), str(budget), str(workers), str(BENCH_DIR)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peaks: dict[int, int] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for p in [proc.pid, *_descendants(proc.pid)]:
                peaks[p] = max(peaks.get(p, 0), _vmhwm_kb(p))
            time.sleep(0.05)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    stdout, stderr = proc.communicate()
    done.set()
    th.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{stage} failed:\n{stderr[-3000:]}")
    res = json.loads(stdout.strip().splitlines()[-1])
    res["main_mb"] = round(peaks.pop(proc.pid, 0) / 1024)
    res["worker_mb"] = round(max(peaks.values(), default=0) / 1024)
    res["processes"] = len(peaks)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--chars", type=int, default=60_000)
    ap.add_argument("--part", choices=("tune", "report"), default="report")
    ap.add_argument("--stages", default="decontaminate,dedup,verify")
    ap.add_argument("--budget-mb", type=int, default=1024)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-baseline", action="store_true", help="skip the rows-only baseline runs")
    ap.add_argument("--dir", default=None, help="work folder (default: a temporary folder)")
    args = ap.parse_args()
    if not TRACES.exists():
        sys.exit(f"needs {TRACES} (../shared/data)")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        src = Path(tmp) / f"longcot_{args.part}.jsonl"
        t = time.time()
        digest = build_rows(src, args.rows, args.chars, args.part)
        print(f"input: {args.rows} rows x ~{args.chars} chars ({src.stat().st_size / 2**30:.2f} GiB JSONL, "
              f"part={args.part}, sha256 {digest[:16]}) built in {time.time() - t:.0f}s; load {os.getloadavg()}")
        print("| stage | cutting | main peak RSS | worst worker peak RSS | wall | rows in / kept / removed | tasks |")
        print("|---|---|---|---|---|---|---|")
        for stage in args.stages.split(","):
            runs = [(f"bytes (budget {args.budget_mb} MiB)", args.budget_mb)]
            if not args.no_baseline:
                runs.append(("rows only (baseline)", ROWS_ONLY_MB))
            for label, budget in runs:
                out = Path(tmp) / f"out_{stage}_{budget}"
                r = run_stage(stage, src, out, budget, args.workers)
                print(f"| {stage} | {label} | {r['main_mb']} MiB | {r['worker_mb']} MiB ({r['processes']} procs) | "
                      f"{r['wall_s']} s | {r['rows_in']} / {r['kept']} / {r['removed']} | {r.get('tasks') or '-'} |",
                      flush=True)
                subprocess.run(["rm", "-rf", str(out)])
        print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
