"""datatrove glue shared by the curation stages: rows <-> Documents (`docs`), executors and running a stage's
steps on them (`executor`, with `options`, `slurm`, `ray`), resumable work folders (`work`), a stage's work area
and publishing (`area`), the generic one-step stage runner (`runner`) and quiet datatrove logs (`logs`).

Importing the package installs the quiet task logger, also in executor worker processes (they import it when
they unpickle a stage's steps)."""

from cotforge.curate.engine.area import WorkArea, adopt_task_shards, collect_tables, finish_stage, start_stage
from cotforge.curate.engine.docs import NormTokenizer, doc_to_row, row_to_doc, schema_reader, schema_writer
from cotforge.curate.engine.executor import (
           EXECUTORS,
           ExecutorConfig,
           Step,
           count_rows,
           make_executor,
           run_steps,
)
from cotforge.curate.engine.logs import install_quiet_task_logger, quiet_datatrove
from cotforge.curate.engine.runner import run_datatrove_stage
from cotforge.curate.engine.slurm import JobsFailed, JobsPending

install_quiet_task_logger()

__all__ = ["EXECUTORS", "ExecutorConfig", "JobsFailed", "JobsPending", "NormTokenizer", "Step", "WorkArea",
           "adopt_task_shards", "collect_tables", "count_rows", "doc_to_row", "finish_stage", "make_executor", "quiet_datatrove",
           "row_to_doc", "run_datatrove_stage", "run_steps", "schema_reader", "schema_writer", "start_stage"]
