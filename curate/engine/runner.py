"""The generic datatrove stage: ingest, `[reader, *stage steps, kept writer]` on the configured executor,
then deterministic OUT/kept, OUT/removed and OUT/stats.json. Stages with more than one executor step (dedup,
decontamination) build their own steps on the same work area."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
from datatrove.pipeline.writers import ParquetWriter

from cotforge.curate.engine.area import collect_tables, finish_stage, start_stage
from cotforge.curate.engine.docs import schema_reader, schema_writer
from cotforge.curate.engine.executor import ExecutorConfig, Step, run_steps
from cotforge.curate.io.readers import InputSpec


def run_datatrove_stage(specs: list[InputSpec], out_dir: str | Path, stage: str,
                        build_steps: Callable[[Path, pa.Schema], list], *,
                        removed_extra: list[pa.Field] | None = None, exec_cfg: ExecutorConfig | None = None,
                        strict: bool = False, rows_per_shard: int = 50_000, config: dict | None = None,
                        extra_stats: Callable[[], dict] | None = None,
                        kept_schema: Callable[[pa.Schema], pa.Schema] | None = None) -> dict:
    """Ingest `specs`, run `[reader, *build_steps(removed_dir, removed_schema), kept_writer]` with
    datatrove, and publish deterministic OUT/kept, OUT/removed and OUT/stats.json.

    `build_steps(removed_dir, removed_schema)` returns the stage's datatrove steps; filters among
    them should use `schema_writer(removed_dir, removed_schema)` as their exclusion writer. `kept_schema` maps
    the input schema to the output's when the steps add columns (metadata keys of the same names)."""
    exec_cfg = (exec_cfg or ExecutorConfig()).for_inputs(specs)
    area = start_stage(specs, out_dir, stage, exec_cfg, removed_extra=removed_extra, strict=strict,
                       rows_per_shard=rows_per_shard, config=config, kept_schema=kept_schema)
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
            pipeline = [schema_reader(work / "input", rows), *steps, schema_writer(work / "kept", area.writer.kept.schema, rows)]
            run_steps(work, [Step(stage, pipeline, area.tasks)], exec_cfg, stage)
            collect_tables(area.writer, work, area.tasks, area.exec_cfg.budget().batch_bytes)
        return finish_stage(area, extra_stats() if extra_stats else None)
