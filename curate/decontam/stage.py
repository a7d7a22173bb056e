"""`cotforge curate decontaminate`: the datatrove steps and the stage.

Flow: ingest (ordered work shards, one per task) -> `DecontamSplit` per task, by column: record batches of
the shard are matched (`match.Matcher`, vectorised; Python only for candidate rows) and written as whole
Arrow tables to the final kept/ and removed/ shards (`benchmark`, `benchmark_id`, `match_kind`, `side`,
`score`, the overlapping span of the ORIGINAL text in `matched_text`, its character offsets
`match_start`/`match_end` and `match_share` = where it starts as a share of that side's text, all matches in
`matches`) -> published as they are (no collect step reading them back) -> report (`report.py`).
`DecontamFilter` is the same matching as a datatrove filter on Documents, for pipelines built from datatrove
readers and writers.

Matching rules: decontam/match.py; the index: decontam/index.py; the report: decontam/report.py.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.filters.base_filter import BaseFilter

from cotforge.curate.core.benchmarks import (
    BenchmarkItem,
    BenchmarkSpec,
    load_benchmarks,
    load_registry_yaml,
    resolve_spec,
    spec_to_dict,
)
from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.decontam.index import DecontamIndex, load_index
from cotforge.curate.decontam.indexcache import cached_build
from cotforge.curate.decontam.match import Match, Matcher, SharedMatches
from cotforge.curate.decontam.report import ReportParts
from cotforge.curate.decontam.spans import locate
from cotforge.curate.engine import (
    Step,
    adopt_task_shards,
    finish_stage,
    quiet_datatrove,
    run_steps,
    start_stage,
)
from cotforge.curate.io.budget import open_streaming, release_arrow_memory, rows_within_bytes
from cotforge.curate.io.remote import remote_output
from cotforge.curate.io.writer import TaskShards

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
    pa.field("match_start", pa.int64()),
    pa.field("match_end", pa.int64()),
    pa.field("match_share", pa.float64()),
    pa.field("matches", pa.string()),
]
REASON = "contaminated"
SPAN_CHARS = 2000  # matched_text is cut to this many characters


def describe_matches(found: list[list[Match]], prompts: list[str | None], responses: list[str | None], norm=None,
                     known: frozenset[str] = frozenset(), kernel: str = "auto") -> list[dict]:
    """The removed-row columns of flagged rows (`found[i]` non-empty): the primary match and where it sits in
    the original text (and `_matches`, the `matches` list before JSON, for the report's counts). Rows whose words the matcher did not keep (verdicts from the prompt cache) are
    normalised again, all in one batch."""
    from cotforge.curate.decontam.canon import matcher_norm

    texts = [(p if ms[0].side == "prompt" else r) or "" for ms, p, r in zip(found, prompts, responses, strict=True)]
    redo = [i for i, ms in enumerate(found) if ms[0].words is None]
    again = dict(zip(redo, matcher_norm([texts[i] for i in redo], norm or DecontamConfig.norm, known, kernel).to_pylist(),
                     strict=True)) if redo else {}
    out = []
    for i, ms in enumerate(found):
        best, text = ms[0], texts[i]
        # a prompt's shared Match list (match.SharedMatches) described before from the same text: the same row
        memo = ms.described if isinstance(ms, SharedMatches) else None
        if memo is not None and memo[0] == text:
            out.append(dict(memo[1]))
            continue
        words = best.words if best.words is not None else (again[i].split(" ") if again[i] else [])
        span = (0, len(text)) if best.match_kind == "semantic" else locate(text, words, *best.span)
        start, end = span if span else (None, None)
        shown = text[start:end] if span else " ".join(words[best.span[0]:best.span[1]])  # no anchor: the words
        listed = [m.as_dict() for m in ms]
        row = {"benchmark": best.benchmark, "benchmark_id": best.benchmark_id, "match_kind": best.match_kind,
               "side": best.side, "score": float(best.score), "matched_text": shown[:SPAN_CHARS],
               "match_start": start, "match_end": end,
               "match_share": round(start / max(len(text), 1), 4) if start is not None else None,
               "matches": json.dumps(listed, ensure_ascii=False), "_matches": listed}
        if isinstance(ms, SharedMatches) and best.words is not None:  # described from the text and ms alone
            ms.described = (text, row)
        out.append(dict(row))
    return out


class DecontamSplit(PipelineStep):
    """Per task: match the work shard's record batches and write kept / removed rows as whole Arrow tables
    into the stage's final shards (`io.writer.TaskShards`: `kept/part-tRRRRR-NNNNN.parquet`, the same under
    removed/, and the task's counts); Python per row only for the flagged ones."""

    name = "🧪 decontaminate split"
    type = "🔻 - FILTER"

    def __init__(self, work: str, index_dir: str, cfg: DecontamConfig, schema: pa.Schema, removed_schema: pa.Schema,
                 rows_per_shard: int, buffer_bytes: int | None):
        super().__init__()
        self.work, self.index_dir, self.cfg = work, index_dir, cfg
        self.schema, self.removed_schema = schema, removed_schema
        self.rows_per_shard, self.buffer_bytes = rows_per_shard, buffer_bytes

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:

        index = load_index(self.index_dir)  # once per worker process, not per rank
        matcher = process_matcher(index)
        work = Path(self.work)
        pf = open_streaming(work / "input" / sorted((work / "input").glob("*.parquet"))[rank].name)
        read_rows = rows_within_bytes(pf, 2 * self.cfg.batch_bytes, self.cfg.batch_size)
        out = TaskShards(work, rank, self.schema, self.removed_schema, self.rows_per_shard, self.buffer_bytes)
        parts = ReportParts() if self.cfg.report else None
        judged0 = _judge_counts(matcher)  # the matcher (and its judge) outlives this rank in the worker process
        with self.track_time():
            for batch in pf.iter_batches(batch_size=read_rows):
                table = pa.Table.from_batches([batch])
                resp = table.column("response") if "response" in table.column_names else None
                found = matcher.match_batch(table.column("prompt").combine_chunks(),
                                            resp.combine_chunks() if resp is not None else None, self.cfg)
                flagged = np.flatnonzero(np.fromiter(map(bool, found), dtype=bool, count=len(found)))
                drop = np.zeros(table.num_rows, dtype=bool)
                drop[flagged] = True
                out.keep_table(_conform(table.filter(pa.array(~drop)), self.schema))
                if len(flagged):
                    removed = table.take(pa.array(flagged))
                    hits = [found[i] for i in flagged.tolist()]
                    prompts = removed.column("prompt").to_pylist()
                    resps = _response_texts(removed, hits) if resp is not None else [None] * len(flagged)
                    rows = describe_matches(hits, prompts, resps, self.cfg.norm, index.defined_names,
                                            self.cfg.text_kernel)
                    removed = removed.append_column("reason", pa.array([REASON] * len(rows), pa.string()))
                    for f in REMOVED_FIELDS:
                        removed = removed.append_column(f.name, pa.array([r[f.name] for r in rows], f.type))
                    out.remove_table(_conform(removed, self.removed_schema))
                    if parts is not None:
                        ids, sources = removed.column("id").to_pylist(), removed.column("source").to_pylist()
                        parts.add([{**r, "id": i, "source": src, "reason": REASON}
                                   for r, i, src in zip(rows, ids, sources, strict=True)],
                                  [p if r["side"] == "prompt" else q for r, p, q in zip(rows, prompts, resps, strict=True)])
                    for r in rows:
                        self.stat_update(f"contaminated_{r['benchmark']}", f"contaminated_side_{r['side']}")
                self.stat_update("kept", value=int(table.num_rows - len(flagged)))
                self.stat_update("removed", value=int(len(flagged)))
                del table, batch
                release_arrow_memory()
            judged = _judge_counts(matcher)
        peak = _peak_rss_mb()  # the task's own high-water mark (stats of forked / exec'd children inherit the parent's)
        extra: dict = {"peak_rss_mb": peak}
        if judged != judged0:  # pairs the LLM judge decided (cached answers included), and those asked the endpoint
            extra["judge"] = [judged[0] - judged0[0], judged[1] - judged0[1]]
        if parts is not None:  # the report's share of this task (report.py merges them)
            (work / "report").mkdir(exist_ok=True)
            pq.write_table(parts.matches_table(), work / "report" / f"{rank:05d}.parquet", compression="zstd")
            extra["report"] = parts.to_json()
        out.close(extra)
        return
        yield


def _response_texts(removed: pa.Table, hits: list[list[Match]]) -> list[str | None]:
    """The responses of removed rows whose primary match is on the response side, None for the others: only
    those are read as Python strings (describe_matches and the report look at the matched side's text; on
    long-CoT rows a response is ~60 KB)."""
    want = [k for k, ms in enumerate(hits) if ms[0].side != "prompt"]
    out: list[str | None] = [None] * len(hits)
    if want:
        for k, text in zip(want, removed.column("response").take(pa.array(want)).to_pylist(), strict=True):
            out[k] = text
    return out


_MATCHERS: dict[int, Matcher] = {}


def _judge_counts(matcher: Matcher) -> tuple[int, int]:
    """(pairs the semantic tier's LLM judge decided, pairs it asked the endpoint) so far in this process."""
    tier = matcher._semantic
    if tier is None or tier.judge is None:
        return 0, 0
    return tier.judged_pairs, tier.judge.asked


def process_matcher(index: DecontamIndex) -> Matcher:
    """One Matcher per loaded index in a worker process, so its prompt verdict cache serves every rank the
    process runs (a prompt repeated across ranks -- many responses per problem -- is matched once per process,
    not once per rank). Verdicts depend only on the prompt, the index and the config; a changed config starts
    a new cache (`Matcher.prompt_side`)."""
    m = _MATCHERS.get(id(index))
    if m is None or m.index is not index:
        _MATCHERS.clear()
        m = _MATCHERS[id(index)] = Matcher(index)
    return m


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` with exactly `schema`'s columns (null columns for the missing ones)."""
    cols = [table.column(f.name) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
            for f in schema]
    return pa.Table.from_arrays(cols, schema=schema)


class DecontamFilter(BaseFilter):
    """Drops rows that contain a benchmark item (prompt or response side); the exclusion writer gets
    them with the columns of REMOVED_FIELDS (Document pipelines; the stage uses `DecontamSplit`)."""

    name = "🧪 decontaminate"

    def __init__(self, index_dir: str | Path, cfg: DecontamConfig, exclusion_writer=None):
        super().__init__(exclusion_writer=exclusion_writer, batch_size=cfg.batch_size)
        self.index_dir = str(index_dir)
        self.cfg = cfg
        self._matcher: Matcher | None = None

    @property
    def matcher(self) -> Matcher:
        if self._matcher is None:
            self._matcher = Matcher(DecontamIndex(self.index_dir))
        return self._matcher

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        return self.filter_batch([doc])[0]

    def filter_batch(self, batch: list[Document]) -> list[bool | tuple[bool, str]]:
        responses = [doc.metadata.get("response") for doc in batch]
        found = self.matcher.match_batch([d.text for d in batch], responses, self.cfg)
        out: list[bool | tuple[bool, str]] = []
        for doc, ms in zip(batch, found, strict=True):
            if not ms:
                out.append(True)
                continue
            info = describe_matches([ms], [doc.text], [doc.metadata.get("response")], self.cfg.norm,
                                    self.matcher.index.defined_names)[0]
            doc.metadata.update(info)
            self.stat_update(f"contaminated_{info['benchmark']}", f"contaminated_side_{info['side']}")
            out.append((False, REASON))
        return out


# --------------------------------------------------------------------------- stage


def load_config_benchmarks(cfg: DecontamConfig) -> tuple[dict[str, list[BenchmarkItem]], dict[str, BenchmarkSpec]]:
    """Load the configured benchmarks: registry names, user YAML specs, or files DIR/NAME.* of --benchmarks-dir."""
    extra = load_registry_yaml(cfg.registry_yaml) if cfg.registry_yaml else None
    if not cfg.benchmarks:
        raise ValueError("decontaminate: no benchmarks given (--benchmarks aime2024,math500,...)")
    loaded = load_benchmarks(cfg.benchmarks, cfg.benchmarks_dir, extra, offline=cfg.offline)
    return loaded, {n: resolve_spec(n, cfg.benchmarks_dir, extra) for n in cfg.benchmarks}


def _spent(timings: dict[str, float]) -> float:
    """Seconds already accounted for in `timings` (its *_s entries; task_peak_rss_mb is no time)."""
    return sum(v for k, v in timings.items() if k.endswith("_s"))


def _peak_rss_mb() -> float | None:
    """This process's peak resident memory (VmHWM, Linux), MB; None where /proc is not there."""
    try:
        with open("/proc/self/status") as fh:
            return next(int(x.split()[1]) / 1024 for x in fh if x.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return None








def _bounded_shard_rows(specs, rows_per_shard: int, max_bytes: int = 256 << 20) -> int:
    """Output shards of at most ~`max_bytes` when the input's rows are large (long responses): the stage
    writer buffers a shard's row group in memory. Known cheaply for Parquet inputs only."""
    size = rows = 0
    for s in specs:
        p = Path(s.path)
        if not (p.is_file() and p.name.endswith(".parquet")):
            return rows_per_shard
        md = pq.ParquetFile(p).metadata
        size += sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
        rows += md.num_rows
    per_row = size / max(rows, 1)
    return int(max(256, min(rows_per_shard, max_bytes // max(per_row, 1))))


def _tasks_for_workers(specs, exec_cfg):
    """At least one task per worker when the row count is known cheaply (Parquet metadata): a 10k-row input
    would otherwise be one task on one core. (The byte-bounded split is the engine's; this only stops a
    small input from idling workers.)"""
    rows = 0
    for s in specs:
        p = Path(s.path)
        if not (p.is_file() and p.name.endswith(".parquet")):
            return exec_cfg
        rows += pq.ParquetFile(p).metadata.num_rows
    per = max(1, math.ceil(rows / max(exec_cfg.workers, 1)))
    if rows and per < exec_cfg.rows_per_task:
        return dataclasses.replace(exec_cfg, rows_per_task=per)
    return exec_cfg


def _fresh_index(benchmarks: dict[str, list[BenchmarkItem]], cfg: DecontamConfig, index_dir: Path) -> tuple[dict, bool]:
    """Build the index next to `index_dir` (or copy it from the on-disk cache of built indexes,
    `decontam/indexcache.py`) and keep the one already there when it is byte-identical (Slurm jobs of an
    earlier invocation may still be reading it); otherwise replace it. Returns (meta, whether cached)."""
    new = index_dir.with_name(index_dir.name + ".new")
    shutil.rmtree(new, ignore_errors=True)
    meta, cached = cached_build(benchmarks, cfg, new)

    def files(d: Path) -> dict[str, bytes]:
        return {str(f.relative_to(d)): f.read_bytes() for f in sorted(d.rglob("*")) if f.is_file()}

    if index_dir.is_dir() and files(index_dir) == files(new):
        shutil.rmtree(new)
    else:
        shutil.rmtree(index_dir, ignore_errors=True)
        new.rename(index_dir)
    return meta, cached


@remote_output
def run(cfg: DecontamConfig, ctx: StageContext) -> dict:
    """Remove rows that contain benchmark problems (prompt or response side); write a contamination report.

    Builds the benchmark index once, splits every work shard with datatrove (the tasks write the final shards,
    published as they are) and writes the report. The work folder follows the engine's contract (`start_stage` / `run_steps` /
    `finish_stage`): Slurm jobs are waited for or, with `wait: false`, found again by the next invocation,
    which reuses the ingested shards and finished ranks. `keep_index` moves the index to OUT/decontam_index;
    `keep_work` keeps OUT/_work/decontaminate and OUT/_work/decontaminate_index."""
    specs, out_dir, strict, rows_per_shard = ctx.inputs, ctx.out_dir, ctx.strict, ctx.rows_per_shard
    exec_cfg = ctx.executor
    quiet_datatrove()
    t0 = time.time()
    timings: dict[str, float] = {}
    out = Path(out_dir)
    bench_specs: dict[str, BenchmarkSpec] = {}
    benchmarks, bench_specs = load_config_benchmarks(cfg)
    if cfg.semantic and cfg.semantic_judge:  # an unreachable judge is a usage error here, not a failed task later
        from cotforge.curate.text.judge import make_judge

        make_judge(cfg).check()
    exec_cfg = _tasks_for_workers(specs, exec_cfg.for_inputs(specs))
    rows_per_shard = _bounded_shard_rows(specs, rows_per_shard)
    index_dir = out / "_work" / "decontaminate_index"  # outside the work folder (start_stage may reset it)
    meta, cached = _fresh_index(benchmarks, cfg, index_dir)
    timings["index_s"] = round(time.time() - t0, 3)
    timings["index_cached"] = cached  # copied from the cache of built indexes (decontam/indexcache.py)
    config = {**cfg.to_dict(), "benchmark_items": meta["benchmarks"], "stop_ngrams": meta["stop_ngrams"],
              "index_keys": meta["keys"], "short_keys": meta["short_keys"],
              "response_side": "whole response" if not cfg.response_chars else f"first {cfg.response_chars} characters"}
    area = start_stage(specs, out, "decontaminate", exec_cfg, removed_extra=REMOVED_FIELDS, strict=strict,
                       rows_per_shard=rows_per_shard, config=config)
    with area:
        work, writer = area.work, area.writer
        timings["ingest_s"] = round(time.time() - t0 - _spent(timings), 3)
        if area.tasks:
            step = DecontamSplit(str(work), str(index_dir), cfg, area.schema, writer.removed.schema,
                                 writer.kept.rows_per_shard, writer.kept.buffer_bytes)
            run_steps(work, [Step("decontaminate", [step], area.tasks)], exec_cfg, "decontaminate")
            timings["match_s"] = round(time.time() - t0 - _spent(timings), 3)
            tasks = adopt_task_shards(writer, work, area.tasks)
            peaks = [t["peak_rss_mb"] for t in tasks if t.get("peak_rss_mb") is not None]
            if peaks:
                timings["task_peak_rss_mb"] = round(max(peaks), 1)  # the largest matcher task's VmHWM
            if cfg.report:  # the tasks' report parts, read before the work folder goes
                report_parts = ReportParts.merge([t["report"] for t in tasks])
                match_tables = [pq.read_table(work / "report" / f"{rank:05d}.parquet") for rank in range(area.tasks)]
            timings["collect_s"] = round(time.time() - t0 - _spent(timings), 3)
        else:
            report_parts, match_tables = ReportParts(), []
        judge = {}
        if cfg.semantic_judge and area.tasks:
            counts = [t.get("judge", [0, 0]) for t in tasks]
            judge = {"semantic_judge": {"model": cfg.semantic_judge_model, "pairs": sum(c[0] for c in counts),
                                        "asked": sum(c[1] for c in counts)}}
        stats = finish_stage(area, {"timings": timings, **judge})
    if cfg.report:
        from cotforge.curate.decontam.report import write_contamination_report

        summary = write_contamination_report(out, stats, benchmarks, cfg, bench_specs={
            n: spec_to_dict(s) for n, s in bench_specs.items()}, parts=report_parts, match_tables=match_tables)
        stats["contamination"] = summary["totals"]
        timings["report_s"] = round(time.time() - t0 - _spent(timings), 3)
        stats["timings"] = timings
        (out / "stats.json").write_text(json.dumps(stats, indent=2, sort_keys=True, default=str) + "\n")
    if cfg.keep_index:
        shutil.move(str(index_dir), str(out / "decontam_index"))
    elif not exec_cfg.keep_work:
        shutil.rmtree(index_dir, ignore_errors=True)
    if (out / "_work").exists() and not any((out / "_work").iterdir()):
        (out / "_work").rmdir()
    return stats
