"""Ingest: read any inputs into work shards of the one schema, quarantining bad rows.

Every datatrove-based stage starts here: inputs are streamed in order into fixed-size Parquet
work shards (`00000.parquet`, ...). One shard is one datatrove task, so rank order is input order
and the stage's final output order is deterministic whatever the number of workers.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import click
import pyarrow as pa

from curate.cli_common import input_options, specs_from_cli
from curate.readers import InputError, InputSpec, Origin, Quarantined
from curate.schema import SCHEMA
from curate.stage import ShardWriter, StageWriter, input_schema, iter_input_rows

log = logging.getLogger(__name__)

DEFAULT_ROWS_PER_TASK = 20_000


def materialize(specs: list[InputSpec], work_dir: Path, writer: StageWriter, *, strict: bool = False,
                rows_per_task: int = DEFAULT_ROWS_PER_TASK, schema: pa.Schema | None = None) -> list[Path]:
    """Stream all inputs into `work_dir/NNNNN.parquet`; count every row in `writer`, send bad ones
    to its `removed/`. Returns the work shard paths (one per datatrove task)."""
    schema = schema or input_schema(specs)
    shards = ShardWriter(work_dir, schema, rows_per_task)
    seen_ids: dict[str, int] = {}
    t0, n = time.time(), 0
    for row in iter_input_rows(specs, strict=strict):
        n += 1
        if isinstance(row, Quarantined):
            writer.quarantine(row)
            continue
        if not isinstance(row.get("prompt"), str) or not row["prompt"].strip():
            # datatrove readers silently skip documents without text: quarantine them here instead
            origin = Origin(str(row.get("source", "")), n, "row")
            writer.quarantine(Quarantined(origin, "malformed: field 'prompt' is empty", row,
                                          str(row.get("source", ""))))
            continue
        writer.count_in(row["source"])
        k = seen_ids.get(row["id"], 0)
        if k:  # a given id repeats: keep ids unique so duplicate_of links stay unambiguous
            row["id"] = f"{row['id']}~{k + 1}"
        seen_ids[row["id"].split("~")[0]] = k + 1
        shards.write(row)
        if n % 100_000 == 0:
            log.info("ingest: %d rows read (%.0f rows/s)", n, n / max(time.time() - t0, 1e-9))
    shards.close()
    files = sorted(work_dir.glob("*.parquet"))
    # ShardWriter names files part-NNNNN; datatrove ranks read them in sorted order.
    log.info("ingest: %d rows -> %d work shards in %.1fs", n, len(files), time.time() - t0)
    return files


def run_ingest(specs: list[InputSpec], out_dir: str | Path, *, strict: bool = False,
               rows_per_shard: int = 50_000) -> dict:
    """The `ingest` stage on its own: inputs -> schema shards in OUT/kept, bad rows in OUT/removed."""
    writer = StageWriter(out_dir, "ingest", schema=input_schema(specs), rows_per_shard=rows_per_shard,
                         config={"inputs": [s.path for s in specs], "strict": strict})
    for row in iter_input_rows(specs, strict=strict):
        if isinstance(row, Quarantined):
            writer.quarantine(row)
        else:
            writer.count_in(row["source"])
            writer.keep(row)
    return writer.close()


@click.command("ingest")
@input_options
def ingest_command(inputs, out, maps, source_names, domain, strict, rows_per_shard) -> None:
    """Read INPUTS (JSONL, JSONL.gz, Parquet, dataset dirs, hf:org/name[:split]) into the one schema."""
    specs = specs_from_cli(inputs, maps, source_names, domain)
    try:
        stats = run_ingest(specs, out, strict=strict, rows_per_shard=rows_per_shard)
    except InputError as e:
        raise click.ClickException(str(e)) from e
    click.echo(f"{stats['rows_in']} rows in, {stats['kept']} kept, {stats['removed']} removed -> {out}")


__all__ = ["materialize", "run_ingest", "ingest_command", "SCHEMA"]
