"""Difficulty labels: pass rates from a (fake) reference model, existing columns, meta levels; then the policy."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from cotforge.curate.io.inputs import read_table, resolve_inputs
from cotforge.curate.select.difficulty import DifficultyConfig, bin_level, bin_pass_rate, parse_level
from cotforge.curate.select.policy import PolicyConfig
from cotforge.curate.select.sources import SelectConfig
from cotforge.pipelines.stages import run_stage


@dataclass
class FakeCompletion:
    text: str
    token_ids: list
    logprobs: list | None = None
    finish_reason: str = "stop"


class FakeGenerator:
    """Answers correctly k out of n times, with k fixed per problem by its first word."""

    def __init__(self, correct_of: dict[str, int]):
        self.correct_of = correct_of
        self.calls: list[str] = []

    def generate(self, prompts, cfg):
        out = []
        for msgs in prompts:
            text = msgs[-1]["content"]
            self.calls.append(text)
            k = self.correct_of[text.split()[0]]
            out.append([FakeCompletion("ANSWER" if i < k else "wrong", []) for i in range(cfg.n)])
        return out


@pytest.fixture
def fake_verify(monkeypatch):
    """The stage's verifier (cotforge.curate.verify.verify_rows) replaced by `fake_verifier`."""
    monkeypatch.setattr("cotforge.curate.verify.verify_rows", fake_verifier)


def fake_verifier(rows):
    return [{"correct": r["response"] == "ANSWER", "verify_status": "ok", "tests_passed": None,
             "tests_total": None} for r in rows]


def _rows(tmp_path: Path) -> Path:
    rows = []
    for word in ("hardone", "midone", "easyone"):
        for j, corr in enumerate((True, False)):  # two responses per problem
            rows.append({"id": f"{word}-{j}", "source": "s", "domain": "math", "problem": f"{word} problem text",
                         "response": f"response {j}", "answer": "ANSWER", "meta": {"is_correct": corr}})
    rows.append({"id": "noanswer", "source": "s", "domain": "other", "problem": "opinion please", "response": "x"})
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_bins_and_levels():
    assert bin_pass_rate(0.25) == "hard" and bin_pass_rate(0.26) == "medium" and bin_pass_rate(0.75) == "easy"
    assert bin_pass_rate(None) is None
    assert bin_pass_rate(0.5, t_hard=0.5, t_easy=0.9) == "hard"
    assert parse_level("Level 3") == 3.0 and parse_level(5) == 5.0 and parse_level("n/a") is None
    cfg = DifficultyConfig(level_key="difficulty")
    assert [bin_level(x, cfg) for x in (1.0, 3.0, 5.0, None)] == ["easy", "medium", "hard", None]
    with pytest.raises(ValueError):
        DifficultyConfig(t_hard=0.9, t_easy=0.1)


def test_sampled_pass_rates(tmp_path, fake_verify):
    gen = FakeGenerator({"hardone": 1, "midone": 4, "easyone": 8})
    stats = run_stage("difficulty", resolve_inputs([str(_rows(tmp_path))]), tmp_path / "d",
                      DifficultyConfig(model="fake", n_samples=8), generator=gen)
    t = read_table(tmp_path / "d")
    by = {r["id"]: r for r in t.iter_rows(named=True)}
    assert by["hardone-0"]["pass_rate"] == 0.125 and by["hardone-1"]["difficulty"] == "hard"
    assert by["midone-0"]["pass_rate"] == 0.5 and by["midone-0"]["difficulty"] == "medium"
    assert by["easyone-1"]["pass_rate"] == 1.0 and by["easyone-1"]["difficulty"] == "easy"
    assert by["easyone-0"]["difficulty_n"] == 8
    assert by["noanswer"]["pass_rate"] is None and by["noanswer"]["difficulty"] is None
    assert len(gen.calls) == 3  # one generate per unique problem, not per row
    assert stats["difficulty_bins"] == {"easy": 2, "hard": 2, "medium": 2, "None": 1}
    assert stats["rows_in"] == stats["kept"] == 7


def test_existing_column_and_meta_levels_need_no_model(tmp_path):
    class Boom:
        def generate(self, prompts, cfg):
            raise AssertionError("must not sample")

    src = tmp_path / "lv.jsonl"
    src.write_text("".join(json.dumps({"problem": f"p{i}", "response": "r", "answer": "1",
                                       "meta": {"level": f"Level {i}"}}) + "\n" for i in range(1, 6)))
    run_stage("difficulty", resolve_inputs([str(src)]), tmp_path / "lv", DifficultyConfig(model="m", level_key="level"),
              generator=Boom())
    t = read_table(tmp_path / "lv").sort("prompt")
    assert t["difficulty"].to_list() == ["easy", "easy", "medium", "medium", "hard"]
    assert t["difficulty_n"].to_list() == [0] * 5
    # a second run over the labelled folder reuses pass_rate/difficulty columns
    run_stage("difficulty", resolve_inputs([str(tmp_path / "lv")]), tmp_path / "again", DifficultyConfig(model="m"),
              generator=Boom())
    assert read_table(tmp_path / "again")["difficulty"].to_list() == read_table(tmp_path / "lv")["difficulty"].to_list()


def test_difficulty_then_policy(tmp_path, fake_verify):
    gen = FakeGenerator({"hardone": 0, "midone": 4, "easyone": 7})
    run_stage("difficulty", resolve_inputs([str(_rows(tmp_path))]), tmp_path / "d", DifficultyConfig(model="fake"),
              generator=gen)
    run_stage("select", resolve_inputs([str(tmp_path / "d")]), tmp_path / "s", SelectConfig(policy=PolicyConfig()))
    kept = set(read_table(tmp_path / "s")["id"])
    removed = read_table(tmp_path / "s", "removed")
    assert {"hardone-0", "hardone-1", "midone-0", "midone-1", "easyone-0", "noanswer"} == kept
    assert removed["id"].to_list() == ["easyone-1"]
    assert removed["reason"][0].startswith("incorrect: easy problem")
    assert removed.filter(pl.col("id") == "easyone-1")["difficulty"][0] == "easy"


def test_difficulty_cli_without_model_leaves_null(tmp_path):
    from cotforge.pipelines.cli.curate import COMMANDS

    difficulty_command = COMMANDS["difficulty"]

    res = CliRunner().invoke(difficulty_command, [str(_rows(tmp_path)), "-o", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert read_table(tmp_path / "o")["difficulty"].null_count() == 7
    bad = CliRunner().invoke(difficulty_command, [str(_rows(tmp_path)), "-o", str(tmp_path / "p"),
                                                  "--t-hard", "0.9", "--t-easy", "0.1"])
    assert bad.exit_code != 0 and "t_hard" in bad.output


def test_real_generator_and_verifier_path(tmp_path, tiny_model_dir):
    """End to end through the generator the CLI builds (train.rollout, HF backend, the tiny random model) and
    curate.verify."""
    pytest.importorskip("cotforge.train.rollout")
    pytest.importorskip("cotforge.curate.verify")
    src = tmp_path / "p.jsonl"
    src.write_text("".join(json.dumps({"problem": f"What is {i} + {i}?", "response": "r", "answer": str(2 * i)}) + "\n"
                           for i in range(2)))
    cfg = DifficultyConfig(model=str(tiny_model_dir), backend="hf", n_samples=2, max_new_tokens=8)
    from cotforge.pipelines.stages.spec import make_generator

    stats = run_stage("difficulty", resolve_inputs([str(src)]), tmp_path / "d", cfg, make_generator=make_generator)
    t = read_table(tmp_path / "d")
    assert t["difficulty_n"].to_list() == [2, 2]
    assert all(p is not None and 0.0 <= p <= 1.0 for p in t["pass_rate"])
    assert stats["difficulty_methods"] == {"sampled": 2} and stats["problems_sampled"] == 2
