"""Decontamination: every must-catch variant, hard negatives, HumanEval from the wheel, and the stage."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from cotforge.curate.core.benchmarks import BenchmarkItem, humaneval_from_wheel
from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.decontam.index import DecontamIndex
from cotforge.curate.decontam.match import Matcher
from cotforge.curate.io.readers import InputSpec
from cotforge.curate.text.hashing import word_hashes
from cotforge.curate.text.normalize import normalize, normalize_batch
from cotforge.pipelines.cli.curate import COMMANDS
from cotforge.pipelines.stages import run_stage

PROBLEMS = [
    "Let $x$, $y$ and $z$ be positive real numbers with $xyz = 32$. Find the minimum value of "
    "\\[x^2 + 4xy + 4y^2 + 2z^2.\\] Express your answer as an integer and justify every step of the argument.",
    "A bag contains $5$ red marbles, $7$ blue marbles and $11$ green marbles. Three marbles are drawn at random "
    "without replacement. What is the probability that all three marbles have different colors? Express your "
    "answer as a common fraction in lowest terms.",
    "Every morning Aya goes for a $9$-kilometer-long walk and stops at a coffee shop afterwards. When she walks at "
    "a constant speed of $s$ kilometers per hour, the walk takes her $4$ hours, including $t$ minutes spent in "
    "the coffee shop. When she walks $s+2$ kilometers per hour, the walk takes her $2$ hours and $24$ minutes. "
    "Find the number of minutes the walk takes her, including the $t$ minutes spent in the coffee shop.",
    "Find the number of ordered pairs $(a,b)$ of integers such that $|a + bi| \\le 5$ and $a^2 - b^2$ is "
    "divisible by $3$, where $i = \\sqrt{-1}$ denotes the imaginary unit of the complex numbers.",
    "Simplify $\\sqrt{242}$.",
]
CLEAN = [
    "Tom has 12 apples and gives a third of them to his sister. How many apples does Tom have left?",
    "Write a function that reverses a linked list in place and returns the new head node of the list.",
    "A rectangle has a perimeter of 30 centimetres and an area of 56 square centimetres. Find its diagonal.",
]


def _items() -> dict[str, list[BenchmarkItem]]:
    math = [BenchmarkItem(f"m{i}", p, str(i), None, None, {}, "synth") for i, p in enumerate(PROBLEMS)]
    return {"synth": math, "humaneval": humaneval_from_wheel()}


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> tuple[DecontamIndex, DecontamConfig]:
    cfg = DecontamConfig(benchmarks=["synth", "humaneval"])
    return Matcher(DecontamIndex.build(_items(), cfg, tmp_path_factory.mktemp("idx"))), cfg


def _flag(index, prompts, responses=None, cfg=None):
    idx, c = index
    responses = responses if responses is not None else [None] * len(prompts)
    return idx.match_batch(prompts, responses, cfg or c)


# --------------------------------------------------------------------------- normalisation / hashing


def test_batch_normalisation_equals_normalize():
    rng = random.Random(3)
    pieces = ["Problem:", "$x^{2}$", "\\(a\\le b\\)", "\\left(", "```python\n", "\n```", "İstanbul", "—", "x_1",
              "\\dfrac{1}{2}", "Please reason step by step, and put your final answer within \\boxed{}.",
              "Question:", "  \t", "3²", "é", "\\,", "\\text{cm}", "Let's think step by step.", "\x00", "word"]
    texts = [" ".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))) for _ in range(400)]
    texts += PROBLEMS + CLEAN + ["", None]
    texts += ["Café: \\Le x", "é \\geİ", "α \\textΣ", "\x00```python\nx\n```"]  # found by fuzzing
    _, norms = normalize_batch(texts)
    assert norms == [normalize(t) for t in texts]


def test_hashes_are_deterministic_and_ngrams_stay_inside_texts():
    a, ra = word_hashes(["a b c", "d e"])
    b, rb = word_hashes(["a b c", "d e"])
    assert np.array_equal(a, b) and ra.tolist() == [0, 0, 0, 1, 1]
    assert a[0] == word_hashes(["a"])[0][0] and a[0] != a[1]


# --------------------------------------------------------------------------- must catch


def _variants(p: str) -> dict[str, str]:
    words = p.split(" ")
    return {
        "verbatim": p,
        "whitespace_case": "\n  " + "   ".join(w.upper() if i % 3 == 0 else w for i, w in enumerate(words)) + "\n",
        "latex_respace": p.replace("$", "$ ").replace("\\[", "$$").replace("\\]", "$$").replace("^2", "^{2}")
                          .replace("{", " { ").replace("\\le", "\\leq"),
        "wrapped": f"Hi! My teacher gave us this and I am stuck.\n\n{p}\n\nPlease explain slowly.",
        "truncated60": " ".join(words[: int(len(words) * 0.6)]),
    }


@pytest.mark.parametrize("kind", ["verbatim", "whitespace_case", "latex_respace", "wrapped", "truncated60"])
def test_math_variants_are_caught(index, kind):
    texts = [_variants(p)[kind] for p in PROBLEMS[:4]]
    for i, ms in enumerate(_flag(index, texts)):
        assert ms and ms[0].benchmark == "synth" and ms[0].benchmark_id == f"m{i}", (kind, texts[i])
        assert ms[0].side == "prompt"


def test_short_item_wrapped_is_caught_but_not_inside_a_longer_number(index):
    ms = _flag(index, ["Here is one: Simplify $\\sqrt{242}$. Thanks", "Simplify $\\sqrt{2420}$."])
    assert ms[0] and ms[0][0].benchmark_id == "m4"
    assert not ms[1]


def test_response_side_is_reported_separately_and_switchable(index):
    resp = f"<think>Restating the problem: {PROBLEMS[1]} So we count cases.</think> The answer is 1/3."
    ms = _flag(index, [CLEAN[0]], [resp])[0]
    assert ms and all(m.side == "response" for m in ms) and ms[0].benchmark_id == "m1"
    idx, cfg = index
    assert not idx.match_batch([CLEAN[0]], [resp], replace(cfg, check_response=False))[0]


def test_reformatted_copy_is_caught_by_the_fuzzy_tier(index):
    p = PROBLEMS[2]
    edited = (p.replace("Every morning", "Each morning").replace("afterwards", "after that")
              .replace("constant", "steady").replace("Find", "Determine"))
    idx, cfg = index
    only_fuzzy = replace(cfg, threshold=1.0)  # n-gram tier off for an edited copy (score < 1): the MinHash-LSH tier alone must find it
    ms = idx.match_batch([edited], [None], only_fuzzy)[0]
    assert ms and ms[0].benchmark_id == "m2" and ms[0].match_kind == "fuzzy" and ms[0].score >= cfg.fuzzy_threshold
    neither = replace(cfg, fuzzy=False)
    neither.threshold = 1.01
    assert not idx.match_batch([edited], [None], neither)[0]
    assert _flag(index, [edited])[0]  # and with default settings it is caught either way


def test_humaneval_reindented_docstring_is_caught(index):
    he = humaneval_from_wheel()
    texts = []
    for it in he[:20]:
        lines = [ln.replace("    ", "\t") for ln in it.problem.splitlines()]
        texts.append("Complete the following function.\n```python\n" + "\n".join(lines) + "\n```")
    for it, ms in zip(he[:20], _flag(index, texts), strict=True):
        assert ms and ms[0].benchmark == "humaneval" and ms[0].benchmark_id == it.id


# --------------------------------------------------------------------------- must not flag


def test_stock_phrases_and_clean_rows_are_not_flagged(index):
    negatives = CLEAN + [
        f"{CLEAN[0]} Find the remainder when the answer is divided by 1000.",
        "Given an array of integers nums, return the number of good pairs. Return the answer modulo 10^9 + 7.",
        "from typing import List\n\n\ndef solve(numbers: List[float], threshold: float) -> bool:\n"
        "    \"\"\" Return True if the list is sorted. \"\"\"\n",
        "Express your answer as a common fraction. A die is rolled twice; what is the chance of a double?",
        "Find the number of ordered pairs of integers such that both are prime.",
    ]
    assert not any(_flag(index, negatives))


def test_number_variants_of_a_template_are_different_problems(index):
    variants = [
        PROBLEMS[1].replace("$5$ red", "$6$ red").replace("$11$ green", "$10$ green"),
        PROBLEMS[0].replace("xyz = 32", "xyz = 64"),
        PROBLEMS[3].replace("\\le 5", "\\le 7"),
    ]
    assert not any(_flag(index, variants))


def test_baseline_style_single_ngram_would_flag_but_we_do_not(index):
    # shares one long 8-gram run with m1 ("express your answer as a common fraction in lowest terms") only
    text = "Two coins are tossed. What is the chance of two heads? Express your answer as a common fraction " \
           "in lowest terms."
    assert not _flag(index, [text])[0]


LEETCODE_STATEMENT = (
    "Given a 0-indexed string s, permute s to get a new string t such that:\n\n * All consonants remain in their "
    "original places. More formally, if there is an index i with 0 <= i < s.length such that s[i] is a consonant, "
    "then t[i] = s[i].\n * The vowels must be sorted in the nondecreasing order of their ASCII values. More "
    "formally, for pairs of indices i, j with 0 <= i < j < s.length such that s[i] and s[j] are vowels, then t[i] "
    "must not have a higher ASCII value than t[j].\n\nReturn the resulting string.\n\n"
)
LEETCODE_EXAMPLES = (
    "Example 1:\n\nInput: s = \"lEetcOde\"\nOutput: \"lEOtcede\"\nExplanation: 'E', 'O', and 'e' are the vowels "
    "in s; 'l', 't', 'c', and 'd' are all consonants. The vowels are sorted according to their ASCII values, and "
    "the consonants remain in the same places.\n\nExample 2:\n\nInput: s = \"lYmpH\"\nOutput: \"lYmpH\"\n"
    "Explanation: There are no vowels in s (all characters in s are consonants), so we return \"lYmpH\".\n\n"
    "Constraints:\n\n * 1 <= s.length <= 105\n * s consists only of letters of the English alphabet in uppercase "
    "and lowercase.\n\n"
)
LEETCODE_STUB = "```python\nclass Solution:\n    def sortVowels(self, s: str) -> str:\n        \n```"


def test_statement_copied_without_examples_is_caught(tmp_path):
    """DeepCoder-style rows keep a LeetCode statement and its stub but drop the examples: most of the row is
    a copy even though it covers under half of the item; a different statement with the same stub is not."""
    item = LEETCODE_STATEMENT + LEETCODE_EXAMPLES + "Please complete the code below to solve above prblem:\n" \
        + LEETCODE_STUB
    items = {"lc": [BenchmarkItem("lc0", item, None, None, None, {}, "synth")]}
    cfg = DecontamConfig(benchmarks=["lc"])
    idx = Matcher(DecontamIndex.build(items, cfg, tmp_path / "idx"))
    wrapper = "Please solve the programming task below using a self-contained code snippet in a markdown code block."
    copy = f"{wrapper}\n\n{LEETCODE_STATEMENT}Please complete the following python code precisely:\n{LEETCODE_STUB}"
    other = (f"{wrapper}\n\nGiven a 0-indexed string s, return the number of vowels in s that are immediately "
             f"followed by a consonant, counting uppercase and lowercase letters alike.\n"
             f"Please complete the following python code precisely:\n{LEETCODE_STUB}")
    got = idx.match_batch([copy, other], [None, None], cfg)
    assert [m.benchmark_id for m in got[0]] == ["lc0"] and got[0][0].score >= cfg.row_fraction
    assert got[1] == []


def test_short_deletion_is_another_problem(tmp_path):
    """Dropping a few words from the middle of an item (here the equation's left side) makes another
    problem, even when the rest of the row runs on exactly like the item: not a copy."""
    options = "(A) Line\n(B) Circle\n(C) Parabola\n(D) Ellipse\n(E) Hyperbola\n\nEnter the letter of the correct option."
    item = f"Find the curve defined by the equation\n\\[r^2 \\cos 2 \\theta = 4.\\]{options}"
    row = f"Find the curve defined by the equation\n\\[r = 4.\\]{options}"
    cfg = DecontamConfig(benchmarks=["m"])
    idx = Matcher(DecontamIndex.build({"m": [BenchmarkItem("m0", item, "E", None, None, {}, "synth")]}, cfg, tmp_path / "i"))
    assert idx.match_batch([row, item], [None, None], cfg)[0] == []
    assert idx.match_batch([row, item], [None, None], DecontamConfig(benchmarks=["m"], min_deleted_words=1))[0]


# --------------------------------------------------------------------------- the stage


def _write_rows(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _bench_dir(tmp: Path) -> Path:
    d = tmp / "bench"
    d.mkdir()
    _write_rows(d / "aime2024.jsonl", [{"id": f"a{i}", "problem": p, "answer": str(i)}
                                       for i, p in enumerate(PROBLEMS)])
    return d


def _train_rows() -> list[dict]:
    rows = [{"id": f"c{i}", "problem": p, "response": "Easy: 8.", "source": "clean"} for i, p in enumerate(CLEAN)]
    rows += [{"id": "x0", "problem": PROBLEMS[0], "response": "ok", "source": "leaky"},
             {"id": "x1", "problem": "Solve it.", "response": f"We restate: {PROBLEMS[2]} Then 204.",
              "source": "leaky"},
             {"id": "x2", "problem": _variants(PROBLEMS[3])["wrapped"], "response": None, "source": "leaky"}]
    return rows


def _table(out: Path, part: str) -> list[dict]:
    rows = []
    for f in sorted((out / part).glob("*.parquet")):
        rows += pq.read_table(f).to_pylist()
    return rows


@pytest.mark.slow
def test_stage_outputs_report_and_determinism(tmp_path):
    bench = _bench_dir(tmp_path)
    src = tmp_path / "cotforge.train.jsonl"
    _write_rows(src, _train_rows())
    cfg = DecontamConfig(benchmarks=["aime2024"], benchmarks_dir=str(bench))
    from cotforge.curate.engine import ExecutorConfig

    s1 = run_stage("decontaminate", [InputSpec(str(src))], tmp_path / "o1", cfg, ExecutorConfig(workers=1, rows_per_task=2))
    run_stage("decontaminate", [InputSpec(str(src))], tmp_path / "o2", cfg, ExecutorConfig(workers=2, rows_per_task=4))
    assert s1["rows_in"] == 6 and s1["kept"] + s1["removed"] == 6 and s1["removed"] == 3
    if Path("/proc/self/status").exists():  # each matcher task records its own peak memory
        assert 10 < s1["timings"]["task_peak_rss_mb"] < 4096
    removed = _table(tmp_path / "o1", "removed")
    assert {r["id"] for r in removed} == {"x0", "x1", "x2"}
    by_id = {r["id"]: r for r in removed}
    assert by_id["x0"]["reason"] == "contaminated" and by_id["x0"]["benchmark"] == "aime2024"
    assert by_id["x0"]["benchmark_id"] == "a0" and by_id["x0"]["side"] == "prompt" and by_id["x0"]["score"] == 1.0
    assert by_id["x1"]["side"] == "response" and by_id["x1"]["benchmark_id"] == "a2"
    assert by_id["x2"]["match_kind"] == "ngram" and by_id["x2"]["matched_text"]
    assert json.loads(by_id["x0"]["matches"])[0]["benchmark"] == "aime2024"
    # same input, other task split and worker count -> identical outputs
    for part in ("kept", "removed"):
        assert _table(tmp_path / "o1", part) == _table(tmp_path / "o2", part)
    rep = json.loads((tmp_path / "o1" / "contamination_report.json").read_text())
    assert rep["per_benchmark"]["aime2024"] == {"items": 5, "items_hit": 3, "rows_removed": 3, "rows_primary": 3}
    assert rep["per_source"]["leaky"]["contaminated"] == 3 and rep["per_source"]["clean"]["contaminated"] == 0
    assert rep["per_source"]["leaky"]["response_only"] == 1 and rep["config"]["ngram"] == cfg.ngram
    md = (tmp_path / "o1" / "contamination_report.md").read_text()
    assert "| aime2024 | 5 | 3 | 3 |" in md and "contamination_heatmap.png" in md
    assert (tmp_path / "o1" / "contamination_heatmap.png").stat().st_size > 1000
    stats = json.loads((tmp_path / "o1" / "stats.json").read_text())
    assert stats["removed_by_reason"] == {"contaminated": 3} and stats["contamination"]["contaminated_rows"] == 3
    assert not (tmp_path / "o1" / "_work").exists()


def test_cli(tmp_path):
    bench = _bench_dir(tmp_path)
    src = tmp_path / "cotforge.train.jsonl"
    _write_rows(src, _train_rows())
    out = tmp_path / "out"
    res = CliRunner().invoke(COMMANDS["decontaminate"], [str(src), "-o", str(out), "--benchmarks", "aime2024",
                                                     "--benchmarks-dir", str(bench), "--workers", "1"])
    assert res.exit_code == 0, res.output
    assert "6 rows in, 3 kept, 3 removed" in res.output
    res = CliRunner().invoke(COMMANDS["decontaminate"], [str(src), "-o", str(tmp_path / "bad"), "--benchmarks",
                                                     "nope", "--benchmarks-dir", str(bench)])
    assert res.exit_code != 0 and "unknown benchmark 'nope'" in res.output
    # the new fields are flags of the generated command; --keep-work keeps the work area with the index
    res = CliRunner().invoke(COMMANDS["decontaminate"], [str(src), "-o", str(tmp_path / "o2"), "--benchmarks",
                                                     "aime2024", "--benchmarks-dir", str(bench), "--tasks", "2",
                                                     "--response-chars", "100", "--short-content-words", "5",
                                                     "--keep-work"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "o2" / "_work" / "decontaminate_index").is_dir()
    stats = json.loads((tmp_path / "o2" / "stats.json").read_text())
    assert stats["config"]["response_side"] == "first 100 characters" and stats["config"]["short_content_words"] == 5


def test_shared_eval_outputs_are_fully_contaminated(shared_data, tmp_path):
    """Qwen2.5-32B outputs on AIME 2024 (90 rows): every row removed, all 30 items hit."""
    cfg = DecontamConfig(benchmarks=["aime2024", "gsm8k"], benchmarks_dir=str(shared_data / "benchmarks"))
    from cotforge.curate.engine import ExecutorConfig

    spec = InputSpec(str(shared_data / "sft_sources" / "qwen25_32b_instruct_aime24.jsonl.gz"), "qwen32b")
    stats = run_stage("decontaminate", [spec], tmp_path / "o", cfg, ExecutorConfig(workers=1))
    rep = json.loads((tmp_path / "o" / "contamination_report.json").read_text())
    assert stats["removed"] == 90 and rep["per_benchmark"]["aime2024"]["items_hit"] == 30
    assert rep["per_benchmark"]["gsm8k"]["rows_removed"] == 0


# --------------------------------------------------------------------------- forms of issue 18


def _filler(words: int) -> str:
    """A long clean chain of thought (no benchmark text): numbered reasoning steps."""
    out, n = [], 0
    while n < words:
        s = f"Step {len(out) + 1}: I check the previous line again and keep the running total for case {len(out) % 7}."
        out.append(s)
        n += len(s.split())
    return "\n".join(out)


def test_unicode_math_copy_is_caught(index):
    uni = ("Let x, y and z be positive real numbers with xyz = 32. Find the minimum value of x² + 4xy + 4y² + 2z². "
           "Express your answer as an integer and justify every step of the argument.")
    ms = _flag(index, [uni])[0]
    assert ms and ms[0].benchmark_id == "m0" and ms[0].score >= 0.9


def test_mid_response_quote_in_a_long_response_and_its_place_in_the_report(tmp_path):
    long_resp = _filler(1200) + f"\nWait, the problem said: {PROBLEMS[2]}\n" + _filler(1200)
    assert len(long_resp.split()) > 2400
    bench = _bench_dir(tmp_path)
    src = tmp_path / "rows.jsonl"
    _write_rows(src, [{"id": "q", "problem": CLEAN[1], "response": long_resp, "source": "s"},
                      {"id": "c", "problem": CLEAN[2], "response": _filler(2500), "source": "s"}])
    from cotforge.curate.engine import ExecutorConfig

    stats = run_stage("decontaminate", [InputSpec(str(src))], tmp_path / "o", DecontamConfig(benchmarks=["aime2024"],
                         benchmarks_dir=str(bench)), ExecutorConfig(workers=1))
    assert stats["removed"] == 1 and stats["config"]["response_side"] == "whole response"
    r = _table(tmp_path / "o", "removed")[0]
    assert r["id"] == "q" and r["side"] == "response" and r["benchmark_id"] == "a2"
    assert long_resp[r["match_start"]:r["match_end"]] == r["matched_text"]  # the ORIGINAL text of the row
    assert r["matched_text"].startswith("Every morning Aya") and 0.3 < r["match_share"] < 0.7
    m = pq.read_table(tmp_path / "o" / "contamination_matches.parquet").to_pylist()
    assert m[0]["item_text"] == PROBLEMS[2] and m[0]["match_start"] == r["match_start"]
    rep = json.loads((tmp_path / "o" / "contamination_report.json").read_text())
    assert "matches" not in rep and len(rep["sample"][0]["matched_text"]) <= 300
    assert "Every morning Aya" in (tmp_path / "o" / "contamination_report.md").read_text()


def test_response_cap_is_an_option_and_is_reported(index):
    idx, cfg = index
    resp = _filler(800) + " " + PROBLEMS[1]
    assert idx.match_batch([CLEAN[0]], [resp], cfg)[0]
    assert not idx.match_batch([CLEAN[0]], [resp], replace(cfg, response_chars=2000))[0]


def test_reordered_copy_is_caught_but_a_changed_number_is_not(index):
    s = PROBLEMS[2].split(". ")
    reordered = ". ".join([s[-1].rstrip(".")] + s[:-1]) + "."
    assert _flag(index, [reordered])[0]
    assert not _flag(index, [PROBLEMS[2].replace("$2$ hours and $24$", "$2$ hours and $25$")])[0]


def test_short_code_statement_behind_another_request_template(tmp_path):
    items = {"mbpp": [BenchmarkItem("1", "Write a function to find the shared elements from the given two lists."),
                      BenchmarkItem("2", "Write a function to merge two dictionaries.")]}
    cfg = DecontamConfig(benchmarks=["mbpp"])
    m = Matcher(DecontamIndex.build(items, cfg, tmp_path / "i"))
    rows = ["<|im_start|>user\nImplement a Python function which finds the shared elements from the given two "
            "lists.<|im_end|>", "Can you create a Python function that merges two dictionaries?",
            "Write a function to find the shared elements of three sorted arrays.",  # another problem
            "Write a function to merge two sorted linked lists into one."]  # another problem
    got = m.match_batch(rows, [None] * 4, cfg)
    assert [[x.benchmark_id for x in g] for g in got] == [["1"], ["2"], [], []]


def test_humaneval_with_renamed_function_is_caught(index):
    he = humaneval_from_wheel()
    texts = []
    for it in he[:30]:
        name = it.meta["entry_point"]
        body = it.problem.replace(name, "solution").replace("    ", "  ")
        texts.append(f"<|im_start|>user\nComplete this:\n```python\n{body}\n```<|im_end|>")
    found = _flag(index, texts)
    assert sum(1 for it, ms in zip(he[:30], found, strict=True) if ms and ms[0].benchmark_id == it.id) >= 29


def test_clean_long_responses_are_not_flagged(index):
    assert not any(_flag(index, [CLEAN[0]] * 3, [_filler(3000), _filler(10000), CLEAN[2] * 50]))


def test_benchmark_loads_by_its_file_name_whatever_the_registry_calls_it(tmp_path):
    from cotforge.curate.core.benchmarks import load_benchmark

    d = tmp_path / "b"
    d.mkdir()
    _write_rows(d / "gsm8k_test.jsonl", [{"id": "g1", "problem": "Tom has 3 apples.", "answer": "3"}])
    _write_rows(d / "my_eval.jsonl", [{"id": "x1", "problem": "What is 2+2?", "answer": "4"}])
    assert load_benchmark("gsm8k_test", d)[0].benchmark == "gsm8k_test"  # the file's own name, gsm8k's spec
    assert load_benchmark("gsm8k", d)[0].id == "g1"  # the registry name still works
    assert load_benchmark("my_eval", d)[0].problem == "What is 2+2?"
    with pytest.raises(Exception, match="unknown benchmark 'nope'"):
        load_benchmark("nope", d)


def test_config_rejects_bad_values_naming_the_field():
    with pytest.raises(ValueError, match="batch_bytes"):
        DecontamConfig(batch_bytes=0)
    with pytest.raises(ValueError, match="response_chars"):
        DecontamConfig(response_chars=-1)


def test_matcher_batches_are_bounded_by_bytes():
    import polars as pl

    from cotforge.curate.decontam.match import _byte_batches

    s = pl.Series(["x" * 600] * 10 + ["y" * 5000])
    cfg = DecontamConfig(batch_bytes=2000, batch_size=3)
    assert _byte_batches(s, cfg) == [(0, 3), (3, 6), (6, 9), (9, 10), (10, 11)]
