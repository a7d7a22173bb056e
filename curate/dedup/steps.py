"""The datatrove steps of problem-level dedup (each one executor run; see stage.py for the flow), re-exported from
`signature`, `buckets`, `cluster` and `split` (one module per step; `workdir` holds the shared layout).

The work-folder layout is described in `workdir`.
"""

from __future__ import annotations

from cotforge.curate.dedup.buckets import ArrayBuckets, QuietBuckets
from cotforge.curate.dedup.cluster import ProblemCluster
from cotforge.curate.dedup.signature import ProblemSignature
from cotforge.curate.dedup.split import DedupFilter, DedupSplit, load_decisions, lookup_ids
from cotforge.curate.dedup.workdir import DECISION_DTYPE, HEAD_DTYPE, KEY_DTYPE, partitions_for

__all__ = ["ProblemSignature", "QuietBuckets", "ArrayBuckets", "ProblemCluster", "DedupSplit", "DedupFilter",
           "load_decisions", "lookup_ids", "partitions_for", "KEY_DTYPE", "HEAD_DTYPE", "DECISION_DTYPE"]
