"""Speed corpora for bench/decontam/measure.py, built from ../shared/data (not committed: written to a cache folder).

(a) `short`: 200k rows of real prompts with real responses of at most 4,000 characters. The 28,162 real
    sft_sources rows are cycled in a shuffled order (each prompt appears about 7 times, as SFT data holds
    several samples per problem); each row takes the response of another, randomly drawn real row
    (responses cut at the last space before 4,000 characters), so (prompt, response) pairs are distinct.
(b) `longcot`: 10k rows whose responses are >= 40,000 characters: a real prompt (cycled as above) and a
    response made by concatenating randomly drawn real responses and reasoning traces (all sft_sources
    with a response; Sky-T1 traces are the long ones) separated by blank lines until a target length drawn
    uniformly from [40k, 80k) characters is reached (mean about 60k characters, 10-13k words).

(c) `short_clean`: as (a), from the five sources that are not model outputs on benchmark problems (about 35%
    of the real rows are, by construction: their rows hold benchmark items), for the cost when contamination
    is rare, as in real training data.
All are written as Parquet in the row schema (`curate/core/schema.py`), so the decontaminate stage ingests
them as they are. Deterministic for a given seed.

    python -m bench.decontam.corpora [--out DIR] [--rows-short 200000] [--rows-long 10000]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench.paths import SHARED
from cotforge.curate.core.schema import SCHEMA
from cotforge.curate.io.inputs import iter_input_rows
from cotforge.curate.io.readers import InputSpec

DEFAULT_OUT = Path("/tmp/cotforge_decontam_corpora")


def real_rows(shared: Path = SHARED) -> list[dict]:
    """All sft_sources rows in the row schema, in file order, `source` = the file's name."""
    rows: list[dict] = []
    for f in sorted((shared / "sft_sources").glob("*.jsonl.gz")):
        rows.extend(r for r in iter_input_rows([InputSpec(str(f), f.name.removesuffix(".jsonl.gz"))])
                    if isinstance(r, dict))
    return rows


def _cut(text: str, limit: int) -> str:
    """`text` cut at the last space before `limit` characters."""
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > 0 else limit]


def _row(i: int, base: dict, response: str, tag: str) -> dict:
    return {"id": f"{tag}-{i}", "source": base["source"], "domain": base["domain"], "prompt": base["prompt"],
            "response": response, "answer": base.get("answer"), "tests": None,
            "meta": json.dumps({"from": base["id"]})}


def _write(rows, path: Path, batch: int = 4096) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with pq.ParquetWriter(path, SCHEMA, compression="zstd") as w:
        buf: list[dict] = []
        for r in rows:
            buf.append(r)
            if len(buf) >= batch:
                w.write_table(pa.Table.from_pylist(buf, schema=SCHEMA))
                buf = []
        if buf:
            w.write_table(pa.Table.from_pylist(buf, schema=SCHEMA))


def _cycle(rows: list[dict], n: int, rng: random.Random):
    """Rows in shuffled order, reshuffled at every pass, until `n` were given."""
    order: list[int] = []
    for _ in range(n):
        if not order:
            order = list(range(len(rows)))
            rng.shuffle(order)
        yield rows[order.pop()]


def build_short(rows: list[dict], n: int, path: Path, seed: int = 0, limit: int = 4000) -> Path:
    """Corpus (a): real prompts, real responses of <= `limit` characters (see the module docstring)."""
    rng = random.Random(seed)
    responses = [_cut(r["response"], limit) for r in rows if r.get("response")]
    _write((_row(i, base, rng.choice(responses), "short") for i, base in enumerate(_cycle(rows, n, rng))), path)
    return path


def build_longcot(rows: list[dict], n: int, path: Path, seed: int = 1, lo: int = 40_000, hi: int = 80_000) -> Path:
    """Corpus (b): real prompts, responses of concatenated real responses, >= `lo` characters."""
    rng = random.Random(seed)
    responses = [r["response"] for r in rows if r.get("response")]

    def long_response() -> str:
        target, parts, size = rng.randrange(lo, hi), [], 0
        while size < target:
            parts.append(rng.choice(responses))
            size += len(parts[-1]) + 2
        return _cut("\n\n".join(parts), target)  # the last part is cut: lengths stay in [lo, hi)

    _write((_row(i, base, long_response(), "long") for i, base in enumerate(_cycle(rows, n, rng))), path)
    return path


CLEAN_SOURCES = ("gsm8k_train_human", "deepscaler_math_train", "deepscaler_aime_1983_2023", "deepcoder_leetcode_train",
                 "marco_o1_cot_demo")


def corpus_paths(out: Path = DEFAULT_OUT, rows_short: int = 200_000, rows_long: int = 10_000) -> dict[str, Path]:
    return {"short": out / f"short_{rows_short}.parquet", "longcot": out / f"longcot_{rows_long}.parquet",
            "short_clean": out / f"short_clean_{rows_short}.parquet"}


def ensure_corpora(out: Path = DEFAULT_OUT, rows_short: int = 200_000, rows_long: int = 10_000,
                   which: tuple[str, ...] = ("short", "longcot")) -> dict[str, Path]:
    """Build the corpora that are not there yet; returns their paths."""
    paths = corpus_paths(out, rows_short, rows_long)
    rows = None
    for name in which:
        p = paths[name]
        if p.exists():
            continue
        rows = rows if rows is not None else real_rows()
        tmp = p.with_suffix(".tmp")
        if name == "short":
            build_short(rows, rows_short, tmp)
        elif name == "short_clean":
            build_short([r for r in rows if r["source"] in CLEAN_SOURCES], rows_short, tmp)
        else:
            build_longcot(rows, rows_long, tmp)
        tmp.rename(p)
    return {k: paths[k] for k in which}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--rows-short", type=int, default=200_000)
    ap.add_argument("--rows-long", type=int, default=10_000)
    args = ap.parse_args()
    for name, p in ensure_corpora(args.out, args.rows_short, args.rows_long).items():
        md = pq.ParquetFile(p).metadata
        print(f"{name}: {p} ({md.num_rows} rows, {p.stat().st_size / 1e6:.0f} MB on disk)")


if __name__ == "__main__":
    main()
