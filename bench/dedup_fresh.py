"""A fresh held-out dedup set: base problems in neither part of bench/labelled_sets.py, fresh word pools.

    python bench/dedup_fresh.py [--write-hash]    # build, print counts per kind and the hash

Why: the held-out part of bench/labelled_sets.py has been looked at (its misses were read while fixing the
first round), so it no longer measures rules that were not tuned on it. This set is built the same way from
other real problems — GSM8K test, OlympiadBench, Minerva, AMC 2022-2023 / AMC 2023, AIME 2024-2026, HMMT and
the Marco-o1 demo questions — after dropping every problem that is a near-copy (13-gram containment >= 0.5 or
equal tokens) of a problem the other set uses (MATH test / MATH-500, MATH train, AIME 1983-2023, GSM8K train),
with the "fresh" word pools of bench/dedup_pools.py (disjoint source words, new wrappers, swaps, names).
Every row is in part "fresh". Its hash is recorded in bench/dedup_fresh.sha256 before the second round of
tuning; bench/dedup.py checks it.

Real pairs: the AMC 2023 file vs the AMC 2022-2023 file, and the prompts of the contaminated eval-output
sources (AIME 2024, AMC 2023, Minerva; different repos and formatting) vs the benchmark files, mined by 13-gram
containment; same answer and numbers = the same problem, a different answer = a look-alike. Same-template
look-alikes are mined among the fresh problems (different answers).
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dedup_pools import LETTER_WORDS  # noqa: E402
from dedup_variants import make_variant  # noqa: E402
from labelled_sets import (  # noqa: E402
    _LETTERS,
    _NUMS,
    NEGATIVE_GENERATED,
    POSITIVE_GENERATED,
    SHARED,
    LabelledPair,
    LabelledSet,
    _jsonl,
    answer_key,
    generated_pairs,
    letter_pairs,
    load_problems,
    mine_cross_source,
    mine_same_template,
    read_hash,
    summary,
    tokens,
)

PART = "fresh"
HASH_FILE = Path(__file__).resolve().parent / "dedup_fresh.sha256"
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
    """As labelled_sets.cross_source_label, with numeric answer equality."""
    same_numbers = sorted(_NUMS.findall(a["problem"])) == sorted(_NUMS.findall(b["problem"]))
    if same_answer(a["answer"], b["answer"]):
        return True if same_numbers else None
    return False if tokens(a["problem"]) != tokens(b["problem"]) else None


def _bench(shared: Path, name: str) -> list[dict]:
    return [{"problem": r["problem"], "answer": r.get("answer"), "origin": name}
            for r in _jsonl(shared / "benchmarks" / f"{name}.jsonl") if r.get("problem") and r.get("answer")]


def fresh_problems(shared: Path) -> list[dict]:
    """Fresh base problems with answers, minus near-copies of anything the first set uses."""
    rows = [p for name in BENCH_FILES for p in _bench(shared, name)]
    rows += [{"problem": r["problem"], "answer": r.get("ground_truth") or r.get("final_answer") or "?",
              "origin": "marco_o1_cot_demo"} for r in _jsonl(shared / "sft_sources" / "marco_o1_cot_demo.jsonl.gz")
             if r.get("problem")]
    old = load_problems(shared) + [{"problem": r["problem"]} for r in _jsonl(shared / "benchmarks" / "math500.jsonl")]
    near = {id(a) for a, _ in mine_cross_source(rows, old)}
    seen: set[str] = set()
    out = []
    for p in rows:
        key = " ".join(tokens(p["problem"]))
        if id(p) not in near and key not in seen:
            seen.add(key)
            out.append(p)
    return out


def fresh_real_pairs(shared: Path, problems: list[dict]) -> list[LabelledPair]:
    """AMC 2023 vs AMC 2022-2023, eval-output prompts vs the fresh benchmark problems (mined, labelled by
    answer and numbers)."""
    out = []
    amc = _bench(shared, "amc2023")
    left: list[tuple[str, list[dict]]] = [("real_amc_vs_amc", amc)]
    for name in EVAL_SOURCES:
        rows, seen = [], set()
        for r in _jsonl(shared / "sft_sources" / f"{name}.jsonl.gz"):
            if r.get("problem") and r["problem"] not in seen and r.get("ground_truth"):
                seen.add(r["problem"])
                rows.append({"problem": r["problem"], "answer": r["ground_truth"], "origin": name})
        left.append(("real_eval_prompt_vs_benchmark", rows))
    for kind, rows in left:
        for a, b in mine_cross_source(rows, problems):
            label = _label(a, b)
            if label is not None and a["problem"] != b["problem"]:
                out.append(LabelledPair(a["problem"], b["problem"], label,
                                        kind if label else "real_cross_source_different", PART))
    return out


def build_fresh_set(shared: str | Path, n_per_kind: int = 120, seed: int = 0) -> LabelledSet:
    """Real pairs (capped at 4x `n_per_kind` per kind), mined look-alikes, and `n_per_kind` pairs of each
    generated kind made with the fresh pools; each base problem is used by one kind while there are enough."""
    shared = Path(shared)
    problems = fresh_problems(shared)
    real = fresh_real_pairs(shared, problems) + [
        LabelledPair(p.a, p.b, p.duplicate, p.kind, PART) for p in mine_same_template(problems) + letter_pairs(problems)
        if p.kind in ("same_template_real", "letters_real")]
    for text in sorted({p["problem"] for p in problems if _LETTERS.search(p["problem"])}):
        real += [LabelledPair(text, _LETTERS.sub(lambda m, w=w: m.group(1) + w, text, count=1), False,
                              "letters_changed", PART) for w in LETTER_WORDS[PART]]
    rng = random.Random(seed)
    pairs: list[LabelledPair] = []
    for kind in sorted({p.kind for p in real}):
        mine = sorted((p for p in real if p.kind == kind), key=lambda p: (p.a, p.b))
        mine = [p for i, p in enumerate(mine) if i == 0 or (p.a, p.b) != (mine[i - 1].a, mine[i - 1].b)]
        pairs += rng.sample(mine, min(len(mine), 4 * n_per_kind))
    used = {x for p in pairs for x in (p.a, p.b)}
    base = sorted({p["problem"] for p in problems if 8 <= len(p["problem"].split()) <= 300 and p["problem"] not in used})
    rng.shuffle(base)
    pairs += generated_pairs(POSITIVE_GENERATED, NEGATIVE_GENERATED, lambda kind: make_variant(kind, PART),
                             lambda _kind: base, n_per_kind, seed, PART)
    return LabelledSet(pairs, [])


def recorded_hash() -> str | None:
    """The fresh set's hash recorded in bench/dedup_fresh.sha256 (None if missing)."""
    return read_hash(HASH_FILE)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", default=str(SHARED))
    ap.add_argument("--write-hash", action="store_true", help="record the fresh set's hash (before tuning!)")
    args = ap.parse_args()
    ls = build_fresh_set(args.shared)
    for part, kinds in summary(ls).items():
        print(part, kinds)
    digest = ls.digest()
    print(f"fresh sha256 {digest} ({len(ls.pairs)} pairs); recorded {recorded_hash()}")
    if args.write_hash:
        HASH_FILE.write_text(f"{digest}  fresh held-out set of bench/dedup_fresh.py (build_fresh_set defaults): "
                             f"{len(ls.pairs)} pairs\n")


if __name__ == "__main__":
    main()
