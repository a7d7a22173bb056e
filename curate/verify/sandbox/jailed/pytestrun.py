"""The `pytest` test kind inside the test process: a KodCode-style pytest file (`from solution import f`,
fixtures, `parametrize`, `pytest.raises`, `approx`, `capsys`, `tmp_path`) run by pytest itself, in the
jailed test process, against a `solution` module whose functions and classes are proxies of the program
(which lives in its own jail and only answers calls, as for assert tests).

Who decides: outcomes come from pytest's own hooks in this process (`_Outcomes`), never from output. The
program cannot raise pytest's outcome exceptions (its exceptions arrive as built-in classes, see
`codec.make_exception`), and a channel failure (the program exited or sent garbage) decides the verdict even
when a test caught the exception (`pytest.raises(Exception)`). `from solution import *` exports only names the
test file does not bind itself (so a program cannot stand behind the file's own `approx` or helpers) and no
builtins the test uses on non-literals (see `names.overridable_names`).

The file is written to a per-run folder under this jail's /tmp (the zygote removes it when the run's
process is reaped), pytest runs with plugin autoload, the cache provider and conftest files off.
"""

from __future__ import annotations

import ast
import builtins
import os
import sys

from . import guards, share  # noqa: TID251 - inside the sandbox this folder is the package `jailed`
from .channel import Channel  # noqa: TID251
from .names import bind_program_names, overridable_names  # noqa: TID251

MAX_RESULTS = 1000


class _Outcomes:
    """pytest plugin: per test id, passed / failed (with the exception class) / skipped; collection errors."""

    def __init__(self) -> None:
        self.tests: dict[str, str] = {}
        self.first_failure: tuple[str, str] | None = None
        self.collect_errors: list[str] = []

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.collect_errors.append(_crash(report))

    def pytest_runtest_logreport(self, report) -> None:
        prev = self.tests.get(report.nodeid)
        if report.failed:
            self.tests[report.nodeid] = "fail" if _assertion_like(report) else "runtime_error"
            if self.first_failure is None:
                self.first_failure = (report.nodeid, _crash(report))
        elif report.skipped and prev is None:
            self.tests[report.nodeid] = "skipped"
        elif report.passed and report.when == "call" and prev is None:
            self.tests[report.nodeid] = "pass"


def _assertion_like(report) -> bool:
    """A failed assertion or pytest's own failure (`pytest.raises` that saw nothing, `pytest.fail`), as
    opposed to an error raised while the test ran."""
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    message = str(getattr(crash, "message", ""))
    return message.startswith(("assert", "AssertionError", "Failed", "DID NOT RAISE"))


def _crash(report) -> str:
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    if crash is not None:
        return f"{report.nodeid}: {crash.message}"[:500]
    text = str(getattr(report, "longrepr", ""))
    errors = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ")]  # pytest's error lines
    return f"{report.nodeid}: {errors[-1] if errors else text[-300:]}"[:500]


def test_bindings(source: str, module: str) -> set[str]:
    """Names the test file binds itself anywhere (defs, classes, assignments, imports) other than imports
    from the solution module."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.Import):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module != module:
            out.update(a.asname or a.name for a in node.names if a.name != "*")
    return out


def solution_module(ch: Channel, names: dict, module: str, source: str):
    """A module object standing for the program: its functions and classes as proxies (explicit
    `from solution import f` gets the program's f, whatever its name); `__all__` limited as the module
    docstring says."""
    mod = type(sys)(module)
    mod.__file__ = f"/sbx/{module}.py"
    ns = vars(mod)
    bind_program_names(ns, names, set(), _Everything(), ch)
    values = {k for k, kind in names.items() if kind == "value" and type(k) is str and k not in ns}

    def __getattr__(name: str):  # noqa: N807 - module-level constants, fetched when the file imports them
        if name in values:
            return ch.attr(None, name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    taken = test_bindings(source, module)
    overridable = overridable_names(source)
    mod.__all__ = sorted(k for k in set(ns) | values if not k.startswith("_") and k not in taken and
                         (not hasattr(builtins, k) or k in overridable))
    ns["__getattr__"] = __getattr__
    return mod


class _Everything:
    def __contains__(self, item) -> bool:
        return True


def run_file(ch: Channel, names: dict, spec: dict) -> tuple[str, str, list[str]]:
    """Run the pytest file of `spec` against the program; (status, detail, per-test statuses)."""
    import pytest

    guards.install_pytest_guard()
    module = spec["pytest_module"]
    sys.modules[module] = solution_module(ch, names, module, spec["test"])
    ch.forward = True
    folder = os.getcwd()  # the run's own folder (`testrunner.run_one`), removed when the run ends
    path = os.path.join(folder, f"test_{module}.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(spec["test"])
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    outcomes = _Outcomes()
    basetemp = f"{folder}/tmp"
    if spec.get("share"):
        basetemp = os.path.join(spec["share"], "pytest")
        share.open_pytest_folders()
    code = pytest.main([path, "-q", "-p", "no:cacheprovider", "-p", "no:stepwise", "--noconftest",
                        "-o", "addopts=", "--rootdir", folder, f"--basetemp={basetemp}",
                        "-W", "ignore::pytest.PytestCollectionWarning"], plugins=[outcomes])
    results = list(outcomes.tests.values())[:MAX_RESULTS]
    return (*_verdict(int(code), outcomes), results)


def _verdict(code: int, outcomes: _Outcomes) -> tuple[str, str]:
    results = list(outcomes.tests.values())
    passed = results.count("pass")
    if outcomes.collect_errors:
        return "runtime_error", "collection: " + outcomes.collect_errors[0]
    if outcomes.first_failure is not None:
        nodeid, message = outcomes.first_failure
        status = outcomes.tests.get(nodeid, "fail")
        return (status if status in ("fail", "runtime_error") else "fail"), \
            f"{passed}/{len(results)} tests passed; first failure {message}"
    if code == 0 and passed:
        return "pass", f"{passed}/{len(results)} tests passed"
    if not passed:  # collected nothing, or every test skipped itself: no test ran, so no pass
        return "fail", f"no test of the file ran (pytest exit status {code}, {len(results)} tests, all skipped)"
    return "runtime_error", f"pytest exit status {code} ({passed}/{len(results)} tests passed)"
