"""Raw Parquet inputs read by column: the rows `mapping.to_row` would make, built a record batch at a time.

A Parquet file that is not in the row schema, read through plain field detection (no preset, no chat list),
becomes schema columns by renames and Arrow compute: the prompt checked for text, a blank response dropped,
numbers as text, the source and domain rules of `to_row`, and `meta` (every unmapped column plus `_origin`) as
the exact JSON text `schema.dump_meta` writes, built column by column. Rows the column rules do not cover go
through `to_row` itself, so their quarantine reasons are its own; a batch where `to_row` would keep such a row
is handed back to the row loop whole. Anything else about a file (another format, a preset, odd column types)
leaves the whole file to the row loop (`readers.read_rows`). Same rows, ids and reasons either way
(tests/test_ingest_columns.py, `python -m bench.io.ingest_equiv`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cotforge.curate.core.schema import dump_meta, make_id, normalize_domain
from cotforge.curate.io import fs
from cotforge.curate.io.budget import open_streaming
from cotforge.curate.io.codetests import normalize_tests
from cotforge.curate.io.formats import Format
from cotforge.curate.io.mapping import CHAT_KEYS, detect_mapping, parse_meta, to_row
from cotforge.curate.io.presets import detect_preset
from cotforge.curate.io.readers import note_preset, unit_format
from cotforge.curate.io.records import InputError, Origin, Quarantined
from cotforge.curate.io.spec import InputSpec

log = logging.getLogger(__name__)

BATCH_ROWS = 2048  # the row loop's Parquet batch: a broken row group is reported after the same row
ROW_FIELDS = ("id", "source", "domain", "prompt", "response", "answer", "tests", "meta")
# An RE2 class of every character that is not whitespace for `str.strip` (Python's own set of 29 code points;
# tests/test_text_kernel_stages.py checks it against `str.isspace`).
NOT_SPACE = "[^\\x{9}\\x{a}\\x{b}\\x{c}\\x{d}\\x{1c}\\x{1d}\\x{1e}\\x{1f}\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}\\x{2001}\\x{2002}\\x{2003}\\x{2004}\\x{2005}\\x{2006}\\x{2007}\\x{2008}\\x{2009}\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]"
_SHORT_ESCAPES = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


@dataclass
class ColumnBatch:
    """One record batch done by column: the schema rows kept (`table`, in input order, every value a
    string), the records quarantined with the row loop's reasons, and `rows`, the input records it covered."""

    table: pa.Table | None
    quarantined: list[Quarantined]
    rows: int


@dataclass
class RowBatch:
    """A record batch the column rules do not cover: the row loop's rows and quarantined records, in order."""

    items: list[dict[str, Any] | Quarantined]


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _text_or_null(t: pa.DataType) -> bool:
    return _is_text(t) or pa.types.is_null(t)


@dataclass
class ColumnPlan:
    """How one Parquet file's columns become schema rows (`to_row`'s rules for this file's mapping)."""

    unit: InputSpec
    mapping: dict[str, str]
    meta_columns: list[str]  # unmapped columns, in file order
    fast_meta: bool  # meta built column by column (else per row, from the unmapped columns only)

    @property
    def shown(self) -> str:
        return fs.shown(self.unit.path)

    @property
    def source(self) -> str:
        return self.unit.source_name or self.unit.default_source


def plan_columns(unit: InputSpec, schema: pa.Schema, first: dict[str, Any] | None) -> ColumnPlan | None:
    """The plan for a Parquet file with this Arrow schema and first record, or None when the row loop must
    read it (a preset, a chat list, a column type `to_row` treats value by value)."""
    if unit.preset not in (None, "none") or first is None:
        return None
    if unit.preset is None and not unit.mapping and detect_preset(first) is not None:
        return None
    names = list(schema.names)
    if len(set(names)) != len(names):
        return None
    mapping = detect_mapping(names, unit.mapping)
    if "chat" in mapping or "prompt" not in mapping or not set(mapping.values()) <= set(names):
        return None
    types = {f.name: f.type for f in schema}
    if not _is_text(types[mapping["prompt"]]):
        return None
    rules = {"response": _text_or_null, "domain": _text_or_null, "source": _is_text,
             "answer": lambda t: _text_or_null(t) or pa.types.is_integer(t),
             "id": lambda t: _is_text(t) or pa.types.is_integer(t), "tests": pa.types.is_null}
    for target, ok in rules.items():
        if target in mapping and not ok(types[mapping[target]]):
            return None
    used = set(mapping.values())
    meta_columns = [n for n in names if n not in used and n not in CHAT_KEYS]
    fast = not ({"meta", "tests", "_origin", "system"} & set(meta_columns))
    return ColumnPlan(unit, mapping, meta_columns, fast)


def open_parquet_unit(unit: InputSpec, report: dict[str, Any] | None) -> Iterator[ColumnBatch | RowBatch | Quarantined] | None:
    """The batches of one raw Parquet file read by column, or None when the row loop must read it (then nothing
    was consumed). The file is recorded in `report` (the presets of stats.json) as the row loop does."""
    if unit.is_hub:
        return None
    try:
        fmt = unit_format(unit)
    except InputError:
        return None
    if not isinstance(fmt, Format) or fmt.kind != "parquet":
        return None
    try:
        fh = fs.open_binary(unit.path)
    except (OSError, fs.StorageError):
        return None
    try:
        pf = open_streaming(fh)  # page by page: memory does not grow with the file
        if pf.metadata.num_rows == 0:
            raise ValueError("empty")
        first_batch = next(pf.iter_batches(batch_size=1), None)
        first = first_batch.to_pylist()[0] if first_batch is not None and first_batch.num_rows else None
        plan = plan_columns(unit, pf.schema_arrow, first)
    except Exception:  # a broken or odd file: the row loop reads it and reports what is wrong
        fh.close()
        return None
    if plan is None:
        fh.close()
        return None
    how = "none" if unit.preset == "none" or not unit.mapping else "mapping"  # as readers._explicit says
    note_preset(report, plan.source, unit, None, how)
    log.info("%s: field mapping %s (read by column)", plan.shown, ", ".join(f"{k}<-{v}" for k, v in plan.mapping.items()))
    return _batches(pf, fh, plan)


def _batches(pf: pq.ParquetFile, fh: Any, plan: ColumnPlan) -> Iterator[ColumnBatch | RowBatch | Quarantined]:
    i = 0
    with fh:
        batches = pf.iter_batches(batch_size=BATCH_ROWS)
        while True:
            try:
                batch = next(batches, None)
                if batch is not None:
                    try:
                        batch.validate(full=True)
                        valid = True
                    except pa.ArrowInvalid:
                        batch.to_pylist()  # raises what the row loop meets (invalid UTF-8): reported below
                        valid = False
            except (OSError, ValueError) as e:  # as formats.iter_parquet + readers._iter_unit report a break
                where = Origin(plan.shown, i, "row")
                reason = f"unreadable Parquet data after row {i} ({e})"
                log.warning("%s: %s (records before it are kept)", plan.shown, reason)
                yield Quarantined(where, f"malformed: {reason}; last complete record before it: row {i - 1}", "",
                                  plan.source)
                return
            if batch is None:
                return
            yield convert_batch(batch, i, plan) if valid else _row_batch(batch, i, plan)
            i += batch.num_rows


def _row_batch(batch: pa.RecordBatch, start: int, plan: ColumnPlan) -> RowBatch:
    """The row loop's answer for every record of the batch (`to_row`, quarantined on InputError)."""
    items: list[dict[str, Any] | Quarantined] = []
    for k, rec in enumerate(batch.to_pylist()):
        origin = Origin(plan.shown, start + k, "row")
        try:
            items.append(to_row(rec, plan.mapping, plan.unit, origin))
        except InputError as e:
            items.append(Quarantined(origin, f"malformed: {e.what}", rec, plan.source))
    return RowBatch(items)


def convert_batch(batch: pa.RecordBatch, start: int, plan: ColumnPlan) -> ColumnBatch | RowBatch:
    """Schema rows of one record batch (rows numbered from `start` in the file)."""
    m, n = plan.mapping, batch.num_rows
    col = batch.column
    prompt = col(m["prompt"])
    bad = ~pc.fill_null(pc.match_substring_regex(prompt, NOT_SPACE), False).to_numpy(zero_copy_only=False)
    meta, tests, meta_bad = _meta(batch, start, plan)
    bad |= meta_bad
    quarantined: list[Quarantined] = []
    if bad.any():
        for k in np.flatnonzero(bad).tolist():
            rec = batch.slice(k, 1).to_pylist()[0]
            origin = Origin(plan.shown, start + k, "row")
            try:
                to_row(rec, plan.mapping, plan.unit, origin)
            except InputError as e:
                quarantined.append(Quarantined(origin, f"malformed: {e.what}", rec, plan.source))
                continue
            return _row_batch(batch, start, plan)  # to_row keeps a row the column rules flagged: rows decide
        good = pa.array(~bad)
        batch, meta = batch.filter(good), pc.filter(meta, good)
        tests = None if tests is None else pc.filter(tests, good)
        col, n = batch.column, batch.num_rows
    if not n:
        return ColumnBatch(None, quarantined, len(bad))
    prompt = col(m["prompt"]).cast(pa.string())
    response = _blank_to_null(col(m["response"])) if "response" in m else pa.nulls(n, pa.string())
    answer = col(m["answer"]).cast(pa.string()) if "answer" in m else pa.nulls(n, pa.string())
    tests = tests if tests is not None else pa.nulls(n, pa.string())
    source = _source(batch, plan)
    domain = _domain(batch, plan, answer)
    ids = _ids(batch, plan, source, prompt, response)
    table = pa.Table.from_arrays([ids, source, domain, prompt, response, answer, tests, meta], names=list(ROW_FIELDS))
    return ColumnBatch(table, quarantined, len(bad))


def _blank_to_null(arr: pa.Array) -> pa.Array:
    """`to_row` drops a response that is only whitespace."""
    arr = arr.cast(pa.string())
    return pc.if_else(pc.fill_null(pc.match_substring_regex(arr, NOT_SPACE), False), arr, pa.scalar(None, pa.string()))


def _source(batch: pa.RecordBatch, plan: ColumnPlan) -> pa.Array:
    n, unit = batch.num_rows, plan.unit
    if unit.source_name or "source" not in plan.mapping:
        return pa.array(np.full(n, unit.source_name or unit.default_source, dtype=object), pa.string())
    given = batch.column(plan.mapping["source"]).cast(pa.string())
    truthy = pc.fill_null(pc.not_equal(given, ""), False)
    return pc.if_else(truthy, given, unit.default_source)


def _domain(batch: pa.RecordBatch, plan: ColumnPlan, answer: pa.Array) -> pa.Array:
    """`to_row`'s domain: the spec's, else the mapped column normalised, else math (an answer) / other (it is
    decided before tests kept in meta are read, and a column plan maps no tests)."""
    n = batch.num_rows
    if plan.unit.domain:
        return pa.array(np.full(n, normalize_domain(plan.unit.domain), dtype=object), pa.string())
    has_answer = pc.fill_null(pc.not_equal(answer, ""), False)
    fallback = pc.if_else(has_answer, "math", "other")
    if "domain" not in plan.mapping:
        return fallback
    given = batch.column(plan.mapping["domain"]).cast(pa.string())
    uniques = pc.unique(pc.drop_null(given)).to_pylist()
    named = pc.take(pa.array([normalize_domain(u) for u in uniques], pa.string()),
                    pc.index_in(given, pa.array(uniques, pa.string())))
    truthy = pc.fill_null(pc.not_equal(given, ""), False)
    return pc.if_else(truthy, named, fallback)


def _ids(batch: pa.RecordBatch, plan: ColumnPlan, source: pa.Array, prompt: pa.Array, response: pa.Array) -> pa.Array:
    """The given id as text, or `make_id(source, prompt, response)` where none (or "") is given."""
    n = batch.num_rows
    given = batch.column(plan.mapping["id"]).cast(pa.string()) if "id" in plan.mapping else pa.nulls(n, pa.string())
    missing = ~pc.fill_null(pc.not_equal(given, ""), False).to_numpy(zero_copy_only=False)
    if not missing.any():
        return given
    ids = np.array(given.to_pylist(), dtype=object)
    src, pr, rs = source.to_pylist(), prompt.to_pylist(), response.to_pylist()
    for k in np.flatnonzero(missing).tolist():
        ids[k] = make_id(src[k], pr[k], rs[k])
    return pa.array(ids, pa.string())


def in_schema(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` with the schema's columns in its order (nulls for the ones it lacks), others dropped."""
    cols = [table.column(f.name) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
            for f in schema]
    return pa.Table.from_arrays(cols, schema=pa.schema([pa.field(f.name, c.type) for f, c in zip(schema, cols, strict=True)]))


# --------------------------------------------------------------------------- meta as JSON text


def json_fragments(arr: pa.Array) -> pa.Array:
    """Each value of `arr` as the JSON text `json.dumps(v, sort_keys=True, ensure_ascii=False, default=str)`
    gives (strings escaped as `json` escapes them, nulls as `null`): by Arrow compute for text, integers and
    booleans, value by value for the rest (floats, lists, structs, dates)."""
    t = arr.type
    if pa.types.is_null(t):
        return pa.array(np.full(len(arr), "null", dtype=object), pa.string())
    if _is_text(t):
        s = pc.replace_substring(arr.cast(pa.string()), "\\", "\\\\")
        s = pc.replace_substring(s, '"', '\\"')
        if pc.any(pc.match_substring_regex(s, "[\\x00-\\x1f]")).as_py():
            for c in range(32):
                s = pc.replace_substring(s, chr(c), _SHORT_ESCAPES.get(chr(c), f"\\u{c:04x}"))
        return pc.fill_null(pc.binary_join_element_wise('"', s, '"', ""), "null")
    if pa.types.is_integer(t):
        return pc.fill_null(arr.cast(pa.string()), "null")
    if pa.types.is_boolean(t):
        return pc.fill_null(pc.if_else(arr, "true", "false"), "null")
    return pa.array([json.dumps(v, sort_keys=True, ensure_ascii=False, default=str) for v in arr.to_pylist()],
                    pa.string())


def _meta(batch: pa.RecordBatch, start: int, plan: ColumnPlan) -> tuple[pa.Array, pa.Array | None, np.ndarray]:
    """(meta JSON text, tests popped from meta or None, rows `to_row` must see) of every row of the batch."""
    n = batch.num_rows
    if not plan.fast_meta:
        return _meta_by_row(batch, start, plan)
    keys = sorted([*plan.meta_columns, "_origin"])
    pieces: list[Any] = []
    file_json = json.dumps(plan.shown, ensure_ascii=False)
    for j, key in enumerate(keys):
        pieces.append(("{" if j == 0 else ", ") + json.dumps(key, ensure_ascii=False) + ": ")
        if key == "_origin":
            rows = pa.array(np.arange(start, start + n), pa.int64()).cast(pa.string())
            pieces += ['{"file": ' + file_json + ', "row": ', rows, "}"]
        else:
            pieces.append(json_fragments(batch.column(key)))
    pieces.append("}")
    return pc.binary_join_element_wise(*pieces, ""), None, np.zeros(n, dtype=bool)


def _meta_by_row(batch: pa.RecordBatch, start: int, plan: ColumnPlan) -> tuple[pa.Array, pa.Array | None, np.ndarray]:
    """`to_row`'s meta for columns it merges (`meta` as JSON or a struct, `tests` kept in meta), row by row
    over the unmapped columns only; rows whose meta text UTF-8 cannot hold are left to `to_row`."""
    n = batch.num_rows
    cols = {k: batch.column(k).to_pylist() for k in plan.meta_columns}
    texts: list[str] = []
    tests: list[str | None] = []
    bad = np.zeros(n, dtype=bool)
    for r in range(n):
        meta: dict[str, Any] = {}
        for k in plan.meta_columns:
            if k == "meta":
                meta.update(parse_meta(cols[k][r]))
            else:
                meta[k] = cols[k][r]
        t = normalize_tests(meta.pop("tests")) if isinstance(meta.get("tests"), (str, list, dict)) else None
        meta["_origin"] = {"file": plan.shown, "row": start + r}
        text = dump_meta(meta)
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                bad[r], text = True, ""
        if t is not None and not t.isascii():
            try:
                t.encode("utf-8")
            except UnicodeEncodeError:
                bad[r], t = True, None
        texts.append(text)
        tests.append(t)
    has_tests = any(t is not None for t in tests)
    return pa.array(texts, pa.string()), (pa.array(tests, pa.string()) if has_tests else None), bad
