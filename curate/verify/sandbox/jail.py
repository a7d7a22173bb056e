"""The jail a run sees, built with bubblewrap (`bwrap`, Debian package `bubblewrap`, the tool Flatpak uses).

A run's root is an empty read-only tmpfs holding only (all read-only): the interpreter binary, the folders of
the shared libraries it, its extension modules and the allowed packages load (found with `ldd`: the system
library folder, /lib/x86_64-linux-gnu on Debian, and the ELF loader), the standard library (with its
site-packages hidden), an allow-list of packages under /sbx/site (default numpy and sortedcontainers: their
top-level folders only), and the harness (`jailed/`, staged and precompiled under /sbx). Writable: its own
size-capped /tmp and /dev/shm. Its own /proc, /dev (a minimal one), and its own user, PID, IPC, network,
UTS and cgroup namespaces. Nothing else of the host: not the checkout, not ../shared, not the host's /proc.

Users: as root (this project's machines), bwrap runs privileged and the host writes the run's user map
("0 0 1" for bwrap's own set-up, "1000 N 1" for the program, N a per-run host uid leased with a lock
file, so no two concurrent runs of any verifier process share a uid); the harness then drops to 1000 before
any user code. Without root, bwrap's unprivileged mode maps the caller's uid and `--disable-userns` applies.
In both, a seccomp filter refuses new user namespaces (`clone`/`unshare` with CLONE_NEWUSER; `clone3`, whose
flags a filter cannot read, answers ENOSYS so libc falls back to `clone`). A program sharing a folder with
its test process (pytest's `tmp_path`) is also refused symlink/link/mknod and io_uring (`strict`).

No bwrap, an architecture without the seccomp table, or a layout that cannot be resolved: SandboxUnavailable,
never a weaker mode.
"""

from __future__ import annotations

import atexit
import fcntl
import functools
import importlib.metadata
import logging
import os
import platform
import shutil
import struct
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # never imported on the host: named so the code hash (pipelines/codehash.py) covers the harness
    from cotforge.curate.verify.sandbox.jailed import (  # noqa: F401
        codec,
        events,
        program,
        pytestrun,
        share,
        testrunner,
        wire,
    )

log = logging.getLogger(__name__)

UID_BASE = 1_500_000  # host uids leased to program runs (no passwd entry needed)
UID_SPAN = 1024
TEST_UID_BASE = UID_BASE + UID_SPAN  # host uids of test servers (a separate range: they are long-lived)
SANDBOX_UID = 1000  # the program's uid inside its user namespace
BOOT = "import sys; sys.path.insert(0, '/sbx'); from jailed.{module} import main; main()"
ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
       "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8", "OPENBLAS_NUM_THREADS": "1",
       "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
       "MALLOC_ARENA_MAX": "2"}  # glibc reserves 64 MiB of address space per thread arena otherwise


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot be built on this machine (the message says what to install or change)."""


@dataclass(frozen=True)
class Layout:
    """What a run's root contains: read-only binds (host path, sandbox path), folders hidden under an empty
    read-only tmpfs, and the sys.path the harness sets."""

    interpreter: str
    binds: tuple[tuple[str, str], ...]
    masks: tuple[str, ...]
    sys_path: tuple[str, ...]
    packages: tuple[str, ...]


def bwrap_path() -> str:
    """The bwrap binary, or SandboxUnavailable saying how to install it."""
    path = shutil.which("bwrap")
    if not path:
        raise SandboxUnavailable("bubblewrap (`bwrap`) is not installed: the code sandbox needs it "
                                 "(Debian/Ubuntu: apt-get install -y bubblewrap)")
    return path


def is_root() -> bool:
    """Whether runs get per-run host uids and cgroups (root) or bwrap's unprivileged mode."""
    return os.geteuid() == 0


@functools.lru_cache(maxsize=8)
def layout(packages: tuple[str, ...]) -> Layout:
    """The jail's contents for this interpreter and allow-list (computed once per allow-list)."""
    interpreter = os.path.realpath(sys.executable)
    stdlib = sysconfig.get_paths()["stdlib"]
    dynload = os.path.join(stdlib, "lib-dynload")
    binds: list[tuple[str, str]] = [(interpreter, interpreter), (stdlib, stdlib)]
    masks = [p for p in (os.path.join(stdlib, "site-packages"), os.path.join(stdlib, "dist-packages"))
             if os.path.isdir(p)]
    sofiles = [interpreter] + [str(p) for p in Path(dynload).glob("*.so") if not p.name.startswith("_tkinter")]
    for name in packages:
        for src, top in _distribution_tops(name):
            binds.append((src, f"/sbx/site/{top}"))
            if os.path.isdir(src):
                sofiles += [str(p) for p in Path(src).rglob("*.so*") if p.is_file()]
    pkg_dirs = tuple(os.path.realpath(src) + "/" for src, dst in binds if dst.startswith("/sbx/site/"))
    libs = [lib for lib in _shared_libraries(sofiles)  # a package's own libraries come with its folder
            if not os.path.realpath(lib).startswith(pkg_dirs) and "site-packages" not in lib]
    binds += [(d, d) for d in _library_dirs(libs)]
    binds.append((_staged_harness(), "/sbx/jailed"))
    zip_path = os.path.join(os.path.dirname(stdlib), f"python{sys.version_info[0]}{sys.version_info[1]}.zip")
    return Layout(interpreter, tuple(dict.fromkeys(binds)), tuple(masks),
                  (zip_path, stdlib, dynload, "/sbx/site"), packages)


@functools.lru_cache(maxsize=8)
def with_requirements(names: tuple[str, ...]) -> tuple[str, ...]:
    """`names` and every installed distribution they require, transitively (environment markers evaluated
    for this interpreter, extras not followed): what a package needs mounted beside it (pytest: pluggy,
    iniconfig, packaging, pygments)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    out: dict[str, str] = {}
    todo = list(names)
    while todo:
        name = todo.pop(0)
        if canonicalize_name(name) in out:
            continue
        out[canonicalize_name(name)] = name
        try:
            reqs = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            raise SandboxUnavailable(f"sandbox: {name!r} is not installed (needed in the test jail)") from None
        for text in reqs:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return tuple(out.values())


def _distribution_tops(name: str) -> list[tuple[str, str]]:
    """(host path, top-level name) of what an installed distribution put in site-packages."""
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise SandboxUnavailable(f"sandbox package allow-list: {name!r} is not installed "
                                 f"(pip install {name}, or remove it from SandboxLimits.packages)") from None
    base = Path(str(dist.locate_file("")))
    tops = {str(f).split("/")[0] for f in dist.files or [] if not str(f).startswith("..")}
    tops = {t for t in tops if t != "__pycache__" and not t.endswith(".dist-info") and (base / t).exists()}
    if not tops:
        raise SandboxUnavailable(f"sandbox package allow-list: cannot find the files of {name!r}")
    return [(str(base / t), t) for t in sorted(tops)]


def _library_dirs(libs: list[str]) -> list[str]:
    """The system folders holding the shared libraries (one bind each instead of one per library: a run's
    start-up cost grows with its number of mounts), plus, as single files, the ELF loader and the libraries
    inside the interpreter's own prefix (libpython; its folder also holds site-packages)."""
    prefix = os.path.realpath(sys.base_prefix) + "/"
    own = [lib for lib in libs if os.path.realpath(lib).startswith(prefix)  # libpython: the file alone
           or os.path.basename(lib).startswith("ld-linux")]
    dirs = sorted({os.path.dirname(lib) for lib in libs if lib not in own})
    return [d for d in dirs if not any(d.startswith(o + "/") for o in dirs)] + own


def _shared_libraries(files: list[str]) -> list[str]:
    """Absolute paths of the shared libraries (and the ELF loader) `files` load, as `ldd` resolves them."""
    ldd = shutil.which("ldd")
    if not ldd:
        raise SandboxUnavailable("`ldd` (Debian package libc-bin) is needed to build the sandbox's root")
    out: list[str] = []
    for i in range(0, len(files), 200):
        res = subprocess.run([ldd, *files[i:i + 200]], capture_output=True, text=True, check=False)
        for line in res.stdout.splitlines():
            parts = line.strip().split()
            if "=>" in parts and len(parts) >= 3 and parts[2].startswith("/"):
                out.append(parts[2])
            elif parts and parts[0].startswith("/") and len(parts) == 2:
                out.append(parts[0])
    return sorted(set(out))


_STAGE: list[str] = []


def _staged_harness() -> str:
    """A private copy of `jailed/` with its bytecode compiled (bound at /sbx/jailed), so runs do not see the
    checkout and do not recompile the harness each time. Removed at exit."""
    import py_compile

    if _STAGE:
        return _STAGE[0]
    src = Path(__file__).resolve().parent / "jailed"
    stage = Path(tempfile.mkdtemp(prefix="cotforge-sbx-harness-"))
    dst = stage / "jailed"
    dst.mkdir()
    for f in sorted(src.glob("*.py")):
        shutil.copy2(f, dst / f.name)
        py_compile.compile(str(dst / f.name), cfile=str(dst / "__pycache__" / f"{f.stem}.{sys.implementation.cache_tag}.pyc"),
                           doraise=True, dfile=f"/sbx/jailed/{f.name}")
    for p in (stage, dst, dst / "__pycache__"):
        os.chmod(p, 0o755)
    for p in list(dst.glob("*.py")) + list((dst / "__pycache__").glob("*.pyc")):
        os.chmod(p, 0o644)
    _STAGE.append(str(dst))
    owner = os.getpid()
    atexit.register(lambda: os.getpid() == owner and shutil.rmtree(str(stage), True))  # not in forked children
    return str(dst)


# --- seccomp: refuse new user namespaces --------------------------------------------------------------------
_ARCH = {"x86_64": (0xC000003E, 56, 272, 435, True), "aarch64": (0xC00000B7, 220, 97, 435, False)}
# Syscalls that make a link or a special file (symlink, link, mknod and their *at forms) and io_uring (whose
# requests can do the same without a syscall a filter sees): refused to a program that shares a folder with
# its test process (`Jail(..., strict=True)`).
_LINKS = {"x86_64": (88, 266, 86, 265, 133, 259, 425, 426, 427), "aarch64": (36, 37, 33, 425, 426, 427)}
CLONE_NEWUSER = 0x10000000


@functools.lru_cache(maxsize=2)
def seccomp_filter(strict: bool = False) -> bytes:
    """Classic BPF for bwrap's --seccomp: clone/unshare with CLONE_NEWUSER -> EPERM, clone3 -> ENOSYS, other
    ABIs (x32, i386 on x86_64) -> EPERM, everything else allowed. `strict` also refuses (EPERM) making
    symlinks, hard links, FIFOs and device nodes, and io_uring: nothing the program leaves in a shared folder
    can lead the test process's path lookups outside it or block its reads."""
    arch = platform.machine()
    if arch not in _ARCH:
        raise SandboxUnavailable(f"no seccomp table for architecture {arch!r}: nested user namespaces could "
                                 "not be refused")
    audit, nr_clone, nr_unshare, nr_clone3, x32 = _ARCH[arch]
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
    prog = [(ld, 0, 0, 4), (jeq, 1, 0, audit), (ret, 0, 0, eperm), (ld, 0, 0, 0)]
    if x32:
        prog += [(jge, 0, 1, 0x40000000), (ret, 0, 0, eperm)]
    if strict:
        for nr in _LINKS[arch]:
            prog += [(jeq, 0, 1, nr), (ret, 0, 0, eperm)]
    prog += [(jeq, 0, 1, nr_clone3), (ret, 0, 0, enosys),
             (jeq, 1, 0, nr_unshare), (jeq, 0, 3, nr_clone),
             (ld, 0, 0, 16), (jset, 0, 1, CLONE_NEWUSER), (ret, 0, 0, eperm),
             (ret, 0, 0, allow)]
    return b"".join(struct.pack("=HBBI", *ins) for ins in prog)


# --- per-run host uids --------------------------------------------------------------------------------------
class UidLease:
    """A host uid no other live run (of any verifier process on this machine) holds: a lock file per uid.
    `base`: UID_BASE for program runs, TEST_UID_BASE for test servers."""

    def __init__(self, base: int = UID_BASE) -> None:
        folder = Path(tempfile.gettempdir()) / f"cotforge-sandbox-uids-{base}"
        folder.mkdir(mode=0o700, exist_ok=True)
        start = os.getpid() % UID_SPAN
        for k in range(UID_SPAN):
            slot = (start + k) % UID_SPAN
            fd = os.open(folder / str(slot), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.fd, self.uid = fd, base + slot
            return
        raise SandboxUnavailable(f"all {UID_SPAN} sandbox uids are in use")

    def release(self) -> None:
        os.close(self.fd)


def bwrap_argv(lay: Layout, *, root: bool, info_fd: int, block_fd: int, seccomp_fd: int, tmp_mb: int,
               module: str, spec_fd: int, rw_binds: tuple[tuple[str, str], ...] = ()) -> list[str]:
    """The bwrap command for one sandboxed interpreter running `jailed.<module>.main`; `rw_binds` (host
    folder, sandbox path) are bound writable (a run's shared scratch folder)."""
    argv = [bwrap_path(), "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
            "--hostname", "sandbox", "--info-fd", str(info_fd), "--seccomp", str(seccomp_fd)]
    if root:
        argv += ["--userns-block-fd", str(block_fd)]
    else:
        argv += ["--block-fd", str(block_fd), "--disable-userns", "--uid", str(SANDBOX_UID),
                 "--gid", str(SANDBOX_UID)]
    for d in _ancestors([dst for _, dst in lay.binds] + [dst for _, dst in rw_binds]):
        argv += ["--perms", "0755", "--dir", d]
    for src, dst in lay.binds:
        argv += ["--ro-bind", src, dst]
    for src, dst in rw_binds:
        argv += ["--bind", src, dst]
    for m in lay.masks:
        argv += ["--perms", "0755", "--tmpfs", m, "--remount-ro", m]
    argv += ["--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", str(16 << 20), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
             "--perms", "1777", "--size", str(tmp_mb << 20), "--tmpfs", "/tmp",
             "--remount-ro", "/", "--chdir", "/tmp", "--clearenv"]
    for k, v in ENV.items():
        argv += ["--setenv", k, v]
    return argv + ["--", lay.interpreter, "-S", "-s", "-B", "-P", "-c", BOOT.format(module=module), str(spec_fd)]


def _ancestors(paths) -> list[str]:
    """Every parent folder of `paths`, parents first (created world-readable: bwrap's own parents are not)."""
    out: set[str] = set()
    for p in paths:
        parent = os.path.dirname(p)
        while parent not in ("/", ""):
            out.add(parent)
            parent = os.path.dirname(parent)
    return sorted(out, key=lambda d: (d.count("/"), d))


def write_user_map(child_pid: int, uid: int) -> None:
    """Root mode: inside the run's user namespace, 0 is bwrap's own set-up and SANDBOX_UID is host `uid`."""
    mapping = f"0 0 1\n{SANDBOX_UID} {uid} 1\n"
    for name in ("uid_map", "gid_map"):
        with open(f"/proc/{child_pid}/{name}", "w") as f:
            f.write(mapping)
