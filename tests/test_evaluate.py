"""Evaluation machinery: metrics against their closed forms, verdicts of injected answers, resume, CLI."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from cotforge.curate.core.config import build
from cotforge.train.eval.config import EvalConfig
from cotforge.train.eval.items import build_messages, load_items
from cotforge.train.eval.metrics import (
    avg_at_k,
    maj_at_k,
    math_equivalent,
    mean_ci,
    normalize_answer,
    pass_at_k,
)
from cotforge.train.eval.run import run_eval
from cotforge.train.eval.store import plan_chunks
from cotforge.train.rollout import Completion, SamplingConfig

MATH_ROWS = [
    {"id": "m0", "problem": "What is 2 + 3?", "answer": "5"},
    {"id": "m1", "problem": "What is half of one?", "answer": "\\frac{1}{2}"},
    {"id": "m2", "problem": "What is 7 * 6?", "answer": "42"},
]
MBPP_ROWS = [
    {"id": "mbpp-11", "problem": "Write a function add(a, b) that returns the sum.", "split": "test",
     "answer": "def add(a, b):\n    return a + b\n",
     "test_list": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]},
]


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture()
def bench_dir(tmp_path: Path) -> Path:
    d = tmp_path / "benchmarks"
    d.mkdir()
    _write_jsonl(d / "aime2024.jsonl", MATH_ROWS)
    _write_jsonl(d / "mbpp.jsonl", MBPP_ROWS)
    return d


class FakeGenerator:
    """Answers by rule: sample j of an item is correct iff j < n_correct[item]; text also records the seed.

    `fail_after` raises on that call (a killed run); `calls` counts generate calls and samples produced."""

    def __init__(self, cfg: EvalConfig, n_correct: dict[str, int], fail_after: int | None = None):
        self.by_prompt = {}
        for name in cfg.benchmark_ks():
            for it in load_items(name, cfg):
                self.by_prompt[build_messages(it, cfg)[-1]["content"]] = it
        self.n_correct, self.fail_after = n_correct, fail_after
        self.calls = self.samples = 0
        self.seen_n: list[int] = []

    def _text(self, it, j: int, seed: int) -> str:
        good = j < self.n_correct.get(it.id, 0)
        if it.domain == "code":
            body = it.solution if good else "def add(a, b):\n    return a - b\n"
            if it.benchmark == "humaneval" and good:
                body = it.problem + it.solution
            return f"<think>seed {seed}</think>\n```python\n{body}```"
        ans = it.answer if good else f"{900 + j % 2}"
        return f"<think>seed {seed} sample {j}</think> The answer is \\boxed{{{ans}}}."

    def generate(self, prompts, cfg: SamplingConfig):
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise KeyboardInterrupt("killed")
        self.seen_n.append(cfg.n)
        out = []
        for p in prompts:
            it = self.by_prompt[p[-1]["content"]]
            group = [Completion(self._text(it, j, cfg.seed), [1] * (3 + j), None,
                                "stop" if j % 3 else "length") for j in range(cfg.n)]
            self.samples += cfg.n
            out.append(group)
        return out


# ----------------------------------------------------------------------------- metrics


def test_pass_at_k_matches_closed_form():
    rng = random.Random(0)
    for _ in range(300):
        n = rng.randint(1, 70)
        c = rng.randint(0, n)
        k = rng.randint(1, n)
        closed = 1.0 - math.comb(n - c, k) / math.comb(n, k)
        assert pass_at_k(n, c, k) == pytest.approx(closed, abs=1e-12)
    assert pass_at_k(64, 0, 64) == 0.0 and pass_at_k(64, 1, 64) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)  # pass@1 == avg
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)


def test_avg_and_maj():
    assert avg_at_k([True, False, False, True]) == 0.5
    # wrong answer "7" has 3 votes, the correct group 2 -> majority wrong
    assert not maj_at_k(["7", "5", "7", "5", "7"], [False, True, False, True, False])
    # wrong votes split across distinct answers -> correct group wins
    assert maj_at_k(["7", "5", "8", "5", "9"], [False, True, False, True, False])
    # equivalent wrong answers are merged by normalisation (\boxed, spaces, \dfrac) ...
    assert not maj_at_k(["\\dfrac{1}{3}", "5", "\\frac{1}{3}", "5", "\\boxed{\\frac{1}{3}}"],
                        [False, True, False, True, False])
    # ... and by math-verify when asked (0.5 == 1/2)
    answers, correct = ["0.5", "5", "\\frac{1}{2}", "5", "1/2"], [False, True, False, True, False]
    assert maj_at_k(answers, correct)  # strings differ: 1 vote each, correct has 2
    assert not maj_at_k(answers, correct, equivalent=math_equivalent)
    # unextracted answers do not vote; nothing extracted -> False
    assert maj_at_k([None, None, "5"], [False, False, True])
    assert not maj_at_k([None, None], [False, False])
    # ties: earliest group wins
    assert maj_at_k(["5", "7"], [True, False]) and not maj_at_k(["7", "5"], [False, True])
    assert normalize_answer("\\boxed{ \\left( 3, \\pi \\right) }") == normalize_answer("(3,\\pi)")


def test_mean_ci_bootstrap_and_normal():
    vals = [0.0, 0.25, 0.5, 1.0, 1.0, 0.75, 0.0, 0.5]
    mean, lo, hi = mean_ci(vals, "bootstrap", 0.95, 2000, seed=1)
    assert mean == pytest.approx(sum(vals) / len(vals))
    assert lo < mean < hi and 0 <= lo and hi <= 1
    assert mean_ci(vals, "bootstrap", 0.95, 2000, seed=1) == (mean, lo, hi)  # deterministic per seed
    m2, lo2, hi2 = mean_ci(vals, "normal", 0.95)
    sd = (sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) ** 0.5
    assert hi2 - m2 == pytest.approx(1.959964 * sd / len(vals) ** 0.5, rel=1e-5)
    assert m2 - lo2 == pytest.approx(hi2 - m2)
    assert mean_ci([1.0, 1.0, 1.0], "normal") == (1.0, 1.0, 1.0)


def test_plan_chunks_skips_stored_samples():
    cfg = EvalConfig(model="m", benchmarks=["aime2024"])
    items = [type("I", (), {"benchmark": "b", "id": f"i{j}"})() for j in range(5)]
    have = {("b", "i0"): {0, 1, 2, 3}, ("b", "i1"): {0, 1}, ("b", "i2"): {0, 1}}
    chunks = plan_chunks(items, 4, have, chunk_items=cfg.chunk_items)
    assert [([it.id for it in c], s, n) for c, s, n in chunks] == [(["i1", "i2"], 2, 2), (["i3", "i4"], 0, 4)]


# ----------------------------------------------------------------------------- injected answers


def test_injected_answers_score_exactly(tmp_path, bench_dir):
    # a generous code limit: this test counts injected answers, and a loaded 2-core machine once let an honest
    # sandboxed run overrun the 10 s default
    cfg = EvalConfig(model="fake", benchmarks=["aime2024:4", "mbpp:2", "humaneval:2"],
                     benchmarks_dir=str(bench_dir), limit=2, out=str(tmp_path / "out"), seed=3, code_timeout_s=60)
    n_correct = {"m0": 4, "m1": 1, "mbpp-11": 2, "HumanEval/0": 1, "HumanEval/1": 0}
    gen = FakeGenerator(cfg, n_correct)
    res = run_eval(cfg, generator=gen)
    aime = res["benchmarks"]["aime2024"]
    assert aime["n_items"] == 2 and aime["k"] == 4
    assert list(aime)[:3] == ["avg@4", "pass@4", "maj@4"]  # headline scalars first (run summaries)
    per = {r["id"]: r for r in aime["items"]}
    assert per["m0"]["correct"] == 4 and per["m1"]["correct"] == 1  # \frac{1}{2} verified by math-verify
    assert aime["metrics"]["avg@4"]["value"] == pytest.approx((1.0 + 0.25) / 2)
    assert per["m1"]["pass@2"] == pytest.approx(1 - math.comb(3, 2) / math.comb(4, 2))
    assert aime["metrics"]["pass@2"]["value"] == pytest.approx((1.0 + 0.5) / 2)
    # m1: wrong answers alternate 901/900 (sample 1,3 -> 901; 2 -> 900): 901 has 2 votes, correct 1
    assert per["m0"]["maj@4"] == 1.0 and per["m1"]["maj@4"] == 0.0
    mb = res["benchmarks"]["mbpp"]
    assert mb["items"][0]["correct"] == 2 and mb["metrics"]["avg@2"]["value"] == 1.0
    he = res["benchmarks"]["humaneval"]
    assert [r["correct"] for r in he["items"]] == [1, 0]
    assert "maj@2" not in he["metrics"]

    out = Path(cfg.out)
    table = pq.read_table(out / "samples.parquet").to_pylist()
    assert len(table) == 2 * 4 + 1 * 2 + 2 * 2
    wrong_code = [r for r in table if r["benchmark"] == "humaneval" and not r["correct"]]
    assert wrong_code and all(r["status"] in ("fail", "runtime_error") for r in wrong_code)
    assert {r["extracted"] for r in table if r["item_id"] == "m0"} == {"5"}
    saved = json.loads((out / "results.json").read_text())
    assert saved["benchmarks"]["aime2024"]["metrics"] == aime["metrics"]
    assert saved["versions"]["transformers"] and saved["config"]["k"] == 64
    assert saved["benchmarks"]["aime2024"]["registry_fingerprint"]
    report = (out / "report.md").read_text()
    assert "| aime2024 | 2 | 4 | 62.50 |" in report
    assert (out / "report.png").stat().st_size > 1000
    assert not (out / "samples.parts").exists()


def test_killed_run_resumes_without_regenerating(tmp_path, bench_dir):
    base = dict(model="fake", benchmarks=["aime2024:3"], benchmarks_dir=str(bench_dir), chunk_items=1)
    n_correct = {"m0": 3, "m1": 1, "m2": 2}
    ref = run_eval(EvalConfig(**base, out=str(tmp_path / "ref")),
                   generator=FakeGenerator(EvalConfig(**base), n_correct))

    cfg = EvalConfig(**base, out=str(tmp_path / "run"))
    killed = FakeGenerator(cfg, n_correct, fail_after=2)
    with pytest.raises(KeyboardInterrupt):
        run_eval(cfg, generator=killed)
    parts = sorted((tmp_path / "run" / "samples.parts").glob("part-*.parquet"))
    assert len(parts) == 2 and not (tmp_path / "run" / "results.json").exists()
    (parts[0].parent / "part-999999-1-1.tmp").write_bytes(b"half-written chunk")  # a kill during a write

    resumed = FakeGenerator(cfg, n_correct)
    res = run_eval(cfg, generator=resumed)
    assert resumed.calls == 1 and resumed.samples == 3  # only the third item was generated
    assert res["run"] == {**res["run"], "generated_samples": 3, "reused_samples": 6}
    assert res["benchmarks"] == ref["benchmarks"]
    a = pq.read_table(tmp_path / "ref" / "samples.parquet").drop(["gen_key"]).to_pylist()
    b = pq.read_table(tmp_path / "run" / "samples.parquet").drop(["gen_key"]).to_pylist()
    assert a == b  # same per-chunk seeds -> identical samples
    assert not (tmp_path / "run" / "samples.parts").exists()

    # a finished run re-run with larger k only tops items up (samples 3..4)
    more = FakeGenerator(cfg, n_correct)
    res5 = run_eval(EvalConfig(**{**base, "benchmarks": ["aime2024:5"]}, out=str(tmp_path / "run")), generator=more)
    assert more.samples == 3 * 2 and more.seen_n == [2, 2, 2]
    assert res5["benchmarks"]["aime2024"]["n_samples"] == 15

    # a finished run is not regenerated at all; changed sampling settings are refused
    assert run_eval(cfg, generator=None)["run"]["generated_samples"] == 0
    with pytest.raises(ValueError, match="other settings"):
        run_eval(EvalConfig(**base, out=str(tmp_path / "run"), temperature=1.0), generator=None)


def test_config_validation_and_yaml(tmp_path):
    with pytest.raises(ValueError, match="unknown eval option"):
        build(EvalConfig, {"model": "m", "tempreature": 0.6}, what="eval option")
    with pytest.raises(ValueError, match="NAME:K"):
        EvalConfig(model="m", benchmarks="aime2024:x").benchmark_ks()
    with pytest.raises(ValueError, match="backend"):
        EvalConfig(model="m", backend="tgi")
    assert EvalConfig(model="m", benchmarks="a, b:8", k=4).benchmark_ks() == {"a": 4, "b": 8}


# ----------------------------------------------------------------------------- CLI and the tiny model


def test_cli_dry_run_prints_plan(bench_dir):
    from cotforge.pipelines.cli.eval import eval_command

    r = CliRunner().invoke(eval_command, ["--model", "some/model", "--benchmarks", "aime2024",
                                          "--benchmarks-dir", str(bench_dir), "--backend", "vllm",
                                          "--preset", "official", "--dry-run"])
    assert r.exit_code == 0, r.output
    assert "total samples: 192" in r.output  # 3 items x k=64
    assert "top_k=20 repetition_penalty=1.05" in r.output and "max_tokens=32768" in r.output
    assert "'max_model_len': " in r.output


def test_cli_yaml_then_flags_precedence(tmp_path, bench_dir):
    from cotforge.pipelines.cli.eval import eval_command

    cfg_path = tmp_path / "eval.yaml"
    cfg_path.write_text(f"model: m\nbenchmarks: [aime2024]\nbenchmarks_dir: {bench_dir}\nk: 8\ntop_k: 5\n")
    r = CliRunner().invoke(eval_command, ["--config", str(cfg_path), "--k", "2", "--backend", "hf", "--dry-run"])
    assert r.exit_code == 0, r.output
    assert "samples=6 " in r.output and "top_k=5" in r.output
    bad = CliRunner().invoke(eval_command, ["--model", "m", "--benchmarks", "nope", "--dry-run"])
    assert bad.exit_code != 0 and "unknown benchmark 'nope'" in bad.output


def test_tiny_model_cli_run_and_rerun(tmp_path, bench_dir, tiny_model_dir):
    """Real HF generation end to end (accuracy is meaningless); a second run reuses every sample."""
    from cotforge.pipelines.cli.eval import eval_command

    out = tmp_path / "tiny"
    args = ["--model", str(tiny_model_dir), "--benchmarks", "aime2024,mbpp:1", "--benchmarks-dir",
            str(bench_dir), "--k", "2", "--max-tokens", "6", "--limit", "2", "--backend", "hf", "-o", str(out)]
    r = CliRunner().invoke(eval_command, args)
    assert r.exit_code == 0, r.output
    res = json.loads((out / "results.json").read_text())
    assert res["run"]["generated_samples"] == 2 * 2 + 1
    rows = pq.read_table(out / "samples.parquet").to_pylist()
    assert all(1 <= r["n_tokens"] <= 6 for r in rows)
    assert all(r["correct"] is False for r in rows if r["benchmark"] == "mbpp")
    again = CliRunner().invoke(eval_command, args)
    assert again.exit_code == 0 and '"generated_samples": 0' in again.output


# ----------------------------------------------------------------------------- real benchmark files


def test_real_benchmarks_with_injected_answers(tmp_path, shared_data):
    cfg = EvalConfig(model="fake", benchmarks=["aime2024:2", "math500:2", "gsm8k:2", "mbpp:1"],
                     benchmarks_dir=str(shared_data / "benchmarks"), limit=3, out=str(tmp_path / "o"))
    items = {n: load_items(n, cfg) for n in cfg.benchmark_ks()}
    n_correct = {it.id: 2 for its in items.values() for it in its}
    res = run_eval(cfg, generator=FakeGenerator(cfg, n_correct))
    for name in ("aime2024", "math500", "gsm8k", "mbpp"):
        b = res["benchmarks"][name]
        assert b["metrics"][f"avg@{b['k']}"]["value"] == 1.0, (name, b["items"])
