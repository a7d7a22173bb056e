"""`cotforge curate verify`: label every row with `correct`, `verify_status`, `tests_passed`, `tests_total`.

Math rows are checked against `answer`, code rows run against `tests` (or a LeetCode `check(...)` test in
meta["tests"]) in the sandbox. The stage removes nothing: every row goes to OUT/kept (malformed input rows
go to OUT/removed as usual); OUT/stats.json counts verdicts per status and per source.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import click
import pyarrow as pa

from cotforge.curate.cli_common import input_options, specs_from_cli
from cotforge.curate.executors.budget import DEFAULT_BUDGET_MB, MemoryBudget, row_bytes
from cotforge.curate.io.inputs import input_schema, iter_input_rows
from cotforge.curate.io.readers import InputError, InputSpec, Quarantined
from cotforge.curate.io.writer import StageWriter
from cotforge.curate.verify import verify_rows
from cotforge.curate.verify.sandbox import SandboxLimits

log = logging.getLogger(__name__)

STAGE = "verify"
VERIFY_FIELDS = [
    pa.field("correct", pa.bool_()),
    pa.field("verify_status", pa.string()),
    pa.field("tests_passed", pa.int32()),
    pa.field("tests_total", pa.int32()),
]


@dataclass
class VerifyConfig:
    """Settings of the verify stage (recorded in stats.json)."""

    think_end: str | None = "</think>"
    workers: int | None = None
    math_timeout_s: float = 5.0
    batch_rows: int = 2048
    limits: SandboxLimits | None = None
    recompute: bool = False  # also verify rows whose source shipped a `correct` label (ingest presets)
    memory_budget_mb: int = field(default=DEFAULT_BUDGET_MB, metadata={
        "help": "Peak memory of the stage in MiB: a batch also ends at the budget's bytes (long rows)."})


def output_schema(base: pa.Schema) -> pa.Schema:
    """The input schema with the four verify columns (replacing earlier ones of the same name)."""
    for f in VERIFY_FIELDS:
        i = base.get_field_index(f.name)
        base = base.set(i, f) if i >= 0 else base.append(f)
    return base


def _flush(batch: list[dict[str, Any]], cfg: VerifyConfig, writer: StageWriter,
           by_status: Counter[str], by_source: dict[str, Counter[str]]) -> None:
    """Verify one batch of rows and keep them with their verdict columns. Rows whose source shipped a
    correctness label (`correct` set at ingest, no verdict yet) keep it: status `shipped`, not re-run."""
    shipped = [not cfg.recompute and r.get("correct") is not None and r.get("verify_status") is None for r in batch]
    todo = [r for r, s in zip(batch, shipped, strict=True) if not s]
    done = iter(verify_rows(todo, think_end=cfg.think_end, workers=cfg.workers, limits=cfg.limits,
                            math_timeout_s=cfg.math_timeout_s) if todo else [])
    verdicts = [{"correct": r["correct"], "verify_status": "shipped", "tests_passed": None, "tests_total": None}
                if s else next(done) for r, s in zip(batch, shipped, strict=True)]
    for row, v in zip(batch, verdicts, strict=True):
        row.update(v)
        by_status[v["verify_status"]] += 1
        by_source[row["source"]][v["verify_status"]] += 1
        writer.keep(row)


def run_verify(specs: list[InputSpec], out_dir: str | Path, cfg: VerifyConfig | None = None, *,
               strict: bool = False, rows_per_shard: int = 50_000) -> dict[str, Any]:
    """Run the verify stage over `specs` into `out_dir`; returns the stats dict."""
    cfg = cfg or VerifyConfig()
    cfg.limits = cfg.limits or SandboxLimits()
    config = asdict(cfg)
    writer = StageWriter(out_dir, STAGE, schema=output_schema(input_schema(specs)), rows_per_shard=rows_per_shard,
                         config={"inputs": [s.path for s in specs], **config})
    by_status: Counter[str] = Counter()
    by_source: dict[str, Counter[str]] = defaultdict(Counter)
    batch: list[dict[str, Any]] = []
    batch_bytes, limit = 0, MemoryBudget(cfg.memory_budget_mb).batch_bytes
    writer.kept.buffer_bytes = writer.removed.buffer_bytes = limit  # row groups bounded by bytes too
    for row in iter_input_rows(specs, strict=strict):
        if isinstance(row, Quarantined):
            writer.quarantine(row)
            continue
        writer.count_in(row["source"])
        batch.append(row)
        batch_bytes += row_bytes(row)
        if len(batch) >= cfg.batch_rows or batch_bytes >= limit:  # rows or bytes, whichever comes first
            _flush(batch, cfg, writer, by_status, by_source)
            batch, batch_bytes = [], 0
    if batch:
        _flush(batch, cfg, writer, by_status, by_source)
    extra = {"verify": {"by_status": dict(sorted(by_status.items())),
                        "by_source": {s: dict(sorted(c.items())) for s, c in sorted(by_source.items())}}}
    return writer.close(extra)


@click.command("verify")
@input_options
@click.option("--think-end", default="</think>", show_default=True,
              help="Marker that ends the reasoning block; the answer is read after it. Empty: whole response.")
@click.option("--workers", type=int, default=None, help="Parallel processes (default: CPU count).")
@click.option("--math-timeout", type=float, default=5.0, show_default=True, help="Seconds per math verdict.")
@click.option("--wall-s", type=float, default=10.0, show_default=True, help="Wall-clock limit per sandboxed run.")
@click.option("--cpu-s", type=float, default=5.0, show_default=True, help="CPU-time limit per sandboxed run.")
@click.option("--memory-mb", type=int, default=1024, show_default=True, help="Address-space limit per run.")
def verify_command(inputs, out, maps, source_names, domain, strict, rows_per_shard, think_end, workers,
                   math_timeout, wall_s, cpu_s, memory_mb) -> None:
    """Add `correct`, `verify_status`, `tests_passed`, `tests_total` to every row of INPUTS:
    math rows by `answer` (math-verify), code rows by `tests` (sandboxed execution)."""
    specs = specs_from_cli(inputs, maps, source_names, domain)
    cfg = VerifyConfig(think_end=think_end or None, workers=workers, math_timeout_s=math_timeout,
                       limits=SandboxLimits(wall_s=wall_s, cpu_s=cpu_s, memory_mb=memory_mb))
    try:
        stats = run_verify(specs, out, cfg, strict=strict, rows_per_shard=rows_per_shard)
    except InputError as e:
        raise click.ClickException(str(e)) from e
    by = ", ".join(f"{k} {v}" for k, v in stats["verify"]["by_status"].items())
    click.echo(f"{stats['rows_in']} rows in, {stats['kept']} verified ({by}) -> {out}")
