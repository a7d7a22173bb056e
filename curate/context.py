"""The stage contract: every stage is a config dataclass plus `run(cfg, ctx) -> stats`, and `StageContext`
is the `ctx`: where the stage writes, what it reads, how datatrove runs and what ran before it.

The pipeline runner (`cotforge run`) and the command line (`cotforge curate X`) both build a
StageContext and call the same `run`; curation code never sees a recipe, a click context or the trainer.
What crosses the layer boundary is injected here (`make_generator`: the generation interface that the
difficulty stage samples a reference model with, built by the caller from `cotforge.train.rollout`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from cotforge.curate.engine import ExecutorConfig
from cotforge.curate.io.readers import InputSpec
from cotforge.curate.io.writer import DEFAULT_ROWS_PER_SHARD


@dataclass
class StageContext:
    """What a stage's `run(cfg, ctx)` gets besides its config."""

    out_dir: str  # a local folder or an fsspec URL (s3://..., gs://...): kept as given, never a Path
    inputs: list[InputSpec] = field(default_factory=list)  # raw files or earlier stages' kept/ shards
    input_dirs: list[str] = field(default_factory=list)  # the upstream folders themselves (selection.parquet ...)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)  # datatrove-based stages
    earlier: dict[str, str] = field(default_factory=dict)  # stages that ran before this one: name -> folder
    strict: bool = field(default=False, metadata={
        "help": "Stop at the first malformed row instead of quarantining it."})
    rows_per_shard: int = field(default=DEFAULT_ROWS_PER_SHARD, metadata={"help": "Rows per output Parquet shard."})
    make_generator: Callable[[str, str], Any] | None = None  # (model, backend) -> generator

    def __post_init__(self) -> None:
        self.out_dir = str(self.out_dir)
        if self.rows_per_shard < 1:
            raise ValueError(f"rows_per_shard: must be >= 1 (got {self.rows_per_shard})")

    def earlier_dirs(self, names: Iterable[str]) -> list[str]:
        """Folders of the earlier stages among `names`, in the order they ran."""
        wanted = set(names)
        return [d for n, d in self.earlier.items() if n in wanted]
