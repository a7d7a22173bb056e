"""The semantic tier with its LLM judge (`--semantic-judge`), the judge replaced by a local stand-in server.

    python -m bench.semantic.judge_probe --part tune|held [--judge-cosine 0.70]
    python -m bench.semantic.judge_probe --real           # cost on real training rows
    ... --numbers                                         # with --semantic-judge-numbers

No judge model runs here: this measures the tier's own gating around the judge, through the stage's code
(`Matcher.match_batch`, `curate/decontam/judge.py`'s HTTP client). With `--part`, the stand-in answers "Yes" exactly
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

from bench.semantic.eval import BENCHMARKS, _decontam_rows
from bench.semantic.real import _rows
from bench.semantic.sets import SHARED
from cotforge.curate.core.benchmarks import load_benchmarks
from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.decontam.index import DecontamIndex, build_index
from cotforge.curate.decontam.match import Matcher
from cotforge.curate.decontam.semantic import make_judge

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


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=("tune", "held"), default="tune")
    ap.add_argument("--real", action="store_true")
    ap.add_argument("--judge-cosine", type=float, default=0.70)
    ap.add_argument("--numbers", action="store_true", help="--semantic-judge-numbers: the judge also sees pairs "
                    "whose numbers disagree")
    args = ap.parse_args()
    if args.real:
        probe_real(args.judge_cosine, args.numbers)
    else:
        probe_sets(args.part, args.judge_cosine, args.numbers)


if __name__ == "__main__":
    main()
