"""The contract every curation stage shares on the way out: `kept/` + `removed/` + `stats.json`.

A stage writes `OUT/kept/part-NNNNN.parquet`, `OUT/removed/part-NNNNN.parquet` (the row plus `reason` and
`duplicate_of`, and whatever the stage adds) and `OUT/stats.json`. Every row read lands in exactly
one of kept/removed; `StageWriter.close` checks that the counts add up. Outputs are written to a
temporary folder and moved into place at the end, so a killed stage leaves no half output.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pyarrow.parquet as pq

from cotforge.curate.core.schema import SCHEMA, load_meta, removed_schema
from cotforge.curate.io import fs
from cotforge.curate.io.readers import Quarantined

log = logging.getLogger(__name__)

DEFAULT_ROWS_PER_SHARD = 50_000
TABLE_ROW_GROUP = 65_536  # row group size of shards written from whole tables
# Buffered row bytes that end a row group (with 2048 rows, whichever comes first): Arrow conversion and the
# Parquet writer hold ~6x a row group while writing it, so long-CoT rows (60k characters) must not be
# buffered 2048 at a time (curate/io/budget.py sets it from the memory budget).
DEFAULT_BUFFER_BYTES = 16 << 20


class ShardWriter:
    """Writes rows into fixed-size Parquet shards `part-00000.parquet`, ... in arrival order."""

    def __init__(self, folder: Path, schema: pa.Schema, rows_per_shard: int = DEFAULT_ROWS_PER_SHARD,
                 bytes_per_shard: int | None = None, buffer_bytes: int | None = DEFAULT_BUFFER_BYTES,
                 stem: str = "part-"):
        """`bytes_per_shard` also ends a shard once its rows hold that many bytes, and `buffer_bytes` flushes
        buffered rows (one row group each) at that many bytes: long rows then make smaller shards and row
        groups, so whoever reads a shard or a row group back holds a bounded number of bytes. Shards are
        named `{stem}NNNNN.parquet` (a task writing final shards uses its own stem)."""
        self.folder, self.schema, self.rows_per_shard, self.stem = folder, schema, rows_per_shard, stem
        self.adopted = 0  # finished shards taken in by `adopt`
        self.bytes_per_shard, self.buffer_bytes = bytes_per_shard, buffer_bytes
        self._buf_bytes = 0
        self._shard_bytes = 0
        self._sizes: list[int] = []
        self.folder.mkdir(parents=True, exist_ok=True)
        self._buf: list[dict[str, Any] | pa.Table] = []  # rows of `write`, tables of `write_rows`, in order
        self._buf_rows = 0
        self._writer: pq.ParquetWriter | None = None
        self._in_shard = 0
        self._tables: list[pa.Table] = []  # buffered by write_table
        self._pending = 0
        self.shards = 0
        self.rows = 0

    def write(self, row: dict[str, Any]) -> None:
        self._buf.append(row)
        self._buf_rows += 1
        self.rows += 1
        if self.bytes_per_shard or self.buffer_bytes:
            from cotforge.curate.io.budget import row_bytes

            n = row_bytes(row)
            self._sizes.append(n)
            self._buf_bytes += n
            if (self.buffer_bytes and self._buf_bytes >= self.buffer_bytes) or (
                    self.bytes_per_shard and self._shard_bytes + self._buf_bytes >= self.bytes_per_shard):
                self._flush()
                return
        if self._buf_rows >= 2048 or self._in_shard + self._buf_rows >= self.rows_per_shard:
            self._flush()

    def write_rows(self, table: pa.Table, sizes: np.ndarray | None = None) -> None:
        """Rows given as a table (columns matched to the schema by name), written exactly as `write` writes
        them one by one: flushed at the same rows, so the same shards and row groups (a reader that builds
        rows by column, `curate/io/columns.py`, then writes what the row loop writes). `sizes` are the rows'
        `budget.row_bytes`, needed when the writer cuts by bytes."""
        n = table.num_rows
        track = bool(self.bytes_per_shard or self.buffer_bytes)
        if track and sizes is None:
            raise ValueError("write_rows: this writer cuts by bytes; give each row's size")
        pos = 0
        while pos < n:
            # the first row (from pos) at which `write` would flush: by row count ...
            at = max(0, min(2047 - self._buf_rows, self.rows_per_shard - self._in_shard - self._buf_rows - 1))
            flush = at < n - pos
            at = min(at, n - pos - 1)
            if track:  # ... or by bytes, whichever comes first
                cum = self._buf_bytes + np.cumsum(sizes[pos:pos + at + 1])
                hit = np.zeros(len(cum), dtype=bool)
                if self.buffer_bytes:
                    hit |= cum >= self.buffer_bytes
                if self.bytes_per_shard:
                    hit |= self._shard_bytes + cum >= self.bytes_per_shard
                if hit.any():
                    at, flush = int(np.argmax(hit)), True
                self._sizes.extend(sizes[pos:pos + at + 1].tolist())
                self._buf_bytes = int(cum[at])
            self._buf.append(table.slice(pos, at + 1))
            self._buf_rows += at + 1
            self.rows += at + 1
            pos += at + 1
            if flush:
                self._flush()

    def write_table(self, table: pa.Table, sizes: np.ndarray | None = None) -> None:
        """Append a whole Arrow table (columns matched to the schema by name) after the rows written so far,
        without per-row Python. Tables are buffered and cut into row groups at fixed places (every
        TABLE_ROW_GROUP rows and at shard ends), so the bytes do not depend on how the rows were split
        into tables. With `sizes` (each row's `budget.row_bytes`) a shard also ends at `bytes_per_shard`:
        it holds the rows whose sizes add up to at most that (at least one row)."""
        if self._buf_rows:  # rows written one by one go first
            self._flush()
        if not table.num_rows:
            return
        table = table.select(self.schema.names).cast(self.schema)
        if sizes is None or not self.bytes_per_shard:
            self._append(table)
            return
        start = 0
        while start < table.num_rows:
            held = (self._in_shard if self._writer is not None else 0) + self._pending  # rows of the open shard
            cum = np.cumsum(sizes[start:start + self.rows_per_shard - held])
            room = self.bytes_per_shard - (self._shard_bytes if held else 0)
            k = max(int(np.searchsorted(cum, room, side="right")), 1 if held == 0 else 0)
            full = k < len(cum) or held + k >= self.rows_per_shard or (k > 0 and cum[k - 1] >= room)
            if k:
                if self._writer is None and not self._pending:
                    self._open_next()
                self._shard_bytes += int(cum[k - 1])
                self._append(table.slice(start, k), drain=not full)
                start += k
            if full:
                self._end_shard()

    def _append(self, table: pa.Table, drain: bool = True) -> None:
        self._tables.append(table)
        self._pending += table.num_rows
        self.rows += table.num_rows
        if drain:
            self._drain_tables(final=False)

    def _end_shard(self) -> None:
        """Write the buffered rows and close the open shard (the next rows start a new one)."""
        self._drain_tables(final=True)
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _drain_tables(self, final: bool) -> None:
        """Write buffered tables as row groups; the last partial group only when `final`. A group also ends
        where its rows reach `buffer_bytes` (row sizes from the data, so the cut does not depend on how the
        rows were split into tables)."""
        while self._pending:
            if self._writer is None:
                self._open_next()
            size = min(TABLE_ROW_GROUP, self.rows_per_shard - self._in_shard)
            merged = pa.concat_tables(self._tables)
            if self.buffer_bytes:
                fit = _rows_within(merged, min(size, self._pending), self.buffer_bytes)
                if fit < min(size, self._pending):
                    size = fit  # a full group by bytes: write it now
            if self._pending < size and not final:
                return
            size = min(size, self._pending)
            # one chunk per column: Parquet pages are cut per Arrow chunk, so the bytes would depend on how the
            # rows arrived (per-task record batches) rather than on the rows
            self._writer.write_table(merged.slice(0, size).combine_chunks(), row_group_size=size)
            rest = merged.slice(size)
            self._tables, self._pending = ([rest] if rest.num_rows else []), rest.num_rows
            self._in_shard += size
            if self._in_shard >= self.rows_per_shard:
                self._writer.close()
                self._writer = None

    def _open_next(self) -> None:
        path = self.folder / f"{self.stem}{self.shards:05d}.parquet"
        self._writer = pq.ParquetWriter(path, self.schema, compression="zstd")
        self.shards += 1
        self._in_shard = 0
        self._shard_bytes = 0

    def _flush(self) -> None:
        self._drain_tables(final=True)
        if not self._buf_rows:
            return
        buf = self._buffered_table()
        self._buf, self._buf_rows = [], 0
        start = 0
        while start < buf.num_rows:
            if self._writer is None:
                self._open_next()
            take = min(buf.num_rows - start, self.rows_per_shard - self._in_shard)
            full = self._in_shard + take >= self.rows_per_shard
            if self.bytes_per_shard and self._sizes:  # the rows that fit in the shard's bytes (at least one)
                room = self.bytes_per_shard - self._shard_bytes
                cum = np.cumsum(self._sizes[:take])
                k = max(1, int(np.searchsorted(cum, room, side="right")))
                room -= int(cum[k - 1])
                full = full or k < take or room <= 0
                take = k
            if self._sizes:
                done, self._sizes = sum(self._sizes[:take]), self._sizes[take:]
                self._shard_bytes += done
                self._buf_bytes -= done
            self._writer.write_table(buf.slice(start, take))
            start += take
            self._in_shard += take
            if full:
                self._writer.close()
                self._writer = None

    def _buffered_table(self) -> pa.Table:
        """The buffered rows as one table in the schema, in one chunk per column (as `Table.from_pylist` of
        the rows would give: Parquet pages are cut per chunk)."""
        parts: list[pa.Table] = []
        rows: list[dict[str, Any]] = []
        for item in self._buf:
            if isinstance(item, dict):
                rows.append(item)
                continue
            if rows:
                parts.append(pa.Table.from_pylist(rows, schema=self.schema))
                rows = []
            parts.append(item.select(self.schema.names).cast(self.schema))
        if rows:
            parts.append(pa.Table.from_pylist(rows, schema=self.schema))
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts).combine_chunks()

    def close(self) -> None:
        self._flush()
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def adopt(self, path: Path) -> int:
        """Take a finished shard written elsewhere (a task's shard, already under its final name) into this
        folder and return its row count (from the Parquet footer). A hard link where the file system allows
        (a copy otherwise), so the source stays until its work folder is removed and a failure while publishing
        loses nothing. A name already present is an error, never overwritten."""
        dst = self.folder / path.name
        if dst.exists():
            raise FileExistsError(f"{dst}: a shard of this name is already in the output (not overwritten)")
        try:
            os.link(path, dst)
        except OSError:
            shutil.copyfile(path, dst)
        n = pq.ParquetFile(dst).metadata.num_rows
        self.rows += n
        self.adopted += 1
        return n

    @property
    def files(self) -> int:
        """Shards in the folder: written here and adopted."""
        return self.shards + self.adopted


class TaskShards:
    """One datatrove task's share of a stage's output, written as final shards: `kept/part-tRRRRR-NNNNN.parquet`
    and `removed/part-tRRRRR-NNNNN.parquet` under `work`, and `task_counts/RRRRR.json` (rows per source kept,
    per reason family and source removed, the shard files and `extra`) written last and atomically. The main
    process publishes them with `StageWriter.adopt_task` instead of reading every row back; the names depend
    only on the rank and the rows, so the output is the same for the same input and task count. A rank that
    runs again (a resumed stage) first removes what an earlier, unfinished attempt left."""

    def __init__(self, work: Path, rank: int, schema: pa.Schema, removed_schema: pa.Schema,
                 rows_per_shard: int = DEFAULT_ROWS_PER_SHARD, buffer_bytes: int | None = DEFAULT_BUFFER_BYTES):
        self.work, self.rank = work, rank
        stem = f"part-t{rank:05d}-"
        for part in ("kept", "removed"):
            for old in (work / part).glob(f"{stem}*.parquet"):
                old.unlink()
        self.counts_file = work / "task_counts" / f"{rank:05d}.json"
        self.counts_file.unlink(missing_ok=True)
        self.kept = ShardWriter(work / "kept", schema, rows_per_shard, buffer_bytes=buffer_bytes, stem=stem)
        self.removed = ShardWriter(work / "removed", removed_schema, rows_per_shard, buffer_bytes=buffer_bytes,
                                   stem=stem)
        self.kept_by_source: Counter[str] = Counter()
        self.removed_by: dict[str, Counter[str]] = defaultdict(Counter)

    def keep_table(self, table: pa.Table) -> None:
        if table.num_rows:
            self.kept.write_table(table)
            self.kept_by_source.update(_value_counts(table, "source"))

    def remove_table(self, table: pa.Table) -> None:
        """Removed rows that carry their `reason` (never `malformed`: quarantine is ingest's)."""
        if not table.num_rows:
            return
        self.removed.write_table(table)
        pairs = table.group_by(["reason", "source"]).aggregate([([], "count_all")])
        for reason, source, n in zip(*(pairs.column(i).to_pylist() for i in range(3)), strict=True):
            self.removed_by[reason_family(reason)][source] += n

    def close(self, extra: dict[str, Any] | None = None) -> None:
        self.kept.close()
        self.removed.close()
        names = {part: sorted(p.name for p in (self.work / part).glob(f"part-t{self.rank:05d}-*.parquet"))
                 for part in ("kept", "removed")}
        payload = {"rank": self.rank, "kept_by_source": dict(self.kept_by_source),
                   "removed_by": {r: dict(c) for r, c in self.removed_by.items()}, "files": names,
                   "rows": {"kept": self.kept.rows, "removed": self.removed.rows}, **(extra or {})}
        self.counts_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.counts_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(payload, sort_keys=True, ensure_ascii=False) + "\n")
        os.replace(tmp, self.counts_file)


def _rows_within(table: pa.Table, limit: int, max_bytes: int) -> int:
    """How many leading rows (at least 1, at most `limit`) hold at most `max_bytes` (string/binary lengths
    plus 16 bytes per value, as `budget.row_bytes` counts rows)."""
    head = table.slice(0, limit)
    sizes = pa.array([16 * head.num_columns] * head.num_rows, pa.int64())
    for col in head.columns:
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type) or pa.types.is_binary(col.type):
            sizes = pa.compute.add(sizes, pa.compute.fill_null(pa.compute.binary_length(col), 0).cast(pa.int64()))
    total = pa.compute.cumulative_sum(sizes)
    k = int(pa.compute.sum(pa.compute.less_equal(total, max_bytes)).as_py() or 0)
    return max(1, min(limit, k))


def reason_family(reason: str) -> str:
    """`malformed: invalid JSON ...` -> `malformed`; stats group reasons by this key."""
    return reason.split(":", 1)[0].strip()


class StageWriter:
    """Collects a stage's kept and removed rows, counts them, and publishes the stage folder."""

    def __init__(self, out_dir: str | Path, stage: str, *, schema: pa.Schema = SCHEMA,
                 removed_extra: list[pa.Field] | None = None, rows_per_shard: int = DEFAULT_ROWS_PER_SHARD,
                 config: dict[str, Any] | None = None):
        self.out_dir = Path(out_dir)
        self.stage = stage
        self.config = config or {}
        self.tmp = self.out_dir / f".partial-{stage}"
        if self.tmp.exists():
            shutil.rmtree(self.tmp)
        rschema = removed_schema(schema)
        for f in removed_extra or []:
            if rschema.get_field_index(f.name) < 0:
                rschema = rschema.append(f)
        self.kept = ShardWriter(self.tmp / "kept", schema, rows_per_shard)
        self.removed = ShardWriter(self.tmp / "removed", rschema, rows_per_shard)
        self.rows_in: Counter[str] = Counter()
        self.kept_by_source: Counter[str] = Counter()
        self.removed_by: dict[str, Counter[str]] = defaultdict(Counter)
        self.malformed_examples: list[str] = []
        self.started = time.time()

    def count_in(self, source: str, n: int = 1) -> None:
        """Count a row read from the inputs (call once per input row)."""
        self.rows_in[source] += n

    def count_in_table(self, table: pa.Table) -> None:
        """`count_in` of every row of a table of rows (by its `source` column)."""
        self.rows_in.update(_value_counts(table, "source"))

    def quarantine(self, record: Quarantined) -> None:
        """Count a malformed input record and send it to `removed/` with its `malformed: ...` reason."""
        row = record.to_row()
        self.count_in(row["source"])
        self.remove(row)

    def keep(self, row: dict[str, Any]) -> None:
        self.kept.write(row)
        self.kept_by_source[row["source"]] += 1

    def keep_rows(self, table: pa.Table, sizes: np.ndarray | None = None) -> None:
        """`keep` of each row of `table` in order (`ShardWriter.write_rows`: the same shards as row by row);
        `sizes`, each row's `budget.row_bytes`, where the kept writer cuts by bytes."""
        if table.num_rows:
            self.kept.write_rows(table, sizes)
            self.kept_by_source.update(_value_counts(table, "source"))

    def keep_table(self, table: pa.Table) -> None:
        """`keep` for a whole Arrow table of rows (counted per source without per-row Python)."""
        if table.num_rows:
            self.kept.write_table(table)
            self.kept_by_source.update(_value_counts(table, "source"))

    def remove_table(self, table: pa.Table) -> None:
        """`remove` for a whole Arrow table of rows that already carry `reason` (and `duplicate_of`).
        Tables holding malformed rows go row by row, so their examples are recorded as with `remove`."""
        if not table.num_rows:
            return
        reasons = table.column("reason")
        if pa.compute.any(pa.compute.starts_with(reasons, "malformed")).as_py():
            for row in table.to_pylist():
                self.remove(row)
            return
        self.removed.write_table(table)
        pairs = table.group_by(["reason", "source"]).aggregate([([], "count_all")])
        for reason, source, n in zip(*(pairs.column(i).to_pylist() for i in range(3)), strict=True):
            self.removed_by[reason_family(reason)][source] += n

    def remove(self, row: dict[str, Any], reason: str | None = None, duplicate_of: str | None = None,
               **extra: Any) -> None:
        row = dict(row)
        row["reason"] = reason or row.get("reason") or "unspecified"
        if duplicate_of is not None:
            row["duplicate_of"] = duplicate_of
        row.update(extra)
        self.removed.write(row)
        self.removed_by[reason_family(row["reason"])][row["source"]] += 1
        if row["reason"].startswith("malformed") and len(self.malformed_examples) < 20:
            meta = load_meta(row.get("meta"))
            self.malformed_examples.append(f"{meta.get('_origin', {})}: {row['reason']}")

    def adopt_task(self, work: Path, rank: int) -> dict[str, Any]:
        """Publish the final shards task `rank` wrote under `work` (`TaskShards`) without reading their rows:
        counts from its task_counts file, checked against the shards' Parquet footers. Returns the file's
        content (the task's `extra` aggregates with it)."""
        f = work / "task_counts" / f"{rank:05d}.json"
        if not f.exists():
            raise RuntimeError(f"{self.stage}: task {rank} finished without {f}; run the same command again")
        got = json.loads(f.read_text())
        for part, dst in (("kept", self.kept), ("removed", self.removed)):
            rows = sum(dst.adopt(work / part / name) for name in got["files"][part])
            if rows != got["rows"][part]:
                raise RuntimeError(f"{self.stage}: task {rank}: its {part} shards hold {rows} rows, its counts "
                                   f"file {f} says {got['rows'][part]}")
        self.kept_by_source.update(got["kept_by_source"])
        for reason, by_source in got["removed_by"].items():
            self.removed_by[reason].update(by_source)
        return got

    def close(self, extra_stats: dict[str, Any] | None = None) -> dict[str, Any]:
        """Check the accounting, write stats.json, and move the outputs into `out_dir`."""
        self.kept.close()
        self.removed.close()
        n_in = sum(self.rows_in.values())
        n_removed = sum(sum(c.values()) for c in self.removed_by.values())
        n_kept = self.kept.rows
        if n_in != n_kept + n_removed:
            raise RuntimeError(f"{self.stage}: accounting error: {n_in} rows in != {n_kept} kept + {n_removed} removed")
        stats = {
            "stage": self.stage,
            "rows_in": n_in,
            "kept": n_kept,
            "removed": n_removed,
            "removed_by_reason": {r: sum(c.values()) for r, c in sorted(self.removed_by.items())},
            "per_source": {
                s: {"rows_in": self.rows_in[s], "kept": self.kept_by_source[s],
                    "removed": {r: c[s] for r, c in sorted(self.removed_by.items()) if c[s]}}
                for s in sorted(self.rows_in)
            },
            "shards": {"kept": self.kept.files, "removed": self.removed.files},
            "config": self.config,
            **(extra_stats or {}),
        }
        if self.malformed_examples:
            stats["malformed_examples"] = self.malformed_examples
        stats = redact(stats)
        wall = round(time.time() - self.started, 3)
        (self.tmp / "stats.json").write_text(json.dumps(stats, indent=2, sort_keys=True, default=str) + "\n")
        for part in ("kept", "removed", "stats.json"):
            dst = self.out_dir / part
            if dst.is_dir():
                shutil.rmtree(dst)
            elif dst.exists():
                dst.unlink()
            (self.tmp / part).rename(dst)
        shutil.rmtree(self.tmp, ignore_errors=True)
        bad = stats["removed_by_reason"].get("malformed", 0)
        if bad:
            log.warning("%s: %d malformed rows quarantined in %s (first: %s)", self.stage, bad,
                        self.out_dir / "removed", "; ".join(self.malformed_examples[:3]))
        log.info("%s: %d rows in, %d kept, %d removed %s in %.1fs -> %s", self.stage, n_in, n_kept,
                 n_removed, stats["removed_by_reason"], wall, self.out_dir)
        return stats


def redact(value: Any) -> Any:
    """`value` with every URL string made safe to publish (`fs.shown`: no user:secret@, no query string), so
    credentials a user put in an input URL never reach stats.json."""
    if isinstance(value, str):
        return fs.shown(value) if fs.is_url(value) else value
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value


def _value_counts(table: pa.Table, column: str) -> dict[str, int]:
    """{value: count} of one string column."""
    counts = table.column(column).value_counts()
    return dict(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True))
