"""Shared text normalisation: presentation never hides a duplicate, numbers always separate problems."""

from __future__ import annotations

import pytest

from cotforge.curate.text.normalize import DEFAULT_NORM, NormConfig, normalize, words

BASE = r"Let $f(x) = \frac{x^2}{3}$. Find $f(6)$ for $x \le 10$."


@pytest.mark.parametrize("variant", [
    "  let   $f(x)=\\frac{x^2}{3}$.\n\nFIND $f(6)$ for $x \\le 10$.  ",  # whitespace + case
    r"Let \(f(x) = \dfrac{x^2}{3}\). Find \(f(6)\) for \(x \leq 10\).",  # delimiters + \dfrac + \leq
    "Let $f\\left(x\\right) = \\tfrac{x^2}{3}$. Find $f(6)$ for $x \\le\n10$.",  # \left \right, \le + newline
    "Solve the following problem step by step. " + BASE,  # instruction wrapper before
    BASE + "\nPlease reason step by step, and put your final answer within \\boxed{}.",  # wrapper after
    "Problem: " + BASE + " Put your final answer within \\boxed{}.",
    "Let $f(x)\\,=\\;\\frac{x^2}{3}$. Find $\\displaystyle f(6)$ for $x \\le 10$!",  # spacing commands, punct
])
def test_presentation_variants_normalise_equal(variant):
    assert normalize(variant) == normalize(BASE)


@pytest.mark.parametrize("other", [
    BASE.replace("f(6)", "f(7)"),
    BASE.replace("{3}", "{4}"),
    BASE.replace("10", "100"),
    BASE.replace("x^2", "x^3"),
])
def test_numbers_are_kept(other):
    assert normalize(other) != normalize(BASE)


def test_number_collapse_is_opt_in():
    cfg = NormConfig(numbers=False)
    assert normalize(BASE.replace("f(6)", "f(7)"), cfg) == normalize(BASE, cfg)


def test_wrapper_only_removed_as_whole_phrase():
    assert normalize("Problem: what is 2+3?") == "what is 2 3"
    # a wrapper's words inside a sentence are not stripped piecemeal
    assert "problem" in normalize("This problem asks for 2+3.")
    assert normalize("Answer this question: is 7 prime?") == "answer this question is 7 prime"
    assert normalize("Question: Problem: is 7 prime? Think step by step.") == "is 7 prime"


def test_code_fences_and_empty():
    assert normalize("```python\nprint(1)\n```") == "print 1"
    assert normalize("") == "" and normalize(None) == "" and words("  ") == []
    assert words(BASE) == normalize(BASE).split(" ")
    assert DEFAULT_NORM.numbers and DEFAULT_NORM.wrappers
