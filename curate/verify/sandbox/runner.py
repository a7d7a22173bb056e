"""Run untrusted Python in a bubblewrap jail and decide its status where it cannot reach.

Script mode (stdio tests): the program runs as `__main__` with the given stdin; its stdout and stderr come
back separately capped and the caller (`code.py`) compares the output here, outside the run.

Assert mode (MBPP asserts, HumanEval `check(candidate)`, LeetCode `check(Solution().method)`): the program
runs alone in its jail and only answers calls; the test code runs in a separate jailed test process
(`jailed/testrunner.py`) that calls it through two pipes carrying plain data (`jailed/codec.py`). The
verdict is written by the test process on a pipe only the host reads, so no object, builtin, frame or
report line of the program takes part in it, and the test source and expected values never enter the
program's process.

Limits over the whole run (`cgroups.py`): total memory and process count, CPU seconds of all its processes;
a wall-clock limit for programs that sleep or block, measured on the monotonic clock from the program's start:
wall_s plus a fixed allowance for a loaded machine (`wall_allowance_s`; nothing the program does stretches
it). The test process (assert mode) joins the run's cgroup for memory and process count (cgroup v1,
`_join_test`; its CPU time is not the program's), keeps the run's memory limit over what its fork inherited
(address space), its own CPU limit and the same wall clock, and its channel reader is linear with a size cap;
separate caps for stdout (for stdio tests exceeding it ends the run; in assert mode the rest is discarded)
and stderr (the tail is kept, the rest discarded). A pytest file using `tmp_path` gets a folder shared by the
program and the test process (`launch.new_share`, as does a test using `tempfile`; the program then may not
make links or special files).
At the verdict the run's PID namespace and cgroup are killed and its shared folder removed: nothing of it
keeps running or stays on disk (`launch.py`).

Statuses (`STATUSES`): the harness writes "U" on a status pipe just before the program's code is compiled;
`sandbox_error` is only given when that never arrived (or the test's own set-up failed), everything after
is the program's: syntax_error, timeout, memory, runtime_error, fail, pass. No exit status, output or
message of the program can turn into sandbox_error or pass.

Its length is the run's life cycle in order (limits, launch, status pipe, wall clock, clean-up), each step
small; splitting it would scatter one sequence.
"""

from __future__ import annotations

import json
import logging
import os
import select
import selectors
import signal
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

import cotforge.curate.verify.sandbox.jail as jail
import cotforge.curate.verify.sandbox.launch as launch
import cotforge.curate.verify.sandbox.setups as setups
from cotforge.curate.verify.sandbox.cgroups import cgroup_tree
from cotforge.curate.verify.sandbox.jail import UID_BASE, UID_SPAN, SandboxUnavailable

log = logging.getLogger(__name__)

STATUSES = ("pass", "fail", "timeout", "memory", "runtime_error", "syntax_error", "sandbox_error")
__all__ = ["STATUSES", "UID_BASE", "UID_SPAN", "RunResult", "SandboxLimits", "SandboxUnavailable", "run_python"]
POLL_S = 0.02
SETUP_TIMEOUT_S = 60.0  # the jail's own start-up (not the program's time) on a very loaded machine
_TOKENS = iter(range(1 << 62))
_TOKEN_LOCK = threading.Lock()


@dataclass
class SandboxLimits:
    """Limits of one sandboxed run (all of its processes together) and what it may import."""

    wall_s: float = field(default=10.0, metadata={"help": "Wall-clock limit in seconds for programs that "
                                                          "sleep or block (monotonic clock, from the program's "
                                                          "start), plus wall_allowance_s."})
    wall_allowance_s: float = field(default=10.0, metadata={"help": "Fixed extra wall-clock seconds for a loaded "
                                                                    "machine (a CPU-bound run waits for a CPU); "
                                                                    "nothing the program does changes it."})
    cpu_s: float = field(default=5.0, metadata={"help": "CPU seconds of all processes of the run together."})
    memory_mb: int = field(default=1024, metadata={"help": "Memory of the whole run in MiB (cgroup), also each "
                                                           "process's address-space limit."})
    nproc: int = field(default=32, metadata={"help": "Processes (and threads) of the run at once."})
    fsize_mb: int = field(default=16, metadata={"help": "Largest file the program may write, MiB."})
    output_bytes: int = field(default=1 << 20, metadata={"help": "stdout cap in bytes; exceeding it ends the "
                                                                 "run as runtime_error (output limit)."})
    stderr_bytes: int = field(default=1 << 16, metadata={"help": "stderr kept in bytes (the tail); the rest "
                                                                 "is discarded and the run goes on."})
    tmp_mb: int = field(default=64, metadata={"help": "Size of the run's private /tmp in MiB."})
    packages: tuple[str, ...] = field(default=("numpy", "sortedcontainers"), metadata={
        "help": "Installed distributions the program may import besides the standard library.", "sep": ","})
    channel_mb: int = field(default=64, metadata={"help": "Largest single message from the program to the "
                                                          "test process (assert tests), MiB."})

    def __post_init__(self) -> None:
        if not self.wall_allowance_s >= 0:
            raise ValueError(f"SandboxLimits.wall_allowance_s must be >= 0, got {self.wall_allowance_s!r}")
        for name in ("wall_s", "cpu_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"SandboxLimits.{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("memory_mb", "nproc", "fsize_mb", "output_bytes", "stderr_bytes", "tmp_mb", "channel_mb"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"SandboxLimits.{name} must be a positive integer, got {v!r}")
        if self.memory_mb < 64:
            raise ValueError(f"SandboxLimits.memory_mb must be >= 64 (the interpreter needs it), got {self.memory_mb}")
        if isinstance(self.packages, str):
            raise ValueError(f"SandboxLimits.packages must be a list of distribution names, got {self.packages!r}")
        self.packages = tuple(self.packages)
        if not all(isinstance(p, str) and p for p in self.packages):
            raise ValueError(f"SandboxLimits.packages must be distribution names, got {self.packages!r}")

    def rlimits(self, cgroup: bool = False) -> dict[str, int]:
        """Per-process resource limits the harness sets before any user code (backstops of the run totals).
        With a cgroup holding the run's memory, the address space also has room for `nproc` thread stacks
        (8 MiB each, reserved, not used): threads up to the process limit must fit."""
        room = self.nproc * (8 << 20) if cgroup else 0
        return {"RLIMIT_AS": (self.memory_mb << 20) + room, "RLIMIT_CPU": int(self.cpu_s) + 2,
                "RLIMIT_FSIZE": self.fsize_mb << 20, "RLIMIT_NOFILE": 256, "RLIMIT_CORE": 0,
                "RLIMIT_NPROC": self.nproc}


@dataclass
class RunResult:
    """Outcome of one sandboxed run: a status from STATUSES (`pass` = ran to completion / test passed)."""

    status: str
    stdout: str = ""
    stderr: str = ""
    returncode: int | None = None
    detail: str = ""
    wall_s: float = 0.0
    extra: dict = field(default_factory=dict)


@dataclass
class _Observed:
    """What the host saw of a run."""

    judge_stdout: bool = True  # script mode; in assert mode stdout is only kept for the details
    t_user: float | None = None  # when the harness said "U" (the wall-clock backstop counts from here)
    tokens: list[str] = field(default_factory=list)
    reports: list[dict] = field(default_factory=list)
    out: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)
    why: str | None = None  # "cpu" | "wall" | "output"
    cpu_s: float = 0.0
    oom: int = 0
    peak: int | None = None
    rc: int | None = None
    exited: bool = False


def run_python(program: str, *, stdin: str = "", mode: str = "script", test: str = "", setup: str = "",
               entry_point: str | None = None, limits: SandboxLimits | None = None,
               pytest_module: str | None = None) -> RunResult:
    """Run `program` in the sandbox. mode "script": as __main__ with `stdin`; mode "assert": `setup`, then the
    program, then `test` (and `check(<entry_point>)` when given) in a separate test process; with
    `pytest_module`, `test` is a pytest file run by pytest in the test process against the program as that
    module (`jailed/pytestrun.py`; per-test statuses in `extra["results"]`). Never raises for anything the
    program does; raises SandboxUnavailable when the sandbox cannot be built here."""
    if mode not in ("script", "assert"):
        raise ValueError(f"run_python: mode must be 'script' or 'assert', got {mode!r}")
    if pytest_module is not None and (mode != "assert" or not pytest_module.isidentifier()):
        raise ValueError(f"run_python: pytest_module must be a module name in assert mode, got {pytest_module!r}")
    limits = limits or SandboxLimits()
    test_packages = limits.packages + tuple(p for p in jail.with_requirements(("pytest",))
                                            if p not in limits.packages) if pytest_module else limits.packages
    t0 = time.monotonic()
    pipes: dict[str, tuple[int, int]] = {k: os.pipe2(os.O_CLOEXEC) for k in ("out", "err", "status")}
    chan = (os.pipe2(os.O_CLOEXEC), os.pipe2(os.O_CLOEXEC)) if mode == "assert" else None
    report = os.pipe2(os.O_CLOEXEC) if mode == "assert" else None
    done = os.pipe2(os.O_CLOEXEC) if mode == "assert" else None  # EOF once the test run is gone
    join = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) if mode == "assert" else None
    if join:  # the test process says hello on it; the kernel adds its pid as the host sees it
        join[0].setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    stdin_fd = launch.data_fd(stdin.encode("utf-8", "surrogateescape"))
    share: tuple[str, str] | None = None
    spec = {"mode": mode, "program": program, "setup": setup, "setup_plan": setups.plan(setup) if setup else None,
            "status_fd": pipes["status"][1], "forward_output": limits.output_bytes if pytest_module else 0,
            "rlimits": limits.rlimits(cgroup=cgroup_tree() is not None), "chan": [chan[0][0], chan[1][1]] if chan else None}
    keep = [pipes["status"][1]] + ([chan[0][0], chan[1][1]] if chan else [])
    host_ends = [pipes[k][0] for k in pipes] + ([chan[0][1], chan[1][0], report[0], done[0]] if chan else [])
    child_ends = [pipes[k][1] for k in pipes] + ([chan[0][0], chan[1][1], report[1], done[1]] if chan else [])
    jailed = None
    token = None
    try:
        try:
            if mode == "assert" and wants_shared_folder(test):
                share = launch.new_share()
            spec["share"] = share[1] if share else None
            jailed = launch.Jail("program", spec, packages=limits.packages, tmp_mb=limits.tmp_mb,
                                 memory_bytes=limits.memory_mb << 20, max_pids=limits.nproc + (2 if chan else 1),
                                 stdin=stdin_fd,
                                 stdout=pipes["out"][1], stderr=pipes["err"][1], keep_fds=tuple(keep),
                                 rw_binds=(share,) if share else (), strict=share is not None)
        except SandboxUnavailable:
            raise
        except OSError as e:
            return RunResult("sandbox_error", detail=f"sandbox start failed: {e}", wall_s=time.monotonic() - t0)
        if chan:
            token = _token()
            tspec = {"test": test, "setup": setup, "entry_point": entry_point, "pytest_module": pytest_module,
                     "channel_bytes": limits.channel_mb << 20, "share": share[1] if share else None,
                     "limits": {"cpu": int(max(10, 4 * limits.cpu_s)), "memory": limits.memory_mb << 20,
                                "wall": int(limits.wall_s + limits.wall_allowance_s + 5)}}
            try:
                launch.test_server(test_packages).submit(
                    token, tspec, [chan[1][0], chan[0][1], report[1], done[1], join[1].fileno()])
            except SandboxUnavailable:
                raise
            except OSError as e:
                log.warning("sandbox: test server unavailable: %s", e)
                token = None
                return RunResult("sandbox_error", detail=f"test server unavailable: {e}",
                                 wall_s=time.monotonic() - t0)
        for fd in child_ends + [stdin_fd]:
            os.close(fd)
        child_ends, stdin_fd = [], -1
        if join:
            join[1].close()
        joined = _join_test(join, done[0], jailed) if join else False
        if chan:  # the host keeps only the report pipe of the test side
            for fd in (chan[0][1], chan[1][0]):
                os.close(fd)
                host_ends.remove(fd)
        obs = _Observed(judge_stdout=mode == "script")
        _watch(jailed, obs, limits, t0, pipes["out"][0], pipes["err"][0], pipes["status"][0],
               report[0] if report else None)
        status, detail = _classify(obs, limits, mode)
        return RunResult(status, obs.out.decode("utf-8", "replace"), obs.err.decode("utf-8", "replace"), obs.rc,
                         detail, time.monotonic() - t0,
                         {"cpu_s": round(obs.cpu_s, 4), "peak_bytes": obs.peak, "reports": obs.reports,
                          "results": _results(obs, status), "test_in_cgroup": joined})
    finally:
        if token is not None:
            launch.test_server(test_packages).cancel(token)
        if jailed is not None:
            jailed.kill()
        if token is not None:  # the test run is gone too before the verdict is returned
            launch.test_server(test_packages).wait_gone(done[0])
        if share is not None:  # and so is the shared folder (its files are charged to the run's cgroup)
            launch.remove_tree(share[0])
        if jailed is not None:
            jailed.close()
        for sock in join or ():
            sock.close()
        for fd in host_ends + child_ends + ([stdin_fd] if stdin_fd >= 0 else []):
            try:
                os.close(fd)
            except OSError:
                pass


SHARED_FILE_NAMES = ("tmp_path", "tmpdir", "tmp_path_factory", "tmpdir_factory", "tempfile")


def wants_shared_folder(test: str) -> bool:
    """Whether a test may make files for the program (pytest's temporary folders, `tempfile`): then the run
    gets a folder shared by the program and the test process."""
    return any(name in test for name in SHARED_FILE_NAMES)


def _join_test(join: tuple[socket.socket, socket.socket], done_fd: int, jailed: launch.Jail) -> bool:
    """Move the run's test process into the run's cgroup (memory and process count: one limit for the whole
    run) before it runs anything: it sends a hello on `join` and waits for the answer; its pid comes from the
    kernel (SCM_CREDENTIALS), not from the message. False where it could not be moved (no cgroup, cgroup v2,
    the run ended first): the test process then keeps only its own per-process limits."""
    ok = False
    try:
        ready, _, _ = select.select([join[0], done_fd], [], [], SETUP_TIMEOUT_S)
        if join[0] in ready:
            msg, anc, _, _ = join[0].recvmsg(8, socket.CMSG_SPACE(12))
            pids = [struct.unpack("3i", data[:12])[0] for level, kind, data in anc
                    if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS]
            if msg and pids and jailed.cg is not None:
                ok = jailed.cg.join(pids[0])
    except OSError as e:
        log.warning("sandbox: could not move a test process into its run's cgroup: %s", e)
    try:
        join[0].send(b"1" if ok else b"0")
    except OSError:
        pass
    return ok


def _token() -> str:
    with _TOKEN_LOCK:
        return f"{os.getpid()}-{next(_TOKENS)}"


def _watch(jailed: launch.Jail, obs: _Observed, lim: SandboxLimits, t0: float, out_fd: int, err_fd: int,
           status_fd: int, report_fd: int | None) -> None:
    """Collect output, status tokens and test reports until the run is over or breaks a limit; then kill the
    run and drain what is left."""
    sel = selectors.DefaultSelector()
    kinds = {out_fd: "out", err_fd: "err", status_fd: "status", jailed.pidfd: "exit"}
    if report_fd is not None:
        kinds[report_fd] = "report"
    for fd in kinds:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    partial = {"status": b"", "report": b""}
    polls = 0
    try:
        while not _done(obs, report_fd, kinds):
            now = time.monotonic()
            if obs.t_user is None:  # still the harness's set-up: its own, generous deadline
                if now - t0 > SETUP_TIMEOUT_S:
                    obs.why = "setup"
                    break
            elif now - obs.t_user > lim.wall_s + lim.wall_allowance_s:  # fixed: nothing of the run moves it
                obs.why = "wall"
                break
            _pump(sel, kinds, obs, partial, lim, POLL_S)
            polls += 1
            if obs.why is None and jailed.cg is not None:
                obs.cpu_s = jailed.cg.cpu_seconds()
                if obs.cpu_s > lim.cpu_s:
                    obs.why = "cpu"
                elif polls % 5 == 0 and jailed.cg.oom_kills():  # the kernel killed a process of the run
                    obs.why = "memory"
            if obs.why:
                break
        grace = time.monotonic() + 1.0  # the program ended on its own: its exit status says how (SIGXCPU...)
        while not obs.exited and obs.why is None and time.monotonic() < grace and any(
                r.get("status") == "program_exited" for r in obs.reports):
            _pump(sel, kinds, obs, partial, lim, POLL_S)
    finally:
        if jailed.cg is not None:
            obs.cpu_s = jailed.cg.cpu_seconds()
            obs.oom = jailed.cg.oom_kills()
            obs.peak = jailed.cg.peak_bytes()
        jailed.kill()
        obs.rc = jailed.proc.returncode
        # Everything of the run is dead now: read its pipes to EOF. The test process (assert mode) sees EOF
        # on its channel and reports on its own: give it a moment.
        deadline = time.monotonic() + 2.0
        while any(k != "exit" for k in kinds.values()) and time.monotonic() < deadline:
            if report_fd is not None and any("status" in r for r in obs.reports) and \
                    set(kinds.values()) <= {"exit", "report"}:
                break
            _pump(sel, kinds, obs, partial, lim, 0.05)
        sel.close()
        if jailed.cg is not None and obs.cpu_s > lim.cpu_s and obs.why is None:
            obs.why = "cpu"


def _pump(sel: selectors.BaseSelector, kinds: dict, obs: _Observed, partial: dict, lim: SandboxLimits,
          timeout: float) -> None:
    """One select round: read every ready pipe, note the top process's exit, drop closed pipes."""
    for key, _ in sel.select(timeout=timeout):
        kind = kinds.get(key.fd)
        if kind == "exit":
            obs.exited = True
        if kind is None or kind == "exit" or not _read(key.fd, kind, obs, partial, lim):
            sel.unregister(key.fd)
            kinds.pop(key.fd, None)


def _done(obs: _Observed, report_fd: int | None, kinds: dict) -> bool:
    if report_fd is None:
        return obs.exited
    return any("status" in r for r in obs.reports) or "report" not in kinds.values()


def _read(fd: int, kind: str, obs: _Observed, partial: dict, lim: SandboxLimits) -> bool:
    """Read what is there; False at EOF."""
    try:
        chunk = os.read(fd, 1 << 16)
    except BlockingIOError:
        return True
    except OSError:
        return False
    if not chunk:
        return False
    if kind == "out":
        room = lim.output_bytes - len(obs.out)
        obs.out += chunk[: max(room, 0)]
        if len(chunk) > room and obs.judge_stdout:  # stdio tests judge stdout: more than the cap ends the run
            obs.why = obs.why or "output"
    elif kind == "err":
        obs.err += chunk
        if len(obs.err) > lim.stderr_bytes:
            del obs.err[: len(obs.err) - lim.stderr_bytes]
    else:
        buf = partial[kind] + chunk
        *lines, partial[kind] = buf.split(b"\n")
        for line in lines:
            if kind == "status":
                obs.tokens.append(line.decode("utf-8", "replace"))
                if obs.tokens[-1] == "U" and obs.t_user is None:
                    obs.t_user = time.monotonic()
            else:
                try:
                    obs.reports.append(json.loads(line))
                except ValueError:
                    obs.reports.append({"status": "runtime_error", "detail": "unreadable test report"})
    return True


def _classify(obs: _Observed, lim: SandboxLimits, mode: str) -> tuple[str, str]:
    """One status + detail from what the host observed (see the module docstring for who decides what)."""
    tokens = [t for t in obs.tokens if t]
    started = "U" in tokens
    err_tail = obs.err.decode("utf-8", "replace").strip()[-300:]
    setup_err = next((r for r in obs.reports if r.get("phase") == "setup"), None)
    if setup_err is not None:  # the test's own setup or source failed in the test process
        return "sandbox_error", f"test setup failed: {setup_err.get('error', '')}"
    if not started:
        why = next((t[2:] for t in tokens if t.startswith("E ")), "") or err_tail or (
            f"the harness did not start within {SETUP_TIMEOUT_S:.0f} s" if obs.why == "setup" else
            "the harness did not start")
        return "sandbox_error", f"before user code: {why}"
    for t in tokens:
        if t.startswith("S "):
            return "syntax_error", t[2:]
        if t.startswith("M "):
            return "memory", t[2:]
    limit = _limit_status(obs, lim)
    t_started = any(r.get("phase") == "started" for r in obs.reports)
    if mode == "assert" and not t_started and (limit is None or obs.why == "wall"):
        return "sandbox_error", "the test process did not start"
    if limit is not None:
        return limit
    if mode == "script":
        return _exit_status(obs, err_tail)
    final = next((r for r in obs.reports if "status" in r), None)
    if final is None:
        return "runtime_error", "the test process ended without a verdict"
    status, detail = str(final.get("status")), str(final.get("detail", ""))
    if status == "program_exited":
        st, det = _exit_status(obs, err_tail)
        return ("runtime_error", f"the program's process ended during the test ({det})") if st == "pass" else (st, det)
    return (status, detail) if status in ("pass", "fail", "runtime_error", "memory") else ("runtime_error", detail)


def _results(obs: _Observed, status: str) -> list[str]:
    """Per-test statuses of a pytest file, as the test process reported them, when the run's status is the
    test process's own verdict (a limit or a program that ended makes every test that status instead)."""
    final = next((r for r in obs.reports if "status" in r), None)
    if final is None or final.get("status") != status or status not in ("pass", "fail", "runtime_error"):
        return []
    results = final.get("results")
    if not isinstance(results, list) or not all(r in STATUSES or r == "skipped" for r in results):
        return []
    return [r for r in results if r != "skipped"]


def _limit_status(obs: _Observed, lim: SandboxLimits) -> tuple[str, str] | None:
    """The limit a run hit. An OOM kill the cgroup recorded wins over the CPU limit: a program filling memory
    can spend its CPU time in reclaim before the kill lands (load-dependent), and it did run out of memory."""
    if obs.oom:
        return "memory", "memory limit of the run"
    if obs.why == "cpu":
        return "timeout", f"CPU limit ({obs.cpu_s:.2f} s > {lim.cpu_s} s)"
    if obs.why == "wall":
        return "timeout", "wall-clock limit"
    if obs.why == "output":
        return "runtime_error", "output limit exceeded"
    return None


def _exit_status(obs: _Observed, err_tail: str) -> tuple[str, str]:
    rc = obs.rc
    if rc == 0:
        return "pass", ""
    if rc in (128 + signal.SIGXCPU, -signal.SIGXCPU):
        return "timeout", "CPU limit"
    if rc in (128 + signal.SIGXFSZ, -signal.SIGXFSZ):
        return "runtime_error", "file size limit"
    last = err_tail.splitlines()[-1] if err_tail else ""
    if last.startswith("MemoryError"):
        return "memory", "MemoryError"
    return "runtime_error", last or f"exit status {rc}"
