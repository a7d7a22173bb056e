"""Run untrusted Python in a separate, locked-down process and report what happened.

Isolation (strongest first; what applies is decided per run and logged once):

* **as root** (this project's machines): the child is a fresh ``python -I -S`` that, before running any
  user code, enters new network + mount + PID namespaces (``unshare``), mounts private size-limited tmpfs
  on ``/tmp``, ``/var/tmp``, ``/dev/shm``, ``/run/lock`` (the only world-writable places) and works in
  ``/tmp``; then forks the PID-namespace init, sets resource limits (CPU, address space, processes,
  file size, open files, no core), drops to a **unique unprivileged uid/gid per run** (so RLIMIT_NPROC
  really bounds a fork bomb, the parent cannot be signalled, ``/proc/<ppid>/environ`` is unreadable)
  with ``no_new_privs`` and ``PDEATHSIG=SIGKILL``. When the init dies, the kernel kills every process left
  in the namespace, so no daemon survives the run.
* **not root**: try an unprivileged user+network namespace; otherwise sockets are blocked in-process
  (monkeypatched ``socket``, which determined code can undo). Resource limits still apply; the run is a
  new session and its process group is killed at the deadline; the work dir is a fresh 0700 temp dir.

In both cases: the environment is minimal (``PATH``, ``LANG``, ``PYTHONHASHSEED``; nothing inherited),
the wall-clock deadline is enforced by the parent (SIGKILL), stdout/stderr are read with a byte cap.
The child reports its own outcome (``syntax_error`` / ``memory`` / ``runtime_error`` / ``fail``) as a
line prefixed with a per-run random nonce on a separate pipe; a process that dies without reporting is
classified from its exit status. Assert-mode tests share the interpreter with the program, so a program
written to cheat (e.g. by frame inspection to find the nonce) can forge a pass: rewards for adversarial
policies should prefer stdio tests.
"""

from __future__ import annotations

import atexit
import itertools
import json
import logging
import os
import queue
import secrets
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

STATUSES = ("pass", "fail", "timeout", "memory", "runtime_error", "syntax_error", "sandbox_error")
UID_BASE = 1_500_000  # unprivileged uids used for runs when we are root (no passwd entry needed)
UID_SPAN = 400_000


@dataclass
class SandboxLimits:
    """Per-run limits: wall and CPU seconds, address space, processes, file size, captured output."""

    wall_s: float = field(default=10.0, metadata={"help": "Wall-clock limit per sandboxed run (seconds)."})
    cpu_s: float = field(default=5.0, metadata={"help": "CPU-time limit per sandboxed run (seconds)."})
    memory_mb: int = field(default=1024, metadata={"help": "Address-space limit per run (MB)."})
    nproc: int = field(default=32, metadata={"help": "Processes a run may hold."})
    fsize_mb: int = field(default=16, metadata={"help": "Largest file a run may write (MB)."})
    output_bytes: int = field(default=1 << 20, metadata={"help": "Captured stdout/stderr per run (bytes)."})

    def __post_init__(self) -> None:
        for name in ("wall_s", "cpu_s", "memory_mb", "nproc", "fsize_mb", "output_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}: must be > 0 (got {getattr(self, name)})")


@dataclass
class RunResult:
    """Outcome of one sandboxed run: a status from STATUSES (``pass`` = ran to completion) and the output."""

    status: str
    stdout: str = ""
    stderr: str = ""
    returncode: int | None = None
    detail: str = ""
    wall_s: float = 0.0
    extra: dict = field(default_factory=dict)


# The child-side program, run as `python -I -S -c CHILD_CODE SPEC_JSON` with the nonce on fd REPORT_FD.
# It must stay self-contained (stdlib only) because it runs before privileges are dropped.
CHILD_LIB = r'''
import builtins, ctypes, json, os, resource, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
NS_NET, NS_MNT, NS_PID, NS_USER = 0x40000000, 0x00020000, 0x20000000, 0x10000000


def child_main(spec, nonce, rfd):
    def report(status, detail=""):
        try:
            os.write(rfd, (nonce + " " + status + " " + detail.replace("\n", " ")[:500] + "\n").encode())
        except OSError:
            pass
    uid = spec["uid"]
    net = False
    if uid is not None:
        if libc.unshare(NS_NET | NS_MNT | NS_PID) != 0:
            report("sandbox_error", "unshare failed errno %d" % ctypes.get_errno()); os._exit(70)
        net = True
        if libc.mount(b"none", b"/", None, 16384 | (1 << 18), None) != 0:
            report("sandbox_error", "mount private failed"); os._exit(70)
        opts = ("size=%dm,mode=0700,uid=%d,gid=%d" % (spec["tmpfs_mb"], uid, uid)).encode()
        for d in (b"/tmp", b"/var/tmp", b"/dev/shm", b"/run/lock"):
            o = opts.replace(b"mode=0700", b"mode=0755").replace(b"uid=%d,gid=%d" % (uid, uid), b"uid=0,gid=0") \
                if d == b"/tmp" else opts
            if os.path.isdir(d) and libc.mount(b"tmpfs", d, b"tmpfs", 2 | 4, o) != 0:
                report("sandbox_error", "tmpfs mount failed on %s" % d.decode()); os._exit(70)
        # The interpreter's stdlib may sit under a directory the run's uid cannot traverse (/root/.pyenv):
        # bind it read-only under /tmp/lib and point sys.path there.
        new_path = []
        for i, p in enumerate(sys.path):
            if not os.path.isdir(p):
                continue
            mp = "/tmp/lib/%d" % i
            os.makedirs(mp)
            if libc.mount(p.encode(), mp.encode(), None, 4096 | 16384, None) != 0 or \
                    libc.mount(None, mp.encode(), None, 4096 | 32 | 1 | 2 | 4, None) != 0:
                report("sandbox_error", "bind mount of %s failed" % p); os._exit(70)
            new_path.append(mp)
        moved = [(p, "/tmp/lib/%d" % i) for i, p in enumerate(sys.path) if os.path.isdir(p)]
        sys.path[:] = new_path
        for m in list(sys.modules.values()):
            mp_ = getattr(m, "__path__", None)
            if isinstance(mp_, list):
                for j, e in enumerate(mp_):
                    for a, b in moved:
                        if e == a or e.startswith(a + "/"):
                            mp_[j] = b + e[len(a):]
                            break
        sys.path_importer_cache.clear()
        os.mkdir("/tmp/work", 0o700)
        os.chown("/tmp/work", uid, uid)
        os.chdir("/tmp/work")
        pid = os.fork()
        if pid:
            os.close(rfd)
            for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(s, signal.SIG_IGN)
            _, st = os.waitpid(pid, 0)
            os._exit(os.waitstatus_to_exitcode(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st))
    else:
        if spec["try_userns"] and libc.unshare(NS_USER | NS_NET) == 0:
            net = True
        os.chdir(spec["workdir"])
    lim = spec["limits"]
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (lim["cpu"], lim["cpu"]))
        resource.setrlimit(resource.RLIMIT_AS, (lim["as"], lim["as"]))
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim["fsize"], lim["fsize"]))
        resource.setrlimit(resource.RLIMIT_NOFILE, (lim["nofile"], lim["nofile"]))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NPROC, (lim["nproc"], lim["nproc"]))
        if uid is not None:
            os.setgroups([]); os.setresgid(uid, uid, uid); os.setresuid(uid, uid, uid)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)
        libc.prctl(38, 1, 0, 0, 0)
    except (OSError, ValueError) as e:
        report("sandbox_error", "limits: %r" % (e,)); os._exit(70)
    if not net:
        import socket
        def _blocked(*a, **k):
            raise PermissionError("network access is disabled in the sandbox")
        for _n in ("socket", "create_connection", "create_server", "socketpair", "fromfd"):
            setattr(socket, _n, _blocked)
        import _socket
        _socket.socket = _blocked
    sources = spec["sources"]
    mode = spec["mode"]
    sys.argv = ["solution.py"]; sys.path.insert(0, os.getcwd())
    def _run():
        g = {"__name__": "__main__", "__builtins__": builtins}
        try:
            code = compile(sources["setup"] + "\n" + sources["program"] if sources["setup"] else sources["program"],
                           "solution.py", "exec")
        except (SyntaxError, ValueError, MemoryError) as e:
            return ("syntax_error" if not isinstance(e, MemoryError) else "memory"), repr(e)
        try:
            if mode == "assert":
                g["__name__"] = "solution"
            exec(code, g)
            if mode == "assert":
                tcode = compile(sources["test"], "test.py", "exec")
                exec(tcode, g)
                if spec["entry_point"]:
                    g["check"](eval(spec["entry_point"], g))
        except SystemExit as e:
            if mode == "assert" or e.code not in (None, 0):
                return "runtime_error", "SystemExit(%r)" % (e.code,)
        except AssertionError as e:
            return ("fail" if mode == "assert" else "runtime_error"), repr(e)[:300]
        except MemoryError:
            return "memory", "MemoryError"
        except RecursionError as e:
            return "runtime_error", repr(e)[:300]
        except BaseException as e:
            return "runtime_error", repr(e)[:300]
        return "pass", ""
    status, detail = _run()
    try:
        sys.stdout.flush()
    except BaseException:
        pass
    report(status, detail)
    os._exit(0 if status == "pass" else 1)
'''

# One run per process: `python -I -S -c EXEC_MAIN SPEC_PATH NONCE_FD REPORT_FD` (fallback when no fork server).
EXEC_MAIN = CHILD_LIB + r'''
with open(sys.argv[1], "rb") as _f:
    _spec = json.loads(_f.read())
_nonce = os.read(int(sys.argv[2]), 64).decode()
os.close(int(sys.argv[2]))
child_main(_spec, _nonce, int(sys.argv[3]))
'''

# A fork server: pre-imports what runs need, then forks one child per request. Request: one message
# "SPEC_PATH NONCE\n" carrying fds [stdin, stdout, stderr, report]; replies "pid N\n" then "rc N\n".
ZYGOTE_MAIN = CHILD_LIB + r'''
import socket
for _m in PRELOAD:
    try:
        __import__(_m)
    except ImportError:
        pass
_ctl = socket.socket(fileno=int(sys.argv[1]))
while True:
    try:
        _msg, _fds, _, _ = socket.recv_fds(_ctl, 65536, 4)
    except OSError:
        os._exit(0)
    if not _msg:
        os._exit(0)
    _path, _nonce = _msg.decode().split()
    with open(_path, "rb") as _f:
        _spec = json.loads(_f.read())
    _pid = os.fork()
    if _pid == 0:
        try:
            _ctl.close()
            os.setsid()
            for _i, _fd in enumerate(_fds[:3]):
                os.dup2(_fd, _i)
            for _fd in _fds[:3]:
                if _fd > 2:
                    os.close(_fd)
            child_main(_spec, _nonce, _fds[3])
        finally:
            os._exit(70)
    for _fd in _fds:
        os.close(_fd)
    _ctl.sendall(b"pid %d\n" % _pid)
    _, _st = os.waitpid(_pid, 0)
    _ctl.sendall(b"rc %d\n" % os.waitstatus_to_exitcode(_st))
'''.replace("PRELOAD", repr(("typing", "collections", "heapq", "bisect", "itertools", "functools", "math",
                               "string", "operator", "re", "random", "datetime", "json")))
_uid_counter = itertools.count()
_uid_lock = threading.Lock()
_mode_logged = False
USE_FORK_SERVER = True  # set False to start a fresh interpreter per run (slower; same isolation)


def _is_root() -> bool:
    """Whether we can use namespaces + uid switching (strong isolation)."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _next_uid() -> int:
    """A uid no other concurrent run of this process (and, very likely, of sibling processes) uses."""
    with _uid_lock:
        n = next(_uid_counter)
    return UID_BASE + (os.getpid() * 1009 + n) % UID_SPAN


def _minimal_env() -> dict[str, str]:
    """The only environment the child sees: nothing inherited, so no secrets leak."""
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONIOENCODING": "utf-8"}


class _ForkServer:
    """A root-side interpreter with the sandbox code and common modules imported, forking one child per
    run (saves the ~20-40 ms interpreter start per execution). One run at a time per server."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", ZYGOTE_MAIN, str(theirs.fileno())],
                                     pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_minimal_env(),
                                     start_new_session=True)
        theirs.close()
        self.sock = ours
        self.buf = b""

    def start(self, spec_path: str, nonce: str, fds: list[int]) -> int:
        """Ask for a run; returns the child's pid (its process group id too)."""
        self.sock.settimeout(30)
        socket.send_fds(self.sock, [f"{spec_path} {nonce}\n".encode()], fds)
        return int(self._line(30).split()[1])

    def wait(self, timeout: float) -> int | None:
        """The child's exit code (negative: killed by that signal), or None if not done within timeout."""
        try:
            return int(self._line(timeout).split()[1])
        except TimeoutError:
            return None

    def _line(self, timeout: float) -> str:
        self.sock.settimeout(max(timeout, 0.001))
        while b"\n" not in self.buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("sandbox fork server exited")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def close(self) -> None:
        self.sock.close()
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_SERVERS: queue.SimpleQueue[_ForkServer] = queue.SimpleQueue()
_ALL_SERVERS: list[_ForkServer] = []


def _acquire_server() -> _ForkServer | None:
    """An idle fork server (started on demand); None when they are disabled or cannot start."""
    if not USE_FORK_SERVER:
        return None
    try:
        return _SERVERS.get_nowait()
    except queue.Empty:
        pass
    try:
        server = _ForkServer()
    except OSError as e:
        log.warning("sandbox fork server unavailable (%s); starting one interpreter per run", e)
        return None
    _ALL_SERVERS.append(server)
    return server


@atexit.register
def shutdown_servers() -> None:
    """Stop all fork servers (they also exit when this process does)."""
    while True:
        try:
            _SERVERS.get_nowait()
        except queue.Empty:
            break
    for server in _ALL_SERVERS:
        server.close()
    _ALL_SERVERS.clear()


def _read_capped(fds: list[int], deadline: float, cap: int) -> tuple[list[bytes], str | None]:
    """Read the pipes `fds` until all close, the deadline passes or together they exceed `cap` bytes.

    Returns (contents per fd, why_stopped) where why_stopped is None, "timeout" or "output"."""
    sel = selectors.DefaultSelector()
    bufs = {fd: bytearray() for fd in fds}
    for fd in fds:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    why = None
    total = 0
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                why = "timeout"
                break
            for key, _ in sel.select(timeout=min(left, 0.25)):
                try:
                    chunk = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                bufs[key.fd] += chunk
                total += len(chunk)
                if total > cap:
                    why = "output"
                    break
            if why:
                break
    finally:
        sel.close()
    return [bytes(bufs[fd][:cap]) for fd in fds], why


def _killpg(pid: int) -> None:
    """SIGKILL the run's process group (as root the PID namespace dies with its init)."""
    for kill, target in ((os.killpg, pid), (os.kill, pid)):
        try:
            kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _classify(rc: int | None, reported: tuple[str, str] | None, why: str | None, stderr: str) -> tuple[str, str]:
    """Turn what we observed into one status + detail."""
    if why == "timeout":
        return "timeout", "wall-clock limit"
    if why == "output":
        return "runtime_error", "output limit exceeded"
    if reported is not None:
        return reported
    if rc is not None and rc in (-signal.SIGXCPU, 128 + signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGKILL):
        return "timeout", "CPU limit"
    if "MemoryError" in stderr:
        return "memory", "MemoryError"
    if rc == 70:
        return "sandbox_error", stderr[-300:] or "child setup failed"
    return "runtime_error", f"exit status {rc} without report"


def _spec(program: str, mode: str, test: str, setup: str, entry_point: str | None, limits: SandboxLimits,
          uid: int | None, work: str) -> dict:
    """What the child needs to set itself up and run (written to a root-only file in the stage dir)."""
    return {
        "uid": uid, "try_userns": uid is None, "workdir": work, "mode": mode, "entry_point": entry_point,
        "tmpfs_mb": max(8, limits.fsize_mb * 4),
        "limits": {"cpu": max(1, int(round(limits.cpu_s))), "as": limits.memory_mb << 20,
                   "fsize": limits.fsize_mb << 20, "nofile": 64, "nproc": limits.nproc},
        "sources": {"program": program, "test": test, "setup": setup},
    }


def _launch_exec(spec_path: str, nonce: str, fds: list[int], stage: str) -> subprocess.Popen:
    """Fallback launcher: a fresh interpreter for this run."""
    n_read, n_write = os.pipe()
    os.write(n_write, nonce.encode())
    os.close(n_write)
    try:
        return subprocess.Popen([sys.executable, "-I", "-S", "-c", EXEC_MAIN, spec_path, str(n_read), str(fds[3])],
                                stdin=fds[0], stdout=fds[1], stderr=fds[2], cwd=stage, env=_minimal_env(),
                                start_new_session=True, pass_fds=(n_read, fds[3]), close_fds=True)
    finally:
        os.close(n_read)


def run_python(program: str, *, stdin: str = "", mode: str = "script", test: str = "", setup: str = "",
               entry_point: str | None = None, limits: SandboxLimits | None = None) -> RunResult:
    """Run `program` (mode "script": as __main__ with `stdin`; mode "assert": then `test`, then
    `check(<entry_point>)` when given) in the sandbox; never raises for anything the program does."""
    global _mode_logged
    limits = limits or SandboxLimits()
    uid = _next_uid() if _is_root() else None
    if not _mode_logged:
        log.info("sandbox isolation: %s", "namespaces + per-run uid" if uid else "rlimits + socket block")
        _mode_logged = True
    t0 = time.monotonic()
    deadline = t0 + limits.wall_s
    stage = tempfile.mkdtemp(prefix="cotforge-sbx-")
    own: list[int] = []
    server = None
    try:
        work = os.path.join(stage, "work")
        os.mkdir(work, 0o700)
        spec_path = os.path.join(stage, "spec.json")
        with open(spec_path, "w", encoding="utf-8") as f:
            json.dump(_spec(program, mode, test, setup, entry_point, limits, uid, work), f)
        in_path = os.path.join(stage, "stdin.txt")
        with open(in_path, "w", encoding="utf-8") as f:
            f.write(stdin)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        rep_r, rep_w = os.pipe()
        in_fd = os.open(in_path, os.O_RDONLY)
        own = [out_r, err_r, rep_r]
        child_fds = [in_fd, out_w, err_w, rep_w]
        nonce = secrets.token_hex(16)
        proc = None
        try:
            server = _acquire_server()
            if server is not None:
                try:
                    pid = server.start(spec_path, nonce, child_fds)
                except (OSError, ValueError, IndexError) as e:
                    log.warning("sandbox fork server failed (%s); replacing it", e)
                    _ALL_SERVERS.remove(server)
                    server.close()
                    server = None
            if server is None:
                proc = _launch_exec(spec_path, nonce, child_fds, stage)
                pid = proc.pid
        except OSError as e:
            return RunResult("sandbox_error", detail=f"spawn failed: {e}", wall_s=time.monotonic() - t0)
        finally:
            for fd in child_fds:
                os.close(fd)
        (out, err), why = _read_capped([out_r, err_r], deadline, limits.output_bytes)
        if why:
            _killpg(pid)
        rc = _wait(server, proc, pid, deadline)
        if rc is None:  # pipes closed but the process lingers past the deadline
            why = why or "timeout"
            _killpg(pid)
            rc = _wait(server, proc, pid, time.monotonic() + 10)
        _killpg(pid)  # anything left in the session (non-root mode)
        os.set_blocking(rep_r, False)
        try:
            rep = os.read(rep_r, 4096).decode("utf-8", "replace")
        except BlockingIOError:
            rep = ""
        reported = None
        for line in rep.splitlines():
            parts = line.split(" ", 2)
            if len(parts) >= 2 and parts[0] == nonce and parts[1] in STATUSES:
                reported = (parts[1], parts[2] if len(parts) > 2 else "")
        stderr = err.decode("utf-8", "replace")
        status, detail = _classify(rc, reported, why, stderr)
        return RunResult(status, out.decode("utf-8", "replace"), stderr, rc, detail, time.monotonic() - t0)
    finally:
        for fd in own:
            os.close(fd)
        if server is not None:
            _SERVERS.put(server)
        shutil.rmtree(stage, ignore_errors=True)


def _wait(server: _ForkServer | None, proc: subprocess.Popen | None, pid: int, deadline: float) -> int | None:
    """Exit code of the run's top process, or None if it is still running at `deadline`."""
    left = max(0.05, deadline - time.monotonic())
    if proc is not None:
        try:
            return proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            return None
    assert server is not None
    return server.wait(left)
