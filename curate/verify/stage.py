"""The verify stage (`cotforge curate verify`): label every row with `correct`, `verify_status`,
`tests_passed` and `tests_total`.

Math rows are checked against `answer`, code rows run against `tests` (or a LeetCode `check(...)` test in
meta["tests"]) in the sandbox. The stage removes nothing: every row goes to OUT/kept (malformed input rows
go to OUT/removed as usual); OUT/stats.json counts verdicts per status and per source.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from cotforge.curate.io.budget import DEFAULT_BUDGET_MB, MemoryBudget, row_bytes
from cotforge.curate.io.inputs import counted_rows, input_schema
from cotforge.curate.io.remote import remote_output
from cotforge.curate.io.writer import StageWriter
from cotforge.curate.verify import verify_rows
from cotforge.curate.verify.math import MODES, MathCompare
from cotforge.curate.verify.sandbox import SandboxLimits

if TYPE_CHECKING:
    from cotforge.curate.context import StageContext

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

    think_end: str | None = field(default="</think>", metadata={
        "help": "Marker that ends the reasoning block; the answer is read after it. Empty: the whole response."})
    workers: int | None = field(default=None, metadata={"help": "Verifier processes (default: CPU count)."})
    math_timeout_s: float = field(default=5.0, metadata={"help": "Seconds per math verdict.", "flag": "--math-timeout"})
    batch_rows: int = field(default=2048, metadata={"help": "Rows verified per batch."})
    limits: SandboxLimits | None = field(default=None, metadata={"help": "Sandbox limits of one code run."})
    recompute: bool = field(default=False, metadata={
        "help": "Also verify rows whose source shipped a `correct` label (ingest presets); by default they "
                "keep it (status `shipped`)."})
    math_mode: str = field(default="lenient", metadata={
        "help": "Math answer extraction: lenient (labels: boxes, 'the answer is', ####, Answer lines, "
                "math-verify's own extraction) or strict (only a box after the reasoning block)."})
    math_compare: MathCompare = field(default_factory=MathCompare, metadata={
        "help": "Math comparison settings (numeric tolerance, list order, decimal comma; see MathCompare)."})
    memory_budget_mb: int = field(default=DEFAULT_BUDGET_MB, metadata={
        "help": "Peak memory of the stage in MiB: a batch also ends at the budget's bytes (long rows)."})

    def __post_init__(self) -> None:
        if self.think_end == "":
            self.think_end = None
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers: must be >= 1 or null (got {self.workers})")
        if self.math_timeout_s <= 0:
            raise ValueError(f"math_timeout_s: must be > 0 (got {self.math_timeout_s})")
        if self.batch_rows < 1:
            raise ValueError(f"batch_rows: must be >= 1 (got {self.batch_rows})")
        MemoryBudget(self.memory_budget_mb)  # ValueError naming memory_budget_mb when too small
        if self.math_mode not in MODES:
            raise ValueError(f"VerifyConfig.math_mode: expected one of {MODES}, got {self.math_mode!r}")
        self.math_compare = MathCompare.from_value(self.math_compare, "VerifyConfig.math_compare")


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
                            math_timeout_s=cfg.math_timeout_s, math_mode=cfg.math_mode,
                            math_compare=cfg.math_compare) if todo else [])
    verdicts = [{"correct": r["correct"], "verify_status": "shipped", "tests_passed": None, "tests_total": None}
                if s else next(done) for r, s in zip(batch, shipped, strict=True)]
    for row, v in zip(batch, verdicts, strict=True):
        row.update(v)
        by_status[v["verify_status"]] += 1
        by_source[row["source"]][v["verify_status"]] += 1
        writer.keep(row)


@remote_output
def run(cfg: VerifyConfig, ctx: StageContext) -> dict[str, Any]:
    """Add `correct`, `verify_status`, `tests_passed`, `tests_total` to every row: math rows by `answer`
    (math-verify), code rows by `tests` (sandboxed execution)."""
    specs, out_dir, strict, rows_per_shard = ctx.inputs, ctx.out_dir, ctx.strict, ctx.rows_per_shard
    cfg = replace(cfg, limits=cfg.limits or SandboxLimits())
    config = asdict(cfg)
    writer = StageWriter(out_dir, STAGE, schema=output_schema(input_schema(specs)), rows_per_shard=rows_per_shard,
                         config={"inputs": [s.path for s in specs], **config})
    by_status: Counter[str] = Counter()
    by_source: dict[str, Counter[str]] = defaultdict(Counter)
    batch: list[dict[str, Any]] = []
    batch_bytes, limit = 0, MemoryBudget(cfg.memory_budget_mb).batch_bytes
    writer.kept.buffer_bytes = writer.removed.buffer_bytes = limit  # row groups bounded by bytes too
    for row in counted_rows(specs, writer, strict):
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
