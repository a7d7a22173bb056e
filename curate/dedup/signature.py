"""Dedup step 1 (datatrove MinHash stage 1): per-row exact keys and band signatures of problem heads."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from datatrove.data import DocumentsPipeline
from datatrove.io import get_datafolder
from datatrove.pipeline.dedup.minhash import MinhashDedupSignature
from datatrove.utils.batching import batched

from cotforge.curate.dedup.buckets import record_order
from cotforge.curate.dedup.config import DedupConfig
from cotforge.curate.dedup.core import (
    band_signatures,
    batch_keys,
    dedup_texts,
    number_keys,
    pack_order,
    priority_of,
)
from cotforge.curate.dedup.workdir import BATCH_ROWS, HEAD_DTYPE, KEY_DTYPE, input_file
from cotforge.curate.engine import NormTokenizer
from cotforge.curate.io.budget import MemoryBudget, batch_rows_of, release_arrow_memory

DEFAULT_BATCH_BYTES = MemoryBudget().batch_bytes


def first_new(keys: np.ndarray, seen: set[int]) -> np.ndarray:
    """Positions, in order, of the first row of each key of `keys` that is not in `seen`; adds the keys to `seen`
    (one set lookup per distinct key of the batch, not per row)."""
    uniq, first = np.unique(keys, return_index=True)
    u = uniq.tolist()
    fresh = np.fromiter((k not in seen for k in u), dtype=bool, count=len(u))
    seen.update(u)
    return np.sort(first[fresh]).astype(np.int64)


class ProblemSignature(MinhashDedupSignature):
    """datatrove MinHash stage 1 on problem heads, plus per-row exact keys, in batches of BATCH_ROWS rows.

    For each row: problem key = hash(normalize(prompt)), pair key = hash(norm prompt + norm response),
    number key = hash(sorted numbers of the prompt; of the statement section for code problems: core.dedup_texts), preference order (source priority, task, index). Only
    the first row of each problem key within the task gets a MinHash signature (later rows are the same
    problem; the cluster step merges keys across tasks). Rows come from the task's work shard, read by
    column (`input_folder` set: no per-row Document), or from a datatrove reader's Documents (`data`)."""

    name = "cotforge problem keys + MinHash signatures"

    def __init__(self, sig_folder: str, work: str, cfg: DedupConfig, partitions: int = 1,
                 input_folder: str | None = None):
        super().__init__(sig_folder, config=cfg.minhash_config(), language=NormTokenizer(cfg.norm))
        self.work, self.cfg, self.partitions, self.input_folder = work, cfg, partitions, input_folder

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        with self.track_time():
            batches = self._shard_batches(rank) if self.input_folder else self._doc_batches(data)
            self._sign_task(batches, rank)
            release_arrow_memory()
        return
        yield  # a generator, like every datatrove step

    def _shard_batches(self, rank: int) -> Iterator[tuple[list, list, pa.Array]]:
        """(prompts, responses, sources as an Arrow array) of the task's work shard, BATCH_ROWS at a time (fewer
        when rows are long: `batch_bytes`, set from the memory budget), by column."""
        folder = get_datafolder(self.input_folder)
        with folder.open(input_file(rank), "rb") as f:
            pf = pq.ParquetFile(f)
            rows = batch_rows_of(pf.metadata, getattr(self, "batch_bytes", DEFAULT_BATCH_BYTES), BATCH_ROWS)
            for b in pf.iter_batches(batch_size=rows, columns=["prompt", "response", "source"]):
                yield b.column(0).to_pylist(), b.column(1).to_pylist(), b.column(2)

    @staticmethod
    def _doc_batches(data: DocumentsPipeline) -> Iterator[tuple[list, list, pa.Array]]:
        """The same batches from datatrove Documents (text = prompt, metadata = the other columns)."""
        for docs in batched(data or [], BATCH_ROWS):
            yield ([d.text for d in docs], [d.metadata.get("response") for d in docs],
                   pa.array([str(d.metadata.get("source", "")) for d in docs], pa.string()))

    def _priorities(self, sources: pa.Array, prio_of: dict[str, int]) -> np.ndarray:
        """Source priority of each row (`priority_of`, once per distinct source name: a batch has a few)."""
        enc = pc.fill_null(sources, "").dictionary_encode()
        names = enc.dictionary.to_pylist()
        table = np.fromiter((prio_of.setdefault(s, priority_of(s, self.cfg.source_priority)) for s in names),
                            dtype=np.uint64, count=len(names))
        return table[enc.indices.to_numpy(zero_copy_only=False)]

    def _sign_task(self, batches: Iterator[tuple[list, list, pa.Array]], rank: int) -> None:
        """Keys for every row, signatures for new problems; writes the task's key, head and band files."""
        seen: set[int] = set()  # problem keys of the task's earlier batches
        prio_of: dict[str, int] = {}
        keys, heads, sigs = [], [], []
        start = 0
        for prompts, responses, sources in batches:
            kb = batch_keys(prompts, responses, self.cfg.norm, with_numbers=False, kernel=self.cfg.text_kernel)
            idx = np.arange(start, start + len(prompts), dtype=np.int64)
            start += len(prompts)
            prio = self._priorities(sources, prio_of)
            rec = np.empty(len(idx), dtype=KEY_DTYPE)
            rec["pkey"], rec["pair"], rec["order"] = kb.pkey, kb.pair, pack_order(prio, rank, idx)
            keys.append(rec)
            new = first_new(kb.pkey, seen)
            texts = dedup_texts([prompts[i] for i in new.tolist()], [kb.norm_prompts[i] for i in new.tolist()],
                                self.cfg)
            num = number_keys(texts)
            sig, has = band_signatures(texts, num, self.cfg)
            new_arr = new[has]
            head = np.empty(len(new_arr), dtype=HEAD_DTYPE)
            head["idx"], head["pkey"], head["num"] = idx[new_arr], kb.pkey[new_arr], num[has]
            heads.append(head)
            sigs.append(sig[has])
        self.stat_update("rows", value=start)
        self._write_keys(np.concatenate(keys) if keys else np.zeros(0, KEY_DTYPE), rank)
        head = np.concatenate(heads) if heads else np.zeros(0, HEAD_DTYPE)
        with get_datafolder(self.work).open(f"heads/{rank:05d}.npy", "wb") as f:
            np.save(f, head)
        self._write_bands(np.concatenate(sigs) if sigs else np.zeros((0, self.cfg.num_perm), np.uint64),
                          head["idx"], rank)

    def _write_keys(self, keys: np.ndarray, rank: int) -> None:
        """The task's key records, one file per key partition (pkey % partitions)."""
        part = (keys["pkey"] % np.uint64(self.partitions)).astype(np.int64)
        order = np.argsort(part, kind="stable")
        bounds = np.searchsorted(part[order], np.arange(self.partitions + 1))
        folder = get_datafolder(self.work)
        for p in range(self.partitions):
            with folder.open(f"keys/{p:04d}/{rank:05d}.bin", "wb") as f:
                f.write(keys[order[bounds[p]:bounds[p + 1]]].tobytes())

    def _write_bands(self, sig: np.ndarray, doc_idx: np.ndarray, rank: int) -> None:
        """datatrove's stage-1 files: per band, records (rows_per_band uint64, doc index uint32) sorted."""
        r = self.cfg.rows_per_band
        dtype = np.dtype([(f"field{i + 1}", "<u8") for i in range(r)] + [(f"field{r + 1}", "<u4")])
        for band in range(self.cfg.bands):
            rec = np.empty(len(doc_idx), dtype=dtype)
            for i in range(r):
                rec[f"field{i + 1}"] = sig[:, band * r + i]
            rec[f"field{r + 1}"] = doc_idx
            rec = rec[record_order([rec[n] for n in dtype.names])]
            with self.output_folder.open(f"bucket_{band:03d}/{rank:05d}.minhash.sig", "wb") as f:
                f.write(rec.tobytes())


__all__ = ["ProblemSignature"]
