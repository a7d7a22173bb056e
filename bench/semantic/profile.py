"""Where the semantic tier's time goes on the speed corpora: how many distinct texts reach the encoder, their
token counts, and the encoder's texts/s per setting (torch threads, token cap, int8 / bf16), tokenizer apart.

    /tmp/tools/heavy python -m bench.semantic.profile [--sample 512] [--threads 1,2] [--variants fp32,int8]

Corpora: bench/decontam/corpora.py's short 200k and long-CoT 10k rows (built when missing). The texts the tier
embeds are the prompts (decontamination: of the rows no lexical tier flagged; dedup: one per problem key);
`--sample` distinct prompts drawn with a fixed seed are encoded per setting, so texts/s is per distinct text.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from bench.decontam.corpora import DEFAULT_OUT, ensure_corpora
from cotforge.curate.text.embed import Embedder


def corpus_counts(path: Path) -> tuple[int, list[str]]:
    """(rows, distinct non-empty prompts in first-seen order) of a speed corpus."""
    prompts = pq.read_table(path, columns=["prompt"])["prompt"].to_pylist()
    return len(prompts), [p for p in dict.fromkeys(prompts) if p and p.strip()]


def token_counts(emb: Embedder, texts: list[str]) -> np.ndarray:
    """Tokens per text without truncation (special tokens included), and the seconds the tokenizer took."""
    return np.array([len(x) for x in emb.tokenizer(texts, truncation=False)["input_ids"]])


def time_encode(emb: Embedder, texts: list[str]) -> tuple[float, float]:
    """(tokenizer seconds, total encode seconds) for `texts` (encode = tokenizer + forward + pooling)."""
    t0 = time.perf_counter()
    emb.tokenizer(texts, padding=True, truncation=True, max_length=emb.max_tokens)
    t1 = time.perf_counter()
    emb.encode(texts)
    return t1 - t0, time.perf_counter() - t1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sample", type=int, default=512)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--caps", default="256,128")
    ap.add_argument("--variants", default="fp32,int8,bf16")
    ap.add_argument("--corpora", default=str(DEFAULT_OUT))
    args = ap.parse_args()
    paths = ensure_corpora(Path(args.corpora), 200_000, 10_000, ("short", "longcot"))
    emb = Embedder()
    rng = random.Random(0)
    samples = {}
    for name, path in paths.items():
        rows, distinct = corpus_counts(path)
        tok = token_counts(emb, distinct)
        print(f"{name}: {rows} rows, {len(distinct)} distinct prompts; tokens per prompt mean {tok.mean():.0f} "
              f"p50 {np.median(tok):.0f} p95 {np.percentile(tok, 95):.0f} max {tok.max()}; over 256: "
              f"{(tok > 256).mean():.1%}, over 128: {(tok > 128).mean():.1%}", flush=True)
        samples[name] = rng.sample(distinct, min(args.sample, len(distinct)))
    print("load", os.getloadavg(), flush=True)
    for variant in args.variants.split(","):
        for threads in [int(x) for x in args.threads.split(",")]:
            for cap in [int(x) for x in args.caps.split(",")]:
                e = Embedder(threads=threads, max_tokens=cap, precision=variant)
                e.encode(samples["short"][:16])  # first-call setup out of the timing
                for name, texts in samples.items():
                    tk, total = time_encode(e, texts)
                    print(f"{variant} threads={threads} cap={cap} {name}: {len(texts) / total:.1f} texts/s "
                          f"(tokenizer {tk / total:.1%} of encode)", flush=True)
    print("load", os.getloadavg(), flush=True)


if __name__ == "__main__":
    main()
