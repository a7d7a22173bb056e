"""Benchmark items as the evaluator sees them: loading from the shared registry (`curate.core.benchmarks`),
the chat prompt per item, and fingerprints of what was evaluated."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cotforge.curate.core.schema import load_meta
from cotforge.curate.io.readers import normalize_tests
from cotforge.train.eval.config import EvalConfig

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
    """The benchmark's items from the shared registry (`curate.core.benchmarks`), first `cfg.limit` of them."""
    raw, domain = _registry_load(name, cfg)
    if cfg.limit is not None:
        raw = raw[: cfg.limit]
    items = []
    for i, it in enumerate(raw):
        meta = it.meta if isinstance(it.meta, dict) else load_meta(it.meta)
        tests = (normalize_tests(it.tests) or "") if domain == "code" else ""
        if domain == "code" and not tests:
            raise ValueError(f"benchmark {name!r} item {it.id!r}: code item has no tests; it cannot be scored")
        if domain != "code" and not str(it.answer or "").strip():
            raise ValueError(f"benchmark {name!r} item {it.id!r}: field answer is empty; it cannot be scored")
        items.append(EvalItem(name, i, str(it.id), domain, str(it.problem), str(it.answer or ""), tests,
                              str(it.solution or ""), meta))
    if not items:
        raise ValueError(f"benchmark {name!r} has no items")
    return items


def _registry_load(name: str, cfg: EvalConfig) -> tuple[list[Any], str]:
    """(items, domain) from `curate.core.benchmarks`, the registry decontamination uses (plus cfg.registry YAML)."""
    from cotforge.curate.core import benchmarks as reg

    extra = reg.load_registry_yaml(cfg.registry) if cfg.registry else None
    try:
        items = reg.load_benchmark(name, benchmarks_dir=cfg.benchmarks_dir, extra_registry=extra)
        return items, reg.get_spec(name, extra).domain
    except reg.BenchmarkError as e:
        raise ValueError(str(e)) from e


def registry_fingerprint(name: str, cfg: EvalConfig) -> str:
    """The registry's fingerprint of the whole benchmark (before --limit): what decontamination reports."""
    from cotforge.curate.core import benchmarks as reg

    extra = reg.load_registry_yaml(cfg.registry) if cfg.registry else None
    return reg.items_fingerprint(reg.load_benchmark(name, benchmarks_dir=cfg.benchmarks_dir, extra_registry=extra))


def build_messages(item: EvalItem, cfg: EvalConfig) -> list[dict[str, str]]:
    """The chat prompt: math = bare problem (+ optional suffix, the official script); code = task wording."""
    if item.domain != "code":
        text = item.problem if not cfg.math_suffix else f"{item.problem}\n\n{cfg.math_suffix}"
        return [{"role": "user", "content": text}]
    tests = load_meta(item.tests)
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


def benchmark_fingerprint(items: Sequence[EvalItem]) -> str:
    """Hash of the evaluated items' ids and problems (the --limit subset actually scored)."""
    h = hashlib.sha256()
    for it in items:
        h.update(f"{it.id}\x00{it.problem}\x00".encode())
    return h.hexdigest()[:16]
