"""The code sandbox: untrusted Python in bubblewrap jails, and its verdict decided where the program cannot
reach (docs/sandbox.md).

    runner.py   run_python: one sandboxed run (script or assert mode), its limits and its status
    jail.py     the jail's contents and the bwrap command; per-run host uids; the seccomp filter
    cgroups.py  one cgroup per run: memory, processes and CPU of all its processes; killing them all
    launch.py   starting jails: the program's (`Jail`) and the long-lived test server (`TestServer`)
    setups.py   plans for running a test's setup cheaply in the program's process
    jailed/     code that runs INSIDE the sandbox (standard library only): the program's harness, the test
                process, the plain-data encoding between them

This package's door is `run_python`, `SandboxLimits`, `RunResult`, `SandboxUnavailable` and `STATUSES`
(defined in `runner.py`) and `warm_setup` (`launch.py`); `curate.verify.code` builds test verdicts on it.
"""

from cotforge.curate.verify.sandbox.jail import UID_BASE, UID_SPAN
from cotforge.curate.verify.sandbox.launch import warm_setup
from cotforge.curate.verify.sandbox.runner import (
    STATUSES,
    RunResult,
    SandboxLimits,
    SandboxUnavailable,
    run_python,
)

__all__ = ["STATUSES", "UID_BASE", "UID_SPAN", "RunResult", "SandboxLimits", "SandboxUnavailable", "run_python",
           "warm_setup"]
