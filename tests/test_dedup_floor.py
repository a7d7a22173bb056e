"""bench.dedup.floor: its levels run, and the work it times is the stage's (signatures and candidate pairs equal to
the signature and bucket steps' on the same rows)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.dedup import floor
from bench.dedup.speed import generate

ROWS = 400


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("floor") / "gen.parquet"
    generate(path, ROWS, seed=3)
    return path


@pytest.mark.parametrize("procs", [1, 2])
@pytest.mark.parametrize("level", floor.LEVELS)
def test_levels_run_and_keep_every_row(corpus, tmp_path, level: str, procs: int) -> None:
    res = floor.run_procs(level, str(corpus), str(tmp_path), procs)
    assert res["rows"] == ROWS
    assert sum(pq.ParquetFile(f).metadata.num_rows for f in tmp_path.glob("kept-*.parquet")) == ROWS
    assert (res["heads"] > 0) == (level != "io")
    assert (res["pairs"] > 0) == (level == "buckets")


def _stage_outputs(rows: pa.Table, work: Path) -> tuple[dict[int, np.ndarray], dict[int, set]]:
    """The signature step's band values per head (row index -> 100 values) and the bucket step's candidate
    pairs per band, on `rows` as one task of rank 0."""
    from cotforge.curate.dedup.buckets import ArrayBuckets, band_dtype
    from cotforge.curate.dedup.config import DedupConfig
    from cotforge.curate.dedup.signature import ProblemSignature

    cfg = DedupConfig()
    sign = ProblemSignature(str(work / "sigs"), str(work), cfg)
    batches = [(b.column("problem").to_pylist(), b.column("solution").to_pylist(),
                pa.array([floor.SOURCE] * b.num_rows, pa.string())) for b in rows.to_batches(max_chunksize=4096)]
    sign._sign_task(iter(batches), 0)
    r = cfg.rows_per_band
    sigs: dict[int, np.ndarray] = {}
    for band in range(cfg.bands):
        rec = np.fromfile(work / "sigs" / f"bucket_{band:03d}" / "00000.minhash.sig", dtype=band_dtype(r))
        for row in rec:
            sigs.setdefault(int(row["doc"]), np.zeros(cfg.num_perm, np.uint64))[band * r:(band + 1) * r] = \
                [row[f"h{i}"] for i in range(r)]
    list(ArrayBuckets(str(work / "sigs"), str(work / "buckets"), cfg).run())
    pairs = {}
    for band in range(cfg.bands):
        dups = np.fromfile(work / "buckets" / f"{band:05d}_00.dups", dtype="<u4").reshape(-1, 4)
        pairs[band] = {(min(a, b), max(a, b)) for a, b in dups[:, [1, 3]].tolist()}
    return sigs, pairs


def test_sig_level_signatures_and_pairs_equal_the_stage(corpus, tmp_path) -> None:
    rows = pq.read_table(corpus)
    want_sigs, want_pairs = _stage_outputs(rows, tmp_path)
    signer = floor.Signer(0)
    heads, sigs = [], []
    at = 0
    for b in rows.to_batches(max_chunksize=150):  # other batches than the stage's: the same heads
        h, s = signer.sign_batch(b.column("problem").to_pylist(), b.column("solution").to_pylist(),
                                 pa.array([floor.SOURCE] * b.num_rows, pa.string()), at)
        at += b.num_rows
        heads.append(h)
        sigs.append(s)
    ids, sig = np.concatenate(heads), np.concatenate(sigs)
    assert sorted(ids.tolist()) == sorted(want_sigs) and len(ids) > ROWS // 3
    for i, row in zip(ids.tolist(), sig, strict=True):
        assert np.array_equal(row, want_sigs[i])
    keys = floor.band_hashes(sig, signer.cfg)
    got = 0
    for band in range(signer.cfg.bands):
        a, b = floor.band_pairs(keys[band], ids)
        assert {(min(x, y), max(x, y)) for x, y in zip(a.tolist(), b.tolist(), strict=True)} == want_pairs[band]
        got += len(a)
    assert got > 0
    (tmp_path / "out").mkdir()
    assert floor.run_procs("buckets", str(corpus), str(tmp_path / "out"), 1)["pairs"] == got  # one process: one task


def test_fork_server_preloads_what_the_stage_preloads() -> None:
    from cotforge.curate.engine.executor import FORKSERVER_PRELOAD

    assert set(FORKSERVER_PRELOAD) <= set(floor.PRELOAD["sig"])
