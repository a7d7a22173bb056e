"""Difficulty-aware response filtering (Klear-Reasoner §5.1.1, Table 2).

For **hard** problems keeping every response, correct or not, beats keeping only the correct ones
(AIME24-hard 47.29 vs 45.63); for **easy** problems filtering to verified-correct responses wins
(45.00 vs 40.22). So by default: hard -> keep all, easy -> keep verified-correct only, medium and
unknown difficulty -> keep all; then at most `max_per_problem` responses per problem (the paper
samples up to 16). Each bin's mode is one of:

- ``all``: keep every response;
- ``correct``: keep responses verified correct; incorrect ones are removed with reason
  ``incorrect: <bin> problem``, unverified ones with ``unverified: <bin> problem``;
- ``drop``: remove every response of the bin (reason ``difficulty_dropped: <bin> problem``).

A row's bin is its `difficulty` column, else its `pass_rate` binned with t_hard / t_easy
(p <= t_hard: hard, p >= t_easy: easy, else medium), else "unknown". Rows without a response
(prompt pools for RL) are only affected by ``drop`` and do not count towards the cap.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from cotforge.curate.core.schema import seeded_hash
from cotforge.curate.select.difficulty import DEFAULT_T_EASY, DEFAULT_T_HARD, bin_pass_rate

MODES = ("all", "correct", "drop")


@dataclass
class PolicyConfig:
    """Per-bin keep modes, the per-problem cap and the pass-rate thresholds used when rows have no bin."""

    hard: str = field(default="all", metadata={"help": "Keep mode of hard problems' responses.", "choices": MODES})
    medium: str = field(default="all", metadata={"help": "Keep mode of medium problems.", "choices": MODES})
    easy: str = field(default="correct", metadata={"help": "Keep mode of easy problems.", "choices": MODES})
    unknown: str = field(default="all", metadata={
        "help": "Keep mode of problems without a difficulty.", "choices": MODES})
    max_per_problem: int | None = field(default=16, metadata={
        "help": "At most this many responses per problem (0 or null: no cap)."})
    t_hard: float = field(default=DEFAULT_T_HARD, metadata={"help": "Rows without a bin: pass rate <= t_hard is hard."})
    t_easy: float = field(default=DEFAULT_T_EASY, metadata={"help": "Rows without a bin: pass rate >= t_easy is easy."})
    seed: int = field(default=0, metadata={"help": "Which responses survive the cap (seeded hash of the row id)."})

    def __post_init__(self) -> None:
        for b in ("hard", "medium", "easy", "unknown"):
            if getattr(self, b) not in MODES:
                raise ValueError(f"policy.{b}={getattr(self, b)!r}: expected one of {MODES}")
        if not 0.0 <= self.t_hard < self.t_easy <= 1.0:
            raise ValueError(f"t_hard: need 0 <= t_hard < t_easy <= 1, got t_hard={self.t_hard}, t_easy={self.t_easy}")
        if self.max_per_problem is not None and self.max_per_problem < 0:
            raise ValueError(f"max_per_problem: must be >= 0 or null (got {self.max_per_problem})")


def difficulty_bin(frame: pl.DataFrame, t_hard: float, t_easy: float) -> pl.Expr:
    """Expression: the row's bin from `difficulty`, else `pass_rate` binned by the difficulty stage's own
    rule (`bin_pass_rate`), else "unknown"."""
    from_rate = pl.col("pass_rate").map_elements(lambda p: bin_pass_rate(p, t_hard, t_easy), return_dtype=pl.Utf8)
    return pl.coalesce(pl.col("difficulty"), from_rate, pl.lit("unknown")).alias("bin")


def policy_reasons(frame: pl.DataFrame, cfg: PolicyConfig) -> pl.DataFrame:
    """Add `bin` and `policy_reason` (null = keep) to a frame with id, problem, correct, difficulty, pass_rate.

    Rows that already carry a non-null `reason` (e.g. an unselected source) keep it and do not count
    towards the per-problem cap."""
    modes = {"hard": cfg.hard, "medium": cfg.medium, "easy": cfg.easy, "unknown": cfg.unknown}
    if "reason" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, dtype=pl.Utf8).alias("reason"))
    f = frame.with_columns(difficulty_bin(frame, cfg.t_hard, cfg.t_easy))
    mode = pl.col("bin").replace_strict(modes, default="all")
    resp = pl.col("has_response") if "has_response" in f.columns else pl.lit(True)
    f = f.with_columns(
        pl.when(pl.col("reason").is_not_null()).then(pl.col("reason"))
        .when(mode == "drop").then(pl.format("difficulty_dropped: {} problem", pl.col("bin")))
        .when(~resp).then(None)  # prompt-only rows (RL prompts) have no response to judge
        .when((mode == "correct") & (pl.col("correct") == False)).then(  # noqa: E712 (polars expression)
            pl.format("incorrect: {} problem (keeps verified-correct only)", pl.col("bin")))
        .when((mode == "correct") & pl.col("correct").is_null()).then(
            pl.format("unverified: {} problem (keeps verified-correct only)", pl.col("bin")))
        .otherwise(None).alias("policy_reason")
    )
    if cfg.max_per_problem:
        f = f.with_columns(pl.Series("_k", [seeded_hash(cfg.seed, i) for i in f["id"]], dtype=pl.UInt64))
        f = f.with_columns(
            pl.when(pl.col("policy_reason").is_null() & resp).then(pl.col("_k")).otherwise(None).alias("_k"))
        f = f.with_columns(pl.col("_k").rank("ordinal").over("problem").alias("_r"))
        f = f.with_columns(
            pl.when(pl.col("policy_reason").is_null() & resp & (pl.col("_r") > cfg.max_per_problem))
            .then(pl.lit(f"cap: more than {cfg.max_per_problem} responses per problem"))
            .otherwise(pl.col("policy_reason")).alias("policy_reason")
        ).drop("_k", "_r")
    return f
