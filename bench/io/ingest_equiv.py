"""Ingest writes the same thing before and after a change: a digest of the work shards (their rows, shard by
shard, and their schema), the quarantined rows and the ingest log (rows in per source, presets) on every corpus.

A speed change to `curate/io` must not change which row lands in which work shard, its values, or any quarantine
reason. `--save REF` records the digests of the code checked out now (run it on main first); `--against REF`
runs the current code and names each corpus whose digest differs (exit status 1). Corpora: the dedup speed
corpora (generated Parquet, not in the row schema), the decontamination corpora (schema Parquet), the real SFT
sources as published (gzip JSONL), the same sources' records as plain Parquet (nested meta as structs), an
adversarial set (odd rows in Parquet and JSONL) and the tests' preset fixtures. Each corpus runs with the stage
defaults and with small task/row-group budgets (cuts by bytes). Run it under `/tmp/tools/heavy`.

    python -m bench.io.ingest_equiv --save /tmp/ingest_main.json
    python -m bench.io.ingest_equiv --against /tmp/ingest_main.json [--corpora gen50k,real]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

from bench.paths import REPO, SHARED

CACHE = Path(tempfile.gettempdir()) / "cotforge_ingest_equiv"
GENERATED = {"gen50k": 50_000, "gen200k": 200_000}
DECONTAM = {"short": "short_200000.parquet", "longcot": "longcot_10000.parquet"}
# (rows_per_task, bytes_per_task, buffer_bytes): the stage defaults (1 GiB budget) and small cuts
CUTS = {"default": (20_000, 128 << 20, 16 << 20), "small": (997, 300_000, 40_000)}


def _real_files() -> list[Path]:
    files = sorted((SHARED / "sft_sources").glob("*.jsonl.gz"))
    if not files:
        sys.exit(f"no files under {SHARED / 'sft_sources'}")
    return files


def _real_parquet() -> list[Path]:
    """Each real source's raw JSON records as one Parquet file (nested meta becomes a struct column)."""
    import gzip

    import pyarrow as pa
    import pyarrow.parquet as pq

    out = []
    for f in _real_files():
        path = CACHE / "real_parquet" / f.name.replace(".jsonl.gz", ".parquet")
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            with gzip.open(f, "rt", encoding="utf-8") as fh:
                recs = [json.loads(line) for line in fh if line.strip()]
            table = pa.Table.from_pylist(recs)
            for i, field in enumerate(table.schema):  # Parquet cannot hold a struct without fields: JSON text
                if pa.types.is_struct(field.type) and field.type.num_fields == 0:
                    text = [None if r.get(field.name) is None else json.dumps(r[field.name]) for r in recs]
                    table = table.set_column(i, field.name, pa.array(text, pa.string()))
            pq.write_table(table, path, row_group_size=1000)
        out.append(path)
    return out


def adversarial(folder: Path) -> list[Path]:
    """Odd rows: empty / whitespace / null prompts, duplicate and pre-suffixed ids across files, int ids, lone
    surrogates (JSONL), control characters, non-ASCII keys in nested meta, floats, lists, very long rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(300):
        rows.append({"id": f"a{i % 37}" if i % 5 else f"a{i % 37}~2", "problem": ["Solve x+1=2.", "", "  \n\t",
                     None, "Héllo \u2028 wörld \x00 \x1f \"q\" \\ tab\t", "x" * 70_000][i % 6],
                     "solution": [None, "ok", " ", "y" * 1000, "Ω"][i % 5], "answer": [1, 2, None][i % 3],
                     "extra": {"ключ": i, "n": [1.5, None][i % 2], "z": {"é": "ü"}}, "score": i / 7,
                     "tags": [["a", "b"], [], None][i % 3], "flag": [True, False, None][i % 3],
                     "domain": ["Math", "coding", None, "physics"][i % 4], "data_source": ["s1", "", None][i % 3]})
    pq.write_table(pa.Table.from_pylist(rows), folder / "a.parquet", row_group_size=64)
    ints = [{"uid": i % 50, "question": f"What is {i} + 1?", "output": str(i + 1), "lang": "日本語"}
            for i in range(200)]
    pq.write_table(pa.Table.from_pylist(ints), folder / "b.parquet", row_group_size=50)
    lines = ['{"id": "a1", "problem": "bad \\ud800 surrogate", "solution": "s"}',
             '{"id": "a1", "problem": "fine", "solution": "\\udfff"}', "not json", "",
             '{"id": "a3", "problem": "q", "meta": {"k\\u00e9y": [1, {"b": 2}]}}', '[1, 2]',
             '{"id": "a3", "problem": "q2", "meta": "{\\"x\\": 1}"}']
    (folder / "c.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [folder / "a.parquet", folder / "b.parquet", folder / "c.jsonl", folder / "a.parquet"]


def corpus_specs(name: str) -> list:
    from bench.dedup.speed import generate
    from cotforge.curate.io.readers import InputSpec

    if name in GENERATED:
        path = CACHE / f"{name}.parquet"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            generate(path, GENERATED[name])
        return [InputSpec(str(path), source_name="gen")]
    if name in DECONTAM:
        path = Path(tempfile.gettempdir()) / "cotforge_decontam_corpora" / DECONTAM[name]
        if not path.exists():
            sys.exit(f"{path}: build it first (python -m bench.decontam.corpora)")
        return [InputSpec(str(path))]
    if name == "real":
        return [InputSpec(str(f), source_name=f.name.removesuffix(".jsonl.gz")) for f in _real_files()]
    if name == "real_parquet":
        return [InputSpec(str(f)) for f in _real_parquet()]
    if name == "adversarial":
        return [InputSpec(str(f)) for f in adversarial(CACHE / "adversarial")]
    if name == "fixtures":
        return [InputSpec(str(f)) for f in sorted((REPO / "tests" / "fixtures" / "presets").glob("*.json"))]
    sys.exit(f"unknown corpus {name!r}")


def _rows_digest(files: list[Path]) -> str:
    import pyarrow.parquet as pq

    h = hashlib.sha256()
    for f in files:
        pf = pq.ParquetFile(f)
        h.update(f"{f.name} {pf.metadata.num_rows} {pf.schema_arrow}\n".encode())
        for batch in pf.iter_batches(batch_size=2048):
            h.update(json.dumps(batch.to_pylist(), sort_keys=True, ensure_ascii=False, default=str).encode(
                "utf-8", "surrogatepass"))
    return h.hexdigest()


def digest(specs: list, cut: tuple[int, int, int]) -> tuple[dict, float]:
    """Digests of one ingest run (work shards, quarantine, log) and its wall time."""
    from cotforge.curate.core.schema import removed_schema
    from cotforge.curate.engine.work import IngestLog
    from cotforge.curate.io.ingest import materialize
    from cotforge.curate.io.inputs import input_schema

    rows_per_task, bytes_per_task, buffer_bytes = cut
    with tempfile.TemporaryDirectory() as d:
        schema = input_schema(specs)
        log = IngestLog(Path(d) / "ingest", removed_schema(schema))
        t = time.time()
        files = materialize(specs, Path(d) / "input", log, rows_per_task=rows_per_task, schema=schema,
                            bytes_per_task=bytes_per_task, buffer_bytes=buffer_bytes)
        log.save()
        wall = time.time() - t
        quarantined = sorted((Path(d) / "ingest" / "quarantined").glob("*.parquet"))
        out = {"shards": _rows_digest(files), "n_shards": len(files), "quarantine": _rows_digest(quarantined),
               "log": hashlib.sha256((Path(d) / "ingest" / "ingest.json").read_bytes()).hexdigest(),
               "rows_in": sum(log.rows_in.values())}
    return out, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", default="adversarial,fixtures,real,real_parquet,gen50k,gen200k,short,longcot")
    ap.add_argument("--cuts", default="default,small")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--save", type=Path)
    g.add_argument("--against", type=Path)
    args = ap.parse_args()
    ref = json.loads(args.against.read_text()) if args.against else {}
    got: dict[str, dict] = json.loads(args.save.read_text()) if args.save and args.save.exists() else {}
    bad = 0
    for name in args.corpora.split(","):
        specs = corpus_specs(name)
        for cut in args.cuts.split(","):
            key = f"{name}/{cut}"
            d, wall = digest(specs, CUTS[cut])
            got[key] = d
            verdict = "" if not ref else ("SAME" if ref.get(key) == d else f"DIFFERENT (was {ref.get(key)})")
            bad += bool(ref) and ref.get(key) != d
            print(f"{key}: {d['rows_in']} rows, {d['n_shards']} shards, ingest {wall:.2f}s {verdict}", flush=True)
    if args.save:
        args.save.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    if ref:
        print("IDENTICAL" if not bad else f"{bad} DIFFERENT")
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
