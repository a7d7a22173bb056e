"""Readers: formats, field auto-detection, chat lists, aliases, overrides, quarantine and strict errors."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cotforge.curate.core.schema import load_meta, make_id
from cotforge.curate.io.readers import InputError, InputSpec, Quarantined, detect_mapping, read_rows
from cotforge.pipelines.stages import run_stage

RECS = [
    {"problem": "What is 2+2?", "solution": "It is 4.", "ground_truth": "4", "final_answer": "5", "uid": "x1"},
    {"problem": "What is 3+3?", "solution": "It is 6.", "ground_truth": 6, "final_answer": "6", "uid": "x2"},
]


def rows(spec: InputSpec, strict: bool = False) -> list:
    return list(read_rows(spec, strict=strict))


def write_jsonl(path: Path, recs: list, gz: bool = False) -> Path:
    data = "".join(json.dumps(r) + "\n" for r in recs).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


@pytest.mark.parametrize("fmt", ["jsonl", "jsonl.gz", "json", "parquet", "hf_dir", "hf_prefix"])
def test_every_format_gives_the_same_rows(tmp_path, fmt):
    if fmt == "jsonl":
        p = str(write_jsonl(tmp_path / "d.jsonl", RECS))
    elif fmt == "jsonl.gz":
        p = str(write_jsonl(tmp_path / "d.jsonl.gz", RECS, gz=True))
    elif fmt == "json":
        p = str(tmp_path / "d.json")
        Path(p).write_text(json.dumps(RECS))
    elif fmt == "parquet":
        p = str(tmp_path / "d.parquet")
        pq.write_table(pa.Table.from_pylist([{**r, "ground_truth": str(r["ground_truth"])} for r in RECS]), p)
    else:
        import datasets

        ds = datasets.Dataset.from_list([{**r, "ground_truth": str(r["ground_truth"])} for r in RECS])
        ds.save_to_disk(str(tmp_path / "d"))
        p = str(tmp_path / "d") if fmt == "hf_dir" else "hf:" + str(tmp_path / "d")
    out = rows(InputSpec(p, source_name="src"))
    assert [r["id"] for r in out] == ["x1", "x2"]
    assert [r["prompt"] for r in out] == ["What is 2+2?", "What is 3+3?"]
    assert [r["response"] for r in out] == ["It is 4.", "It is 6."]
    assert [r["answer"] for r in out] == ["4", "6"]  # ground_truth wins over the model's final_answer
    assert all(r["source"] == "src" and r["domain"] == "math" for r in out)
    assert load_meta(out[0]["meta"])["final_answer"] == "5"  # unmapped fields go to meta


def test_aliases_and_overrides():
    assert detect_mapping(["question", "completion", "answer"]) == {
        "prompt": "question", "response": "completion", "answer": "answer"}
    assert detect_mapping(["instruction", "output", "task_id", "test"])["tests"] == "test"
    m = detect_mapping(["problem", "question", "solution"], {"prompt": "question"})
    assert m["prompt"] == "question"


def test_map_override_changes_fields(tmp_path):
    p = write_jsonl(tmp_path / "o.jsonl", [{"q": "Compute 1+1.", "a": "2", "sol": "1+1=2"}])
    out = rows(InputSpec(str(p), mapping={"prompt": "q", "answer": "a", "response": "sol"}))
    assert (out[0]["prompt"], out[0]["answer"], out[0]["response"]) == ("Compute 1+1.", "2", "1+1=2")
    assert out[0]["id"] == make_id(out[0]["source"], "Compute 1+1.", "1+1=2")  # stable id when none given


def test_chat_lists(tmp_path):
    recs = [
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+5?"},
                      {"role": "assistant", "content": "7"}]},
        {"conversations": [{"from": "human", "value": "Name a prime."}, {"from": "gpt", "value": "3"}]},
        {"prompt": [{"role": "user", "content": "verl style 1+1?"}], "reward_model": {"ground_truth": "2"},
         "data_source": "verl_src", "ability": "math"},
    ]
    out = rows(InputSpec(str(write_jsonl(tmp_path / "c.jsonl", recs))))
    assert (out[0]["prompt"], out[0]["response"]) == ("2+5?", "7")
    assert load_meta(out[0]["meta"])["system"] == "Be brief."
    assert (out[1]["prompt"], out[1]["response"]) == ("Name a prime.", "3")
    assert (out[2]["prompt"], out[2]["answer"], out[2]["source"]) == ("verl style 1+1?", "2", "verl_src")


def test_python_repr_meta_is_parsed(tmp_path):
    p = write_jsonl(tmp_path / "m.jsonl", [{"problem": "p?", "meta": "{'benchmark': 'aime24', 'year': 1983}"}])
    meta = load_meta(rows(InputSpec(str(p)))[0]["meta"])
    assert meta["benchmark"] == "aime24" and meta["year"] == 1983
    assert meta["_origin"] == {"file": str(p), "line": 1}


def test_bad_rows_are_quarantined_with_place(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_bytes(b'{"problem": "ok?"}\n{oops\n[1, 2]\n{"solution": "no prompt"}\n{"problem": 5}\n'
                  b'{"problem": "   "}\n{"problem": "bad \xff"}\n\n')
    out = rows(InputSpec(str(p)))
    assert not isinstance(out[0], Quarantined)
    bad = {q.origin.index: q.reason for q in out[1:]}
    assert set(bad) == {2, 3, 4, 5, 6, 7, 8}
    assert bad[2].startswith("malformed: invalid JSON")
    assert bad[3] == "malformed: line is not a JSON object"
    assert "no prompt field" in bad[4]
    assert "'problem' must be a string, got int" in bad[5]
    assert "'problem' is empty" in bad[6]
    assert "invalid UTF-8" in bad[7]
    assert bad[8] == "malformed: empty line"
    row = out[1].to_row()
    assert row["reason"].startswith("malformed") and load_meta(row["meta"])["_origin"]["line"] == 2


def test_strict_names_file_line_and_field(tmp_path):
    p = write_jsonl(tmp_path / "s.jsonl", [{"problem": "fine"}, {"problem": ["not", "text"]}])
    with pytest.raises(InputError, match=r"s\.jsonl, line 2: .*'problem'"):
        rows(InputSpec(str(p)), strict=True)


def test_missing_unreadable_and_empty_inputs(tmp_path, caplog):
    with pytest.raises(InputError, match="no such file"):
        rows(InputSpec(str(tmp_path / "missing.jsonl")))
    (tmp_path / "hostname").write_text("buildhost\n")  # neither by name nor by content a data file
    with pytest.raises(InputError, match="unknown format"):
        rows(InputSpec(str(tmp_path / "hostname")))
    (tmp_path / "broken.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match="not a readable Parquet"):
        rows(InputSpec(str(tmp_path / "broken.parquet")))
    (tmp_path / "empty.jsonl").write_text("")  # quarantined as one record naming the file (README), strict stops
    empty = rows(InputSpec(str(tmp_path / "empty.jsonl")))
    assert len(empty) == 1 and isinstance(empty[0], Quarantined) and "empty file" in empty[0].reason
    with pytest.raises(InputError, match="empty.jsonl.*empty file"):
        rows(InputSpec(str(tmp_path / "empty.jsonl")), strict=True)


def test_shared_sft_sources_map_correctly(shared_data):
    """All ../shared/data/sft_sources files: prompt/response/answer detected, answer = ground_truth."""
    files = sorted((shared_data / "sft_sources").glob("*.jsonl.gz"))
    assert len(files) == 10
    for f in files:
        with gzip.open(f, "rt") as fh:
            raw = [json.loads(line) for line in itertools.islice(fh, 200)]
        out = list(itertools.islice(read_rows(InputSpec(str(f)), strict=True), 200))
        for rec, row in zip(raw, out, strict=True):
            assert row["prompt"] == rec["problem"], f.name
            gt = rec["ground_truth"]
            assert row["answer"] == (None if gt is None else str(gt)), f.name
            assert row["response"] == (rec["response"] or None), f.name
            assert row["source"] == rec["source"] and row["id"] == rec["id"]
            meta = load_meta(row["meta"])
            assert "_raw_meta" not in meta and meta.get("final_answer") == rec["final_answer"]


def test_mapping_is_redetected_when_the_first_record_has_no_prompt(tmp_path):
    """A bad first record must not fix the field mapping for the rest of the file."""
    p = tmp_path / "a.jsonl"
    lines = [json.dumps({"foo": 1})] + [json.dumps({"problem": f"q{i}", "solution": "s"}) for i in range(3)]
    p.write_text("\n".join(lines) + "\n")
    rows = list(read_rows(InputSpec(str(p))))
    assert isinstance(rows[0], Quarantined)
    assert [r["prompt"] for r in rows[1:]] == ["q0", "q1", "q2"]


def test_lone_surrogate_is_quarantined_and_the_stage_still_writes(tmp_path):
    """A JSON `\\ud800` escape decodes to text UTF-8 cannot hold: the row is quarantined naming the field, and
    the stage writes its removed shard instead of crashing."""


    src = tmp_path / "s.jsonl"
    src.write_text('{"id": "x1", "problem": "bad \\ud800 here", "solution": "4"}\n{"id": "x2", "problem": "ok"}\n')
    got = list(read_rows(InputSpec(str(src))))
    assert isinstance(got[0], Quarantined) and "field 'problem'" in got[0].reason and "surrogate" in got[0].reason
    assert got[1]["id"] == "x2"
    with pytest.raises(InputError, match=r"s.jsonl, line 1: field .problem."):
        list(read_rows(InputSpec(str(src)), strict=True))
    stats = run_stage("ingest", [InputSpec(str(src))], tmp_path / "out")
    assert (stats["rows_in"], stats["kept"], stats["removed"]) == (2, 1, 1)
