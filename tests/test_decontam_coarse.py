"""The coarse candidate tier (decontam/coarse.py) never drops a response the full path flags."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cotforge.curate.core.benchmarks import BenchmarkItem
from cotforge.curate.decontam import coarse
from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.decontam.index import DecontamIndex
from cotforge.curate.decontam.match import Matcher
from cotforge.curate.text.normalize import normalize

ITEMS = {
    "math": [
        BenchmarkItem("m0", "Let $x^2 + \\sqrt{3}\\,y \\le \\pi$ where $x$ and $y$ are positive integers chosen from the "
                            "interval $[1, 40]$. Find the number of ordered pairs $(x, y)$ satisfying this inequality."),
        BenchmarkItem("m1", "A bag holds twelve red marbles and \\frac{3}{4} as many blue marbles as red ones. Sarah "
                            "draws marbles without replacement until she has two of each colour. How many draws does "
                            "she need at most?"),
        BenchmarkItem("m2", "Compute the remainder when the sum of the squares of the first hundred primes is "
                            "divided by the product of the digits of the year when the contest was first held."),
    ],
    "code": [
        BenchmarkItem("c0", "Write a function to find the shared elements from the given two lists of tuples."),
        BenchmarkItem("c1", "def has_close_elements(numbers, threshold):\n    \"\"\"Check if in given list of numbers, "
                            "are any two numbers closer to each other than given threshold.\n    >>> "
                            "has_close_elements([1.0, 2.0, 3.0], 0.5)\n    False\n    \"\"\""),
    ],
}
FILLER = ("We expand the expression and collect like terms, then check each case by hand. The grid is symmetric, "
          "so only half of it matters; after that the count doubles. ") * 12
FLAGGED_FORMS = [
    # Unicode math for LaTeX, mid-response
    FILLER + "Let x² + √3 y ≤ π where x and y are positive integers chosen from the interval [1, 40]. Find the "
             "number of ordered pairs (x, y) satisfying this inequality." + FILLER,
    # LaTeX variants (dfrac, left/right, display math)
    "Restating: A bag holds twelve red marbles and \\dfrac{3}{4} as many blue marbles as red ones. Sarah draws "
    "marbles without replacement until she has two of each colour. How many draws does she need at most? " + FILLER,
    # plain-text math (a/b for \\frac)
    FILLER + "A bag holds twelve red marbles and 3/4 as many blue marbles as red ones. Sarah draws marbles without "
             "replacement until she has two of each colour. How many draws does she need at most?",
    # chat template around a short request-style item
    "<|im_start|>user\nImplement a Python function which finds the shared elements from the given two lists of "
    "tuples.<|im_end|>\n<|im_start|>assistant\nSure.",
    # renamed function, re-indented docstring, inside a code fence
    "```python\ndef close_enough(numbers, threshold):\n  \"\"\"Check if in given list of numbers, are any two "
    "numbers closer to each other than given threshold.\n  >>> close_enough([1.0, 2.0, 3.0], 0.5)\n  False\n"
    "  \"\"\"\n```\n" + FILLER,
    # verbatim with a wrapper in the middle and Unicode punctuation
    "Please reason step by step, and put your final answer within \\boxed{}. Compute the remainder when the sum of "
    "the squares of the first hundred primes is divided by the product of the digits of the year when the contest "
    "was first held — carefully." + FILLER,
]
CLEAN = [FILLER, "The answer is 42. We used the Pythagorean theorem on a right triangle with legs 6 and 8.",
         "def add(a, b):\n    return a + b\n", "Σ x_i = 10 where each x_i ≥ 0; the café naïve résumé ﬁnds nothing.",
         "\\begin{align} a &= b \\\\ c &= d \\end{align} so the two sums agree."]


@pytest.fixture(scope="module")
def matcher(tmp_path_factory):
    cfg = DecontamConfig(benchmarks=list(ITEMS), coarse_tier="coarse")
    return Matcher(DecontamIndex.build(ITEMS, cfg, tmp_path_factory.mktemp("coarse_idx"))), cfg


def _flagged(matcher: Matcher, cfg: DecontamConfig, responses: list[str]) -> list[bool]:
    found = matcher.match_batch(["A question that is not in any benchmark at all."] * len(responses), responses, cfg)
    return [any(m.side == "response" for m in ms) for ms in found]


def test_tier_is_active_and_never_drops_a_flagged_row(matcher):
    m, cfg = matcher
    tier = m.index.coarse_tier()
    assert tier is not None and not tier.weak  # the fixtures' items are not weak: the tier really filters
    rows = FLAGGED_FORMS + CLEAN
    full = _flagged(m, dataclasses.replace(cfg, coarse_tier="none"), rows)
    assert all(full[:len(FLAGGED_FORMS)]), full  # every form is one the full path flags
    m.coarse_stats.clear()
    assert _flagged(m, cfg, rows) == full
    assert m.coarse_stats["passed"] < m.coarse_stats["responses"]  # clean rows were skipped
    passed = tier.candidates(rows)
    assert passed[:len(FLAGGED_FORMS)].all()
    assert not passed[len(FLAGGED_FORMS)]  # the long clean filler is not a candidate


def test_kept_tokens_of_raw_and_normalised_text_agree(matcher):
    m, cfg = matcher
    tier = m.index.coarse_tier()
    texts = ["Let \\(b\\ge 2\\) be an integer; $x \\le 1$, \\left( \\dfrac{1}{2} \\right) \\, \\quad x_1 = y__2",
             "Solve the following problem. What is 3x+4 when x=2? Put your final answer within \\boxed{}.",
             "x² + y₁ · √(3) × π, ∠ABC = 90°, 1 <= n >= 2, \\frac12, write a Python function to merge lists"]
    arr, risky = coarse.prepare(texts, frozenset(), tier.risky)
    raw = coarse.tokenize_plain(arr, tier.vocab)
    norm = coarse.tokenize_plain([normalize(t) for t in texts], tier.vocab)
    for r in range(len(texts)):
        if not risky[r]:
            assert np.array_equal(raw.h[raw.rows == r], norm.h[norm.rows == r]), texts[r]
    assert risky[2]  # superscripts make digits: such rows always go to the full path


def test_tables_verified_and_option_validated():
    cfg = DecontamConfig()
    vocab = coarse.Vocabulary(coarse._command_words(cfg.norm))
    assert coarse.verify_tables(cfg.norm, vocab, coarse.risky_class(cfg.norm)) == []
    with pytest.raises(ValueError, match="coarse_tier"):
        DecontamConfig(coarse_tier="fast")
