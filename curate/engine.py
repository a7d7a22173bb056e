"""datatrove glue: schema rows <-> Documents, a spaCy-free tokenizer, executors, and the runner
shared by datatrove-based stages (ingest -> datatrove steps -> deterministic kept/removed shards).

A row becomes a Document with `text = prompt`, `id = id` and every other column in `metadata`;
writers turn it back into the row (plus `reason` etc. for removed rows).
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import logging
import math
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from datatrove.executor.base import PipelineExecutor
from datatrove.pipeline.readers import ParquetReader
from datatrove.pipeline.writers import ParquetWriter
from datatrove.utils.word_tokenizers import WordTokenizer

from cotforge.curate.io.ingest import DEFAULT_ROWS_PER_TASK, materialize
from cotforge.curate.io.inputs import input_schema, iter_input_rows
from cotforge.curate.io.readers import InputSpec
from cotforge.curate.io.writer import StageWriter
from cotforge.curate.text.normalize import DEFAULT_NORM, NormConfig, normalize

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- tidy datatrove logging


def quiet_datatrove(drop: str = "") -> None:
    """Route datatrove's loguru output to stderr at WARNING+ only (COTFORGE_DATATROVE_LOG_LEVEL overrides,
    e.g. DEBUG for -vv); per-task log files under the work folder keep everything."""
    level = os.environ.get("COTFORGE_DATATROVE_LOG_LEVEL", "WARNING")
    try:
        from loguru import logger

        for hid, h in list(logger._core.handlers.items()):
            if getattr(h, "_name", "") in ("<stderr>", drop):
                logger.remove(hid)
        logger.add(sys.stderr, level=level, format="{time:HH:mm:ss} {level} datatrove: {message}")
    except Exception:  # loguru internals changed: leave datatrove's logging alone
        pass


def install_quiet_task_logger() -> None:
    """datatrove's `add_task_logger` sends INFO to stderr for every task (pipeline listing, progress);
    wrap it so stderr gets WARNING+ only (per-task log files are untouched). Runs at import, so it also
    applies in executor worker processes, which import this module when they unpickle our steps."""
    try:
        import datatrove.executor.base as base
    except ImportError:
        return
    original = base.add_task_logger
    if getattr(original, "_cotforge_quiet", False):
        return

    def quiet_add_task_logger(*args, **kwargs):
        real, sys.stderr = sys.stderr, io.StringIO()  # swallows its stderr handler and "Launching ..." line
        try:
            logfile = original(*args, **kwargs)
        finally:
            sink, sys.stderr = sys.stderr, real
        quiet_datatrove(drop=repr(sink))
        return logfile

    def quiet_close_task_logger(logfile):
        close_original(logfile)  # re-adds datatrove's default DEBUG stderr handler
        quiet_datatrove()

    close_original = base.close_task_logger
    quiet_add_task_logger._cotforge_quiet = True  # type: ignore[attr-defined]
    base.add_task_logger = quiet_add_task_logger
    base.close_task_logger = quiet_close_task_logger


install_quiet_task_logger()


class NormTokenizer(WordTokenizer):
    """Word tokenizer for datatrove steps: cotforge's normalisation, then whitespace split.

    Replaces spaCy (datatrove's default for English) and keeps numbers, unlike datatrove's
    default text normalisation."""

    def __init__(self, norm: NormConfig = DEFAULT_NORM):
        super().__init__("xx")
        self.norm = norm

    def word_tokenize(self, text: str) -> list[str]:
        out = normalize(text, self.norm)
        return out.split(" ") if out else []

    def sent_tokenize(self, text: str) -> list[str]:
        return [text]

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        return [(0, len(text))]


# --------------------------------------------------------------------------- adapters


def row_to_doc(self, data: dict, path: str, id_in_file: int | str) -> dict:
    """ParquetReader adapter: a schema row -> Document fields (text = prompt)."""
    meta = {k: v for k, v in data.items() if k not in ("prompt", "id")}
    return {"text": data["prompt"], "id": data["id"], "metadata": meta}


def doc_to_row(self, document) -> dict:
    """ParquetWriter adapter: Document -> schema row (unknown metadata keys are dropped by the schema)."""
    row = dict(document.metadata)
    row["id"] = document.id
    row["prompt"] = document.text
    if "filter_reason" in row and not row.get("reason"):
        row["reason"] = row.pop("filter_reason")
    return row


# --------------------------------------------------------------------------- executors


EXECUTORS = ("local", "slurm", "ray")


@dataclass
class ExecutorConfig:
    """How datatrove runs a stage: `local` (default), `slurm` or `ray`, with their options.

    The same settings (and flags) serve every datatrove-based stage: the recipe's `executor:` section, or
    `--executor --workers --tasks --rows-per-task --executor-option KEY=VALUE --keep-work` on the command line.
    `options` go to the Slurm/Ray executor as they are (their meaning is datatrove's)."""

    executor: str = field(default="local", metadata={"help": "datatrove executor.", "choices": EXECUTORS})
    workers: int = field(default=2, metadata={"help": "Tasks run at once (local processes, Slurm/Ray concurrency)."})
    tasks: int | None = field(default=None, metadata={
        "help": "Split the input into about this many datatrove tasks (replaces rows_per_task)."})
    rows_per_task: int = field(default=DEFAULT_ROWS_PER_TASK, metadata={
        "help": "Rows per datatrove task (one ordered work shard each)."})
    options: dict[str, Any] = field(default_factory=dict, metadata={
        "help": "Option of the Slurm/Ray executor, e.g. partition=cpu or cpus_per_task=4 (repeatable).",
        "flag": "--executor-option", "metavar": "KEY=VALUE"})
    keep_work: bool = field(default=False, metadata={
        "help": "Keep OUT/_work (work shards, datatrove logs, indexes), e.g. to inspect or rerun Slurm/Ray tasks."})

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            raise ValueError(f"executor: {self.executor!r} is not one of {', '.join(EXECUTORS)}")
        for name in ("workers", "rows_per_task"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1 (got {getattr(self, name)})")
        if self.tasks is not None and self.tasks < 1:
            raise ValueError(f"tasks: must be >= 1 or null (got {self.tasks})")
        if not isinstance(self.options, dict):
            raise ValueError(f"options: expected a mapping of executor options, got {self.options!r}")

    def for_inputs(self, specs: list[InputSpec]) -> ExecutorConfig:
        """This config with `tasks` turned into rows per task for these inputs (unchanged without `tasks`)."""
        if not self.tasks:
            return self
        return dataclasses.replace(self, tasks=None, rows_per_task=max(1, math.ceil(count_rows(specs) / self.tasks)))


def count_rows(specs: list[InputSpec]) -> int:
    """Cheap row count for `tasks`: Parquet metadata, JSONL line counts (other inputs are read)."""
    total = 0
    for spec in specs:
        p = Path(spec.path)
        if p.is_file() and p.name.endswith(".parquet"):
            total += pq.ParquetFile(p).metadata.num_rows
        elif p.is_file() and p.name.endswith((".jsonl", ".jsonl.gz")):
            opener = gzip.open if p.name.endswith(".gz") else open
            with opener(p, "rb") as fh:
                total += sum(1 for line in fh if line.strip())
        else:
            total += sum(1 for _ in iter_input_rows([spec]))
    return total


def make_executor(pipeline: list, tasks: int, logging_dir: str | Path, cfg: ExecutorConfig,
                  depends: PipelineExecutor | None = None, name: str = "cotforge") -> PipelineExecutor:
    """A datatrove executor for `pipeline` over `tasks` tasks (local, Slurm or Ray)."""
    if cfg.executor == "local":
        from datatrove.executor import LocalPipelineExecutor

        return LocalPipelineExecutor(pipeline=pipeline, tasks=tasks, workers=min(cfg.workers, tasks),
                                     logging_dir=str(logging_dir), depends=depends, skip_completed=False)
    if cfg.executor == "slurm":
        from datatrove.executor import SlurmPipelineExecutor

        opts = {"time": "04:00:00", "partition": "cpu", "job_name": name, **cfg.options}
        return SlurmPipelineExecutor(pipeline=pipeline, tasks=tasks, workers=cfg.workers,
                                     logging_dir=str(logging_dir), depends=depends, **opts)
    if cfg.executor == "ray":
        from datatrove.executor import RayPipelineExecutor

        return RayPipelineExecutor(pipeline=pipeline, tasks=tasks, workers=cfg.workers,
                                   logging_dir=str(logging_dir), depends=depends, **cfg.options)
    raise ValueError(f"unknown executor {cfg.executor!r} (expected local, slurm or ray)")


# --------------------------------------------------------------------------- stage runner


def schema_reader(folder: Path) -> ParquetReader:
    """Reads work shards back as Documents, one file per task, in file order."""
    return ParquetReader(str(folder), adapter=row_to_doc, glob_pattern="*.parquet")


def schema_writer(folder: Path, schema: pa.Schema) -> ParquetWriter:
    """Writes Documents as schema rows, one file per rank (`NNNNN.parquet`)."""
    return ParquetWriter(str(folder), output_filename="${rank}.parquet", adapter=doc_to_row, schema=schema,
                         compression="zstd", max_file_size=-1)


def collect(writer: StageWriter, kept_dir: Path, removed_dir: Path, tasks: int,
            on_removed: Callable[[dict], dict] | None = None) -> None:
    """Copy per-rank outputs into the stage writer in rank order (= input order)."""
    for rank in range(tasks):
        for part, dst in ((kept_dir, writer.keep), (removed_dir, None)):
            f = part / f"{rank:05d}.parquet"
            if not f.exists():
                continue
            for batch in pq.ParquetFile(f).iter_batches(batch_size=4096):
                for row in batch.to_pylist():
                    if dst is not None:
                        dst(row)
                    else:
                        writer.remove(on_removed(row) if on_removed else row)


@dataclass
class WorkArea:
    """A datatrove stage in progress: its work folder, the stage writer and the ordered work shards
    (one per task) that ingest wrote. `start_stage` opens one, `finish_stage` publishes it."""

    out: Path
    work: Path
    schema: pa.Schema
    writer: StageWriter
    shards: list[Path]
    exec_cfg: ExecutorConfig

    @property
    def tasks(self) -> int:
        return len(self.shards)


def start_stage(specs: list[InputSpec], out_dir: str | Path, stage: str, exec_cfg: ExecutorConfig, *,
                removed_extra: list[pa.Field] | None = None, strict: bool = False, rows_per_shard: int = 50_000,
                config: dict | None = None) -> WorkArea:
    """Reset OUT/_work/<stage>, open the stage writer and ingest `specs` into work shards of
    `exec_cfg.rows_per_task` rows (call `exec_cfg.for_inputs(specs)` first to honour `tasks`)."""
    out = Path(out_dir)
    work = out / "_work" / stage
    if work.exists():
        shutil.rmtree(work)
    schema = input_schema(specs)
    writer = StageWriter(out, stage, schema=schema, removed_extra=removed_extra, rows_per_shard=rows_per_shard,
                         config=config)
    shards = materialize(specs, work / "input", writer, strict=strict, rows_per_task=exec_cfg.rows_per_task,
                         schema=schema)
    return WorkArea(out, work, schema, writer, shards, exec_cfg)


def finish_stage(area: WorkArea, extra: dict | None = None) -> dict:
    """Publish OUT/kept, OUT/removed and OUT/stats.json, then delete the work folder (unless keep_work)."""
    stats = area.writer.close(extra)
    if not area.exec_cfg.keep_work:
        shutil.rmtree(area.work, ignore_errors=True)
        parent = area.out / "_work"
        if parent.exists() and not any(parent.iterdir()):
            parent.rmdir()
    return stats


def check_completions(logs: Path, tasks: int, stage: str) -> None:
    """Raise when some datatrove ranks left no completion file (a local failure; Slurm/Ray still queued)."""
    missing = [r for r in range(tasks) if not (logs / "completions" / f"{r:05d}").exists()]
    if missing:
        raise RuntimeError(f"{stage}: {len(missing)} of {tasks} datatrove tasks did not finish (see {logs}); "
                           "with slurm/ray wait for the jobs, then rerun with keep_work")


def run_datatrove_stage(specs: list[InputSpec], out_dir: str | Path, stage: str,
                        build_steps: Callable[[Path, pa.Schema], list], *,
                        removed_extra: list[pa.Field] | None = None, exec_cfg: ExecutorConfig | None = None,
                        strict: bool = False, rows_per_shard: int = 50_000, config: dict | None = None,
                        extra_stats: Callable[[], dict] | None = None) -> dict:
    """Ingest `specs`, run `[reader, *build_steps(removed_dir, removed_schema), kept_writer]` with
    datatrove, and publish deterministic OUT/kept, OUT/removed and OUT/stats.json.

    `build_steps(removed_dir, removed_schema)` returns the stage's datatrove steps; filters among
    them should use `schema_writer(removed_dir, removed_schema)` as their exclusion writer."""
    exec_cfg = (exec_cfg or ExecutorConfig()).for_inputs(specs)
    area = start_stage(specs, out_dir, stage, exec_cfg, removed_extra=removed_extra, strict=strict,
                       rows_per_shard=rows_per_shard, config=config)
    work = area.work
    if area.tasks:
        rschema = area.writer.removed.schema  # the row schema + reason/duplicate_of + the stage's extra columns
        pipeline = [schema_reader(work / "input"), *build_steps(work / "removed", rschema),
                    schema_writer(work / "kept", area.schema)]
        make_executor(pipeline, area.tasks, work / "logs", exec_cfg, name=stage).run()
        check_completions(work / "logs", area.tasks, stage)
        collect(area.writer, work / "kept", work / "removed", area.tasks)
    return finish_stage(area, extra_stats() if extra_stats else None)
