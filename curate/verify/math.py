"""Math verdicts: extract the final answer from a response and compare it with the gold via math-verify.

Which text holds the answer (`split_after_reasoning`):
  * ``think_end`` given and present -> the text after its last occurrence;
  * else, a known reasoning block (``<think>``/``</think>``, ``<|begin_of_thought|>``/``<|end_of_thought|>``,
    ``<Thought>``/``</Thought>``) that was opened and closed -> the text after the closer;
  * a block opened and never closed (truncated trace) -> None: status ``no_answer``;
  * no reasoning markers at all (plain CoT ending in ``\\boxed{204}``) -> the whole response;
  * ``think_end=None`` -> the whole response.
In that text the answer is the last ``\\boxed{}``/``\\fbox{}``, else the last "the (final) answer is ...",
else a GSM8K ``#### x`` or a final ``Answer: x`` / ``A: x`` line; nothing found -> ``no_answer``.

math-verify's own timeouts use SIGALRM (broken outside the main thread), so they are switched off here
and `verify_math_batch` enforces a per-item deadline in a pool of killable worker processes instead.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing as mp
import os
import re
import time
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from cotforge.curate.text.reasoning import REASONING_MARKERS

log = logging.getLogger(__name__)

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_IS = re.compile(r"(?:final answer|the answer)\s*(?:is|:|=)\s*:?\s*(.+?)(?:\.\s|\.?\s*$|\n)",
                        re.IGNORECASE | re.DOTALL)
_HASHES = re.compile(r"####\s*(.+?)\s*$", re.MULTILINE)
_ANSWER_LINE = re.compile(r"^\s*(?:\*\*)?(?:final answer|answer|a)(?:\*\*)?\s*:\s*(.+?)\s*$",
                          re.IGNORECASE | re.MULTILINE)


@dataclass
class MathVerdict:
    """One math verdict. `correct` is None when there is no verdict (no_answer / timeout / error)."""

    status: str  # "correct" | "incorrect" | "no_answer" | "timeout" | "error"
    correct: bool | None
    extracted: str | None


class _DropTimeoutWarnings(logging.Filter):
    """math-verify warns on every call once its signal timeouts are off; we enforce our own deadline."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Timeout is disabled")


for _name in ("math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addFilter(_DropTimeoutWarnings())


def split_after_reasoning(response: str, think_end: str | None = "</think>") -> str | None:
    """The part of `response` that holds the final answer (rule in the module docstring); None when a
    reasoning block is opened and never closed."""
    if think_end is None:
        return response
    if think_end and think_end in response:
        return response[response.rindex(think_end) + len(think_end):]
    for opener, closer in REASONING_MARKERS:
        if closer in response:
            return response[response.rindex(closer) + len(closer):]
        if opener in response:
            return None
    return response


def _last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} / \\fbox{...} with balanced braces (None if absent or unclosed)."""
    starts = [m.end() for m in _BOXED.finditer(text)]
    for start in reversed(starts):
        depth = 1
        for i in range(start, len(text)):
            ch = text[i]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start:i].strip()
    return None


def _extract(text: str) -> tuple[str, str] | None:
    """(answer text, how it was found: boxed | phrase | hashes | line) from the answer part, or None."""
    boxed = _last_boxed(text)
    if boxed is not None:
        return boxed, "boxed"
    for kind, pattern in (("phrase", _ANSWER_IS), ("hashes", _HASHES), ("line", _ANSWER_LINE)):
        found = pattern.findall(text)
        if found and found[-1].strip():
            return found[-1].strip(), kind
    return None


def extract_answer(response: str, think_end: str | None = "</think>") -> str | None:
    """The final-answer text of a response (rule in the module docstring), or None."""
    text = split_after_reasoning(response or "", think_end)
    if text is None:
        return None
    found = _extract(text)
    return found[0] if found else None


def _parse(text: str) -> list[Any]:
    from math_verify import parse

    return parse(text, parsing_timeout=None)


def parse_gold(answer: str) -> list[Any]:
    """Parse a ground-truth string; bare LaTeX golds are wrapped in \\boxed{} (env_notes §7)."""
    gold = answer.strip()
    if "\\boxed" in gold or "$" in gold:
        parsed = _parse(gold)
        if parsed:
            return parsed
    gold = gold.removeprefix("####").strip()
    return _parse("\\boxed{" + gold + "}") or _parse(gold)


_FONT = re.compile(r"\\(?:textbf|mathbf|bf)\s*\{([^{}]*)\}")


def _parse_pred(extracted: str, kind: str) -> list[Any]:
    """Parse the extracted answer: boxed content as LaTeX; phrase/line answers also as free text.
    Bold wrappers (AIME answers like \\textbf{(051)}) are dropped first."""
    extracted = _FONT.sub(lambda m: m.group(1).strip().strip("()"), extracted)
    if kind == "boxed":
        return _parse("\\boxed{" + extracted + "}")
    return _parse(extracted) or _parse("\\boxed{" + extracted + "}")


def _norm(s: str) -> str:
    return re.sub(r"\s+|\\[,;! ]|\$|\\text\{([^}]*)\}", lambda m: m.group(1) or "", s).strip().lower()


def verify_math(response: str, answer: str, think_end: str | None = "</think>") -> MathVerdict:
    """Verdict for one (response, gold answer) pair, in-process with math-verify's signal timeouts off
    (safe in threads; no deadline: use `verify_math_batch` for untrusted input)."""
    from math_verify import verify

    text = split_after_reasoning(response or "", think_end)
    found = _extract(text) if text is not None else None
    if found is None:
        return MathVerdict("no_answer", None, None)
    extracted, kind = found
    if answer is None or not str(answer).strip():
        return MathVerdict("error", None, extracted)
    try:
        if _norm(extracted) == _norm(str(answer)):
            return MathVerdict("correct", True, extracted)
        gold = parse_gold(str(answer))
        pred = _parse_pred(extracted, kind)
        if not gold:
            return MathVerdict("error", None, extracted)
        ok = bool(pred) and verify(gold, pred, timeout_seconds=None)
    except Exception as e:  # math-verify raises on pathological input; a verdict, not a crash
        log.debug("verify_math error on %r vs %r: %r", extracted[:80], str(answer)[:80], e)
        return MathVerdict("error", None, extracted)
    return MathVerdict("correct" if ok else "incorrect", ok, extracted)


# --------------------------------------------------------------------------- killable process pool


def _die_with_parent() -> None:
    """Linux: SIGKILL this worker when its parent dies (a SIGTERM'd caller must not leave workers behind;
    forked siblings hold copies of each other's pipes, so EOF alone does not reach them)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _worker_loop(conn: Connection) -> None:
    """Worker: receive (think_end, [(idx, response, answer), ...]) chunks, send (idx, verdict) per item."""
    _die_with_parent()
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        think_end, chunk = msg
        for idx, response, answer in chunk:
            v = verify_math(response, answer, think_end)
            conn.send((idx, (v.status, v.correct, v.extracted)))


class _Worker:
    """One pool process, its pipe, and the chunk it is working on (items not yet answered)."""

    def __init__(self, ctx: Any):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_loop, args=(child,), daemon=True)
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

    def __init__(self, workers: int | None = None):
        self.n = max(1, workers or os.cpu_count() or 1)
        # fork: workers inherit the imported math-verify/sympy (fast start) and, unlike spawn/forkserver,
        # do not re-import the caller's __main__ (scripts without a main guard keep working).
        import math_verify  # noqa: F401  (import before forking so workers start warm)

        self.ctx = mp.get_context("fork")
        self.workers = [_Worker(self.ctx) for _ in range(self.n)]

    def close(self) -> None:
        """Stop all workers."""
        for w in self.workers:
            w.stop()
        self.workers = []

    def run(self, pairs: list[tuple[str, str]], think_end: str | None, timeout_s: float) -> list[MathVerdict]:
        """Verdicts for `pairs` in order."""
        n = len(pairs)
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
                    w.conn.send((think_end, [(i, pairs[i][0], pairs[i][1]) for i in ids]))
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
        self.workers[k] = _Worker(self.ctx)


_POOL: MathPool | None = None


def _pool(workers: int | None) -> MathPool:
    """The shared pool, (re)built when the worker count changes."""
    global _POOL
    n = max(1, workers or os.cpu_count() or 1)
    if _POOL is None or _POOL.n != n:
        if _POOL is not None:
            _POOL.close()
        _POOL = MathPool(n)
    return _POOL


def shutdown_pool() -> None:
    """Stop the shared worker pool (also registered at exit)."""
    global _POOL
    if _POOL is not None:
        _POOL.close()
        _POOL = None


atexit.register(shutdown_pool)


def verify_math_batch(pairs: list[tuple[str, str]], think_end: str | None = "</think>", workers: int | None = None,
                      timeout_s: float = 5.0) -> list[MathVerdict]:
    """Verdicts for many (response, answer) pairs, in order, over `workers` processes (default: all cores)
    with a `timeout_s` deadline per item (status "timeout", never an exception)."""
    if not pairs:
        return []
    return _pool(workers).run(list(pairs), think_end, timeout_s)
