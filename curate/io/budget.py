"""Memory budgets in bytes, not rows: how many rows a task, a batch or a buffered write may hold when rows
are 100 characters or 60,000.

A worker holds a few copies of the rows it is working on at once (Parquet pages, Arrow arrays, Python
strings, the writer's buffer: ~6x a batch, measured), so a budget of B bytes allows B/64 bytes of raw row
text per batch (16 MiB at the default 1 GiB) and B/8 per task (128 MiB: the share a step that reads its
whole task by column may hold). Row counts still cap both (a task of tiny rows stays a sensible size). `bench/io/longcot_rss.py`
measures the resulting peak RSS per worker on long-CoT rows.
"""

from __future__ import annotations

import resource
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

DEFAULT_BUDGET_MB = 1024
MIN_BUDGET_MB = 256  # below this the interpreter and datatrove's imports alone take most of it


@dataclass(frozen=True)
class MemoryBudget:
    """Peak memory one worker process may use, and the byte sizes of the work it is given."""

    mb: int = DEFAULT_BUDGET_MB

    def __post_init__(self) -> None:
        if self.mb < MIN_BUDGET_MB:
            raise ValueError(f"memory_budget_mb: must be >= {MIN_BUDGET_MB} (got {self.mb})")

    @property
    def bytes(self) -> int:
        return self.mb << 20

    @property
    def batch_bytes(self) -> int:
        """Raw row bytes per batch (reads, buffered writes, verification batches): 1/64 of the budget, as
        converting and writing a batch holds ~6x its bytes at once (measured, bench/io/longcot_rss.py)."""
        return self.bytes // 64

    @property
    def task_bytes(self) -> int:
        """Raw row bytes per datatrove task (one work shard): 1/8 of the budget, for steps that hold their
        whole task by column (dedup's split holds the shard, the kept and removed tables and the writes)."""
        return self.bytes // 8

    def rows_per_batch(self, avg_row_bytes: float, cap: int = 4096) -> int:
        """Rows of this average size that fit in one batch (at least 1, at most `cap`)."""
        if avg_row_bytes <= 0:
            return cap
        return max(1, min(cap, int(self.batch_bytes // avg_row_bytes)))


def row_bytes(row: dict[str, Any]) -> int:
    """Approximate bytes of a row's values (string lengths plus a small constant per value)."""
    n = 0
    for v in row.values():
        if isinstance(v, (str, bytes)):
            n += len(v) + 16
        elif isinstance(v, (list, dict)):
            n += 64 + 16 * len(v)
        else:
            n += 16
    return n


def table_row_bytes(table: pa.Table) -> np.ndarray:
    """`row_bytes` of every row of an Arrow table, by column (string lengths in characters plus 16 per
    value, 64 + 16 per item of a list or struct; nulls 16): the same sizes, without a Python row."""
    import pyarrow.compute as pc

    total = np.full(table.num_rows, 16 * table.num_columns, dtype=np.int64)
    for col in table.columns:
        t = col.type
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            extra = pc.utf8_length(col)
        elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
            extra = pc.binary_length(col)
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
            extra = pc.add(pc.multiply(pc.list_value_length(col), 16), 48)
        elif pa.types.is_struct(t):
            extra = pc.if_else(pc.is_valid(col), 48 + 16 * t.num_fields, 0)
        else:
            continue
        total += pc.fill_null(extra, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    return total


def avg_row_bytes(files: Iterable[str | Path]) -> float:
    """Largest uncompressed bytes per row over the row groups of these Parquet files (0 when empty)."""
    worst = 0.0
    for f in files:
        md = pq.ParquetFile(f).metadata
        for i in range(md.num_row_groups):
            rg = md.row_group(i)
            if rg.num_rows:
                worst = max(worst, rg.total_byte_size / rg.num_rows)
    return worst


def batch_rows_of(md: pq.FileMetaData, batch_bytes: int, cap: int) -> int:
    """Rows per batch for reading a Parquet file (its metadata) within `batch_bytes` of row data."""
    worst = max((md.row_group(i).total_byte_size / md.row_group(i).num_rows
                 for i in range(md.num_row_groups) if md.row_group(i).num_rows), default=0.0)
    return cap if worst <= 0 else max(1, min(cap, int(batch_bytes // worst)))


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, in MiB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def release_arrow_memory() -> None:
    """Hand memory that Arrow's allocator keeps cached back to the OS. With the default mimalloc pool the
    resident memory of a process that reads and writes many Parquet tables keeps growing (measured: 180 ->
    320 MB collecting 1M rows, with under 30 MB allocated at any time); releasing after each task or table
    keeps it level (~200 MB)."""
    pa.default_memory_pool().release_unused()


def trim_process_memory() -> None:
    """Hand memory this process no longer uses back to the OS: Arrow's cached pages, then the C heap's free
    pages (glibc `malloc_trim`; nothing elsewhere). Called where a step that read many tables or built many
    small objects ends, so the next step of the same process does not start on top of that step's leftovers
    (measured on the dedup cluster step at 3M rows: 546 -> 486 MB once the step returned)."""
    import ctypes
    import gc

    gc.collect()
    release_arrow_memory()
    try:  # the process's own symbols (no ctypes.util.find_library: it forks ldconfig)
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to trim
        return
    trim(0)


def open_streaming(source: str | Path | IO[bytes]) -> pq.ParquetFile:
    """A Parquet file (path or binary handle) read page by page (1 MiB reads, no pre-buffering). The default
    reader reads each column chunk whole: work shards of long-response rows have row groups of hundreds of MB
    (about 100 MB more per process on the long-CoT corpus, bench/decontam/measure.py), and iterating a large
    input file that way keeps resident memory that grows with the file even after `release_arrow_memory`
    (measured on the 10M-row generated dedup corpus, 330 MiB of Parquet in 50k-row groups: 62 -> 458 MB
    read whole vs 62 -> 132 MB page by page)."""
    return pq.ParquetFile(source, pre_buffer=False, buffer_size=1 << 20)


def rows_within_bytes(pf: pq.ParquetFile, max_bytes: int, cap: int = 65536) -> int:
    """Rows per record batch so that a batch holds about `max_bytes` (uncompressed) of this file's rows."""
    md = pf.metadata
    size = sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
    return int(max(1, min(cap, max_bytes * max(md.num_rows, 1) // max(size, 1))))
