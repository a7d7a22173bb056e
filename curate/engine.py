"""datatrove glue: schema rows <-> Documents, a spaCy-free tokenizer, executors, and the runner
shared by datatrove-based stages (ingest -> datatrove steps -> deterministic kept/removed shards).

Executors (local, Slurm, Ray) come from `curate/executors/`: options checked by name, the sbatch script for
--dry-run, waiting for Slurm jobs, resumable work folders, byte budgets and the lock on the stage folder.

A row becomes a Document with `text = prompt`, `id = id` and every other column in `metadata`;
writers turn it back into the row (plus `reason` etc. for removed rows).
"""

from __future__ import annotations

import dataclasses
import difflib
import gzip
import io
import json
import logging
import math
import os
import shutil
import sys
import time
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

from cotforge.curate.executors.budget import DEFAULT_BUDGET_MB, MemoryBudget, avg_row_bytes
from cotforge.curate.executors.lock import RunLock
from cotforge.curate.executors.options import RayOptions, SlurmOptions, parse_options
from cotforge.curate.executors.ray import ensure_ray, make_ray_executor
from cotforge.curate.executors.slurm import (
    JobsFailed,
    JobsPending,
    active_jobs,
    failure_detail,
    incomplete_ranks,
    job_name,
    make_slurm_executor,
    sbatch_script,
    wait_for_steps,
)
from cotforge.curate.executors.work import IngestLog, replay, reset, reusable, work_key, write_state
from cotforge.curate.io.ingest import DEFAULT_ROWS_PER_TASK, materialize
from cotforge.curate.io.inputs import input_schema, iter_input_rows
from cotforge.curate.io.readers import InputSpec
from cotforge.curate.io.writer import StageWriter
from cotforge.curate.text.normalize import DEFAULT_NORM, NormConfig, normalize

__all__ = ["EXECUTORS", "ExecutorConfig", "JobsFailed", "JobsPending", "NormTokenizer", "RunLock", "Step", "WorkArea",
           "collect", "count_rows", "doc_to_row", "finish_stage", "make_executor", "quiet_datatrove", "row_to_doc",
           "run_datatrove_stage", "run_steps", "schema_reader", "schema_writer", "start_stage"]

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

    The same settings serve every datatrove-based stage (the recipe's `executor:` section, or the generated
    `--executor --workers --tasks --rows-per-task --executor-option KEY=VALUE --keep-work ...` flags). `options` are
    checked by name against `curate.executors.options.SlurmOptions` / `RayOptions`. Slurm stages wait for
    their jobs (`wait`), or return and are resumed by the next invocation, which reuses finished work."""

    executor: str = field(default="local", metadata={"help": "datatrove executor.", "choices": EXECUTORS})
    workers: int = field(default=2, metadata={"help": "Tasks run at once (local processes, Slurm/Ray concurrency)."})
    tasks: int | None = field(default=None, metadata={
        "help": "Split the input into about this many datatrove tasks (replaces rows_per_task)."})
    rows_per_task: int = field(default=DEFAULT_ROWS_PER_TASK, metadata={
        "help": "Most rows per datatrove task (a task also ends at the memory budget's bytes per task)."})
    options: dict[str, Any] = field(default_factory=dict, metadata={
        "help": "Option of the Slurm/Ray executor, e.g. partition=cpu or cpus_per_task=4 (repeatable; see "
                "SlurmOptions / RayOptions).", "flag": "--executor-option", "metavar": "KEY=VALUE"})
    keep_work: bool = field(default=False, metadata={
        "help": "Keep OUT/_work (work shards, datatrove logs, indexes) after publishing."})
    memory_budget_mb: int = field(default=DEFAULT_BUDGET_MB, metadata={
        "help": "Peak memory per worker process in MiB: tasks, batches and buffered writes are cut by bytes to "
                "stay under it whatever the row length."})
    wait: bool = field(default=True, metadata={
        "help": "Wait for Slurm jobs and publish; false: submit and return (JobsPending), and let a later "
                "invocation of the same command wait or publish."})
    poll_s: float = field(default=5.0, metadata={"help": "Seconds between Slurm queue checks while waiting."})
    wait_timeout_s: float | None = field(default=None, metadata={
        "help": "Stop waiting after this many seconds (the jobs keep running; rerun to pick them up)."})

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            hint = difflib.get_close_matches(str(self.executor), EXECUTORS, n=1)
            raise ValueError(f"executor: {self.executor!r} is not one of {', '.join(EXECUTORS)}"
                             + (f" (did you mean {hint[0]!r}?)" if hint else ""))
        for name in ("workers", "rows_per_task"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1 (got {getattr(self, name)})")
        if self.tasks is not None and self.tasks < 1:
            raise ValueError(f"tasks: must be >= 1 or null (got {self.tasks})")
        if not isinstance(self.options, dict):
            raise ValueError(f"options: expected a mapping of executor options, got {self.options!r}")
        if self.poll_s <= 0:
            raise ValueError(f"poll_s: must be > 0 (got {self.poll_s})")
        self.parsed_options()
        self.budget()

    def parsed_options(self) -> SlurmOptions | RayOptions | None:
        """`options` validated for this executor (ValueError naming a misspelt key)."""
        return parse_options(self.executor, self.options)

    def budget(self) -> MemoryBudget:
        return MemoryBudget(self.memory_budget_mb)

    def for_inputs(self, specs: list[InputSpec]) -> ExecutorConfig:
        """This config with `tasks` turned into rows per task for these inputs (unchanged without `tasks`)."""
        if not self.tasks:
            return self
        return dataclasses.replace(self, tasks=None, rows_per_task=max(1, math.ceil(count_rows(specs) / self.tasks)))

    def describe(self, stages: list[str] | None = None, run_dir: str | Path = "<run>") -> list[str]:
        """Dry-run lines: the executor and its options; for Slurm the sbatch script of the first stage's
        first step, as it would be submitted into `run_dir`."""
        opts = self.parsed_options()
        lines = [f"curation executor: {self.executor} ({self.workers} workers, <= {self.rows_per_task} rows and "
                 f"<= {self.budget().task_bytes >> 20} MiB of rows per task, memory budget "
                 f"{self.memory_budget_mb} MiB per worker)"]
        if opts is not None:
            lines.append(f"  options: {json.dumps(dataclasses.asdict(opts), sort_keys=True, default=str)}")
        if isinstance(opts, SlurmOptions):
            step = (stages or ["stage"])[0]
            lines.append(f"  sbatch script of {step} (one job array per datatrove step; "
                         f"{'waits for the jobs' if self.wait else 'returns after submitting, a rerun resumes'}):")
            logs = Path(run_dir) / step / "_work" / step / "logs" / f"1_{step}"
            lines += ["    " + ln for ln in sbatch_script(opts, None, logs, self.workers, step).splitlines()]
        elif isinstance(opts, RayOptions):
            lines.append(f"  ray: {opts.address or 'RAY_ADDRESS, else a local instance'}; at most "
                         f"{opts.jobs or self.workers} Ray jobs per step")
        return lines


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
    """A datatrove executor for `pipeline` over `tasks` tasks (local, Slurm or Ray); reruns skip finished ranks."""
    opts = cfg.parsed_options()
    if isinstance(opts, SlurmOptions):
        return make_slurm_executor(pipeline, tasks, logging_dir, opts, cfg.workers, name, depends=depends)
    if isinstance(opts, RayOptions):
        return make_ray_executor(pipeline, tasks, logging_dir, opts, cfg.workers, depends=depends)
    from datatrove.executor import LocalPipelineExecutor

    return LocalPipelineExecutor(pipeline=pipeline, tasks=tasks, workers=min(cfg.workers, tasks),
                                 logging_dir=str(logging_dir), depends=depends, skip_completed=True)


@dataclass
class Step:
    """One datatrove executor run of a stage: its pipeline over `tasks` tasks."""

    name: str
    pipeline: list
    tasks: int


def run_steps(work: Path, steps: list[Step], cfg: ExecutorConfig, stage: str) -> dict[str, float]:
    """Run a stage's steps in order and return only when every rank of every step finished.

    Local and Ray run step after step (seconds per step are returned). Slurm submits the steps as chained job
    arrays, or finds the arrays of this work folder still queued or running from an earlier invocation and
    does not submit them again; then waits for them (`cfg.wait`) or raises JobsPending. Every executor skips
    ranks that already finished, so a rerun after a failure runs only the rest. Logs: work/logs/<i>_<step>."""
    logs = [work / "logs" / f"{i}_{s.name}" for i, s in enumerate(steps, 1)]
    timings: dict[str, float] = {}
    if cfg.executor == "slurm":
        opts = cfg.parsed_options()
        names = [job_name(opts.job_name, _step_id(stage, s, steps), d) for s, d in zip(steps, logs, strict=True)]
        queued = active_jobs(names)
        if queued:
            log.info("%s: %d Slurm jobs of this work folder are still queued or running: waiting for them",
                     stage, len(queued))
        else:
            prev = None
            for s, d in zip(steps, logs, strict=True):
                prev = make_executor(s.pipeline, s.tasks, d, cfg, depends=prev, name=_step_id(stage, s, steps))
            prev.run()
            log.info("%s: submitted %d steps to Slurm (%s)", stage, len(steps), ", ".join(names))
        if not cfg.wait:
            raise JobsPending(f"{stage}: Slurm jobs submitted ({', '.join(names)}); run the same command again to "
                              "wait for them and publish kept/, removed/ and stats.json (finished work is reused)")
        wait_for_steps([(s.name, d, s.tasks) for s, d in zip(steps, logs, strict=True)], names, stage,
                       poll_s=cfg.poll_s, timeout_s=cfg.wait_timeout_s)
        return timings
    if cfg.executor == "ray":
        log.info("%s: ray: %s", stage, ensure_ray(cfg.parsed_options(), cfg.workers))
    for s, d in zip(steps, logs, strict=True):
        t = time.time()
        log.info("%s: step %s (%d tasks, %d workers)", stage, s.name, s.tasks, min(cfg.workers, s.tasks))
        make_executor(s.pipeline, s.tasks, d, cfg, name=_step_id(stage, s, steps)).run()
        missing = incomplete_ranks(d, s.tasks)
        if missing:
            raise JobsFailed(f"{stage}: step {s.name}: {len(missing)} of {s.tasks} tasks did not finish (ranks "
                             f"{missing[:10]}); run the same command again to rerun only them.\n"
                             f"{failure_detail(d, missing)}")
        timings[f"{s.name}_s"] = round(time.time() - t, 3)
    return timings


def _step_id(stage: str, step: Step, steps: list[Step]) -> str:
    """`stage` for a one-step stage, else `stage-step` (Slurm job names, datatrove job names)."""
    return stage if len(steps) == 1 else f"{stage}-{step.name}"


# --------------------------------------------------------------------------- stage runner


def schema_reader(folder: Path, batch_size: int = 1000) -> ParquetReader:
    """Reads work shards back as Documents, one file per task, in file order (`batch_size` rows at a time)."""
    return ParquetReader(str(folder), adapter=row_to_doc, glob_pattern="*.parquet", batch_size=batch_size)


def schema_writer(folder: Path, schema: pa.Schema, batch_size: int = 1000) -> ParquetWriter:
    """Writes Documents as schema rows, one file per rank (`NNNNN.parquet`), `batch_size` rows per batch."""
    return ParquetWriter(str(folder), output_filename="${rank}.parquet", adapter=doc_to_row, schema=schema,
                         compression="zstd", max_file_size=-1, batch_size=batch_size)


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
                config: dict | None = None, kept_extra: list[pa.Field] | None = None) -> WorkArea:
    """Lock OUT, open the stage writer and ingest `specs` into work shards of at most `exec_cfg.rows_per_task`
    rows and the budget's bytes per task (call `exec_cfg.for_inputs(specs)` first to honour `tasks`).
    `kept_extra`: columns the stage adds to its kept rows (work shards keep the input schema).

    A work folder left by an earlier invocation of the same stage on the same inputs and config (Slurm jobs
    still running or a failed task) is reused: ingest is replayed from its log, finished ranks are kept."""
    out = Path(out_dir)
    lock = RunLock(out, what="stage folder").acquire()
    try:
        work = out / "_work" / stage
        schema = input_schema(specs)
        kept_schema = schema
        for f in kept_extra or []:
            i = kept_schema.get_field_index(f.name)
            kept_schema = kept_schema.set(i, f) if i >= 0 else kept_schema.append(f)
        writer = StageWriter(out, stage, schema=kept_schema, removed_extra=removed_extra,
                             rows_per_shard=rows_per_shard, config=config)
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


def collect(writer: StageWriter, kept_dir: Path, removed_dir: Path, tasks: int,
            on_removed: Callable[[dict], dict] | None = None, batch_rows: int = 4096) -> None:
    """Copy per-rank outputs into the stage writer in rank order (= input order), `batch_rows` at a time."""
    for rank in range(tasks):
        for part, dst in ((kept_dir, writer.keep), (removed_dir, None)):
            f = part / f"{rank:05d}.parquet"
            if not f.exists():
                continue
            for batch in pq.ParquetFile(f).iter_batches(batch_size=batch_rows):
                for row in batch.to_pylist():
                    if dst is not None:
                        dst(row)
                    else:
                        writer.remove(on_removed(row) if on_removed else row)


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
    with area:
        work = area.work
        if area.tasks:
            rows = area.batch_rows(cap=1000)
            rschema = area.writer.removed.schema  # the row schema + reason/duplicate_of + the stage's extra columns
            steps = build_steps(work / "removed", rschema)
            for st in steps:  # exclusion writers the stage built: same byte-bounded batches
                w = getattr(st, "exclusion_writer", None)
                if isinstance(w, ParquetWriter):
                    w.batch_size = min(w.batch_size, rows)
            pipeline = [schema_reader(work / "input", rows), *steps, schema_writer(work / "kept", area.schema, rows)]
            run_steps(work, [Step(stage, pipeline, area.tasks)], exec_cfg, stage)
            collect(area.writer, work / "kept", work / "removed", area.tasks, batch_rows=area.batch_rows())
        return finish_stage(area, extra_stats() if extra_stats else None)
