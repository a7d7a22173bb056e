"""Code tests as the verifiers take them, from the shapes sources ship.

The verifiers (`cotforge.curate.verify.code`) run two kinds:
``{"kind": "stdio", "cases": [{"input", "output"}]}`` and ``{"kind": "assert", "test": code, "entry_point"}``.
Shipped shapes read here:
- stdio lists / `{"inputs": [...], "outputs": [...]}` (APPS, TACO `input_output`, verl `ground_truth` JSON);
- call-based `{"fn_name": f, "inputs": [[args]], "outputs": [ret]}` (APPS/TACO) -> assert code calling `f`
  (or `Solution().f` when the starter code is a class), comparing like the APPS harness (tuples as lists,
  a one-element expected list also matches its element);
- KodCode's pytest file (`from solution import f` + `def test_*():` functions) -> assert code that defines
  the tests and calls each; files that need pytest itself (fixtures, parametrize, `pytest.raises`) stay
  `{"kind": "pytest", "test": code}`, which the verifier runs with pytest in the sandbox's test jail
  (`cotforge.curate.verify.sandbox.jailed.pytestrun`);
- MBPP `test_list` (a list of assert lines);
- code-r1 / Klear-Reasoner verl `ground_truth` JSON: `{"functional": code}` (test code run after the program)
  -> assert code, `{"pytest": code}` -> as a KodCode pytest file (their `timeout` / `max_test_cases` keys
  are not test content and are dropped).
Unknown shapes are kept as JSON text (the verifiers' `parse_tests` then names what is wrong).
"""

from __future__ import annotations

import json
import re
from typing import Any

_SOLUTION_IMPORT = re.compile(r"^\s*from\s+solution\s+import\s+.+$|^\s*import\s+solution\s*$", re.M)
_TEST_DEF = re.compile(r"^def\s+(test_\w*)\s*\(\s*\)\s*:", re.M)
_NEEDS_PYTEST = re.compile(r"@pytest|pytest\.(raises|approx|fixture|mark)|^def\s+test_\w*\s*\(\s*\w", re.M)


def _as_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        return "\n".join(str(x) for x in v)
    return str(v)


def stdio(ins: list, outs: list) -> str:
    cases = [{"input": _as_text(i), "output": _as_text(o)} for i, o in zip(ins, outs, strict=True)]
    return json.dumps({"kind": "stdio", "cases": cases}, ensure_ascii=False)


def functional(fn_name: str, ins: list, outs: list, starter_code: str | None = None) -> str:
    """APPS/TACO call-based tests as assert code (the harness's comparison rules, see module doc)."""
    target = f"Solution().{fn_name}" if starter_code and "class Solution" in starter_code else fn_name
    lines = ["def _cf_same(got, exp):",
             "    got = list(got) if isinstance(got, tuple) else got",
             "    return got == exp or (isinstance(exp, list) and len(exp) == 1 and got == exp[0])",
             ""]
    for i, (args, exp) in enumerate(zip(ins, outs, strict=True)):
        call_args = args if isinstance(args, list) else [args]
        lines.append(f"assert _cf_same({target}(*{call_args!r}), {exp!r}), 'case {i}'")
    return json.dumps({"kind": "assert", "test": "\n".join(lines), "entry_point": None}, ensure_ascii=False)


def pytest_file(code: str) -> str:
    """KodCode-style pytest code as assert code when it only uses plain test functions, else kind pytest."""
    if _NEEDS_PYTEST.search(code) or not _TEST_DEF.search(code):
        return json.dumps({"kind": "pytest", "test": code, "module": "solution"}, ensure_ascii=False)
    body = _SOLUTION_IMPORT.sub("", code).strip("\n")
    calls = "\n".join(f"{name}()" for name in _TEST_DEF.findall(code))
    return json.dumps({"kind": "assert", "test": f"{body}\n\n{calls}\n", "entry_point": None}, ensure_ascii=False)


def normalize_tests(value: Any, starter_code: str | None = None) -> str | None:
    """Code tests as the JSON text the verifiers take (see module doc); unknown shapes are kept as JSON.
    MBPP's {"kind": "assert_list", "test_list", "setup"} becomes one assert script; an empty `setup` is
    dropped, so the verifier's own default applies (the LeetCode prelude for `Solution()` tests). The one
    normaliser of tests: ingest and evaluation both call it."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            return normalize_tests(json.loads(value), starter_code)
        except json.JSONDecodeError:
            return json.dumps({"kind": "assert", "test": value, "entry_point": None}) if "assert" in value else value
    if isinstance(value, dict):
        if value.get("kind") == "assert_list":  # MBPP-style registry items: one assert script
            value = {"kind": "assert", "test": "\n".join(value.get("test_list") or []), "entry_point": None,
                     **({"setup": value["setup"]} if value.get("setup") else {})}
        if value.get("kind") == "assert" and "setup" in value and not value["setup"]:
            value = {k: v for k, v in value.items() if k != "setup"}  # no setup: the verifier's default applies
        if "kind" in value:
            return json.dumps(value, ensure_ascii=False)
        if isinstance(value.get("functional"), str) and value["functional"].strip():
            return json.dumps({"kind": "assert", "test": value["functional"], "entry_point": None}, ensure_ascii=False)
        if isinstance(value.get("pytest"), str) and value["pytest"].strip():
            return pytest_file(value["pytest"])
        ins, outs = value.get("inputs"), value.get("outputs")
        if isinstance(ins, list) and isinstance(outs, list) and len(ins) == len(outs):
            if value.get("fn_name"):
                return functional(str(value["fn_name"]), ins, outs, starter_code)
            return stdio(ins, outs)
    if isinstance(value, list) and value:
        if all(isinstance(t, dict) and "input" in t and "output" in t for t in value):
            return stdio([t["input"] for t in value], [t["output"] for t in value])
        if all(isinstance(t, str) for t in value) and any("assert" in t for t in value):  # MBPP test_list
            return json.dumps({"kind": "assert", "test": "\n".join(value), "entry_point": None})
    return json.dumps(value, ensure_ascii=False, default=str)


_ASSERT_LINE = re.compile(r"^\s*assert\b", re.M)


def count_tests(tests: str | None) -> int:
    """Test cases in normalised tests (the JSON `normalize_tests` writes): stdio cases, assert statements of an
    assert script, `def test_*` functions of a pytest file; 0 for none or an unknown shape. What a minimum
    such as Klear-Reasoner's "at least 16 test cases" counts."""
    if not tests:
        return 0
    try:
        spec = json.loads(tests)
    except json.JSONDecodeError:
        return 0
    if not isinstance(spec, dict):
        return 0
    if spec.get("kind") == "stdio" and isinstance(spec.get("cases"), list):
        return len(spec["cases"])
    code = spec.get("test") if isinstance(spec.get("test"), str) else ""
    if spec.get("kind") == "assert":
        return len(_ASSERT_LINE.findall(code))
    if spec.get("kind") == "pytest":
        return len(re.findall(r"^\s*def\s+test_\w*\s*\(", code, re.M))
    return 0
