"""Source presets on hand-written fixtures in each dataset's published schema (tests/fixtures/presets/*.json
name the dataset card each schema was checked against): rows out, responses equal to the traces, gold
answers, labels in the schema's columns, detection, identities, and stages using the shipped labels."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import polars as pl
import pytest

from cotforge.curate.core.schema import load_meta
from cotforge.curate.io.presets import PRESETS, detect_preset
from cotforge.curate.io.readers import InputError, InputSpec, Quarantined, read_rows
from cotforge.pipelines.stages import run_stage

FIXTURES = Path(__file__).parent / "fixtures" / "presets"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.json"))


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def write(tmp_path: Path, name: str, recs: list | None = None) -> Path:
    p = tmp_path / f"{name}.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in (recs if recs is not None else fixture(name)["rows"])))
    return p


def think(trace: str, answer: str) -> str:
    return f"<think>\n{trace}\n</think>\n\n{answer}\n"


# The responses each source means, built from the raw fixture rows (not from the reader's code).
EXPECTED_RESPONSES = {
    "openr1_math": lambda rows: [g for r in rows for g in r["generations"]],
    "deepmath": lambda rows: ["<think>\n" + r[k] for r in rows for k in ("r1_solution_1", "r1_solution_2", "r1_solution_3")],
    "openthoughts3": lambda rows: [r["conversations"][-1]["value"] for r in rows],
    "openthoughts": lambda rows: [r["conversations"][-1]["value"] for r in rows],
    "openthoughts_metadata": lambda rows: [
        f"<|begin_of_thought|>\n\n{r['deepseek_reasoning']}\n\n<|end_of_thought|>\n\n<|begin_of_solution|>\n\n"
        f"{r['deepseek_solution']}\n\n<|end_of_solution|>" for r in rows],
    "s1k": lambda rows: [think("First add four and six.\nThat gives ten.", "4 + 6 = $\\boxed{10}$.")],
    "limo": lambda rows: [r["solution"] for r in rows],
    "am_r1_distilled": lambda rows: [r["messages"][-1]["content"] for r in rows],
    "openmathreasoning": lambda rows: [r["generated_solution"] for r in rows],
    "numinamath": lambda rows: [r["solution"] for r in rows],
    "opencodereasoning": lambda rows: [rows[0]["output"]],
    "kodcode": lambda rows: [rows[0]["conversations"][-1]["value"]],
    "taco": lambda rows: [None, None],
    "verl": lambda rows: [None, None],
    "llama_nemotron": lambda rows: [r["output"] for r in rows],
    "acereason_math": lambda rows: [None, None],
    "deepcoder": lambda rows: [None, None],
}


def test_every_preset_has_a_fixture_naming_its_card():
    assert set(NAMES) == {p.name for p in PRESETS.values()}
    for name in NAMES:
        assert fixture(name)["card"].startswith("https://huggingface.co/datasets/"), name
        assert PRESETS[name].card.startswith("https://huggingface.co/datasets/")


@pytest.mark.parametrize("name", NAMES)
def test_preset_reads_its_fixture(tmp_path, caplog, name):
    fx = fixture(name)
    exp = fx["expect"]
    path = write(tmp_path, name)
    report: dict = {}
    with caplog.at_level(logging.INFO, logger="cotforge.curate.io.readers"):
        out = list(read_rows(InputSpec(str(path), source_name=name), report=report))
    # detection picks this preset from the columns and says so
    assert detect_preset(fx["rows"][0]).name == name
    assert report[name]["preset"] == name and report[name]["chosen"] == "detected"
    assert f"preset {name} (detected" in caplog.text
    good = [r for r in out if not isinstance(r, Quarantined)]
    bad = [r for r in out if isinstance(r, Quarantined)]
    assert len(good) == exp["rows"] and len(bad) == exp.get("quarantined", 0)
    assert [r["response"] for r in good] == EXPECTED_RESPONSES[name](fx["rows"])
    for key, col in (("answers", "answer"), ("correct", "correct"), ("pass_rate", "pass_rate"),
                     ("difficulty", "difficulty"), ("domains", "domain"), ("problem_ids", "problem_id")):
        if key in exp:
            assert [r[col] for r in good] == exp[key], (name, col)
    for r in good:  # identities and provenance
        meta = load_meta(r["meta"])
        assert meta["_preset"] == name and r["source"] == name and r["prompt"].strip()
        for col in ("correct", "pass_rate", "difficulty"):
            if r[col] is not None:
                assert col in meta["_labels"], (name, col)
    # an explicit preset reads the same rows
    explicit = [r for r in read_rows(InputSpec(str(path), source_name=name, preset=name))
                if not isinstance(r, Quarantined)]
    assert [(r["id"], r["response"]) for r in explicit] == [(r["id"], r["response"]) for r in good]


def test_openr1_explodes_with_labels_and_identities(tmp_path):
    out = list(read_rows(InputSpec(str(write(tmp_path, "openr1_math")), source_name="o")))
    assert [r["gen_index"] for r in out] == [0, 1, 2, 0, 1]
    assert len({r["id"] for r in out}) == 5 and out[0]["id"] == "u-0001#0"
    metas = [load_meta(r["meta"]) for r in out]
    assert metas[1]["_labels"]["correct"] == "correctness_llama[1]"  # the judge's label when Math-Verify said no
    assert metas[0]["_labels"]["correct"] == "correctness_math_verify[0]"
    assert [m.get("finish_reason") for m in metas[:3]] == ["stop", "stop", "length"]
    assert [m.get("reasoning_complete") for m in metas[:3]] == [True, True, False]
    assert metas[0]["topic"] == "Algebra" and metas[0]["upstream_source"] == "olympiads"
    assert metas[0]["solution"] == "1+3+5+7+9 = 25."  # the short human solution stays in meta, not the response
    assert "generations" not in metas[0] and "messages" not in metas[0]


def test_code_tests_are_read_as_the_verifiers_take_them(tmp_path):
    kod = list(read_rows(InputSpec(str(write(tmp_path, "kodcode")))))[0]
    t = json.loads(kod["tests"])
    assert t["kind"] == "assert" and "from solution" not in t["test"]
    assert "test_add_positive()\ntest_add_zero()" in t["test"]
    taco = list(read_rows(InputSpec(str(write(tmp_path, "taco")))))
    stdio, call = json.loads(taco[0]["tests"]), json.loads(taco[1]["tests"])
    assert stdio == {"kind": "stdio", "cases": [{"input": "2 3\n", "output": "6\n"}, {"input": "4 5\n", "output": "20\n"}]}
    assert call["kind"] == "assert" and "square(*[3])" in call["test"]
    ns: dict = {}
    exec("def square(x):\n    return x*x\n" + call["test"], ns)  # our own fixture's code, not model output
    with pytest.raises(AssertionError):
        exec("def square(x):\n    return x+x\n" + call["test"], {})
    verl = list(read_rows(InputSpec(str(write(tmp_path, "verl")))))
    assert verl[0]["answer"] == "27" and verl[0]["tests"] is None
    assert json.loads(verl[1]["tests"])["cases"][1] == {"input": "41\n", "output": "42\n"}
    assert load_meta(verl[0]["meta"])["model_difficulty"]["DeepSeek-R1-Distill-Qwen-32B"] == 0


def test_pytest_features_stay_pytest_kind():
    from cotforge.curate.io.codetests import pytest_file

    code = "import pytest\nfrom solution import f\n\n@pytest.mark.parametrize('x', [1])\ndef test_f(x):\n    assert f(x)\n"
    assert json.loads(pytest_file(code))["kind"] == "pytest"


def test_explicit_preset_on_the_wrong_shape_is_quarantined_naming_the_fields(tmp_path):
    p = write(tmp_path, "plain", [{"problem": "1+1?", "solution": "2"}])
    out = list(read_rows(InputSpec(str(p), preset="openr1_math")))
    assert isinstance(out[0], Quarantined) and "expects field(s) generations, correctness_math_verify" in out[0].reason
    with pytest.raises(InputError, match=r"plain\.jsonl, line 1: preset 'openr1_math' expects"):
        list(read_rows(InputSpec(str(p), preset="openr1_math"), strict=True))
    with pytest.raises(ValueError, match="preset: unknown preset 'nope'"):
        InputSpec(str(p), preset="nope")


def test_sources_without_a_preset_read_as_before(tmp_path):
    p = write(tmp_path, "plain", [{"problem": "1+1?", "solution": "2", "answer": "2"}])
    report: dict = {}
    row = list(read_rows(InputSpec(str(p)), report=report))[0]
    assert report["plain"]["preset"] is None and "problem_id" not in row and "correct" not in row
    assert (row["prompt"], row["response"], row["answer"]) == ("1+1?", "2", "2")
    # a mapping turns detection off even for a preset-shaped file
    fx = write(tmp_path, "deepmath")
    row = list(read_rows(InputSpec(str(fx), mapping={"prompt": "question", "response": "r1_solution_2"})))[0]
    assert "gen_index" not in row and row["response"] == fixture("deepmath")["rows"][0]["r1_solution_2"]
    out = list(read_rows(InputSpec(str(fx), preset="none")))
    assert len(out) == 2 and "gen_index" not in out[0]


def test_ingest_records_presets_and_columns(tmp_path):

    from cotforge.curate.io.inputs import read_table

    stats = run_stage("ingest", [InputSpec(str(write(tmp_path, "openmathreasoning")), "omr"),
                        InputSpec(str(write(tmp_path, "plain", [{"problem": "x?"}])), "plain")], tmp_path / "ing")
    assert stats["config"]["presets"]["omr"]["preset"] == "openmathreasoning"
    assert stats["config"]["presets"]["plain"]["preset"] is None
    t = read_table(tmp_path / "ing")
    assert t["pass_rate"].to_list() == [0.25, 0.25, None, None]
    assert t["problem_id"][0] == t["problem_id"][1] != t["problem_id"][2]  # one problem, two generations


def test_response_cap_counts_the_generations_of_one_record(tmp_path):
    """20 generations of one OpenR1 record are one problem: the 16-response cap keeps 16."""
    from cotforge.curate.select.policy import PolicyConfig, policy_reasons
    from cotforge.curate.select.profile import problem_key

    rec = dict(fixture("openr1_math")["rows"][1])
    rec["generations"] = [f"<think>\nattempt {i}\n</think>\n\n$\\boxed{{56}}$" for i in range(20)]
    rec["correctness_math_verify"] = [True] * 20
    rows = list(read_rows(InputSpec(str(write(tmp_path, "many", [rec])))))
    assert len({r["problem_id"] for r in rows}) == 1 and [r["gen_index"] for r in rows] == list(range(20))
    frame = pl.DataFrame({"id": [r["id"] for r in rows], "problem": [problem_key(r["prompt"]) for r in rows],
                          "correct": [r["correct"] for r in rows], "difficulty": ["hard"] * 20,
                          "pass_rate": [None] * 20}, schema_overrides={"pass_rate": pl.Float64})
    out = policy_reasons(frame, PolicyConfig(max_per_problem=16))
    assert out["policy_reason"].is_null().sum() == 16


def test_dedup_keeps_every_response_of_a_problem(tmp_path):

    from cotforge.curate.engine import ExecutorConfig
    from cotforge.curate.io.inputs import read_table

    stats = run_stage("dedup", [InputSpec(str(write(tmp_path, "openr1_math")), "o")], tmp_path / "dd",
                      executor=ExecutorConfig(workers=1))
    kept = read_table(tmp_path / "dd")
    assert stats["kept"] == 5 and kept["gen_index"].to_list() == [0, 1, 2, 0, 1]
    assert kept["problem_id"].to_list() == ["u-0001"] * 3 + ["u-0002"] * 2


def test_verify_uses_shipped_correctness(tmp_path, monkeypatch):
    import cotforge.curate.verify.stage as vs
    from cotforge.curate.engine import ExecutorConfig
    from cotforge.curate.io.inputs import read_table, resolve_inputs

    rows = fixture("openr1_math")["rows"] + [{"problem": "What is 2+2?", "answer": "4",
                                              "response": "<think>\n2+2\n</think>\n\n$\\boxed{4}$"}]
    run_stage("ingest", [InputSpec(str(write(tmp_path, "openr1_math", rows[:2])), "o"),
                InputSpec(str(write(tmp_path, "plain", rows[2:])), "p")], tmp_path / "ing")
    seen: list = []

    def recorder(batch, **kw):
        seen.extend(r["id"] for r in batch)
        return [{"correct": True, "verify_status": "ok", "tests_passed": None, "tests_total": None} for _ in batch]

    monkeypatch.setattr(vs, "verify_rows", recorder)
    one = ExecutorConfig(workers=1)  # tasks in this process: the recorder sees every verified row
    stats = run_stage("verify", resolve_inputs([str(tmp_path / "ing")]), tmp_path / "ver", None, one)
    t = read_table(tmp_path / "ver")
    assert len(seen) == 1 and t.filter(pl.col("id") == seen[0])["source"][0] == "p"  # only the unlabeled row ran
    shipped = t.filter(pl.col("source") == "o")
    assert shipped["verify_status"].unique().to_list() == ["shipped"]
    assert shipped["correct"].to_list() == [True, True, False, True, False]
    assert stats["verify"]["by_status"] == {"ok": 1, "shipped": 5}
    run_stage("verify", resolve_inputs([str(tmp_path / "ing")]), tmp_path / "ver2", vs.VerifyConfig(recompute=True), one)
    assert len(seen) == 1 + 6  # recompute=True verifies every row again


def test_difficulty_uses_shipped_pass_rates(tmp_path, monkeypatch):

    from cotforge.curate.io.inputs import read_table, resolve_inputs
    from cotforge.curate.select.difficulty import DifficultyConfig

    run_stage("ingest", [InputSpec(str(write(tmp_path, "openmathreasoning")), "omr")], tmp_path / "ing")

    class Gen:
        prompts: list = []

        def generate(self, prompts, sampling):
            self.prompts.extend(p[0]["content"] for p in prompts)
            return [[type("C", (), {"text": "$\\boxed{2}$"})()] * sampling.n for _ in prompts]

    gen = Gen()
    monkeypatch.setattr("cotforge.curate.verify.verify_rows", lambda rows: [{"correct": True} for _ in rows])
    stats = run_stage("difficulty", resolve_inputs([str(tmp_path / "ing")]), tmp_path / "diff", DifficultyConfig(model="m"),
                      generator=gen)
    t = read_table(tmp_path / "diff")
    assert gen.prompts == ["Find the smallest prime."]  # the two rows with a shipped pass rate were not sampled
    assert t["pass_rate"].to_list() == [0.25, 0.25, 1.0] and t["difficulty"].to_list() == ["hard", "hard", "easy"]
    assert stats["difficulty_methods"] == {"column": 2, "sampled": 1}


def test_klear_recipe_dry_run_shows_the_preset_of_each_source():
    from click.testing import CliRunner

    from cotforge.pipelines.cli.run import run

    recipe = Path(__file__).resolve().parents[1] / "pipelines" / "klear_math_code.yaml"
    res = CliRunner().invoke(run, [str(recipe), "--dry-run"])
    assert res.exit_code == 0, res.output
    for name in ("openthoughts3", "opencodereasoning", "openr1_math"):
        assert f"preset {name} (explicit)" in res.output
    assert res.output.count("Hub dataset, streamed") == 3


def test_curate_commands_take_the_reader_options_as_flags(tmp_path):
    """`--preset`, `--format` ... come from InputSpec's fields: an explicit preset is recorded as such, a bad
    one is a usage error naming the preset, and `--preset none` reads the raw columns by field detection."""
    from click.testing import CliRunner

    from cotforge.pipelines.cli.main import main

    path = write(tmp_path, "openr1_math")
    res = CliRunner().invoke(main, ["curate", "ingest", str(path), "-o", str(tmp_path / "a"), "--preset", "openr1_math"])
    assert res.exit_code == 0, res.output
    stats = json.loads((tmp_path / "a" / "stats.json").read_text())
    assert next(iter(stats["config"]["presets"].values()))["chosen"] == "explicit"
    res = CliRunner().invoke(main, ["curate", "ingest", str(path), "-o", str(tmp_path / "b"), "--preset", "nope"])
    assert res.exit_code == 2 and "unknown preset 'nope'" in res.output
    res = CliRunner().invoke(main, ["curate", "ingest", str(path), "-o", str(tmp_path / "c"), "--preset", "none"])
    assert res.exit_code == 0, res.output
    stats = json.loads((tmp_path / "c" / "stats.json").read_text())
    assert all(v["preset"] is None for v in stats["config"]["presets"].values())


def test_rl_code_sources_keep_their_tests(tmp_path):
    """DeepCoder's stdin cases -> stdio tests; its LiveCodeBench functional cases -> a call of func_name on the
    starter's Solution class; Skywork-OR1 (verl) code rows' ground_truth -> stdio tests."""
    dc = list(read_rows(InputSpec(str(write(tmp_path, "deepcoder")))))
    stdio, call = json.loads(dc[0]["tests"]), json.loads(dc[1]["tests"])
    assert stdio == {"kind": "stdio", "cases": [{"input": "1\n", "output": "2\n"}, {"input": "41\n", "output": "42\n"}]}
    assert call["kind"] == "assert" and "Solution().total(*[[1, 2, 3]])" in call["test"]
    verl = list(read_rows(InputSpec(str(write(tmp_path, "verl")))))
    assert json.loads(verl[1]["tests"]) == {"kind": "stdio", "cases": [{"input": "1\n", "output": "2\n"},
                                                                       {"input": "41\n", "output": "42\n"}]}
