"""Build the training mix: a seeded draw under a row or token budget with per-domain ratios.

Each domain d gets a share r_d of the budget (given ratios, normalised; by default proportional to
what is available). Without a budget the largest draw that keeps the ratios is taken
(B = min_d available_d / r_d). Within a domain rows are drawn without replacement in the order of a
seeded key (Efraimidis-Spirakis): key = ln(u) / w with u = hash(seed, id) in (0, 1), w the row weight
(source weight / source rows when source weights are given, else 1), highest keys first. The draw
depends only on the rows, the seed and the config, not on input order.

Outputs (all loadable with ``datasets.load_dataset("parquet", data_files=...)``):
- OUT/sft/*.parquet: drawn rows with a response, the schema columns plus `messages` (chat list);
- OUT/rl/*.parquet: one row per drawn problem with an answer (or tests for code) in verl's layout:
  data_source, prompt (chat list), ability, reward_model {style, ground_truth}, extra_info;
- OUT/removed/*.parquet: rows not drawn (reason ``budget``) and drawn rows without a response
  (reason ``prompt_only``: they are in rl/ only);
- OUT/stats.json and OUT/README.md (the dataset card, `curate.card`) with plots in OUT/plots/.
Budgets count every drawn row, prompt-only rows included (they feed rl/).
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from cotforge.curate.core.schema import chat_messages, seeded_hash
from cotforge.curate.io import fs
from cotforge.curate.io.inputs import counted_rows, input_schema, is_stage_dir
from cotforge.curate.io.readers import InputSpec
from cotforge.curate.io.remote import remote_output
from cotforge.curate.io.writer import StageWriter
from cotforge.curate.select.profile import make_length_fn, problem_key

if TYPE_CHECKING:
    from cotforge.curate.context import StageContext

log = logging.getLogger(__name__)

MESSAGES_TYPE = pa.list_(pa.struct([pa.field("role", pa.string()), pa.field("content", pa.string())]))
RL_SCHEMA = pa.schema([
    pa.field("data_source", pa.string()),
    pa.field("prompt", MESSAGES_TYPE),
    pa.field("ability", pa.string()),
    pa.field("reward_model", pa.struct([pa.field("style", pa.string()), pa.field("ground_truth", pa.string())])),
    pa.field("extra_info", pa.struct([pa.field("index", pa.int64()), pa.field("id", pa.string()),
                                      pa.field("source", pa.string()), pa.field("split", pa.string()),
                                      pa.field("answer", pa.string()), pa.field("tests", pa.string())])),
])
# Klear-Reasoner's verl data_source names per domain (paper_notes §3.7); other domains use the row's source.
DEFAULT_RL_DATA_SOURCE = {"math": "math_longcot_math_verify", "code": "coder1_longcot"}


@dataclass
class MixConfig:
    """Budget, ratios, weights and seed of the draw, and what to write."""

    name: str = field(default="mix", metadata={"help": "Name of the mix (card title)."})
    budget_rows: int | None = field(default=None, metadata={"help": "Row budget.", "flag": "--rows"})
    budget_tokens: int | None = field(default=None, metadata={
        "help": "Token budget of prompt + response (characters / chars_per_token without a tokenizer).",
        "flag": "--tokens"})
    domain_ratios: dict[str, float] | None = field(default=None, metadata={
        "help": "Domain share, e.g. math=0.7 (repeatable; default: by availability).", "flag": "--ratio",
        "metavar": "DOMAIN=R"})
    source_weights: dict[str, float] | None = field(default=None, metadata={
        "help": "Source weight within its domain (default: select's mix_weight, else by availability).",
        "flag": "--weight", "metavar": "SOURCE=W"})
    seed: int = field(default=0, metadata={"help": "Seed of the draw."})
    tokenizer: str | None = field(default=None, metadata={"help": "Tokenizer for token budgets (else characters)."})
    chars_per_token: float = field(default=4.0, metadata={"help": "Characters per token without a tokenizer."})
    rl_data_source: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_RL_DATA_SOURCE), metadata={
        "help": "verl data_source per domain of the RL rows.", "metavar": "DOMAIN=NAME"})
    write_rl: bool = field(default=True, metadata={"help": "Write rl/ (verl prompt rows).", "flag": "--no-rl"})
    card: bool = field(default=True, metadata={"help": "Write README.md (the dataset card)."})
    license: str = field(default="other", metadata={"help": "Card license (SPDX-like id)."})
    history: list[str] = field(default_factory=list, metadata={
        "help": "Earlier stage folder to report in the card (repeatable, in pipeline order; default in a "
                "pipeline: every earlier stage folder holding a stats.json)."})

    def __post_init__(self) -> None:
        if self.budget_rows is not None and self.budget_tokens is not None:
            raise ValueError("budget_rows: give budget_rows or budget_tokens, not both")
        for name in ("budget_rows", "budget_tokens"):
            if getattr(self, name) is not None and getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0 or null (got {getattr(self, name)})")
        if self.chars_per_token <= 0:
            raise ValueError(f"chars_per_token: must be > 0 (got {self.chars_per_token})")
        for k, v in (self.domain_ratios or {}).items():
            if v < 0 or not math.isfinite(v):
                raise ValueError(f"domain_ratios: {k}={v} must be a finite number >= 0")
        for k, v in (self.source_weights or {}).items():
            if v < 0 or not math.isfinite(v):
                raise ValueError(f"source_weights: {k}={v} must be a finite number >= 0")


def draw_key(seed: int, row_id: str, weight: float) -> float:
    """Efraimidis-Spirakis key ln(u)/w of a row (u from a seeded hash); larger keys are drawn first."""
    u = (seeded_hash(seed, row_id) + 1) / (2**64 + 1)
    return math.log(u) / weight if weight > 0 else -math.inf


def domain_targets(avail: dict[str, float], ratios: dict[str, float] | None, budget: float | None,
                   integer: bool) -> tuple[dict[str, float], dict[str, float]]:
    """(target, shortfall) per domain: budget * r_d (largest remainder when integer), capped by availability.

    Without a budget: the largest total that keeps the ratios, B = min_d avail_d / r_d. The shortfall is
    what a domain lacks to meet its share (not redistributed, so the ratios hold)."""
    if ratios:
        missing = sorted(set(ratios) - set(avail))
        if missing:
            log.warning("mix: ratios name domains with no rows: %s", missing)
        r = {d: ratios.get(d, 0.0) for d in avail}
    else:
        r = dict(avail)
    total = sum(r.values())
    if total <= 0:
        return dict.fromkeys(avail, 0), {}
    r = {d: v / total for d, v in r.items()}
    if budget is None:
        budget = min(avail[d] / r[d] for d in r if r[d] > 0)
    raw: dict[str, float] = {d: budget * r[d] for d in r}
    if integer:
        floor = {d: float(math.floor(v + 1e-9)) for d, v in raw.items()}
        rest = round(budget) - sum(floor.values())
        for d in sorted(raw, key=lambda d: (-(raw[d] - floor[d]), d))[:max(int(rest), 0)]:
            floor[d] += 1
        raw = floor
    short = {d: raw[d] - avail[d] for d in raw if raw[d] > avail[d]}
    if short:
        log.warning("mix: domains short of their share (%s): %s", "kept ratios not met", short)
    return {d: min(raw[d], avail[d]) for d in raw}, short


def selection_weights(specs_paths: list[str]) -> dict[str, float] | None:
    """User-given mix_weight per source from select's selection.parquet in the input folders (None if none)."""
    weights: dict[str, float] = {}
    for p in specs_paths:
        f = Path(p) / "selection.parquet"
        if is_stage_dir(p) and f.exists():
            table = pl.read_parquet(f).filter(pl.col("selected") & pl.col("mix_weight").is_not_null())
            for rec in table.iter_rows(named=True):
                weights[rec["source"]] = float(rec["mix_weight"])
    return weights or None


def draw(frame: pl.DataFrame, cfg: MixConfig) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Mark drawn rows (`drawn` column) of a frame with id, domain, source, tokens; returns (frame, plan)."""
    weights = cfg.source_weights
    counts = dict(frame.group_by("source").len().iter_rows())
    w = [(weights.get(s, 1.0) / counts[s]) if weights else 1.0 for s in frame["source"]]
    f = frame.with_columns(pl.Series("_key", [draw_key(cfg.seed, i, x) for i, x in zip(frame["id"], w, strict=True)]))
    f = f.sort(["domain", "_key", "idx"], descending=[False, True, False])
    by_tokens = cfg.budget_tokens is not None
    measure = "tokens" if by_tokens else "rows"
    avail = {d: float(v) for d, v in f.filter(pl.col("_key") > -math.inf).group_by("domain")
             .agg(pl.col("tokens").sum() if by_tokens else pl.len()).iter_rows()}
    budget = cfg.budget_tokens if by_tokens else cfg.budget_rows
    targets, short = domain_targets(avail, cfg.domain_ratios, budget, integer=not by_tokens)
    f = f.with_columns(pl.int_range(1, pl.len() + 1).over("domain").alias("_pos"),
                       pl.col("tokens").cum_sum().over("domain").alias("_cum"))
    tgt = pl.col("domain").replace_strict({d: float(t) for d, t in targets.items()}, default=0.0)
    taken = (pl.col("_cum") <= tgt) if by_tokens else (pl.col("_pos") <= tgt)
    f = f.with_columns((taken & (pl.col("_key") > -math.inf)).alias("drawn")).drop("_pos", "_cum", "_key")
    got = dict(f.filter("drawn").group_by("domain").agg(pl.col("tokens").sum() if by_tokens else pl.len()).iter_rows())
    plan = {"measure": measure, "available": avail, "targets": targets, "drawn": got, "shortfall": short}
    return f, plan


def to_rl_row(row: dict[str, Any], index: int, data_sources: dict[str, str]) -> dict[str, Any] | None:
    """verl RL prompt row; None when the row has nothing to reward against (no answer, no tests for code)."""
    is_code = row["domain"] == "code"
    truth = row.get("tests") if is_code else row.get("answer")
    if not truth:
        return None
    return {
        "data_source": data_sources.get(row["domain"], row["source"]),
        "prompt": [{"role": "user", "content": row["prompt"]}],
        "ability": row["domain"],
        "reward_model": {"style": "rule", "ground_truth": truth},
        "extra_info": {"index": index, "id": row["id"], "source": row["source"], "split": "train",
                       "answer": row.get("answer"), "tests": row.get("tests")},
    }


def _frame(specs: list[InputSpec], cfg: MixConfig, strict: bool) -> tuple[pl.DataFrame, str]:
    """Per valid row: id, source, domain, tokens, response length, difficulty facts (for draw and card)."""
    length_fn, unit = make_length_fn(cfg.tokenizer)
    cols: dict[str, list[Any]] = {k: [] for k in ("idx", "id", "source", "domain", "has_response", "pass_rate", "difficulty")}
    texts_p: list[str] = []
    texts_r: list[str] = []
    for row in counted_rows(specs, None, strict):
        cols["idx"].append(len(cols["idx"]))
        cols["id"].append(str(row["id"]))
        cols["source"].append(row["source"])
        cols["domain"].append(row["domain"])
        cols["has_response"].append(bool(row.get("response")))
        cols["pass_rate"].append(row.get("pass_rate"))
        cols["difficulty"].append(row.get("difficulty"))
        texts_p.append(row["prompt"])
        texts_r.append(row.get("response") or "")
    lp, lr = length_fn(texts_p), length_fn(texts_r)
    scale = 1.0 if cfg.tokenizer else 1.0 / cfg.chars_per_token
    f = pl.DataFrame({**cols, "length": lr, "tokens": [math.ceil((a + b) * scale) for a, b in zip(lp, lr, strict=True)]},
                     schema_overrides={"pass_rate": pl.Float64, "difficulty": pl.Utf8, "length": pl.Int64,
                                       "tokens": pl.Int64})
    return f, unit


@remote_output
def run(cfg: MixConfig, ctx: StageContext) -> dict[str, Any]:
    """Seeded draw under a budget -> OUT/sft, OUT/rl (verl rows), OUT/removed, OUT/stats.json, OUT/README.md.

    The card reports `history`, else every earlier stage folder of the run that holds a stats.json.

    Not a datatrove pipeline: the seeded budget draw is one decision over the whole pool (ratios, budget),
    made in polars; writing the drawn rows is a single pass."""
    specs, out_dir, strict, rows_per_shard = ctx.inputs, ctx.out_dir, ctx.strict, ctx.rows_per_shard
    if not cfg.history:
        cfg = replace(cfg, history=[d for d in ctx.earlier.values() if fs.exists(fs.join(d, "stats.json"))])
    input_paths = ctx.input_dirs
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if cfg.source_weights is None and input_paths:
        cfg.source_weights = selection_weights(input_paths)
    frame, unit = _frame(specs, cfg, strict)
    drawn_frame, plan = draw(frame, cfg)
    drawn_idx = set(drawn_frame.filter("drawn")["idx"].to_list())
    schema = input_schema(specs)
    if schema.get_field_index("messages") < 0:
        schema = schema.append(pa.field("messages", MESSAGES_TYPE))
    writer = StageWriter(out, "mix", schema=schema, rows_per_shard=rows_per_shard, config=_jsonable(asdict(cfg)))
    rl_rows: list[dict[str, Any]] = []
    rl_seen: set[str] = set()
    i = -1
    for row in counted_rows(specs, writer, strict):
        i += 1
        if i not in drawn_idx:
            writer.remove(row, f"budget: not drawn ({plan['measure']} budget, seed {cfg.seed})")
            continue
        key = problem_key(row["prompt"])
        if cfg.write_rl and key not in rl_seen:
            rl = to_rl_row(row, len(rl_rows), cfg.rl_data_source)
            if rl is not None:
                rl_seen.add(key)
                rl_rows.append(rl)
        if row.get("response"):
            writer.keep({**row, "messages": chat_messages(row)})
        else:
            writer.remove(row, "prompt_only: drawn but has no response (RL prompt only)")
    sft_sources = Counter(drawn_frame.filter(pl.col("drawn") & pl.col("has_response"))["source"].to_list())
    stats = writer.close({"mix": {"name": cfg.name, **plan, "length_unit": unit, "rl_rows": len(rl_rows),
                                  "sft_rows_by_source": dict(sorted(sft_sources.items())),
                                  "source_weights": cfg.source_weights}})
    _publish_outputs(out, rl_rows if cfg.write_rl else None)
    if cfg.card:
        from cotforge.curate.mix.card import write_card

        write_card(out, cfg.name, stats, drawn_frame.filter(pl.col("drawn") & pl.col("has_response")),
                   config=_jsonable(asdict(cfg)), history=cfg.history, license=cfg.license, length_unit=unit)
    return stats


def _publish_outputs(out: Path, rl_rows: list[dict[str, Any]] | None) -> None:
    """kept/ becomes sft/ (what the SFT trainer reads); rl/ gets the verl rows."""
    sft = out / "sft"
    if sft.exists():
        shutil.rmtree(sft)
    (out / "kept").rename(sft)
    rl = out / "rl"
    if rl.exists():
        shutil.rmtree(rl)
    if rl_rows is not None:
        rl.mkdir()
        pq.write_table(pa.Table.from_pylist(rl_rows, schema=RL_SCHEMA), rl / "part-00000.parquet", compression="zstd")


def _jsonable(value: Any) -> Any:
    """Config dict as plain JSON types (for stats.json and the card)."""
    return json.loads(json.dumps(value, default=str))
