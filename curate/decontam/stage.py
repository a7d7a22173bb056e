"""The decontaminate stage (`cotforge curate decontaminate`): the datatrove filter and the stage.

Matching rules: decontam/match.py; the index: decontam/index.py; the report: decontam/report.py.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
from datatrove.data import Document
from datatrove.pipeline.filters.base_filter import BaseFilter

from cotforge.curate.benchmarks import (
    BenchmarkItem,
    BenchmarkSpec,
    get_spec,
    load_benchmarks,
    load_registry_yaml,
    spec_to_dict,
)
from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.decontam.index import build_index
from cotforge.curate.decontam.match import DecontamIndex
from cotforge.curate.io.remote import remote_output

if TYPE_CHECKING:
    from cotforge.curate.context import StageContext

log = logging.getLogger(__name__)


REMOVED_FIELDS = [
    pa.field("benchmark", pa.string()),
    pa.field("benchmark_id", pa.string()),
    pa.field("match_kind", pa.string()),
    pa.field("side", pa.string()),
    pa.field("score", pa.float64()),
    pa.field("matched_text", pa.string()),
    pa.field("matches", pa.string()),
]
REASON = "contaminated"


# --------------------------------------------------------------------------- datatrove step


class DecontamFilter(BaseFilter):
    """Drops rows that contain a benchmark item (prompt or response side); the exclusion writer gets
    them with `benchmark`, `benchmark_id`, `match_kind`, `side`, `score`, `matched_text`, `matches`."""

    name = "🧪 decontaminate"

    def __init__(self, index_dir: str | Path, cfg: DecontamConfig, exclusion_writer=None):
        super().__init__(exclusion_writer=exclusion_writer, batch_size=cfg.batch_size)
        self.index_dir = str(index_dir)
        self.cfg = cfg
        self._index: DecontamIndex | None = None

    @property
    def index(self) -> DecontamIndex:
        if self._index is None:
            self._index = DecontamIndex(self.index_dir)
        return self._index

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        return self.filter_batch([doc])[0]

    def filter_batch(self, batch: list[Document]) -> list[bool | tuple[bool, str]]:
        responses = [doc.metadata.get("response") for doc in batch]
        matches = self.index.match_batch([d.text for d in batch], responses, self.cfg)
        out: list[bool | tuple[bool, str]] = []
        for doc, ms in zip(batch, matches, strict=True):
            if not ms:
                out.append(True)
                continue
            best = ms[0]
            text = doc.text if best.side == "prompt" else (doc.metadata.get("response") or "")
            doc.metadata.update({
                "benchmark": best.benchmark, "benchmark_id": best.benchmark_id, "match_kind": best.match_kind,
                "side": best.side, "score": float(best.score),
                "matched_text": self.index.overlap_text(text, best.entry, self.cfg, best.match_kind),
                "matches": json.dumps([m.as_dict() for m in ms], ensure_ascii=False),
            })
            self.stat_update(f"contaminated_{best.benchmark}")
            self.stat_update(f"contaminated_side_{best.side}")
            out.append((False, REASON))
        return out


# --------------------------------------------------------------------------- stage


def load_config_benchmarks(cfg: DecontamConfig) -> tuple[dict[str, list[BenchmarkItem]], dict[str, BenchmarkSpec]]:
    """Load the configured benchmarks (user YAML registry included)."""
    extra = load_registry_yaml(cfg.registry_yaml) if cfg.registry_yaml else None
    if not cfg.benchmarks:
        raise ValueError("decontaminate: no benchmarks given (--benchmarks aime2024,math500,...)")
    loaded = load_benchmarks(cfg.benchmarks, cfg.benchmarks_dir, extra)
    return loaded, {n: get_spec(n, extra) for n in cfg.benchmarks}


@remote_output
def run_decontam(specs, out_dir: str | Path, cfg: DecontamConfig, exec_cfg=None, *, strict: bool = False,
                 rows_per_shard: int = 50_000, report: bool = True, keep_index: bool = False,
                 benchmarks: dict[str, list[BenchmarkItem]] | None = None) -> dict:
    """The decontamination stage: build the index once, filter with datatrove, write the report."""
    from cotforge.curate.engine import run_datatrove_stage, schema_writer

    out = Path(out_dir)
    bench_specs: dict[str, BenchmarkSpec] = {}
    if benchmarks is None:
        benchmarks, bench_specs = load_config_benchmarks(cfg)
    index_dir = out / "_work" / "decontam_index"
    if index_dir.exists():
        shutil.rmtree(index_dir)
    meta = build_index(benchmarks, cfg, index_dir)
    config = {**cfg.to_dict(), "benchmark_items": meta["benchmarks"], "stop_ngrams": meta["stop_ngrams"],
              "index_keys": meta["keys"]}

    def steps(removed_dir: Path, rschema: pa.Schema) -> list:
        return [DecontamFilter(index_dir, cfg, exclusion_writer=schema_writer(removed_dir, rschema))]

    stats = run_datatrove_stage(specs, out, "decontaminate", steps, removed_extra=REMOVED_FIELDS,
                                exec_cfg=exec_cfg, strict=strict, rows_per_shard=rows_per_shard, config=config)
    if report:
        from cotforge.curate.decontam.report import write_contamination_report

        summary = write_contamination_report(out, stats, benchmarks, cfg, bench_specs={
            n: spec_to_dict(s) for n, s in bench_specs.items()})
        stats["contamination"] = summary["totals"]
        (out / "stats.json").write_text(json.dumps(stats, indent=2, sort_keys=True, default=str) + "\n")
    if not keep_index:
        shutil.rmtree(index_dir, ignore_errors=True)
        work = out / "_work"
        if work.exists() and not any(work.iterdir()):
            work.rmdir()
    return stats


def run(cfg: DecontamConfig, ctx: StageContext) -> dict:
    """Remove rows that contain benchmark problems (prompt or response side); write a contamination report.

    With `keep_work` the benchmark index stays in OUT/_work/decontam_index."""
    return run_decontam(ctx.inputs, ctx.out_dir, cfg, ctx.executor, strict=ctx.strict,
                        rows_per_shard=ctx.rows_per_shard, keep_index=ctx.executor.keep_work)
