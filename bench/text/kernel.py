"""MB/s of the shared normaliser + word 8-gram hashing, four ways, on the same real texts in one run:

- `reference`: `normalize` per text (plain Python) + the numpy word / 8-gram hasher;
- `polars`: the batch path the stages used before the kernel (`normalize_arrow` + `hash_words_arrow` +
  `ngram_hashes`);
- `kernel`: curate/text/kernel.py (`normalize_many` + `hash_words_ngrams`), compiled code loaded from numba's
  disk cache (the one-off table build / compile time is printed apart);
- `lean`: the lean baseline's own work (bench/decontam/measure.py's open-r1 rule): lower-case, whitespace split,
  the set of joined 8-gram strings per text.

Texts: the shared data's long-CoT responses (`long`: Sky-T1 / Qwen traces, Marco-o1), short problems +
solutions (`short`: GSM8K, MATH, AIME, code prompts) and the responses of the long-CoT speed corpus of
bench/decontam (`longcot`, `--kinds long,short,longcot`), repeated up to `--mb` MB each. MB = UTF-8 input bytes.
The reference runs on the first `--ref-mb` MB only (it is the slow one). Every method is checked to give the
same 8-gram hashes as the reference on the texts the reference saw. Run under the CPU lock:

    /tmp/tools/heavy python -m bench.text.kernel --mb 40
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time

import numpy as np

from bench.paths import SHARED
from cotforge.curate.text import kernel
from cotforge.curate.text.hashing import hash_words_arrow, ngram_hashes
from cotforge.curate.text.normalize import normalize, normalize_arrow

LONG = ("skyt1_longcot_eval_traces", "qwen25_32b_instruct_aime24", "marco_o1_cot_demo", "qwen25_math_rm_example")
SHORT = ("gsm8k_train_human", "deepscaler_math_train", "deepscaler_aime_1983_2023", "deepcoder_leetcode_train")


def load(kind: str, mb: float) -> list[str]:
    """Real texts of one kind, cycled up to `mb` MB (`longcot`: the responses of decontamination's long-CoT
    speed corpus, which concatenates 10-20 real responses per row, so ~1-2% of them hold code points NFKC
    composes)."""
    texts: list[str] = []
    if kind == "longcot":
        import pyarrow.parquet as pq

        from bench.decontam.corpora import ensure_corpora

        path = ensure_corpora(which=("longcot",))["longcot"]
        texts = [t for t in pq.read_table(path, columns=["response"]).column(0).to_pylist() if t]
        kind = "cycle"
    for name in () if kind == "cycle" else LONG if kind == "long" else SHORT:
        with gzip.open(SHARED / "sft_sources" / f"{name}.jsonl.gz", "rt", encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                texts += [t for t in ((row.get("response"),) if kind == "long" else
                                      (row.get("problem"), row.get("response"))) if t]
    out, size, i = [], 0, 0
    while size < mb * 1e6:
        out.append(texts[i % len(texts)])
        size += len(out[-1].encode("utf-8"))
        i += 1
    return out


def _mb(texts: list[str]) -> float:
    return sum(len(t.encode("utf-8")) for t in texts) / 1e6


def run_reference(texts: list[str]) -> np.ndarray:
    import pyarrow as pa

    norm = pa.array([normalize(t) for t in texts], pa.large_string())
    wh, rows, _ = hash_words_arrow(norm)
    return ngram_hashes(wh, rows, 8)[0]


def run_polars(texts: list[str]) -> np.ndarray:
    wh, rows, _ = hash_words_arrow(normalize_arrow(texts))
    return ngram_hashes(wh, rows, 8)[0]


def run_kernel(texts: list[str]) -> np.ndarray:
    return kernel.hash_words_ngrams(kernel.normalize_many(texts), 8)[3]


def run_lean(texts: list[str]) -> int:
    total = 0
    for t in texts:
        w = t.lower().split()
        total += len({" ".join(w[i:i + 8]) for i in range(len(w) - 7)})
    return total


def timed(fn, texts):
    t = time.perf_counter()
    out = fn(texts)
    return out, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=40.0, help="MB of text per kind")
    ap.add_argument("--ref-mb", type=float, default=8.0, help="MB the plain-Python reference runs on")
    ap.add_argument("--kinds", default="long,short")
    args = ap.parse_args()
    t = time.perf_counter()
    kernel.tables()
    kernel.hash_words_ngrams(kernel.normalize_many(["warm \\frac12 x² ```py\n a b c d e f g h"]), 8)
    print(f"kernel tables + compiled code loaded in {time.perf_counter() - t:.2f} s (numba disk cache)")
    print("| texts | method | MB | s | MB/s | vs lean | same 8-grams as reference | load |")
    print("|---|---|---:|---:|---:|---:|---|---|")
    for kind in args.kinds.split(","):
        texts = load(kind, args.mb)
        n_ref = 0
        acc = 0.0
        while n_ref < len(texts) and acc < args.ref_mb * 1e6:
            acc += len(texts[n_ref].encode("utf-8"))
            n_ref += 1
        ref, ref_s = timed(run_reference, texts[:n_ref])
        results = [("reference (normalize, Python)", texts[:n_ref], ref_s, True)]
        for label, fn in (("polars batch path", run_polars), ("kernel (numba)", run_kernel)):
            got, s = timed(fn, texts)
            same = bool(np.array_equal(fn(texts[:n_ref]), ref))
            results.append((label, texts, s, same))
        _, lean_s = timed(run_lean, texts)
        lean_rate = _mb(texts) / lean_s
        results.append(("lean 8-gram baseline (lower/split/set)", texts, lean_s, None))
        share = kernel.fallback_share(texts)
        for label, tx, s, same in results:
            rate = _mb(tx) / s
            print(f"| {kind} ({len(texts)} texts, kernel fallback {share:.2%}) | {label} | {_mb(tx):.1f} | {s:.2f} | "
                  f"{rate:.1f} | {rate / lean_rate:.2f}x | {'-' if same is None else same} | "
                  f"{os.getloadavg()[0]:.2f} |")


if __name__ == "__main__":
    main()
