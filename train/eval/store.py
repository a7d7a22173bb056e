"""Samples on disk, for resume: the chunked parquet store, the settings fingerprint (`gen_key`), and which
samples are still to generate (`plan_chunks`) with their per-chunk seeds."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cotforge.train.eval.config import EvalConfig
from cotforge.train.eval.items import EvalItem

SAMPLE_SCHEMA = pa.schema([
    ("benchmark", pa.string()), ("item_id", pa.string()), ("item_index", pa.int64()),
    ("sample_idx", pa.int64()), ("domain", pa.string()), ("prompt", pa.string()), ("response", pa.string()),
    ("answer", pa.string()), ("finish_reason", pa.string()), ("n_tokens", pa.int64()),
    ("correct", pa.bool_()), ("score", pa.float64()), ("status", pa.string()), ("extracted", pa.string()),
    ("tests_passed", pa.int64()), ("tests_total", pa.int64()), ("seed", pa.int64()), ("gen_key", pa.string()),
])


def gen_key(cfg: EvalConfig) -> str:
    """Fingerprint of what shapes a sample's distribution (model, sampling, prompt format), not of k."""
    parts = [cfg.model, cfg.temperature, cfg.top_p, cfg.top_k, cfg.repetition_penalty, cfg.max_tokens,
             cfg.seed, cfg.math_suffix, cfg.yarn_factor, cfg.yarn_original_max_positions]
    return hashlib.blake2b(json.dumps(parts, default=str).encode(), digest_size=8).hexdigest()


class SampleStore:
    """Samples in `OUT/samples.parquet` plus chunk files `OUT/samples.parts/*.parquet` from an unfinished run."""

    def __init__(self, out: Path):
        self.out = out
        self.final = out / "samples.parquet"
        self.parts = out / "samples.parts"

    def files(self) -> list[Path]:
        """Every file holding samples, merged file first."""
        return ([self.final] if self.final.exists() else []) + sorted(self.parts.glob("part-*.parquet"))

    def load(self) -> list[dict[str, Any]]:
        """All stored samples (a partial file left by a kill is skipped: chunks are written atomically)."""
        rows: list[dict[str, Any]] = []
        for f in self.files():
            try:
                rows.extend(pq.read_table(f).to_pylist())
            except (pa.ArrowInvalid, OSError) as e:
                raise ValueError(f"{f}: unreadable samples file ({e}); delete it to regenerate its samples") from e
        return rows

    def clear(self) -> None:
        """Remove stored samples (for --overwrite)."""
        for f in self.files():
            f.unlink()

    def append(self, rows: list[dict[str, Any]]) -> Path:
        """Write one chunk atomically (tmp file + rename) so a kill never leaves a half chunk."""
        self.parts.mkdir(parents=True, exist_ok=True)
        n = len(list(self.parts.glob("part-*.parquet")))
        path = self.parts / f"part-{n:06d}-{os.getpid()}-{time.time_ns() % 10**9:09d}.parquet"
        tmp = path.with_suffix(".tmp")
        pq.write_table(pa.Table.from_pylist(rows, schema=SAMPLE_SCHEMA), tmp, compression="zstd")
        os.replace(tmp, path)
        return path

    def consolidate(self, rows: list[dict[str, Any]]) -> None:
        """Write `rows` (sorted) as samples.parquet and drop the chunk files."""
        rows = sorted(rows, key=lambda r: (r["benchmark"], r["item_index"], r["sample_idx"]))
        tmp = self.final.with_suffix(".tmp")
        pq.write_table(pa.Table.from_pylist(rows, schema=SAMPLE_SCHEMA), tmp, compression="zstd")
        os.replace(tmp, self.final)
        for f in sorted(self.parts.glob("part-*.parquet")) + sorted(self.parts.glob("part-*.tmp")):
            f.unlink()  # merged chunks, and half-written ones a kill left behind
        if self.parts.exists() and not any(self.parts.iterdir()):
            self.parts.rmdir()


def check_resumable(rows: list[dict[str, Any]], key: str, out: Path) -> None:
    """Stored samples from other settings would mix two distributions: refuse with a clear message."""
    other = sorted({r["gen_key"] for r in rows if r["gen_key"] != key})
    if other:
        raise ValueError(f"{out}: holds samples generated with other settings (gen_key {other} vs {key}: "
                         f"model, sampling or prompt format changed); use another -o or --overwrite")


def chunk_seed(seed: int, benchmark: str, item_id: str, start: int) -> int:
    """Per-chunk sampling seed, fixed by the chunk's first item and sample index (so resumes reproduce)."""
    h = hashlib.blake2b(f"{seed}|{benchmark}|{item_id}|{start}".encode(), digest_size=4).digest()
    return int.from_bytes(h, "little") & 0x7FFFFFFF


def plan_chunks(items: Sequence[EvalItem], k: int, have: dict[tuple[str, str], set[int]],
                chunk_items: int) -> list[tuple[list[EvalItem], int, int]]:
    """[(items, first_sample_idx, n)] still to generate: items missing samples [start, k) are grouped in order
    (same start) into chunks of `chunk_items`. Already-stored sample indices are not regenerated."""
    todo: list[tuple[EvalItem, int]] = []
    for it in items:
        got = have.get((it.benchmark, it.id), set())
        start = 0
        while start in got:
            start += 1
        if start < k:
            todo.append((it, start))
    chunks: list[tuple[list[EvalItem], int, int]] = []
    for it, start in todo:
        if chunks and chunks[-1][1] == start and len(chunks[-1][0]) < chunk_items:
            chunks[-1][0].append(it)
        else:
            chunks.append(([it], start, k - start))
    return chunks
