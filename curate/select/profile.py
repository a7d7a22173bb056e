"""Profile sources: per (source, domain) statistics that source selection and the dataset card use.

`profile_frame` turns rows into one table row per (source, domain): rows, unique problems, responses
per problem, response length (tokens with a configured tokenizer, else characters), share of
responses with a closed reasoning block, verified accuracy, duplicate / contamination rates (from
earlier stages' stats.json) and the difficulty distribution. `run_profile` is the stage: it passes
rows through unchanged (kept/, malformed rows in removed/) and writes OUT/profile.parquet,
OUT/profile.md and OUT/plots/*.png next to stats.json.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from cotforge.curate.core.reasoning import REASONING_MARKERS
from cotforge.curate.core.schema import as_bool, load_meta
from cotforge.curate.dedup.core import row_keys
from cotforge.curate.io.inputs import counted_rows, input_schema, read_stats
from cotforge.curate.io.readers import InputError, InputSpec
from cotforge.curate.io.remote import remote_output
from cotforge.curate.io.writer import StageWriter

if TYPE_CHECKING:
    from cotforge.curate.context import StageContext

log = logging.getLogger(__name__)

DIFFICULTY_BINS = ("hard", "medium", "easy")
# meta keys consulted for a correctness label when the row has no `correct` column (verify stage).
META_CORRECT_KEYS = ("is_correct", "correct")


def problem_key(prompt: str | None) -> int:
    """Key of "the same problem": the dedup stage's problem key (64-bit hash of the normalised prompt), so
    profile, difficulty, the policy's cap and the mix's RL rows count problems the way dedup does."""
    return row_keys(prompt or "", None)[1]


def has_closed_reasoning(text: str | None) -> bool:
    """True when `text` holds a reasoning block that is opened and then closed (any known marker)."""
    if not text:
        return False
    for open_m, close_m in REASONING_MARKERS:
        i = text.find(open_m)
        if i >= 0 and text.find(close_m, i + len(open_m)) >= 0:
            return True
    # Some traces start inside the block (the template opened it): a lone closing marker counts.
    return "</think>" in text and "<think>" not in text


def row_correct(row: dict[str, Any], meta: dict[str, Any], use_meta: bool) -> bool | None:
    """The row's verified correctness: the verify stage's `correct` column, else (optionally) meta."""
    if row.get("correct") is not None:
        return as_bool(row["correct"])
    if use_meta:
        for k in META_CORRECT_KEYS:
            if k in meta:
                return as_bool(meta[k])
    return None


def make_length_fn(tokenizer: str | None) -> tuple[Callable[[list[str]], list[int]], str]:
    """A batch length function and its unit: tokens of a tokenizer path/name, else characters."""
    if not tokenizer:
        return (lambda texts: [len(t) for t in texts]), "chars"
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer)

    def count(texts: list[str]) -> list[int]:
        if not texts:
            return []
        return [len(ids) for ids in tok(texts, add_special_tokens=False)["input_ids"]]

    return count, "tokens"


# Earlier stages whose stats.json give per-source duplicate / contamination rates (when stats_dirs is empty).
RATE_STAGES = ("decontaminate", "dedup", "verify")


@dataclass
class ProfileConfig:
    """Options of the profile step."""

    tokenizer: str | None = field(default=None, metadata={
        "help": "Tokenizer (path or name) for lengths in tokens; characters when unset."})
    stats_dirs: list[str] = field(default_factory=list, metadata={
        "help": "Earlier stage folder (dedup, decontaminate) whose stats.json gives per-source rates "
                "(repeatable; default in a pipeline: the earlier decontaminate, dedup and verify stages).",
        "flag": "--stats"})
    correct_from_meta: bool = field(default=True, metadata={
        "help": "Use meta['is_correct'] when there is no `correct` column (the verify stage's).",
        "flag": "--no-meta-correct"})
    plots: bool = field(default=True, metadata={"help": "Write plots/*.png."})
    passthrough: bool = field(default=True, metadata={
        "help": "Also write the rows to kept/ so later stages can read this folder."})

    def __post_init__(self) -> None:
        check_stats_dirs(self.stats_dirs)


def check_stats_dirs(stats_dirs: list[str]) -> None:
    """`stats_dirs` is a list of folder names (a single string would be read letter by letter)."""
    if not isinstance(stats_dirs, list) or not all(isinstance(d, str) and d for d in stats_dirs):
        raise ValueError(f"stats_dirs: expected a list of stage folders, got {stats_dirs!r}")


# --------------------------------------------------------------------------- rows -> frame


def rows_frame(rows: Iterable[dict[str, Any]], length_fn: Callable[[list[str]], list[int]],
               correct_from_meta: bool = True, batch: int = 2048) -> pl.DataFrame:
    """The per-row facts profiling needs (one frame row per schema row)."""
    cols: dict[str, list[Any]] = {k: [] for k in ("id", "source", "domain", "problem", "has_response", "length",
                                                    "closed_reasoning", "correct", "pass_rate", "difficulty")}
    pending: list[str] = []

    def flush() -> None:
        cols["length"].extend(length_fn(pending))
        pending.clear()

    for row in rows:
        meta = load_meta(row.get("meta"))
        resp = row.get("response") or ""
        cols["id"].append(str(row["id"]))
        cols["source"].append(row["source"])
        cols["domain"].append(row["domain"])
        cols["problem"].append(problem_key(row["prompt"]))
        cols["has_response"].append(bool(resp))
        pending.append(resp)
        cols["closed_reasoning"].append(has_closed_reasoning(resp))
        cols["correct"].append(row_correct(row, meta, correct_from_meta) if resp else None)
        pr = row.get("pass_rate")
        cols["pass_rate"].append(float(pr) if pr is not None else None)
        cols["difficulty"].append(row.get("difficulty"))
        if len(pending) >= batch:
            flush()
    flush()
    schema = {"id": pl.Utf8, "source": pl.Utf8, "domain": pl.Utf8, "problem": pl.UInt64, "has_response": pl.Boolean,
              "length": pl.Int64, "closed_reasoning": pl.Boolean, "correct": pl.Boolean,
              "pass_rate": pl.Float64, "difficulty": pl.Utf8}
    return pl.DataFrame(cols, schema=schema)


def stage_rates(stats_dirs: Iterable[str]) -> dict[str, dict[str, float]]:
    """Per-source duplicate and contamination rates from earlier stages' stats.json.

    A stage named *dedup* counts its removals as duplicates, *decont*/*contam* as contamination;
    other stages count removals whose reason family starts with "duplicate" / "contaminat".
    rate = removed / rows_in of that stage, per source."""
    out: dict[str, dict[str, float]] = {}
    for d in stats_dirs:
        try:
            stats = read_stats(d)
        except FileNotFoundError as e:
            raise InputError(f"{d}: no stats.json (--stats expects an earlier stage's output folder)") from e
        stage = str(stats.get("stage", "")).lower()
        for src, s in stats.get("per_source", {}).items():
            n_in = s.get("rows_in", 0) or 0
            if not n_in:
                continue
            removed = s.get("removed", {})
            dup = sum(v for r, v in removed.items() if r.startswith("duplicate"))
            con = sum(v for r, v in removed.items() if r.startswith("contaminat"))
            total = sum(removed.values())
            if "dedup" in stage:
                dup = total - con
            elif "decont" in stage or "contam" in stage:
                con = total - dup
            rec = out.setdefault(src, {"duplicate_rate": 0.0, "contamination_rate": 0.0})
            rec["duplicate_rate"] = max(rec["duplicate_rate"], dup / n_in) if dup else rec["duplicate_rate"]
            rec["contamination_rate"] = max(rec["contamination_rate"], con / n_in) if con else rec["contamination_rate"]
    return out


def profile_frame(rows: pl.DataFrame, rates: dict[str, dict[str, float]] | None = None,
                  length_unit: str = "chars") -> pl.DataFrame:
    """One row per (source, domain) with the statistics selection scores and the card reports."""
    rates = rates or {}
    resp = pl.col("has_response")
    prof = (
        rows.group_by("source", "domain")
        .agg(
            pl.len().alias("rows"),
            pl.col("problem").n_unique().alias("unique_problems"),
            resp.sum().alias("responses"),
            pl.col("length").filter(resp).median().alias("median_length"),
            pl.col("length").filter(resp).mean().alias("mean_length"),
            pl.col("length").filter(resp).quantile(0.9, "nearest").alias("p90_length"),
            pl.col("closed_reasoning").filter(resp).mean().alias("closed_reasoning_share"),
            pl.col("correct").is_not_null().sum().alias("verified_rows"),
            pl.col("correct").cast(pl.Float64).mean().alias("accuracy"),
            pl.col("pass_rate").mean().alias("mean_pass_rate"),
            *[(pl.col("difficulty") == b).sum().alias(f"difficulty_{b}") for b in DIFFICULTY_BINS],
            pl.col("difficulty").is_null().sum().alias("difficulty_unknown"),
        )
        .with_columns(
            (pl.col("responses") / pl.col("unique_problems")).alias("responses_per_problem"),
            (pl.col("verified_rows") / pl.max_horizontal(pl.col("responses"), 1)).alias("verified_share"),
            pl.col("source").map_elements(lambda s: rates.get(s, {}).get("duplicate_rate"),
                                          return_dtype=pl.Float64).alias("duplicate_rate"),
            pl.col("source").map_elements(lambda s: rates.get(s, {}).get("contamination_rate"),
                                          return_dtype=pl.Float64).alias("contamination_rate"),
            pl.lit(length_unit).alias("length_unit"),
        )
        .sort("domain", "source")
    )
    return prof


def markdown_table(df: pl.DataFrame, columns: list[str] | None = None, digits: int = 3) -> str:
    """A GitHub Markdown table of `df` (floats rounded), for reports and the dataset card."""
    columns = columns or df.columns
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for rec in df.select(columns).iter_rows():
        cells = []
        for v in rec:
            if isinstance(v, float):
                cells.append("" if math.isnan(v) else f"{v:.{digits}g}" if abs(v) < 1000 else f"{v:.0f}")
            else:
                cells.append("" if v is None else str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


PROFILE_MD_COLUMNS = ["source", "domain", "rows", "unique_problems", "responses_per_problem", "median_length",
                      "closed_reasoning_share", "verified_share", "accuracy", "duplicate_rate",
                      "contamination_rate", "difficulty_hard", "difficulty_medium", "difficulty_easy"]


# --------------------------------------------------------------------------- the stage


def _valid_rows(specs: list[InputSpec], writer: StageWriter | None, strict: bool) -> Iterator[dict[str, Any]]:
    """Rows of the inputs; malformed ones go to removed/ (when writing) and are not profiled."""
    for row in counted_rows(specs, writer, strict):
        if writer is not None:
            writer.keep(row)
        yield row


@remote_output
def run(cfg: ProfileConfig, ctx: StageContext) -> dict[str, Any]:
    """Per source and domain statistics -> OUT/profile.parquet, OUT/profile.md, OUT/plots/*.png.

    Duplicate and contamination rates come from `stats_dirs`, else from the run's earlier RATE_STAGES.

    Not a datatrove pipeline: per-source statistics need every row at once, and one polars pass over the
    columns it reads takes seconds per million rows on one core."""
    specs, out_dir, strict, rows_per_shard = ctx.inputs, ctx.out_dir, ctx.strict, ctx.rows_per_shard
    if not cfg.stats_dirs:
        cfg = replace(cfg, stats_dirs=ctx.earlier_dirs(RATE_STAGES))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    length_fn, unit = make_length_fn(cfg.tokenizer)
    writer = StageWriter(out, "profile", schema=input_schema(specs), rows_per_shard=rows_per_shard,
                         config=asdict(cfg)) if cfg.passthrough else None
    rows = rows_frame(_valid_rows(specs, writer, strict), length_fn, cfg.correct_from_meta)
    prof = profile_frame(rows, stage_rates(cfg.stats_dirs), unit)
    prof.write_parquet(out / "profile.parquet")
    (out / "profile.md").write_text(f"# Source profile (lengths in {unit})\n\n"
                                    + markdown_table(prof, PROFILE_MD_COLUMNS))
    plots: list[str] = []
    if cfg.plots:
        from cotforge.curate.core.plots import difficulty_histogram, length_histogram, source_mix

        plots = [p for p in (length_histogram(rows, out / "plots" / "length_hist.png", unit),
                             source_mix(prof, out / "plots" / "source_mix.png"),
                             difficulty_histogram(rows, out / "plots" / "difficulty_hist.png")) if p]
    extra = {"profile": prof.to_dicts(), "length_unit": unit, "plots": [str(Path(p).relative_to(out)) for p in plots]}
    if writer is not None:
        return writer.close(extra)
    stats = {"stage": "profile", "rows_in": rows.height, "config": asdict(cfg), **extra}
    (out / "stats.json").write_text(json.dumps(stats, indent=2, sort_keys=True, default=str) + "\n")
    return stats
