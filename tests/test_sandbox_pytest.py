"""The `pytest` test kind (KodCode files that need pytest itself): pytest runs the file in the jailed test
process against the program as module `solution`; honest files with fixtures, parametrize, pytest.raises,
approx, capsys and tmp_path pass, and no program can forge a pass (fake summaries, exiting inside
`pytest.raises(Exception)`, pytest-like outcome exceptions, KeyboardInterrupt, standing behind the file's
own `approx` via `from solution import *`, reading the test file, always-equal objects, imports of pytest)."""

from __future__ import annotations

import json
import time

import pytest
from test_sandbox_hostile import _sandbox_pids as sandbox_pids

from cotforge.curate.verify.code import TestsError as BadTests
from cotforge.curate.verify.code import parse_tests, run_tests, run_tests_batch
from cotforge.curate.verify.sandbox import SandboxLimits

LIM = SandboxLimits(wall_s=4.0, cpu_s=2.0, memory_mb=256, nproc=16, fsize_mb=4, output_bytes=1 << 16)

FILE = '''import pytest
from solution import add, div, Stack, greet


@pytest.fixture
def stack():
    s = Stack()
    s.push(1)
    return s


@pytest.mark.parametrize("a,b,expected", [(1, 2, 3), (0, 0, 0), (-1, 1, 0)])
def test_add(a, b, expected):
    assert add(a, b) == expected


def test_div_by_zero_raises():
    with pytest.raises(ZeroDivisionError):
        div(1, 0)


def test_div_approx():
    assert div(1, 3) == pytest.approx(0.3333333)


def test_stack(stack):
    stack.push(2)
    assert stack.pop() == 2
    assert stack.size() == 1


def test_greet_prints(capsys):
    greet("bob")
    assert capsys.readouterr().out == "hello bob\\n"


def test_tmp_path(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("3")
    assert add(int(p.read_text()), 1) == 4
'''
RIGHT = '''def add(a, b):
    return a + b


def div(a, b):
    return a / b


class Stack:
    def __init__(self):
        self.xs = []

    def push(self, x):
        self.xs.append(x)

    def pop(self):
        return self.xs.pop()

    def size(self):
        return len(self.xs)


def greet(name):
    print("hello", name)
'''
WRONG = RIGHT.replace("return a + b", "return 0").replace("return a / b", "return 0.0") \
    .replace('print("hello", name)', 'print("hi")')
KIND = {"kind": "pytest", "test": FILE, "module": "solution"}
N_TESTS = 8

# a file that expects an exception, and one that star-imports after taking `approx` from pytest
RAISES = {"kind": "pytest", "module": "solution",
          "test": "import pytest\nfrom solution import check_age\n\n\ndef test_negative():\n"
                  "    with pytest.raises(Exception):\n        check_age(-1)\n\n\ndef test_ok():\n"
                  "    assert check_age(3) == 3\n"}
STAR = {"kind": "pytest", "module": "solution",
        "test": "from pytest import approx\nfrom solution import *\n\n\ndef test_ratio():\n"
                "    assert ratio(1, 4) == approx(0.25)\n"}

HOSTILE: dict[str, tuple[str, dict]] = {
    # print what a passing pytest run prints
    "fake_summary": ("import sys\nprint('=' * 20 + ' 8 passed in 0.01s ' + '=' * 20)\n"
                     "sys.stderr.write('8 passed\\n')\n" + WRONG, KIND),
    # end the program's process where the test expects an exception
    "exit_in_raises": ("import os\n\n\ndef check_age(a):\n    if a < 0:\n        os._exit(0)\n    return a\n",
                       RAISES),
    # raise exceptions named and placed like pytest's skip / xfail outcomes
    "pytest_like_outcomes": ("class Skipped(BaseException):\n    __module__ = '_pytest.outcomes'\n\n\n"
                             "class XFailed(Exception):\n    __module__ = '_pytest.outcomes'\n\n\n"
                             "def check_age(a):\n    if a < 0:\n        return a\n    raise Skipped('skip')\n",
                             RAISES),
    # interrupt the session from inside a call
    "keyboard_interrupt": ("def check_age(a):\n    raise KeyboardInterrupt\n", RAISES),
    # stand behind the file's own `approx` (imported from pytest before the star import)
    "star_import_approx": ("def approx(x, *a, **k):\n    return 7.0\n\n\ndef ratio(a, b):\n    return 7.0\n", STAR),
    # look for the test file (it lives in the test process's jail, not here)
    "read_test_file": ("import glob\n_found = [p for d in ('/tmp', '/sbx', '/') for p in glob.glob(d + '/**/test_solution.py', "
                       "recursive=d != '/') + glob.glob('/tmp/cf-run-*')]\n"
                       "def ratio(a, b):\n    return 0.25 if _found else 7.0\n", STAR),
    # an object equal to everything
    "always_equal": ("class _Eq(float):\n    def __eq__(self, o):\n        return True\n"
                     "    __hash__ = float.__hash__\n\n\ndef ratio(a, b):\n    return _Eq(7)\n", STAR),
    # pytest itself is not in the program's jail
    "import_pytest_skip": ("import pytest\npytest.skip('nothing to see', allow_module_level=True)\n"
                           "def ratio(a, b):\n    return 7.0\n", STAR),
}


@pytest.fixture(scope="module")
def verdicts():
    names = ["right", "wrong", *HOSTILE]
    items = [(RIGHT, KIND), (WRONG, KIND), *HOSTILE.values()]
    t0 = time.monotonic()
    got = run_tests_batch(items, LIM)
    return dict(zip(names, got, strict=True)), time.monotonic() - t0


def test_pytest_features_run_in_the_jail(verdicts):
    v = verdicts[0]["right"]
    assert (v.status, v.passed, v.total) == ("pass", N_TESTS, N_TESTS), v.details


def test_wrong_program_fails_per_test(verdicts):
    v = verdicts[0]["wrong"]
    assert v.status == "fail" and v.total == N_TESTS
    # only the stack test and the two add cases whose sum is 0 hold for the wrong program
    assert v.passed == 3, v.results
    assert v.results[1:3] == ["pass", "pass"] and v.results[5] == "pass", v.results
    assert "test_add" in v.details[v.results.index("fail")]


@pytest.mark.parametrize("route", list(HOSTILE))
def test_pytest_kind_forgery(verdicts, route):
    v = verdicts[0][route]
    assert v.status not in ("pass", "sandbox_error"), (route, v.status, v.details)
    assert v.passed < v.total


def test_honest_versions_of_the_hostile_files_pass():
    check_age = "def check_age(a):\n    if a < 0:\n        raise ValueError(a)\n    return a\n"
    ratio = "def ratio(a, b):\n    return a / b\n"
    got = run_tests_batch([(check_age, RAISES), (ratio, STAR)], LIM)
    assert [v.status for v in got] == ["pass", "pass"], [v.details for v in got]


def test_a_call_that_blocks_times_out_and_leaves_nothing():
    prog = "import time\n\n\ndef check_age(a):\n    time.sleep(60)\n"
    v = run_tests(prog, RAISES, SandboxLimits(wall_s=1.0, cpu_s=1.0, memory_mb=256, wall_allowance_s=1.0))
    assert v.status == "timeout", v.details
    time.sleep(0.2)
    assert sandbox_pids() == []


def test_missing_name_and_no_tests_are_the_programs_fault_a_broken_file_the_tests():
    """A file that collects no test is the program's failure (issue 30: nothing ran, so no pass and no
    dodge into the unscorable status); a file that does not compile is the test data's."""
    v = run_tests("def other():\n    return 1\n", KIND, LIM)
    assert v.status == "runtime_error" and "cannot import name 'add'" in v.details[0], v.details
    no_tests = {"kind": "pytest", "test": "from solution import add\n\nX = 1\n"}
    bad_file = {"kind": "pytest", "test": "def test_x(:\n    pass\n"}
    got = run_tests_batch([(RIGHT, no_tests), (RIGHT, bad_file)], LIM)
    assert [v.status for v in got] == ["fail", "sandbox_error"], [v.details for v in got]


def test_pytest_kind_is_validated():
    assert parse_tests({"kind": "pytest", "test": FILE})["kind"] == "pytest"
    for bad in ({"kind": "pytest"}, {"kind": "pytest", "test": " "}, {"kind": "pytest", "test": FILE, "module": "a-b"}):
        with pytest.raises(BadTests):
            parse_tests(bad)


def test_kodcode_reader_output_runs_in_the_sandbox():
    """What the KodCode preset writes (`curate/io/codetests.pytest_file`) is what this verifier runs: a file
    needing pytest stays kind pytest and passes with a right program; a plain one becomes assert code."""
    from cotforge.curate.io.codetests import pytest_file

    needs_pytest = json.loads(pytest_file(FILE))
    plain = json.loads(pytest_file("from solution import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"))
    assert (needs_pytest["kind"], plain["kind"]) == ("pytest", "assert")
    got = run_tests_batch([(RIGHT, needs_pytest), (RIGHT, plain), (WRONG, plain)], LIM)
    assert [v.status for v in got] == ["pass", "pass", "fail"], [v.details for v in got]
    assert got[0].total == N_TESTS
