"""A persistent pool of killable worker processes for math verdicts (per-item deadline, never an exception).

math-verify's own timeouts use SIGALRM (broken outside the main thread), so they are switched off and the
pool enforces the deadline instead: a worker stuck on one item past `timeout_s` is killed and replaced, that
item gets status "timeout", the others continue. Workers call `cotforge.curate.verify.math.verify_math`
(looked up per item, so a patched function is what forked workers run).
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing as mp
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from cotforge.curate.verify.math_compare import MathCompare, install_numeric_hook

log = logging.getLogger(__name__)

# (response, answer, problem) per item; settings per batch: (think_end, mode, compare)
Item = tuple[str, str, "str | None"]
Settings = tuple["str | None", str, MathCompare]


@dataclass
class MathVerdict:
    """One math verdict. `correct` is None when there is no verdict (timeout / error); no_answer -> False is
    the callers' choice (verify_rows, rewards)."""

    status: str  # "correct" | "incorrect" | "no_answer" | "timeout" | "error"
    correct: bool | None
    extracted: str | None

def _die_with_parent() -> None:
    """Linux: SIGKILL this worker when its parent dies (a SIGTERM'd caller must not leave workers behind;
    forked siblings hold copies of each other's pipes, so EOF alone does not reach them)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _worker_loop(conn: Connection, verify: Callable[..., Any]) -> None:
    """Worker: receive (settings, [(idx, response, answer, problem), ...]) chunks, send (idx, verdict) per item;
    `verify` is `verify.math.verify_math` (handed down by the caller: this module does not import it)."""
    _die_with_parent()
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        (think_end, mode, compare), chunk = msg
        for idx, response, answer, problem in chunk:
            v = verify(response, answer, think_end, mode=mode, compare=compare, problem=problem)
            conn.send((idx, (v.status, v.correct, v.extracted)))


class _Worker:
    """One pool process, its pipe, and the chunk it is working on (items not yet answered)."""

    def __init__(self, ctx: Any, verify: Callable[..., Any]):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_loop, args=(child, verify), daemon=True)
        self.proc.start()
        child.close()
        self.pending: deque[int] = deque()
        self.progress = 0.0

    def stop(self, kill: bool = False) -> None:
        try:
            if kill:
                self.proc.kill()
            else:
                self.conn.send(None)
        except (OSError, BrokenPipeError):
            pass
        self.proc.join(timeout=2)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.conn.close()


class MathPool:
    """A persistent pool of math-verify worker processes with a per-item deadline: a worker stuck on one
    item past `timeout_s` is killed and replaced, that item gets status "timeout", the rest continue."""

    def __init__(self, workers: int | None, verify: Callable[..., Any]):
        self.n = max(1, workers or os.cpu_count() or 1)
        self.verify = verify
        # fork: workers inherit the imported math-verify/sympy (fast start) and, unlike spawn/forkserver,
        # do not re-import the caller's __main__ (scripts without a main guard keep working).
        import math_verify  # noqa: F401  (import before forking so workers start warm)

        install_numeric_hook()  # before forking: every worker compares numbers through it

        self.ctx = mp.get_context("fork")
        self.workers = [_Worker(self.ctx, verify) for _ in range(self.n)]

    def close(self) -> None:
        """Stop all workers."""
        for w in self.workers:
            w.stop()
        self.workers = []

    def run(self, items: list[Item], settings: Settings, timeout_s: float) -> list[MathVerdict]:
        """Verdicts for `items` in order."""
        n = len(items)
        out: list[MathVerdict | None] = [None] * n
        todo: deque[int] = deque(range(n))
        chunk_size = max(1, min(32, n // (self.n * 4) or 1))
        while todo or any(w.pending for w in self.workers):
            now = time.monotonic()
            for w in self.workers:
                if not w.pending and todo:
                    ids = [todo.popleft() for _ in range(min(chunk_size, len(todo)))]
                    w.pending.extend(ids)
                    w.progress = now
                    w.conn.send((settings, [(i, *items[i]) for i in ids]))
            busy = [w for w in self.workers if w.pending]
            wait_s = max(0.0, min(w.progress + timeout_s for w in busy) - time.monotonic())
            ready = set(wait([w.conn for w in busy], timeout=wait_s))
            now = time.monotonic()
            for k, w in enumerate(list(self.workers)):
                if not w.pending:
                    continue
                if w.conn in ready:
                    try:
                        while w.pending and w.conn.poll():
                            idx, (status, correct, extracted) = w.conn.recv()
                            out[idx] = MathVerdict(status, correct, extracted)
                            w.pending.remove(idx)
                            w.progress = time.monotonic()
                        continue
                    except (EOFError, OSError):  # the worker died (e.g. out of memory): item is an error
                        rest = list(w.pending)[1:]
                        self._replace(k, out, "error")
                        todo.extendleft(reversed(rest))
                        continue
                if now - w.progress >= timeout_s:
                    stuck = w.pending[0]
                    rest = list(w.pending)[1:]
                    log.debug("math item %d timed out after %.1fs; restarting its worker", stuck, timeout_s)
                    self._replace(k, out, "timeout")
                    todo.extendleft(reversed(rest))
        return [v if v is not None else MathVerdict("error", None, None) for v in out]

    def _replace(self, k: int, out: list[MathVerdict | None], status: str) -> None:
        """Kill worker k, give its current item `status`, start a fresh worker in its place."""
        w = self.workers[k]
        if w.pending:
            out[w.pending[0]] = MathVerdict(status, None, None)
        w.stop(kill=True)
        self.workers[k] = _Worker(self.ctx, self.verify)


_POOL: MathPool | None = None


def get_pool(workers: int | None, verify: Callable[..., Any]) -> MathPool:
    """The shared pool running `verify` per item, (re)built when the worker count or function changes."""
    global _POOL
    n = max(1, workers or os.cpu_count() or 1)
    if _POOL is None or _POOL.n != n or _POOL.verify is not verify:
        if _POOL is not None:
            _POOL.close()
        _POOL = MathPool(n, verify)
    return _POOL


def shutdown_pool() -> None:
    """Stop the shared worker pool (also registered at exit)."""
    global _POOL
    if _POOL is not None:
        _POOL.close()
        _POOL = None


atexit.register(shutdown_pool)
