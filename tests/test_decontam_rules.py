"""Decontamination rules of issue 18's second round, each with a copy it must catch and a look-alike it must not:
excerpts (a HumanEval item's last lines), reordered short items, one-to-one parts, plain function names."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cotforge.curate.core.benchmarks import BenchmarkItem, humaneval_from_wheel
from cotforge.curate.decontam import match as match_mod
from cotforge.curate.decontam.canon import SHORT, rename_functions
from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.decontam.index import DecontamIndex
from cotforge.curate.decontam.match import Matcher

STOCK_END = ("The probability can be written as $\\frac{m}{n}$, where $m$ and $n$ are relatively prime positive "
             "integers. Find $m+n$.")
REORDER_ITEM = "The sum of the first $N$ positive odd numbers is 121. What is the value of $N$?"
TWICE_ITEM = ("Nadia bought 3 boxes of pens, 3 boxes of pencils, and 3 boxes of markers. One box of pens costs "
              "$4.50. One box of pencils costs $2.50 and one box of markers costs $6. How many dollars did Nadia "
              "spend on all the boxes?")


def _items() -> dict[str, list[BenchmarkItem]]:
    synth = [BenchmarkItem("r0", REORDER_ITEM, "11", None, None, {}, "synth"),
             BenchmarkItem("t0", TWICE_ITEM, "8", None, None, {}, "synth")]
    synth += [BenchmarkItem(f"s{i}", f"A bag holds {i + 3} red and {i + 5} blue balls; two are drawn. {STOCK_END}",
                            None, None, None, {}, "synth") for i in range(12)]  # a stock ending in 12 items
    return {"synth": synth, "humaneval": humaneval_from_wheel()}


@pytest.fixture(scope="module")
def matcher(tmp_path_factory) -> tuple[Matcher, DecontamConfig]:
    cfg = DecontamConfig(benchmarks=["synth", "humaneval"])
    return Matcher(DecontamIndex.build(_items(), cfg, tmp_path_factory.mktemp("idx"))), cfg


def _ids(matcher, prompts, cfg=None) -> list[list[str]]:
    m, c = matcher
    return [[x.benchmark_id for x in ms] for ms in m.match_batch(prompts, [None] * len(prompts), cfg or c)]


def test_an_items_last_lines_are_an_excerpt_copy(matcher):
    """HumanEval/52's docstring end and examples: 17 words, under half of the item (the old share rule's 0.5)."""
    tail = ("t.\n    >>> below_threshold([1, 2, 4, 10], 100)\n    True\n    >>> below_threshold([1, 20, 4, 10], 5)\n"
            "    False\n    \"\"\"")
    assert _ids(matcher, [tail]) == [["HumanEval/52"]]
    _, cfg = matcher
    assert _ids(matcher, [tail], replace(cfg, excerpt_rare_ngrams=100)) == [[]]  # the excerpt rule is what catches it


def test_a_stock_ending_alone_is_not_an_excerpt(matcher):
    """17 words that end 12 items (stop n-grams): not a copy of any of them, however much of the row they are."""
    assert _ids(matcher, [STOCK_END, "Two dice are rolled. " + STOCK_END]) == [[], []]


def test_short_item_with_its_sentences_swapped_is_caught(matcher):
    """The moved part ("what is the value of N", 6 words) is shorter than the n-gram: word-level parts."""
    row = "What is the value of $N$? The sum of the first $N$ positive odd numbers is 121."
    assert _ids(matcher, [row]) == [["r0"]]
    keep, match_mod.REORDER_WORDS_MAX = match_mod.REORDER_WORDS_MAX, 0
    matcher[0].clear_cache()
    try:  # the n-gram parts alone miss it
        assert _ids(matcher, [row]) == [[]]
    finally:
        match_mod.REORDER_WORDS_MAX = keep
        matcher[0].clear_cache()


def test_swapped_sentences_with_another_number_are_another_problem(matcher):
    assert _ids(matcher, ["What is the value of $N$? The sum of the first $N$ positive odd numbers is 144."]) == [[]]
    assert _ids(matcher, ["The sum of the first $N$ positive even numbers is 121. What is the value of $N$?"]) == [[]]


def test_a_repeated_phrase_cannot_cover_both_places(matcher):
    """The item says "3 boxes of" three times; with the last 3 changed, one of the row's two remaining copies of
    the phrase must not stand for two places of the item (parts are matched one to one)."""
    row = TWICE_ITEM.replace("3 boxes of markers", "4 boxes of markers")
    assert _ids(matcher, [row, TWICE_ITEM]) == [[], ["t0"]]
    keep, match_mod._one_to_one = match_mod._one_to_one, lambda runs: runs
    matcher[0].clear_cache()
    try:  # without the one-to-one matching the changed number's place is "covered" and the row is flagged
        assert _ids(matcher, [row]) == [["t0"]]
    finally:
        match_mod._one_to_one = keep
        matcher[0].clear_cache()


def test_word_level_reorder_check_is_bounded():
    """Long items are left to the n-gram parts (the Python check runs on a window of three item lengths)."""
    cfg = DecontamConfig()
    words = [f"w{i}" for i in range(match_mod.REORDER_WORDS_MAX + 1)]
    assert match_mod._reordered_words(words, words[60:] + words[:60], 0, len(words), cfg) == (0.0, 0, 0)


def test_plain_function_names_are_renamed_where_called():
    """A copy of HumanEval's examples without the signature: `histogram(` reads as the item's `fn(` while the word
    in prose stays; a long response defining `def sum(...)` keeps "the sum of"."""
    assert rename_functions("the histogram of >>> histogram('a b')", ("histogram",)) == "the histogram of >>> fn('a b')"
    long = "x" * SHORT + "\ndef sum(xs):\n    return 0\nFind the sum of all bases. sum([1])"
    assert rename_functions(long).endswith("Find the sum of all bases. fn([1])") and "def fn(xs)" in long.replace(
        "def sum(xs)", "def fn(xs)")
    assert rename_functions("def add(x, y):\n    \"\"\"add x and y\"\"\"") == "def fn(x, y):\n    \"\"\"fn x and y\"\"\""
    assert rename_functions("use has_close_elements here", ("has_close_elements",)) == "use fn here"
    quoted = "y" * 30_000 + "\ndef unique(l: list):\n    \"\"\"Return sorted unique elements\"\"\"\n"
    assert rename_functions(quoted, ("unique",)).endswith("def fn(l: list):\n    \"\"\"Return sorted fn elements\"\"\"\n")
    assert rename_functions("f(x) = bf(2)", ("bf",)) == "f(x) = fn(2)"
