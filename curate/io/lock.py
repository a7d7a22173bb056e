"""One writer per run folder: a lock file naming its holder (host, pid, start time, command).

`RunLock(folder)` creates `folder/.cotforge.lock` with an exclusive create (`O_CREAT|O_EXCL` on a local or
NFS/Lustre/GPFS mount; a conditional `open(path, "xb")` on fsspec object stores, which S3 implements with
`If-None-Match: *`). A second invocation gets `RunLocked`, naming who holds the folder since when and how
to clear it. The holder rewrites its heartbeat every `stale_after_s / 4` seconds from a daemon thread.

A lock is stale, and is taken over with a warning, when its holder is gone: on the same host, its pid no
longer runs (or runs another program: the recorded process start time differs); on another host (or an
object store, where pids mean nothing), its heartbeat is older than `stale_after_s`. Takeovers are
serialised by a second exclusive-create file (`.cotforge.lock.takeover`), so two invocations finding the
same stale lock cannot both win; the loser gets `RunLocked` naming the winner.

Limits: heartbeat staleness trusts clocks to agree within `stale_after_s`; on an object store a holder that
stalls longer than `stale_after_s` (a paused VM) can be taken over while alive, after which its heartbeat
notices the lock is no longer its own, stops, and `lost` turns true (the pipeline runner checks it between
stages and stops).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

LOCK_NAME = ".cotforge.lock"
DEFAULT_STALE_S = 600.0


class RunLocked(RuntimeError):  # noqa: N818 - the state of the folder, reported to the user
    """The folder is in use by another live invocation."""


def _is_url(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _proc_start(pid: int) -> str | None:
    """Start time of a process (clock ticks since boot, /proc/PID/stat field 22), to tell pid reuse apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _pid_alive(pid: int, start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    now = _proc_start(pid)
    return start is None or now is None or now == start


class RunLock:
    """An exclusive lock on a folder (local path or fsspec URL); use as a context manager."""

    def __init__(self, folder: str | Path, *, stale_after_s: float = DEFAULT_STALE_S, what: str = "run folder",
                 command: list[str] | None = None):
        self.folder = str(folder).rstrip("/")
        self.path = f"{self.folder}/{LOCK_NAME}"
        self.stale_after_s = stale_after_s
        self.what = what
        self.token = uuid.uuid4().hex
        self.command = command if command is not None else sys.argv
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._held = False
        if _is_url(self.folder):
            import fsspec

            self.fs, self._fpath = fsspec.core.url_to_fs(self.path)
        else:
            self.fs, self._fpath = None, self.path

    # ------------------------------------------------------------------ file primitives (local or fsspec)

    def _create(self, path: str, data: bytes) -> bool:
        """Exclusive create; False when the file already exists."""
        try:
            if self.fs is None:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
            else:
                with self.fs.open(path, "xb") as f:
                    f.write(data)
            return True
        except FileExistsError:
            return False

    def _read(self, path: str) -> dict[str, Any] | None:
        try:
            if self.fs is None:
                text = Path(path).read_text()
            else:
                with self.fs.open(path, "rb") as f:
                    text = f.read().decode()
            return json.loads(text)
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {"unreadable": True}

    def _write(self, path: str, data: bytes) -> None:
        if self.fs is None:
            tmp = f"{path}.{self.token}.tmp"
            Path(tmp).write_bytes(data)
            os.replace(tmp, path)
        else:
            with self.fs.open(path, "wb") as f:
                f.write(data)

    def _remove(self, path: str) -> None:
        try:
            if self.fs is None:
                os.unlink(path)
            else:
                self.fs.rm(path)
        except FileNotFoundError:
            pass

    def _age(self, path: str, info: dict[str, Any] | None) -> float:
        """Seconds since the holder's last heartbeat (from the file's content)."""
        beat = (info or {}).get("heartbeat")
        if isinstance(beat, (int, float)):
            return time.time() - beat
        try:
            mtime = os.path.getmtime(path) if self.fs is None else self.fs.modified(path).timestamp()
        except (OSError, AttributeError, NotImplementedError, ValueError):
            return float("inf")
        return time.time() - mtime

    # ------------------------------------------------------------------ lock logic

    def _record(self) -> dict[str, Any]:
        now = time.time()
        return {"host": socket.gethostname(), "pid": os.getpid(), "pid_start": _proc_start(os.getpid()),
                "started": getattr(self, "_started", now), "started_iso": datetime.fromtimestamp(
                    getattr(self, "_started", now), timezone.utc).isoformat(timespec="seconds"),
                "heartbeat": now, "token": self.token, "command": " ".join(map(str, self.command))[:500]}

    def holder(self) -> dict[str, Any] | None:
        """The current lock file's content (None when the folder is not locked)."""
        return self._read(self._fpath)

    def stale_reason(self, info: dict[str, Any]) -> str | None:
        """Why the holder described by `info` is gone (None while it may still be running)."""
        if info.get("unreadable"):
            age = self._age(self._fpath, None)
            return f"unreadable lock file, last written {age:.0f}s ago" if age > self.stale_after_s else None
        same_host = info.get("host") == socket.gethostname() and self.fs is None
        if same_host and isinstance(info.get("pid"), int):
            if not _pid_alive(info["pid"], info.get("pid_start")):
                return f"pid {info['pid']} on {info['host']} is not running"
            return None
        age = self._age(self._fpath, info)
        if age > self.stale_after_s:
            return f"no heartbeat for {age:.0f}s (> {self.stale_after_s:.0f}s) from {info.get('host')}"
        return None

    def acquire(self) -> RunLock:
        """Take the lock, or raise RunLocked naming the live holder."""
        if self.fs is None:
            os.makedirs(self.folder, exist_ok=True)
        self._started = time.time()
        for _ in range(5):
            if self._create(self._fpath, json.dumps(self._record()).encode()):
                self._held = True
                self._start_heartbeat()
                return self
            info = self.holder()
            if info is None:
                continue  # released meanwhile: try again
            reason = self.stale_reason(info)
            if reason is None:
                raise RunLocked(self._message(info))
            self._take_over(info, reason)
        info = self.holder() or {}
        raise RunLocked(self._message(info))

    def _take_over(self, info: dict[str, Any], reason: str) -> None:
        """Remove a stale lock under the takeover mutex, if it is still the same stale lock."""
        mutex = f"{self._fpath}.takeover"
        if not self._create(mutex, self.token.encode()):
            if self._age(mutex, None) > 60:  # a takeover that crashed halfway
                self._remove(mutex)
            time.sleep(0.2)
            return
        try:
            now = self.holder()
            if now is not None and now.get("token") == info.get("token"):
                log.warning("%s %s: taking over a stale lock (%s; it was taken at %s by: %s)", self.what,
                            self.folder, reason, info.get("started_iso", "?"), info.get("command", "?"))
                self._remove(self._fpath)
        finally:
            self._remove(mutex)

    def _message(self, info: dict[str, Any]) -> str:
        return (f"{self.what} {self.folder} is in use by pid {info.get('pid', '?')} on {info.get('host', '?')} "
                f"since {info.get('started_iso', '?')} (command: {info.get('command', '?')}). Only one invocation "
                f"may write to it: wait for that one to finish, or use another folder. If that process is gone "
                f"for good and its host cannot be checked, delete {self.path}.")

    def _start_heartbeat(self) -> None:
        every = max(0.05, self.stale_after_s / 4)

        def beat() -> None:
            while not self._stop.wait(every):
                info = self.holder()
                if info is None or info.get("token") != self.token:
                    self.lost = True
                    log.error("%s %s: this invocation's lock was taken over or removed (%s)", self.what,
                              self.folder, info)
                    return
                try:
                    self._write(self._fpath, json.dumps(self._record()).encode())
                except OSError as e:  # a transient filesystem error: try again at the next beat
                    log.warning("%s %s: heartbeat failed: %s", self.what, self.folder, e)

        self._thread = threading.Thread(target=beat, name=f"cotforge-lock-{self.folder}", daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Stop the heartbeat and remove the lock file if it is still ours."""
        if not self._held:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        info = self.holder()
        if info is not None and info.get("token") == self.token:
            self._remove(self._fpath)
        self._held = False

    def check(self) -> None:
        """Raise when the lock was lost while held (see the module docstring)."""
        if self.lost:
            raise RunLocked(f"{self.what} {self.folder}: this invocation's lock was taken over by another; stopping")

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
