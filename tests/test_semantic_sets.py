"""The labelled sets of the semantic tier load and keep their recorded held-out parts: the hand-written sets
(bench/semantic/written) resolve every row against ../shared/data, and neither set's held-out digest has moved
since it was recorded before tuning (a changed file or loader would make every held-out figure incomparable).
bench/ is run as a command, never imported (tests/test_bench_package.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(*args: str, env_shared: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "COTFORGE_SHARED_DATA": str(env_shared)}
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=env)


def test_written_sets_load_and_match_their_recorded_digests(shared_data):
    run = _run("bench.semantic.written", "--check", env_shared=shared_data)
    assert run.returncode == 0, run.stderr[-2000:]
    for kind in ("light", "moderate", "heavy", "number_changed", "question_changed", "condition_changed", "clean"):
        assert f"('held', '{kind}')" in run.stdout and f"('tune', '{kind}')" in run.stdout


def test_generated_sets_match_their_recorded_digests(shared_data):
    run = _run("bench.semantic.sets", "--check", env_shared=shared_data)
    assert run.returncode == 0, run.stderr[-2000:]


def test_a_written_row_that_cannot_be_resolved_names_file_line_and_field(shared_data, tmp_path):
    rows = [{"benchmark": "gsm8k_test", "id": "gsm8k-0", "kind": "light", "text": "Janet's ducks lay 16 eggs."},
            {"benchmark": "gsm8k_test", "id": "gsm8k-0", "kind": "number_changed", "edits": [["17 eggs", "18"]]}]
    (tmp_path / "decontam_x.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = _run("bench.semantic.written", "--dir", str(tmp_path), env_shared=shared_data)
    assert run.returncode == 1 and "decontam_x.jsonl:2: edits[0]" in run.stderr and "Traceback" not in run.stderr
    rows[1] = {"benchmark": "gsm8k_test", "id": "gsm8k-0", "kind": "paraphrase", "text": "x"}
    (tmp_path / "decontam_x.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = _run("bench.semantic.written", "--dir", str(tmp_path), env_shared=shared_data)
    assert run.returncode == 1 and "decontam_x.jsonl:2: field 'kind'" in run.stderr
