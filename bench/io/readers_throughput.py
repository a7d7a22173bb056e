"""Ingest throughput: the same 100k rows from a local S3 endpoint (moto's server, a separate process on
127.0.0.1) against local disk, for gzip JSONL and Parquet inputs, and with the output on S3 too.

    flock /work/coord/cpu.lock python -m bench.io.readers_throughput            # 100k rows
    python -m bench.io.readers_throughput --rows 20000                          # quick

Rows: the real rows of ../shared/data/sft_sources (or $COTFORGE_SHARED_DATA/sft_sources) (cycled with a numbered suffix on the prompt so none repeat)
when present, else generated ones. Each configuration runs the ingest stage in this process (best of --repeat);
the local run is the baseline measured in the same run. Load (`uptime`) is printed with the figures.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.paths import SHARED

SOURCES = SHARED / "sft_sources"


def rows(n: int) -> tuple[list[dict], str]:
    files = sorted(SOURCES.glob("*.jsonl.gz")) if SOURCES.is_dir() else []
    base = []
    for f in files:
        with gzip.open(f, "rt") as fh:
            base += [json.loads(line) for line in fh]
    if not base:
        base = [{"problem": f"What is {i} + {i}?", "response": f"<think>\n{i}+{i}\n</think>\n\n{2 * i}",
                 "ground_truth": str(2 * i)} for i in range(1000)]
    out = []
    for i, r in zip(range(n), itertools.cycle(base)):
        r = dict(r)
        r["id"] = f"b{i}"
        r["problem"] = f"{r.get('problem') or ''} [{i}]"
        out.append(r)
    return out, ("../shared/data/sft_sources (cycled)" if files else "generated")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
                      AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}")
    try:
        import fsspec
        import pyarrow as pa
        import pyarrow.parquet as pq

        from cotforge.curate.io.readers import InputSpec
        from cotforge.pipelines.stages import run_stage

        for _ in range(100):
            try:
                s3 = fsspec.filesystem("s3", skip_instance_cache=True)
                s3.mkdir("bench")
                break
            except Exception:
                time.sleep(0.1)
        data, origin = rows(args.rows)
        tmp = Path(tempfile.mkdtemp(prefix="cf-bench-"))
        per = -(-len(data) // args.shards)
        for fmt in ("jsonl.gz", "parquet"):
            (tmp / fmt).mkdir()
            for k in range(args.shards):
                chunk = data[k * per:(k + 1) * per]
                p = tmp / fmt / f"part-{k:03d}.{fmt}"
                if fmt == "parquet":
                    pq.write_table(pa.Table.from_pylist(chunk), p)
                else:
                    p.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in chunk).encode(), 6))
                s3.put_file(str(p), f"bench/{fmt}/{p.name}")
        mb = {f: sum(x.stat().st_size for x in (tmp / f).iterdir()) / 2**20 for f in ("jsonl.gz", "parquet")}
        print(f"{len(data)} rows from {origin}; {args.shards} shards: jsonl.gz {mb['jsonl.gz']:.1f} MB, "
              f"parquet {mb['parquet']:.1f} MB; load {os.getloadavg()[0]:.2f}")
        results = {}
        for fmt in ("jsonl.gz", "parquet"):
            for name, src, out in (("local -> local", str(tmp / fmt), str(tmp / "out")),
                                   ("s3 -> local", f"s3://bench/{fmt}", str(tmp / "out")),
                                   ("s3 -> s3", f"s3://bench/{fmt}", f"s3://bench/out-{fmt}")):
                best = None
                for _ in range(args.repeat):
                    t = time.perf_counter()
                    stats = run_stage("ingest", [InputSpec(src, "bench")], out)
                    dt = time.perf_counter() - t
                    assert stats["kept"] == len(data), stats
                    best = dt if best is None else min(best, dt)
                results[(fmt, name)] = best
                base = results[(fmt, "local -> local")]
                print(f"  {fmt:<9} {name:<15} {best:6.2f} s  {len(data) / best:8.0f} rows/s  "
                      f"{base / best:5.2f}x local")
        print(f"load after: {os.getloadavg()[0]:.2f}")
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
