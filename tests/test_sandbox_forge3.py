"""Hostile programs against the shared scratch folder of pytest's `tmp_path` (issue 30, round 4).

The program and the test process see one folder (`/share/<random name>` in both jails). Whatever the program
leaves there must not lead the test process outside the folder, block it, or decide its verdict:

- a symlink to one of the test process's own fds (`/proc/self/fd/N` resolves in the *test* process: a test
  writing there writes into its report pipe, and a forged report line would be the verdict);
- a symlink into the test jail's files (`/proc/self/cwd/test_solution.py`: the test reads its own source);
- a hard link, a FIFO (a test reading it blocks), a device node, a unix socket;
- io_uring (its requests can make links without a syscall a seccomp filter sees);
- a sibling run's folder (RL runs several samples of one prompt at once: copying an honest sibling's output);
- a FIFO in a `tempfile` folder of an assert-style test (such a run shares its folder too).

Each program below is otherwise wrong, so a pass can only come from the planted object. With the folder
shared but the link-making syscalls allowed (the closure of `jail.seccomp_filter(strict=True)` switched off),
the test-file, linked-folder and io_uring cases passed and the FIFO cases hung to the wall-clock limit (the
report-fd case was stopped by the pipe's own permissions on a root host; in bwrap's unprivileged mode the test
process and the pipes share a uid); each must now end quickly in a non-pass status, with no run folder or
process left behind.
"""

from __future__ import annotations

import os
import time

import pytest
from test_sandbox_hostile import _kill_leftovers, _sandbox_pids

from cotforge.curate.verify.code import run_tests_batch
from cotforge.curate.verify.sandbox import SandboxLimits

LIM = SandboxLimits(wall_s=4.0, cpu_s=2.0, memory_mb=256, nproc=16, fsize_mb=4,
                    output_bytes=1 << 16)
PASS_LINE = '{"status": "pass", "detail": "", "calls": 1, "results": ["pass"]}\\n'


def _pytest(test: str) -> dict:
    return {"kind": "pytest", "module": "solution", "test": test}


WRITE_TEST = _pytest(  # the test logs a line the program gives, then checks the program's answer
    "from solution import prepare, line, result\n\n\ndef test_log(tmp_path):\n    prepare(str(tmp_path))\n"
    "    (tmp_path / 'log.txt').write_text(line())\n    assert result() == 42\n")
READ_TEST = _pytest(  # the program should write a file holding the marker (named in the test's own source)
    "from solution import prepare\n\n\ndef test_read(tmp_path):\n    # writes expected-marker-42\n"
    "    prepare(str(tmp_path))\n"
    "    assert 'expected-marker-' + '42' in (tmp_path / 'out.txt').read_text()\n")
WRONG_TAIL = "\n\ndef line():\n    return 'x\\n'\n\n\ndef result():\n    return 0\n"


def _plant(body: str) -> str:
    return "import os\n\n\ndef prepare(d):\n    try:\n" + "".join(
        f"        {ln}\n" for ln in body.splitlines()) + "    except OSError:\n        pass\n" + WRONG_TAIL


CASES: dict[str, tuple[str, dict]] = {
    "symlink_to_report_fd": (_plant(
        "for n in range(3, 12):\n    os.symlink(f'/proc/self/fd/{n}', os.path.join(d, 'log.txt' if n == 6 else f'l{n}'))")
        .replace("return 'x\\n'", f"return '{PASS_LINE}'"), WRITE_TEST),
    "symlink_to_test_file": (_plant("os.symlink('/proc/self/cwd/test_solution.py', os.path.join(d, 'out.txt'))"),
                             READ_TEST),
    "symlinked_folder": (_plant("os.symlink('/proc/self/cwd', os.path.join(d, 'sub'))\n"
                                "os.symlink('sub/test_solution.py', os.path.join(d, 'out.txt'))"), READ_TEST),
    "hardlink": (_plant("open('/tmp/t.txt', 'w').write('expected-marker-42')\n"
                        "os.link('/tmp/t.txt', os.path.join(d, 'out.txt'))"), READ_TEST),
    "fifo": (_plant("os.mkfifo(os.path.join(d, 'out.txt'))"), READ_TEST),
    "device_node": (_plant("import stat\nos.mknod(os.path.join(d, 'out.txt'), stat.S_IFCHR | 0o666, os.makedev(1, 5))"),
                    READ_TEST),
    "unix_socket": (_plant("import socket\ns = socket.socket(socket.AF_UNIX)\ns.bind(os.path.join(d, 'out.txt'))\n"
                           "s.listen(1)\nglobals()['keep'] = s"), READ_TEST),
    "io_uring": (_plant(  # io_uring usable: write the marker (stands for a link made by an io_uring request)
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nparams = ctypes.create_string_buffer(120)\n"
        "fd = libc.syscall(425, 4, params)\nif fd >= 0:\n"
        "    open(os.path.join(d, 'out.txt'), 'w').write('expected-marker-42')"), READ_TEST),
    "sibling_folder": (_plant(  # another run's out.txt, if any folder but its own can be found
        "import glob, time\nfor _ in range(20):\n"
        "    for p in glob.glob('/share/*/pytest/*/out.txt') + glob.glob('/share/../*/*/pytest/*/out.txt'):\n"
        "        if not p.startswith(d):\n            open(os.path.join(d, 'out.txt'), 'w').write(open(p).read())\n"
        "            break\n    time.sleep(0.05)"), READ_TEST),
    "fifo_in_a_tempfile_folder": (_plant("os.mkfifo(os.path.join(d, 'out.txt'))"), {  # assert style, `tempfile`
        "kind": "assert", "entry_point": None,
        "test": "import tempfile\nd = tempfile.mkdtemp()\nprepare(d)\nassert open(d + '/out.txt').read() == 'x'\n"}),
}
HONEST = "import os\n\n\ndef prepare(d):\n    open(os.path.join(d, 'out.txt'), 'w').write('expected-marker-42')\n"


@pytest.fixture(scope="module")
def forged():
    """All cases in one batch, with honest siblings writing the marker at the same time: ({case: verdict},
    {case: seconds}, leftover sandbox processes, leftover run folders)."""
    from cotforge.curate.verify.sandbox import launch

    names = list(CASES)
    items = [CASES[n] for n in names] + [(HONEST, READ_TEST)] * 3
    t0 = time.monotonic()
    verdicts = run_tests_batch(items, LIM)
    took = time.monotonic() - t0
    time.sleep(0.3)
    left = _sandbox_pids()
    _kill_leftovers(left)
    folders = os.listdir(launch.share_root())
    return dict(zip(names + ["honest"] * 3, verdicts, strict=True)), took, left, folders


@pytest.mark.parametrize("case", list(CASES))
def test_planted_objects_do_not_forge_block_or_leak(forged, case):
    verdicts, _, left, folders = forged
    v = verdicts[case]
    assert v.status in ("fail", "runtime_error"), (case, v.status, v.details)  # not pass, and no hang (timeout)
    assert left == [] and folders == []


def test_honest_siblings_pass_and_the_batch_is_quick(forged):
    verdicts, took, _, _ = forged
    assert verdicts["honest"].status == "pass", verdicts["honest"]
    assert took < 60, took


def test_a_pool_whose_workers_cannot_start_ends_at_the_wall_clock():
    """multiprocessing (spawn) in a program whose module exits in every spawned worker: Python's Pool starts
    new workers forever. The run is bounded by the wall-clock limit (a timeout), never a pass."""
    from cotforge.curate.verify.code import run_tests

    prog = ("import multiprocessing as mp\nif mp.parent_process() is not None:\n    raise SystemExit(0)\n\n\n"
            "def sq(x):\n    return x * x\n\n\ndef squares(xs):\n"
            "    with mp.get_context('spawn').Pool(2) as p:\n        return p.map(sq, xs)\n")
    lim = SandboxLimits(wall_s=2.0, wall_allowance_s=2.0, cpu_s=2.0, memory_mb=256, nproc=16)
    t0 = time.monotonic()
    v = run_tests(prog, {"kind": "assert", "entry_point": None, "test": "assert squares([1, 2]) == [1, 4]\n"}, lim)
    took = time.monotonic() - t0
    assert v.status in ("timeout", "runtime_error"), v
    assert took < lim.wall_s + lim.wall_allowance_s + 5, took
    assert _sandbox_pids() == []
