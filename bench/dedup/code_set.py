"""Real code-problem dedup pairs, split into a tuning half and a held-out half before any code rule exists.

    python -m bench.frozen --only dedup_code             # build, counts per half and kind, check the hash
    python -m bench.dedup.quality --set code             # the default DedupConfig on the TUNING half (+ negatives)
    python -m bench.dedup.quality --set code --show 5    # print 5 tuning pairs (never held-out ones)
    python -m bench.dedup.quality --set code --final     # the one measurement of the held-out half (report it once)

Pairs (all real text of ../shared/data):
- `real_leetcode_two_scrapes` (duplicates): bench/dedup/fresh.py's `real_code_pairs` unchanged: the same
  LeetCode problem in two scrapes (DeepCoder test / train vs the DeepSeek-Coder contest export; one with
  examples + constraints + a stub, the other with DeepCoder's wrapper + a stub), mined by 13-gram containment
  and labelled the same problem when the numbers of their statements agree.
- `real_leetcode_lookalike` (different problems): two different rows of the DeepCoder LeetCode train scrape
  whose statements share >= 50% of the smaller side's 13-grams ("II" versions, same-template problems, the
  same story with another question); pairs with equal statement tokens are left out (unlabelled).
Split: a pair is in the held-out half when sha256(first text) is odd (`half_of`), so the halves are fixed by the
text alone. The held-out half's digest is recorded in bench/records/dedup_code_heldout.sha256 (committed before any
code rule was written) and checked before the held-out half is measured; nothing prints a held-out pair. Hand-written negatives
(II versions, same template, other signature) are in `handwritten_negatives` and belong to the tuning half.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from bench.dedup.fresh import real_code_pairs, statement
from bench.dedup.labelled import LabelledPair, LabelledSet, ngrams, read_jsonl, tokens

HALVES = ("tune", "held")


def half_of(text: str) -> str:
    """"held" when sha256 of the pair's first text is odd, else "tune"."""
    return HALVES[int(hashlib.sha256(text.encode("utf-8")).hexdigest(), 16) & 1]


def lookalike_pairs(shared: Path, min_containment: float = 0.5) -> list[tuple[str, str]]:
    """Different rows of the DeepCoder LeetCode train scrape with overlapping statements: each row with its best
    other row (13-gram containment of the smaller side >= `min_containment`), equal statements left out."""
    rows = sorted({r["problem"] for r in read_jsonl(shared / "sft_sources" / "deepcoder_leetcode_train.jsonl.gz")
                   if r.get("problem")})
    toks = [tokens(statement(t)) for t in rows]
    grams = [ngrams(t, 13) for t in toks]
    index: dict[str, list[int]] = {}
    for j, g in enumerate(grams):
        for s in g:
            index.setdefault(s, []).append(j)
    seen: set[tuple[int, int]] = set()
    out = []
    for i, g in enumerate(grams):
        hits: dict[int, int] = {}
        for s in g:
            for j in index[s]:
                if j != i:
                    hits[j] = hits.get(j, 0) + 1
        best = max(hits.items(), key=lambda kv: (kv[1] / max(1, min(len(g), len(grams[kv[0]]))), -kv[0]), default=None)
        if not best or best[1] / max(1, min(len(g), len(grams[best[0]]))) < min_containment:
            continue
        j = best[0]
        key = (min(i, j), max(i, j))
        if key in seen or toks[i] == toks[j]:
            continue
        seen.add(key)
        out.append((rows[key[0]], rows[key[1]]))
    return out


_STUB = "\n\nPlease complete the following python code precisely:\n```python\nclass Solution:\n    def {sig}:\n```"
_CONTEST = "\n\nPlease complete the code below to solve above prblem:\n```python\nclass Solution:\n    def {sig}:\n        \n```"
_WRAP = "Please solve the programming task below using a self-contained code snippet in a markdown code block.\n\n"


def handwritten_negatives() -> list[LabelledPair]:
    """Different code problems that look alike (tuning half): II versions with one changed word or constraint,
    same-template problems, the same story with another function and question."""
    def deep(text: str, sig: str) -> str:
        return _WRAP + text + _STUB.format(sig=sig)

    def contest(text: str, examples: str, constraints: str, sig: str) -> str:
        return (text + "\n\nExample 1:\n\n" + examples + "\n\nConstraints:\n\n" + constraints
                + _CONTEST.format(sig=sig))

    buy = ("You are given an integer array prices where prices[i] is the price of a given stock on the ith day.\n"
           "On each day, you may decide to buy and/or sell the stock. You can only hold at most one share of the "
           "stock at any time. {x}\nFind and return the maximum profit you can achieve.")
    jump = ("You are given a 0-indexed array of integers nums of length n. You are initially positioned at "
            "nums[0].\nEach element nums[i] represents the maximum length of a forward jump from index i.\n"
            "Return {q}.")
    sub = ("Given an integer array nums and an integer k, return the number of {w} subarrays of nums whose sum "
           "is {r} k.")
    grid = ("You are given an m x n binary matrix grid. An island is a group of 1's connected 4-directionally. "
            "Return the {q} island in grid. If there is no island, return 0.")
    ex = "Input: nums = [2,3,1,1,4]\nOutput: 2"
    pairs = [
        (deep(buy.format(x="However, you can buy it then immediately sell it on the same day."),
              "maxProfit(self, prices: List[int]) -> int"),
         deep(buy.format(x="However, you must sell the stock before you buy again, at most two transactions."),
              "maxProfit(self, prices: List[int]) -> int"), "handwritten_ii_version"),
        (deep(jump.format(q="true if you can reach the last index, or false otherwise"),
              "canJump(self, nums: List[int]) -> bool"),
         contest(jump.format(q="the minimum number of jumps to reach nums[n - 1]"), ex,
                 "1 <= nums.length <= 10^4\n0 <= nums[i] <= 1000", "jump(self, nums: List[int]) -> int"),
         "handwritten_ii_version"),
        (deep(sub.format(w="non-empty", r="divisible by"), "subarraysDivByK(self, nums: List[int], k: int) -> int"),
         deep(sub.format(w="contiguous", r="equal to"), "subarraySum(self, nums: List[int], k: int) -> int"),
         "handwritten_same_template"),
        (deep(grid.format(q="maximum area of an"), "maxAreaOfIsland(self, grid: List[List[int]]) -> int"),
         deep(grid.format(q="perimeter of the"), "islandPerimeter(self, grid: List[List[int]]) -> int"),
         "handwritten_same_template"),
        (contest(jump.format(q="the minimum number of jumps to reach nums[n - 1]"), ex,
                 "1 <= nums.length <= 10^4\n0 <= nums[i] <= 1000", "jump(self, nums: List[int]) -> int"),
         contest(jump.format(q="the minimum number of jumps to reach nums[n - 1]"), ex,
                 "1 <= nums.length <= 10^5\n0 <= nums[i] <= 10^9", "jump(self, nums: List[int]) -> int"),
         "handwritten_constraint_changed"),
        (contest(jump.format(q="the minimum number of jumps to reach nums[n - 1]"), ex,
                 "1 <= nums.length <= 10^4\n0 <= nums[i] <= 1000", "jump(self, nums: List[int]) -> int"),
         contest(jump.format(q="the minimum number of jumps to reach nums[n - 1]"),
                 "Input: nums = [2,3,0,1,4]\nOutput: 2", "1 <= nums.length <= 10^4\n0 <= nums[i] <= 1000",
                 "jump(self, nums: List[int]) -> int"), "handwritten_example_changed"),
        (deep("Given the root of a binary tree, return its maximum depth.",
              "maxDepth(self, root: Optional[TreeNode]) -> int"),
         deep("Given the root of a binary tree, return its minimum depth.",
              "minDepth(self, root: Optional[TreeNode]) -> int"), "handwritten_signature_changed"),
    ]
    return [LabelledPair(a, b, False, kind, "tune") for a, b, kind in pairs]


def build_code_set(shared: str | Path) -> LabelledSet:
    """Both halves of the real code pairs (part = half), sorted; the hand-written negatives are not in it."""
    shared = Path(shared)
    pairs = [LabelledPair(p.a, p.b, True, p.kind, half_of(p.a)) for p in real_code_pairs(shared, "code")]
    pairs += [LabelledPair(a, b, False, "real_leetcode_lookalike", half_of(a)) for a, b in lookalike_pairs(shared)]
    return LabelledSet(sorted(set(pairs), key=lambda p: (p.a, p.b)), [])
