"""Raw Parquet inputs read by column (`curate/io/columns.py`) give what the row loop gives: the same work
shards (rows, shard cuts and file bytes), the same quarantined records with the same reasons, the same log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cotforge.curate.core.schema import removed_schema
from cotforge.curate.engine.work import IngestLog
from cotforge.curate.io import columns, ingest, inputs
from cotforge.curate.io.inputs import input_schema
from cotforge.curate.io.readers import InputSpec

LONG = "long " * 16_000  # 80k characters: a row over every small byte budget below


def _odd_rows(n: int = 240) -> list[dict]:
    """Blank / whitespace / null prompts, control characters, quotes and backslashes, non-ASCII text and
    struct keys, ids given twice or already suffixed, empty ids, numbers, lists, floats, very long rows."""
    rows = []
    for i in range(n):
        rows.append({
            "id": ["", None, f"d{i % 23}", f"d{i % 23}~2", f"u{i}"][i % 5],
            "problem": ["Solve x + 1 = 2.", "", " \u3000\n", None, "q \"quoted\" \\ back\x00\x1f\x7f\u2028 é",
                        LONG, f"What is {i}?"][i % 7],
            "solution": [None, "ok", "\t ", LONG, "Ω ∑"][i % 5],
            "answer": [7, None, -3][i % 3],
            "data_source": ["s1", "", None, "ß"][i % 4],
            "domain": ["Math", "coding", None, "", "Physics"][i % 5],
            "extra": {"ключ": i, "n": [1.5, None, float("inf")][i % 3], "z": {"é": "ü", "l": [1, None]}},
            "score": i / 7, "flag": [True, False, None][i % 3], "tags": [["a", "b\n"], [], None][i % 3],
            "ratio": [None, 0.1][i % 2], "日本": ["語", None][i % 2], "big": 2**62 + i,
        })
    return rows


def _ingest(tmp: Path, name: str, specs: list[InputSpec], cut: tuple[int, int | None, int | None]) -> dict:
    schema = input_schema(specs)
    log = IngestLog(tmp / name / "ingest", removed_schema(schema))
    files = ingest.materialize(specs, tmp / name / "input", log, rows_per_task=cut[0], schema=schema,
                               bytes_per_task=cut[1], buffer_bytes=cut[2])
    log.save()
    quarantined = sorted((tmp / name / "ingest" / "quarantined").glob("*.parquet"))
    return {"shards": [pq.read_table(f).to_pylist() for f in files], "bytes": [f.read_bytes() for f in files],
            "quarantined": [r for f in quarantined for r in pq.read_table(f).to_pylist()],
            "log": (tmp / name / "ingest" / "ingest.json").read_text()}


def _both(tmp: Path, monkeypatch, specs: list[InputSpec], cut) -> tuple[dict, dict]:
    """(by column, by row) for the same inputs."""
    used: list[str] = []
    real = columns.open_parquet_unit

    def spy(unit, report):
        got = real(unit, report)
        if got is not None:
            used.append(unit.path)
        return got

    monkeypatch.setattr(inputs, "open_parquet_unit", spy)
    by_column = _ingest(tmp, "columns", specs, cut)
    assert used, "no input was read by column"
    monkeypatch.setattr(inputs, "open_parquet_unit", lambda unit, report: None)
    by_row = _ingest(tmp, "rows", specs, cut)
    return by_column, by_row


@pytest.mark.parametrize("cut", [(20_000, 128 << 20, 16 << 20), (13, 120_000, 9_000), (50, None, None)])
def test_column_path_equals_the_row_loop_on_odd_rows(tmp_path, monkeypatch, cut):
    a = tmp_path / "a.parquet"
    pq.write_table(pa.Table.from_pylist(_odd_rows()), a, row_group_size=37)
    b = tmp_path / "b.parquet"  # int ids repeating those of another file, no response column
    pq.write_table(pa.Table.from_pylist([{"uid": i % 9, "question": f"Q{i} ü", "lang": "日本語"} for i in range(60)]), b)
    specs = [InputSpec(str(a)), InputSpec(str(b), source_name="bee"), InputSpec(str(a), domain="science"),
             InputSpec(str(b), mapping={"prompt": "question", "id": "lang"})]
    col, row = _both(tmp_path, monkeypatch, specs, cut)
    assert col["shards"] == row["shards"]
    assert col["bytes"] == row["bytes"]  # same row groups too
    assert col["quarantined"] == row["quarantined"] and col["log"] == row["log"]
    reasons = {q["reason"] for q in col["quarantined"]}
    assert reasons == {"malformed: field 'problem' is empty", "malformed: field 'problem' is missing or null"}
    kept = [r for s in col["shards"] for r in s]
    assert len({r["id"] for r in kept}) == len(kept)
    assert any(r["id"].endswith("~3") for r in kept)  # an input id `x~2` pushes the renaming on


def test_meta_column_tests_and_lone_surrogates_keep_the_row_loops_reasons(tmp_path, monkeypatch):
    """A `meta` column (JSON text or a struct) is merged row by row; tests kept in meta are popped; a lone
    surrogate from a JSON escape in meta is quarantined naming the field, as `to_row` does."""
    rows = [{"id": f"m{i}", "prompt": f"P{i}", "meta": [
        '{"k\\u00e9y": [1, {"b": 2}], "tests": "assert f(1) == 2"}', '{"x": "\\ud800"}', "not json", None,
        "{'py': 'repr'}", '{"_origin": "spoof"}'][i % 6], "note": "ü"} for i in range(30)]
    a = tmp_path / "m.parquet"
    pq.write_table(pa.Table.from_pylist(rows), a)
    s = tmp_path / "s.parquet"
    pq.write_table(pa.Table.from_pylist([{"problem": f"S{i}", "meta": {"ä": i, "q": None}} for i in range(9)]), s)
    col, row = _both(tmp_path, monkeypatch, [InputSpec(str(a)), InputSpec(str(s))], (7, 2_000, 500))
    assert col == row
    assert len(col["quarantined"]) == 5 and all(q["reason"].startswith(
        "malformed: field 'meta': invalid Unicode (lone surrogate at character ") for q in col["quarantined"])
    kept = [r for sh in col["shards"] for r in sh]
    assert sum(r["tests"] is not None for r in kept) == 5 and all(r["domain"] == "other" for r in kept)


def test_invalid_utf8_in_a_parquet_string_column_is_reported_like_the_row_loop(tmp_path, monkeypatch):
    good = pa.array(["fine"] * 3000, pa.string())
    bad = pa.array([b"ok"] * 2500 + [b"bad \xff byte"] + [b"ok"] * 499, pa.binary()).view(pa.string())
    t = pa.table({"problem": good, "solution": bad})
    f = tmp_path / "u.parquet"
    pq.write_table(t, f, row_group_size=1000)
    col, row = _both(tmp_path, monkeypatch, [InputSpec(str(f))], (20_000, None, None))
    assert col == row
    assert len(col["quarantined"]) == 1 and "unreadable Parquet data after row 2048" in col["quarantined"][0]["reason"]


def test_a_file_the_column_rules_do_not_cover_goes_to_the_row_loop(tmp_path):
    pq.write_table(pa.table({"messages": [[{"role": "user", "content": "hi"}]]}), tmp_path / "chat.parquet")
    pq.write_table(pa.table({"problem": ["p"], "gt": [1.5], "x": [1]}), tmp_path / "float.parquet")
    pq.write_table(pa.table({"problem": ["p"], "answer": ["1"]}), tmp_path / "preset.parquet")  # acereason_math
    pq.write_table(pa.table({"problem": ["p"], "gt": ["1"], "x": [1]}), tmp_path / "plain.parquet")
    for name, covered in (("chat", False), ("float", False), ("preset", False), ("plain", True)):
        got = columns.open_parquet_unit(InputSpec(str(tmp_path / f"{name}.parquet")), {})
        assert (got is not None) == covered, name
        if got is not None:
            got.close()


def test_json_fragments_are_json_dumps():
    values = ["a\"b\\c", "\x00\x01\x08\x0c\n\r\t\x1f\x7f", "é ∑ \u2028", None, ""]
    assert columns.json_fragments(pa.array(values)).to_pylist() == [json.dumps(v, ensure_ascii=False) for v in values]
    ints = [0, -5, 2**63 - 1, None]
    assert columns.json_fragments(pa.array(ints)).to_pylist() == [json.dumps(v) for v in ints]
    assert columns.json_fragments(pa.array([True, None])).to_pylist() == ["true", "null"]


def test_cli_ingest_of_a_raw_parquet_equals_the_row_loop(tmp_path, monkeypatch):
    """`cotforge curate ingest` (a subprocess) on a Parquet file not in the row schema writes the shards, quarantine
    and counts the row loop writes in process."""
    from cotforge.pipelines.stages import run_stage

    f = tmp_path / "raw.parquet"
    pq.write_table(pa.Table.from_pylist(_odd_rows(300)), f, row_group_size=50)
    p = subprocess.run([sys.executable, "-m", "cotforge.pipelines.cli", "curate", "ingest", str(f), "-o",
                        str(tmp_path / "cli"), "--rows-per-shard", "70"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    monkeypatch.setattr(inputs, "open_parquet_unit", lambda unit, report: None)
    run_stage("ingest", [InputSpec(str(f))], tmp_path / "rows", rows_per_shard=70)
    for part in ("kept", "removed"):
        cli, rows = (sorted((tmp_path / d / part).glob("*.parquet")) for d in ("cli", "rows"))
        assert [g.read_bytes() for g in cli] == [g.read_bytes() for g in rows] and len(cli) > 1, part
    stats = [json.loads((tmp_path / d / "stats.json").read_text()) for d in ("cli", "rows")]
    for s in stats:
        s.pop("ingest_s")
    assert stats[0] == stats[1] and stats[0]["removed_by_reason"] == {"malformed": 129}


@pytest.mark.slow
def test_cli_stage_on_a_raw_parquet_equals_the_row_loop(tmp_path, monkeypatch):
    """`cotforge curate dedup` (a subprocess, the user's door) on a Parquet file not in the row schema keeps and
    removes the rows an in-process run with the row loop does."""
    from cotforge.curate.dedup.config import DedupConfig
    from cotforge.curate.engine import ExecutorConfig
    from cotforge.pipelines.stages import run_stage

    rows = [{"uid": f"r{i % 50}", "problem": f"How many apples does Ann have if she has {i % 40} and gets 3?",
             "solution": f"She has {i % 40 + 3}.", "gt": str(i % 40 + 3)} for i in range(120)]
    rows[5]["problem"] = " "
    f = tmp_path / "raw.parquet"
    pq.write_table(pa.Table.from_pylist(rows), f)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    p = subprocess.run([sys.executable, "-m", "cotforge.pipelines.cli", "curate", "dedup", str(f), "-o",
                        str(tmp_path / "cli"), "--workers", "1"], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    monkeypatch.setattr(inputs, "open_parquet_unit", lambda unit, report: None)
    run_stage("dedup", [InputSpec(str(f))], tmp_path / "rows", DedupConfig(), ExecutorConfig(workers=1))
    def read(d: Path) -> list[dict]:
        return [r for g in sorted(d.glob("*.parquet")) for r in pq.read_table(g).to_pylist()]

    for part in ("kept", "removed"):
        assert read(tmp_path / "cli" / part) == read(tmp_path / "rows" / part), part
    stats = json.loads((tmp_path / "cli" / "stats.json").read_text())
    assert stats["rows_in"] == 120 and stats["removed_by_reason"].get("malformed") == 1


def _reference_unique(ids: list[str]) -> list[str]:
    """The renaming rule written plainly: the k-th id equal to an earlier one gets the smallest free `id~k`."""
    seen: set[str] = set()
    last: dict[str, int] = {}
    out = []
    for i in ids:
        if i not in seen and i not in last:
            seen.add(i)
            out.append(i)
            continue
        k = last.get(i, 1) + 1
        while f"{i}~{k}" in seen:
            k += 1
        last[i] = k
        seen.add(f"{i}~{k}")
        out.append(f"{i}~{k}")
    return out


def test_id_registry_renames_as_the_plain_rule_through_merges(monkeypatch):
    import random

    monkeypatch.setattr(ingest.IdRegistry, "MERGE_EVERY", 64)  # many merges of the sorted array
    rng = random.Random(3)
    ids = [rng.choice([f"x{rng.randrange(400)}", f"x{rng.randrange(400)}~{rng.randrange(2, 5)}", f"n{k}", "é"])
           for k in range(6000)]
    reg = ingest.IdRegistry()
    got: list[str] = []
    for start in range(0, len(ids), 97):  # batches (all-new ones take the array path) and single ids, mixed
        chunk = ids[start:start + 97]
        got += reg.unique_all(chunk) if start % 2 else [reg.unique(i) for i in chunk]
    assert got == _reference_unique(ids)
    fresh = [f"new{k}" for k in range(500)]
    assert reg.unique_all(fresh) is fresh and reg._n > 0
