"""The test process: runs assert-style test code (MBPP asserts, HumanEval `check(candidate)`, LeetCode
`check(Solution().method)`) against stand-ins of the program, which lives in another sandbox.

A zygote (`serve`) preloads the modules tests use and forks one child per test run (`run_one`, in its own
process group and folder, both ended before the host returns the verdict). The child: waits until the host
moved it into the run's cgroup (`_join_run`), compiles and runs the
test's trusted `setup`, reports "started", reads the program's list of names, binds stand-ins for the names
the test needs (`names.py`), runs the test and reports the verdict on a pipe only the host reads.

Name resolution in the test namespace (who wins): the test's own definitions; then what the setup defines
itself (def/class/assignment: a program cannot redefine `is_same_list` or `ListNode`); then the program's
functions, classes, exception classes, module-level values the test looks up, and modules (only those of
`names.TRUSTED_MODULES`: never a module the program names), except that a builtin or a name the setup
imports (the LeetCode prelude star-imports `operator`, `math`...) keeps its binding unless the test only
calls it on literals or passes it on as an argument (`overridable_names`): so a program cannot redefine
`abs` or `isclose` for the test, while MBPP task 126's function `sum` (`assert sum(10, 15) == 6`) and a
program's `add` under the prelude (`check(add)`) are still the program's, as they would be in Python.

Every value the test sees comes back through `codec.Decoder`: built-in values, the setup's own
ListNode/TreeNode, or a reference whose operations run in the program's process (`remote.py`). The verdict:
`pass` only when the test ran to its end and called the program at least once; SystemExit or any other
BaseException is never a pass; a channel failure decides the verdict whatever the test caught."""

from __future__ import annotations

import builtins
import json
import os
import signal
import socket
import sys

from . import codec, pytestrun, share  # noqa: TID251 - inside the sandbox this folder is the package `jailed`
from .channel import Channel, ProgramGone, ProtocolError  # noqa: TID251
from .names import (  # noqa: TID251
    ALLOWED_PACKAGES,
    PRELOAD,
    PYTEST_PRELOAD,
    bind_program_names,
    defined_names,
    overridable_names,
)
from .remote import Call  # noqa: TID251

RUN_DIR = "/tmp/cf-run-{pid}"  # a test run's working folder, removed when the run ends (`_end_run`)
def _assert_detail(e: BaseException, test_source: str) -> str:
    tb, line = e.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "test.py":
            line = tb.tb_lineno
        tb = tb.tb_next
    lines = test_source.splitlines()
    text = lines[line - 1].strip() if line and 0 < line <= len(lines) else ""
    return f"AssertionError at test line {line}: {text[:200]}" + (f" ({e})" if str(e) else "")


class _Lazy:
    """A set computed on first membership test (parsing the test only when a program name needs it)."""

    def __init__(self, make) -> None:
        self.make, self.value = make, None

    def __contains__(self, item) -> bool:
        if self.value is None:
            self.value = self.make()
        return item in self.value


WARM: dict[str, tuple[dict, set[str]]] = {}  # setups run once in the zygote; children start from a copy


def setup_namespace(setup: str) -> tuple[dict, set[str]]:
    """A fresh test namespace with `setup` run in it, and the names the setup defines itself."""
    if setup in WARM:
        ns, protected = WARM[setup]
        return dict(ns), protected
    ns: dict = {"__name__": "__main__", "__builtins__": builtins}
    if setup:
        exec(compile(setup, "setup.py", "exec", dont_inherit=True), ns)
    return ns, defined_names(setup) if setup else set()


def run_one(spec: dict, chan_in: int, chan_out: int, report_fd: int, join_fd: int = -1) -> None:
    """One test run (in a forked child of the zygote)."""
    import resource

    if join_fd >= 0:
        _join_run(join_fd)

    def report(**kw) -> None:
        data = (json.dumps(kw) + "\n").encode()
        while data:
            data = data[os.write(report_fd, data):]

    lim = spec["limits"]
    os.setsid()  # its own process group: whatever it starts dies with it (`_end_run`)
    folder = RUN_DIR.format(pid=os.getpid())
    os.makedirs(folder, exist_ok=True)
    os.chdir(folder)  # files the test writes land in the run's folder, removed when the run ends
    if spec.get("share"):  # tmp_path and tempfile live in the folder shared with the program (another uid)
        os.umask(0)
        share.use_shared_folder(spec["share"])
    resource.setrlimit(resource.RLIMIT_CPU, (lim["cpu"], lim["cpu"]))
    grow = _address_space() + lim["memory"]  # the run's memory limit, over what the fork inherited
    resource.setrlimit(resource.RLIMIT_AS, (grow, grow))
    signal.alarm(lim["wall"])
    deferred = None
    try:
        test = compile(spec["test"], "test.py", "exec", dont_inherit=True)
        overridable = _Lazy(lambda: overridable_names(spec["test"]))
        try:
            ns, protected = setup_namespace(spec.get("setup") or "")
        except NameError:  # the setup uses the program's names (MBPP 367: `root = Node(1)`): after binding them
            deferred = compile(spec["setup"], "setup.py", "exec", dont_inherit=True)
            ns, protected = setup_namespace("")
            protected = defined_names(spec["setup"])
    except BaseException as e:  # noqa: BLE001 - the test's own fault: reported before anything of the program
        report(phase="setup", error=f"{type(e).__name__}: {e}"[:500])
        return
    ln, tn = ns.get("ListNode"), ns.get("TreeNode")
    ch = Channel(chan_in, chan_out, spec["channel_bytes"], ln if isinstance(ln, type) else codec.ListNode,
                 tn if isinstance(tn, type) else codec.TreeNode)
    report(phase="started")
    status, detail = _run_test(ch, ns, test, spec, protected, overridable, deferred)
    if status == "pass" and ch.requests == 0:  # the test ran without ever reaching the program: no evidence
        status, detail = "fail", "the test never called the program"
    report(status=status, detail=detail[:1000], calls=ch.calls, results=ch.results)


def _join_run(fd: int, timeout: float = 60.0) -> None:
    """Before anything of the run: say hello on the host's join socket and wait (bounded) until the host has
    moved this process into the run's cgroup (`runner._join_test`); its answer is not needed (without a
    cgroup the per-process limits below hold)."""
    import select

    sock = socket.socket(fileno=fd)
    try:
        sock.send(b"j")
        if select.select([sock], [], [], timeout)[0]:
            sock.recv(8)
    except OSError:
        pass
    finally:
        sock.close()


def _address_space() -> int:
    """This process's current virtual size in bytes (from /proc/self/statm)."""
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _run_test(ch: Channel, ns: dict, test, spec: dict, protected: set, overridable,
              deferred=None) -> tuple[str, str]:
    try:
        status, detail = _run_test_code(ch, ns, test, spec, protected, overridable, deferred)
    except MemoryError:  # decoding what the program sent, or the test's own work on it, over the limit
        status, detail = "memory", "MemoryError in the test process"
    except BaseException as e:  # noqa: BLE001 - whatever the test let through
        status, detail = _status_of(e, spec["test"])
    return broken_status(ch) or (status, detail)


def broken_status(ch: Channel) -> tuple[str, str] | None:
    """The verdict when the channel failed at any point of the test, caught by the test or not."""
    if isinstance(ch.broken, ProgramGone):
        return "program_exited", str(ch.broken)
    if isinstance(ch.broken, ProtocolError):
        return "runtime_error", f"protocol: {ch.broken}"
    return None


def _run_test_code(ch: Channel, ns: dict, test, spec: dict, protected: set, overridable,
                   deferred=None) -> tuple[str, str]:
    hello = ch.recv()
    if hello.get("op") != "hello" or type(hello.get("names")) is not dict:
        return "runtime_error", "protocol: the program's process did not start properly"
    if hello.get("error"):
        exc = codec.Decoder().dec(hello["error"])
        return "runtime_error", f"the program raised while loading: {type(exc).__name__}: {exc}"
    if spec.get("pytest_module"):
        status, detail, ch.results = pytestrun.run_file(ch, hello["names"], spec)
        return status, detail
    bind_program_names(ns, hello["names"], protected, overridable, ch, _global_names(test))
    if deferred is not None:
        exec(deferred, ns)
    exec(test, ns)
    if spec.get("entry_point"):
        ns["check"](Call(ch, None, spec["entry_point"]))
    return "pass", ""


def _global_names(code) -> set[str]:
    """Names the compiled test (and the functions it defines) look up as globals or attributes: the module
    values of the program it may use (`co_names`, no parsing)."""
    out, todo = set(), [code]
    while todo:
        c = todo.pop()
        out.update(c.co_names)
        todo.extend(k for k in c.co_consts if hasattr(k, "co_names"))
    return out


def _status_of(e: BaseException, test_source: str) -> tuple[str, str]:
    if isinstance(e, AssertionError):
        return "fail", _assert_detail(e, test_source)
    if isinstance(e, ProgramGone):
        return "program_exited", str(e)
    if isinstance(e, ProtocolError):
        return "runtime_error", f"protocol: {e}"
    if isinstance(e, SystemExit):  # never a pass: the test did not run to its end
        return "runtime_error", f"the test ended with SystemExit({e.code!r}) before it finished"
    if isinstance(e, codec.CandidateError):
        return "runtime_error", f"the program raised {e}"
    return "runtime_error", f"{type(e).__name__}: {e}"


def serve(ctl_fd: int, allowed: list[str], warm: list[str]) -> None:
    """The zygote: preload modules and the common setups, then fork one `run_one` child per request on the
    control socket."""
    import importlib

    ALLOWED_PACKAGES.update(allowed)
    for m in PRELOAD + (PYTEST_PRELOAD if "pytest" in allowed else ()):
        try:
            importlib.import_module(m)
        except ImportError:
            pass
    for setup in warm:
        try:
            WARM[setup] = setup_namespace(setup)
        except Exception:  # noqa: BLE001 - reported per run instead
            pass
    ctl = socket.socket(fileno=ctl_fd)
    children: dict[str, tuple[int, int]] = {}  # token -> (pid, the run's "done" fd: closed once it is gone)
    while True:
        _reap(children)
        try:
            msg, fds, _, _ = socket.recv_fds(ctl, 1 << 16, 8)
        except OSError:
            os._exit(0)
        if not msg:
            os._exit(0)
        req = json.loads(msg)
        if req.get("op") == "kill":  # the host's verdict is in: end the run (its "done" fd tells the host)
            child = children.pop(req["token"], None)
            if child:
                _end_run(*child, wait=True)
            continue
        pid = os.fork()
        if pid == 0:
            try:
                ctl.close()
                os.close(fds[4])
                with os.fdopen(fds[0], "rb") as f:
                    spec = json.loads(f.read())
                run_one(spec, fds[1], fds[2], fds[3], fds[5] if len(fds) > 5 else -1)
            finally:
                os._exit(0)
        children[req["token"]] = (pid, fds[4])
        for fd in fds[:4] + fds[5:]:
            os.close(fd)


def _reap(children: dict[str, tuple[int, int]]) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        done = -1
        for token, (p, fd) in list(children.items()):
            if p == pid:
                del children[token]
                done = fd
        _end_run(pid, done, wait=False)


def _end_run(pid: int, done: int, wait: bool) -> None:
    """Kill a test run's process group (the run and anything it started), reap it (`wait`), remove its
    folder, then close its "done" fd (the host waits for that EOF before it returns the verdict): nothing of
    the run is left running or on disk."""
    import shutil

    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if wait:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    shutil.rmtree(RUN_DIR.format(pid=pid), ignore_errors=True)
    if done >= 0:
        os.close(done)


def main() -> None:
    """Entry point inside the sandbox: argv[1] is the fd of the host's marshalled spec (uid to drop to,
    sys.path, control socket fd, allowed packages)."""
    import marshal

    from .program import drop_privileges  # noqa: TID251 - see above

    with os.fdopen(int(sys.argv[1]), "rb") as f:
        spec = marshal.loads(f.read())
    if spec.get("drop_uid") is not None:
        drop_privileges(spec["drop_uid"])
    sys.path[:] = spec["sys_path"]
    serve(spec["ctl_fd"], spec["allowed"], spec.get("warm", []))
