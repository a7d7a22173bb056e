"""`cotforge curate ...`: one command per curation stage (each lives beside its stage code)."""

from __future__ import annotations

import click

from pipelines.lazy import LazyGroup


@click.group(cls=LazyGroup, lazy={
    "ingest": "curate.ingest:ingest_command",
    "dedup": "curate.dedup:dedup_command",
    "decontaminate": "curate.decontam:decontaminate_command",
    "verify": "curate.verify.stage:verify_command",
    "profile": "curate.profile:profile_command",
    "difficulty": "curate.difficulty:difficulty_command",
    "select": "curate.select:select_command",
    "mix": "curate.mix:mix_command",
})
def curate() -> None:
    """Curation stages. Each reads raw files or an earlier stage's folder and writes
    OUT/kept/*.parquet, OUT/removed/*.parquet (with `reason`) and OUT/stats.json."""
