"""A second fresh held-out dedup set ("fresh2"): base problems no other labelled set uses, new word pools.

    python bench/dedup_fresh2.py                    # build, print counts per kind, check the recorded hash
    python bench/dedup_fresh2.py --eval             # ... and measure cotforge's dedup pair decision on it
    python bench/dedup_fresh2.py --write-exclusions # (once) freeze which real problems the other sets use
    python bench/dedup_fresh2.py --write-hash       # (once, before anyone evaluates) record the hash

Why: bench/labelled_sets.py (tune / held) and bench/dedup_fresh.py (fresh) have been looked at while the
dedup rules were tuned, so they cannot measure the tuned rules. This set is built independently:
- word pools written without reading the rules (bench/dedup_pools2.py; disjoint from bench/dedup_pools.py,
  checked by `check_disjoint`), new variant kinds (LaTeX spacing / $ reformatting, two synonyms, reworded
  negatives) in bench/dedup_variants2.py;
- math bases: problems of the real pools (MATH test, MATH train, AIME 1983-2023, GSM8K train / test,
  OlympiadBench, Minerva, AMC, AIME 2024-2026, HMMT) that appear in no pair of the other sets as they build
  today (labelled set at 150 and 60 per kind, fresh set at 120 and 48) and are no near-copy (13-gram
  containment >= 0.5, or equal tokens) of a text they use. Which problems that excludes is frozen in
  bench/dedup_fresh2_exclude.txt (16-hex sha256 digests of the builder's tokens, no text), so a later change
  to the other builders does not change this set;
- code bases (no other set uses code): LeetCode train (DeepCoder), the LeetCode contest / test sets,
  Codeforces and MBPP statements (the built-in wrapper and the code stub cut off);
- real pairs: LeetCode problems in two sources (DeepCoder test / train vs the DeepSeek-Coder contest export:
  different scrapes, wrappers and formatting), mined by 13-gram containment and labelled the same problem when
  their numbers agree too (a sample checked by hand: `--show-real`); same-template look-alikes mined among all
  math candidates, kept when one side is a fresh2 base (different answers); "letters of the word X" problems
  (any pool) with new words;
- multi-response groups: prompts of the baseline short-CoT eval outputs (several models answer one prompt).
Every number-editing kind uses math bases only. All rows are in part "fresh2". The hash is recorded in
bench/dedup_fresh2.sha256 and checked on every run.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import random
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dedup_pools2 import LETTER_WORDS2, check_disjoint  # noqa: E402
from dedup_variants2 import MATH_ONLY, NEGATIVE_KINDS2, POSITIVE_KINDS2, VARIANTS2  # noqa: E402
from labelled_sets import (  # noqa: E402
    _LETTERS,
    _NUMS,
    SHARED,
    LabelledPair,
    LabelledSet,
    ResponseGroup,
    _jsonl,
    generated_pairs,
    mine_cross_source,
    mine_same_template,
    read_hash,
    summary,
    tokens,
)

log = logging.getLogger("dedup_fresh2")
PART = "fresh2"
HERE = Path(__file__).resolve().parent
HASH_FILE = HERE / "dedup_fresh2.sha256"
EXCLUDE_FILE = HERE / "dedup_fresh2_exclude.txt"
MATH_BENCH = (
    "math_test5000.jsonl.gz",
    "gsm8k_test.jsonl",
    "olympiadbench.jsonl",
    "minerva_math.jsonl",
    "amc2022_2023.jsonl",
    "amc2023.jsonl",
    "aime2024.jsonl",
    "aime2025.jsonl",
    "aime2026.jsonl",
    "hmmt_feb.jsonl",
)
MATH_SFT = ("deepscaler_math_train", "deepscaler_aime_1983_2023", "gsm8k_train_human")
CODE_WRAPPER = (
    "Please solve the programming task below using a self-contained code snippet in a markdown code block."
)
_CODE_TAIL = re.compile(
    r"\n\s*(Please complete the following python code precisely:|Input Format:|Example 1:)"
)


def digest16(text: str) -> str:
    """A problem's key in the exclusion file: sha256 of the builder's tokens, 16 hex digits."""
    return hashlib.sha256(" ".join(tokens(text)).encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- bases


def math_candidates(shared: Path) -> list[dict]:
    """Every real math problem with an answer in the pools (deduplicated by tokens, file order)."""
    rows = []
    for name in MATH_BENCH:
        rows += [
            {"problem": r["problem"], "answer": r.get("answer"), "origin": name}
            for r in _jsonl(shared / "benchmarks" / name)
        ]
    for name in MATH_SFT:
        rows += [
            {"problem": r["problem"], "answer": r.get("ground_truth"), "origin": name}
            for r in _jsonl(shared / "sft_sources" / f"{name}.jsonl.gz")
        ]
    seen: set[str] = set()
    out = []
    for r in rows:
        key = " ".join(tokens(r["problem"] or ""))
        if r["problem"] and r["answer"] and key not in seen:
            seen.add(key)
            out.append(r)
    return out


def statement(problem: str) -> str:
    """A code problem's statement: the built-in wrapper, the code stub, examples and I/O format cut off."""
    text = problem.replace(CODE_WRAPPER, "").replace("\xa0", " ").strip()
    m = _CODE_TAIL.search(text)
    return (text[: m.start()] if m else text).strip()


def code_bases(shared: Path) -> list[dict]:
    """Statements of the LeetCode (train, contest, test), Codeforces and MBPP problems, deduplicated."""
    rows = [
        {"problem": r["problem"], "origin": "deepcoder_leetcode_train"}
        for r in _jsonl(shared / "sft_sources" / "deepcoder_leetcode_train.jsonl.gz")
    ]
    for name in ("leetcode_contest_2023h2", "leetcode_deepcoder_test", "codeforces_deepcoder_test", "mbpp"):
        rows += [
            {"problem": r["problem"], "origin": name} for r in _jsonl(shared / "benchmarks" / f"{name}.jsonl")
        ]
    out = [
        {"problem": statement(r["problem"]), "answer": None, "origin": r["origin"]}
        for r in rows
        if r["problem"]
    ]
    seen: set[str] = set()
    keep = []
    for r in out:
        key = " ".join(tokens(r["problem"]))
        if key not in seen:
            seen.add(key)
            keep.append(r)
    return keep


def write_exclusions(shared: Path) -> int:
    """Freeze the math candidates the other sets use (or near-copy): runs their builders as they are now."""
    from dedup_fresh import build_fresh_set
    from labelled_sets import build_labelled_set

    used: set[str] = set()
    for n in (150, 60):
        ls = build_labelled_set(shared, n_per_kind=n)
        used |= {x for p in ls.pairs for x in (p.a, p.b)} | {g.prompt for g in ls.groups}
    for n in (120, 48):
        used |= {x for p in build_fresh_set(shared, n_per_kind=n).pairs for x in (p.a, p.b)}
    cands = math_candidates(shared)
    used_keys = {digest16(t) for t in used}
    out = {digest16(c["problem"]) for c in cands if digest16(c["problem"]) in used_keys}
    out |= {
        digest16(a["problem"]) for a, _ in mine_cross_source(cands, [{"problem": t} for t in sorted(used)])
    }
    EXCLUDE_FILE.write_text(
        "# math problems used (or near-copied) by bench/labelled_sets.py and bench/dedup_fresh.py"
        " at 2026-12-01; sha256[:16] of bench tokens\n" + "\n".join(sorted(out)) + "\n"
    )
    return len(out)


def math_bases(shared: Path) -> list[dict]:
    """Math candidates minus the frozen exclusions."""
    if not EXCLUDE_FILE.exists():
        raise FileNotFoundError(f"{EXCLUDE_FILE} missing: run with --write-exclusions first")
    excluded = {ln.strip() for ln in EXCLUDE_FILE.read_text().splitlines() if ln and not ln.startswith("#")}
    return [c for c in math_candidates(shared) if digest16(c["problem"]) not in excluded]


# --------------------------------------------------------------------------- real pairs and groups


def real_code_pairs(shared: Path) -> list[LabelledPair]:
    """LeetCode problems in two scrapes (full prompts as stored): DeepCoder test / train vs the contest export.
    Mined by 13-gram containment; the same problem when the sorted numbers agree; otherwise left out (a
    different constraint = the "II" version of a problem, or superscripts lost by one scrape: not labelled)."""
    contest = [
        {"problem": r["problem"]} for r in _jsonl(shared / "benchmarks" / "leetcode_contest_2023h2.jsonl")
    ]
    left = [
        {"problem": r["problem"]} for r in _jsonl(shared / "benchmarks" / "leetcode_deepcoder_test.jsonl")
    ]
    left += [
        {"problem": r["problem"]}
        for r in _jsonl(shared / "sft_sources" / "deepcoder_leetcode_train.jsonl.gz")
    ]
    out = []
    for a, b in mine_cross_source(left, contest):
        same_nums = sorted(_NUMS.findall(statement(a["problem"]))) == sorted(
            _NUMS.findall(statement(b["problem"]))
        )
        if same_nums and a["problem"] != b["problem"]:
            out.append(LabelledPair(a["problem"], b["problem"], True, "real_leetcode_two_scrapes", PART))
    return out


def letters_pairs(shared: Path) -> list[LabelledPair]:
    """Real "arrange the letters of the word X" problems (any pool) with X replaced by a new word."""
    texts = sorted({c["problem"] for c in math_candidates(shared) if _LETTERS.search(c["problem"])})
    return [
        LabelledPair(t, v, False, "letters_changed", PART)
        for t in texts
        for w in LETTER_WORDS2
        if (v := _LETTERS.sub(lambda m, w=w: m.group(1) + w, t, count=1)) != t
    ]


def response_groups(shared: Path, n: int, rng: random.Random) -> list[ResponseGroup]:
    """Prompts of the baseline short-CoT eval outputs answered by several models (distinct responses)."""
    by_prompt: dict[str, list[str]] = defaultdict(list)
    for r in _jsonl(shared / "sft_sources" / "baseline_shortcot_eval_outputs.jsonl.gz"):
        if r.get("problem") and r.get("response") and r["response"] not in by_prompt[r["problem"]]:
            by_prompt[r["problem"]].append(r["response"])
    groups = [
        ResponseGroup(p, tuple(rs), "multi_response", PART)
        for p, rs in sorted(by_prompt.items())
        if len(rs) >= 2
    ]
    return rng.sample(groups, min(n, len(groups)))


# --------------------------------------------------------------------------- the set


def build_fresh2_set(shared: str | Path, n_per_kind: int = 120, seed: int = 2) -> LabelledSet:
    """Real pairs (each kind capped at 2x `n_per_kind`), `n_per_kind` pairs of each generated kind (math and
    code bases interleaved 2:1 for the kinds that may use code; each base used once while bases last) and
    `n_per_kind` response groups."""
    check_disjoint()
    shared = Path(shared)
    rng = random.Random(seed)
    maths = math_bases(shared)
    real = real_code_pairs(shared) + letters_pairs(shared)
    mine = {m["problem"] for m in maths}  # look-alikes with at least one side no other set uses
    real += [
        LabelledPair(p.a, p.b, False, "same_template_mined", PART)
        for p in mine_same_template(math_candidates(shared))
        if p.a in mine or p.b in mine
    ]
    pairs: list[LabelledPair] = []
    for kind in sorted({p.kind for p in real}):
        mine = sorted({(p.a, p.b): p for p in real if p.kind == kind}.values(), key=lambda p: (p.a, p.b))
        pairs += rng.sample(mine, min(len(mine), 2 * n_per_kind))
    used = {x for p in pairs for x in (p.a, p.b)}
    math_texts = sorted({m["problem"] for m in maths if 8 <= len(m["problem"].split()) <= 300} - used)
    code_texts = sorted(
        {c["problem"] for c in code_bases(shared) if 8 <= len(c["problem"].split()) <= 400} - used
    )
    rng.shuffle(math_texts)
    rng.shuffle(code_texts)
    mixed = [
        t
        for i in range(max(len(math_texts), len(code_texts)))
        for t in (math_texts[2 * i : 2 * i + 2] + code_texts[i : i + 1])
    ]
    pairs += generated_pairs(POSITIVE_KINDS2, NEGATIVE_KINDS2, VARIANTS2.__getitem__,
                             lambda kind: math_texts if kind in MATH_ONLY else mixed, n_per_kind, seed, PART)
    return LabelledSet(pairs, response_groups(shared, n_per_kind, rng))


def recorded_hash() -> str | None:
    """The hash recorded in bench/dedup_fresh2.sha256 (None if missing)."""
    return read_hash(HASH_FILE)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", default=str(SHARED))
    ap.add_argument("--write-exclusions", action="store_true", help="freeze the problems the other sets use")
    ap.add_argument(
        "--write-hash", action="store_true", help="record this set's hash (before evaluating rules!)"
    )
    ap.add_argument("--eval", action="store_true", help="measure cotforge's dedup decision on the set")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="with --eval: a DedupConfig field (string-valued), e.g. word_relations=synonyms")
    ap.add_argument("--show-misses", action="store_true", help="with --eval: print the wrongly decided pairs")
    ap.add_argument("--show-real", type=int, default=0, help="print N sampled real pairs (hand check)")
    args = ap.parse_args()
    shared = Path(args.shared)
    if not shared.is_dir():
        log.info("shared data %s not found: nothing to build (skipped)", shared)
        return
    if args.write_exclusions:
        log.info("froze %d excluded math problems in %s", write_exclusions(shared), EXCLUDE_FILE.name)
    ls = build_fresh2_set(shared)
    for part, kinds in summary(ls).items():
        log.info("%s %s", part, dict(sorted(kinds.items())))
    digest = ls.digest()
    rec = recorded_hash()
    log.info(
        "fresh2 sha256 %s (%d pairs, %d groups); recorded %s: %s",
        digest,
        len(ls.pairs),
        len(ls.groups),
        rec,
        "MATCHES" if digest == rec else "DOES NOT MATCH",
    )
    if args.write_hash:
        HASH_FILE.write_text(
            f"{digest}  fresh2 held-out set of bench/dedup_fresh2.py (build_fresh2_set defaults): "
            f"{len(ls.pairs)} pairs, {len(ls.groups)} response groups\n"
        )
    for p in random.Random(0).sample(
        [p for p in ls.pairs if p.kind.startswith("real_")],
        min(args.show_real, sum(p.kind.startswith("real_") for p in ls.pairs)),
    ):
        print(f"--- {p.kind} {p.duplicate}\nA: {p.a[:600]!r}\nB: {p.b[:600]!r}")
    if args.eval:
        from dedup_fresh2_eval import evaluate

        evaluate(ls, show_misses=args.show_misses, overrides=dict(kv.split("=", 1) for kv in args.set))


if __name__ == "__main__":
    main()
