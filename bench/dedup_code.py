"""Real code-problem dedup pairs, split into a tuning half and a held-out half before any code rule exists.

    python bench/dedup_code.py                 # build, print counts per half and kind, check the held-out hash
    python bench/dedup_code.py --eval          # measure the default DedupConfig on the TUNING half (+ negatives)
    python bench/dedup_code.py --show 5        # print 5 tuning pairs (never held-out ones)
    python bench/dedup_code.py --final         # the one measurement of the held-out half (report it once)
    python bench/dedup_code.py --write-hash    # (once, before any code rule) record the held-out half's hash

Pairs (all real text of ../shared/data):
- `real_leetcode_two_scrapes` (duplicates): bench/dedup_fresh2.py's `real_code_pairs` unchanged: the same
  LeetCode problem in two scrapes (DeepCoder test / train vs the DeepSeek-Coder contest export; one with
  examples + constraints + a stub, the other with DeepCoder's wrapper + a stub), mined by 13-gram containment
  and labelled the same problem when the numbers of their statements agree.
- `real_leetcode_lookalike` (different problems): two different rows of the DeepCoder LeetCode train scrape
  whose statements share >= 50% of the smaller side's 13-grams ("II" versions, same-template problems, the
  same story with another question); pairs with equal statement tokens are left out (unlabelled).
Split: a pair is in the held-out half when sha256(first text) is odd (`half_of`), so the halves are fixed by the
text alone. The held-out half's digest is recorded in bench/dedup_code_heldout.sha256 (committed before any
code rule was written) and checked on every run; nothing here prints a held-out pair. Hand-written negatives
(II versions, same template, other signature) are in `handwritten_negatives` and belong to the tuning half.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dedup_fresh2 import real_code_pairs, statement  # noqa: E402
from labelled_sets import SHARED, LabelledPair, LabelledSet, _grams, _jsonl, read_hash, summary, tokens  # noqa: E402

log = logging.getLogger("dedup_code")
HERE = Path(__file__).resolve().parent
HASH_FILE = HERE / "dedup_code_heldout.sha256"
HALVES = ("tune", "held")


def half_of(text: str) -> str:
    """"held" when sha256 of the pair's first text is odd, else "tune"."""
    return HALVES[int(hashlib.sha256(text.encode("utf-8")).hexdigest(), 16) & 1]


def lookalike_pairs(shared: Path, min_containment: float = 0.5) -> list[tuple[str, str]]:
    """Different rows of the DeepCoder LeetCode train scrape with overlapping statements: each row with its best
    other row (13-gram containment of the smaller side >= `min_containment`), equal statements left out."""
    rows = sorted({r["problem"] for r in _jsonl(shared / "sft_sources" / "deepcoder_leetcode_train.jsonl.gz")
                   if r.get("problem")})
    toks = [tokens(statement(t)) for t in rows]
    grams = [_grams(t, 13) for t in toks]
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
    pairs = [LabelledPair(p.a, p.b, True, p.kind, half_of(p.a)) for p in real_code_pairs(shared)]
    pairs += [LabelledPair(a, b, False, "real_leetcode_lookalike", half_of(a)) for a, b in lookalike_pairs(shared)]
    return LabelledSet(sorted(set(pairs), key=lambda p: (p.a, p.b)), [])


def recorded_hash() -> str | None:
    return read_hash(HASH_FILE)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", default=str(SHARED))
    ap.add_argument("--write-hash", action="store_true", help="record the held-out half's hash (before any rule!)")
    ap.add_argument("--eval", action="store_true", help="measure DedupConfig on the tuning half + negatives")
    ap.add_argument("--final", action="store_true", help="the one measurement of the held-out half")
    ap.add_argument("--show", type=int, default=0, help="print N tuning pairs")
    ap.add_argument("--show-misses", action="store_true", help="with --eval: print wrongly decided tuning pairs")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a DedupConfig field")
    args = ap.parse_args()
    shared = Path(args.shared)
    if not shared.is_dir():
        log.info("shared data %s not found: nothing to build (skipped)", shared)
        return
    ls = build_code_set(shared)
    for part, kinds in sorted(summary(ls).items()):
        log.info("%s %s", part, dict(sorted(kinds.items())))
    held = ls.part("held")
    digest = held.digest()
    rec = recorded_hash()
    log.info("held-out half sha256 %s (%d pairs); recorded %s: %s", digest, len(held.pairs), rec,
             "MATCHES" if digest == rec else "DOES NOT MATCH")
    if args.write_hash:
        if rec is not None:
            raise SystemExit(f"{HASH_FILE.name} exists: the held-out half is recorded once")
        HASH_FILE.write_text(f"{digest}  held-out half of bench/dedup_code.py (sha256(first text) odd): "
                             f"{len(held.pairs)} pairs\n")
    tune = LabelledSet(ls.part("tune").pairs + handwritten_negatives(), [])
    for p in tune.pairs[: args.show]:
        print(f"--- {p.kind} dup={p.duplicate}\nA: {p.a[:1500]!r}\nB: {p.b[:1500]!r}")
    if args.eval or args.final:
        from dedup_fresh2_eval import evaluate

        overrides = dict(kv.split("=", 1) for kv in args.set)
        evaluate(tune, show_misses=args.show_misses, overrides=overrides)
        if args.final:
            if digest != rec:
                raise SystemExit("held-out half changed since its hash was recorded: not measuring it")
            evaluate(held, show_misses=False, overrides=overrides)


if __name__ == "__main__":
    main()
