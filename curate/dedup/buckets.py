"""Dedup step 2 (datatrove MinHash stage 2): candidate pairs of problem heads from equal band hashes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from datatrove.data import DocumentsPipeline
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.dedup.minhash import MinhashDedupBuckets

from cotforge.curate.dedup.config import DedupConfig
from cotforge.curate.engine import quiet_datatrove

BUCKET_CHUNK = 1 << 18  # band records per hash-range chunk in the bucket step
ALL_PAIRS_RUN = 32  # runs of equal band hashes up to this long give all their pairs, longer ones neighbours


class QuietBuckets(MinhashDedupBuckets):
    """datatrove MinHash stage 2 (streaming heap merge of sorted band files), with tidy logging.
    Constant memory but pure Python per record; used with `DedupConfig(streaming_buckets=True)`."""

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1):
        quiet_datatrove()
        return super().run(data, rank, world_size)


class ArrayBuckets(PipelineStep):
    """MinHash stage 2 with numpy: per band, the sorted band files of all tasks are read one hash range
    at a time (ranges of ~BUCKET_CHUNK records, cut by searchsorted on each file's first hash), sorted, and
    each run of equal band hashes gives candidate pairs (`_run_pairs`), in datatrove's `.dups` format (<4I)."""

    name = "cotforge MinHash buckets (numpy)"
    type = "🫂 - DEDUP"

    def __init__(self, sig_folder: str, out_folder: str, cfg: DedupConfig):
        super().__init__()
        self.sig_folder, self.out_folder, self.cfg = sig_folder, out_folder, cfg

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        with self.track_time():
            for band in range(rank, self.cfg.bands, world_size):  # fewer tasks than bands: each takes several
                self._band(band)
        return
        yield

    def _band(self, band: int) -> None:
        r = self.cfg.rows_per_band
        dtype = band_dtype(r)
        files = sorted(Path(self.sig_folder, f"bucket_{band:03d}").glob("*.minhash.sig"))
        ranks = [int(f.name.split(".")[0]) for f in files]
        total = sum(f.stat().st_size for f in files) // dtype.itemsize
        n_chunks = max(1, -(-total // BUCKET_CHUNK))
        edges = np.array([int(x) for x in np.linspace(0, 1 << 61, n_chunks + 1)], dtype=np.uint64)
        cuts = [file_cuts(f, dtype, edges) for f in files]  # one read per file, then only its cut positions
        out = Path(self.out_folder)
        out.mkdir(parents=True, exist_ok=True)
        n_pairs = 0
        with open(out / f"{band:05d}_00.dups", "wb") as fo:
            for c in range(n_chunks):
                parts, fids = [], []
                for cut, rk, f in zip(cuts, ranks, files, strict=True):
                    a, b = int(cut[c]), int(cut[c + 1])
                    if b > a:
                        parts.append(np.fromfile(f, dtype=dtype, count=b - a, offset=a * dtype.itemsize))
                        fids.append(np.full(b - a, rk, dtype=np.uint32))
                if not parts:
                    continue
                rec, fid = np.concatenate(parts), np.concatenate(fids)
                order = record_order([rec[f"h{i}"] for i in range(r)] + [fid, rec["doc"]])
                rec, fid = rec[order], fid[order]
                same = np.ones(len(rec) - 1, dtype=bool)
                for i in range(r):
                    col = rec[f"h{i}"]
                    same &= col[1:] == col[:-1]
                a, b = _run_pairs(same)
                pairs = np.stack([fid[a], rec["doc"][a], fid[b], rec["doc"][b]], axis=1).astype("<u4")
                fo.write(pairs.tobytes())
                n_pairs += len(pairs)
        self.stat_update("total_matches", value=n_pairs)


def band_dtype(rows_per_band: int) -> np.dtype:
    """One record of a datatrove band file: the band's `rows_per_band` hashes and the document index."""
    return np.dtype([(f"h{i}", "<u8") for i in range(rows_per_band)] + [("doc", "<u4")])


def file_cuts(path: Path, dtype: np.dtype, edges: np.ndarray) -> np.ndarray:
    """For each value of `edges`, the first record of the sorted band file `path` whose first hash is >= it,
    from one plain read of the file (no memmap: searching a mapped file makes its pages resident, so RSS
    would follow the band's size). Memory: one file at a time."""
    rec = np.fromfile(path, dtype=dtype)
    return np.searchsorted(np.ascontiguousarray(rec["h0"]), edges, side="left").astype(np.int64)


def record_order(keys: list[np.ndarray]) -> np.ndarray:
    """The order that sorts records by the tuple of `keys` (first key first), as `np.lexsort(keys[::-1])`
    gives it for records whose full tuples are distinct: one argsort of the first key, then a lexsort of only
    the records whose first key is shared (equal band values are a few records in thousands)."""
    first = keys[0]
    order = np.argsort(first, kind="stable")
    if len(keys) == 1 or len(order) < 2:
        return order
    fs = first[order]
    tie = fs[1:] == fs[:-1]
    if not tie.any():
        return order
    in_run = np.zeros(len(order), dtype=bool)
    in_run[1:] |= tie
    in_run[:-1] |= tie
    at = np.flatnonzero(in_run)
    run = np.cumsum(np.r_[True, ~tie])[at]  # ascending with the first key, so runs keep their places
    sub = order[at]
    order[at] = sub[np.lexsort([k[sub] for k in reversed(keys[1:])] + [run])]
    return order


def _run_pairs(same: np.ndarray, all_pairs_upto: int = ALL_PAIRS_RUN) -> tuple[np.ndarray, np.ndarray]:
    """Candidate pairs (record a, record b) in sorted records, where same[k] says record k+1 has record k's
    band hash. Runs of up to `all_pairs_upto` equal records give all their pairs, so which problem pairs
    get checked does not depend on how many head records each problem has or their order (that is, on the
    task split): a pair rejected by a guard cannot hide another. Longer runs give neighbour pairs only."""
    n = len(same) + 1
    start = np.r_[True, ~same]
    run_id = np.cumsum(start) - 1
    run_len = np.bincount(run_id)[run_id]
    small = run_len <= all_pairs_upto
    a_parts, b_parts = [np.flatnonzero(same & ~small[:-1])], []
    b_parts.append(a_parts[0] + 1)
    for d in range(1, min(int(run_len[small].max(initial=1)), all_pairs_upto)):
        k = np.flatnonzero(small[: n - d] & (run_id[: n - d] == run_id[d:]))
        a_parts.append(k)
        b_parts.append(k + d)
    return np.concatenate(a_parts), np.concatenate(b_parts)


__all__ = ["QuietBuckets", "ArrayBuckets", "BUCKET_CHUNK", "ALL_PAIRS_RUN", "band_dtype", "file_cuts", "record_order"]
