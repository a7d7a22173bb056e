"""The decontamination stage's output path: matcher tasks write the final kept/removed shards (no collect step),
the main process publishes them as they are, a failed rank is rerun from a clean start, and the published
rows are the same whatever the task split."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from engine_cases import make_data

from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.engine import ExecutorConfig, JobsFailed
from cotforge.curate.io import writer as writer_mod
from cotforge.curate.io.readers import InputSpec
from cotforge.curate.io.writer import StageWriter, TaskShards
from cotforge.pipelines.stages import run_stage

SOURCES = ("longcot_math", "code_tests", "shortcot_math")  # the demo data: leaks, and malformed lines in shortcot
SHORT_MAPPING = {"prompt": "question", "response": "solution", "answer": "final_answer"}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return make_data(tmp_path_factory.mktemp("decontam_stage"))


def _cfg(data: Path, **kw) -> DecontamConfig:
    return DecontamConfig(benchmarks=["demo_olympiad"], benchmarks_dir=str(data / "benchmarks"),
                          registry_yaml=str(data / "benchmarks" / "registry.yaml"), ngram=8, threshold=0.5, **kw)


def _specs(data: Path) -> list[InputSpec]:
    return [InputSpec(str(data / f"{s}.jsonl"), s, mapping=SHORT_MAPPING if s == "shortcot_math" else {})
            for s in SOURCES]


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for part in ("kept", "removed")
            for p in sorted((out / part).glob("*.parquet"))}


def _rows(out: Path, part: str) -> list[dict]:
    return [r for f in sorted((out / part).glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def _input_lines(data: Path, sources: tuple[str, ...] = SOURCES) -> int:
    return sum(1 for s in sources for ln in (data / f"{s}.jsonl").read_text().splitlines() if ln.strip())


def test_tasks_write_the_published_shards(data, tmp_path):
    """Three tasks: kept/ and removed/ hold each task's own shards (rank in the name) beside ingest's
    quarantined rows, every input line is in exactly one of them, and the same split gives the same bytes."""
    ex = ExecutorConfig(workers=2, tasks=3)
    s1 = run_stage("decontaminate", _specs(data), tmp_path / "a", _cfg(data), ex)
    run_stage("decontaminate", _specs(data), tmp_path / "b", _cfg(data), ex)
    names = sorted(_files(tmp_path / "a"))
    assert any(n.startswith("kept/part-t00002-") for n in names), names
    assert any(n.startswith("removed/part-t") for n in names) and "removed/part-00000.parquet" in names  # + malformed
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    kept, removed = _rows(tmp_path / "a", "kept"), _rows(tmp_path / "a", "removed")
    assert len(kept) + len(removed) == s1["rows_in"] == _input_lines(data)
    reasons = {r["reason"].split(":")[0] for r in removed}
    assert reasons == {"contaminated", "malformed"}, reasons
    assert s1["removed_by_reason"]["contaminated"] == sum(r["reason"] == "contaminated" for r in removed) > 0
    assert s1["shards"] == {"kept": sum(n.startswith("kept/") for n in names),
                            "removed": sum(n.startswith("removed/") for n in names)}
    per = s1["per_source"]
    assert sum(v["kept"] for v in per.values()) == s1["kept"] == len(kept)
    assert {s: sum(r["source"] == s for r in kept) for s in SOURCES} == {s: per[s]["kept"] for s in SOURCES}
    # one task instead of three: other shard files, the same rows in the same order
    run_stage("decontaminate", _specs(data), tmp_path / "c", _cfg(data), ExecutorConfig(workers=1, tasks=1))
    for part in ("kept", "removed"):
        assert _rows(tmp_path / "c", part) == _rows(tmp_path / "a", part)
    assert not (tmp_path / "a" / "_work").exists()


def test_a_failed_rank_reruns_from_a_clean_start(data, tmp_path, monkeypatch):
    """A rank that dies after writing shards but before its counts file leaves files behind; the rerun keeps
    the finished ranks, removes the leftovers of the failed one and publishes what a clean run publishes."""
    ex = ExecutorConfig(workers=1, tasks=3)  # one worker: the ranks run in this process, so the patch applies
    real_close = TaskShards.close

    def dies_on_rank_1(self, extra=None):
        if self.rank == 1:
            self.kept.close()
            self.removed.close()
            raise RuntimeError("simulated crash after writing shards")
        real_close(self, extra)

    monkeypatch.setattr(TaskShards, "close", dies_on_rank_1)
    with pytest.raises((JobsFailed, RuntimeError), match="rank|simulated crash"):
        run_stage("decontaminate", _specs(data), tmp_path / "o", _cfg(data), ex)
    work = tmp_path / "o" / "_work" / "decontaminate"
    done = sorted(p.name for p in (work / "task_counts").glob("*.json"))
    assert "00000.json" in done and "00001.json" not in done, done
    left = sorted(p.name for p in (work / "kept").glob("part-t00001-*"))
    assert left, "the failed rank wrote shards before dying"
    pq.write_table(pa.table({"x": [1]}), work / "kept" / "part-t00001-00099.parquet")  # a stray from an older try
    monkeypatch.setattr(TaskShards, "close", real_close)
    stats = run_stage("decontaminate", _specs(data), tmp_path / "o", _cfg(data), ex)
    run_stage("decontaminate", _specs(data), tmp_path / "clean", _cfg(data), ex)
    assert _files(tmp_path / "o") == _files(tmp_path / "clean")
    assert stats["kept"] + stats["removed"] == _input_lines(data)


def test_publishing_checks_counts_and_never_overwrites(tmp_path):
    """A counts file that disagrees with its shards fails naming the task and file; a shard name already in
    the output is refused."""
    schema = pa.schema([("id", pa.string()), ("source", pa.string())])
    work = tmp_path / "work"
    ts = TaskShards(work, 0, schema, schema.append(pa.field("reason", pa.string())))
    ts.keep_table(pa.table({"id": ["a", "b"], "source": ["s", "s"]}, schema=schema))
    ts.close()
    counts = json.loads(ts.counts_file.read_text())
    assert counts["rows"] == {"kept": 2, "removed": 0} and counts["kept_by_source"] == {"s": 2}
    sw = StageWriter(tmp_path / "out", "t", schema=schema)
    sw.count_in("s", 2)
    sw.adopt_task(work, 0)
    with pytest.raises(FileExistsError, match="not overwritten"):
        sw.adopt_task(work, 0)
    assert sw.close()["kept"] == 2
    counts["rows"]["kept"] = 3
    ts.counts_file.write_text(json.dumps(counts))
    sw2 = StageWriter(tmp_path / "out2", "t", schema=schema)
    with pytest.raises(RuntimeError, match=r"task 0: its kept shards hold 2 rows, its counts file .*00000\.json says 3"):
        sw2.adopt_task(work, 0)
    with pytest.raises(RuntimeError, match="task 1 finished without"):
        sw2.adopt_task(work, 1)
    assert writer_mod.TaskShards is TaskShards


def test_cli_subprocess_publishes_task_shards(data, tmp_path):
    """From the user's door: `cotforge curate decontaminate --tasks 2` as a subprocess."""
    out = tmp_path / "cli"
    cmd = [sys.executable, "-m", "cotforge.pipelines.cli", "curate", "decontaminate",
           *(str(data / f"{s}.jsonl") for s in SOURCES[:2]), "-o", str(out), "--benchmarks", "demo_olympiad",
           "--benchmarks-dir", str(data / "benchmarks"), "--tasks", "2", "--workers", "2"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ})
    assert res.returncode == 0, res.stderr[-2000:]
    stats = json.loads((out / "stats.json").read_text())
    names = sorted(_files(out))
    assert any(n.startswith("kept/part-t00001-") for n in names), names
    assert stats["kept"] + stats["removed"] == _input_lines(data, SOURCES[:2]) == len(_rows(out, "kept")) + len(_rows(out, "removed"))
    assert (out / "contamination_report.md").exists() and not (out / "_work").exists()


def _report_files(out: Path) -> dict[str, bytes]:
    names = ("contamination_report.md", "contamination_report.json", "contamination_report.html")
    got = {n: (out / n).read_bytes() for n in names}
    got["matches"] = pq.read_table(out / "contamination_matches.parquet").to_pylist()
    return got


def test_report_from_task_parts_equals_the_report_from_removed_rows(data, tmp_path):
    """The stage's report (merged per-task parts, 3 tasks) is byte-identical to one built by re-reading the
    published removed rows."""
    from cotforge.curate.decontam.report import write_contamination_report
    from cotforge.curate.decontam.stage import load_config_benchmarks

    cfg = _cfg(data)
    out = tmp_path / "o"
    stats = run_stage("decontaminate", _specs(data), out, cfg, ExecutorConfig(workers=2, tasks=3))
    assert stats["contamination"]["contaminated_rows"] == stats["removed_by_reason"]["contaminated"] > 0
    from_parts = _report_files(out)
    benchmarks, _ = load_config_benchmarks(cfg)
    write_contamination_report(out, stats, benchmarks, cfg, bench_specs=None)  # parts=None: from removed rows
    again = _report_files(out)
    from_parts_json, again_json = json.loads(from_parts.pop("contamination_report.json")), json.loads(
        again.pop("contamination_report.json"))
    assert from_parts_json.pop("benchmarks")["demo_olympiad"]["fingerprint"] == again_json.pop("benchmarks")[
        "demo_olympiad"]["fingerprint"]  # bench_specs differ (the stage passes them), nothing else
    assert from_parts_json == again_json
    for name in from_parts:  # md, html, every record of contamination_matches.parquet
        assert from_parts[name] == again[name], name


def _fake_rows(n: int, seed: int) -> list[dict]:
    import random

    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        bench, src = rnd.choice(["math500", "aime", "mbpp"]), rnd.choice(["a", "b", "c", "d"])
        score = rnd.choice([0.5, 0.75, 1.0, round(rnd.random(), 2)])  # many ties
        m = {"benchmark": bench, "benchmark_id": f"{bench}-{rnd.randrange(40)}", "part": "problem",
             "match_kind": rnd.choice(["ngram", "fuzzy"]), "side": rnd.choice(["prompt", "response"]), "score": score}
        extra = {**m, "benchmark": "mbpp", "benchmark_id": "mbpp-x"} if rnd.random() < 0.2 else None
        start = None if rnd.random() < 0.1 else rnd.randrange(50)
        rows.append({"id": f"r{rnd.randrange(n // 3)}", "source": src, "reason": "contaminated", "benchmark": bench,
                     "benchmark_id": m["benchmark_id"], "match_kind": m["match_kind"], "side": m["side"],
                     "score": score, "matched_text": f"text {i}", "match_start": start,
                     "match_end": None if start is None else start + 5, "match_share": None if start is None else 0.1,
                     "matches": json.dumps([m] + ([extra] if extra else []))})
    return rows


@pytest.mark.parametrize("limit", [200, 1000, 7])
def test_merged_parts_sample_and_count_like_all_rows(limit, monkeypatch):
    """Parts of a split (bounded samples, JSON round trip) merge to the counts and samples of all rows, ties
    in score and id included; the per-group bound really cuts."""
    from cotforge.curate.decontam import report

    monkeypatch.setattr(report, "HTML_ROWS", 60)  # small bound: the cut is exercised on 3,000 rows
    rows = _fake_rows(3000, seed=limit)
    texts = [f"side text {i} " * 20 for i in range(len(rows))]
    whole = report.ReportParts.from_rows([dict(r) for r in rows], texts)
    cuts = [0, 700, 1900, 3000]
    parts = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        p = report.ReportParts.from_rows([dict(r) for r in rows[a:b]], texts[a:b])
        parts.append(json.loads(json.dumps(p.to_json())))
    merged = report.ReportParts.merge(parts)
    assert sum(len(g) for _, _, g in parts[0]["groups"]) <= max(60, 12)
    k = min(limit, 60)
    key = lambda rs: [(r["id"], r["score"], r["benchmark"], r["source"], r["view"]) for r in rs]  # noqa: E731
    direct = report.sample_rows([dict(r, view=report.side_view(t, r["match_start"], r["match_end"]))
                                 for r, t in zip(rows, texts, strict=True)], k)
    assert key(report.sample_rows(merged.candidates(), k)) == key(direct) == key(
        report.sample_rows(whole.candidates(), k))
    assert merged.summary({"a": 5000}, {"math500": 500, "aime": 30, "mbpp": 9}) == report.summarize(
        rows, {"a": 5000}, {"math500": 500, "aime": 30, "mbpp": 9})
    assert merged.first == whole.first and merged.rows == 3000
    assert merged.no_offset == sum(r["match_start"] is None for r in rows)


def test_ranks_of_one_process_share_the_matcher_and_its_prompt_verdicts(tmp_path):
    """The Matcher (and its prompt cache) is per loaded index and process: a second rank reuses the first
    rank's verdicts; another index gets its own."""
    from cotforge.curate.core.benchmarks import BenchmarkItem
    from cotforge.curate.decontam.index import build_index, load_index
    from cotforge.curate.decontam.stage import process_matcher

    cfg = DecontamConfig(benchmarks=["synth"])
    items = {"synth": [BenchmarkItem("s0", "Find the number of ordered pairs of integers a and b such that a squared "
                                     "plus b squared equals twenty five exactly.", "12", None, None, {}, "synth")]}
    build_index(items, cfg, tmp_path / "i")
    m = process_matcher(load_index(tmp_path / "i"))
    prompts = [items["synth"][0].problem, "Tom has 12 apples.", items["synth"][0].problem]
    first = m.match_batch(prompts, None, cfg)
    assert [bool(x) for x in first] == [True, False, True]
    m2 = process_matcher(load_index(tmp_path / "i"))
    assert m2 is m and len(m2._cache) == 2  # the second rank starts with both distinct prompts' verdicts
    assert [[(x.benchmark_id, x.span) for x in ms] for ms in m2.match_batch(prompts, None, cfg)] == [
        [(x.benchmark_id, x.span) for x in ms] for ms in first]
    build_index({"synth": items["synth"] * 2}, cfg, tmp_path / "j")
    assert process_matcher(load_index(tmp_path / "j")) is not m
