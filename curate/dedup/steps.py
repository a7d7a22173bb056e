"""The datatrove steps of problem-level dedup (each one executor run; see stage.py for the flow), re-exported from
`signature`, `buckets`, `cluster` and `split` (one module per step; `workdir` holds the shared layout).

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

from cotforge.curate.dedup.buckets import ArrayBuckets, QuietBuckets
from cotforge.curate.dedup.cluster import ProblemCluster
from cotforge.curate.dedup.signature import ProblemSignature
from cotforge.curate.dedup.split import DedupFilter, DedupSplit, load_decisions, lookup_ids
from cotforge.curate.dedup.workdir import DECISION_DTYPE, HEAD_DTYPE, KEY_DTYPE, partitions_for

__all__ = ["ProblemSignature", "QuietBuckets", "ArrayBuckets", "ProblemCluster", "DedupSplit", "DedupFilter",
           "load_decisions", "lookup_ids", "partitions_for", "KEY_DTYPE", "HEAD_DTYPE", "DECISION_DTYPE"]
