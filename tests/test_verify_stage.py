"""The verify stage and `verify_rows`: columns, statuses, counts, CLI."""

from __future__ import annotations

import gzip
import json

import polars as pl
from click.testing import CliRunner

from cotforge.curate.io.inputs import read_stats
from cotforge.curate.verify import verify_rows
from cotforge.curate.verify.sandbox import SandboxLimits
from cotforge.pipelines.cli.curate import curate

LIM = SandboxLimits(wall_s=3.0, cpu_s=2.0, memory_mb=256)
STDIO = json.dumps({"kind": "stdio", "cases": [{"input": "3\n", "output": "6"}, {"input": "5\n", "output": "10"}]})
HUMANEVAL = json.dumps({"kind": "assert", "entry_point": "add",
                        "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"})

ROWS = [
    {"id": "m1", "source": "s1", "domain": "math", "prompt": "p", "response": "<think>hmm</think> \\boxed{6}",
     "answer": "6", "tests": None, "meta": "{}"},
    {"id": "m2", "source": "s1", "domain": "math", "prompt": "p", "response": "so \\boxed{7}", "answer": "6",
     "tests": None, "meta": "{}"},
    {"id": "m3", "source": "s1", "domain": "math", "prompt": "p", "response": "<think>cut off", "answer": "6",
     "tests": None, "meta": "{}"},
    {"id": "c1", "source": "s2", "domain": "code", "prompt": "p",
     "response": "<think>x</think>\n```python\nprint(int(input()) * 2)\n```", "answer": None, "tests": STDIO,
     "meta": "{}"},
    {"id": "c2", "source": "s2", "domain": "code", "prompt": "p", "response": "print(int(input()) + 3)",
     "answer": None, "tests": STDIO, "meta": "{}"},
    {"id": "c3", "source": "s2", "domain": "code", "prompt": "p", "response": "def add(a, b):\n    return a + b",
     "answer": None, "tests": HUMANEVAL, "meta": "{}"},
    {"id": "c4", "source": "s2", "domain": "code", "prompt": "p", "response": "def add(a, b):\n    return a - b",
     "answer": None, "tests": None,
     "meta": json.dumps({"tests": "def check(candidate):\n    assert candidate(1, 2) == 3\n\ncheck(add)"})},
    {"id": "o1", "source": "s3", "domain": "other", "prompt": "p", "response": "hello", "answer": None,
     "tests": None, "meta": "{}"},
]


def test_verify_rows_statuses():
    got = verify_rows([dict(r) for r in ROWS], workers=2, limits=LIM)
    assert [g["verify_status"] for g in got] == ["correct", "incorrect", "no_answer", "pass", "fail", "pass",
                                                  "fail", "no_ground_truth"]
    assert [g["correct"] for g in got] == [True, False, False, True, False, True, False, None]
    assert (got[4]["tests_passed"], got[4]["tests_total"]) == (1, 2)
    assert got[0]["tests_total"] is None


def test_stage_cli_writes_columns_and_stats(tmp_path):
    src = tmp_path / "rows.jsonl"
    with open(src, "w") as f:
        for r in ROWS:
            f.write(json.dumps(r) + "\n")
        f.write("{not json\n")
    out = tmp_path / "out"
    res = CliRunner().invoke(curate, ["verify", str(src), "-o", str(out), "--workers", "2", "--wall-s", "3"])
    assert res.exit_code == 0, res.output
    df = pl.read_parquet(out / "kept" / "*.parquet")
    assert set(df.columns) >= {"correct", "verify_status", "tests_passed", "tests_total"}
    assert dict(zip(df["id"], df["verify_status"], strict=True))["c3"] == "pass"
    stats = read_stats(out)
    assert stats["rows_in"] == len(ROWS) + 1 and stats["kept"] == len(ROWS) and stats["removed"] == 1
    assert stats["verify"]["by_source"]["s2"] == {"fail": 2, "pass": 2}
    assert sum(stats["verify"]["by_status"].values()) == len(ROWS)


def test_stage_reads_real_deepcoder_rows(tmp_path, shared_data):
    src = tmp_path / "dc.jsonl"
    with gzip.open(shared_data / "sft_sources" / "deepcoder_leetcode_train.jsonl.gz", "rt") as f_in, \
            open(src, "w") as f_out:
        for _, line in zip(range(12), f_in, strict=False):
            f_out.write(line)
    out = tmp_path / "out"
    res = CliRunner().invoke(curate, ["verify", str(src), "-o", str(out), "--workers", "2"])
    assert res.exit_code == 0, res.output
    stats = read_stats(out)
    assert stats["verify"]["by_status"] == {"pass": 12}


def test_extract_program_and_parse_tests():
    from cotforge.curate.verify.code import TestsError, extract_program, parse_tests

    resp = "<think>```python\nprint('draft')\n```</think>\n```python\nprint(1)\n```\ntext\n```py\nprint(2)\n```"
    assert extract_program(resp) == "print(2)\n"
    assert extract_program("<think>never closed\n```python\nprint(1)\n```") == ""
    assert extract_program("def f():\n    return 1\n") == "def f():\n    return 1\n"
    assert extract_program("Here:\n```\nprint(3)\n```", think_end=None) == "Here:\n```\nprint(3)\n```\n"
    assert parse_tests({"kind": "assert", "test": "assert True", "entry_point": None})["kind"] == "assert"
    for bad, msg in [("[]", "JSON object"), ('{"kind": "x"}', "unknown kind"),
                     ('{"kind": "stdio", "cases": [{"input": 1}]}', "cases[0]"), ("{", "invalid JSON")]:
        try:
            parse_tests(bad)
        except TestsError as e:
            assert msg in str(e)
        else:
            raise AssertionError(f"{bad!r} accepted")
