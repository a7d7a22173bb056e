"""Code verdicts: pull the program out of a response, parse a row's tests, run them in the sandbox.

Tests JSON (the row's `tests` column, or a dict):
  {"kind": "stdio", "cases": [{"input": "...", "output": "..."}], "checker": "exact", "float_tol": 1e-6}
      one sandboxed run per case; its stdout is compared here, outside the run, by `outputs_match`:
      "exact" (default): equal line by line, ignoring trailing whitespace per line and trailing blank lines;
      "tokens": equal whitespace-separated tokens; "float": tokens equal, or both numbers within
      float_tol (absolute or relative), as APPS / LiveCodeBench checkers allow.
  {"kind": "assert", "test": "<python>", "entry_point": "<name or null>", "setup": "<python, optional>"}
      one run counting as one test: `setup` (MBPP test_setup_code, the LeetCode prelude) runs in both the
      program's process and the test process, the program in its own, the test code (then
      `check(<entry_point>)` when given, HumanEval) in the test process (see `sandbox.py`).
  {"kind": "pytest", "test": "<pytest file>", "module": "solution"}
      KodCode files that need pytest (fixtures, parametrize, pytest.raises, approx, capsys, tmp_path):
      pytest runs the file in the test process against the program imported as `module`
      (`jailed/pytestrun.py`); each collected test counts as one test (a run that ends at a limit, or
      whose file cannot be collected, counts as one).
"""

from __future__ import annotations

import json
import math
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from cotforge.curate.core.schema import load_meta
from cotforge.curate.verify.leetcode import LEETCODE_PRELUDE
from cotforge.curate.verify.math import split_after_reasoning
from cotforge.curate.verify.sandbox import SandboxLimits, run_python, warm_setup

__all__ = ["CHECKERS", "CodeVerdict", "TestsError", "default_workers", "extract_program",
           "outputs_match", "parse_tests", "run_tests", "run_tests_batch", "tests_from_row"]
CHECKERS = ("exact", "tokens", "float")

warm_setup(LEETCODE_PRELUDE)  # the setup of every LeetCode-style test: run once per test server
_FENCE = re.compile(r"```[ \t]*(python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)

class TestsError(ValueError):
    """A row's `tests` value is not one of the accepted kinds (message names the problem)."""


@dataclass
class CodeVerdict:
    """Result of running a program against all of a row's tests."""

    status: str  # "pass" if all pass, else the first non-pass status ("no_answer": no program found)
    passed: int
    total: int
    results: list[str]  # per-test statuses
    details: list[str] = field(default_factory=list)

    @property
    def pass_fraction(self) -> float:
        """passed / total (0.0 when there are no tests)."""
        return self.passed / self.total if self.total else 0.0


def extract_program(response: str, think_end: str | None = "</think>", require_fence: bool = False) -> str:
    """The last ```python fenced block after the reasoning block, else (`require_fence`) the last fenced block
    of any language, else (not `require_fence`) the whole answer text, for rows whose response is bare code.

    Returns "" when a reasoning block was opened and never closed (see `split_after_reasoning`), and, with
    `require_fence`, when the answer has no fenced block (a prose answer: the RL reward scores it as
    `no_answer`, not as a program that fails to parse)."""
    text = split_after_reasoning(response or "", think_end)
    if text is None:
        return ""
    blocks = [(lang, body) for lang, body in _FENCE.findall(text)]
    py = [body for lang, body in blocks if lang]
    if py:
        return py[-1].strip("\n") + "\n"
    if require_fence:
        return blocks[-1][1].strip("\n") + "\n" if blocks and blocks[-1][1].strip() else ""
    return text.strip("\n") + "\n" if text.strip() else ""


def parse_tests(tests: str | dict[str, Any]) -> dict[str, Any]:
    """Validate a tests value (JSON text or dict) and return it as a dict; TestsError says what is wrong."""
    if isinstance(tests, str):
        try:
            tests = json.loads(tests)
        except json.JSONDecodeError as e:
            raise TestsError(f"tests: invalid JSON ({e})") from e
    if not isinstance(tests, dict):
        raise TestsError(f"tests: expected a JSON object, got {type(tests).__name__}")
    kind = tests.get("kind")
    if kind == "stdio":
        cases = tests.get("cases")
        if not isinstance(cases, list) or not cases:
            raise TestsError("tests: kind 'stdio' needs a non-empty list 'cases'")
        for i, c in enumerate(cases):
            if not isinstance(c, dict) or not isinstance(c.get("input"), str) or not isinstance(c.get("output"), str):
                raise TestsError(f"tests: cases[{i}] needs string fields 'input' and 'output'")
        if tests.get("checker", "exact") not in CHECKERS:
            raise TestsError(f"tests: 'checker' must be one of {list(CHECKERS)}, got {tests.get('checker')!r}")
        tol = tests.get("float_tol", 1e-6)
        if isinstance(tol, bool) or not isinstance(tol, int | float) or not 0 <= tol < 1:
            raise TestsError(f"tests: 'float_tol' must be a number in [0, 1), got {tol!r}")
        return tests
    if kind == "assert":
        if not isinstance(tests.get("test"), str) or not tests["test"].strip():
            raise TestsError("tests: kind 'assert' needs a non-empty string 'test'")
        ep = tests.get("entry_point")
        if ep is not None and not isinstance(ep, str):
            raise TestsError("tests: 'entry_point' must be a string or null")
        if tests.get("setup") is not None and not isinstance(tests["setup"], str):
            raise TestsError("tests: 'setup' must be a string")
        return tests
    if kind == "pytest":
        if not isinstance(tests.get("test"), str) or not tests["test"].strip():
            raise TestsError("tests: kind 'pytest' needs a non-empty string 'test'")
        module = tests.get("module", "solution")
        if not isinstance(module, str) or not module.isidentifier():
            raise TestsError(f"tests: 'module' must be a module name, got {module!r}")
        return tests
    raise TestsError(f"tests: unknown kind {kind!r} (expected 'stdio', 'assert' or 'pytest')")


def assert_setup(spec: dict[str, Any]) -> str:
    """Code run before the program: the test's own `setup`, else the LeetCode prelude for LeetCode-style
    tests (`check(Solution().method)`), whose reference solutions assume `List`, `TreeNode`... in scope."""
    if spec.get("setup") is not None:
        return spec["setup"]
    return LEETCODE_PRELUDE if "Solution()" in spec["test"] else ""


def outputs_match(got: str, expected: str, checker: str = "exact", float_tol: float = 1e-6) -> bool:
    """Compare a program's stdout with the expected output under `checker` (see the module docstring)."""
    if checker == "exact":
        return _lines(got) == _lines(expected)
    a, b = got.split(), expected.split()
    if checker == "tokens" or len(a) != len(b):
        return a == b
    return all(x == y or _close(x, y, float_tol) for x, y in zip(a, b, strict=True))


def _lines(s: str) -> list[str]:
    lines = [ln.rstrip() for ln in s.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _close(x: str, y: str, tol: float) -> bool:
    """Both tokens are finite numbers within `tol` of each other (absolute, or relative to the expected)."""
    try:
        fx, fy = float(x), float(y)
    except ValueError:
        return False
    if not (math.isfinite(fx) and math.isfinite(fy)):
        return False
    return abs(fx - fy) <= tol or abs(fx - fy) <= tol * abs(fy)


def _stdio_case(program: str, case: dict[str, str], limits: SandboxLimits, checker: str,
                float_tol: float) -> tuple[str, str]:
    """Run one stdio case; (status, detail)."""
    r = run_python(program, stdin=case["input"], mode="script", limits=limits)
    if r.status != "pass":
        return r.status, r.detail
    if outputs_match(r.stdout, case["output"], checker, float_tol):
        return "pass", ""
    return "fail", f"wrong output: {r.stdout[:80]!r}"


def _verdict(results: list[tuple[str, str]]) -> CodeVerdict:
    statuses = [s for s, _ in results]
    passed = sum(s == "pass" for s in statuses)
    first_bad = next((s for s in statuses if s != "pass"), "pass")
    return CodeVerdict(first_bad, passed, len(statuses), statuses, [d for _, d in results])


def _no_program(tests: dict[str, Any]) -> CodeVerdict:
    n = len(tests["cases"]) if tests["kind"] == "stdio" else 1
    return CodeVerdict("no_answer", 0, n, ["fail"] * n, ["no program"] * n)


def default_workers() -> int:
    """Concurrent sandboxed runs by default: two per CPU this process may use. Limits are CPU seconds, so
    contention cannot time out an honest run; the second run per CPU fills the time a run waits on its jail's
    set-up and on the program <-> test round trips (DeepCoder references on 2 cores: 17.8 runs/s with 4
    at once vs 12.0 with 2, same load)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    return 2 * max(1, cpus)


def run_tests(program: str, tests: str | dict[str, Any], limits: SandboxLimits | None = None,
              workers: int = 1) -> CodeVerdict:
    """Run `program` against `tests` in the sandbox (stdio: one run per case, `workers` at a time;
    assert: one run counting as one test). Raises TestsError for malformed tests."""
    limits = limits or SandboxLimits()
    spec = parse_tests(tests)
    if not program.strip():
        return _no_program(spec)
    if spec["kind"] == "assert":
        r = run_python(program, mode="assert", test=spec["test"], setup=assert_setup(spec),
                       entry_point=spec.get("entry_point"), limits=limits)
        return _verdict([(r.status, r.detail)])
    if spec["kind"] == "pytest":
        r = run_python(program, mode="assert", test=spec["test"], limits=limits,
                       pytest_module=spec.get("module", "solution"))
        per_test = r.extra.get("results") or [r.status]
        return _verdict([(s, "" if s == "pass" else r.detail) for s in per_test])
    cases = spec["cases"]
    checker, tol = spec.get("checker", "exact"), spec.get("float_tol", 1e-6)
    if workers <= 1 or len(cases) == 1:
        return _verdict([_stdio_case(program, c, limits, checker, tol) for c in cases])
    with ThreadPoolExecutor(max_workers=workers) as ex:
        return _verdict(list(ex.map(lambda c: _stdio_case(program, c, limits, checker, tol), cases)))


def run_tests_batch(items: list[tuple[str, str | dict[str, Any]]], limits: SandboxLimits | None = None,
                    workers: int | None = None) -> list[CodeVerdict]:
    """Run many (program, tests) pairs, `workers` sandboxed runs at a time (default `default_workers()`);
    order preserved. Malformed tests give a verdict with status "sandbox_error" and the reason in `details`
    instead of raising; a sandbox that cannot be built at all raises SandboxUnavailable."""
    limits = limits or SandboxLimits()
    workers = workers or default_workers()
    # Flatten to one job per sandboxed run so stdio cases of one program spread over workers.
    jobs: list[tuple[int, str, dict[str, Any]]] = []
    fixed: dict[int, CodeVerdict] = {}
    for i, (program, tests) in enumerate(items):
        try:
            spec = parse_tests(tests)
        except TestsError as e:
            fixed[i] = CodeVerdict("sandbox_error", 0, 0, [], [str(e)])
            continue
        if not program.strip():
            fixed[i] = _no_program(spec)
        elif spec["kind"] == "stdio":
            jobs.extend((i, program, {**spec, "cases": [c]}) for c in spec["cases"])
        else:
            jobs.append((i, program, spec))
    with ThreadPoolExecutor(max_workers=workers) as ex:
        outs = list(ex.map(lambda j: run_tests(j[1], j[2], limits), jobs))
    per_item: dict[int, list[tuple[str, str]]] = {}
    for (i, _, _), v in zip(jobs, outs, strict=True):
        per_item.setdefault(i, []).extend(zip(v.results, v.details, strict=True))
    return [fixed[i] if i in fixed else _verdict(per_item[i]) for i in range(len(items))]


def tests_from_row(row: dict[str, Any]) -> dict[str, Any] | str | None:
    """A row's tests: the `tests` column, else a LeetCode-style `check(...)` test in meta["tests"]
    (DeepCoder: the test calls `check(Solution().method)` itself, so no entry point; the LeetCode
    prelude supplies the imports and ListNode/TreeNode helpers). None when the row has no tests."""
    tests = row.get("tests")
    if isinstance(tests, dict) or (isinstance(tests, str) and tests.strip()):
        return tests
    meta = load_meta(row.get("meta"))
    if isinstance(meta.get("tests"), str) and "check(" in meta["tests"]:
        return {"kind": "assert", "test": meta["tests"], "entry_point": None, "setup": LEETCODE_PRELUDE}
    return None
