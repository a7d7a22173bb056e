"""One cgroup per sandboxed run: memory and process count for ALL processes of the run, their CPU time, and
killing every one of them at the verdict.

cgroup v2 when its memory, pids and cpu controllers can be delegated here, else v1 (memory, pids, cpuacct
hierarchies; this project's machines), else None: the runs then fall back to per-process limits (address
space, CPU) plus the per-run uid's process limit, and this is logged once. Each verifier process keeps its
run cgroups under `cotforge-sbx-<pid>` inside its own cgroup and removes them at exit (and stale ones of dead
processes at start).
"""

from __future__ import annotations

import atexit
import itertools
import logging
import os
import signal
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)

V1_CONTROLLERS = ("memory", "pids", "cpuacct")


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(fstype, mount root, mount point, super options) of the cgroup mounts in /proc/self/mountinfo."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        f, r = left.split(), right.split()
        if r and r[0] in ("cgroup", "cgroup2"):
            out.append((r[0], f[3], f[4], set(r[2].split(",")) if len(r) > 2 else set()))
    return out


def _own_paths() -> dict[str, str]:
    """Controller (v1; "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    out = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        for c in ctrls.split(",") if ctrls else [""]:
            out[c] = path
    return out


def _under(mount_root: str, mount_point: str, own: str) -> Path:
    rel = own[len(mount_root):] if mount_root != "/" and own.startswith(mount_root) else own
    return Path(mount_point + rel.rstrip("/"))


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _read_int(path: Path, key: str | None = None) -> int:
    text = path.read_text()
    if key is None:
        return int(text.split()[0])
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if k == key:
            return int(v)
    return 0


class RunCgroup:
    """The cgroup(s) of one run. Reused across runs (creating and removing memory cgroups costs more than a
    short run), so CPU time and OOM kills are counted from the values at `reset`."""

    def __init__(self, version: int, dirs: dict[str, Path]) -> None:
        self.version, self.dirs = version, dirs
        self.limits: tuple[int, int] | None = None
        self.base_cpu, self.base_oom = 0.0, 0

    def reset(self, memory_bytes: int, max_pids: int) -> None:
        """Prepare for a new run: its limits, and zeroed counters."""
        if self.limits != (memory_bytes, max_pids):
            if self.version == 2:
                d = self.dirs[""]
                _write(d / "memory.max", str(memory_bytes))
                if (d / "memory.swap.max").exists():
                    _write(d / "memory.swap.max", "0")
                _write(d / "pids.max", str(max_pids))
            else:
                mem = self.dirs["memory"]
                sw = mem / "memory.memsw.limit_in_bytes"
                if sw.exists() and self.limits and memory_bytes > self.limits[0]:
                    _write(sw, str(memory_bytes))  # memsw must stay >= the memory limit
                _write(mem / "memory.limit_in_bytes", str(memory_bytes))
                if sw.exists():
                    _write(sw, str(memory_bytes))
                _write(self.dirs["pids"] / "pids.max", str(max_pids))
            self.limits = (memory_bytes, max_pids)
        if self.version == 1:
            for name in ("memory.max_usage_in_bytes", "memory.failcnt"):
                _write(self.dirs["memory"] / name, "0")
        self.base_cpu, self.base_oom = 0.0, 0
        self.base_cpu, self.base_oom = self.cpu_seconds(), self.oom_kills()

    def _d(self, controller: str) -> Path:
        return self.dirs[""] if self.version == 2 else self.dirs[controller]

    def attach(self, pid: int) -> None:
        """Move `pid` (before it forks anything) into the run's cgroup(s)."""
        for d in dict.fromkeys(self.dirs.values()):
            _write(d / "cgroup.procs", str(pid))

    def join(self, pid: int) -> bool:
        """Move another process of the run (its test process, started elsewhere) into the run's memory and
        process-count cgroups but not its CPU account (`cpu_s` is the program's). cgroup v1 only (False on
        v2, where one cgroup holds every controller: the process keeps its per-process limits)."""
        if self.version != 1:
            return False
        for c in ("memory", "pids"):
            _write(self.dirs[c] / "cgroup.procs", str(pid))
        return True

    def cpu_seconds(self) -> float:
        """CPU time used so far by all processes of the run (user + system)."""
        if self.version == 2:
            return _read_int(self._d("") / "cpu.stat", "usage_usec") / 1e6 - self.base_cpu
        return _read_int(self._d("cpuacct") / "cpuacct.usage") / 1e9 - self.base_cpu

    def oom_kills(self) -> int:
        """Processes of the run the kernel killed for exceeding the memory limit."""
        try:
            if self.version == 2:
                return _read_int(self._d("") / "memory.events", "oom_kill") - self.base_oom
            return _read_int(self._d("memory") / "memory.oom_control", "oom_kill") - self.base_oom
        except (OSError, ValueError):
            return 0

    def peak_bytes(self) -> int | None:
        """Peak memory of the run (None where the kernel does not say)."""
        try:
            if self.version == 2:
                return None  # memory.peak spans the reused cgroup's lifetime
            return _read_int(self._d("memory") / "memory.max_usage_in_bytes")
        except (OSError, ValueError):
            return None

    def pids(self) -> list[int]:
        """Processes still in the run's cgroup."""
        try:
            return [int(p) for p in (self._d("pids") / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def settled(self) -> bool:
        """Whether no task is charged to the run's process count any more. A killed task leaves
        `cgroup.procs` when it starts to exit but stays charged until it is reaped, which on a loaded machine
        can lag the verdict: a cgroup reused before that would give the next run fewer processes."""
        try:
            return _read_int(self._d("pids") / "pids.current") == 0
        except (OSError, ValueError):
            return False

    def kill(self, timeout: float = 5.0) -> bool:
        """SIGKILL every process of the run until none is left; False if some survived `timeout`."""
        if self.version == 2:
            try:
                _write(self._d("") / "cgroup.kill", "1")
            except OSError:
                pass
        deadline = time.monotonic() + timeout
        while True:
            left = self.pids()
            if not left:
                return True
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if time.monotonic() > deadline:
                log.error("sandbox: processes %s of a run survived SIGKILL for %.0f s", left, timeout)
                return False
            time.sleep(0.002)

    def remove(self) -> None:
        """Remove the run's cgroup directories (empty by now)."""
        for d in dict.fromkeys(self.dirs.values()):
            for _ in range(200):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.005)


class CgroupTree:
    """This verifier process's base cgroup(s), under which each run gets its own."""

    def __init__(self, version: int, bases: dict[str, Path]) -> None:
        self.version, self.bases = version, bases
        self._counter = itertools.count()
        self._free: list[RunCgroup] = []
        self._lock = threading.Lock()

    def lease(self, memory_bytes: int, max_pids: int) -> RunCgroup:
        """An empty cgroup (reused when one is free) set up for a run with these totals."""
        with self._lock:  # a free cgroup whose killed tasks are all reaped, else a new one
            cg = next((c for c in self._free if c.settled()), None)
            if cg is not None:
                self._free.remove(cg)
        if cg is None:
            name = f"run-{next(self._counter)}"
            dirs = {k: b / name for k, b in self.bases.items()}
            for d in dict.fromkeys(dirs.values()):
                d.mkdir()
            cg = RunCgroup(self.version, dirs)
        try:
            cg.reset(memory_bytes, max_pids)
        except OSError:  # e.g. a lower memory limit than a reused cgroup's usage: drop it, start afresh
            fresh = cg.limits is None
            cg.remove()
            if fresh:
                raise
            return self.lease(memory_bytes, max_pids)
        return cg

    def release(self, cg: RunCgroup) -> None:
        """Give back a run's cgroup once the run is over: reused if empty, else left alone (and logged)."""
        if cg.pids():
            log.error("sandbox: cgroup %s still has processes; not reused", next(iter(cg.dirs.values())))
            return
        with self._lock:
            self._free.append(cg)

    def close(self) -> None:
        """Remove the base cgroups (at exit; run cgroups are removed after each run)."""
        for b in dict.fromkeys(self.bases.values()):
            for d in sorted(b.glob("run-*")) if b.exists() else []:
                RunCgroup(2, {"": d}).kill(timeout=1.0)  # any hierarchy's dir lists its processes
                RunCgroup(2, {"": d}).remove()
            try:
                b.rmdir()
            except OSError:
                pass


def _clean_stale(parent: Path) -> None:
    """Remove empty cgroups left by verifier processes that no longer exist."""
    for d in parent.glob("cotforge-sbx-*"):
        try:
            pid = int(d.name.rsplit("-", 1)[1])
        except ValueError:
            continue
        if pid != os.getpid() and not Path(f"/proc/{pid}").exists():
            for run in d.glob("run-*"):
                try:
                    run.rmdir()
                except OSError:
                    pass
            try:
                d.rmdir()
            except OSError:
                pass


def _v2(mounts, own) -> CgroupTree | None:
    for fstype, _root, point, _ in mounts:
        if fstype != "cgroup2" or "" not in own:
            continue
        top = Path(point)
        need = {"memory", "pids", "cpu"}
        if not need <= set((top / "cgroup.controllers").read_text().split()):
            continue
        try:
            enabled = set((top / "cgroup.subtree_control").read_text().split())
            if not need <= enabled:
                _write(top / "cgroup.subtree_control", " ".join(f"+{c}" for c in sorted(need - enabled)))
            _clean_stale(top)
            base = top / f"cotforge-sbx-{os.getpid()}"
            base.mkdir(exist_ok=True)
            _write(base / "cgroup.subtree_control", "+memory +pids +cpu")
        except OSError:
            continue
        return CgroupTree(2, {"": base})
    return None


def _v1(mounts, own) -> CgroupTree | None:
    bases: dict[str, Path] = {}
    for c in V1_CONTROLLERS:
        found = [(root, point) for fstype, root, point, opts in mounts if fstype == "cgroup" and c in opts]
        if not found or c not in own:
            return None
        parent = _under(found[0][0], found[0][1], own[c])
        try:
            _clean_stale(parent)
            base = parent / f"cotforge-sbx-{os.getpid()}"
            base.mkdir(exist_ok=True)
        except OSError:
            for b in bases.values():
                b.rmdir()
            return None
        bases[c] = base
    return CgroupTree(1, bases)


_TREE: list[CgroupTree | None] = []
_LOCK = threading.Lock()


def cgroup_tree() -> CgroupTree | None:
    """This process's CgroupTree (created on first use), or None when cgroups cannot be used here."""
    with _LOCK:
        if not _TREE:
            tree = None
            if os.geteuid() == 0:
                try:
                    mounts, own = _mounts(), _own_paths()
                    tree = _v2(mounts, own) or _v1(mounts, own)
                except OSError as e:
                    log.warning("sandbox: cgroups unusable (%s)", e)
            if tree is None:
                log.warning("sandbox: no writable cgroup; memory and CPU are limited per process only "
                            "(address space, CPU time), processes per run by the run's uid")
            else:
                log.info("sandbox: cgroup v%d run limits under %s", tree.version, next(iter(tree.bases.values())))
                owner = os.getpid()
                atexit.register(lambda: os.getpid() == owner and tree.close())
            _TREE.append(tree)
        return _TREE[0]


def _forget_after_fork() -> None:
    """A forked child (e.g. a datatrove worker) gets its own cgroups: the parent's are the parent's."""
    global _LOCK
    _TREE.clear()
    _LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
