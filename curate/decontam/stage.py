"""`cotforge curate decontaminate`: the datatrove filter, the stage and the CLI.

Matching rules: curate/decontam_match.py; the index: curate/decontam_index.py; the report: curate/report.py.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import click
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


# --------------------------------------------------------------------------- CLI


def _split_names(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


@click.command("decontaminate")
@click.argument("inputs", nargs=-1, required=True)
@click.option("-o", "--out", "out", required=True, type=click.Path(file_okay=False),
              help="Output folder (kept/, removed/, stats.json, contamination_report.md/.json/.png).")
@click.option("--benchmarks", required=True, help="Comma-separated benchmark names, e.g. aime2024,math500,humaneval.")
@click.option("--benchmarks-dir", type=click.Path(exists=True, file_okay=False), default=None,
              help="Local folder with <name>.jsonl[.gz]/.parquet benchmark files (fields id, problem, ...).")
@click.option("--registry", "registry_yaml", type=click.Path(exists=True, dir_okay=False), default=None,
              help="YAML with extra benchmark specs.")
@click.option("--ngram", type=int, default=DecontamConfig.ngram, show_default=True)
@click.option("--threshold", type=float, default=DecontamConfig.threshold, show_default=True,
              help="Prompt side: the longest verbatim chunk of a benchmark item, as a share of its words.")
@click.option("--response-threshold", type=float, default=DecontamConfig.response_threshold, show_default=True)
@click.option("--min-chunk-words", type=int, default=DecontamConfig.min_chunk_words, show_default=True,
              help="A partial (truncated) copy must be at least this many words long.")
@click.option("--max-item-df", type=int, default=DecontamConfig.max_item_df, show_default=True,
              help="N-grams shared by more benchmark items than this are stop n-grams.")
@click.option("--response/--no-response", "check_response", default=True, show_default=True,
              help="Also match the response side (reported separately).")
@click.option("--solutions/--no-solutions", "include_solutions", default=False, show_default=True,
              help="Also index benchmark reference solutions.")
@click.option("--fuzzy/--no-fuzzy", default=True, show_default=True, help="MinHash-LSH tier for reformatted copies.")
@click.option("--fuzzy-threshold", type=float, default=DecontamConfig.fuzzy_threshold, show_default=True)
@click.option("--workers", type=int, default=2, show_default=True)
@click.option("--strict", is_flag=True, help="Stop at the first malformed row instead of quarantining it.")
@click.option("--source-name", "source_names", multiple=True, metavar="[INPUT=]NAME")
@click.option("--keep-index", is_flag=True, help="Keep the n-gram index under OUT/_work/decontam_index.")
def decontaminate_command(inputs, out, benchmarks, benchmarks_dir, registry_yaml, ngram, threshold,
                          response_threshold, min_chunk_words, max_item_df, check_response, include_solutions, fuzzy,
                          fuzzy_threshold, workers, strict, source_names, keep_index) -> None:
    """Remove rows of INPUTS that contain benchmark problems; write a contamination report."""
    from cotforge.curate.benchmarks import BenchmarkError
    from cotforge.curate.cli_common import specs_from_cli
    from cotforge.curate.engine import ExecutorConfig
    from cotforge.curate.io.readers import InputError

    cfg = DecontamConfig(benchmarks=_split_names(benchmarks), benchmarks_dir=benchmarks_dir,
                         registry_yaml=registry_yaml, ngram=ngram, threshold=threshold,
                         response_threshold=response_threshold, min_chunk_words=min_chunk_words,
                         max_item_df=max_item_df,
                         check_response=check_response, include_solutions=include_solutions, fuzzy=fuzzy,
                         fuzzy_threshold=fuzzy_threshold)
    specs = specs_from_cli(inputs, (), source_names, None)
    try:
        stats = run_decontam(specs, out, cfg, ExecutorConfig(workers=workers), strict=strict, keep_index=keep_index)
    except (BenchmarkError, InputError, ValueError) as e:
        raise click.ClickException(str(e)) from e
    c = stats.get("contamination", {})
    click.echo(f"{stats['rows_in']} rows in, {stats['kept']} kept, {stats['removed']} removed "
               f"({c.get('contaminated_rows', 0)} contaminated: {c.get('prompt_side_rows', 0)} prompt side, "
               f"{c.get('response_only_rows', 0)} response side only) -> {out}")
    click.echo(f"report: {Path(out) / 'contamination_report.md'}")
