"""The fresh held-out dedup sets (frozen sets `dedup_fresh` and `dedup_fresh2`, bench/frozen.py): base problems
no earlier labelled set uses, and word pools written for the round (bench/dedup/pools.py).

Why: the held-out part of the labelled set (bench/dedup/labelled.py) had its misses read while the first round
was fixed, and the fresh set while the second was; each later set is built from problems and pools the rules
were not tuned on.

`fresh` (`build_fresh_set`): GSM8K test, OlympiadBench, Minerva, AMC 2022-2023 / AMC 2023, AIME 2024-2026, HMMT
and the Marco-o1 demo questions, after dropping every problem that is a near-copy (13-gram containment >= 0.5
or equal tokens) of a problem the labelled set uses (MATH test / MATH-500, MATH train, AIME 1983-2023, GSM8K
train), with the `fresh` pools. Real pairs: the AMC 2023 file vs the AMC 2022-2023 file, and the prompts of the
contaminated eval-output sources (AIME 2024, AMC 2023, Minerva; different repos and formatting) vs the
benchmark files, mined by 13-gram containment; same answer and numbers = the same problem, a different answer
= a look-alike. Same-template look-alikes are mined among the fresh problems (different answers).

`fresh2` (`build_fresh2_set`), built independently of the rules:
- word pools written without reading the rules (`fresh2`, disjoint from every earlier pool: `check_disjoint`),
  and the second variant family (bench/dedup/variants.py `reworded_variants`: LaTeX spacing / $ reformatting,
  two synonyms, reworded negatives);
- math bases: problems of the real pools (MATH test, MATH train, AIME 1983-2023, GSM8K train / test,
  OlympiadBench, Minerva, AMC, AIME 2024-2026, HMMT) that appear in no pair of the other sets as they built
  on 2026-12-01 (labelled set at 150 and 60 per kind, fresh set at 120 and 48) and are no near-copy of a text
  they use. Which problems that excludes is frozen in bench/records/dedup_fresh2_exclude.txt (16-hex sha256
  digests of the builder's tokens, no text), so a later change to the other builders does not change this set;
- code bases (no other set uses code): LeetCode train (DeepCoder), the LeetCode contest / test sets,
  Codeforces and MBPP statements (the built-in wrapper and the code stub cut off);
- real pairs: LeetCode problems in two sources (DeepCoder test / train vs the DeepSeek-Coder contest export:
  different scrapes, wrappers and formatting), mined by 13-gram containment and labelled the same problem when
  their numbers agree too; same-template look-alikes mined among all math candidates, kept when one side is a
  fresh2 base (different answers); "letters of the word X" problems (any pool) with new words;
- multi-response groups: prompts of the baseline short-CoT eval outputs (several models answer one prompt).
Every number-editing kind uses math bases only. All rows of a set are in the part named after it.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import defaultdict
from pathlib import Path

from bench.dedup.labelled import (
    LETTERS_RE,
    NUMS_RE,
    LabelledPair,
    LabelledSet,
    ResponseGroup,
    answer_key,
    generated_pairs,
    letter_pairs,
    load_problems,
    mine_cross_source,
    mine_same_template,
    read_jsonl,
    tokens,
)
from bench.dedup.pools import LETTER_WORDS, check_disjoint
from bench.dedup.variants import make_variant, reworded_variants
from bench.paths import RECORDS

EXCLUDE_FILE = RECORDS / "dedup_fresh2_exclude.txt"


# --------------------------------------------------------------------------- fresh

BENCH_FILES = ("gsm8k_test", "olympiadbench", "minerva_math", "amc2022_2023", "aime2024", "aime2025", "aime2026",
               "hmmt_feb")
EVAL_SOURCES = ("skyt1_longcot_eval_traces", "baseline_shortcot_eval_outputs", "qwen25_32b_instruct_aime24")


def same_answer(a: object, b: object) -> bool:
    """Answers equal as answer keys, or as numbers ("27.0" = "27")."""
    if answer_key(a) == answer_key(b):
        return True
    try:
        return abs(float(str(a).strip()) - float(str(b).strip())) < 1e-9
    except ValueError:
        return False


def _label(a: dict, b: dict) -> bool | None:
    """As bench/dedup/labelled.py `cross_source_label`, with numeric answer equality."""
    same_numbers = sorted(NUMS_RE.findall(a["problem"])) == sorted(NUMS_RE.findall(b["problem"]))
    if same_answer(a["answer"], b["answer"]):
        return True if same_numbers else None
    return False if tokens(a["problem"]) != tokens(b["problem"]) else None


def _bench(shared: Path, name: str) -> list[dict]:
    return [{"problem": r["problem"], "answer": r.get("answer"), "origin": name}
            for r in read_jsonl(shared / "benchmarks" / f"{name}.jsonl") if r.get("problem") and r.get("answer")]


def fresh_problems(shared: Path) -> list[dict]:
    """Fresh base problems with answers, minus near-copies of anything the first set uses."""
    rows = [p for name in BENCH_FILES for p in _bench(shared, name)]
    rows += [{"problem": r["problem"], "answer": r.get("ground_truth") or r.get("final_answer") or "?",
              "origin": "marco_o1_cot_demo"} for r in read_jsonl(shared / "sft_sources" / "marco_o1_cot_demo.jsonl.gz")
             if r.get("problem")]
    old = load_problems(shared) + [{"problem": r["problem"]} for r in read_jsonl(shared / "benchmarks" / "math500.jsonl")]
    near = {id(a) for a, _ in mine_cross_source(rows, old)}
    seen: set[str] = set()
    out = []
    for p in rows:
        key = " ".join(tokens(p["problem"]))
        if id(p) not in near and key not in seen:
            seen.add(key)
            out.append(p)
    return out


def fresh_real_pairs(shared: Path, problems: list[dict], pool: str) -> list[LabelledPair]:
    """AMC 2023 vs AMC 2022-2023, eval-output prompts vs the fresh benchmark problems (mined, labelled by
    answer and numbers)."""
    out = []
    amc = _bench(shared, "amc2023")
    left: list[tuple[str, list[dict]]] = [("real_amc_vs_amc", amc)]
    for name in EVAL_SOURCES:
        rows, seen = [], set()
        for r in read_jsonl(shared / "sft_sources" / f"{name}.jsonl.gz"):
            if r.get("problem") and r["problem"] not in seen and r.get("ground_truth"):
                seen.add(r["problem"])
                rows.append({"problem": r["problem"], "answer": r["ground_truth"], "origin": name})
        left.append(("real_eval_prompt_vs_benchmark", rows))
    for kind, rows in left:
        for a, b in mine_cross_source(rows, problems):
            label = _label(a, b)
            if label is not None and a["problem"] != b["problem"]:
                out.append(LabelledPair(a["problem"], b["problem"], label,
                                        kind if label else "real_cross_source_different", pool))
    return out


def build_fresh_set(shared: str | Path, *, n_per_kind: int, seed: int, pool: str, positive: tuple[str, ...],
                    negative: tuple[str, ...]) -> LabelledSet:
    """Real pairs (capped at 4x `n_per_kind` per kind), mined look-alikes, and `n_per_kind` pairs of each
    generated kind (`positive` then `negative`, `make_variant` with the `pool` words; all rows in part `pool`);
    each base problem is used by one kind while there are enough."""
    shared = Path(shared)
    problems = fresh_problems(shared)
    real = fresh_real_pairs(shared, problems, pool) + [
        LabelledPair(p.a, p.b, p.duplicate, p.kind, pool) for p in mine_same_template(problems) + letter_pairs(problems)
        if p.kind in ("same_template_real", "letters_real")]
    for text in sorted({p["problem"] for p in problems if LETTERS_RE.search(p["problem"])}):
        real += [LabelledPair(text, LETTERS_RE.sub(lambda m, w=w: m.group(1) + w, text, count=1), False,
                              "letters_changed", pool) for w in LETTER_WORDS[pool]]
    rng = random.Random(seed)
    pairs: list[LabelledPair] = []
    for kind in sorted({p.kind for p in real}):
        mine = sorted((p for p in real if p.kind == kind), key=lambda p: (p.a, p.b))
        mine = [p for i, p in enumerate(mine) if i == 0 or (p.a, p.b) != (mine[i - 1].a, mine[i - 1].b)]
        pairs += rng.sample(mine, min(len(mine), 4 * n_per_kind))
    used = {x for p in pairs for x in (p.a, p.b)}
    base = sorted({p["problem"] for p in problems if 8 <= len(p["problem"].split()) <= 300 and p["problem"] not in used})
    rng.shuffle(base)
    pairs += generated_pairs(positive, negative, lambda kind: make_variant(kind, pool),
                             lambda _kind: base, n_per_kind, seed, pool)
    return LabelledSet(pairs, [])




# --------------------------------------------------------------------------- fresh2

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
            for r in read_jsonl(shared / "benchmarks" / name)
        ]
    for name in MATH_SFT:
        rows += [
            {"problem": r["problem"], "answer": r.get("ground_truth"), "origin": name}
            for r in read_jsonl(shared / "sft_sources" / f"{name}.jsonl.gz")
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
        for r in read_jsonl(shared / "sft_sources" / "deepcoder_leetcode_train.jsonl.gz")
    ]
    for name in ("leetcode_contest_2023h2", "leetcode_deepcoder_test", "codeforces_deepcoder_test", "mbpp"):
        rows += [
            {"problem": r["problem"], "origin": name} for r in read_jsonl(shared / "benchmarks" / f"{name}.jsonl")
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


def excluded_digests(shared: Path, used: set[str]) -> set[str]:
    """The math candidates the earlier sets use or near-copy (`used`: every text of their pairs and groups), as
    written to the exclusion file on 2026-12-01 (`python -m bench.frozen --check-exclusions` rebuilds it)."""
    cands = math_candidates(shared)
    used_keys = {digest16(t) for t in used}
    out = {digest16(c["problem"]) for c in cands if digest16(c["problem"]) in used_keys}
    out |= {digest16(a["problem"]) for a, _ in mine_cross_source(cands, [{"problem": t} for t in sorted(used)])}
    return out


def recorded_exclusions() -> set[str]:
    """The frozen exclusion digests (bench/records/dedup_fresh2_exclude.txt)."""
    if not EXCLUDE_FILE.exists():
        raise FileNotFoundError(f"{EXCLUDE_FILE} missing: it is part of the frozen fresh2 set (git checkout it)")
    return {ln.strip() for ln in EXCLUDE_FILE.read_text().splitlines() if ln and not ln.startswith("#")}


def math_bases(shared: Path) -> list[dict]:
    """Math candidates minus the frozen exclusions."""
    excluded = recorded_exclusions()
    return [c for c in math_candidates(shared) if digest16(c["problem"]) not in excluded]


# --------------------------------------------------------------------------- real pairs and groups


def real_code_pairs(shared: Path, part: str) -> list[LabelledPair]:
    """LeetCode problems in two scrapes (full prompts as stored): DeepCoder test / train vs the contest export.
    Mined by 13-gram containment; the same problem when the sorted numbers agree; otherwise left out (a
    different constraint = the "II" version of a problem, or superscripts lost by one scrape: not labelled)."""
    contest = [
        {"problem": r["problem"]} for r in read_jsonl(shared / "benchmarks" / "leetcode_contest_2023h2.jsonl")
    ]
    left = [
        {"problem": r["problem"]} for r in read_jsonl(shared / "benchmarks" / "leetcode_deepcoder_test.jsonl")
    ]
    left += [
        {"problem": r["problem"]}
        for r in read_jsonl(shared / "sft_sources" / "deepcoder_leetcode_train.jsonl.gz")
    ]
    out = []
    for a, b in mine_cross_source(left, contest):
        same_nums = sorted(NUMS_RE.findall(statement(a["problem"]))) == sorted(
            NUMS_RE.findall(statement(b["problem"]))
        )
        if same_nums and a["problem"] != b["problem"]:
            out.append(LabelledPair(a["problem"], b["problem"], True, "real_leetcode_two_scrapes", part))
    return out


def letters_pairs(shared: Path, pool: str) -> list[LabelledPair]:
    """Real "arrange the letters of the word X" problems (any pool) with X replaced by a word of `pool`."""
    texts = sorted({c["problem"] for c in math_candidates(shared) if LETTERS_RE.search(c["problem"])})
    return [
        LabelledPair(t, v, False, "letters_changed", pool)
        for t in texts
        for w in LETTER_WORDS[pool]
        if (v := LETTERS_RE.sub(lambda m, w=w: m.group(1) + w, t, count=1)) != t
    ]


def eval_output_groups(shared: Path, n: int, rng: random.Random, part: str) -> list[ResponseGroup]:
    """Prompts of the baseline short-CoT eval outputs answered by several models (distinct responses)."""
    by_prompt: dict[str, list[str]] = defaultdict(list)
    for r in read_jsonl(shared / "sft_sources" / "baseline_shortcot_eval_outputs.jsonl.gz"):
        if r.get("problem") and r.get("response") and r["response"] not in by_prompt[r["problem"]]:
            by_prompt[r["problem"]].append(r["response"])
    groups = [
        ResponseGroup(p, tuple(rs), "multi_response", part)
        for p, rs in sorted(by_prompt.items())
        if len(rs) >= 2
    ]
    return rng.sample(groups, min(n, len(groups)))


# --------------------------------------------------------------------------- the set


def build_fresh2_set(shared: str | Path, *, n_per_kind: int, seed: int, pool: str, positive: tuple[str, ...],
                     negative: tuple[str, ...], math_only: tuple[str, ...]) -> LabelledSet:
    """Real pairs (each kind capped at 2x `n_per_kind`), `n_per_kind` pairs of each generated kind (`positive`
    then `negative`, `reworded_variants` with the `pool` words; math and code bases interleaved 2:1, the kinds
    in `math_only` on math bases only; each base used once while bases last) and `n_per_kind` response groups.
    All rows in part `pool`."""
    check_disjoint(pool)
    shared = Path(shared)
    rng = random.Random(seed)
    maths = math_bases(shared)
    real = real_code_pairs(shared, pool) + letters_pairs(shared, pool)
    mine = {m["problem"] for m in maths}  # look-alikes with at least one side no other set uses
    real += [
        LabelledPair(p.a, p.b, False, "same_template_mined", pool)
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
    variants = reworded_variants(pool)
    pairs += generated_pairs(positive, negative, variants.__getitem__,
                             lambda kind: math_texts if kind in math_only else mixed, n_per_kind, seed, pool)
    return LabelledSet(pairs, eval_output_groups(shared, n_per_kind, rng, pool))
