"""Profile, source scoring / top-k and the difficulty-aware filtering policy."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from cotforge.curate.core.schema import SCHEMA
from cotforge.curate.io.inputs import read_stats, read_table, resolve_inputs
from cotforge.curate.select.policy import PolicyConfig, policy_reasons
from cotforge.curate.select.profile import ProfileConfig, has_closed_reasoning, problem_key
from cotforge.curate.select.sources import ScoreConfig, SelectConfig
from cotforge.pipelines.stages import run_stage


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def quality_sources(tmp_path: Path) -> Path:
    """Three math sources with a known quality order: gold > mid > bad (plus one code source)."""
    rows = []
    for i in range(12):
        prob = f"Compute the sum of the first {i + 3} odd numbers."
        rows.append({"id": f"g{i}", "source": "gold", "domain": "math", "problem": prob,
                     "response": "<think>" + "Let me reason carefully. " * 200 + "</think> The answer is 9.",
                     "answer": "9", "meta": {"is_correct": True}})
        rows.append({"id": f"m{i}", "source": "mid", "domain": "math", "problem": prob,
                     "response": ("<think>" if i % 2 else "") + "Some steps here. " * 30 + ("</think>" if i % 2 else ""),
                     "answer": "9", "meta": {"is_correct": i % 2 == 0}})
        rows.append({"id": f"b{i}", "source": "bad", "domain": "math", "problem": prob,
                     "response": "It is 9.", "answer": "9", "meta": {}})
        rows.append({"id": f"c{i}", "source": "code_src", "domain": "code", "problem": f"Write f{i}.",
                     "response": "def f(): pass", "tests": '{"inputs": [], "outputs": []}', "meta": {}})
    return _write_jsonl(tmp_path / "sources.jsonl", rows)


def test_closed_reasoning_markers():
    assert has_closed_reasoning("<think>a</think>b")
    assert has_closed_reasoning("<|begin_of_thought|>x<|end_of_thought|> y")
    assert has_closed_reasoning("reasoning continues</think> answer")  # template opened the block
    assert not has_closed_reasoning("<think>never closed")
    assert not has_closed_reasoning("</think> before <think>")
    assert not has_closed_reasoning("plain \\boxed{3}")
    assert problem_key("What is  2+2?") == problem_key("what is 2 + 2")


def test_profile_statistics(tmp_path):
    src = quality_sources(tmp_path)
    stats = run_stage("profile", resolve_inputs([str(src)]), tmp_path / "prof", ProfileConfig(plots=True))
    prof = pl.read_parquet(tmp_path / "prof" / "profile.parquet")
    gold = prof.filter(pl.col("source") == "gold").row(0, named=True)
    mid = prof.filter(pl.col("source") == "mid").row(0, named=True)
    bad = prof.filter(pl.col("source") == "bad").row(0, named=True)
    assert gold["rows"] == 12 and gold["unique_problems"] == 12 and gold["responses_per_problem"] == 1
    assert gold["closed_reasoning_share"] == 1.0 and gold["accuracy"] == 1.0
    assert mid["closed_reasoning_share"] == 0.5 and mid["accuracy"] == 0.5
    assert bad["verified_share"] == 0 and bad["accuracy"] is None
    assert gold["median_length"] > mid["median_length"] > bad["median_length"]
    assert stats["kept"] == 48 and read_table(tmp_path / "prof").height == 48  # passthrough
    assert (tmp_path / "prof" / "profile.md").read_text().count("| gold | math |") == 1
    assert (tmp_path / "prof" / "plots" / "length_hist.png").stat().st_size > 1000


def test_scores_follow_quality_and_top_k(tmp_path):
    src = quality_sources(tmp_path)
    stats = run_stage("select", resolve_inputs([str(src)]), tmp_path / "sel", SelectConfig(top_k=1, policy=None))
    table = pl.read_parquet(tmp_path / "sel" / "selection.parquet")
    math = table.filter(pl.col("domain") == "math").sort("rank")
    assert math["source"].to_list() == ["gold", "mid", "bad"]
    assert math["score"].is_sorted(descending=True)
    for col in ("accuracy_c", "reasoning_c", "length_c", "rpp_c", "score", "decision", "mix_weight"):
        assert col in table.columns
    assert math["selected"].to_list() == [True, False, False]
    assert table.filter(pl.col("domain") == "code")["selected"].to_list() == [True]  # top-k is per domain
    kept = read_table(tmp_path / "sel")
    assert set(kept["source"]) == {"gold", "code_src"}
    removed = read_table(tmp_path / "sel", "removed")
    assert set(removed["source"]) == {"mid", "bad"}
    assert all(r.startswith("source_not_selected") for r in removed["reason"])
    assert stats["rows_in"] == stats["kept"] + stats["removed"] == 48
    assert stats["selection"][0]["decision"].startswith("selected")


def test_user_ranking_and_contamination_penalty(tmp_path):
    src = quality_sources(tmp_path)
    specs = resolve_inputs([str(src)])
    run_stage("select", specs, tmp_path / "user", SelectConfig(top_k=1, ranking=["bad", "gold"], policy=None))
    t = pl.read_parquet(tmp_path / "user" / "selection.parquet").filter(pl.col("domain") == "math").sort("rank")
    assert t["source"].to_list() == ["bad", "gold", "mid"]
    assert "not in the user ranking" in t["decision"][2] or not t["selected"][2]
    # a decontamination stage that removed all of gold's rows pushes it below mid
    dec = tmp_path / "decont"
    dec.mkdir()
    (dec / "stats.json").write_text(json.dumps({"stage": "decontaminate", "per_source": {
        "gold": {"rows_in": 10, "kept": 0, "removed": {"contaminated": 10}}}}))
    run_stage("select", specs, tmp_path / "pen", SelectConfig(top_k=1, policy=None, stats_dirs=[str(dec)]))
    t = pl.read_parquet(tmp_path / "pen" / "selection.parquet").filter(pl.col("domain") == "math").sort("rank")
    assert t["source"][0] == "mid"
    assert t.filter(pl.col("source") == "gold")["contamination_rate"][0] == pytest.approx(1.0)
    # with the penalty weight at zero the quality order comes back
    run_stage("select", specs, tmp_path / "nopen", SelectConfig(score=ScoreConfig(w_contamination=0.0), top_k=1,
                                                        policy=None, stats_dirs=[str(dec)]))
    assert pl.read_parquet(tmp_path / "nopen" / "selection.parquet").filter(
        pl.col("selected") & (pl.col("domain") == "math"))["source"].to_list() == ["gold"]


def _policy_rows(tmp_path: Path) -> Path:
    """Problems with constructed pass rates: hard (0.1), medium (0.5), easy (0.9), one with 20 responses."""
    schema = SCHEMA.append(pa.field("correct", pa.bool_())).append(pa.field("pass_rate", pa.float64()))
    rows = []
    for name, p in (("hard", 0.1), ("medium", 0.5), ("easy", 0.9)):
        for j, corr in enumerate([True, False, None]):
            rows.append({"id": f"{name}-{j}", "source": "s", "domain": "math", "prompt": f"{name} problem",
                         "response": f"r{j}", "answer": "1", "tests": None, "meta": "{}", "correct": corr,
                         "pass_rate": p})
    rows.append({"id": "easy-prompt-only", "source": "s", "domain": "math", "prompt": "easy problem",
                 "response": None, "answer": "1", "tests": None, "meta": "{}", "correct": None, "pass_rate": 0.9})
    for j in range(20):
        rows.append({"id": f"many-{j}", "source": "s", "domain": "math", "prompt": "a popular problem",
                     "response": f"r{j}", "answer": "1", "tests": None, "meta": "{}", "correct": False,
                     "pass_rate": 0.0})
    path = tmp_path / "policy.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def test_difficulty_policy_keeps_hard_incorrect_removes_easy_incorrect(tmp_path):
    path = _policy_rows(tmp_path)
    stats = run_stage("select", resolve_inputs([str(path)]), tmp_path / "out", SelectConfig(policy=PolicyConfig()))
    kept = set(read_table(tmp_path / "out")["id"])
    removed = read_table(tmp_path / "out", "removed")
    reasons = dict(zip(removed["id"], removed["reason"], strict=True))
    assert {"hard-0", "hard-1", "hard-2"} <= kept  # hard: correct, incorrect and unverified all kept
    assert {"medium-0", "medium-1", "medium-2"} <= kept
    assert "easy-0" in kept and "easy-prompt-only" in kept  # an RL prompt has no response to judge
    assert reasons["easy-1"].startswith("incorrect: easy problem")
    assert reasons["easy-2"].startswith("unverified: easy problem")
    capped = [i for i in removed["id"] if i.startswith("many-")]
    assert len(capped) == 4 and all(reasons[i].startswith("cap:") for i in capped)
    assert stats["rows_in"] == stats["kept"] + stats["removed"] == 30
    assert stats["policy_bins"]["easy"] == {"rows": 4, "kept": 2}


def test_policy_modes_and_determinism(tmp_path):
    path = _policy_rows(tmp_path)
    frame = pl.read_parquet(path).with_columns(pl.col("prompt").alias("problem"),
                                               pl.lit(None, dtype=pl.Utf8).alias("difficulty"))
    strict = policy_reasons(frame, PolicyConfig(hard="correct", medium="drop", max_per_problem=None))
    got = dict(zip(strict["id"], strict["policy_reason"], strict=True))
    assert got["hard-0"] is None and got["hard-1"].startswith("incorrect: hard")
    assert got["medium-0"].startswith("difficulty_dropped: medium")
    a = policy_reasons(frame, PolicyConfig(max_per_problem=5, seed=1))
    b = policy_reasons(frame.reverse(), PolicyConfig(max_per_problem=5, seed=1))
    kept_a = set(a.filter(pl.col("policy_reason").is_null())["id"])
    assert kept_a == set(b.filter(pl.col("policy_reason").is_null())["id"])  # input order does not matter
    c = policy_reasons(frame, PolicyConfig(max_per_problem=5, seed=2))
    assert kept_a != set(c.filter(pl.col("policy_reason").is_null())["id"])  # the seed does
    with pytest.raises(ValueError, match="t_hard"):
        PolicyConfig(t_hard=0.8, t_easy=0.2)
    with pytest.raises(ValueError, match="policy.easy"):
        PolicyConfig(easy="sometimes")


def test_select_cli_and_same_output_twice(tmp_path):
    from cotforge.pipelines.cli.curate import COMMANDS

    select_command = COMMANDS["select"]

    src = quality_sources(tmp_path)
    runner = CliRunner()
    for out in ("a", "b"):
        res = runner.invoke(select_command, [str(src), "-o", str(tmp_path / out), "--top-k", "2",
                                             "--weight", "gold=3"])
        assert res.exit_code == 0, res.output
        assert "gold" in res.output
    ta, tb = read_table(tmp_path / "a"), read_table(tmp_path / "b")
    assert ta.equals(tb)
    sel = pl.read_parquet(tmp_path / "a" / "selection.parquet")
    assert sel.filter(pl.col("source") == "gold")["mix_weight"][0] == 3.0
    assert read_stats(tmp_path / "a")["config"]["top_k"] == 2
    bad = runner.invoke(select_command, [str(src), "-o", str(tmp_path / "c"), "--weight", "gold"])
    assert bad.exit_code != 0 and "SOURCE=WEIGHT" in bad.output


@pytest.mark.slow
def test_profile_select_real_sources(shared_data, tmp_path):
    files = [str(shared_data / "sft_sources" / f) for f in (
        "skyt1_longcot_eval_traces.jsonl.gz", "gsm8k_gpt3_model_solutions.jsonl.gz", "marco_o1_cot_demo.jsonl.gz")]
    run_stage("select", resolve_inputs(files), tmp_path / "sel", SelectConfig(top_k=2, policy=None))
    t = pl.read_parquet(tmp_path / "sel" / "selection.parquet").filter(pl.col("domain") == "math").sort("rank")
    # long verified reasoning traces outrank short GPT-3 solutions and the unverified demo
    assert all(s.startswith("Sky-T1") for s in t["source"][:2])
    gpt3_best = t.filter(pl.col("source").str.starts_with("gpt3"))["rank"].min()
    sky_worst = t.filter(pl.col("source").str.starts_with("Sky-T1"))["rank"].max()
    assert sky_worst < gpt3_best


def test_lengths_in_tokens(tmp_path, tiny_model_dir):
    src = quality_sources(tmp_path)
    run_stage("profile", resolve_inputs([str(src)]), tmp_path / "tok", ProfileConfig(tokenizer=str(tiny_model_dir),
                                                                           plots=False, passthrough=False))
    prof = pl.read_parquet(tmp_path / "tok" / "profile.parquet")
    chars = pl.read_parquet(run_profile_chars(src, tmp_path) / "profile.parquet")
    assert set(prof["length_unit"]) == {"tokens"}
    tok_gold = prof.filter(pl.col("source") == "gold")["median_length"][0]
    chr_gold = chars.filter(pl.col("source") == "gold")["median_length"][0]
    assert 0 < tok_gold < chr_gold  # a token covers more than one character
    assert not (tmp_path / "tok" / "kept").exists()


def run_profile_chars(src: Path, tmp_path: Path) -> Path:
    out = tmp_path / "chars"
    run_stage("profile", resolve_inputs([str(src)]), out, ProfileConfig(plots=False, passthrough=False))
    return out
