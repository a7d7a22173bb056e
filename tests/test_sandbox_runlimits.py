"""One set of limits for the whole run (issue 30, round 4): the test process of an assert-style run joins the
run's cgroup for memory and process count, so the program and the test process together are held to
`memory_mb` and `nproc` (CPU time stays the program's: the test process has its own CPU limit). Without a
usable cgroup the run falls back to per-process limits (address space, CPU time), tested here too.
"""

from __future__ import annotations

import pytest

from cotforge.curate.verify.code import run_tests
from cotforge.curate.verify.sandbox import SandboxLimits, cgroups

LIM = SandboxLimits(wall_s=6.0, cpu_s=4.0, memory_mb=256, nproc=16, fsize_mb=4, output_bytes=1 << 16)
HOLDS = ("KEEP = b'x' * (150 << 20)\n\n\ndef size():\n    return len(KEEP)\n")  # the program holds 150 MiB
THREADS = ("import threading\nEV = threading.Event()\nTS = [threading.Thread(target=EV.wait, daemon=True) "
           "for _ in range(10)]\nfor t in TS:\n    t.start()\n\n\ndef size():\n    return len(TS)\n")


def _need_cgroup() -> None:
    tree = cgroups.cgroup_tree()
    if tree is None or tree.version != 1:
        pytest.skip("needs cgroup v1 delegation (the test process joins the run's cgroup only there)")


def _assert(test: str) -> dict:
    return {"kind": "assert", "entry_point": None, "test": test}


def test_program_and_test_process_share_the_run_memory():
    """150 MiB in the program and 150 MiB in the test process: each fits the 256 MiB limit alone, the run
    does not (before, the test process was only held to its own address space: pass)."""
    _need_cgroup()
    alone = run_tests(HOLDS, _assert("assert size() == 150 << 20\n"), LIM)
    assert alone.status == "pass", alone
    v = run_tests(HOLDS, _assert("big = b'y' * (150 << 20)\nassert size() == 150 << 20\nassert len(big)\n"), LIM)
    assert v.status == "memory", v


def test_program_and_test_process_share_the_process_limit():
    """10 threads in the program and 10 in the test process: each fits nproc=16 alone, together they do not
    (2 in the test process do)."""
    _need_cgroup()
    test = ("import threading\nassert size() == 10\nev = threading.Event()\n"
            "ts = [threading.Thread(target=ev.wait, daemon=True) for _ in range({n})]\nfor t in ts:\n    t.start()\n"
            "ev.set()\n")
    fits = run_tests(THREADS, _assert(test.format(n=2)), LIM)
    assert fits.status == "pass", fits
    v = run_tests(THREADS, _assert(test.format(n=10)), LIM)
    assert v.status == "runtime_error" and "thread" in v.details[0], v


def test_without_cgroups_the_test_process_keeps_its_own_limits(monkeypatch):
    """The fallback: no cgroup (not root, or none writable). The program is held to its address space and
    CPU time, the test process to the run's memory over what its fork inherited: a test process growing past
    it is the run's `memory`, and the program's own limits still hold."""
    monkeypatch.setattr(cgroups, "_TREE", [None])
    assert cgroups.cgroup_tree() is None
    ok = run_tests(HOLDS, _assert("assert size() == 150 << 20\n"), LIM)
    assert ok.status == "pass", ok
    v = run_tests(HOLDS, _assert("big = b'y' * (400 << 20)\nassert size() == 150 << 20\n"), LIM)
    assert v.status == "memory", v
    assert run_tests("KEEP = b'x' * (400 << 20)\n\n\ndef size():\n    return 1\n",
                     _assert("assert size() == 1\n"), LIM).status in ("memory", "runtime_error")
    hog = run_tests("def size():\n    while True:\n        pass\n", _assert("assert size() == 1\n"),
                    SandboxLimits(wall_s=6.0, cpu_s=1.0, memory_mb=256, nproc=16))
    assert hog.status == "timeout", hog  # SIGXCPU at the soft limit, before the hard limit's SIGKILL


def test_a_cgroup_is_reused_only_once_its_killed_tasks_are_reaped():
    """A killed task leaves cgroup.procs when it starts to exit but stays charged to pids.current until it is
    reaped: a cgroup reused before that gave the next run fewer processes (seen as a test process that could
    not start 2 threads on a loaded machine)."""
    import os
    import signal
    import time

    _need_cgroup()
    tree = cgroups.cgroup_tree()
    cg = tree.lease(64 << 20, 8)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child only sleeps until it is killed
        time.sleep(30)
        os._exit(0)
    try:
        cg.attach(pid)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while cg.pids() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert cg.pids() == [] and not cg.settled()  # a zombie: not listed, still charged
        tree.release(cg)
        other = tree.lease(64 << 20, 8)
        assert other is not cg
        tree.release(other)
    finally:
        os.waitpid(pid, 0)
    assert cg.settled()  # reaped: reusable again
    again = tree.lease(64 << 20, 8)
    assert again.settled()
    tree.release(again)
