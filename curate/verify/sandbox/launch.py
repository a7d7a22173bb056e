"""Starting jailed interpreters: one per run for the program (`Jail`), and one long-lived test server whose
forked children run assert-style tests (`TestServer`).

Start-up of a jail: bwrap is spawned with an info pipe and a block pipe; once bwrap reports the host pid of
the sandbox's init (still blocked, nothing of the run started), the host writes its user map (root mode),
moves it into the run's cgroup and opens a pidfd on it (signals by pidfd cannot hit a recycled pid), then
lets it go on. Every process of the run descends from that init, so all are in the cgroup and all die when
the init is killed (PID namespace), whatever they did with sessions or parent-death signals.

Shared scratch folders (`share_root`, `new_share`): one root per verifier process, bound at /share into its
test servers; a run that shares a folder with its test process gets `/share/<random name>` bound into its
program's jail at the same path, removed (`remove_tree`) before its verdict is returned.
"""

from __future__ import annotations

import atexit
import json
import logging
import marshal
import os
import queue
import secrets
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from collections.abc import Callable

import cotforge.curate.verify.sandbox.jail as jail
from cotforge.curate.verify.sandbox.cgroups import RunCgroup, cgroup_tree

log = logging.getLogger(__name__)


def data_fd(data: bytes) -> int:
    """A read-only fd whose file holds `data` (a memfd: nothing on disk; the reader cannot write it back)."""
    m = os.memfd_create("cotforge-sbx", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(m, view):]
        return os.open(f"/proc/self/fd/{m}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(m)


class Jail:
    """One sandboxed interpreter running `jailed.<module>.main` with `spec` (marshalled) on its spec fd."""

    def __init__(self, module: str, spec: dict, *, packages: tuple[str, ...], tmp_mb: int,
                 memory_bytes: int | None, max_pids: int | None, stdin: int | None, stdout: int | None,
                 stderr: int | None, keep_fds: tuple[int, ...] = (), uid_base: int = jail.UID_BASE,
                 rw_binds: tuple[tuple[str, str], ...] = (), strict: bool = False) -> None:
        root = jail.is_root()
        lay = jail.layout(packages)
        self.lease = jail.UidLease(uid_base) if root else None
        self.cg: RunCgroup | None = None
        self.tree = None
        self.child_pidfd = -1
        spec = dict(spec, sys_path=list(lay.sys_path), drop_uid=jail.SANDBOX_UID if root else None)
        own: list[int] = []
        try:
            spec_fd = data_fd(marshal.dumps(spec))
            info_r, info_w = os.pipe2(os.O_CLOEXEC)
            block_r, block_w = os.pipe2(os.O_CLOEXEC)
            sec_r, sec_w = os.pipe2(os.O_CLOEXEC)
            own += [spec_fd, info_r, info_w, block_r, block_w, sec_r, sec_w]
            os.write(sec_w, jail.seccomp_filter(strict))
            os.close(sec_w)
            own.remove(sec_w)
            argv = jail.bwrap_argv(lay, root=root, info_fd=info_w, block_fd=block_r, seccomp_fd=sec_r,
                                   tmp_mb=tmp_mb, module=module, spec_fd=spec_fd, rw_binds=rw_binds)
            self.proc = subprocess.Popen(argv, stdin=stdin if stdin is not None else subprocess.DEVNULL,
                                         stdout=stdout, stderr=stderr, close_fds=True, start_new_session=True,
                                         pass_fds=(spec_fd, info_w, block_r, sec_r, *keep_fds),
                                         env={"PATH": "/usr/bin:/bin"})
            for fd in (spec_fd, info_w, block_r, sec_r):
                os.close(fd)
                own.remove(fd)
            self.pidfd = os.pidfd_open(self.proc.pid)
            child = self._child_pid(info_r)
            if child is None:
                raise OSError("bwrap exited before starting the sandbox")
            self.child_pidfd = os.pidfd_open(child)
            if root:
                jail.write_user_map(child, self.lease.uid)
            self.tree = cgroup_tree() if memory_bytes is not None else None
            if self.tree is not None:
                self.cg = self.tree.lease(memory_bytes, max_pids or 64)
                self.cg.attach(child)
            os.write(block_w, b"1")
        except BaseException:
            self._abort()
            raise
        finally:
            for fd in own:
                os.close(fd)

    @staticmethod
    def _child_pid(info_r: int, timeout: float = 30.0) -> int | None:
        """Read bwrap's info JSON: the host pid of the sandbox's init."""
        buf = b""
        while True:
            ready, _, _ = select.select([info_r], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(info_r, 4096)
            if not chunk:
                break
            buf += chunk
        try:
            return int(json.loads(buf)["child-pid"])
        except (ValueError, KeyError):
            return None

    def _abort(self) -> None:
        proc = getattr(self, "proc", None)
        if proc is not None:
            proc.kill()
            proc.wait()
        self.close()

    def kill(self) -> None:
        """Kill every process of the run: the sandbox's init, whose exit the kernel completes only once every
        other process of its PID namespace is gone; then whatever the cgroup still lists."""
        if self.child_pidfd >= 0:
            try:
                signal.pidfd_send_signal(self.child_pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
            select.select([self.child_pidfd], [], [], 5.0)
        if self.cg is not None:
            self.cg.kill()
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def close(self) -> None:
        """Release the run's cgroup, uid and fds (after `kill`)."""
        proc = getattr(self, "proc", None)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if self.cg is not None:
            self.cg.kill()
            self.tree.release(self.cg)
            self.cg = None
        for fd in (getattr(self, "pidfd", -1), self.child_pidfd):
            if fd >= 0:
                os.close(fd)
        self.pidfd = self.child_pidfd = -1
        if self.lease is not None:
            self.lease.release()
            self.lease = None


class TestServer:
    """The long-lived jailed zygote that forks one test process per assert-style run (see
    `jailed/testrunner.py`). Started lazily from a thread that lives as long as the process (bwrap's
    --die-with-parent follows the thread that spawned it), restarted when it dies."""

    def __init__(self, packages: tuple[str, ...]) -> None:
        self.packages = packages
        self.lock = threading.Lock()
        self.jail: Jail | None = None
        self.sock: socket.socket | None = None

    def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        spec = {"ctl_fd": theirs.fileno(), "allowed": list(self.packages), "status_fd": -1,
                "warm": list(WARM_SETUPS)}
        try:
            self.jail = _in_launcher_thread(lambda: Jail(
                "testrunner", spec, packages=self.packages, tmp_mb=64, memory_bytes=None, max_pids=None,
                stdin=None, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, keep_fds=(theirs.fileno(),),
                uid_base=jail.TEST_UID_BASE, rw_binds=((share_root(), SHARE_MOUNT),)))
        finally:
            theirs.close()
        self.sock = ours

    def submit(self, token: str, spec: dict, fds: list[int]) -> None:
        """Start one test run: `fds` = [channel from the program, channel to the program, report pipe, "done"
        pipe (the zygote closes it once the run is gone: `wait_gone`)]."""
        spec_fd = data_fd(json.dumps(spec).encode())
        try:
            with self.lock:
                for attempt in range(2):
                    if self.jail is None or self.jail.proc.poll() is not None:
                        self._stop()
                        self._start()
                    try:
                        socket.send_fds(self.sock, [json.dumps({"op": "run", "token": token}).encode()],
                                        [spec_fd, *fds])
                        return
                    except OSError:
                        if attempt:
                            raise
                        self._stop()
        finally:
            os.close(spec_fd)

    def cancel(self, token: str) -> None:
        """End the test run of `token` (its process group killed and reaped, its folder removed; `wait_gone`
        waits for that)."""
        with self.lock:
            if self.sock is not None:
                try:
                    self.sock.send(json.dumps({"op": "kill", "token": token}).encode())
                except OSError:
                    pass

    def wait_gone(self, done_fd: int, timeout: float = 10.0) -> None:
        """Wait (without holding the server's lock) until the zygote closed a run's "done" pipe; a zygote
        that does not within `timeout` is stopped, taking its test runs with it."""
        ready, _, _ = select.select([done_fd], [], [], timeout)
        if ready:
            return
        log.error("sandbox: a test run did not end within %.0f s of its verdict; stopping the test server", timeout)
        self.stop()

    def _stop(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.jail is not None:
            self.jail.kill()
            self.jail.close()
            self.jail = None

    def stop(self) -> None:
        """Stop the zygote and its test processes."""
        with self.lock:
            self._stop()


WARM_SETUPS: list[str] = []  # setups a test server runs once and its test processes start from (`warm_setup`)


def warm_setup(source: str) -> None:
    """Have test servers started from now on run `source` (a common test setup, e.g. the LeetCode prelude)
    once, so each test process starts from a copy instead of running it."""
    if source not in WARM_SETUPS:
        WARM_SETUPS.append(source)


_SERVERS: dict[tuple[str, ...], TestServer] = {}
_SERVERS_LOCK = threading.Lock()


def test_server(packages: tuple[str, ...]) -> TestServer:
    """The process-wide TestServer for an allow-list."""
    with _SERVERS_LOCK:
        if packages not in _SERVERS:
            _SERVERS[packages] = TestServer(packages)
        return _SERVERS[packages]


_OWNER = [os.getpid()]

SHARE_MOUNT = "/share"  # where test servers see the share root; a run's folder is /share/<name> in both jails
_SHARE: list[str] = []
_SHARE_LOCK = threading.Lock()


def share_root() -> str:
    """This process's root of shared scratch folders (created on first use, removed at exit): on /dev/shm when
    it is writable and at least 1 GiB (a tmpfs: a file written there is memory, charged to the writer's
    cgroup; containers often get a 64 MiB one), else the temp folder. Mode 0711 (root hosts): a test
    server's uid can enter a run's folder by its name but not list the root."""
    with _SHARE_LOCK:
        if not _SHARE:
            base = "/dev/shm" if _roomy("/dev/shm") else tempfile.gettempdir()
            _clean_stale_shares(base)
            root = tempfile.mkdtemp(prefix=f"cotforge-share-{os.getpid()}-", dir=base)
            os.chmod(root, 0o711)
            _SHARE.append(root)
            owner = os.getpid()
            atexit.register(lambda: os.getpid() == owner and remove_tree(root))
        return _SHARE[0]


def _roomy(folder: str, need: int = 1 << 30) -> bool:
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return os.access(folder, os.W_OK) and st.f_blocks * st.f_frsize >= need


def new_share() -> tuple[str, str]:
    """A fresh shared scratch folder for one run: (host path, path in both jails). Its name is random (128
    bits) and the root is not listable, so no other run's program or test can name it; mode 0777 (the program
    and the test process run as different uids); `remove_tree` it once the run is over."""
    name = secrets.token_hex(16)
    host = os.path.join(share_root(), name)
    os.mkdir(host)
    os.chmod(host, 0o777)
    return host, f"{SHARE_MOUNT}/{name}"


def remove_tree(path: str) -> None:
    """Remove a folder whatever the run left in it (modes it took away from itself are given back first;
    links are removed, never followed)."""
    def retry(fn, p, _exc) -> None:
        try:
            os.chmod(os.path.dirname(p), 0o700)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, 0o700)
                shutil.rmtree(p, onerror=retry)
            else:
                os.unlink(p)
        except FileNotFoundError:
            pass
        except OSError as e:
            log.error("sandbox: could not remove %s: %s", p, e)

    if os.path.lexists(path):
        shutil.rmtree(path, onerror=retry)


def _clean_stale_shares(base: str) -> None:
    """Remove share roots left by verifier processes that no longer exist."""
    for name in os.listdir(base):
        if name.startswith("cotforge-share-"):
            try:
                pid = int(name.split("-")[2])
            except (IndexError, ValueError):
                continue
            if pid != os.getpid() and not os.path.exists(f"/proc/{pid}"):
                remove_tree(os.path.join(base, name))


@atexit.register
def _stop_servers() -> None:
    if os.getpid() != _OWNER[0]:
        return
    for s in list(_SERVERS.values()):
        s.stop()


def _forget_after_fork() -> None:
    """A forked child starts its own test server and launcher (fresh locks and queue: another thread may have
    held them at the fork); the parent's stay the parent's."""
    global _SERVERS_LOCK, _LAUNCH, _LAUNCHER_LOCK, _SHARE_LOCK
    _SERVERS.clear()
    _LAUNCHER.clear()
    _SHARE.clear()
    _SERVERS_LOCK, _LAUNCHER_LOCK, _LAUNCH = threading.Lock(), threading.Lock(), queue.SimpleQueue()
    _SHARE_LOCK = threading.Lock()
    _OWNER[0] = os.getpid()


os.register_at_fork(after_in_child=_forget_after_fork)


_LAUNCH: queue.SimpleQueue = queue.SimpleQueue()
_LAUNCHER: list[threading.Thread] = []
_LAUNCHER_LOCK = threading.Lock()


def _in_launcher_thread(fn: Callable[[], Jail]) -> Jail:
    """Run `fn` on the process-lifetime launcher thread and return its result (or raise its error)."""
    with _LAUNCHER_LOCK:
        if not _LAUNCHER:
            t = threading.Thread(target=_launcher_loop, name="cotforge-sandbox-launcher", daemon=True)
            t.start()
            _LAUNCHER.append(t)
    done: queue.SimpleQueue = queue.SimpleQueue()
    _LAUNCH.put((fn, done))
    ok, value = done.get()
    if not ok:
        raise value
    return value


def _launcher_loop() -> None:
    while True:
        fn, done = _LAUNCH.get()
        try:
            done.put((True, fn()))
        except BaseException as e:  # noqa: BLE001 - handed back to the caller
            done.put((False, e))
