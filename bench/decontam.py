"""Decontamination: quality and speed against an open-r1-style baseline, measured in the same run.

Quality: recall and false-positive rate on the labelled set of curate/labelled_contamination.py
(built from ../shared/data), per variant kind, for cotforge's matcher and for the baseline (a Python
set of lower-cased word 8-grams of the benchmark problems; a text is flagged on any shared 8-gram,
as in open-r1's scripts/decontaminate.py).
Speed: rows/s of both on the same SFT rows (prompt + response, and prompt only).

    python bench/decontam.py            # full labelled set + all sft_sources rows
    python bench/decontam.py --quick    # smaller labelled set, 3000 speed rows
    python bench/decontam.py --sweep    # grid over n / thresholds (how the defaults were chosen)
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from labelled_contamination import build_labelled_set  # noqa: E402

from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.decontam.match import DecontamIndex  # noqa: E402
from cotforge.curate.io.inputs import iter_input_rows  # noqa: E402
from cotforge.curate.io.readers import InputSpec  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


class OpenR1Baseline:
    """open-r1 decontaminate.py: lower-case, whitespace split, any shared word 8-gram flags the text."""

    def __init__(self, problems: list[str], n: int = 8):
        self.n = n
        self.grams: set[str] = set()
        for p in problems:
            w = p.lower().split()
            self.grams.update(" ".join(w[i:i + n]) for i in range(len(w) - n + 1))

    def flag(self, text: str | None) -> bool:
        if not text:
            return False
        w = text.lower().split()
        n = self.n
        return any(" ".join(w[i:i + n]) in self.grams for i in range(len(w) - n + 1))


def predict(index: DecontamIndex, cfg: DecontamConfig, examples, batch: int = 512) -> list[bool]:
    """cotforge's verdict per labelled example (on the example's own side)."""
    out: list[bool] = []
    for s in range(0, len(examples), batch):
        ex = examples[s:s + batch]
        prompts = [e.text if e.side == "prompt" else "" for e in ex]
        responses = [e.text if e.side == "response" else None for e in ex]
        for e, ms in zip(ex, index.match_batch(prompts, responses, cfg), strict=True):
            out.append(any(m.side == e.side for m in ms))
    return out


def score(examples, preds) -> dict:
    """Recall, false-positive rate, and per-kind rates."""
    tp = sum(1 for e, p in zip(examples, preds, strict=True) if e.label and p)
    pos = sum(e.label for e in examples)
    fp = sum(1 for e, p in zip(examples, preds, strict=True) if not e.label and p)
    neg = len(examples) - pos
    kinds: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for e, p in zip(examples, preds, strict=True):
        kinds[e.kind][0] += int(p)
        kinds[e.kind][1] += 1
    return {"recall": tp / max(pos, 1), "fpr": fp / max(neg, 1), "tp": tp, "pos": pos, "fp": fp, "neg": neg,
            "kinds": dict(kinds)}


def speed_rows(limit: int | None) -> list[dict]:
    """All sft_sources rows in a fixed shuffled order (so a --quick prefix mixes the sources)."""
    rows: list[dict] = []
    for f in sorted((SHARED / "sft_sources").glob("*.jsonl.gz")):
        rows.extend(r for r in iter_input_rows([InputSpec(str(f))]) if isinstance(r, dict))
    random.Random(0).shuffle(rows)
    return rows[:limit] if limit else rows


def time_ours(index, cfg, rows, response: bool, batch: int = 512) -> tuple[float, int]:
    c = replace(cfg, check_response=response)
    index.clear_cache()  # cold: every distinct prompt is matched once in the timed loop
    t, flagged = time.perf_counter(), 0
    for s in range(0, len(rows), batch):
        rb = rows[s:s + batch]
        res = index.match_batch([r["prompt"] for r in rb], [r.get("response") for r in rb], c)
        flagged += sum(1 for m in res if m)
    return time.perf_counter() - t, flagged


def time_baseline(base, rows, response: bool) -> tuple[float, int]:
    t, flagged = time.perf_counter(), 0
    for r in rows:
        flagged += base.flag(r["prompt"]) or (response and base.flag(r.get("response")))
    return time.perf_counter() - t, flagged


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small labelled set and 3000 speed rows")
    ap.add_argument("--sweep", action="store_true", help="grid over n and thresholds")
    ap.add_argument("--speed-rows", type=int, default=None)
    ap.add_argument("--show-errors", type=int, default=8)
    args = ap.parse_args()
    if not (SHARED / "MANIFEST.md").exists():
        sys.exit(f"needs {SHARED}")
    per_b, per_pool = (15, 200) if args.quick else (40, 600)
    t0 = time.perf_counter()
    benchmarks, examples = build_labelled_set(SHARED, per_benchmark=per_b, per_pool=per_pool)
    print(f"labelled set: {sum(e.label for e in examples)} positives, {sum(1 - e.label for e in examples)} negatives, "
          f"{len(benchmarks)} benchmarks ({time.perf_counter() - t0:.1f}s to build)")
    cfg = DecontamConfig(benchmarks=list(benchmarks))
    tmp = Path(tempfile.mkdtemp(prefix="decontam_bench_"))
    t0 = time.perf_counter()
    index = DecontamIndex.build(benchmarks, cfg, tmp / "index")
    print(f"index build: {time.perf_counter() - t0:.2f}s")
    base = OpenR1Baseline([it.problem for items in benchmarks.values() for it in items])

    if args.sweep:
        print("\nsweep (recall / FPR on the labelled set):")
        print("| n | chunk threshold | min_chunk_words | verify_numbers | fuzzy | recall | FPR |")
        print("|---|---|---|---|---|---|---|")
        for n in (8, 10, 13):
            idx = DecontamIndex.build(benchmarks, replace(cfg, ngram=n), tmp / f"idx_{n}")
            for thr in (0.35, 0.5, 0.6):
                for mcw in (15, 25):
                    c = replace(cfg, ngram=n, threshold=thr, response_threshold=thr, min_chunk_words=mcw)
                    sc = score(examples, predict(idx, c, examples))
                    print(f"| {n} | {thr} | {mcw} | {c.verify_numbers} | {c.fuzzy_threshold} | {sc['recall']:.4f} | "
                          f"{sc['fpr']:.3%} |")
        for ft in (0.6, 0.7, 0.75, 0.8, 0.9):
            c = replace(cfg, fuzzy_threshold=ft)
            sc = score(examples, predict(index, c, examples))
            print(f"| {c.ngram} | {c.threshold} | {c.min_chunk_words} | {c.verify_numbers} | {ft} | "
                  f"{sc['recall']:.4f} | {sc['fpr']:.3%} |")
        c = replace(cfg, fuzzy=False)
        sc = score(examples, predict(index, c, examples))
        print(f"| {c.ngram} | {c.threshold} | {c.min_chunk_words} | {c.verify_numbers} | off | {sc['recall']:.4f} | "
              f"{sc['fpr']:.3%} |")

    ours = predict(index, cfg, examples)
    theirs = [base.flag(e.text) for e in examples]
    so, sb = score(examples, ours), score(examples, theirs)
    print("\n| method | recall | false-positive rate | TP/pos | FP/neg |")
    print("|---|---:|---:|---:|---:|")
    print(f"| cotforge (n={cfg.ngram}, chunk>={cfg.threshold}, fuzzy>={cfg.fuzzy_threshold}) | "
          f"{so['recall']:.4f} | {so['fpr']:.3%} | {so['tp']}/{so['pos']} | {so['fp']}/{so['neg']} |")
    print(f"| open-r1 baseline (any word 8-gram) | {sb['recall']:.4f} | {sb['fpr']:.3%} | {sb['tp']}/{sb['pos']} | "
          f"{sb['fp']}/{sb['neg']} |")
    print("\n| kind | label | n | cotforge flagged | baseline flagged |")
    print("|---|---:|---:|---:|---:|")
    for k in sorted(so["kinds"], key=lambda k: (-next(e.label for e in examples if e.kind == k), k)):
        lab = next(e.label for e in examples if e.kind == k)
        print(f"| {k} | {lab} | {so['kinds'][k][1]} | {so['kinds'][k][0]} | {sb['kinds'][k][0]} |")
    if args.show_errors:
        errs = [(e, p) for e, p in zip(examples, ours, strict=True) if bool(e.label) != p]
        print(f"\ncotforge errors ({len(errs)}; first {args.show_errors}):")
        for e, _ in errs[: args.show_errors]:
            print(f"- {'FN' if e.label else 'FP'} {e.kind} {e.benchmark} {e.item_id}: {e.text[:160]!r}")

    rows = speed_rows(args.speed_rows or (3000 if args.quick else None))
    n_chars = sum(len(r["prompt"]) + len(r.get("response") or "") for r in rows)
    print(f"\nspeed on {len(rows)} sft_sources rows ({n_chars / 1e6:.1f} M chars), same rows, same process:")
    print("| sides | cotforge rows/s | baseline rows/s | speed-up | cotforge flagged | baseline flagged |")
    print("|---|---:|---:|---:|---:|---:|")
    time_ours(index, cfg, rows[:200], True)  # warm caches
    index._get_lsh()  # one-time per task: load the pickled LSH
    for label, response, chars in (("prompt + response (first 4000 chars, default)", True, cfg.response_chars),
                                   ("prompt + whole response", True, 0), ("prompt only", False, 0)):
        to, fo = time_ours(index, replace(cfg, response_chars=chars), rows, response)
        tb, fb = time_baseline(base, rows, response)
        print(f"| {label} | {len(rows) / to:,.0f} | {len(rows) / tb:,.0f} | {tb / to:.1f}x | {fo} | {fb} |")


if __name__ == "__main__":
    main()
