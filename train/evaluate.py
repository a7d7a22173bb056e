"""Evaluation: sample k answers per benchmark item and score them with the project's verifiers.

Protocol (Klear-Reasoner paper §4.2, official `benchmarks/inference.py`; see docs/paper_notes.md §5):
  AIME 2024/2025 and HMMT: avg@64, LiveCodeBench: avg@8; temperature 0.6, top_p 0.95, 32K generation.
  The paper's numbers state only temperature/top_p ("paper" preset, top_k off, repetition_penalty 1.0); the
  official inference script adds top_k 20 and repetition_penalty 1.05 ("official" preset); it was committed
  (with the released AIME avg@64 outputs) the day after a user reported a ~5 point AIME24 gap at 64K with the
  paper's settings, so reproducing the released numbers likely needs "official". Both are exposed.

Metrics, for an item with n samples of which c are correct (and k <= n):
  avg@n  = c / n                                   (mean accuracy over the n samples; = pass@1 estimate)
  pass@k = 1 - C(n - c, k) / C(n, k)                (unbiased estimator, Chen et al. 2021)
  maj@n  = 1[the most voted extracted answer is correct]   (math only; correct answers form one vote group)
A benchmark's metric is the mean over items; its confidence interval is over items (bootstrap percentile or
normal approximation), i.e. it reflects which problems were drawn, not sampling noise within an item alone.

Outputs in OUT: `samples.parquet` (every sample with its verdict), `results.json`, `report.md` + `report.png`.
Samples are written in chunks to `OUT/samples.parts/` as they are scored and merged into `samples.parquet`
at the end, so a killed run resumes: samples already in either place are not regenerated.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import platform
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

log = logging.getLogger(__name__)

# Sampling presets: "paper" = what the paper states; "official" = the repo's benchmarks/inference.py.
PRESETS: dict[str, dict[str, Any]] = {
    "paper": {"temperature": 0.6, "top_p": 0.95, "top_k": 0, "repetition_penalty": 1.0},
    "official": {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "repetition_penalty": 1.05},
}

MATH_SUFFIX_BOXED = "Please reason step by step, and put your final answer within \\boxed{}."

CODE_PROMPT_STDIO = (
    "You are an expert Python programmer. You will be given a question (problem specification) and will "
    "generate a correct Python program that matches the specification and passes all tests.\n\n{problem}\n\n"
    "Read the inputs from stdin, solve the problem and write the answer to stdout. Enclose your code within "
    "delimiters as follows:\n```python\n# YOUR CODE HERE\n```")
CODE_PROMPT_FUNCTION = (
    "Complete the following Python function. Return the complete function (with its imports) in a single "
    "```python code block.\n\n```python\n{problem}```")
CODE_PROMPT_ASSERT = (
    "{problem}\n\nYour code should pass these tests:\n{examples}\n\nWrite the solution in a single ```python "
    "code block.")
CODE_PROMPT_GENERIC = "{problem}\n\nWrite the solution in Python in a single ```python code block."

SAMPLE_SCHEMA = pa.schema([
    ("benchmark", pa.string()), ("item_id", pa.string()), ("item_index", pa.int64()),
    ("sample_idx", pa.int64()), ("domain", pa.string()), ("prompt", pa.string()), ("response", pa.string()),
    ("answer", pa.string()), ("finish_reason", pa.string()), ("n_tokens", pa.int64()),
    ("correct", pa.bool_()), ("score", pa.float64()), ("status", pa.string()), ("extracted", pa.string()),
    ("tests_passed", pa.int64()), ("tests_total", pa.int64()), ("seed", pa.int64()), ("gen_key", pa.string()),
])


# --------------------------------------------------------------------------- config


@dataclass
class EvalConfig:
    """Everything an eval run depends on (TRL-style: one dataclass, YAML keys = field names).

    `benchmarks` entries may carry their own k as "name:k" (e.g. "aime2024:64", "lcb_v5:8"); `k` is the rest's.
    `think_end`: the verifiers judge the text after its last occurrence; "" judges the whole response (for
    models without a reasoning block). `chunk_items`: items per generate call and per resumable chunk.
    """

    model: str = ""
    benchmarks: list[str] = field(default_factory=lambda: ["aime2024"])
    out: str = "eval_out"
    benchmarks_dir: str | None = None
    registry: str | None = None
    k: int = 64
    temperature: float = 0.6
    top_p: float = 0.95
    top_k: int = 0
    repetition_penalty: float = 1.0
    max_tokens: int = 32768
    seed: int = 0
    limit: int | None = None
    backend: str = "auto"
    batch_size: int = 8
    chunk_items: int = 16
    math_suffix: str = ""
    think_end: str = "</think>"
    pass_ks: list[int] | None = None
    ci: str = "bootstrap"
    ci_level: float = 0.95
    n_bootstrap: int = 2000
    maj_verify_max_groups: int = 8
    verify_workers: int | None = None
    math_timeout_s: float = 5.0
    code_timeout_s: float = 10.0
    tensor_parallel_size: int = 1
    max_model_len: int | None = None
    yarn_factor: float | None = None
    yarn_original_max_positions: int = 32768
    vllm_kwargs: dict[str, Any] = field(default_factory=dict)
    overwrite: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.benchmarks, str):
            self.benchmarks = [b.strip() for b in self.benchmarks.split(",") if b.strip()]
        if not self.benchmarks:
            raise ValueError("EvalConfig.benchmarks: give at least one benchmark name")
        for name, k in self.benchmark_ks().items():
            if k < 1:
                raise ValueError(f"EvalConfig.benchmarks: k for {name!r} must be >= 1, got {k}")
        if self.backend not in ("auto", "hf", "vllm"):
            raise ValueError(f"EvalConfig.backend: expected auto, hf or vllm, got {self.backend!r}")
        if self.ci not in ("bootstrap", "normal"):
            raise ValueError(f"EvalConfig.ci: expected bootstrap or normal, got {self.ci!r}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"EvalConfig.limit: must be >= 1, got {self.limit}")
        if self.chunk_items < 1 or self.max_tokens < 1:
            raise ValueError("EvalConfig: chunk_items and max_tokens must be >= 1")
        if not 0 < self.ci_level < 1:
            raise ValueError(f"EvalConfig.ci_level: must be in (0, 1), got {self.ci_level}")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError(f"EvalConfig: need temperature >= 0 and 0 < top_p <= 1, got {self.temperature}, "
                             f"{self.top_p}")

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "config") -> EvalConfig:
        """Build from a YAML/JSON mapping; an unknown key is an error naming it and `source`."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"{source}: unknown eval option(s) {unknown}; known: {sorted(known)}")
        return cls(**data)

    def benchmark_ks(self) -> dict[str, int]:
        """{benchmark name: k}, from "name:k" entries or the default `k`."""
        out: dict[str, int] = {}
        for entry in self.benchmarks:
            name, _, k = entry.partition(":")
            try:
                out[name.strip()] = int(k) if k else self.k
            except ValueError as e:
                raise ValueError(f"EvalConfig.benchmarks: bad entry {entry!r}; expected NAME or NAME:K") from e
        return out


def apply_preset(values: dict[str, Any], preset: str) -> dict[str, Any]:
    """`values` with the sampling settings of PRESETS[preset] filled in where not given."""
    if preset not in PRESETS:
        raise ValueError(f"unknown sampling preset {preset!r}; expected one of {sorted(PRESETS)}")
    return {**PRESETS[preset], **values}


# --------------------------------------------------------------------------- items and prompts


@dataclass
class EvalItem:
    """One benchmark problem as the evaluator sees it (tests: JSON text as in the benchmark registry)."""

    benchmark: str
    index: int
    id: str
    domain: str
    problem: str
    answer: str
    tests: str
    solution: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


def load_items(name: str, cfg: EvalConfig) -> list[EvalItem]:
    """The benchmark's items from the shared registry (`curate.benchmarks`), first `cfg.limit` of them."""
    raw, domain = _registry_load(name, cfg)
    if cfg.limit is not None:
        raw = raw[: cfg.limit]
    items = []
    for i, it in enumerate(raw):
        meta = it.meta if isinstance(it.meta, dict) else _json_or_empty(it.meta)
        tests = normalize_tests(it.tests) if domain == "code" else ""
        if domain == "code" and not tests:
            raise ValueError(f"benchmark {name!r} item {it.id!r}: code item has no tests; it cannot be scored")
        if domain != "code" and not str(it.answer or "").strip():
            raise ValueError(f"benchmark {name!r} item {it.id!r}: field answer is empty; it cannot be scored")
        items.append(EvalItem(name, i, str(it.id), domain, str(it.problem), str(it.answer or ""), tests,
                              str(it.solution or ""), meta))
    if not items:
        raise ValueError(f"benchmark {name!r} has no items")
    return items


def normalize_tests(tests: str | None) -> str:
    """Registry tests JSON -> the verifier's two kinds: MBPP's {"kind": "assert_list", "test_list", "setup"}
    becomes one assert script; LeetCode-style asserts on `Solution()` get the verifier's LeetCode prelude."""
    spec = _json_or_empty(tests)
    if not spec:
        return str(tests or "")
    if spec.get("kind") == "assert_list":
        spec = {"kind": "assert", "test": "\n".join(spec.get("test_list") or []), "entry_point": None,
                "setup": spec.get("setup") or ""}
    if spec.get("kind") == "assert" and not spec.get("setup") and "Solution()" in str(spec.get("test", "")):
        from curate.verify.code import LEETCODE_PRELUDE

        spec["setup"] = LEETCODE_PRELUDE
    return json.dumps(spec, ensure_ascii=False)


def _json_or_empty(text: Any) -> dict[str, Any]:
    """Parse a JSON object text; anything else gives {}."""
    try:
        v = json.loads(text) if text else {}
    except (TypeError, json.JSONDecodeError):
        return {}
    return v if isinstance(v, dict) else {}


def _registry_load(name: str, cfg: EvalConfig) -> tuple[list[Any], str]:
    """(items, domain) from `curate.benchmarks`, the registry decontamination uses (plus cfg.registry YAML)."""
    from curate import benchmarks as reg

    extra = reg.load_registry_yaml(cfg.registry) if cfg.registry else None
    try:
        items = reg.load_benchmark(name, benchmarks_dir=cfg.benchmarks_dir, extra_registry=extra)
        return items, reg.get_spec(name, extra).domain
    except reg.BenchmarkError as e:
        raise ValueError(str(e)) from e


def registry_fingerprint(name: str, cfg: EvalConfig) -> str:
    """The registry's fingerprint of the whole benchmark (before --limit): what decontamination reports."""
    from curate import benchmarks as reg

    extra = reg.load_registry_yaml(cfg.registry) if cfg.registry else None
    return reg.items_fingerprint(reg.load_benchmark(name, benchmarks_dir=cfg.benchmarks_dir, extra_registry=extra))


def build_messages(item: EvalItem, cfg: EvalConfig) -> list[dict[str, str]]:
    """The chat prompt: math = bare problem (+ optional suffix, the official script); code = task wording."""
    if item.domain != "code":
        text = item.problem if not cfg.math_suffix else f"{item.problem}\n\n{cfg.math_suffix}"
        return [{"role": "user", "content": text}]
    tests = _json_or_empty(item.tests)
    if tests.get("kind") == "stdio":
        text = CODE_PROMPT_STDIO.format(problem=item.problem)
    elif tests.get("entry_point"):
        text = CODE_PROMPT_FUNCTION.format(problem=item.problem)
    elif tests.get("kind") == "assert" and "class Solution" not in item.problem and "assert " in str(
            tests.get("test", "")):
        examples = "\n".join(line for line in str(tests["test"]).splitlines() if line.startswith("assert"))
        text = CODE_PROMPT_ASSERT.format(problem=item.problem, examples="\n".join(examples.splitlines()[:3]))
    else:
        text = CODE_PROMPT_GENERIC.format(problem=item.problem)
    return [{"role": "user", "content": text}]


# --------------------------------------------------------------------------- metrics


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k = 1 - C(n-c, k)/C(n, k), computed as 1 - prod_{i=n-c+1}^{n} (1 - k/i) for stability."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k: need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def avg_at_k(correct: Sequence[bool]) -> float:
    """Mean accuracy over an item's samples (avg@k); pass@1 estimated from all k samples."""
    if not correct:
        raise ValueError("avg_at_k: no samples")
    return sum(bool(c) for c in correct) / len(correct)


def normalize_answer(ans: str | None) -> str | None:
    """Cheap canonical form for voting: drop \\boxed{}, $, spaces, trailing dots, \\left/\\right, text{} wrappers."""
    if ans is None:
        return None
    s = str(ans).strip()
    m = re.fullmatch(r"\\boxed\{(.*)\}", s, flags=re.S)
    s = m.group(1) if m else s
    s = re.sub(r"\\(left|right|!|,|;|:)", "", s)
    s = re.sub(r"\\text\{([^{}]*)\}", r"\1", s)
    s = s.replace("$", "").replace(" ", "").rstrip(".")
    s = re.sub(r"^\{(.*)\}$", r"\1", s)
    s = re.sub(r"\\[dt]frac", r"\\frac", s)
    return s or None


def math_equivalent(a: str, b: str) -> bool:
    """math-verify equivalence of two extracted answers (timeouts only on the main thread, where they work)."""
    try:
        from math_verify import parse, verify
    except ImportError:  # pragma: no cover - math-verify is in the train extra
        return False
    main = threading.current_thread() is threading.main_thread()
    kw_p: dict[str, Any] = {} if main else {"parsing_timeout": None}
    kw_v: dict[str, Any] = {} if main else {"timeout_seconds": None}
    try:
        pa_, pb = parse(f"${a}$", **kw_p), parse(f"${b}$", **kw_p)
        return bool(pa_ and pb and verify(pa_, pb, **kw_v))
    except Exception:  # noqa: BLE001 - any parser failure means "not shown equivalent"
        return False


def maj_at_k(answers: Sequence[str | None], correct: Sequence[bool],
             equivalent: Callable[[str, str], bool] | None = None, max_groups: int = 8) -> bool:
    """Whether the majority-voted answer is correct.

    Votes: all correct samples form one group (they all equal the gold answer per the verifier); the others
    group by `normalize_answer`, then groups are merged with `equivalent` when there are at most `max_groups`
    of them (math-verify is the costly part). Unextracted answers do not vote. Ties: the earliest-seen group
    wins (deterministic; the correct group is not favoured).
    """
    if len(answers) != len(correct):
        raise ValueError(f"maj_at_k: {len(answers)} answers but {len(correct)} verdicts")
    keys: list[str] = []
    votes: Counter[str] = Counter()
    rep: dict[str, str] = {}
    for a, c in zip(answers, correct, strict=True):
        key = "\x00correct" if c else normalize_answer(a)
        if key is None:
            continue
        if key not in votes:
            keys.append(key)
            rep[key] = a or ""
        votes[key] += 1
    if not votes:
        return False
    wrong = [k for k in keys if k != "\x00correct"]
    if equivalent is not None and 1 < len(wrong) <= max_groups:
        for i, ka in enumerate(wrong):
            for kb in wrong[i + 1:]:
                if votes[ka] and votes[kb] and equivalent(rep[ka], rep[kb]):
                    votes[ka] += votes[kb]
                    votes[kb] = 0
    best = max(keys, key=lambda k: (votes[k], -keys.index(k)))
    return best == "\x00correct"


def mean_ci(values: Sequence[float], method: str = "bootstrap", level: float = 0.95, n_boot: int = 2000,
            seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high) over items: bootstrap percentile interval, or mean +- z * sd / sqrt(N)."""
    import numpy as np

    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("mean_ci: no values")
    mean = float(x.mean())
    if x.size == 1:
        return mean, mean, mean
    alpha = 1.0 - level
    if method == "normal":
        half = _normal_quantile(1 - alpha / 2) * float(x.std(ddof=1)) / math.sqrt(x.size)
        lo, hi = mean - half, mean + half
        if x.min() >= 0 and x.max() <= 1:  # proportions: keep the interval inside [0, 1]
            lo, hi = max(0.0, lo), min(1.0, hi)
        return mean, lo, hi
    if method != "bootstrap":
        raise ValueError(f"mean_ci: unknown method {method!r}")
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return mean, float(lo), float(hi)


def _normal_quantile(p: float) -> float:
    """Standard normal quantile via the inverse error function (statistics.NormalDist)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)


# --------------------------------------------------------------------------- scoring


@dataclass
class Verdict:
    """A sample's judgement: correct, score (1/0 for math, test pass fraction for code), and details."""

    correct: bool
    score: float
    status: str
    extracted: str | None = None
    passed: int | None = None
    total: int | None = None


def score_samples(items: Sequence[EvalItem], responses: Sequence[str], cfg: EvalConfig) -> list[Verdict]:
    """Judge each (item, response) with the shared verifiers: math by final answer, code in the sandbox."""
    if len(items) != len(responses):
        raise ValueError(f"score_samples: {len(items)} items but {len(responses)} responses")
    out: list[Verdict | None] = [None] * len(items)
    math_idx = [i for i, it in enumerate(items) if it.domain != "code"]
    code_idx = [i for i, it in enumerate(items) if it.domain == "code"]
    if math_idx:
        for i, v in zip(math_idx, _score_math([(responses[i], items[i].answer) for i in math_idx], cfg),
                        strict=True):
            out[i] = v
    if code_idx:
        for i, v in zip(code_idx, _score_code([items[i] for i in code_idx], [responses[i] for i in code_idx],
                                              cfg), strict=True):
            out[i] = v
    return out  # type: ignore[return-value]


def _score_math(pairs: list[tuple[str, str]], cfg: EvalConfig) -> list[Verdict]:
    """`verify_math_batch` on the text after the last think_end (whole text when think_end is "")."""
    from curate.verify import verify_math_batch

    verdicts = verify_math_batch(pairs, think_end=cfg.think_end or None, workers=cfg.verify_workers,
                                 timeout_s=cfg.math_timeout_s)
    return [Verdict(bool(v.correct), 1.0 if v.correct else 0.0, str(v.status),
                    None if v.extracted is None else str(v.extracted)) for v in verdicts]


def _program_for(item: EvalItem, response: str, cfg: EvalConfig) -> str | None:
    """The program to test: the last ```python block after think_end; for function-completion tasks
    (HumanEval) the prompt is prepended when the block lacks the entry point's definition."""
    from curate.verify import extract_program

    program = extract_program(response, cfg.think_end or None)
    if not program:
        return None
    ep = _json_or_empty(item.tests).get("entry_point")
    if ep and not re.search(rf"def\s+{re.escape(str(ep))}\s*\(", program):
        program = item.problem + program
    return program


def _score_code(items: list[EvalItem], responses: list[str], cfg: EvalConfig) -> list[Verdict]:
    """`run_tests_batch` on the extracted programs; correct = every test passed."""
    from curate.verify import SandboxLimits, run_tests_batch

    out: list[Verdict | None] = [None] * len(items)
    jobs, idx = [], []
    for i, (it, resp) in enumerate(zip(items, responses, strict=True)):
        program = _program_for(it, resp, cfg)
        if program is None:
            out[i] = Verdict(False, 0.0, "no_answer", None, 0, 0)
            continue
        jobs.append((program, it.tests))
        idx.append(i)
    if jobs:
        limits = SandboxLimits(wall_s=cfg.code_timeout_s)
        for i, v in zip(idx, run_tests_batch(jobs, limits=limits, workers=cfg.verify_workers), strict=True):
            total, passed = int(v.total or 0), int(v.passed or 0)
            ok = total > 0 and passed == total
            out[i] = Verdict(ok, float(v.pass_fraction), str(v.status), None, passed, total)
    return out  # type: ignore[return-value]


# --------------------------------------------------------------------------- sample store (resume)


def gen_key(cfg: EvalConfig) -> str:
    """Fingerprint of what shapes a sample's distribution (model, sampling, prompt format), not of k."""
    parts = [cfg.model, cfg.temperature, cfg.top_p, cfg.top_k, cfg.repetition_penalty, cfg.max_tokens,
             cfg.seed, cfg.math_suffix, cfg.yarn_factor, cfg.yarn_original_max_positions]
    return hashlib.blake2b(json.dumps(parts, default=str).encode(), digest_size=8).hexdigest()


class SampleStore:
    """Samples in `OUT/samples.parquet` plus chunk files `OUT/samples.parts/*.parquet` from an unfinished run."""

    def __init__(self, out: Path):
        self.out = out
        self.final = out / "samples.parquet"
        self.parts = out / "samples.parts"

    def files(self) -> list[Path]:
        """Every file holding samples, merged file first."""
        return ([self.final] if self.final.exists() else []) + sorted(self.parts.glob("part-*.parquet"))

    def load(self) -> list[dict[str, Any]]:
        """All stored samples (a partial file left by a kill is skipped: chunks are written atomically)."""
        rows: list[dict[str, Any]] = []
        for f in self.files():
            try:
                rows.extend(pq.read_table(f).to_pylist())
            except (pa.ArrowInvalid, OSError) as e:
                raise ValueError(f"{f}: unreadable samples file ({e}); delete it to regenerate its samples") from e
        return rows

    def clear(self) -> None:
        """Remove stored samples (for --overwrite)."""
        for f in self.files():
            f.unlink()

    def append(self, rows: list[dict[str, Any]]) -> Path:
        """Write one chunk atomically (tmp file + rename) so a kill never leaves a half chunk."""
        self.parts.mkdir(parents=True, exist_ok=True)
        n = len(list(self.parts.glob("part-*.parquet")))
        path = self.parts / f"part-{n:06d}-{os.getpid()}-{time.time_ns() % 10**9:09d}.parquet"
        tmp = path.with_suffix(".tmp")
        pq.write_table(pa.Table.from_pylist(rows, schema=SAMPLE_SCHEMA), tmp, compression="zstd")
        os.replace(tmp, path)
        return path

    def consolidate(self, rows: list[dict[str, Any]]) -> None:
        """Write `rows` (sorted) as samples.parquet and drop the chunk files."""
        rows = sorted(rows, key=lambda r: (r["benchmark"], r["item_index"], r["sample_idx"]))
        tmp = self.final.with_suffix(".tmp")
        pq.write_table(pa.Table.from_pylist(rows, schema=SAMPLE_SCHEMA), tmp, compression="zstd")
        os.replace(tmp, self.final)
        for f in sorted(self.parts.glob("part-*.parquet")) + sorted(self.parts.glob("part-*.tmp")):
            f.unlink()  # merged chunks, and half-written ones a kill left behind
        if self.parts.exists() and not any(self.parts.iterdir()):
            self.parts.rmdir()


def _check_resumable(rows: list[dict[str, Any]], key: str, out: Path) -> None:
    """Stored samples from other settings would mix two distributions: refuse with a clear message."""
    other = sorted({r["gen_key"] for r in rows if r["gen_key"] != key})
    if other:
        raise ValueError(f"{out}: holds samples generated with other settings (gen_key {other} vs {key}: "
                         f"model, sampling or prompt format changed); use another -o or --overwrite")


# --------------------------------------------------------------------------- generation plan


def chunk_seed(seed: int, benchmark: str, item_id: str, start: int) -> int:
    """Per-chunk sampling seed, fixed by the chunk's first item and sample index (so resumes reproduce)."""
    h = hashlib.blake2b(f"{seed}|{benchmark}|{item_id}|{start}".encode(), digest_size=4).digest()
    return int.from_bytes(h, "little") & 0x7FFFFFFF


def plan_chunks(items: Sequence[EvalItem], k: int, have: dict[tuple[str, str], set[int]],
                chunk_items: int) -> list[tuple[list[EvalItem], int, int]]:
    """[(items, first_sample_idx, n)] still to generate: items missing samples [start, k) are grouped in order
    (same start) into chunks of `chunk_items`. Already-stored sample indices are not regenerated."""
    todo: list[tuple[EvalItem, int]] = []
    for it in items:
        got = have.get((it.benchmark, it.id), set())
        start = 0
        while start in got:
            start += 1
        if start < k:
            todo.append((it, start))
    chunks: list[tuple[list[EvalItem], int, int]] = []
    for it, start in todo:
        if chunks and chunks[-1][1] == start and len(chunks[-1][0]) < chunk_items:
            chunks[-1][0].append(it)
        else:
            chunks.append(([it], start, k - start))
    return chunks


def _sample_rows(chunk: list[EvalItem], start: int, seed: int, comps: list[list[Any]], cfg: EvalConfig,
                 key: str, prompts: list[str]) -> list[dict[str, Any]]:
    """Score a generated chunk and turn it into sample rows."""
    flat_items = [it for it, group in zip(chunk, comps, strict=True) for _ in group]
    flat = [c for group in comps for c in group]
    verdicts = score_samples(flat_items, [c.text for c in flat], cfg)
    rows = []
    pos = 0
    for it, group, prompt in zip(chunk, comps, prompts, strict=True):
        for j, c in enumerate(group):
            v = verdicts[pos]
            pos += 1
            rows.append({"benchmark": it.benchmark, "item_id": it.id, "item_index": it.index,
                         "sample_idx": start + j, "domain": it.domain, "prompt": prompt, "response": c.text,
                         "answer": it.answer, "finish_reason": c.finish_reason, "n_tokens": len(c.token_ids),
                         "correct": v.correct, "score": v.score, "status": v.status, "extracted": v.extracted,
                         "tests_passed": v.passed, "tests_total": v.total, "seed": seed, "gen_key": key})
    return rows


def _make_generator(cfg: EvalConfig) -> Any:
    """The shared generation interface (`train.rollout.make_generator`) with eval's backend options."""
    from train.rollout import make_generator, vllm_available

    use_vllm = cfg.backend == "vllm" or (cfg.backend == "auto" and vllm_available())
    if not use_vllm:
        if cfg.yarn_factor:
            raise ValueError("EvalConfig.yarn_factor is applied through vLLM only; use backend='vllm' or drop it")
        return make_generator(cfg.model, "hf", batch_size=cfg.batch_size)
    return make_generator(cfg.model, "vllm", **vllm_engine_kwargs(cfg))


def vllm_engine_kwargs(cfg: EvalConfig) -> dict[str, Any]:
    """`vllm.LLM` kwargs: TP, seed, prefix caching, max_model_len, YaRN (the report's 64K row: factor 2.5)."""
    kw: dict[str, Any] = {"tensor_parallel_size": cfg.tensor_parallel_size, "seed": cfg.seed,
                          "enable_prefix_caching": True}
    if cfg.max_model_len:
        kw["max_model_len"] = cfg.max_model_len
    if cfg.yarn_factor:
        kw["hf_overrides"] = {"rope_scaling": {"rope_type": "yarn", "factor": cfg.yarn_factor,
                                               "original_max_position_embeddings": cfg.yarn_original_max_positions}}
        kw.setdefault("max_model_len", int(cfg.yarn_original_max_positions * cfg.yarn_factor))
    kw.update(cfg.vllm_kwargs)
    return kw


# --------------------------------------------------------------------------- run


def run_eval(cfg: EvalConfig, generator: Any = None) -> dict[str, Any]:
    """Generate missing samples, score them, and write samples.parquet, results.json and report.md/png.

    `generator`: anything with `generate(prompts, SamplingConfig) -> list[list[Completion]]`; by default one
    is made from cfg.model/cfg.backend, only if some sample is missing.
    """
    from train.rollout import SamplingConfig

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    store = SampleStore(out)
    if cfg.overwrite:
        store.clear()
    key = gen_key(cfg)
    rows = store.load()
    _check_resumable(rows, key, out)
    have: dict[tuple[str, str], set[int]] = {}
    for r in rows:
        have.setdefault((r["benchmark"], r["item_id"]), set()).add(int(r["sample_idx"]))
    ks = cfg.benchmark_ks()
    all_items = {name: load_items(name, cfg) for name in ks}
    t0 = time.monotonic()
    generated, gen_s, load_s = 0, 0.0, 0.0
    for name, items in all_items.items():
        chunks = plan_chunks(items, ks[name], have, cfg.chunk_items)
        if chunks:
            log.info("%s: %d items, k=%d, %d chunk(s) to generate", name, len(items), ks[name], len(chunks))
        for chunk, start, n in chunks:
            if generator is None:
                t_load = time.monotonic()
                generator = _make_generator(cfg)
                load_s = time.monotonic() - t_load
            seed = chunk_seed(cfg.seed, name, chunk[0].id, start)
            scfg = SamplingConfig(n=n, temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k,
                                  repetition_penalty=cfg.repetition_penalty, max_new_tokens=cfg.max_tokens,
                                  seed=seed)
            messages = [build_messages(it, cfg) for it in chunk]
            t_gen = time.monotonic()
            comps = generator.generate(messages, scfg)
            gen_s += time.monotonic() - t_gen
            if len(comps) != len(chunk) or any(len(g) != n for g in comps):
                raise RuntimeError(f"generator returned {[len(g) for g in comps]} completions for {len(chunk)} "
                                   f"prompts x n={n}")
            new = _sample_rows(chunk, start, seed, comps, cfg, key, [m[-1]["content"] for m in messages])
            store.append(new)
            rows.extend(new)
            generated += len(new)
            log.info("%s: scored %d samples (%d items from #%d)", name, len(new), len(chunk), chunk[0].index)
    loop_s = time.monotonic() - t0
    store.consolidate(rows)
    results = compute_results(cfg, all_items, rows)
    for name in all_items:
        results["benchmarks"][name]["registry_fingerprint"] = registry_fingerprint(name, cfg)
    results["run"] = {"generated_samples": generated, "reused_samples": len(rows) - generated,
                      "generate_s": round(gen_s, 2), "model_load_s": round(load_s, 2),
                      "score_and_write_s": round(loop_s - gen_s - load_s, 2),
                      "generated_tokens": sum(int(r["n_tokens"]) for r in rows[len(rows) - generated:])}
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    write_report(results, out)
    return results


def compute_results(cfg: EvalConfig, all_items: dict[str, list[EvalItem]],
                    rows: list[dict[str, Any]]) -> dict[str, Any]:
    """results.json content: config, model, versions, per-benchmark metrics with CIs and per-item results."""
    ks = cfg.benchmark_ks()
    by_item: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        if r["sample_idx"] < ks.get(r["benchmark"], 0):
            by_item.setdefault((r["benchmark"], r["item_id"]), []).append(r)
    benches = {}
    for name, items in all_items.items():
        benches[name] = _benchmark_metrics(cfg, name, ks[name], items, by_item)
    return {"config": asdict(cfg), "model": _model_info(cfg.model), "versions": _versions(),
            "benchmarks": benches}


def _benchmark_metrics(cfg: EvalConfig, name: str, k: int, items: list[EvalItem],
                       by_item: dict[tuple[str, str], list[dict[str, Any]]]) -> dict[str, Any]:
    """Per-item avg/pass/maj and their item-level means with confidence intervals."""
    domain = items[0].domain
    pass_ks = sorted({j for j in (cfg.pass_ks or _default_pass_ks(k)) if 1 <= j <= k})
    per_item = []
    for it in items:
        samples = sorted(by_item.get((name, it.id), []), key=lambda r: r["sample_idx"])
        if len(samples) < k:
            raise RuntimeError(f"{name} item {it.id!r}: {len(samples)} of {k} samples present after generation")
        corr = [bool(r["correct"]) for r in samples]
        c = sum(corr)
        rec: dict[str, Any] = {"id": it.id, "n": k, "correct": c, f"avg@{k}": c / k,
                               "mean_score": sum(float(r["score"]) for r in samples) / k,
                               "mean_tokens": sum(int(r["n_tokens"]) for r in samples) / k,
                               "truncated": sum(r["finish_reason"] == "length" for r in samples)}
        for j in pass_ks:
            rec[f"pass@{j}"] = pass_at_k(k, c, j)
        if domain == "math":
            eq = math_equivalent if cfg.maj_verify_max_groups > 0 else None
            rec[f"maj@{k}"] = float(maj_at_k([r["extracted"] for r in samples], corr, eq,
                                             cfg.maj_verify_max_groups))
        per_item.append(rec)
    metric_names = [f"avg@{k}"] + [f"pass@{j}" for j in pass_ks if j > 1] + (
        [f"maj@{k}"] if domain == "math" else []) + (["mean_score"] if domain == "code" else [])
    metrics = {}
    for m in metric_names:
        mean, lo, hi = mean_ci([r[m] for r in per_item], cfg.ci, cfg.ci_level, cfg.n_bootstrap, cfg.seed)
        metrics[m] = {"value": mean, "ci_low": lo, "ci_high": hi}
    n_samples = k * len(items)
    headline = [f"avg@{k}"] + ([f"pass@{k}"] if k > 1 else []) + ([f"maj@{k}"] if domain == "math" else [])
    # headline scalars first: run summaries show a benchmark's first top-level numbers
    return {**{m: metrics[m]["value"] for m in headline}, "k": k, "n_items": len(items), "n_samples": n_samples,
            "domain": domain,
            "ci": {"method": cfg.ci, "level": cfg.ci_level, "over": "items"}, "metrics": metrics,
            "mean_tokens": sum(r["mean_tokens"] for r in per_item) / len(per_item),
            "truncated_fraction": sum(r["truncated"] for r in per_item) / n_samples,
            "subset_fingerprint": benchmark_fingerprint(items), "items": per_item}


def _default_pass_ks(k: int) -> list[int]:
    """1, 2, 4, ... up to k, and k itself."""
    out, j = [], 1
    while j <= k:
        out.append(j)
        j *= 2
    return sorted(set(out) | {k})


def benchmark_fingerprint(items: Sequence[EvalItem]) -> str:
    """Hash of the evaluated items' ids and problems (the --limit subset actually scored)."""
    h = hashlib.sha256()
    for it in items:
        h.update(f"{it.id}\x00{it.problem}\x00".encode())
    return h.hexdigest()[:16]


def _model_info(model: str) -> dict[str, Any]:
    """The model id/path and, for a local folder, its architecture from config.json."""
    info: dict[str, Any] = {"id": model}
    p = Path(model)
    if p.is_dir():
        info["path"] = str(p.resolve())
        cfg = _json_or_empty((p / "config.json").read_text()) if (p / "config.json").exists() else {}
        info["architectures"] = cfg.get("architectures")
        info["model_type"] = cfg.get("model_type")
    return info


def _versions() -> dict[str, str | None]:
    """Installed versions of what generation and scoring depend on."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {"python": platform.python_version()}
    for pkg in ("cotforge", "torch", "transformers", "vllm", "math-verify", "datasets"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


# --------------------------------------------------------------------------- report


def write_report(results: dict[str, Any], out: Path) -> None:
    """OUT/report.md (one row per benchmark, main metric with its CI) and OUT/report.png (bar chart)."""
    cfg = results["config"]
    lines = [f"# Evaluation of `{results['model']['id']}`", "",
             f"Sampling: temperature {cfg['temperature']}, top_p {cfg['top_p']}, top_k {cfg['top_k'] or 'off'}, "
             f"repetition_penalty {cfg['repetition_penalty']}, max_tokens {cfg['max_tokens']}, seed {cfg['seed']}. "
             f"Intervals: {int(cfg['ci_level'] * 100)}% {cfg['ci']} over items.", "",
             "| benchmark | items | k | avg@k | CI | pass@k | maj@k | mean tokens | truncated |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, b in results["benchmarks"].items():
        k, m = b["k"], b["metrics"]
        avg = m[f"avg@{k}"]
        pk = m.get(f"pass@{k}", avg)["value"] if k > 1 else avg["value"]
        maj = m.get(f"maj@{k}")
        maj_s = "-" if maj is None else f"{100 * maj['value']:.2f}"
        lines.append(f"| {name} | {b['n_items']} | {k} | {100 * avg['value']:.2f} | "
                     f"[{100 * avg['ci_low']:.2f}, {100 * avg['ci_high']:.2f}] | {100 * pk:.2f} | "
                     f"{maj_s} | {b['mean_tokens']:.0f} | "
                     f"{100 * b['truncated_fraction']:.1f}% |")
    lines += ["", "![avg@k per benchmark](report.png)", ""]
    (out / "report.md").write_text("\n".join(lines))
    _plot(results, out / "report.png")


def _plot(results: dict[str, Any], path: Path) -> None:
    """Bar chart of avg@k per benchmark with CI error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results["benchmarks"])
    vals, lo, hi = [], [], []
    for n in names:
        b = results["benchmarks"][n]
        m = b["metrics"][f"avg@{b['k']}"]
        vals.append(100 * m["value"])
        lo.append(100 * (m["value"] - m["ci_low"]))
        hi.append(100 * (m["ci_high"] - m["value"]))
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(names) + 2), 3.5))
    ax.bar(names, vals, yerr=[lo, hi], capsize=4, color="#4c72b0")
    ax.set_ylabel("avg@k (%)")
    ax.set_ylim(0, 100)
    ax.set_title(f"{results['model']['id']}"[-60:], fontsize=9)
    for i, v in enumerate(vals):
        ax.text(i, v + 1, f"{v:.1f}", ha="center", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# --------------------------------------------------------------------------- dry run


def plan_eval(cfg: EvalConfig) -> dict[str, Any]:
    """What a run would do (benchmarks, items, k, samples, sampling, backend, tokens) without loading a model."""
    ks = cfg.benchmark_ks()
    benches = {}
    total_samples = total_prompt_tok = 0
    max_prompt_tok = 0
    for name, k in ks.items():
        items = load_items(name, cfg)
        ptoks = [len(build_messages(it, cfg)[-1]["content"]) // 3 + 16 for it in items]
        benches[name] = {"domain": items[0].domain, "items": len(items), "k": k, "samples": k * len(items),
                         "generate_calls": math.ceil(len(items) / cfg.chunk_items),
                         "registry_fingerprint": registry_fingerprint(name, cfg)}
        total_samples += k * len(items)
        total_prompt_tok += sum(p * k for p in ptoks)
        max_prompt_tok = max(max_prompt_tok, max(ptoks))
    from train.rollout import vllm_available

    backend = cfg.backend if cfg.backend != "auto" else ("vllm" if vllm_available() else "hf")
    plan: dict[str, Any] = {
        "model": cfg.model, "out": cfg.out, "backend": backend, "benchmarks": benches,
        "total_samples": total_samples,
        "sampling": {"temperature": cfg.temperature, "top_p": cfg.top_p, "top_k": cfg.top_k,
                     "repetition_penalty": cfg.repetition_penalty, "max_tokens": cfg.max_tokens,
                     "seed": cfg.seed, "math_suffix": cfg.math_suffix, "think_end": cfg.think_end},
        "tokens": {"prompt_est": total_prompt_tok, "generated_max": total_samples * cfg.max_tokens,
                   "max_sequence": max_prompt_tok + cfg.max_tokens},
    }
    if backend == "vllm":
        kw = vllm_engine_kwargs(cfg)
        kw.setdefault("max_model_len", max_prompt_tok + cfg.max_tokens)
        plan["vllm"] = kw
    else:
        plan["hf"] = {"batch_size": cfg.batch_size}
    return plan


def format_plan(plan: dict[str, Any]) -> str:
    """Human-readable dry-run plan."""
    s = plan["sampling"]
    lines = [f"model:      {plan['model']}", f"backend:    {plan['backend']}", f"output:     {plan['out']}",
             "benchmarks:"]
    for name, b in plan["benchmarks"].items():
        lines.append(f"  {name:<24} {b['domain']:<5} items={b['items']:<5} k={b['k']:<4} samples={b['samples']:<7}"
                     f" generate calls={b['generate_calls']}  registry fingerprint={b['registry_fingerprint']}")
    lines += [f"total samples: {plan['total_samples']}",
              f"sampling:   temperature={s['temperature']} top_p={s['top_p']} top_k={s['top_k'] or 'off'} "
              f"repetition_penalty={s['repetition_penalty']} max_tokens={s['max_tokens']} seed={s['seed']}",
              f"prompt:     math suffix={s['math_suffix']!r}; judged after {s['think_end'] or '(whole response)'!r}",
              f"tokens:     prompts ~{plan['tokens']['prompt_est']:,} (estimate), generated <= "
              f"{plan['tokens']['generated_max']:,} (samples x max_tokens; long-CoT models typically use a "
              f"large fraction on AIME), longest sequence <= {plan['tokens']['max_sequence']:,}"]
    if "vllm" in plan:
        lines.append(f"vllm.LLM:   {plan['vllm']}")
    else:
        lines.append(f"hf:         {plan['hf']}")
    return "\n".join(lines)
