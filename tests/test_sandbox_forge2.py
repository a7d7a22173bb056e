"""Round 2 of hostile programs (issue 30), one class per root cause, several variants each:

- the test process imports a module the program names (a renamed module object, a forged announcement on
  the channel; standard-library and numpy modules whose import raises SystemExit(0) / runs a tool);
- SystemExit (or any BaseException other than the test's own assertion) mapped to a pass; a test that did
  not run reported as a pass;
- the program's process leaving (os._exit at import or in a call, a signal to itself, exiting from atexit);
- degenerate comparisons: an empty numpy array "equals" any scalar under approx / allclose / np.all(a == x);
- dodges: stretching the wall clock with spinners, a pytest file that skips itself;
- resources of the test process: a huge nested message, nothing left running or on disk after the verdict.

Every case below forged a pass (or dodged) on the branch's base (f722fcd), see the report of issue 30; each
must now end in a non-pass status. The forgery cases run as one batch (module fixture) to keep this fast.
"""

from __future__ import annotations

import threading
import time

import pytest
from test_sandbox_hostile import _kill_leftovers, _sandbox_pids

from cotforge.curate.verify.code import run_tests, run_tests_batch
from cotforge.curate.verify.leetcode import LEETCODE_PRELUDE
from cotforge.curate.verify.sandbox import UID_BASE, UID_SPAN, SandboxLimits, run_python

LIM = SandboxLimits(wall_s=4.0, cpu_s=2.0, memory_mb=256, nproc=16, fsize_mb=4, output_bytes=1 << 16)

MBPP = {"kind": "assert", "entry_point": None, "test": "assert add(1, 2) == 3\nassert add(5, 7) == 12\n"}
HUMANEVAL = {"kind": "assert", "entry_point": "add",
             "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(5, 7) == 12\n"}
LEETCODE = {"kind": "assert", "entry_point": None, "setup": LEETCODE_PRELUDE,
            "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n\n\ncheck(Solution().add)\n"}
PYTEST = {"kind": "pytest", "module": "solution",
          "test": "from solution import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"}
STYLES = {"mbpp": MBPP, "humaneval": HUMANEVAL, "leetcode": LEETCODE, "pytest": PYTEST}
WRONG = "def add(a, b):\n    return 0\n\n\nclass Solution:\n    def add(self, a, b):\n        return 0\n"

# --- class 1: the test process imports a module the program names ---------------------------------------
RENAMED = {  # a module object of the program whose __name__ names a module with a side effect on import
    "venv_main": "import types\n_m = types.ModuleType('venv.__main__')\n",
    "f2py_main": "import types\n_m = types.ModuleType('numpy.f2py.__main__')\n",
    "lib2to3_main": "import types\n_m = types.ModuleType('lib2to3.__main__')\n",
    "renamed_real_module": "import json as _m\n_m.__name__ = 'venv.__main__'\n",
    "pytest_main": "import types\n_m = types.ModuleType('pytest.__main__')\n",
}
# the program writes its own announcement on the channel before the harness does
FORGED_HELLO = '''
import os
_line = b'{"op": "hello", "names": {"_m": "module:venv.__main__", "add": "function", "Solution": "class"}, ' \\
        b'"error": null}\\n'
for _fd in range(3, 64):
    try:
        os.write(_fd, _line)
    except OSError:
        pass
'''
CASES: dict[str, tuple[str, dict]] = {}
for _name, _code in {**RENAMED, "forged_hello": FORGED_HELLO}.items():
    for _style, _tests in STYLES.items():
        CASES[f"{_name}-{_style}"] = (_code + "\n" + WRONG, _tests)

# --- class 2: the program's process leaves instead of answering -------------------------------------------
LEAVING = {
    "os_exit_at_import": "import os\nos._exit(0)\n",
    "os_exit_in_call": "import os\n\n\ndef add(a, b):\n    os._exit(0)\n\n\nclass Solution:\n"
                       "    def add(self, a, b):\n        os._exit(0)\n",
    "sigkill_self_in_call": "import os, signal\n\n\ndef add(a, b):\n    os.kill(os.getpid(), signal.SIGKILL)\n\n\n"
                            "class Solution:\n    def add(self, a, b):\n        os.kill(os.getpid(), signal.SIGKILL)\n",
    "sys_exit_in_call": "import sys\n\n\ndef add(a, b):\n    sys.exit(0)\n\n\nclass Solution:\n"
                        "    def add(self, a, b):\n        raise SystemExit\n",
    "atexit_exit": "import atexit, os\natexit.register(lambda: os._exit(0))\nraise SystemExit(0)\n",
    "alarm_self": "import signal, time\nsignal.alarm(1)\n\n\ndef add(a, b):\n    time.sleep(3)\n    return 0\n\n\n"
                  "class Solution:\n    def add(self, a, b):\n        time.sleep(3)\n        return 0\n",
}
for _name, _code in LEAVING.items():
    for _style, _tests in STYLES.items():
        CASES[f"{_name}-{_style}"] = (_code + ("\n" + WRONG if "def add" not in _code else ""), _tests)

# --- class 3: degenerate comparisons with an empty numpy array ---------------------------------------------
EMPTY = "import numpy as np\n\n\ndef f(x):\n    return np.array([])\n"
EMPTY_TESTS = {
    "assert_allclose": "import numpy as np\nnp.testing.assert_allclose(f(1), 3.0)\n",
    "assert_almost_equal": "import numpy as np\nnp.testing.assert_almost_equal(f(1), 3.0)\n",
    "assert_array_equal": "import numpy as np\nnp.testing.assert_array_equal(f(1), 3.0)\n",
    "allclose": "import numpy as np\nassert np.allclose(f(1), 3.0)\n",
    "np_all_eq": "import numpy as np\nassert np.all(f(1) == 3.0)\n",
    "method_all_eq": "assert (f(1) == 3.0).all()\n",
    "size_one_expected": "import numpy as np\nassert np.allclose(f(1), np.array([3.0]))\n",
}
for _name, _test in EMPTY_TESTS.items():
    CASES[f"empty_array-{_name}"] = (EMPTY, {"kind": "assert", "entry_point": None, "test": _test})
PYTEST_EMPTY = {  # pytest is in the test jail only for the pytest kind
    "approx": "assert f(1) == pytest.approx(3.0)",
    "approx_reflected": "assert pytest.approx(3.0) == f(1)",
    "approx_list": "assert f(1) == pytest.approx([3.0])",
}
for _name, _line in PYTEST_EMPTY.items():
    CASES[f"empty_array-{_name}"] = (EMPTY, {"kind": "pytest", "module": "solution", "test": (
        f"import pytest\nfrom solution import f\n\n\ndef test_f():\n    {_line}\n")})
# --- class 4: a pytest file that skips itself (or collects nothing) is the program's failure -------------
CASES["pytest_skips_itself"] = ("def nothing():\n    return 0\n", {"kind": "pytest", "module": "solution", "test": (
    "import pytest\ntry:\n    from solution import add\nexcept ImportError:\n"
    "    pytest.skip('no add', allow_module_level=True)\n\n\ndef test_add():\n    assert add(1, 2) == 3\n")})
CASES["pytest_importorskip"] = ("def nothing():\n    return 0\n", {"kind": "pytest", "module": "solution", "test": (
    "import pytest\nsol = pytest.importorskip('solution_missing')\n\n\ndef test_add():\n"
    "    assert sol.add(1, 2) == 3\n")})

# --- class 5: the references and stand-ins of the honest forms cannot decide a verdict ------------------------
REFS = {
    # a program object whose __eq__ is always true, against a plain expected value and against a program object
    "always_equal_object": ("class Any:\n    def __eq__(self, o):\n        return True\n    __hash__ = object.__hash__\n\n\n"
                            "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
                            "    def __eq__(self, o):\n        return True\n    __hash__ = object.__hash__\n\n\n"
                            "def f(x):\n    return Any()\n\n\ndef mid(a, b):\n    return Point(0, 0)\n",
                            "assert f(1) == 3\nassert mid(Point(0, 0), Point(4, 6)) == Point(2, 3)\n"),
    "always_equal_point_only": ("class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
                                "    def __eq__(self, o):\n        return True\n    __hash__ = object.__hash__\n\n\n"
                                "def mid(a, b):\n    return Point(0, 0)\n",
                                "assert mid(Point(0, 0), Point(4, 6)) == Point(2, 3)\n"),
    # an exception claiming to be the one the test expects by its attributes and message
    "exception_attrs_forged": ("class E(Exception):\n    pass\n\n\ndef f(x):\n    e = E('ValueError')\n"
                               "    e.__class__name = 'ValueError'\n    e._cf_message = 'boom'\n    raise e\n",
                               "try:\n    f(1)\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError('no')\n"),
    # an endless generator where the test reads it whole
    "endless_generator": ("def f(x):\n    while True:\n        yield [0] * 1000\n", "assert list(f(1)) == [1, 2, 3]\n"),
    # a test subclass of a program class whose __eq__ is always true: equality is still computed on data
    "subclass_of_always_equal_class": ("class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
                                       "    def __eq__(self, o):\n        return True\n    __hash__ = object.__hash__\n\n\n"
                                       "def mid(a, b):\n    return Point(0, 0)\n",
                                       "class P(Point):\n    pass\n\n\nassert mid(P(0, 0), P(4, 6)) == P(2, 3)\n"),
    # a program method named like a dunder or a reference's internals is never put on the stand-in
    "methods_named_like_internals": ("class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
                                     "    def _ch(self):\n        return 1\n    def mro(self):\n        return 1\n\n\n"
                                     "Point.__eq__ = lambda s, o: True\n\n\ndef mid(a, b):\n    return Point(0, 0)\n",
                                     "class P(Point):\n    pass\n\n\nassert mid(P(0, 0), P(4, 6)) == Point(2, 3)\n"),
    # a truthy stand-in: the program's 'function' is an exception class (constructing it runs nothing)
    "exception_class_as_function": ("class f(Exception):\n    pass\n", "assert f(1)\nassert f(2)\n"),
}
for _name, (_prog, _test) in REFS.items():
    CASES[f"refs-{_name}"] = (_prog, {"kind": "assert", "entry_point": None, "test": _test})


@pytest.fixture(scope="module")
def forged():
    """All cases in one batch: ({case: CodeVerdict}, leftover sandbox processes)."""
    names = list(CASES)
    verdicts = run_tests_batch([CASES[n] for n in names], LIM)
    time.sleep(0.3)
    left = _sandbox_pids()
    _kill_leftovers(left)
    return dict(zip(names, verdicts, strict=True)), left


def _check(forged, case: str) -> None:
    verdicts, left = forged
    v = verdicts[case]
    assert v.status not in ("pass", "sandbox_error"), f"{case}: {v.status} ({v.details})"
    assert v.passed == 0, (case, v)
    assert left == []


@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("route", list(RENAMED) + ["forged_hello"])
def test_program_named_module_is_never_imported(forged, route, style):
    _check(forged, f"{route}-{style}")


@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("route", list(LEAVING))
def test_program_that_leaves_never_passes(forged, route, style):
    _check(forged, f"{route}-{style}")


@pytest.mark.parametrize("form", list(EMPTY_TESTS) + list(PYTEST_EMPTY))
def test_empty_array_never_equals_a_scalar(forged, form):
    _check(forged, f"empty_array-{form}")


@pytest.mark.parametrize("form", list(REFS))
def test_references_cannot_decide_a_verdict(forged, form):
    _check(forged, f"refs-{form}")


@pytest.mark.parametrize("case", ["pytest_skips_itself", "pytest_importorskip"])
def test_pytest_file_that_runs_no_test_is_the_programs_failure(forged, case):
    _check(forged, case)


def test_honest_controls_of_the_forge_cases_pass():
    """Control: the same tests pass a right program, so the failures above are not vacuous."""
    right = ("import numpy as np\n\n\ndef add(a, b):\n    return a + b\n\n\ndef f(x):\n    return np.array([3.0])\n\n\n"
             "class Solution:\n    def add(self, a, b):\n        return a + b\n")
    items = [(right, t) for t in STYLES.values()] + [
        (right, {"kind": "assert", "entry_point": None, "test": t}) for t in EMPTY_TESTS.values()] + [
        (right, CASES[f"empty_array-{n}"][1]) for n in PYTEST_EMPTY]
    got = run_tests_batch(items, LIM)
    assert [v.status for v in got] == ["pass"] * len(items), [(v.status, v.details) for v in got]


# --- SystemExit in the test process is never a pass -------------------------------------------------------
@pytest.mark.parametrize("exit_call", ["exit()", "raise SystemExit(0)", "import sys\nsys.exit(None)"])
def test_a_test_that_exits_before_its_asserts_is_not_a_pass(exit_call):
    v = run_tests(WRONG, {"kind": "assert", "entry_point": None, "test": exit_call + "\nassert add(1, 2) == 3\n"},
                  LIM)
    assert v.status != "pass", v


def test_a_test_that_never_calls_the_program_is_not_a_pass():
    """The test code ran without error but never reached the program (e.g. its asserts sit in a function
    nobody calls): no evidence about the program, so no pass."""
    v = run_tests(WRONG, {"kind": "assert", "entry_point": None,
                          "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"}, LIM)
    assert v.status != "pass", v


# --- the wall clock cannot be stretched --------------------------------------------------------------------
def test_spinners_do_not_stretch_the_wall_clock():
    """A thread spinning (its CPU time and run delay counted as 'not sleeping' before, which stretched the
    limit up to the absolute cap) while the main thread sleeps past the limit: the run ends at the
    wall-clock limit plus the fixed allowance, measured on the monotonic clock."""
    prog = ("import threading, time\n"
            "def spin():\n    while True:\n        pass\n"
            "threading.Thread(target=spin, daemon=True).start()\ntime.sleep(60)\nprint('slept')\n")
    lim = SandboxLimits(wall_s=1.0, cpu_s=30.0, memory_mb=512, nproc=16)
    if hasattr(lim, "wall_allowance_s"):
        lim.wall_allowance_s = 2.0
    t0 = time.monotonic()
    r = run_python(prog, limits=lim)
    took = time.monotonic() - t0
    assert r.status == "timeout" and "slept" not in r.stdout
    assert took < lim.wall_s + getattr(lim, "wall_allowance_s", 0.0) + 5, took


# --- resources of the test process -----------------------------------------------------------------------
def test_huge_nested_message_stays_within_the_run_memory():
    """The program writes its own 50 MB answer of nested empty lists on the channel (cheap for it, ~1 GiB of
    lists when parsed): the test process may not grow past the run's memory limit for it, and the verdict
    is not a pass (issue 30: ~1 GiB RSS for a run capped at 256 MiB)."""
    prog = ("import os\n\n\ndef add(a, b):\n    msg = b'{\"op\": \"ret\", \"value\": [\"L\"' + b',[]' * 16_000_000 + b']}\\n'\n"
            "    for fd in range(3, 64):\n        try:\n            os.write(fd, msg)\n        except OSError:\n"
            "            pass\n    import time\n    time.sleep(30)\n")
    lim = SandboxLimits(wall_s=8.0, cpu_s=4.0, memory_mb=256, nproc=16)
    run_tests(WRONG, MBPP, LIM)  # the test server is up: its idle size is the baseline
    base = max(_test_rss().values(), default=0)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max([peak[0], *_test_rss().values()])
            time.sleep(0.02)

    t = threading.Thread(target=sample)
    t.start()
    try:
        v = run_tests(prog, MBPP, lim)
    finally:
        done.set()
        t.join()
    assert v.status in ("memory", "runtime_error", "fail"), v
    assert peak[0] - base < (lim.memory_mb + 64) << 20, (peak[0] >> 20, base >> 20)


def _test_rss() -> dict[int, int]:
    """RSS in bytes of the test server's processes (its uid range)."""
    from pathlib import Path

    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if not UID_BASE + UID_SPAN <= d.stat().st_uid < UID_BASE + 2 * UID_SPAN:
                continue
            line = next(ln for ln in (d / "status").read_text().splitlines() if ln.startswith("VmRSS:"))
            out[int(d.name)] = int(line.split()[1]) << 10
        except (OSError, StopIteration, ValueError):
            continue
    return out


def test_nothing_is_left_after_the_verdict():
    """A program that makes the test process start tools (a venv with pip) leaves nothing running."""
    run_tests(WRONG, MBPP, LIM)  # the test server is up before counting
    before = set(_all_sandbox_pids())
    v = run_tests(RENAMED["venv_main"] + WRONG, MBPP, LIM)
    time.sleep(0.3)
    left = [p for p in _all_sandbox_pids() if p not in before]
    _kill_leftovers(left)
    assert v.status != "pass" and left == [], (v, left)


def _all_sandbox_pids() -> list[int]:
    """Live host processes of program runs and of test processes (the test server's uid range too)."""
    from pathlib import Path

    found = []
    for d in Path("/proc").iterdir():
        try:
            uid = d.stat().st_uid if d.name.isdigit() else -1
            state = (d / "stat").read_text().rsplit(")", 1)[-1].split()[0] if uid >= 0 else "Z"
        except (OSError, IndexError):
            continue
        if UID_BASE <= uid < UID_BASE + 2 * UID_SPAN and state != "Z":
            found.append(int(d.name))
    return found
