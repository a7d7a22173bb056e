"""Honest programs a real dataset contains must pass: exits, late threads, atexit output, /tmp, future
imports, typing hints without the import, pow(a, b, m) under the LeetCode prelude, numpy/sortedcontainers,
contention, separate stdout/stderr caps, the stdio checker modes; and assert-style tests whose values cross
the process boundary (in-place mutation, expected exceptions, tuple/list/set/bytes/NaN, ListNode/TreeNode)."""

from __future__ import annotations

import pytest

from cotforge.curate.verify.code import outputs_match, run_tests, run_tests_batch
from cotforge.curate.verify.leetcode import LEETCODE_PRELUDE
from cotforge.curate.verify.sandbox import SandboxLimits, run_python

LIM = SandboxLimits(wall_s=4.0, cpu_s=2.0, memory_mb=256, nproc=16, fsize_mb=4, output_bytes=1 << 16)


def _stdio(inp: str, out: str, **kw) -> dict:
    return {"kind": "stdio", "cases": [{"input": inp, "output": out}], **kw}


def _assert(test: str, entry_point: str | None = None, setup: str | None = None) -> dict:
    spec = {"kind": "assert", "test": test, "entry_point": entry_point}
    if setup is not None:
        spec["setup"] = setup
    return spec


# --- script (stdio) forms -------------------------------------------------------------------------------
STDIO_FORMS = {
    "exit_builtin": ("print(int(input()) * 2)\nexit()\nprint('not reached')\n", "3\n", "6"),
    "quit_with_code_0": ("print('ok')\nquit(0)\n", "", "ok"),
    "late_non_daemon_thread": ("import threading, time\n"
                               "def late():\n    time.sleep(0.3)\n    print('late', flush=True)\n"
                               "threading.Thread(target=late).start()\nprint('early')\n", "", "early\nlate"),
    "atexit_output": ("import atexit, sys\natexit.register(lambda: print('bye'))\nsys.stdout.write('hi\\n')\n",
                      "", "hi\nbye"),
    "writes_tmp": ("import os, tempfile\nwith open('/tmp/x.txt', 'w') as f:\n    f.write('5')\n"
                   "with tempfile.NamedTemporaryFile('w+') as t:\n    t.write('7'); t.flush(); t.seek(0); b = t.read()\n"
                   "print(open('/tmp/x.txt').read() + b, os.getcwd())\n", "", "57 /tmp"),
    "typing_hints_without_import": ("def f(xs: List[int]) -> Dict[str, int]:\n    return {'n': len(xs)}\n"
                                    "print(f([1, 2])['n'])\n", "", "2"),
    "numpy_and_sortedcontainers": ("import numpy as np\nfrom sortedcontainers import SortedList\n"
                                   "s = SortedList([3, 1, 2])\nprint(int(np.array(list(s)).sum()), list(s))\n",
                                   "", "6 [1, 2, 3]"),
}


@pytest.fixture(scope="module")
def stdio_forms():
    names = list(STDIO_FORMS)
    items = [(STDIO_FORMS[n][0], _stdio(STDIO_FORMS[n][1], STDIO_FORMS[n][2])) for n in names]
    lim = SandboxLimits(wall_s=8.0, cpu_s=4.0)  # numpy needs the default memory
    return dict(zip(names, run_tests_batch(items, lim), strict=True))


@pytest.mark.parametrize("form", list(STDIO_FORMS))
def test_honest_stdio_form_passes(stdio_forms, form):
    v = stdio_forms[form]
    assert v.status == "pass", (form, v.status, v.details)


# --- assert forms -------------------------------------------------------------------------------------------
IN_PLACE = ("class Solution:\n    def rotate(self, nums, k):\n        k %= len(nums)\n"
            "        nums[:] = nums[-k:] + nums[:-k]\n")
IN_PLACE_TEST = ("def check(candidate):\n    nums = [1, 2, 3, 4, 5]\n    assert candidate(nums, 2) is None\n"
                 "    assert nums == [4, 5, 1, 2, 3]\n    grid = [[1, 2], [3, 4]]\n    Solution().flip(grid)\n"
                 "    assert grid == [[2, 1], [4, 3]]\n    d = {}\n    Solution().fill(d)\n    assert d == {'a': 1}\n\n\n"
                 "check(Solution().rotate)\n")
IN_PLACE_FULL = IN_PLACE + ("    def flip(self, grid):\n        for row in grid:\n            row.reverse()\n"
                            "    def fill(self, d):\n        d['a'] = 1\n")

ASSERT_FORMS = {
    "future_annotations_with_setup": (
        "from __future__ import annotations\n\ndef area(r: float) -> float:\n    return math.pi * r * r\n",
        _assert("assert abs(area(1) - 3.14159) < 1e-4\n", setup="import math\n")),
    "humaneval_hints_without_import": (
        "def below_zero(ops: List[int]) -> bool:\n    bal = 0\n    for o in ops:\n        bal += o\n"
        "        if bal < 0:\n            return True\n    return False\n",
        _assert("def check(candidate):\n    assert candidate([1, -2]) is True\n    assert candidate([1, 2]) is False\n",
                "below_zero")),
    "pow_three_args_under_leetcode_prelude": (
        "class Solution:\n    def powMod(self, a: int, b: int) -> int:\n        return pow(a, b, 10**9 + 7)\n",
        _assert("def check(candidate):\n    assert candidate(2, 100) == 976371285\n\n\ncheck(Solution().powMod)\n")),
    "in_place_mutation": (IN_PLACE_FULL, _assert(IN_PLACE_TEST, setup=LEETCODE_PRELUDE)),
    "expected_exception": (
        "def safe_div(a, b):\n    if b == 0:\n        raise ValueError('b is 0')\n    return a / b\n",
        _assert("try:\n    safe_div(1, 0)\nexcept ValueError as e:\n    assert 'b is 0' in str(e)\nelse:\n"
                "    assert False\nassert safe_div(1, 2) == 0.5\n")),
    "tuple_set_bytes_nan": (
        "import math\ndef pair():\n    return (1, 2)\ndef uniq(xs):\n    return set(xs)\n"
        "def raw():\n    return b'ab'\ndef nan():\n    return math.nan\ndef nested():\n"
        "    return {'k': [(1, 'a'), frozenset({2})], 3: None}\n",
        _assert("import math\nassert pair() == (1, 2)\nassert pair() != [1, 2]\nassert isinstance(pair(), tuple)\n"
                "assert uniq([1, 1, 2]) == {1, 2}\nassert raw() == b'ab' and raw() != 'ab'\n"
                "assert math.isnan(nan()) and nan() != nan()\n"
                "assert nested() == {'k': [(1, 'a'), frozenset({2})], 3: None}\n")),
    "listnode_and_treenode": (
        "class Solution:\n    def reverseList(self, head):\n        prev = None\n        while head:\n"
        "            head.next, prev, head = prev, head, head.next\n        return prev\n"
        "    def invertTree(self, root):\n        if root:\n"
        "            root.left, root.right = self.invertTree(root.right), self.invertTree(root.left)\n"
        "        return root\n",
        _assert("def check(s):\n    assert is_same_list(s.reverseList(list_node([1, 2, 3])), list_node([3, 2, 1]))\n"
                "    assert s.reverseList(None) is None\n"
                "    assert is_same_tree(s.invertTree(tree_node([4, 2, 7, 1, 3])), tree_node([4, 7, 2, None, None, 3, 1]))\n\n\n"
                "check(Solution())\n", setup=LEETCODE_PRELUDE)),
    "design_class_instances": (
        "class Counter2:\n    def __init__(self, start):\n        self.n = start\n"
        "    def inc(self):\n        self.n += 1\n        return self.n\n",
        _assert("c = Counter2(5)\nassert c.inc() == 6\nassert c.inc() == 7\nd = Counter2(0)\nassert d.inc() == 1\n")),
    "exit_at_module_level_after_defs": (
        "def add(a, b):\n    return a + b\n\nexit()\n",
        _assert("assert add(2, 3) == 5\n")),
    "setup_using_the_programs_class": (  # MBPP 367: test_setup_code builds trees of the program's Node
        "class Node:\n    def __init__(self, data):\n        self.data, self.left, self.right = data, None, None\n"
        "def height(n):\n    return 0 if n is None else 1 + max(height(n.left), height(n.right))\n",
        _assert("assert height(root) == 3\nassert root.left.data == 2\n",
                setup="root = Node(1)\nroot.left = Node(2)\nroot.left.left = Node(4)\n")),
    "deque_counter_fraction_decimal_values": (  # the encoder imports these modules only once a run loaded them
        "from _collections import deque\nimport fractions, decimal\ndef dq():\n    return deque([1, 2], maxlen=3)\n"
        "def push(d):\n    d.append(9)\ndef q():\n    return fractions.Fraction(3, 6)\n"
        "def dec():\n    return decimal.Decimal('1.10')\nclass Solution:\n    def tally(self, s):\n"
        "        import collections\n        return collections.Counter(s)\n",
        _assert("import collections, fractions, decimal\nassert dq() == collections.deque([1, 2]) and dq().maxlen == 3\n"
                "d = collections.deque([1])\npush(d)\nassert d == collections.deque([1, 9])\n"
                "assert q() == fractions.Fraction(1, 2) and isinstance(q(), fractions.Fraction)\n"
                "assert dec() == decimal.Decimal('1.10') and str(dec()) == '1.10'\n"
                "assert Solution().tally('aab') == collections.Counter({'a': 2, 'b': 1})\n")),
    "builtin_named_function_under_test": (
        "def sum(a, b):\n    return a + b - 4\n",
        _assert("assert sum(10, 15) == 21\nassert sum(3, 4) == 3\n")),
}


@pytest.fixture(scope="module")
def assert_forms():
    names = list(ASSERT_FORMS)
    return dict(zip(names, run_tests_batch([ASSERT_FORMS[n] for n in names], LIM), strict=True))


@pytest.mark.parametrize("form", list(ASSERT_FORMS))
def test_honest_assert_form_passes(assert_forms, form):
    v = assert_forms[form]
    assert v.status == "pass", (form, v.status, v.details)


@pytest.mark.parametrize("wrong,why", [
    ("def pair():\n    return [1, 2]\n", "a list is not the tuple the test expects"),
    ("def pair():\n    return {1, 2}\n", "a set is not the tuple the test expects"),
])
def test_types_are_kept_across_the_boundary(wrong, why):
    v = run_tests(wrong, _assert("assert pair() == (1, 2)\n"), LIM)
    assert v.status == "fail", why


def test_wrong_in_place_and_missing_exception_fail():
    wrong_rotate = "class Solution:\n    def rotate(self, nums, k):\n        nums = nums[-k:] + nums[:-k]\n"
    test = "def check(candidate):\n    nums = [1, 2, 3]\n    candidate(nums, 1)\n    assert nums == [3, 1, 2]\n\n\n" \
           "check(Solution().rotate)\n"
    assert run_tests(wrong_rotate, _assert(test), LIM).status == "fail"
    no_raise = "def safe_div(a, b):\n    return 0\n"
    exc_test = "try:\n    safe_div(1, 0)\nexcept ValueError:\n    pass\nelse:\n    assert False\n"
    assert run_tests(no_raise, _assert(exc_test), LIM).status == "fail"
    raises = "def f():\n    raise KeyError('x')\n"
    v = run_tests(raises, _assert("assert f() == 1\n"), LIM)
    assert v.status == "runtime_error" and "KeyError" in v.details[0]


# --- contention, output caps, checker modes --------------------------------------------------------------------
def test_six_concurrent_runs_on_two_cores_are_not_wall_clock_timeouts():
    """Each run burns ~0.6 s of CPU under a 1.5 s CPU limit; six at once on two cores take longer than the
    wall-clock backstop's nominal 1.5 s, which must not count time spent waiting for a CPU."""
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6:\n    pass\nprint('done')\n"
    lim = SandboxLimits(wall_s=1.5, cpu_s=1.5, memory_mb=256)
    got = run_tests_batch([(burn, _stdio("", "done"))] * 6, lim, workers=6)
    assert [v.status for v in got] == ["pass"] * 6, [v.details for v in got]


def test_stdout_and_stderr_have_separate_caps():
    noisy = "import sys\nsys.stderr.write('e' * (1 << 17))\nprint('answer')\n"
    r = run_python(noisy, limits=LIM)
    assert r.status == "pass" and r.stdout == "answer\n", (r.status, r.detail)
    assert 0 < len(r.stderr) <= LIM.stderr_bytes
    loud = "import sys\nsys.stdout.write('o' * (1 << 17))\n"
    r = run_python(loud, limits=LIM)
    assert r.status == "runtime_error" and "output limit" in r.detail and len(r.stdout) <= LIM.output_bytes


def test_stdio_checker_modes():
    prog = "print('%.10f' % (1 / 3))\nprint('a   b')\n"
    exact = _stdio("", "0.333333\na b")
    assert run_tests(prog, exact, LIM).status == "fail"
    assert run_tests(prog, _stdio("", "0.3333333333\na b", checker="tokens"), LIM).status == "pass"
    assert run_tests(prog, _stdio("", "0.333333\na b", checker="float", float_tol=1e-6), LIM).status == "pass"
    assert run_tests(prog, _stdio("", "0.3334\na b", checker="float", float_tol=1e-6), LIM).status == "fail"


@pytest.mark.parametrize("checker,got,expected,ok", [
    ("exact", "1 2\n", "1 2", True), ("exact", "1 2  \n\n", "1 2", True), ("exact", "1  2", "1 2", False),
    ("exact", "1\n2", "1 2", False), ("tokens", "1\n2\n", "1 2", True), ("tokens", "1 2 3", "1 2", False),
    ("float", "0.1000001 x", "0.1 x", True), ("float", "1e-9", "0", True), ("float", "nan", "nan", True),
    ("float", "1.1", "1", False), ("float", "abc", "abd", False), ("float", "3", "3.0000000001", True),
])
def test_outputs_match_modes(checker, got, expected, ok):
    assert outputs_match(got, expected, checker=checker, float_tol=1e-6) is ok
