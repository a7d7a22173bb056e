"""Mix budgets, ratios, seeded draws, SFT/RL shards loadable with datasets, and the Hub dataset card."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from cotforge.curate.io.inputs import read_stats, read_table, resolve_inputs
from cotforge.curate.mix.card import HUB_SIZE_CATEGORIES, parse_front_matter, size_category
from cotforge.curate.mix.stage import MixConfig, domain_targets
from cotforge.pipelines.stages import run_stage


def _rows(tmp_path: Path, name: str = "pool.jsonl", order: int = 1) -> Path:
    rows = []
    for i in range(40):
        rows.append({"id": f"m{i}", "source": "mathA" if i % 4 else "mathB", "domain": "math",
                     "problem": f"What is {i} + {i}?", "response": "<think>add</think> " + "x" * (40 + i),
                     "answer": str(2 * i)})
    for i in range(20):
        rows.append({"id": f"c{i}", "source": "codeA", "domain": "code", "problem": f"Write f{i}.",
                     "response": "def f(): return 1", "tests": json.dumps({"inputs": ["1"], "outputs": ["1"]})})
    for i in range(5):  # prompt pool rows: no response
        rows.append({"id": f"p{i}", "source": "pool", "domain": "math", "problem": f"Prompt only {i}",
                     "answer": str(i)})
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[::order]))
    return path


def test_size_categories_are_hub_buckets():
    assert size_category(0) == "n<1K" and size_category(999) == "n<1K"
    assert size_category(1000) == "1K<n<10K" and size_category(31_600) == "10K<n<100K"
    assert size_category(1_500_000) == "1M<n<10M" and size_category(10**13) == "n>1T"
    assert len(HUB_SIZE_CATEGORIES) == 11


def test_domain_targets():
    t, short = domain_targets({"math": 100, "code": 100}, {"math": 0.7, "code": 0.3}, 11, integer=True)
    assert t == {"math": 8, "code": 3} and sum(t.values()) == 11 and short == {}
    t, short = domain_targets({"math": 100, "code": 10}, {"math": 0.5, "code": 0.5}, 40, integer=True)
    assert t == {"math": 20, "code": 10} and short == {"code": 10}
    t, _ = domain_targets({"math": 100, "code": 10}, {"math": 0.5, "code": 0.5}, None, integer=True)
    assert t == {"math": 10, "code": 10}  # largest draw that keeps the ratio
    t, _ = domain_targets({"math": 30, "code": 10}, None, None, integer=True)
    assert t == {"math": 30, "code": 10}


def test_row_budget_ratios_and_accounting(tmp_path):
    specs = resolve_inputs([str(_rows(tmp_path))])
    cfg = MixConfig(name="t", budget_rows=20, domain_ratios={"math": 0.75, "code": 0.25}, seed=3)
    stats = run_stage("mix", specs, tmp_path / "mix", cfg)
    sft = pl.read_parquet(tmp_path / "mix" / "sft" / "*.parquet")
    drawn = stats["mix"]["drawn"]
    assert drawn == {"math": 15, "code": 5}
    assert sft.filter(pl.col("domain") == "code").height == 5
    removed = read_table(tmp_path / "mix", "removed")
    fams = {r.split(":")[0] for r in removed["reason"]}
    assert fams <= {"budget", "prompt_only"}
    assert sft.height + removed.height == 65 == stats["rows_in"]
    assert sft.height == 20 - removed["reason"].str.starts_with("prompt_only").sum()
    # same seed + same rows in another order -> the same draw; another seed -> another draw
    rev = resolve_inputs([str(_rows(tmp_path, "rev.jsonl", order=-1))])
    run_stage("mix", rev, tmp_path / "mix_rev", MixConfig(name="t", budget_rows=20, domain_ratios={"math": 0.75, "code": 0.25},
                                                  seed=3, card=False))
    assert set(pl.read_parquet(tmp_path / "mix_rev" / "sft" / "*.parquet")["id"]) == set(sft["id"])
    run_stage("mix", specs, tmp_path / "mix_s4", MixConfig(budget_rows=20, domain_ratios={"math": 0.75, "code": 0.25},
                                                  seed=4, card=False))
    assert set(pl.read_parquet(tmp_path / "mix_s4" / "sft" / "*.parquet")["id"]) != set(sft["id"])


def test_token_budget_and_source_weights(tmp_path):
    specs = resolve_inputs([str(_rows(tmp_path))])
    stats = run_stage("mix", specs, tmp_path / "tok", MixConfig(budget_tokens=400, domain_ratios={"math": 1.0}, card=False))
    assert 0 < stats["mix"]["drawn"]["math"] <= 400 and "code" not in stats["mix"]["drawn"]
    assert read_table(tmp_path / "tok", "removed").filter(pl.col("domain") == "code").height == 20
    # a heavy weight on mathB (10 rows) makes it dominate a 10-row math draw against mathA (30 rows)
    run_stage("mix", specs, tmp_path / "w", MixConfig(budget_rows=10, domain_ratios={"math": 1.0},
                                             source_weights={"mathB": 50.0, "mathA": 1.0, "pool": 0.0}, card=False))
    got = pl.read_parquet(tmp_path / "w" / "sft" / "*.parquet")["source"].to_list()
    assert got.count("mathB") >= 7 and "pool" not in got


def test_sft_and_rl_shards_load_with_datasets(tmp_path):
    import datasets

    run_stage("mix", resolve_inputs([str(_rows(tmp_path))]), tmp_path / "mix", MixConfig(name="demo", card=False))
    sft = datasets.load_dataset("parquet", data_files=str(tmp_path / "mix" / "sft" / "*.parquet"), split="train")
    assert sft.num_rows == 60
    msgs = sft[0]["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant"] and msgs[1]["content"] == sft[0]["response"]
    rl = datasets.load_dataset("parquet", data_files=str(tmp_path / "mix" / "rl" / "*.parquet"), split="train")
    assert rl.num_rows == 65  # 40 math + 20 code + 5 prompt-only problems
    assert set(rl.column_names) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
    math = next(r for r in rl if r["ability"] == "math" and r["extra_info"]["id"] == "m3")
    assert math["data_source"] == "math_longcot_math_verify"
    assert math["prompt"] == [{"role": "user", "content": "What is 3 + 3?"}]
    assert math["reward_model"] == {"style": "rule", "ground_truth": "6"}
    code = next(r for r in rl if r["ability"] == "code")
    assert code["data_source"] == "coder1_longcot"
    assert code["extra_info"]["tests"] == code["reward_model"]["ground_truth"]
    assert json.loads(code["extra_info"]["tests"])  # the row's tests JSON, as the verifiers take it
    assert math["extra_info"]["answer"] == "6"
    rl_data = pytest.importorskip("cotforge.train.rl.data")  # the RL trainer's loader takes these shards as they are
    trl = rl_data.load_rl_dataset(str(tmp_path / "mix" / "rl"))
    assert trl.num_rows == 65 and set(trl["ability"]) == {"math", "code"}


def test_card_front_matter_and_body(tmp_path):
    dedup = tmp_path / "dedup"
    dedup.mkdir()
    (dedup / "stats.json").write_text(json.dumps({"stage": "decontaminate", "rows_in": 70, "kept": 65,
                                                  "removed": 5, "removed_by_reason": {"contaminated": 5},
                                                  "per_source": {"mathA": {"rows_in": 35, "kept": 30,
                                                                           "removed": {"contaminated": 5}}},
                                                  "config": {"ngram": 13}}))
    run_stage("mix", resolve_inputs([str(_rows(tmp_path))]), tmp_path / "mix",
            MixConfig(name="my_mix", budget_rows=30, license="apache-2.0", history=[str(dedup)]))
    text = (tmp_path / "mix" / "README.md").read_text()
    meta = parse_front_matter(text)
    assert meta["license"] == "apache-2.0" and meta["pretty_name"] == "my_mix"
    assert meta["task_categories"] == ["text-generation"]
    assert meta["size_categories"][0] in HUB_SIZE_CATEGORIES and meta["size_categories"] == ["n<1K"]
    paths = {c["config_name"]: c["data_files"][0]["path"] for c in meta["configs"]}
    assert paths == {"sft": "sft/*.parquet", "rl": "rl/*.parquet"}
    assert "## Contamination" in text and "| decontaminate | mathA | 35 | 5 | 14.29% |" in text
    assert "| mix | budget |" in text and "ngram: 13" in text
    for plot in ("length_hist", "source_mix"):
        assert f"(plots/{plot}.png)" in text and (tmp_path / "mix" / "plots" / f"{plot}.png").exists()
    assert read_stats(tmp_path / "mix")["mix"]["name"] == "my_mix"
    with pytest.raises(ValueError):
        parse_front_matter("# no front matter")
    hub = pytest.importorskip("huggingface_hub")
    assert hub.DatasetCard(text).data.size_categories == ["n<1K"]
    import datasets  # the card's `configs` make the folder itself loadable, config by config

    cache = str(tmp_path / "hf_cache")  # datasets caches local folders by name: a shared cache can serve stale rows
    rl = datasets.load_dataset(str(tmp_path / "mix"), "rl", split="train", cache_dir=cache)
    sft = datasets.load_dataset(str(tmp_path / "mix"), split="train", cache_dir=cache)
    assert "messages" in sft.column_names and "reward_model" in rl.column_names
    assert sft.num_rows == read_stats(tmp_path / "mix")["kept"]


def test_mix_cli_reads_selection_weights(tmp_path):
    from cotforge.pipelines.cli.curate import COMMANDS

    mix_command = COMMANDS["mix"]
    from cotforge.curate.select.sources import SelectConfig

    run_stage("select", resolve_inputs([str(_rows(tmp_path))]), tmp_path / "sel", SelectConfig(policy=None,
                                                                                       weights={"mathB": 50.0}))
    res = CliRunner().invoke(mix_command, [str(tmp_path / "sel"), "-o", str(tmp_path / "mix"), "--name", "cli_mix",
                                           "--rows", "10", "--ratio", "math=1"])
    assert res.exit_code == 0, res.output
    stats = read_stats(tmp_path / "mix")
    assert stats["mix"]["source_weights"]["mathB"] == 50.0
    assert stats["mix"]["sft_rows_by_source"].get("mathB", 0) >= 7
    bad = CliRunner().invoke(mix_command, [str(tmp_path / "sel"), "-o", str(tmp_path / "x"), "--rows", "5",
                                           "--tokens", "5"])
    assert bad.exit_code != 0 and "not both" in bad.output
