"""Where a curation stage's rows come from: raw inputs or an earlier stage's folder (its `kept/` shards).

A stage folder holds `kept/part-NNNNN.parquet`, `removed/part-NNNNN.parquet` and `stats.json` (see
`cotforge.curate.io.writer`); a later stage reads the kept shards, raw files go through the readers. Both may
live on any fsspec filesystem (`s3://bucket/run/dedup`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from cotforge.curate.core.schema import CORE_FIELDS, SCHEMA
from cotforge.curate.io import fs
from cotforge.curate.io.budget import batch_rows_of
from cotforge.curate.io.columns import ColumnBatch, RowBatch, open_parquet_unit
from cotforge.curate.io.presets import PRESET_FIELDS
from cotforge.curate.io.readers import InputError, InputSpec, Quarantined, input_units, read_rows, uses_preset

if TYPE_CHECKING:
    from cotforge.curate.io.writer import StageWriter


def is_stage_dir(path: str | Path) -> bool:
    """True for an earlier stage's output folder (it has `kept/`)."""
    p = str(path)
    if fs.is_url(p) and not p.startswith("file://"):
        return not fs.has_glob(p) and fs.isdir(fs.join(p, "kept"))
    return (Path(fs.local_path(p) or p) / "kept").is_dir()


def stage_files(path: str | Path, part: str = "kept") -> list[Path] | list[str]:
    """The shards of one part (`kept` or `removed`) of a stage folder, in order (URLs for remote folders)."""
    p = str(path)
    if fs.is_remote(p):
        folder = fs.join(p, part)
        return [f for f in fs.list_files(folder, (".parquet",))] if fs.isdir(folder) else []
    return sorted((Path(fs.local_path(p) or p) / part).glob("*.parquet"))


def resolve_inputs(paths: Iterable[str], *, source_names: dict[str, str] | None = None,
                   mapping: dict[str, str] | None = None, domain: str | None = None,
                   preset: str | None = None) -> list[InputSpec]:
    """Turn CLI paths into InputSpecs; a stage folder expands to its `kept/` shards."""
    source_names = source_names or {}
    specs: list[InputSpec] = []
    for p in paths:
        remote_or_glob = fs.is_url(p) or fs.has_glob(p)
        if not p.startswith("hf:") and not remote_or_glob and not Path(p).exists():
            raise InputError(f"{p}: no such file or directory")
        if not p.startswith("hf:") and not fs.has_glob(p) and is_stage_dir(p):
            for f in stage_files(p):
                specs.append(InputSpec(str(f), source_names.get(p), dict(mapping or {}), domain))
            continue
        specs.append(InputSpec(p, source_names.get(p), dict(mapping or {}), domain, preset=preset))
    return specs


def _read_schema(path: str) -> pa.Schema | None:
    try:
        if fs.is_remote(path):
            with fs.open_binary(path) as fh:
                return pq.read_schema(fh)
        return pq.read_schema(fs.local_path(path) or path)
    except Exception:
        return None


def is_schema_parquet(path: str) -> bool:
    """True for a Parquet file already in the row schema (an earlier stage's shard): read by record batch."""
    if not path.endswith(".parquet"):
        return False
    schema = _read_schema(path)
    return schema is not None and set(CORE_FIELDS) <= set(schema.names)


SCHEMA_BATCH_BYTES = 16 << 20  # row bytes per record batch of schema-Parquet inputs


def schema_batches(spec: InputSpec) -> Iterator[pa.RecordBatch]:
    """A schema-Parquet input's record batches in order (~SCHEMA_BATCH_BYTES of row data each, page by page),
    with `source` replaced by the spec's source name when it has one."""
    fh = fs.open_binary(spec.path) if fs.is_remote(spec.path) else None
    try:
        # page by page, in batches of ~SCHEMA_BATCH_BYTES: a 4096-row batch of long-CoT rows held
        # ~250 MB of Arrow plus its Python strings in the main process (bench/decontam/measure.py, main RSS)
        pf = pq.ParquetFile(fh if fh is not None else (fs.local_path(spec.path) or spec.path),
                            pre_buffer=False, buffer_size=1 << 20)
        for batch in pf.iter_batches(batch_size=batch_rows_of(pf.metadata, SCHEMA_BATCH_BYTES, 4096)):
            if spec.source_name:
                names = pa.array([spec.source_name] * batch.num_rows, pa.string())
                i = batch.schema.get_field_index("source")
                batch = (batch.set_column(i, "source", names) if i >= 0 else batch.append_column("source", names))
            yield batch
    finally:
        if fh is not None:
            fh.close()


def iter_input_rows(specs: list[InputSpec], strict: bool = False,
                    report: dict[str, Any] | None = None) -> Iterator[dict[str, Any] | Quarantined]:
    """All rows of all inputs in order. Parquet already in the schema passes through unchanged
    (extra columns from earlier stages are kept); anything else goes through `read_rows`."""
    for spec in specs:
        if is_schema_parquet(spec.path):
            for batch in schema_batches(spec):
                yield from batch.to_pylist()
        else:
            yield from read_rows(spec, strict=strict, report=report)


def input_items(specs: list[InputSpec], strict: bool = False,
                report: dict[str, Any] | None = None) -> Iterator[dict[str, Any] | Quarantined | ColumnBatch]:
    """`iter_input_rows`, with raw Parquet files the column rules cover read by record batch: a `ColumnBatch`
    (its rows as a table, its quarantined records) stands where those rows would be (`curate/io/columns.py`).
    Schema Parquet inputs come as rows here; `ingest.materialize` reads them by batch itself."""
    for spec in specs:
        if is_schema_parquet(spec.path):
            yield from iter_input_rows([spec], strict=strict, report=report)
            continue
        for unit in input_units(spec):
            batches = None if strict else open_parquet_unit(unit, report)
            if batches is None:
                yield from read_rows(unit, strict=strict, report=report)
                continue
            for item in batches:
                if isinstance(item, RowBatch):
                    yield from item.items
                else:
                    yield item


def counted_rows(specs: list[InputSpec], writer: StageWriter | None, strict: bool = False,
                 report: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """The valid rows of `specs` for a stage: malformed ones go to the writer's removed/ (skipped when
    `writer` is None, e.g. a first pass that only looks), the others are counted in per source, then yielded.
    What every row-by-row curation stage does before its own decision, so their counts add up the same way."""
    for row in iter_input_rows(specs, strict=strict, report=report):
        if isinstance(row, Quarantined):
            if writer is not None:
                writer.quarantine(row)
            continue
        if writer is not None:
            writer.count_in(row["source"])
        yield row


def input_schema(specs: list[InputSpec]) -> pa.Schema:
    """The widest schema among the inputs: earlier stages' added columns of schema-parquet inputs, plus the
    preset label columns (problem_id, gen_index, correct, pass_rate, difficulty) when a raw input is read
    through a preset; else SCHEMA."""
    schema = SCHEMA
    extra: list[pa.Field] = []
    for spec in specs:
        if is_schema_parquet(spec.path):
            for f in _read_schema(spec.path) or []:
                if f.name not in ("reason", "duplicate_of"):
                    extra.append(f)
        elif spec.preset != "none" and not spec.mapping:
            try:
                if uses_preset(spec):
                    extra.extend(PRESET_FIELDS)
            except InputError:
                pass  # reported when the input is read
    for f in extra:
        if schema.get_field_index(f.name) < 0:
            schema = schema.append(f)
    return schema


def read_stats(out_dir: str | Path) -> dict[str, Any]:
    """A finished stage's stats.json (local or remote folder)."""
    with fs.open_text(fs.join(str(out_dir), "stats.json")) as f:
        return json.load(f)


def read_table(out_dir: str | Path, part: str = "kept"):
    """A stage part as one polars DataFrame (empty frame in the schema when there are no rows)."""
    import polars as pl

    files = stage_files(out_dir, part)
    if not files:
        return pl.DataFrame(schema={f.name: pl.Utf8 for f in SCHEMA})
    frames = []
    for f in files:
        if fs.is_remote(str(f)):
            with fs.open_binary(str(f)) as fh:
                frames.append(pl.read_parquet(fh))
        else:
            frames.append(pl.read_parquet(f))
    return pl.concat(frames, how="diagonal_relaxed")
