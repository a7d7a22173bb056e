"""A datatrove stage's work area: the lock on OUT, the stage writer, the input ingested into work shards (one
per task), and publishing: per-task kept/removed shards copied into the stage writer in rank order
(`collect_tables`) or, where the tasks wrote final shards (`io.writer.TaskShards`), taken in as they are
(`adopt_task_shards`), then OUT/kept, OUT/removed and OUT/stats.json."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from cotforge.curate.engine.executor import ExecutorConfig
from cotforge.curate.engine.work import IngestLog, replay, reset, reusable, work_key, write_state
from cotforge.curate.io.budget import avg_row_bytes, open_streaming, release_arrow_memory, rows_within_bytes
from cotforge.curate.io.ingest import materialize
from cotforge.curate.io.inputs import input_schema
from cotforge.curate.io.lock import RunLock
from cotforge.curate.io.readers import InputSpec
from cotforge.curate.io.writer import StageWriter

log = logging.getLogger(__name__)


@dataclass
class WorkArea:
    """A datatrove stage in progress: its work folder, the stage writer, the ordered work shards (one per
    task) and the lock on OUT. `start_stage` opens one (reusing a finished ingest), `finish_stage`
    publishes it; as a context manager it releases the lock when the stage fails, keeping the work."""

    out: Path
    work: Path
    schema: pa.Schema
    writer: StageWriter
    shards: list[Path]
    exec_cfg: ExecutorConfig
    lock: RunLock | None = None
    resumed: bool = False

    @property
    def tasks(self) -> int:
        return len(self.shards)

    def batch_rows(self, cap: int = 4096) -> int:
        """Rows per batch that keep a batch of these work shards within the memory budget."""
        return self.exec_cfg.budget().rows_per_batch(avg_row_bytes(self.shards), cap)

    def __enter__(self) -> WorkArea:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.lock is not None:
            self.lock.release()


def start_stage(specs: list[InputSpec], out_dir: str | Path, stage: str, exec_cfg: ExecutorConfig, *,
                removed_extra: list[pa.Field] | None = None, strict: bool = False, rows_per_shard: int = 50_000,
                config: dict | None = None, kept_schema: Callable[[pa.Schema], pa.Schema] | None = None) -> WorkArea:
    """Lock OUT, open the stage writer and ingest `specs` into work shards of at most `exec_cfg.rows_per_task`
    rows and the budget's bytes per task (call `exec_cfg.for_inputs(specs)` first to honour `tasks`).

    A work folder left by an earlier invocation of the same stage on the same inputs and config (Slurm jobs
    still running or a failed task) is reused: ingest is replayed from its log, finished ranks are kept."""
    out = Path(out_dir)
    lock = RunLock(out, what="stage folder").acquire()
    try:
        work = out / "_work" / stage
        schema = input_schema(specs)
        writer = StageWriter(out, stage, schema=kept_schema(schema) if kept_schema else schema,
                             removed_extra=removed_extra, rows_per_shard=rows_per_shard,
                             config=config)
        budget = exec_cfg.budget()
        writer.kept.buffer_bytes = writer.removed.buffer_bytes = budget.batch_bytes  # bounded row groups
        cut = {"rows_per_task": exec_cfg.rows_per_task, "bytes_per_task": budget.task_bytes,
               "batch_bytes": budget.batch_bytes, "strict": strict}
        key = work_key(stage, specs, schema, cut, config)
        resumed = reusable(work, key)
        if resumed:
            log.info("%s: reusing the work folder %s (ingest done; finished tasks are kept)", stage, work)
        else:
            reset(work)
            write_state(work, {"key": key, "ingested": False})
            ingest = IngestLog(work / "ingest", writer.removed.schema)
            materialize(specs, work / "input", ingest, strict=strict, rows_per_task=exec_cfg.rows_per_task,
                        schema=schema, bytes_per_task=budget.task_bytes, buffer_bytes=budget.batch_bytes)
            ingest.save()
            write_state(work, {"key": key, "ingested": True})
        replay(work / "ingest", writer)
        shards = sorted((work / "input").glob("*.parquet"))
        return WorkArea(out, work, schema, writer, shards, exec_cfg, lock, resumed)
    except BaseException:
        lock.release()
        raise


def finish_stage(area: WorkArea, extra: dict | None = None) -> dict:
    """Publish OUT/kept, OUT/removed and OUT/stats.json, delete the work folder (unless keep_work), unlock."""
    try:
        stats = area.writer.close(extra)
        if not area.exec_cfg.keep_work:
            shutil.rmtree(area.work, ignore_errors=True)
            parent = area.out / "_work"
            if parent.exists() and not any(parent.iterdir()):
                parent.rmdir()
        return stats
    finally:
        if area.lock is not None:
            area.lock.release()


def adopt_task_shards(writer: StageWriter, work: Path, tasks: int) -> list[dict]:
    """Publish the final shards every task wrote (`TaskShards`), in rank order, without reading their rows;
    returns each task's counts file (with the aggregates the stage's tasks added)."""
    return [writer.adopt_task(work, rank) for rank in range(tasks)]


def collect_tables(writer: StageWriter, work: Path, tasks: int, max_bytes: int) -> None:
    """Per-task `work/kept` and `work/removed` shards into the stage writer in rank order (= input order), in
    record batches of about 2 x `max_bytes`, so long-response rows do not make this process hold a whole shard.
    The shards written do not depend on the batch size (`ShardWriter.write_table` cuts at fixed places)."""
    for rank in range(tasks):
        for part, dst in (("kept", writer.keep_table), ("removed", writer.remove_table)):
            f = work / part / f"{rank:05d}.parquet"
            if f.exists():
                pf = open_streaming(f)
                for batch in pf.iter_batches(batch_size=rows_within_bytes(pf, 2 * max_bytes)):
                    dst(pa.Table.from_batches([batch]))
                    release_arrow_memory()
