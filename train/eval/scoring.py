"""Judging samples with the project's verifiers: math by final answer (math-verify), code in the sandbox."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from cotforge.curate.core.schema import load_meta
from cotforge.train.eval.config import EvalConfig
from cotforge.train.eval.items import EvalItem


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
    from cotforge.curate.verify.math import verify_math_batch

    verdicts = verify_math_batch(pairs, think_end=cfg.think_end or None, workers=cfg.verify_workers,
                                 timeout_s=cfg.math_timeout_s)
    return [Verdict(bool(v.correct), 1.0 if v.correct else 0.0, str(v.status),
                    None if v.extracted is None else str(v.extracted)) for v in verdicts]


def _program_for(item: EvalItem, response: str, cfg: EvalConfig) -> str | None:
    """The program to test: the last ```python block after think_end; for function-completion tasks
    (HumanEval) the prompt is prepended when the block lacks the entry point's definition."""
    from cotforge.curate.verify.code import extract_program

    program = extract_program(response, cfg.think_end or None)
    if not program:
        return None
    ep = load_meta(item.tests).get("entry_point")
    if ep and not re.search(rf"def\s+{re.escape(str(ep))}\s*\(", program):
        program = item.problem + program
    return program


def _score_code(items: list[EvalItem], responses: list[str], cfg: EvalConfig) -> list[Verdict]:
    """`run_tests_batch` on the extracted programs; correct = every test passed."""
    from cotforge.curate.verify.code import run_tests_batch
    from cotforge.curate.verify.sandbox import SandboxLimits

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
