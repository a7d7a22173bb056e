"""Math verdicts: extraction modes, comparison settings, math-verify comparisons, and the killable pool."""

from __future__ import annotations

import gzip
import json
import threading
import time

import pytest

import cotforge.curate.verify.math as vm
from cotforge.curate.verify.math import (
    MathCompare,
    extract_answer,
    split_after_reasoning,
    verify_math,
    verify_math_batch,
)


def test_extraction_rules():
    assert extract_answer("<think>maybe \\boxed{3}</think> so \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert extract_answer("<think>\\boxed{3} still thinking") is None  # opened, never closed
    assert extract_answer("plain CoT ... so \\boxed{204}.") == "204"  # no markers: whole response
    assert extract_answer("<|begin_of_thought|>x<|end_of_thought|>\n<|begin_of_solution|>\\boxed{7}"
                          "<|end_of_solution|>") == "7"
    assert extract_answer("<|begin_of_thought|> ... the answer is 7") is None
    assert extract_answer("Thus the answer is $12$.") == "$12$"
    assert extract_answer("16 - 3 = 13\n#### 13") == "13"
    assert extract_answer("13 * 2 = 26\nA: 26") == "26"
    assert extract_answer("no final answer here, just 42 somewhere") == "42"  # lenient: math-verify reads it
    assert extract_answer("no final answer here, just 42 somewhere", mode="strict") is None
    assert extract_answer("nothing to read") is None
    assert extract_answer("\\boxed{\\{1, \\{2\\}\\}}") == "\\{1, \\{2\\}\\}"  # nested braces
    assert split_after_reasoning("a</answer_end>b", think_end="</answer_end>") == "b"
    assert split_after_reasoning("<think>x</think>y", think_end=None) == "<think>x</think>y"


@pytest.mark.parametrize("response,gold,expected", [
    ("\\boxed{0.5}", "\\frac{1}{2}", True),
    ("\\boxed{\\frac{1}{\\sqrt{2}}}", "\\frac{\\sqrt{2}}{2}", True),  # bare LaTeX gold (env_notes §7)
    ("\\boxed{(1,2)}", "(1, 2)", True),
    ("\\boxed{(1,2]}", "(1, 2)", False),
    ("\\boxed{[2,\\infty)}", "(2,\\infty)", False),
    ("\\boxed{\\{2,1\\}}", "\\{1,2\\}", True),
    ("\\boxed{5\\text{ cm}}", "5", True),
    ("\\boxed{3}", "4", False),
    ("The answer is 10\\%.", "10", True),
    ("#### 8", "8", True),
    ("so \\boxed{\\textbf{(051)}}", "051", True),
    ("the answer is $x^2+1$", "1+x^2", True),
])
def test_math_verify_comparisons(response, gold, expected):
    v = verify_math(response, gold)
    assert v.correct is expected and v.status == ("correct" if expected else "incorrect")


def test_no_answer_and_bad_gold():
    assert verify_math("<think>never closed \\boxed{1}", "1").status == "no_answer"
    assert verify_math("\\boxed{1}", "").status == "error"


STRICT_CASES = [  # (response, what strict mode reads or None)
    ("<think>x</think> so \\boxed{5}.", "5"),
    ("<think>\\boxed{5}</think> the answer is 5.", None),           # box only inside the reasoning
    ("no reasoning block \\boxed{5}", None),                          # no </think>
    ("<think>x</think> The answer is 5.", None),                       # phrase, no box
    ("<think>x</think> #### 5", None),
    ("<think>x</think> Answer: $5$", None),
    ("<think>x</think> \\boxed{}", None),                              # empty box
    ("<think>x</think> \\boxed{3} no wait, \\boxed{4}", "4"),          # not joined: last box wins
    ("<think>x</think> \\boxed{1}, \\boxed{2} and \\boxed{3}", "1, 2, 3"),
    ("<think>x</think> \\(y_1 = \\boxed{a}\\) and \\(y_2 = \\boxed{b}\\)", "a, b"),
    ("<think>x</think> \\boxed{5} so \\boxed{5}", "5"),                # identical boxes count once
]


@pytest.mark.parametrize("response,expected", STRICT_CASES)
def test_strict_mode_reads_only_a_box_after_the_reasoning(response, expected):
    assert extract_answer(response, mode="strict") == expected


def test_lenient_reads_markers_and_math_verify_extraction():
    assert extract_answer("<think>x</think> Answer \\[ 9 \\]") == "9"           # "Answer" without a colon
    assert extract_answer("<think>x</think> Therefore $x \\geq 5$ is the solution.") == "x \\geq 5"
    assert extract_answer("<think>x</think> it costs 1,000.99€") == "1000.99"
    # a "final answer" line after an earlier box wins; a box after the phrase wins
    assert extract_answer("$\\boxed{255}$ so ... Final Answer: The final answer is $10,455$. I hope it is "
                          "correct.") == "$10,455$"
    assert extract_answer("**Final Answer:** \\boxed{004}") == "004"
    assert extract_answer("<think>\\boxed{3} unclosed") is None
    with pytest.raises(ValueError, match="math mode"):
        extract_answer("x", mode="loose")


@pytest.mark.parametrize("response,gold,kw,expected", [
    # several boxes are one answer, read the way the gold is
    ("\\boxed{1} and \\boxed{2} and \\boxed{3}", "\\{1,2,3\\}", {}, True),
    ("\\boxed{k = 45} \\quad \\text{and} \\quad \\boxed{n = 2}", "k = 45, n = 2", {}, True),
    ("\\boxed{7}, \\boxed{6}", "(7, 6)", {}, True),
    ("\\boxed{6}, \\boxed{7}", "(7, 6)", {}, False),
    # bare comma lists: ordered unless the problem, the setting or the items say otherwise
    ("\\boxed{4, 10, -2}", "10, 4, -2", {}, False),
    ("\\boxed{10, 4, -2}", "10, 4, -2", {}, True),
    ("\\boxed{\\{4, 10, -2\\}}", "10, 4, -2", {}, False),                # the gold decides
    ("\\boxed{4, 10, -2}", "\\{10, 4, -2\\}", {}, True),
    ("\\boxed{4, 10, -2}", "10, 4, -2", {"list_order": "unordered"}, True),
    ("\\boxed{(1,2),(2,1)}", "(2,1),(1,2)", {}, True),                     # tuples carry their identity
    ("\\boxed{y=2, x=1}", "x=1, y=2", {}, True),
    ("\\boxed{(1,2),(2,1)}", "(2,1),(1,2)", {"list_order": "ordered"}, False),
    # numbers: written places (>= 3 significant digits), rel_tol, decimal_places
    ("\\boxed{0.3333}", "\\frac{1}{3}", {}, True),
    ("\\boxed{0.333}", "\\frac{1}{3}", {}, True),
    ("\\boxed{0.33}", "\\frac{1}{3}", {}, False),
    ("\\boxed{0.3334}", "\\frac{1}{3}", {}, False),
    ("\\boxed{0.3333}", "\\frac{1}{3}", {"round_to_written": False}, False),
    ("\\boxed{0.3333}", "\\frac{1}{3}", {"round_to_written": False, "decimal_places": 4}, True),
    ("\\boxed{0.33}", "\\frac{1}{3}", {"min_sig_digits": 2}, True),
    ("\\boxed{\\frac{100}{3}}", "33.3", {}, True),
    ("\\boxed{\\frac{49}{20}}", "2.5", {}, False),
    ("\\boxed{2.46}", "2.5", {}, False),
    ("\\boxed{6630}", "6630.65", {}, False),
    ("\\boxed{6630}", "6630.65", {"rel_tol": 1e-4}, True),
    ("\\boxed{1.4142}", "\\sqrt{2}", {}, True),
    ("\\boxed{(0.6,2.6667]}", "(\\frac{3}{5},\\frac{8}{3}]", {}, True),   # inside an interval
    ("\\boxed{[0.6,2.6667]}", "(\\frac{3}{5},\\frac{8}{3}]", {}, False),
    ("\\boxed{\\begin{pmatrix}0.3333\\\\0.2\\end{pmatrix}}", "\\begin{pmatrix}\\frac13\\\\ \\frac15\\end{pmatrix}",
     {}, True),                                                                  # inside a matrix
    # decimal comma by locale option
    ("\\boxed{1000,99}", "1000.99", {}, False),
    ("\\boxed{1000,99}", "1000.99", {"decimal_comma": True}, True),
    ("\\boxed{1.000,5}", "1000.5", {"decimal_comma": True}, True),
    ("\\boxed{1, 2}", "1,2", {"decimal_comma": True}, False),
    ("\\boxed{7,425,000}", "7425000", {}, True),
    # e-notation golds; cut-off fallback strings of unreadable answers never match each other
    ("\\boxed{0.00001}", "1e-5", {}, True),
    ("\\boxed{3 \\times 10^8}", "3e8", {}, True),
    ("\\boxed{3e8}", "3 \\times 10^{8}", {}, True),
    ("\\boxed{2.89 \\times 10^{-19}}", "2.88e-19", {}, False),   # small numbers: places from the leading digit
    ("\\boxed{3.313 \\times 10^{-22}}", "1.325e-27", {}, False),
    ("\\boxed{2.88 \\times 10^{-19}}", "2.88e-19", {}, True),
    ("\\boxed{0.0833333}", "\\frac{1}{12}", {}, True),
    ("\\boxed{0.0000001}", "0", {}, False),
    ("\\boxed{2.89 \\times 10^{-6}}", "2.88e-6", {}, False),
    ("\\boxed{4.57 \\times 10^{-24}}", "4.6e-24", {}, True),      # the gold gives 2 significant digits
    ("\\boxed{\\lambda_{\\text{red}} \\sqrt{3 - 2\\sqrt{2}}}", "\\lambda_{\\text{red}}/\\sqrt{2}", {}, False),
    # math-verify's flags
    ("\\boxed{f(y)}", "f(x)", {}, False),
    ("\\boxed{f(y)}", "f(x)", {"strict_variables": False}, True),
    ("\\boxed{-2 \\le x \\le 7}", "x \\in [-2,7]", {}, False),
    ("\\boxed{-2 \\le x \\le 7}", "x \\in [-2,7]", {"allow_set_relation_comp": True}, True),
])
def test_comparison_settings(response, gold, kw, expected):
    v = verify_math("<think>x</think> " + response, gold, compare=MathCompare(**kw))
    assert v.correct is expected, v


def test_problem_text_sets_list_order():
    resp, gold = "<think>x</think> \\boxed{4, 10, -2}", "10, 4, -2"
    assert verify_math(resp, gold, problem="Enter all the solutions, separated by commas.").correct
    assert verify_math(resp, gold, problem="Find all real x such that f(x) = 0.").correct
    assert not verify_math(resp, gold, problem="Enter all the roots in increasing order.").correct
    assert not verify_math(resp, gold, problem="Compute a, b and c, respectively.").correct
    got = verify_math_batch([(resp, gold)] * 2, workers=1, problems=["Find all solutions.", None])
    assert [v.correct for v in got] == [True, False]
    with pytest.raises(ValueError, match="problems"):
        verify_math_batch([(resp, gold)], problems=[])


def test_strict_and_lenient_differ_only_in_extraction():
    gold = "9"
    for response, lenient, strict in [
        ("<think>x</think> Answer \\[ 9 \\]", True, None),
        ("<think>x</think> The answer is 9.", True, None),
        ("<think>x</think> so \\boxed{9}.", True, True),
        ("<think>x</think> so \\boxed{8}.", False, False),
        ("no block, so \\boxed{9}.", True, None),
    ]:
        assert verify_math(response, gold).correct is lenient
        assert verify_math(response, gold, mode="strict").correct is strict
    got = verify_math_batch([("<think>x</think> The answer is 9.", "9")], workers=1, mode="strict")
    assert got[0].status == "no_answer"


@pytest.mark.parametrize("kw", [{"decimal_places": -1}, {"min_sig_digits": 0}, {"rel_tol": 2.0},
                                {"list_order": "sorted"}])
def test_bad_settings_name_the_field(kw):
    with pytest.raises(ValueError, match=f"MathCompare.{next(iter(kw))}"):
        MathCompare(**kw)


def test_settings_from_a_recipe_mapping():
    assert MathCompare.from_value({"rel_tol": 1e-4}).rel_tol == 1e-4
    with pytest.raises(ValueError, match="unknown key"):
        MathCompare.from_value({"tolerance": 1}, "verify.math_compare")


def test_verify_math_works_in_a_thread():
    out = []
    t = threading.Thread(target=lambda: out.append(verify_math("\\boxed{\\frac{2}{4}}", "0.5")))
    t.start()
    t.join()
    assert out[0].correct is True


def test_batch_matches_single_and_keeps_order():
    pairs = [(f"so \\boxed{{{i}}}", str(i if i % 3 else i + 1)) for i in range(40)]
    got = verify_math_batch(pairs, workers=2)
    assert [v.correct for v in got] == [verify_math(r, a).correct for r, a in pairs]
    assert [v.correct for v in got] == [bool(i % 3) for i in range(40)]


def test_batch_timeout_is_a_status_and_the_rest_continue(monkeypatch):
    real = vm.verify_math

    def slow(response, answer, think_end="</think>", **kw):
        if answer == "HANG":
            time.sleep(60)
        return real(response, answer, think_end, **kw)

    vm.shutdown_pool()
    monkeypatch.setattr(vm, "verify_math", slow)  # inherited by the forked workers
    try:
        pairs = [("\\boxed{1}", "1"), ("\\boxed{1}", "HANG"), ("\\boxed{2}", "3"), ("\\boxed{4}", "4")]
        t0 = time.monotonic()
        got = verify_math_batch(pairs, workers=1, timeout_s=1.0)
        assert time.monotonic() - t0 < 20
        assert [v.status for v in got] == ["correct", "timeout", "incorrect", "correct"]
        assert got[1].correct is None
    finally:
        vm.shutdown_pool()


def test_real_labels_agree_on_a_sample(shared_data):
    """A small slice of the agreement measured by bench/verify/agreement.py (GSM8K GPT-3 solutions)."""
    path = shared_data / "sft_sources" / "gsm8k_gpt3_model_solutions.jsonl.gz"
    rows = [json.loads(line) for _, line in zip(range(300), gzip.open(path, "rt"), strict=False)]
    got = verify_math_batch([(r["response"], r["ground_truth"]) for r in rows], workers=2)
    agree = sum(bool(v.correct) == r["is_correct"] for v, r in zip(got, rows, strict=True))
    assert agree / len(rows) >= 0.97


def test_verify_config_math_fields():
    from cotforge.curate.verify.stage import VerifyConfig

    cfg = VerifyConfig(math_compare={"rel_tol": 1e-4})  # a recipe mapping
    assert cfg.math_mode == "lenient" and cfg.math_compare == MathCompare(rel_tol=1e-4)
    with pytest.raises(ValueError, match="VerifyConfig.math_mode"):
        VerifyConfig(math_mode="loose")
    with pytest.raises(ValueError, match="VerifyConfig.math_compare"):
        VerifyConfig(math_compare={"tolerance": 1})
