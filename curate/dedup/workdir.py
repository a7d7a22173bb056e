"""The dedup work folder: record dtypes, file names and partition sizes shared by the datatrove steps.

Work-folder layout (every file is per task or per partition, so no step holds all rows in memory):

    input/part-RRRRR.parquet        ordered work shards (curate/ingest.py), one per task
    sigs/bucket_BBB/RRRRR.minhash.sig   datatrove stage-1 band files of the problem heads (sorted records)
    heads/RRRRR.npy                 HEAD_DTYPE per problem head of the task (index, problem key, number key)
    keys/PPPP/RRRRR.bin             KEY_DTYPE per row, partitioned by problem key (pkey % partitions)
    buckets/BBBBB_00.dups           candidate pairs (datatrove `.dups` format: rank, idx, rank, idx)
    decisions/RRRRR.bin             DECISION_DTYPE per removed row of the task
    kept/RRRRR.parquet, removed/RRRRR.parquet   per-task outputs, collected in rank order
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

KEY_DTYPE = np.dtype([("pkey", "<u8"), ("pair", "<u8"), ("order", "<u8")])
HEAD_DTYPE = np.dtype([("idx", "<u4"), ("pkey", "<u8"), ("num", "<u8")])
DECISION_DTYPE = np.dtype([("idx", "<u4"), ("near", "u1"), ("target", "<u8")])
BATCH_ROWS = 4096  # rows per batch in the signature step
PARTITION_ROWS = 1 << 17  # rows per key partition in the cluster step (bounds its memory)


def partitions_for(rows: int) -> int:
    """Number of key partitions for `rows` input rows (each partition holds ~PARTITION_ROWS rows)."""
    return max(1, -(-rows // PARTITION_ROWS))


def input_file(rank: int) -> str:
    """Work shard of task `rank` (ingest names them part-RRRRR.parquet; datatrove readers sort them)."""
    return f"part-{rank:05d}.parquet"


def key_groups(keys: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(key, positions of that key in `keys`) for each distinct key in increasing order, from one stable
    sort (a scan per key would cost O(len(keys) x keys))."""
    if not len(keys):
        return
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    cuts = np.flatnonzero(np.r_[True, sk[1:] != sk[:-1], True])
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        yield int(sk[a]), order[a:b]



__all__ = ["KEY_DTYPE", "HEAD_DTYPE", "DECISION_DTYPE", "BATCH_ROWS", "PARTITION_ROWS", "partitions_for", "input_file",
           "key_groups"]
