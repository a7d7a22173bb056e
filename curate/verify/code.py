"""Code verdicts: pull the program out of a response, parse a row's tests, run them in the sandbox.

Tests JSON (the row's `tests` column, or a dict):
  {"kind": "stdio", "cases": [{"input": "...", "output": "..."}]}   one sandboxed process per case;
      the outputs match when equal after stripping trailing whitespace per line (and trailing blank lines).
  {"kind": "assert", "test": "<python>", "entry_point": "<name or null>", "setup": "<python, optional>"}
      one process: setup + program, then the test code, then `check(<entry_point>)` when entry_point is
      given (HumanEval). `setup` is prepended to the program (MBPP test_setup_code, LeetCode imports).
"""

from __future__ import annotations

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from cotforge.curate.schema import load_meta
from cotforge.curate.verify.math import split_after_reasoning
from cotforge.curate.verify.sandbox import SandboxLimits, run_python

_FENCE = re.compile(r"```[ \t]*(python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)

# Imports and helpers the LeetCode-style tests (DeepCoder / LeetCodeDataset) assume are in scope.
LEETCODE_PRELUDE = '''\
from typing import *
from functools import *
from collections import *
from itertools import *
from heapq import *
from bisect import *
from string import *
from operator import *
from math import *
import math, heapq, bisect, collections, itertools, functools, string, re, random, datetime
inf = float("inf")


class ListNode:
    def __init__(self, val=0, next=None):
        self.val = val
        self.next = next


def list_node(values):
    head = cur = ListNode()
    for v in values:
        cur.next = ListNode(v)
        cur = cur.next
    return head.next


def is_same_list(a, b):
    while a and b:
        if a.val != b.val:
            return False
        a, b = a.next, b.next
    return a is None and b is None


class TreeNode:
    def __init__(self, val=0, left=None, right=None):
        self.val = val
        self.left = left
        self.right = right


def tree_node(values):
    if not values or values[0] is None:
        return None
    root = TreeNode(values[0])
    queue = deque([root])
    i = 1
    while queue and i < len(values):
        node = queue.popleft()
        if i < len(values) and values[i] is not None:
            node.left = TreeNode(values[i])
            queue.append(node.left)
        i += 1
        if i < len(values) and values[i] is not None:
            node.right = TreeNode(values[i])
            queue.append(node.right)
        i += 1
    return root


def is_same_tree(p, q):
    if not p and not q:
        return True
    if not p or not q:
        return False
    return p.val == q.val and is_same_tree(p.left, q.left) and is_same_tree(p.right, q.right)
'''


class TestsError(ValueError):
    """A row's `tests` value is not one of the two accepted kinds (message names the problem)."""


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


def extract_program(response: str, think_end: str | None = "</think>") -> str:
    """The last ```python fenced block after the reasoning block, else the whole answer text.

    Returns "" when a reasoning block was opened and never closed (see `split_after_reasoning`)."""
    text = split_after_reasoning(response or "", think_end)
    if text is None:
        return ""
    blocks = [(lang, body) for lang, body in _FENCE.findall(text)]
    py = [body for lang, body in blocks if lang]
    if py:
        return py[-1].strip("\n") + "\n"
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
    raise TestsError(f"tests: unknown kind {kind!r} (expected 'stdio' or 'assert')")


def assert_setup(spec: dict[str, Any]) -> str:
    """Code run before the program: the test's own `setup`, else the LeetCode prelude for LeetCode-style
    tests (`check(Solution().method)`), whose reference solutions assume `List`, `TreeNode`... in scope."""
    if spec.get("setup") is not None:
        return spec["setup"]
    return LEETCODE_PRELUDE if "Solution()" in spec["test"] else ""


def outputs_match(got: str, expected: str) -> bool:
    """Compare program output with the expected output, ignoring trailing whitespace per line and at the end."""
    def norm(s: str) -> list[str]:
        lines = [ln.rstrip() for ln in s.replace("\r\n", "\n").split("\n")]
        while lines and not lines[-1]:
            lines.pop()
        return lines
    return norm(got) == norm(expected)


def _stdio_case(program: str, case: dict[str, str], limits: SandboxLimits) -> tuple[str, str]:
    """Run one stdio case; (status, detail)."""
    r = run_python(program, stdin=case["input"], mode="script", limits=limits)
    if r.status != "pass":
        return r.status, r.detail
    if outputs_match(r.stdout, case["output"]):
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


def run_tests(program: str, tests: str | dict[str, Any], limits: SandboxLimits | None = None,
              workers: int = 1) -> CodeVerdict:
    """Run `program` against `tests` in the sandbox (stdio: one process per case, `workers` at a time;
    assert: one process counting as one test). Raises TestsError for malformed tests."""
    limits = limits or SandboxLimits()
    spec = parse_tests(tests)
    if not program.strip():
        return _no_program(spec)
    if spec["kind"] == "assert":
        r = run_python(program, mode="assert", test=spec["test"], setup=assert_setup(spec),
                       entry_point=spec.get("entry_point"), limits=limits)
        return _verdict([(r.status, r.detail)])
    cases = spec["cases"]
    if workers <= 1 or len(cases) == 1:
        return _verdict([_stdio_case(program, c, limits) for c in cases])
    with ThreadPoolExecutor(max_workers=workers) as ex:
        return _verdict(list(ex.map(lambda c: _stdio_case(program, c, limits), cases)))


def run_tests_batch(items: list[tuple[str, str | dict[str, Any]]], limits: SandboxLimits | None = None,
                    workers: int | None = None) -> list[CodeVerdict]:
    """Run many (program, tests) pairs, `workers` sandboxed processes at a time (default: 3 x CPU count,
    since a short run spends much of its time waiting on process and namespace set-up); order preserved.
    Malformed tests give a verdict with status "sandbox_error" and the reason in `details` instead of raising."""
    limits = limits or SandboxLimits()
    workers = workers or 3 * (os.cpu_count() or 1)
    # Flatten to one job per sandboxed process so stdio cases of one program spread over workers.
    jobs: list[tuple[int, str, dict[str, Any] | None]] = []
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
            jobs.extend((i, program, {"kind": "stdio", "cases": [c]}) for c in spec["cases"])
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
