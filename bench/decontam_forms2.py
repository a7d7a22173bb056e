"""Third labelled contamination set ("forms2"): a fresh held-out part for issue 18's second round.

The held-out halves of the first two sets (bench/labelled_contamination.py, bench/decontam_forms.py) had their
misses read while the rules were tuned, so they count as tuning data now. This set is held out as a whole
(every example has `split == "heldout"`); its SHA-256 is recorded in bench/decontam_heldout.json before any rule
is changed, and bench/decontam.py prints only its per-form counts, never its examples.

What is new against the earlier sets:
- **items**: benchmark items neither earlier set used (by id, and by normalised text: amc2023 sits inside
  amc2022_2023), plus two benchmarks they did not index at all (aime2026, amc2022_2023);
- **templates**: other chat templates (Gemma, Mistral, Zephyr, DeepSeek(-R1), Qwen-math, "### Human"), other
  lead-ins, other ways a response quotes the problem, other code-request templates ("Please write a Python
  function that ...", "Task: ...", "Could you code up something to ...?"), other renamed function names and
  stock one-liners;
- **pool rows** not used by either earlier set (negatives), and long responses of ~10k words with a quote in
  the middle (mid_response) besides the 1,700-3,000-word ones.
The forms themselves are those of bench/decontam_forms.py (its module docstring), with its faithful Unicode and
plain-text renderings.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from decontam_forms import (  # noqa: E402
    _REQUEST,
    _mbpp_all_spec,
    change_number,
    code_request,
    latex_variant,
    plain_text_math,
    renamed_humaneval,
    reordered,
    setup,
    unicode_math,
)
from labelled_contamination import LABEL_BENCHMARKS, LabelledExample, normalize  # noqa: E402

from cotforge.curate.core.benchmarks import BenchmarkItem, load_benchmarks  # noqa: E402

BENCHMARKS2 = (*LABEL_BENCHMARKS, "aime2026", "amc2022_2023")
FORMS3 = {"seed": 3031, "after": (2026,)}  # the third round's held-out set: items and pool rows of no earlier set
CHAT2 = (
    "<start_of_turn>user\n{p}<end_of_turn>\n<start_of_turn>model\n",
    "[INST] {p} [/INST]",
    "<|system|>\nYou are a friendly chatbot.</s>\n<|user|>\n{p}</s>\n<|assistant|>\n",
    "User: {p}\n\nAssistant:",
    "<｜begin▁of▁sentence｜><｜User｜>{p}<｜Assistant｜><think>\n",
    "### Human: {p}\n### Assistant:",
    "<|im_start|>user\n{p}\nPlease reason step by step, and put your final answer within \\boxed{{}}.<|im_end|>\n"
    "<|im_start|>assistant\n",
)
LEAD_INS2 = ("Can someone explain how to do this? {p}", "{p}\n\nI'm stuck, any hints?", "Problem:\n{p}\nAnswer:",
             "Here's one from my problem set. {p}")
QUOTES2 = ("Let me look at the question once more: {p} Right.",
           "To recap, the problem says:\n\n{p}\n\nGood, that matches what I had.",
           "Actually, I should double-check the statement. It reads \"{p}\" Yes, that is what I used.")
CODE_REQUESTS2 = ("Please write a Python function that {v3}.", "Write Python code that {v3}.",
                  "Develop a function in Python to {v}.", "Task: {v}.", "Could you code up something to {v}? Python please.",
                  "Define a function which {v3}.")
NEW_NAMES2 = ("compute", "g", "helper", "run_check", "task_fn")
STOCK2 = ("Find the area of the triangle.", "What is the probability?", "Prove the inequality.",
          "Write a function to sort a list.", "Find all real solutions.", "Compute the determinant.",
          "Write a python function to find the maximum of two numbers.", "How many ways are there?",
          "Find the greatest common divisor.")


def _content(statement: str) -> str:
    """An MBPP statement without its request ("Write a (python) function to"), normalised."""
    return normalize(_REQUEST.sub("", statement.strip()))


def used_before(shared: Path, after: tuple[int, ...] = ()) -> tuple[set[str], set[str], set[str]]:
    """(item keys "bench/id" and pool-row keys, normalised item texts, normalised pool prompts) the two earlier
    sets use, and the forms2-style sets built with the seeds in `after`."""
    from decontam_forms import assign_splits, build_forms_set
    from labelled_contamination import build_labelled_set

    bm1, first = build_labelled_set(shared)
    bm2, forms = build_forms_set(shared)
    earlier = [build_forms2_set(shared, seed=s, after=after[:i]) for i, s in enumerate(after)]
    text_of = {f"{n}/{it.id}": normalize(it.problem) for bm in (bm1, bm2, *(b for b, _ in earlier))
               for n, v in bm.items() for it in v}
    rows = assign_splits(first) + forms + [e for _, ex in earlier for e in ex]
    keys = {f"{e.benchmark}/{e.item_id}" for e in rows if e.item_id}
    pool_prompts = {normalize(e.text) for e in first if e.kind.startswith("pool:")}
    pool_keys = {e.key for e in rows if not e.item_id and hasattr(e, "key")}  # type: ignore[attr-defined]
    return keys | pool_keys, {text_of[k] for k in keys if k in text_of}, pool_prompts


def build_forms2_set(shared_data: str | Path, *, per_benchmark: int = 40, per_pool: int = 150, seed: int = 2026,
                     after: tuple[int, ...] = ()) -> tuple[dict[str, list[BenchmarkItem]], list[LabelledExample]]:
    """(benchmarks to index, labelled examples, all `split == "heldout"`); deterministic for a given seed.
    `after`: seeds of earlier sets built by this function whose items and pool rows are left out too (forms3:
    `after=(2026,)`). Negatives are checked by the builder's own `CopyChecker` (a "stock" line that is an MBPP
    item, a number change that leaves another benchmark item whole, an MBPP statement of another split that is
    a test statement behind another request, are not negatives)."""
    shared = Path(shared_data)
    used_keys, used_texts, used_prompts = used_before(shared, after)
    rng = random.Random(seed)
    benchmarks, is_copy, pools, filler = setup(shared, BENCHMARKS2, rng)
    out: list[LabelledExample] = []

    def add(text: str | None, label: int, kind: str, side: str = "prompt", bench: str = "", item: str = "",
            key: str = "") -> None:
        if text:
            ex = LabelledExample(text, label, kind, side, bench, item)
            ex.split = "heldout"  # type: ignore[attr-defined]
            ex.key = key or f"{bench}/{item}"  # type: ignore[attr-defined]
            out.append(ex)

    fresh = {name: [it for it in items if f"{name}/{it.id}" not in used_keys and normalize(it.problem) not in used_texts]
             for name, items in benchmarks.items()}
    seen: set[str] = set()
    for name, items in fresh.items():
        k = 2 * per_benchmark if name in ("mbpp", "humaneval") else per_benchmark
        for it in rng.sample(items, min(k, len(items))):
            p = it.problem.strip()
            if normalize(p) in seen:  # amc2023 items are amc2022_2023 items too
                continue
            seen.add(normalize(p))

            def pos(text: str | None, kind: str, side: str = "prompt", _n: str = name, _i: str = it.id) -> None:
                add(text, 1, kind, side, _n, _i)

            if name == "mbpp":
                pos(code_request(p, rng, CODE_REQUESTS2, CHAT2), "short_code")
            elif name == "humaneval":
                pos(renamed_humaneval(it, rng, NEW_NAMES2, CHAT2), "short_code")
            else:
                pos(unicode_math(p), "unicode_math")
                pos(plain_text_math(p), "plain_text_math")
                pos(latex_variant(p, rng), "latex_variant")
                pos(reordered(p, rng), "reordered")
                changed = change_number(p, rng)
                if changed and not is_copy(normalize(changed)):
                    render = rng.choice([unicode_math, plain_text_math, lambda t: rng.choice(CHAT2).format(p=t)])
                    add(render(changed), 0, "number_changed")
            pos(rng.choice(CHAT2).format(p=p), "chat_template")
            lo, hi = (4000, 5000) if rng.random() < 1 / 3 else (800, 1500)
            pos(filler.words(lo, hi) + "\n\n" + rng.choice(QUOTES2).format(p=p) + "\n\n" + filler.words(lo, hi),
                "mid_response", side="response")
            if len(normalize(p).split()) >= 30:
                words = p.split(" ")
                pos(" ".join(words[int(len(words) * 0.4):]), "suffix_copy")
    short = [(name, it) for name, items in fresh.items() for it in items if len(normalize(it.problem).split()) <= 12]
    for name, it in rng.sample(short, min(3 * per_benchmark, len(short))):
        lead = rng.choice(CHAT2) if rng.random() < 0.5 else rng.choice(LEAD_INS2)
        add(lead.format(p=unicode_math(it.problem) if rng.random() < 0.3 else it.problem.strip()), 1, "one_line",
            "prompt", name, it.id)

    test_mbpp = {normalize(it.problem) for it in benchmarks["mbpp"]}
    test_content = {_content(it.problem) for it in benchmarks["mbpp"]}
    other = [r for r in load_benchmarks(["mbpp_all"], shared / "benchmarks", {"mbpp_all": _mbpp_all_spec()})["mbpp_all"]
             if r.meta.get("split") != "test" and normalize(r.problem) not in test_mbpp
             and f"mbpp_other/{r.id}" not in used_keys and not is_copy(normalize(r.problem))
             and _content(r.problem) not in test_content]
    for r in rng.sample(other, min(per_pool, len(other))):
        add(code_request(r.problem, rng, CODE_REQUESTS2, CHAT2), 0, "mbpp_other_split", key=f"mbpp_other/{r.id}")
    for pool, rows in pools.items():
        rows = [r for r in rows if f"{pool}/{r['id']}" not in used_keys and normalize(r["prompt"]) not in used_prompts
                and not is_copy(normalize(r["prompt"]))]
        for r in rng.sample(rows, min(per_pool, len(rows))):
            k = f"{pool}/{r['id']}"
            add(unicode_math(r["prompt"]) if rng.random() < 0.5 else plain_text_math(r["prompt"]), 0, "pool_unicode", key=k)
            add(rng.choice(CHAT2).format(p=r["prompt"]), 0, "pool_chat", key=k)
    for line in [x for x in STOCK2 if not is_copy(normalize(x))] * 4:  # "... maximum of two numbers." is MBPP's
        add(rng.choice(CHAT2).format(p=line), 0, "stock_one_line", key="stock")
    for _ in range(per_pool):
        add(filler.words(1700, 3000), 0, "clean_longcot", side="response")
    for _ in range(per_pool // 3):
        add(filler.words(9000, 11000), 0, "clean_longcot_10k", side="response")
    return benchmarks, out


def main() -> None:
    from decontam_corpora import SHARED
    from decontam_forms import heldout_digest

    for name, kw in (("forms2", {}), ("forms3", FORMS3)):
        _, ex = build_forms2_set(SHARED, **kw)
        by: dict[tuple[str, int], int] = {}
        for e in ex:
            by[(e.kind, e.label)] = by.get((e.kind, e.label), 0) + 1
        print(name, sorted(by.items()))
        print(f"{name} heldout sha256:", heldout_digest(ex), "examples:", len(ex))


if __name__ == "__main__":
    main()
