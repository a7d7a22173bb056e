"""Verifiers: math answer checking (math-verify in killable worker processes) and sandboxed code tests.

The same functions serve curation (`cotforge curate verify`), difficulty, RL rewards and evaluation:
`verify_rows` (here: a row's kind -> its verdict), `verify.math.verify_math_batch`, `verify.code.run_tests_batch`
(sandboxed through `verify.sandbox`). Import each from the module that defines it. Math verdicts take an
extraction mode: "lenient" (default: SFT labels, evaluation), "strict" (RL rewards: boxed after the
reasoning block) or "official" (RL rewards: math-verify's own extraction after the reasoning block), and `MathCompare` settings (see `cotforge.curate.verify.math`).
"""

from __future__ import annotations

from typing import Any

from cotforge.curate.verify.code import extract_program, run_tests_batch, tests_from_row
from cotforge.curate.verify.math import MathCompare, verify_math_batch
from cotforge.curate.verify.sandbox import SandboxLimits

MATH_CORRECT = {"correct": True, "incorrect": False, "no_answer": False}


def row_kind(row: dict[str, Any]) -> str:
    """"code" (verified by tests), "math" (by answer) or "none" (nothing to verify against)."""
    if not (row.get("response") or "").strip():
        return "none"
    if tests_from_row(row) is not None:
        return "code"
    if row.get("domain") != "code" and (row.get("answer") or "").strip():
        return "math"
    return "none"


def _no_verdict(row: dict[str, Any]) -> dict[str, Any]:
    status = "no_response" if not (row.get("response") or "").strip() else (
        "no_tests" if row.get("domain") == "code" else "no_ground_truth")
    return {"correct": None, "verify_status": status, "tests_passed": None, "tests_total": None}


def verify_rows(rows: list[dict[str, Any]], think_end: str | None = "</think>", workers: int | None = None,
                limits: SandboxLimits | None = None, math_timeout_s: float = 5.0, math_mode: str = "lenient",
                math_compare: MathCompare | None = None) -> list[dict[str, Any]]:
    """Per row {"correct", "verify_status", "tests_passed", "tests_total"}: math rows by `answer` in
    `math_mode` (default lenient: these are labels) with the row's `problem` for the list-order rule
    (no_answer -> correct False; timeout/error -> None), code rows by `tests` (or meta["tests"]);
    correct is True only when every test passes; sandbox_error -> None."""
    limits = limits or SandboxLimits()
    kinds = [row_kind(r) for r in rows]
    out: list[dict[str, Any]] = [_no_verdict(r) if k == "none" else {} for r, k in zip(rows, kinds, strict=True)]
    math_idx = [i for i, k in enumerate(kinds) if k == "math"]
    code_idx = [i for i, k in enumerate(kinds) if k == "code"]
    if math_idx:
        verdicts = verify_math_batch([(rows[i]["response"], rows[i]["answer"]) for i in math_idx],
                                     think_end=think_end, workers=workers, timeout_s=math_timeout_s,
                                     mode=math_mode, compare=math_compare,
                                     problems=[rows[i].get("problem") for i in math_idx])
        for i, v in zip(math_idx, verdicts, strict=True):
            out[i] = {"correct": MATH_CORRECT.get(v.status), "verify_status": v.status,
                      "tests_passed": None, "tests_total": None}
    if code_idx:
        items = [(extract_program(rows[i]["response"], think_end), tests_from_row(rows[i])) for i in code_idx]
        cverdicts = run_tests_batch(items, limits=limits, workers=3 * workers if workers else None)
        for i, v in zip(code_idx, cverdicts, strict=True):
            correct = None if v.status == "sandbox_error" else v.status == "pass"
            out[i] = {"correct": correct, "verify_status": v.status, "tests_passed": v.passed,
                      "tests_total": v.total}
    return out
