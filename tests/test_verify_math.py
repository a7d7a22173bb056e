"""Math verdicts: answer extraction rules, math-verify comparisons, and the killable process pool."""

from __future__ import annotations

import gzip
import json
import threading
import time

import pytest

import cotforge.curate.verify.math as vm
from cotforge.curate.verify.math import extract_answer, split_after_reasoning, verify_math, verify_math_batch


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
    assert extract_answer("no final answer here, just 42 somewhere") is None
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

    def slow(response, answer, think_end="</think>"):
        if answer == "HANG":
            time.sleep(60)
        return real(response, answer, think_end)

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
    """A small slice of the agreement measured by bench/verify_agreement.py (GSM8K GPT-3 solutions)."""
    path = shared_data / "sft_sources" / "gsm8k_gpt3_model_solutions.jsonl.gz"
    rows = [json.loads(line) for _, line in zip(range(300), gzip.open(path, "rt"), strict=False)]
    got = verify_math_batch([(r["response"], r["ground_truth"]) for r in rows], workers=2)
    agree = sum(bool(v.correct) == r["is_correct"] for v, r in zip(got, rows, strict=True))
    assert agree / len(rows) >= 0.97
