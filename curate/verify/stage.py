"""The verify stage (`cotforge curate verify`): label every row with `correct`, `verify_status`,
`tests_passed` and `tests_total`.

Math rows are checked against `answer`, code rows run against `tests` (or a LeetCode `check(...)` test in
meta["tests"]) in the sandbox. The stage removes nothing: every row goes to OUT/kept (malformed input rows
go to OUT/removed as usual); OUT/stats.json counts verdicts per status and per source.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.base import PipelineStep

from cotforge.curate.engine import run_datatrove_stage
from cotforge.curate.io.remote import remote_output
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
    verify_workers: int | None = field(default=None, metadata={
        "help": "Verifier processes per task (math-verify; code runs up to 3x this many sandboxes at once; "
                "default: CPU count)."})
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

    def __post_init__(self) -> None:
        if self.think_end == "":
            self.think_end = None
        if self.verify_workers is not None and self.verify_workers < 1:
            raise ValueError(f"verify_workers: must be >= 1 or null (got {self.verify_workers})")
        if self.math_timeout_s <= 0:
            raise ValueError(f"math_timeout_s: must be > 0 (got {self.math_timeout_s})")
        if self.batch_rows < 1:
            raise ValueError(f"batch_rows: must be >= 1 (got {self.batch_rows})")
        if self.math_mode not in MODES:
            raise ValueError(f"VerifyConfig.math_mode: expected one of {MODES}, got {self.math_mode!r}")
        self.math_compare = MathCompare.from_value(self.math_compare, "VerifyConfig.math_compare")


def output_schema(base: pa.Schema) -> pa.Schema:
    """The input schema with the four verify columns (replacing earlier ones of the same name)."""
    for f in VERIFY_FIELDS:
        i = base.get_field_index(f.name)
        base = base.set(i, f) if i >= 0 else base.append(f)
    return base


class VerifyStep(PipelineStep):
    """datatrove step: verify the documents of one task in batches of `batch_rows` rows (or the memory budget's
    bytes) and put the four verdict columns into their metadata; writes the task's verdict counts to
    WORK/verify_counts/RANK.json (the stage sums them into stats.json). Rows whose source shipped a
    correctness label (`correct` set at ingest, no verdict yet) keep it: status `shipped`, not re-run."""

    name = "verify"
    type = "🔬 - VERIFY"

    def __init__(self, cfg: VerifyConfig, counts_dir: str, batch_bytes: int):
        super().__init__()
        self.cfg, self.counts_dir, self.batch_bytes = cfg, counts_dir, batch_bytes

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        counts: dict[str, Counter[str]] = defaultdict(Counter)
        batch: list[Document] = []
        size = 0
        for doc in data:
            batch.append(doc)
            size += len(doc.text) + len(doc.metadata.get("response") or "")
            if len(batch) >= self.cfg.batch_rows or size >= self.batch_bytes:  # rows or bytes, whichever first
                yield from self._verify(batch, counts)
                batch, size = [], 0
        if batch:
            yield from self._verify(batch, counts)
        out = Path(self.counts_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{rank:05d}.json").write_text(json.dumps({s: dict(c) for s, c in counts.items()}))

    def _verify(self, batch: list[Document], counts: dict[str, Counter[str]]) -> list[Document]:
        cfg = self.cfg
        rows = [{**d.metadata, "prompt": d.text, "id": d.id} for d in batch]
        shipped = [not cfg.recompute and r.get("correct") is not None and r.get("verify_status") is None for r in rows]
        todo = [r for r, s in zip(rows, shipped, strict=True) if not s]
        done = iter(verify_rows(todo, think_end=cfg.think_end, workers=cfg.verify_workers, limits=cfg.limits,
                                math_timeout_s=cfg.math_timeout_s, math_mode=cfg.math_mode,
                                math_compare=cfg.math_compare) if todo else [])
        for doc, row, s in zip(batch, rows, shipped, strict=True):
            v = ({"correct": row["correct"], "verify_status": "shipped", "tests_passed": None, "tests_total": None}
                 if s else next(done))
            doc.metadata.update(v)
            counts[row["source"]][v["verify_status"]] += 1
            self.stat_update(v["verify_status"])
        return batch


def _summed_counts(counts_dir: Path) -> dict[str, Any]:
    """stats.json's `verify` section: verdicts per status and per source, summed over the tasks."""
    by_source: dict[str, Counter[str]] = defaultdict(Counter)
    for f in sorted(counts_dir.glob("*.json")):
        for source, c in json.loads(f.read_text()).items():
            by_source[source].update(c)
    by_status = sum(by_source.values(), Counter())
    return {"verify": {"by_status": dict(sorted(by_status.items())),
                       "by_source": {s: dict(sorted(c.items())) for s, c in sorted(by_source.items())}}}


@remote_output
def run(cfg: VerifyConfig, ctx: StageContext) -> dict[str, Any]:
    """Add `correct`, `verify_status`, `tests_passed`, `tests_total` to every row: math rows by `answer`
    (math-verify), code rows by `tests` (sandboxed execution).

    A datatrove pipeline like every curation stage (`--executor local|slurm|ray`): each task verifies its
    work shard; the memory budget of the executor settings bounds a verification batch in bytes."""
    cfg = replace(cfg, limits=cfg.limits or SandboxLimits())
    counts = Path(ctx.out_dir) / "_work" / STAGE / "verify_counts"
    batch_bytes = ctx.executor.budget().batch_bytes

    def steps(removed_dir: Path, removed_schema: pa.Schema) -> list:
        shutil.rmtree(counts, ignore_errors=True)  # a rerun counts only the tasks it publishes
        return [VerifyStep(cfg, str(counts), batch_bytes)]

    return run_datatrove_stage(ctx.inputs, ctx.out_dir, STAGE, steps, exec_cfg=ctx.executor, strict=ctx.strict,
                               rows_per_shard=ctx.rows_per_shard, kept_schema=output_schema,
                               config={"inputs": [s.path for s in ctx.inputs], **asdict(cfg)},
                               extra_stats=lambda: _summed_counts(counts))
