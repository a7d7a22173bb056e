"""Generate stage: tokens/s through datatrove's InferenceRunner vs the same server called directly, same run.

One OpenAI-compatible server process (cotforge.curate.generate.hf_server around a transformers model:
by default the tiny random Qwen2 that tests build, or --model DIR) answers both arms, in the order
runner, direct, direct, runner, runner, direct (after a short warm-up):
- direct: the same requests (the stage's own payloads: same prompts, sampling and seeds) sent with a
  thread pool of --concurrency HTTP clients (urllib), timed from the first request to the last answer;
- runner: `cotforge curate generate` in-process (local executor, 1 task, --concurrency requests in flight),
  timed two ways: the datatrove step (server readiness poll, reading, requests, checkpoint files) and the
  whole stage (ingest, step, joining results, publishing kept/ and removed/).
tokens/s = completion tokens the server reports / seconds. Overhead = 1 - runner tokens/s / direct tokens/s
(medians of three rounds per arm, run in the order R D D R R D after a warm-up, so load drift cancels). Prompts: the first --prompts problems of
../shared/data/sft_sources/deepscaler_math_train.jsonl.gz, --n samples each. Load average is printed.

    /tmp/tools/heavy python -m bench.generate.throughput --prompts 32 --n 4 --max-tokens 48 --concurrency 4
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

from bench.paths import SHARED as DATA


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: str, port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "cotforge.curate.generate.hf_server", "--model", model,
                             "--port", str(port), "--threads", "1"], stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("server did not start")


def direct(url: str, payloads: list[dict], concurrency: int) -> tuple[int, float]:
    """(completion tokens, seconds) for sending `payloads` straight to the server."""
    def call(body: dict) -> int:
        req = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.loads(r.read())["usage"]["completion_tokens"]

    t = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        tokens = sum(pool.map(call, payloads))
    return tokens, time.perf_counter() - t


def through_runner(url: str, prompts: Path, out: Path, args: argparse.Namespace) -> tuple[int, float, float]:
    """(completion tokens, step seconds, stage seconds) of the generate stage on the same server."""
    from cotforge.curate.context import StageContext
    from cotforge.curate.engine import ExecutorConfig
    from cotforge.curate.generate.config import GenerateConfig
    from cotforge.curate.generate.stage import run
    from cotforge.curate.io.inputs import resolve_inputs

    cfg = GenerateConfig(model="bench", endpoint=url, n=args.n, max_tokens=args.max_tokens,
                         max_concurrent=args.concurrency, on_truncated="flag", progress_s=3600)
    ctx = StageContext(out_dir=out, inputs=resolve_inputs([str(prompts)]), executor=ExecutorConfig(workers=1))
    t = time.perf_counter()
    stats = run(cfg, ctx)
    stage_s = time.perf_counter() - t
    g = stats["generate"]
    return g["completion_tokens_this_run"], g["seconds_this_run"], stage_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="transformers model folder (default: build the tiny model)")
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_generate_"))
    model = args.model
    if model is None:
        from cotforge.train.tiny import build_tiny_model

        model = str(build_tiny_model(work / "tiny"))
    rows = []
    with gzip.open(DATA / "sft_sources" / "deepscaler_math_train.jsonl.gz", "rt") as fh:
        for line in fh:
            rows.append(json.loads(line))
            if len(rows) == args.prompts:
                break
    prompts = work / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))

    from cotforge.curate.generate.config import GenerateConfig
    from cotforge.curate.generate.runner import RequestSettings

    cfg = GenerateConfig(model="bench", n=args.n, max_tokens=args.max_tokens)
    sampling = {k: v for k, v in cfg.sampling(0).items() if k != "seed"}
    settings = RequestSettings(model="bench", chat=True, prompt_template="{prompt}",
                               sampling=tuple(sorted(sampling.items())), seed=cfg.seed, retries=0, backoff_s=0)
    payloads = [settings.payload(SimpleNamespace(text=r["problem"], metadata={"system": None}), k)
                for r in rows for k in range(args.n)]

    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    server = start_server(model, port)
    results: dict[str, list] = {"direct": [], "runner": []}
    try:
        direct(url, payloads[:4], args.concurrency)  # warm-up: the server's first generate calls
        for i, arm in enumerate(("runner", "direct", "direct", "runner", "runner", "direct")):  # ABBA: drift cancels
            if arm == "direct":
                tok, s = direct(url, payloads, args.concurrency)
                results["direct"].append((tok, s))
                print(f"{i} direct: {tok} tokens in {s:.1f}s = {tok / s:.1f} tokens/s", flush=True)
            else:
                tok, step_s, stage_s = through_runner(url, prompts, work / f"runner{i}", args)
                results["runner"].append((tok, step_s, stage_s))
                print(f"{i} runner: {tok} tokens, step {step_s:.1f}s = {tok / step_s:.1f} tokens/s, "
                      f"stage {stage_s:.1f}s = {tok / stage_s:.1f} tokens/s", flush=True)
    finally:
        server.terminate()
    best_direct = statistics.median(t / s for t, s in results["direct"])
    best_step = statistics.median(t / s for t, s, _ in results["runner"])
    best_stage = statistics.median(t / s for t, _, s in results["runner"])
    summary = {"model": model if args.model else "tiny random Qwen2 (cotforge.train.tiny, 2 layers, hidden 64)",
               "server": "cotforge.curate.generate.hf_server (1 torch thread, requests answered one at a time)",
               "requests": len(payloads), "max_tokens": args.max_tokens, "concurrency": args.concurrency,
               "direct_tokens_per_s": round(best_direct, 1), "runner_step_tokens_per_s": round(best_step, 1),
               "runner_stage_tokens_per_s": round(best_stage, 1),
               "overhead_step": round(1 - best_step / best_direct, 3),
               "overhead_stage": round(1 - best_stage / best_direct, 3),
               "rounds": results, "loadavg": os.getloadavg()}
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
