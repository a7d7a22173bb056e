"""The semantic tier with its LLM judge (`--semantic-judge`), the judge replaced by a local stand-in server.

    python -m bench.semantic.judge_probe --part tune|held [--judge-cosine 0.70]
    python -m bench.semantic.judge_probe --real           # cost on real training rows
    ... --numbers                                         # with --semantic-judge-numbers
    python -m bench.semantic.judge_probe --dedup --part tune|held [--judge-cosine 0.80]
    python -m bench.semantic.judge_probe --dedup --real --judge-cosine 0.80   # dedup's asks on the real sources

No judge model runs here: this measures the tier's own gating around the judge, through the stage's code
(`Matcher.match_batch`, `curate/text/judge.py`'s HTTP client). With `--part`, the stand-in answers "Yes" exactly
when the row is a labelled rephrasing of that item (an oracle judge): the printed recall is the ceiling of the
judge tier at this cosine bound (a real judge can only lose from it), and the look-alikes it flags are those the
gating lets through with a right answer (none, by construction). With `--real`, the stand-in answers "No" to
every pair of the `bench.semantic.real` rows (GSM8K train + MATH train against gsm8k_test + math500) and the
printout is how many pairs a real judge would be asked per 1,000 training rows.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import tempfile
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench.semantic.eval import BENCHMARKS, _decontam_rows
from bench.semantic.real import _rows
from bench.semantic.sets import SHARED
from cotforge.curate.core.benchmarks import load_benchmarks
from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.decontam.index import DecontamIndex, build_index
from cotforge.curate.decontam.match import Matcher
from cotforge.curate.text.judge import make_judge

_PAIR = re.compile(r"Problem A:\n(.*)\n\nProblem B:\n(.*)\n\nIs Problem B", re.DOTALL)


def serve(yes: set[tuple[str, str]] | None) -> tuple[ThreadingHTTPServer, list[tuple[str, str]]]:
    """A local OpenAI-compatible stand-in: "Yes" for the (item, row) pairs in `yes` (None: never)."""
    asked: list[tuple[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def _send(self, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            self._send({"data": [{"id": "oracle"}]})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            item, row = _PAIR.search(body["messages"][0]["content"]).groups()
            asked.append((item, row))
            self._send({"choices": [{"message": {"content": "Yes" if yes and (item, row) in yes else "No"}}]})

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, asked


def _matcher(names, cfg: DecontamConfig) -> Matcher:
    d = tempfile.mkdtemp(prefix="judge_probe_")
    build_index(load_benchmarks(names, SHARED / "benchmarks"), cfg, d)
    return Matcher(DecontamIndex(d))


def probe_sets(part: str, judge_cosine: float, numbers: bool = False) -> None:
    rows = _decontam_rows("written", part)
    base = DecontamConfig(benchmarks=list(BENCHMARKS), semantic=True)
    matcher = _matcher(BENCHMARKS, base)
    entry = {(e.benchmark.split("_")[0], e.item_id): e.text for e in matcher.index.entries if e.part == "problem"}
    yes = {(entry[(r.benchmark.split("_")[0], r.item_id)], r.prompt) for r in rows
           if r.kind in ("light", "moderate", "heavy") and (r.benchmark.split("_")[0], r.item_id) in entry}
    server, asked = serve(yes)
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    cfg = DecontamConfig(benchmarks=list(BENCHMARKS), semantic=True, semantic_judge=url, semantic_judge_model="oracle",
                         semantic_judge_cosine=judge_cosine, semantic_judge_numbers=numbers)
    make_judge(cfg).cache_path.unlink(missing_ok=True)  # no answers of an earlier probe
    found = matcher.match_batch([r.prompt for r in rows], None, cfg)
    server.shutdown()
    by: dict[str, Counter] = {}
    for r, ms in zip(rows, found, strict=True):
        c = by.setdefault(r.kind, Counter())
        c["n"] += 1
        c["flagged"] += bool(ms)
        c["judge"] += any(m.detail and "judge" in m.detail for m in ms)
    print(f"written {part} part, judge from cosine {judge_cosine:.2f} (oracle stand-in); {len(asked)} pairs asked "
          f"for {len(rows)} rows")
    for kind, c in by.items():
        print(f"  {kind:17s} {c['flagged']:4d}/{c['n']:4d} = {c['flagged'] / c['n']:.3f}  by the judge {c['judge']}")
    pos = [by[k] for k in ("light", "moderate", "heavy") if k in by]
    print(f"  rephrasings recall {sum(c['flagged'] for c in pos) / sum(c['n'] for c in pos):.3f}")


def probe_real(judge_cosine: float, numbers: bool = False) -> None:
    names = ("gsm8k_test", "math500")
    server, asked = serve(None)
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    cfg = DecontamConfig(benchmarks=list(names), semantic=True, semantic_judge=url, semantic_judge_model="oracle",
                         semantic_judge_cosine=judge_cosine, semantic_judge_numbers=numbers)
    matcher = _matcher(names, cfg)
    rows = _rows(None)
    t0 = time.time()
    make_judge(cfg).cache_path.unlink(missing_ok=True)
    found = matcher.match_batch([t for _, t in rows], None, cfg)
    server.shutdown()
    print(f"real rows: {len(rows)} (GSM8K train + MATH train) vs gsm8k_test + math500, judge from cosine "
          f"{judge_cosine:.2f}: {len(asked)} pairs asked ({1000 * len(asked) / len(rows):.1f} per 1,000 rows), "
          f"{sum(map(bool, found))} rows flagged by any tier (judge says No to all), {time.time() - t0:.0f}s")


def probe_dedup(part: str, judge_cosine: float) -> None:
    """Dedup's judge gating on the written dedup pairs: the graded check first, every other candidate (top 5 by
    cosine >= judge_cosine) to the oracle stand-in."""
    from bench.semantic.real import encode_cached
    from bench.semantic.written import build_written_dedup
    from cotforge.curate.dedup.config import DedupConfig
    from cotforge.curate.dedup.semantic import RECHECK, check_pairs, neighbour_pairs, thresholds
    from cotforge.curate.text.embed import embedder_for

    pairs = [p for p in build_written_dedup(SHARED) if p.part == part]
    texts = list(dict.fromkeys(t for p in pairs for t in (p.a, p.b)))
    at = {t: i for i, t in enumerate(texts)}
    server, asked = serve({(p.a, p.b) for p in pairs if p.duplicate} | {(p.b, p.a) for p in pairs if p.duplicate})
    cfg = DedupConfig(semantic=True, semantic_judge=f"http://127.0.0.1:{server.server_address[1]}/v1",
                      semantic_judge_model="oracle", semantic_judge_cosine=judge_cosine)
    make_judge(cfg).cache_path.unlink(missing_ok=True)  # before the judge that asks loads it
    judge = make_judge(cfg)
    emb = embedder_for(cfg)
    cands = neighbour_pairs(encode_cached(emb, texts, f"dedup-{part}"), cfg.semantic_top_k, judge_cosine)
    merged, stats = check_pairs(cands, texts, emb, thresholds(cfg), cfg, RECHECK, judge=judge)
    server.shutdown()
    got = {(i, j) for i, j, _ in merged} | {(at[p.a], at[p.b]) for p in pairs if p.a == p.b}
    label = {tuple(sorted((at[p.a], at[p.b]))): p for p in pairs}
    by: dict[str, Counter] = {}
    for key, p in label.items():
        by.setdefault(p.kind, Counter())["n"] += 1
        by[p.kind]["merged"] += key in got
    right = sum(1 for k in got if k in label and label[k].duplicate)
    print(f"dedup, written {part} part, judge from cosine {judge_cosine:.2f} (oracle stand-in): {len(asked)} pairs "
          f"asked for {len(texts)} texts; {stats}")
    for kind, c in by.items():
        print(f"  {kind:17s} merged {c['merged']:4d}/{c['n']:4d}")
    pos = [c for k, c in by.items() if k in ("light", "moderate", "heavy")]
    print(f"  reworded recall {sum(c['merged'] for c in pos) / sum(c['n'] for c in pos):.3f}, precision "
          f"{right / max(len(got), 1):.3f} ({len(got) - right} wrong: the graded check's merges)")


def probe_dedup_real(judge_cosine: float) -> None:
    """How many pairs dedup's judge is asked on the 10 real sources (the stand-in says "No" to all)."""
    import subprocess
    import sys

    server, asked = serve(None)
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    make_judge(DecontamConfig(semantic=True, semantic_judge=url, semantic_judge_model="oracle")
               ).cache_path.unlink(missing_ok=True)
    files = sorted(str(p) for p in (SHARED / "sft_sources").glob("*.jsonl.gz"))
    with tempfile.TemporaryDirectory() as out:
        t0 = time.time()
        subprocess.run([str(Path(sys.executable).parent / "cotforge"), "curate", "dedup", *files, "-o", out,
                        "--semantic", "--semantic-judge", url, "--semantic-judge-model", "oracle",
                        "--semantic-judge-cosine", str(judge_cosine)], check=True, capture_output=True)
        stats = json.loads((Path(out) / "stats.json").read_text())["dedup"]
    server.shutdown()
    print(f"dedup, 10 real sources ({stats.get('rows_in', '?')} rows), judge from cosine {judge_cosine:.2f}: "
          f"{len(asked)} pairs asked, {time.time() - t0:.0f}s; "
          f"{ {k: v for k, v in stats.items() if k.startswith('semantic_')} }")


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=("tune", "held"), default="tune")
    ap.add_argument("--real", action="store_true")
    ap.add_argument("--dedup", action="store_true", help="dedup's judge gating on the written dedup pairs")
    ap.add_argument("--judge-cosine", type=float, default=0.70)
    ap.add_argument("--numbers", action="store_true", help="--semantic-judge-numbers: the judge also sees pairs "
                    "whose numbers disagree")
    args = ap.parse_args()
    if args.dedup and args.real:
        probe_dedup_real(args.judge_cosine)
    elif args.dedup:
        probe_dedup(args.part, args.judge_cosine)
    elif args.real:
        probe_real(args.judge_cosine, args.numbers)
    else:
        probe_sets(args.part, args.judge_cosine, args.numbers)


if __name__ == "__main__":
    main()
