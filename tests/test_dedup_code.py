"""Code problems by sections (curate/dedup/pairs/sections.py): two scrapes of one problem merge, different ones don't."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cotforge.curate.dedup.cluster import cut_bridges
from cotforge.curate.dedup.config import DedupConfig
from cotforge.curate.dedup.pairs.sections import code_sections, join_superscripts
from cotforge.curate.dedup.stage import PairJudge
from cotforge.curate.io.inputs import read_table
from cotforge.curate.io.readers import InputSpec
from cotforge.pipelines.stages import run_stage

STATEMENT = ("You are given a 0-indexed integer array nums and an integer k.\n"
             "In one operation, you can pick any index i and increase nums[i] by 1.\n"
             "Return the minimum number of operations needed so that every element of nums is at least k.")
SIG = "def minOperations(self, nums: List[int], k: int) -> int:"
EXAMPLES = ("Example 1:\n\nInput: nums = [2,11,10,1,3], k = 10\nOutput: 3\nExplanation: After three operations "
            "nums becomes [2,11,10,2,3].\n\nExample 2:\n\nInput: nums = [1,1,2,4,9], k = 1\nOutput: 0\n"
            "Explanation: All elements are already at least 1.")
CONSTRAINTS = "Constraints:\n\n * 1 <= nums.length <= 50\n * 1 <= nums[i] <= 10^9\n * 1 <= k <= 10^9"


def deep(statement: str = STATEMENT, sig: str = SIG) -> str:
    """DeepCoder style: wrapper, statement, instruction line, stub."""
    return ("Please solve the programming task below using a self-contained code snippet in a markdown code "
            f"block.\n\n{statement}\n\xa0\nPlease complete the following python code precisely:\n```python\n"
            f"class Solution:\n    {sig}\n```")


def contest(statement: str = STATEMENT, examples: str = EXAMPLES, constraints: str = CONSTRAINTS,
            sig: str = SIG) -> str:
    """Contest-export style: statement, examples, constraints, another instruction line, stub."""
    return (f"{statement.replace(chr(10), chr(10) + chr(10))}\n\n{examples}\n\n\n{constraints}\n\n\n"
            f"Please complete the code below to solve above prblem:\n```python\nclass Solution:\n    {sig}\n"
            "        \n```")


def lcb(statement: str = STATEMENT, sig: str = SIG) -> str:
    """LiveCodeBench-style wrapper around the statement and examples."""
    return ("You will be given a question (problem specification) and will generate a correct Python program "
            "that matches the specification and passes all tests.\n\n### Question:\n"
            f"{statement}\n\n{EXAMPLES}\n\n### Format: You will use the following starter code to write the "
            f"solution to the problem and enclose your code within delimiters.\n```python\nclass Solution:\n"
            f"    {sig}\n```\n\n### Answer: (use the provided format with backticks)\n")


def verdict(a: str, b: str, **kw) -> str | None:
    return PairJudge(DedupConfig(**kw)).verdict(a, b)


@pytest.mark.parametrize("b", [
    contest(),
    lcb(),
    contest(constraints=CONSTRAINTS.replace("10^9", "109")),  # a scrape that lost the superscripts
    contest(examples=EXAMPLES.split("\n\nExample 2")[0]),  # one example fewer
], ids=["contest", "livecodebench", "superscripts_lost", "fewer_examples"])
def test_two_scrapes_of_one_problem_merge(b):
    assert verdict(deep(), b) is None
    assert verdict(contest(), b) is None


def test_whole_prompt_path_misses_them():
    """Without sections the examples' and constraints' numbers differ: the number guard rejects the pair."""
    assert verdict(deep(), contest(), code_sections=False) == "number_guard"


@pytest.mark.parametrize(("a", "b", "why"), [
    (contest(), contest(constraints=CONSTRAINTS.replace("<= 50", "<= 10^5")), "constraints_changed"),  # "II"
    (contest(), contest(examples=EXAMPLES.replace("Output: 3", "Output: 4")), "examples_changed"),
    (deep(), deep(STATEMENT.replace("at least k", "at most k")), "question_changed"),
    (deep(), deep(STATEMENT.replace("increase nums[i] by 1", "increase nums[i] by 2")), "number_guard"),
    (deep(), deep(STATEMENT.replace("minimum", "maximum"), SIG.replace("minOperations", "maxOperations")),
     "signature_changed"),
    (deep(), deep(STATEMENT.replace("integer array nums", "string s"), SIG), "content_changed"),  # same template
], ids=["ii_constraint", "example", "question", "number", "signature", "same_template"])
def test_different_code_problems_stay_apart(a, b, why):
    assert verdict(a, b) == why


def test_sections_of_each_scrape():
    s = code_sections(contest())
    assert s is not None and s.statement == STATEMENT.replace("\n", "\n\n")
    assert s.functions == {"minOperations"} and len(s.examples) == 2
    assert s.examples[0] == "Input: nums = [2,11,10,1,3], k = 10\nOutput: 3"  # explanation dropped
    assert s.constraint_numbers() == sorted(["1", "50", "1", "109", "1", "109"])
    for wrapped in (deep(), lcb()):  # instruction paragraphs recognised by role, stub cut off
        w = code_sections(wrapped)
        assert w is not None and w.statement == STATEMENT and w.functions == {"minOperations"}
    assert join_superscripts("modulo 10^9 + 7, n <= 2 * 10<sup>5</sup>") == "modulo 109 + 7, n <= 2 * 105"


def test_math_and_code_reading_problems_keep_the_whole_prompt():
    assert code_sections("Find the sum of all positive divisors of 36. Note: 1 counts.") is None
    reading = "What does this program print?\n```python\ndef f(x):\n    return x * 2\nprint(f(3))\n```"
    assert code_sections(reading) is None  # a code block with a body is part of the problem, not a stub
    other = reading.replace("x * 2", "x * 3")
    assert verdict(reading, other) is not None


def test_code_sections_is_validated():
    with pytest.raises(ValueError, match="code_sections"):
        DedupConfig(code_sections="yes")


def test_pipeline_merges_scrapes_but_a_bare_scrape_does_not_bridge_an_ii_version(tmp_path):
    """Problem X in three scrapes merges; problem Y in two scrapes plus Y's "II" version (same statement, other
    constraints): the bare DeepCoder scrape of Y matches both, so the conflicting cluster drops its merges
    that rest on a missing section and no Y row is removed (kept apart rather than joined wrongly)."""
    y = STATEMENT.replace("increase nums[i] by 1", "decrease nums[i] by 1").replace("at least k", "at most k")
    rows = [{"id": "x_deep", "problem": deep(), "solution": "a"},
            {"id": "x_contest", "problem": contest(), "solution": "b"},
            {"id": "x_lcb", "problem": lcb(), "solution": "c"},
            {"id": "y_deep", "problem": deep(y), "solution": "d"},
            {"id": "y_contest", "problem": contest(y), "solution": "e"},
            {"id": "y_ii", "problem": contest(y, constraints=CONSTRAINTS.replace("<= 50", "<= 10^5")),
             "solution": "f"}]
    src = tmp_path / "code.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    stats = run_stage("dedup", [InputSpec(str(src))], tmp_path / "out")["dedup"]
    removed = {r["id"]: r["reason"] for r in read_table(tmp_path / "out", "removed").iter_rows(named=True)}
    assert set(removed) == {"x_contest", "x_lcb"} and all(v.startswith("near_duplicate") for v in removed.values())
    assert stats["pairs_rejected_constraints_changed"] >= 1 and stats["pairs_cut_as_bridges"] == 2


def test_cut_bridges_leaves_components_without_conflicts():
    lo, hi = np.array([1, 1, 5], dtype=np.uint64), np.array([2, 3, 6], dtype=np.uint64)
    partial = np.array([True, True, True])
    left = cut_bridges(lo, hi, partial, np.array([2], dtype=np.uint64), np.array([3], dtype=np.uint64))
    assert left[0].tolist() == [5] and left[1].tolist() == [6] and left[2] == 2
    full = cut_bridges(lo, hi, np.array([False, True, True]), np.array([2], np.uint64), np.array([3], np.uint64))
    assert full[0].tolist() == [1, 5] and full[2] == 1  # 2 stays with 1 by a full agreement; 3 is cut off


def test_codeforces_input_sections_compared_by_words_and_numbers():
    legend = "Vasya has a row of n cards, each with a number. He takes cards from both ends alternately."
    io = ("-----Input-----\n\nThe first line contains n (1 <= n <= 10^5). The second line contains n integers "
          "a_i.\n\n-----Output-----\n\nPrint the largest sum Vasya can collect.\n\n-----Examples-----\nInput\n3\n"
          "1 2 3\nOutput\n4")
    a = f"{legend}\n\n{io}"
    assert code_sections(a) is not None and code_sections(a).statement == legend
    assert verdict(a, f"{legend}\n\n{io.replace('10^5', '105')}") is None  # superscript lost by a scrape
    assert verdict(a, f"{legend}\n\n{io.replace('n integers', 'n strings')}") == "constraints_changed"


def test_commented_helper_classes_are_not_the_signature():
    tree = "# Definition for a binary tree node.\n# class TreeNode:\n#     def __init__(self, val=0):\n"
    a = deep("Given the root of a binary search tree, return the minimum difference between any two node values.",
             "def minDiffInBST(self, root: Optional[TreeNode]) -> int:").replace("class Solution", tree + "class Solution")
    b = a.replace("minDiffInBST", "getMinimumDifference")
    assert code_sections(a).functions == {"minDiffInBST"}
    assert verdict(a, b) == "signature_changed"


def test_a_trailing_statement_sentence_is_not_a_wrapper():
    """Stub and wrappers cut, what ends the statement is the problem's ("... in logarithmic time": H-Index II)."""
    b = deep(STATEMENT + "\nYou must write an algorithm that runs in logarithmic time of the length of nums.")
    assert verdict(deep(), b) == "reworded_too_much"
    assert verdict(deep(), deep("Solve this problem for me.\n\n" + STATEMENT)) is None  # a leading instruction
