"""The `ingest` stage: read any inputs (JSONL, CSV, Parquet, Arrow, dataset folders, Hub datasets, local or
remote) into the one row schema; malformed rows are quarantined in OUT/removed with their file and line.
The readers are `curate/io/`; this module is only the stage's door."""

from __future__ import annotations

import time
from dataclasses import dataclass

from cotforge.curate.context import StageContext
from cotforge.curate.io import fs
from cotforge.curate.io.budget import table_row_bytes
from cotforge.curate.io.columns import ColumnBatch, in_schema
from cotforge.curate.io.inputs import input_items, input_schema
from cotforge.curate.io.readers import Quarantined
from cotforge.curate.io.remote import remote_output
from cotforge.curate.io.writer import StageWriter


@dataclass
class IngestConfig:
    """The ingest stage has no options of its own: what to read comes from the context (a recipe's
    `sources:` or the command line's inputs, `--map`, `--source-name`, `--domain`, `--strict`)."""


@remote_output
def run(cfg: IngestConfig, ctx: StageContext) -> dict:
    """Read INPUTS (JSONL, JSONL.gz, Parquet, dataset dirs, hf:org/name[:split]) into the one row schema;
    malformed rows go to OUT/removed with their file and line.

    stats.json records per source the preset used and how it was chosen (`presets`), next to the row counts."""
    specs = ctx.inputs
    presets: dict = {}
    writer = StageWriter(ctx.out_dir, "ingest", schema=input_schema(specs), rows_per_shard=ctx.rows_per_shard,
                         config={"inputs": [fs.shown(s.path) for s in specs], "strict": ctx.strict,
                                 "presets": presets})
    t0 = time.time()
    for item in input_items(specs, ctx.strict, report=presets):
        if isinstance(item, Quarantined):
            writer.quarantine(item)
        elif isinstance(item, ColumnBatch):  # a raw Parquet batch read by column: the same rows, by table
            for q in item.quarantined:
                writer.quarantine(q)
            if item.table is not None and item.table.num_rows:
                writer.count_in_table(item.table)
                writer.keep_rows(in_schema(item.table, writer.kept.schema), table_row_bytes(item.table))
        else:
            writer.count_in(item["source"])
            writer.keep(item)
    return writer.close({"ingest_s": round(time.time() - t0, 3)})
