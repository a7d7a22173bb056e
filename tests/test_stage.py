"""The stage contract: accounting, deterministic sharding, datatrove stage runner, ingest CLI."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from datatrove.pipeline.filters.base_filter import BaseFilter

from cotforge.curate.engine import ExecutorConfig, run_datatrove_stage, schema_writer
from cotforge.curate.io.inputs import read_stats, read_table, stage_files
from cotforge.curate.io.readers import InputSpec
from cotforge.curate.io.writer import StageWriter
from cotforge.pipelines.cli.main import main


class DropOdd(BaseFilter):
    """Drops rows whose prompt number is odd (a stand-in for a real stage filter)."""

    name = "drop-odd"

    def filter(self, doc):
        return (False, "odd") if int(doc.text.split()[1]) % 2 else True


def _steps(removed_dir, rschema):
    return [DropOdd(exclusion_writer=schema_writer(removed_dir, rschema))]


def _write_input(path: Path, n: int) -> None:
    with path.open("w") as f:
        for i in range(n):
            f.write(json.dumps({"question": f"q {i}", "completion": f"a {i}", "source": "s" + str(i % 2)}) + "\n")
        f.write("{broken\n")
        f.write(json.dumps({"question": 5, "completion": "x"}) + "\n")


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for part in ("kept", "removed"):
        for f in stage_files(folder, part):
            h.update(f.name.encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def test_stage_writer_accounting_and_shards(tmp_path):
    w = StageWriter(tmp_path / "out", "t", rows_per_shard=3)
    rows = [{"id": str(i), "source": "a", "domain": "math", "prompt": f"p{i}", "response": None, "answer": None,
             "tests": None, "meta": "{}"} for i in range(7)]
    for r in rows:
        w.count_in(r["source"])
    for r in rows[:5]:
        w.keep(r)
    for r in rows[5:]:
        w.remove(r, "because: x", duplicate_of="0")
    stats = w.close()
    assert stats["rows_in"] == 7 and stats["kept"] == 5 and stats["removed"] == 2
    assert stats["removed_by_reason"] == {"because": 2}
    assert [f.name for f in stage_files(tmp_path / "out")] == ["part-00000.parquet", "part-00001.parquet"]
    assert read_table(tmp_path / "out")["id"].to_list() == ["0", "1", "2", "3", "4"]
    removed = read_table(tmp_path / "out", "removed")
    assert removed["duplicate_of"].to_list() == ["0", "0"]


def test_stage_writer_refuses_bad_accounting(tmp_path):
    w = StageWriter(tmp_path / "out", "t")
    w.count_in("a", 2)
    w.keep({"id": "1", "source": "a", "domain": "math", "prompt": "p", "response": None, "answer": None,
            "tests": None, "meta": "{}"})
    with pytest.raises(RuntimeError, match="accounting"):
        w.close()


def test_datatrove_stage_is_deterministic_and_accounts(tmp_path):
    src = tmp_path / "in.jsonl"
    _write_input(src, 40)
    digests = []
    for run in range(2):
        out = tmp_path / f"out{run}"
        cfg = ExecutorConfig(workers=2 if run else 1, rows_per_task=7)
        stats = run_datatrove_stage([InputSpec(str(src))], out, "odd", _steps, exec_cfg=cfg, rows_per_shard=8)
        assert stats["rows_in"] == 42
        assert stats["kept"] == 20
        assert stats["removed_by_reason"] == {"malformed": 2, "odd": 20}
        kept = read_table(out)
        assert kept["prompt"].to_list() == [f"q {i}" for i in range(0, 40, 2)]  # input order survives
        assert not (out / "_work").exists()
        digests.append(_digest(out))
    assert digests[0] == digests[1], "same input + config must give identical shards whatever the workers"


def test_ingest_cli_quarantines_and_strict(tmp_path):
    src = tmp_path / "in.jsonl"
    _write_input(src, 4)
    runner = CliRunner()
    res = runner.invoke(main, ["curate", "ingest", str(src), "-o", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    stats = read_stats(tmp_path / "o")
    assert stats["rows_in"] == 6 and stats["kept"] == 4 and stats["removed_by_reason"] == {"malformed": 2}
    removed = pl.read_parquet(stage_files(tmp_path / "o", "removed")[0])
    reasons = removed["reason"].to_list()
    assert reasons[0].startswith("malformed: invalid JSON")
    assert reasons[1] == "malformed: field 'question' must be a string, got int"
    assert json.loads(removed["meta"][1])["_origin"] == {"file": str(src), "line": 6}

    res = runner.invoke(main, ["curate", "ingest", str(src), "-o", str(tmp_path / "s"), "--strict"])
    assert res.exit_code != 0
    assert f"{src}, line 5" in res.output and "invalid JSON" in res.output

    res = runner.invoke(main, ["curate", "ingest", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "m")])
    assert res.exit_code == 2 and "no such file" in res.output
