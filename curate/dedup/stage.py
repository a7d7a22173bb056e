"""Problem-level dedup as datatrove steps: exact (prompt, response) pairs, then MinHash problem clusters.

Flow (each arrow is one datatrove executor run; `executor: slurm|ray` swaps the executor):

    ingest (ordered work shards, one per task; inputs sorted by --source-priority)
      -> ProblemSignature   per task, in batches of 4096 rows read by column: problem key, pair key and
                            number key per row (batch normalisation); MinHash bands for the first row of each
                            normalised prompt in the task (vectorised word 3-gram hashes; datatrove stage-1
                            band files); key records partitioned by problem key
      -> ArrayBuckets       candidate pairs of problem heads per band (numpy sort of datatrove's band files,
                            one hash range at a time; `streaming_buckets=True` uses datatrove's
                            MinhashDedupBuckets heap merge instead)
      -> ProblemCluster     one task: candidate check once per problem pair (number guard, edit guard, exact
                            n-gram Jaccard >= threshold; chunks spread over the task's CPUs), connected
                            components, then per key partition:
                            representative = first row by (source priority, input order), exact duplicates;
                            per-task decision files
      -> DedupSplit         per task, by column: keep rows of representative problems (all distinct
                            responses); remove `exact_duplicate` / `near_duplicate` rows with `duplicate_of`.

Memory: every step works per task, per band hash range or per key partition; what grows with the input is
listed in `run_dedup`. `document_steps=True` runs the same steps on datatrove Documents (ParquetReader ->
ProblemSignature; ParquetReader -> DedupFilter -> ParquetWriter), with identical outputs.
Normalisation is `curate.normalize` (numbers kept), never datatrove's digit-to-0 default.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cotforge.curate.dedup.config import DedupConfig
from cotforge.curate.dedup.core import (
    IDX_BITS,
    band_signatures,
    batch_keys,
    candidate_verdict,
    dedup_texts,
    number_keys,
    sort_specs,
)
from cotforge.curate.dedup.semantic import SemanticEmbed
from cotforge.curate.dedup.steps import (
    ArrayBuckets,
    DedupFilter,
    DedupSplit,
    ProblemCluster,
    ProblemSignature,
    QuietBuckets,
    partitions_for,
)
from cotforge.curate.engine import (
    ExecutorConfig,
    Step,
    collect_tables,
    finish_stage,
    quiet_datatrove,
    run_steps,
    schema_reader,
    schema_writer,
    start_stage,
)
from cotforge.curate.io.budget import trim_process_memory
from cotforge.curate.io.remote import remote_output

if TYPE_CHECKING:
    from cotforge.curate.context import StageContext

log = logging.getLogger(__name__)

STAGE = "dedup"


# --------------------------------------------------------------------------- pairwise view


class PairJudge:
    """The pipeline's decision for one pair of prompts, without running it: same problem key, or an LSH
    candidate (some band equal) that passes the number guard and the graded pair check (with the raw prompts,
    as the cluster step does). Used to choose defaults on the labelled set (clusters add transitivity)."""

    def __init__(self, cfg: DedupConfig | None = None):
        self.cfg = cfg or DedupConfig()

    def sketch(self, prompt: str) -> tuple[str, int, int, np.ndarray | None]:
        """(normalised prompt, problem key, number key, MinHash signature or None when it has no words)."""
        return self.sketches([prompt])[0]

    def sketches(self, prompts: list[str]) -> list[tuple[str, int, int, np.ndarray | None]]:
        """`sketch` of many prompts at once (the pipeline's batch functions, so the same values)."""
        kb = batch_keys(prompts, [None] * len(prompts), self.cfg.norm, with_numbers=False,
                        kernel=self.cfg.text_kernel)
        texts = dedup_texts(prompts, kb.norm_prompts, self.cfg)
        num = number_keys(texts)
        sig, has = band_signatures(texts, num, self.cfg)
        return [(p, int(k), int(n), sig[i] if has[i] else None)
                for i, (p, k, n) in enumerate(zip(kb.norm_prompts, kb.pkey.tolist(), num.tolist(), strict=True))]

    def is_duplicate(self, a: str, b: str) -> bool:
        """True when the pipeline would put prompts `a` and `b` in one problem cluster (pairwise)."""
        return self.verdict(a, b) is None

    def verdict(self, a: str, b: str) -> str | None:
        """None when the pipeline would merge prompts `a` and `b` (pairwise), else why not: `lsh_miss` (no
        band equal), `number_guard`, or the graded check's reason (curate/dedup/pairs/text.py)."""
        ka, kb = self.sketches([a, b])
        return self.verdict_sketches(ka, kb, a, b)

    def verdict_sketches(self, ka: tuple, kb: tuple, raw_a: str | None = None, raw_b: str | None = None) -> str | None:
        """`verdict` on precomputed sketches (for sweeps over many pairs); raw prompts give names / math tokens."""
        (ta, pa_, na, sa), (tb, pb, nb, sb) = ka, kb
        if pa_ == pb:
            return None
        if sa is None or sb is None:
            return "lsh_miss"
        if self.cfg.number_guard and na != nb:
            return "number_guard"
        r = self.cfg.rows_per_band
        if not (sa.reshape(-1, r) == sb.reshape(-1, r)).all(axis=1).any():
            return "lsh_miss"
        return candidate_verdict(ta, tb, self.cfg, raw_a, raw_b)

    def judge_sketches(self, ka: tuple, kb: tuple, raw_a: str | None = None, raw_b: str | None = None) -> bool:
        """`is_duplicate` on precomputed sketches (for sweeps over many pairs)."""
        return self.verdict_sketches(ka, kb, raw_a, raw_b) is None


# --------------------------------------------------------------------------- runner


@remote_output
def run(cfg: DedupConfig, ctx: StageContext) -> dict[str, Any]:
    """Remove exact (prompt, response) duplicates and near-duplicate problems.

    Each cluster of near-duplicate prompts keeps one problem (first by source_priority, then input order)
    with all its distinct responses; other rows go to OUT/removed with `duplicate_of`.

    The executor's `tasks` (if given) replaces its `rows_per_task` so that the input is split into ~`tasks`
    tasks; `keep_work` keeps OUT/_work. `document_steps` runs the signature and filter steps on
    datatrove Documents (slower; same output).

    What grows with the input: on disk, the work folder (shards, ~24 B of keys per row, band files); in
    memory, ingest's id registry (8 B per row, curate/io/ingest.py), the distinct candidate pairs as numbers
    (~36 B per pair: packed ends, problem keys, flags; their prompts are read CHECK_PAIRS pairs at a time) and
    the problems they merge (cluster step), and the number of key partitions / band hash ranges (one at a time
    in memory; band files are read, not mapped). The report joins removed and kept rows one hash partition at
    a time (report.JOIN_ROWS, as Arrow tables)."""
    specs, out_dir, strict, rows_per_shard = ctx.inputs, ctx.out_dir, ctx.strict, ctx.rows_per_shard
    exec_cfg, document_steps = ctx.executor, cfg.document_steps
    t0 = time.time()
    quiet_datatrove()
    if cfg.semantic and cfg.semantic_judge:  # an unreachable judge is a usage error here, not a failed step later
        from cotforge.curate.text.judge import make_judge

        make_judge(cfg).check()
    specs = sort_specs(specs, cfg.source_priority)
    exec_cfg = exec_cfg.for_inputs(specs)
    if exec_cfg.rows_per_task > 1 << IDX_BITS:  # a row's place in its task is packed in IDX_BITS bits
        raise ValueError(f"dedup: rows per task {exec_cfg.rows_per_task} is above the {1 << IDX_BITS} a task can hold; "
                         "use more tasks")
    area = start_stage(specs, out_dir, STAGE, exec_cfg, strict=strict, rows_per_shard=rows_per_shard,
                       config={"dedup": cfg.describe(), "inputs": [s.path for s in specs],
                               "executor": exec_cfg.executor, "workers": exec_cfg.workers,
                               "rows_per_task": exec_cfg.rows_per_task})
    with area:  # a failed or pending (Slurm) stage releases the lock and keeps its work folder for a rerun
        trim_process_memory()  # ingest's id registry and read buffers: the steps below start without them
        work = area.work
        cluster_stats: dict[str, Any] = {}
        timings: dict[str, float] = {"ingest_s": round(time.time() - t0, 3)}
        if area.tasks:
            t1 = time.time()
            n_rows = sum(pq.ParquetFile(f).metadata.num_rows for f in area.shards)
            timings.update(_run_steps(work, area.tasks, partitions_for(n_rows), cfg, exec_cfg, area.schema,
                                      area.writer.removed.schema, document_steps))
            timings["datatrove_s"] = round(time.time() - t1, 3)
            cluster_stats = json.loads((work / "cluster_stats.json").read_text())
            t2 = time.time()
            trim_process_memory()
            collect_tables(area.writer, work, area.tasks, area.exec_cfg.budget().batch_bytes)
            timings["collect_s"] = round(time.time() - t2, 3)
        timings["total_s"] = round(time.time() - t0, 3)
        stats = finish_stage(area, {"dedup": {**cluster_stats, "tasks": area.tasks, "timings": timings}})
    from cotforge.curate.dedup.report import write_dedup_report

    write_dedup_report(out_dir, stats)  # what was merged and why: dedup_report.{md,html}
    return stats






def _run_steps(work: Path, n_tasks: int, partitions: int, cfg: DedupConfig, exec_cfg: ExecutorConfig,
               schema: pa.Schema, rschema: pa.Schema, document_steps: bool = False) -> dict[str, float]:
    """The four datatrove executor runs. Local: one after the other, logging progress and timing each;
    Slurm: chained job arrays, waited for (or resumed by a rerun; `engine.run_steps`). Returns seconds per step."""
    sign = ProblemSignature(str(work / "sigs"), str(work), cfg, partitions,
                            input_folder=None if document_steps else str(work / "input"))
    sign.batch_bytes = exec_cfg.budget().batch_bytes  # long rows: fewer rows per batch
    split = ([schema_reader(work / "input"),
              DedupFilter(str(work), exclusion_writer=schema_writer(work / "removed", rschema)),
              schema_writer(work / "kept", schema)] if document_steps else [DedupSplit(str(work), schema, rschema)])
    steps = [
        ("signatures", [schema_reader(work / "input"), sign] if document_steps else [sign], n_tasks),
        ("buckets", [QuietBuckets(str(work / "sigs"), str(work / "buckets"), config=cfg.minhash_config())
                     if cfg.streaming_buckets else ArrayBuckets(str(work / "sigs"), str(work / "buckets"), cfg)],
         cfg.bands if cfg.streaming_buckets or exec_cfg.executor != "local" else min(cfg.bands, exec_cfg.workers)),
        *([("semantic", [SemanticEmbed(str(work), cfg)], n_tasks)] if cfg.semantic else []),
        ("clusters", [ProblemCluster(str(work), n_tasks, cfg, partitions)], 1),
        ("filter", split, n_tasks),
    ]
    timings = run_steps(work, [Step(name, pipeline, tasks) for name, pipeline, tasks in steps], exec_cfg, STAGE)
    if not (work / "cluster_stats.json").exists() or not (work / "decisions").is_dir():
        raise RuntimeError(f"dedup: datatrove steps finished but left no cluster stats (see {work / 'logs'})")
    return timings
