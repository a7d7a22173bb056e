"""Dedup step 4: split every work shard into kept and removed rows by the cluster step's decisions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from datatrove.data import DocumentsPipeline
from datatrove.io import get_datafolder
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.filters.base_filter import BaseFilter

from cotforge.curate.dedup.core import unpack_order
from cotforge.curate.dedup.workdir import DECISION_DTYPE, input_file, key_groups
from cotforge.curate.engine import quiet_datatrove
from cotforge.curate.io.budget import release_arrow_memory


def _row_group_starts(pf: pq.ParquetFile) -> np.ndarray:
    sizes = [pf.metadata.row_group(i).num_rows for i in range(pf.metadata.num_row_groups)]
    return np.concatenate(([0], np.cumsum(sizes)))


def lookup_ids(input_folder: str, targets: np.ndarray) -> list[str]:
    """Row ids of preference-order keys, reading only the row groups that hold them."""
    rank, idx = unpack_order(targets)
    out = np.empty(len(targets), dtype=object)
    folder = get_datafolder(input_folder)
    for r, sel in key_groups(rank):
        with folder.open(input_file(int(r)), "rb") as f:
            pf = pq.ParquetFile(f)
            starts = _row_group_starts(pf)
            group = np.searchsorted(starts, idx[sel], side="right") - 1
            groups = np.unique(group)
            offset = np.concatenate(([0], np.cumsum(starts[groups + 1] - starts[groups])[:-1]))
            local = offset[np.searchsorted(groups, group)] + idx[sel] - starts[group]
            ids = pf.read_row_groups(groups.tolist(), columns=["id"]).column(0)
            out[sel] = ids.take(pa.array(local)).to_pylist()
    return out.tolist()


def load_decisions(work: str, rank: int) -> tuple[np.ndarray, list[str], list[str]]:
    """(row indices, reasons, duplicate_of ids) of the task's removed rows, by row index."""
    dec = np.fromfile(Path(work) / "decisions" / f"{rank:05d}.bin", dtype=DECISION_DTYPE)
    dec = dec[np.argsort(dec["idx"], kind="stable")]
    reasons = np.where(dec["near"] == 1, "near_duplicate", "exact_duplicate").tolist()
    return dec["idx"].astype(np.int64), reasons, lookup_ids(str(Path(work) / "input"), dec["target"])


class DedupSplit(PipelineStep):
    """Per task: split the work shard into kept and removed rows (with `reason`, `duplicate_of`) by column,
    with pyarrow (no per-row Python); writes `kept/RRRRR.parquet` and `removed/RRRRR.parquet`."""

    name = "cotforge dedup split"
    type = "🔻 - FILTER"

    def __init__(self, work: str, schema: pa.Schema, removed_schema: pa.Schema):
        super().__init__()
        self.work, self.schema, self.removed_schema = work, schema, removed_schema

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        with self.track_time():
            idx, reasons, dups = load_decisions(self.work, rank)
            table = pq.read_table(Path(self.work) / "input" / input_file(rank))
            if len(idx) and idx[-1] >= table.num_rows:
                raise RuntimeError(f"dedup split, task {rank}: {table.num_rows} rows but decisions reach row "
                                   f"{idx[-1] + 1}")
            drop = np.zeros(table.num_rows, dtype=bool)
            drop[idx] = True
            kept = table.filter(pa.array(~drop))
            removed = table.take(pa.array(idx))
            removed = removed.append_column("reason", pa.array(reasons, pa.string()))
            removed = removed.append_column("duplicate_of", pa.array(dups, pa.string()))
            self._write(kept, "kept", self.schema, rank)
            self._write(removed, "removed", self.removed_schema, rank)
            del table, kept, removed
            release_arrow_memory()
            self.stat_update("kept", value=len(drop) - len(idx))
            self.stat_update("removed", value=len(idx))
        return
        yield

    def _write(self, table: pa.Table, part: str, schema: pa.Schema, rank: int) -> None:
        cols = [table.column(f.name) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
                for f in schema]
        out = Path(self.work) / part
        out.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_arrays(cols, schema=schema), out / f"{rank:05d}.parquet", compression="zstd")


class DedupFilter(BaseFilter):
    """The same decisions as a datatrove filter on Documents (per row), for pipelines built from datatrove
    readers/writers: drops marked rows with `reason` and `duplicate_of`; keeps the rest."""

    name = "cotforge dedup filter"

    def __init__(self, work: str, exclusion_writer=None):
        super().__init__(exclusion_writer)
        self.work = work
        self._removed: dict[int, tuple[str, str]] = {}
        self._i = 0

    def filter(self, doc) -> bool | tuple[bool, str]:
        i = self._i
        self._i += 1
        hit = self._removed.get(i)
        if hit is None:
            return True
        doc.metadata["duplicate_of"] = hit[1]
        return False, hit[0]

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        quiet_datatrove()
        idx, reasons, dups = load_decisions(self.work, rank)
        self._removed = dict(zip(idx.tolist(), zip(reasons, dups, strict=True), strict=True))
        self._i = 0
        yield from super().run(data, rank, world_size)
        expected = max(self._removed, default=-1) + 1
        if self._i < expected:
            raise RuntimeError(f"dedup filter, task {rank}: saw {self._i} rows but decisions reach row {expected}")



__all__ = ["DedupSplit", "DedupFilter", "load_decisions", "lookup_ids"]
