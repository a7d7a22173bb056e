"""Where a curation stage's rows come from: raw inputs or an earlier stage's folder (its `kept/` shards).

A stage folder holds `kept/part-NNNNN.parquet`, `removed/part-NNNNN.parquet` and `stats.json` (see
`cotforge.curate.io.writer`); a later stage reads the kept shards, raw files go through the readers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from cotforge.curate.io.readers import InputError, InputSpec, Quarantined, read_rows
from cotforge.curate.schema import CORE_FIELDS, SCHEMA

if TYPE_CHECKING:
    from cotforge.curate.io.writer import StageWriter


def is_stage_dir(path: str | Path) -> bool:
    """True for an earlier stage's output folder (it has `kept/`)."""
    return (Path(path) / "kept").is_dir()


def stage_files(path: str | Path, part: str = "kept") -> list[Path]:
    """The shards of one part (`kept` or `removed`) of a stage folder, in order."""
    return sorted((Path(path) / part).glob("*.parquet"))


def resolve_inputs(paths: Iterable[str], *, source_names: dict[str, str] | None = None,
                   mapping: dict[str, str] | None = None, domain: str | None = None) -> list[InputSpec]:
    """Turn CLI paths into InputSpecs; a stage folder expands to its `kept/` shards."""
    source_names = source_names or {}
    specs: list[InputSpec] = []
    for p in paths:
        if not p.startswith("hf:") and not Path(p).exists():
            raise InputError(f"{p}: no such file or directory")
        if not p.startswith("hf:") and is_stage_dir(p):
            for f in stage_files(p):
                specs.append(InputSpec(str(f), source_names.get(p), dict(mapping or {}), domain))
            continue
        specs.append(InputSpec(p, source_names.get(p), dict(mapping or {}), domain))
    return specs


def _is_schema_parquet(path: str) -> bool:
    if not path.endswith(".parquet"):
        return False
    try:
        names = set(pq.read_schema(path).names)
    except Exception:
        return False
    return set(CORE_FIELDS) <= names


def iter_input_rows(specs: list[InputSpec], strict: bool = False) -> Iterator[dict[str, Any] | Quarantined]:
    """All rows of all inputs in order. Parquet already in the schema passes through unchanged
    (extra columns from earlier stages are kept); anything else goes through `read_rows`."""
    for spec in specs:
        if _is_schema_parquet(spec.path):
            pf = pq.ParquetFile(spec.path)
            for batch in pf.iter_batches(batch_size=4096):
                for row in batch.to_pylist():
                    if spec.source_name:
                        row["source"] = spec.source_name
                    yield row
        else:
            yield from read_rows(spec, strict=strict)


def counted_rows(specs: list[InputSpec], writer: StageWriter | None, strict: bool = False) -> Iterator[dict[str, Any]]:
    """The valid rows of `specs` for a stage: malformed ones go to the writer's removed/ (skipped when
    `writer` is None, e.g. a first pass that only looks), the others are counted in per source, then yielded.
    What every row-by-row curation stage does before its own decision, so their counts add up the same way."""
    for row in iter_input_rows(specs, strict=strict):
        if isinstance(row, Quarantined):
            if writer is not None:
                writer.quarantine(row)
            continue
        if writer is not None:
            writer.count_in(row["source"])
        yield row


def input_schema(specs: list[InputSpec]) -> pa.Schema:
    """The widest schema among schema-parquet inputs (earlier stages' added columns), else SCHEMA."""
    schema = SCHEMA
    for spec in specs:
        if _is_schema_parquet(spec.path):
            for f in pq.read_schema(spec.path):
                if schema.get_field_index(f.name) < 0 and f.name not in ("reason", "duplicate_of"):
                    schema = schema.append(f)
    return schema


def read_stats(out_dir: str | Path) -> dict[str, Any]:
    """A finished stage's stats.json."""
    return json.loads((Path(out_dir) / "stats.json").read_text())


def read_table(out_dir: str | Path, part: str = "kept"):
    """A stage part as one polars DataFrame (empty frame in the schema when there are no rows)."""
    import polars as pl

    files = stage_files(out_dir, part)
    if not files:
        return pl.DataFrame(schema={f.name: pl.Utf8 for f in SCHEMA})
    return pl.concat([pl.read_parquet(f) for f in files], how="diagonal_relaxed")
