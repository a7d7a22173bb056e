"""The labelled contamination sets of the forms real scraped and generated data take (frozen sets
`decontam_forms`, `decontam_forms2`, `decontam_forms3`; and `decontam_first` through `build_first_set`).

Positives (label 1) are copies of benchmark items (the round's benchmarks; bench/decontam/labelled.py):
- `unicode_math`: LaTeX rendered to Unicode by the `unicodeit` package (x², √, ≤, ×, π, ₁), fractions written
  a/b, `$` delimiters dropped;
- `plain_text_math`: LaTeX rendered to text by `pylatexenc`'s latex2text (√(3), 3/4, ·, dropped `$`);
- `latex_variant`: \\dfrac/\\tfrac, \\left/\\right, spacing commands, \\( \\) and \\[ \\] delimiters, \\leqslant, braces;
- `reordered`: the item's sentences in another order;
- `chat_template`: the item inside a chat template (ChatML, Llama 2/3, Alpaca, Vicuna, Phi);
- `mid_response`: the item quoted half-way through a long response (1,700-3,000 words of clean real responses);
- `suffix_copy`: the last 60% of a long item;
- `short_code`: an MBPP statement behind another request template ("Implement a Python function which ..."),
  often inside a chat template; HumanEval with the function renamed everywhere and a re-indented docstring;
- `one_line`: items of at most 12 words inside a chat template or behind a lead-in.
Negatives (label 0): MBPP statements of the other splits in the same templates (`mbpp_other_split`), items with
one number changed (`number_changed`, rendered like the positives), clean pool prompts rendered to Unicode or put
in chat templates (`pool_unicode`, `pool_chat`), stock one-liners in chat templates (`stock_one_line`), and clean
long-CoT responses of 1,700-3,000 words and of ~10k words (`clean_longcot`, `clean_longcot_10k`), built from
pools `CopyChecker` finds clean.

Every example carries `split`: items (and pool rows) are assigned to `tuning` or `heldout` by a hash of their
id, so no held-out item is ever seen while tuning. `heldout_digest` is the SHA-256 recorded in
bench/records/decontam_heldout.json before any tuning (`python -m bench.frozen --check` checks it).

Rounds are data (`ROUNDS`: benchmarks, chat templates, lead-ins, quotes, code requests, function names, stock
lines). Round 1 (`build_forms_set`) splits items and pool rows into tuning / held-out halves. Later rounds
(`build_heldout_forms_set`, the forms2 and forms3 sets) are held out as a whole, after their misses in the earlier
sets were read: they leave out every item and pool row an earlier set used (by id, and by normalised text:
amc2023 sits inside amc2022_2023), index two benchmarks round 1 did not (aime2026, amc2022_2023), use round 2's
templates, and mix long responses of ~10k words with a quote in the middle (mid_response) into the
1,700-3,000-word ones. The renderings are those of bench/decontam/render.py.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, replace
from pathlib import Path

from bench.decontam.labelled import (
    LABEL_BENCHMARKS,
    NEGATIVE_POOLS,
    CopyChecker,
    LabelledExample,
    build_labelled_set,
    normalize,
)
from bench.decontam.render import (
    REQUEST_RE,
    change_number,
    code_request,
    latex_variant,
    plain_text_math,
    renamed_humaneval,
    reordered,
    unicode_math,
)
from cotforge.curate.core.benchmarks import REGISTRY, BenchmarkItem, load_benchmarks
from cotforge.curate.io.inputs import iter_input_rows
from cotforge.curate.io.readers import InputSpec


@dataclass(frozen=True)
class FormsRound:
    """What a round's set is made of besides its seed and sizes: the benchmarks it indexes and the templates its
    positives and negatives are written in."""

    benchmarks: tuple[str, ...]
    chats: tuple[str, ...]
    lead_ins: tuple[str, ...]
    quotes: tuple[str, ...]
    code_requests: tuple[str, ...]
    names: tuple[str, ...]
    stock: tuple[str, ...]


ROUNDS: dict[str, FormsRound] = {
    "round1": FormsRound(
        benchmarks=LABEL_BENCHMARKS,
        chats=(
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n{p}<|im_end|>\n<|im_start|>assistant\n",
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n{p}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
            "<s>[INST] <<SYS>>\nYou are a careful math and coding assistant.\n<</SYS>>\n\n{p} [/INST]",
            "Below is an instruction that describes a task. Write a response that appropriately completes the request.\n\n"
            "### Instruction:\n{p}\n\n### Response:\n",
            "A chat between a curious user and an artificial intelligence assistant. USER: {p} ASSISTANT:",
            "<|user|>\n{p}<|end|>\n<|assistant|>\n",
        ),
        lead_ins=("Quick question: {p}", "Help me with this one. {p}", "{p} Thanks in advance!", "Homework:\n{p}"),
        quotes=("Wait, let me re-read the problem statement: \"{p}\" Okay.", "Let me restate the original question. {p}",
            "Hmm, going back to what was asked:\n\n{p}\n\nSo I need to be careful here."),
        code_requests=("Implement a Python function which {v3}.", "Create a Python function that {v3}.",
            "Can you write Python code to {v}?", "I need a function to {v}. Please write it in Python.",
            "Your task: {v}. Write the solution as a Python function."),
        names=("solution", "f", "check_values", "my_func", "answer"),
        stock=("Simplify the expression.", "Find the value of x.", "What is the answer?", "Solve for y.",
            "Write a function to reverse a string.", "Compute the sum.", "Find the remainder.",
            "Write a python function to check whether a number is even or not.", "Evaluate the integral."),
    ),
    "round2": FormsRound(
        benchmarks=(*LABEL_BENCHMARKS, "aime2026", "amc2022_2023"),
        chats=(
            "<start_of_turn>user\n{p}<end_of_turn>\n<start_of_turn>model\n",
            "[INST] {p} [/INST]",
            "<|system|>\nYou are a friendly chatbot.</s>\n<|user|>\n{p}</s>\n<|assistant|>\n",
            "User: {p}\n\nAssistant:",
            "<｜begin▁of▁sentence｜><｜User｜>{p}<｜Assistant｜><think>\n",
            "### Human: {p}\n### Assistant:",
            "<|im_start|>user\n{p}\nPlease reason step by step, and put your final answer within \\boxed{{}}.<|im_end|>\n"
            "<|im_start|>assistant\n",
        ),
        lead_ins=("Can someone explain how to do this? {p}", "{p}\n\nI'm stuck, any hints?", "Problem:\n{p}\nAnswer:",
            "Here's one from my problem set. {p}"),
        quotes=("Let me look at the question once more: {p} Right.",
            "To recap, the problem says:\n\n{p}\n\nGood, that matches what I had.",
            "Actually, I should double-check the statement. It reads \"{p}\" Yes, that is what I used."),
        code_requests=("Please write a Python function that {v3}.", "Write Python code that {v3}.",
            "Develop a function in Python to {v}.", "Task: {v}.", "Could you code up something to {v}? Python please.",
            "Define a function which {v3}."),
        names=("compute", "g", "helper", "run_check", "task_fn"),
        stock=("Find the area of the triangle.", "What is the probability?", "Prove the inequality.",
            "Write a function to sort a list.", "Find all real solutions.", "Compute the determinant.",
            "Write a python function to find the maximum of two numbers.", "How many ways are there?",
            "Find the greatest common divisor."),
    ),
}


def split_of(key: str) -> str:
    """`heldout` for about half of the keys (a fixed hash of the item or pool row id), else `tuning`."""
    return "heldout" if hashlib.blake2b(key.encode(), digest_size=4).digest()[0] & 1 else "tuning"


class Filler:
    """Long clean responses made of real responses from the clean pools (copies of benchmark items removed)."""

    def __init__(self, texts: list[str], rng: random.Random):
        self.texts, self.rng = texts, rng

    def words(self, lo: int, hi: int) -> str:
        target, parts, n = self.rng.randint(lo, hi), [], 0
        while n < target:
            parts.append(self.rng.choice(self.texts))
            n += len(parts[-1].split())
        return "\n\n".join(parts)


def setup(shared: Path, names: tuple[str, ...], rng: random.Random
          ) -> tuple[dict[str, list[BenchmarkItem]], CopyChecker, dict[str, list[dict]], Filler]:
    """What every forms builder starts from: the benchmarks, a copy checker over their items, the clean pools and
    a filler of long clean responses from them."""
    benchmarks = load_benchmarks(names, shared / "benchmarks")
    is_copy = CopyChecker([normalize(it.problem) for items in benchmarks.values() for it in items])
    pools = pool_rows(shared)
    clean_resp = [r["response"] for rows in pools.values() for r in rows
                  if r.get("response") and len(r["response"]) > 200 and not is_copy(normalize(r["response"]))]
    return benchmarks, is_copy, pools, Filler(clean_resp, rng)


def pool_rows(shared: Path) -> dict[str, list[dict]]:
    """The rows of the clean pools (negatives and filler) by pool name."""
    return {pool: [r for r in iter_input_rows([InputSpec(str(shared / "sft_sources" / f"{pool}.jsonl.gz"))])
                   if isinstance(r, dict)] for pool in NEGATIVE_POOLS}


def build_first_set(shared: Path, *, per_benchmark: int, per_pool: int, seed: int
                    ) -> tuple[dict[str, list[BenchmarkItem]], list[LabelledExample]]:
    """The first labelled set (bench/decontam/labelled.py) with its tuning / held-out split (`assign_splits`)."""
    benchmarks, examples = build_labelled_set(shared, per_benchmark=per_benchmark, per_pool=per_pool, seed=seed)
    return benchmarks, assign_splits(examples)


def add_positive_forms(pos, p: str, it, name: str, rng: random.Random, rnd) -> None:
    """The contaminated forms every forms round makes of one benchmark item, in this order (the rounds' digests
    depend on the random draws): a code request / renamed HumanEval for the code benchmarks, else the Unicode,
    plain-text, LaTeX-variant and reordered renderings of the problem."""
    if name == "mbpp":
        pos(code_request(p, rng, rnd.code_requests, rnd.chats), "short_code")
    elif name == "humaneval":
        pos(renamed_humaneval(it, rng, rnd.names, rnd.chats), "short_code")
    else:
        pos(unicode_math(p), "unicode_math")
        pos(plain_text_math(p), "plain_text_math")
        pos(latex_variant(p, rng), "latex_variant")
        pos(reordered(p, rng), "reordered")


def build_forms_set(shared_data: str | Path, *, per_benchmark: int, per_pool: int, seed: int, templates: str
                    ) -> tuple[dict[str, list[BenchmarkItem]], list[LabelledExample]]:
    """(benchmarks to index, labelled examples with `.split`: items and pool rows in halves by `split_of`) in the
    round `templates` of ROUNDS; deterministic for a given seed."""
    shared = Path(shared_data)
    rnd = ROUNDS[templates]
    rng = random.Random(seed)
    benchmarks, is_copy, pools, filler = setup(shared, rnd.benchmarks, rng)
    out: list[LabelledExample] = []

    def add(text: str | None, label: int, kind: str, key: str, side: str = "prompt", bench: str = "",
            item: str = "") -> None:
        if text:
            ex = LabelledExample(text, label, kind, side, bench, item)
            ex.split = split_of(key)  # type: ignore[attr-defined]
            ex.key = key  # type: ignore[attr-defined]  # item or pool row (not in the digest): later rounds leave these out
            out.append(ex)

    for name, items in benchmarks.items():
        k = 2 * per_benchmark if name in ("mbpp", "humaneval") else per_benchmark  # short_code's only sources
        for it in rng.sample(items, min(k, len(items))):
            p, key = it.problem.strip(), f"{name}/{it.id}"

            def pos(text: str | None, kind: str, side: str = "prompt", _k: str = key, _n: str = name,
                    _i: str = it.id) -> None:
                add(text, 1, kind, _k, side, _n, _i)

            n_words = len(normalize(p).split())
            add_positive_forms(pos, p, it, name, rng, rnd)
            if name not in ("mbpp", "humaneval"):
                changed = change_number(p, rng)
                if changed:
                    add(rng.choice([unicode_math, plain_text_math])(changed), 0, "number_changed", key)
            pos(rng.choice(rnd.chats).format(p=p), "chat_template")
            pos(filler.words(800, 1500) + "\n\n" + rng.choice(rnd.quotes).format(p=p) + "\n\n" + filler.words(800, 1500),
                "mid_response", side="response")
            if n_words >= 30:
                words = p.split(" ")
                pos(" ".join(words[int(len(words) * 0.4):]), "suffix_copy")
    short = [(name, it) for name, items in benchmarks.items() for it in items if len(normalize(it.problem).split()) <= 12]
    for name, it in rng.sample(short, min(3 * per_benchmark, len(short))):  # one-line problems, all benchmarks
        lead = rng.choice(rnd.chats) if rng.random() < 0.5 else rng.choice(rnd.lead_ins)
        text = lead.format(p=unicode_math(it.problem) if rng.random() < 0.3 else it.problem.strip())
        add(text, 1, "one_line", f"{name}/{it.id}", "prompt", name, it.id)

    test_mbpp = {normalize(it.problem) for it in benchmarks["mbpp"]}
    other = [r for r in load_benchmarks(["mbpp_all"], shared / "benchmarks", {"mbpp_all": mbpp_all_spec()})["mbpp_all"]
             if r.meta.get("split") != "test" and normalize(r.problem) not in test_mbpp and not is_copy(normalize(r.problem))]
    for r in rng.sample(other, min(per_pool, len(other))):
        add(code_request(r.problem, rng, rnd.code_requests, rnd.chats), 0, "mbpp_other_split", f"mbpp_other/{r.id}")
    for pool, rows in pools.items():
        for r in rng.sample(rows, min(per_pool, len(rows))):
            if is_copy(normalize(r["prompt"])):
                continue
            key = f"{pool}/{r['id']}"
            add(unicode_math(r["prompt"]) if rng.random() < 0.5 else plain_text_math(r["prompt"]), 0, "pool_unicode", key)
            add(rng.choice(rnd.chats).format(p=r["prompt"]), 0, "pool_chat", key)
    for i, s in enumerate(rnd.stock * 4):
        add(rng.choice(rnd.chats).format(p=s), 0, "stock_one_line", f"stock/{i}")
    for i in range(per_pool):
        add(filler.words(1700, 3000), 0, "clean_longcot", f"longcot/{i}", side="response")
    for i in range(per_pool // 3):
        add(filler.words(9000, 11000), 0, "clean_longcot_10k", f"longcot10k/{i}", side="response")
    return benchmarks, out


def mbpp_all_spec():
    """All 974 MBPP tasks (the registry's `mbpp` keeps the test split only)."""
    return replace(REGISTRY["mbpp"], name="mbpp_all", local_file="mbpp", local_where={})


def assign_splits(examples: list[LabelledExample]) -> list[LabelledExample]:
    """Tuning / held-out split for the first labelled set (bench/decontam/labelled.py): by item for
    positives, by the text for negatives."""
    for e in examples:
        key = f"{e.benchmark}/{e.item_id}" if e.item_id else "neg/" + hashlib.blake2b(
            e.text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
        e.split = split_of(key)  # type: ignore[attr-defined]
    return examples


def heldout_digest(examples: list[LabelledExample]) -> str:
    """SHA-256 of the held-out examples (text, label, kind, side, benchmark, item), in order."""
    h = hashlib.sha256()
    for e in examples:
        if getattr(e, "split", "") == "heldout":
            h.update(json.dumps([e.text, e.label, e.kind, e.side, e.benchmark, e.item_id]).encode("utf-8", "surrogatepass"))
            h.update(b"\n")
    return h.hexdigest()


def _content(statement: str) -> str:
    """An MBPP statement without its request ("Write a (python) function to"), normalised."""
    return normalize(REQUEST_RE.sub("", statement.strip()))


def used_before(earlier: list[tuple[dict[str, list[BenchmarkItem]], list[LabelledExample]]]
                ) -> tuple[set[str], set[str], set[str]]:
    """(item keys "bench/id" and pool-row keys, normalised item texts, normalised pool prompts) the `earlier`
    sets (benchmarks, examples) use."""
    text_of = {f"{n}/{it.id}": normalize(it.problem) for bm, _ in earlier for n, v in bm.items() for it in v}
    rows = [e for _, ex in earlier for e in ex]
    keys = {f"{e.benchmark}/{e.item_id}" for e in rows if e.item_id}
    pool_prompts = {normalize(e.text) for e in rows if e.kind.startswith("pool:")}
    pool_keys = {e.key for e in rows if not e.item_id and hasattr(e, "key")}  # type: ignore[attr-defined]
    return keys | pool_keys, {text_of[k] for k in keys if k in text_of}, pool_prompts


def build_heldout_forms_set(shared_data: str | Path, *, earlier: list, per_benchmark: int, per_pool: int, seed: int,
                            templates: str) -> tuple[dict[str, list[BenchmarkItem]], list[LabelledExample]]:
    """(benchmarks to index, labelled examples, all `split == "heldout"`) in the round `templates` of ROUNDS,
    leaving out the items and pool rows of the `earlier` sets (benchmarks, examples); deterministic for a given
    seed. Negatives are checked by the builder's own `CopyChecker` (a "stock" line that is an MBPP item, a number
    change that leaves another benchmark item whole, an MBPP statement of another split that is a test statement
    behind another request, are not negatives)."""
    shared = Path(shared_data)
    rnd = ROUNDS[templates]
    used_keys, used_texts, used_prompts = used_before(earlier)
    rng = random.Random(seed)
    benchmarks, is_copy, pools, filler = setup(shared, rnd.benchmarks, rng)
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

            add_positive_forms(pos, p, it, name, rng, rnd)
            if name not in ("mbpp", "humaneval"):
                changed = change_number(p, rng)
                if changed and not is_copy(normalize(changed)):
                    render = rng.choice([unicode_math, plain_text_math, lambda t: rng.choice(rnd.chats).format(p=t)])
                    add(render(changed), 0, "number_changed")
            pos(rng.choice(rnd.chats).format(p=p), "chat_template")
            lo, hi = (4000, 5000) if rng.random() < 1 / 3 else (800, 1500)
            pos(filler.words(lo, hi) + "\n\n" + rng.choice(rnd.quotes).format(p=p) + "\n\n" + filler.words(lo, hi),
                "mid_response", side="response")
            if len(normalize(p).split()) >= 30:
                words = p.split(" ")
                pos(" ".join(words[int(len(words) * 0.4):]), "suffix_copy")
    short = [(name, it) for name, items in fresh.items() for it in items if len(normalize(it.problem).split()) <= 12]
    for name, it in rng.sample(short, min(3 * per_benchmark, len(short))):
        lead = rng.choice(rnd.chats) if rng.random() < 0.5 else rng.choice(rnd.lead_ins)
        add(lead.format(p=unicode_math(it.problem) if rng.random() < 0.3 else it.problem.strip()), 1, "one_line",
            "prompt", name, it.id)

    test_mbpp = {normalize(it.problem) for it in benchmarks["mbpp"]}
    test_content = {_content(it.problem) for it in benchmarks["mbpp"]}
    other = [r for r in load_benchmarks(["mbpp_all"], shared / "benchmarks", {"mbpp_all": mbpp_all_spec()})["mbpp_all"]
             if r.meta.get("split") != "test" and normalize(r.problem) not in test_mbpp
             and f"mbpp_other/{r.id}" not in used_keys and not is_copy(normalize(r.problem))
             and _content(r.problem) not in test_content]
    for r in rng.sample(other, min(per_pool, len(other))):
        add(code_request(r.problem, rng, rnd.code_requests, rnd.chats), 0, "mbpp_other_split", key=f"mbpp_other/{r.id}")
    for pool, rows in pools.items():
        rows = [r for r in rows if f"{pool}/{r['id']}" not in used_keys and normalize(r["prompt"]) not in used_prompts
                and not is_copy(normalize(r["prompt"]))]
        for r in rng.sample(rows, min(per_pool, len(rows))):
            k = f"{pool}/{r['id']}"
            add(unicode_math(r["prompt"]) if rng.random() < 0.5 else plain_text_math(r["prompt"]), 0, "pool_unicode", key=k)
            add(rng.choice(rnd.chats).format(p=r["prompt"]), 0, "pool_chat", key=k)
    for line in [x for x in rnd.stock if not is_copy(normalize(x))] * 4:  # "... maximum of two numbers." is MBPP's
        add(rng.choice(rnd.chats).format(p=line), 0, "stock_one_line", key="stock")
    for _ in range(per_pool):
        add(filler.words(1700, 3000), 0, "clean_longcot", side="response")
    for _ in range(per_pool // 3):
        add(filler.words(9000, 11000), 0, "clean_longcot_10k", side="response")
    return benchmarks, out
