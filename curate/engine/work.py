"""Resumable work folders: a datatrove stage's `OUT/_work/<stage>/` survives an invocation that did not
finish (Slurm jobs still queued, a failed or killed task) and the next invocation of the same stage on the
same inputs reuses it instead of deleting it.

`_state.json` holds the work key (a hash of the stage, its config, the inputs' sizes and mtimes, the schema
and how work was cut) and whether ingest finished. Ingest reports into an `IngestLog` instead of the stage
writer: it saves the row counts per source, the presets used and the quarantined rows, and `replay` feeds
them to the stage writer of any later invocation in the order they came, so a resumed stage publishes the
same bytes as one that ran in one go.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cotforge.curate.io import fs
from cotforge.curate.io.readers import InputSpec, Quarantined
from cotforge.curate.io.writer import ShardWriter, StageWriter

log = logging.getLogger(__name__)

STATE = "_state.json"


def input_fingerprint(specs: list[InputSpec]) -> list[Any]:
    """Per input: its spec and, for local files and folders, the size and mtime of every file (cheap; a
    changed input gives a new work key). Remote inputs count by their URL and spec only."""
    out: list[Any] = []
    for s in specs:
        entry: dict[str, Any] = {"path": fs.shown(s.path), "spec": {k: str(v) for k, v in vars(s).items() if k != "path"}}
        p = Path(s.path)
        if not fs.is_url(s.path) and p.exists():
            files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file())
            entry["files"] = [(str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files[:10_000]]
        out.append(entry)
    return out


def work_key(stage: str, specs: list[InputSpec], schema: pa.Schema, cut: dict[str, Any],
             config: dict[str, Any] | None) -> str:
    """Hash of everything that decides a work folder's content."""
    text = json.dumps([stage, input_fingerprint(specs), schema.to_string(), cut, config], sort_keys=True,
                      default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def read_state(work: Path) -> dict[str, Any] | None:
    try:
        return json.loads((work / STATE).read_text())
    except (OSError, ValueError):
        return None


def write_state(work: Path, state: dict[str, Any]) -> None:
    tmp = work / (STATE + ".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, work / STATE)


def reusable(work: Path, key: str) -> bool:
    """True when `work` holds a finished ingest for this key (its tasks' finished ranks can be kept)."""
    state = read_state(work)
    return bool(state) and state.get("key") == key and bool(state.get("ingested"))


def reset(work: Path) -> None:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)


class IngestLog:
    """What `materialize` tells the stage writer (counts, presets, quarantined rows), kept in the work folder.

    Quacks like the part of StageWriter that ingest uses: `config`, `count_in`, `quarantine`."""

    def __init__(self, folder: Path, removed_schema: pa.Schema):
        self.folder = folder
        self.config: dict[str, Any] = {}
        self.rows_in: Counter[str] = Counter()
        self.removed_schema = removed_schema
        self._rows = ShardWriter(folder / "quarantined", removed_schema, rows_per_shard=1 << 30)

    def count_in(self, source: str, n: int = 1) -> None:
        self.rows_in[source] += n

    def quarantine(self, record: Quarantined) -> None:
        row = record.to_row()
        self.count_in(row["source"])
        self._rows.write(row)

    def save(self) -> None:
        self._rows.close()
        (self.folder / "ingest.json").write_text(json.dumps(
            {"rows_in": dict(self.rows_in), "config": self.config}, sort_keys=True, default=str) + "\n")


def replay(folder: Path, writer: StageWriter) -> None:
    """Feed a saved IngestLog into the stage writer: counts, presets, then the quarantined rows in order."""
    saved = json.loads((folder / "ingest.json").read_text())
    for source, n in saved["rows_in"].items():
        writer.count_in(source, n)
    writer.config.update(saved["config"])
    for f in sorted((folder / "quarantined").glob("*.parquet")):
        for batch in pq.ParquetFile(f).iter_batches(batch_size=1024):
            for row in batch.to_pylist():
                writer.remove(row)
