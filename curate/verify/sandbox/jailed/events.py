"""Warnings and log records the program emits during a call, carried to the test process and emitted
there again, so `pytest.warns`, `warnings.catch_warnings(record=True)`, `caplog` and `assertLogs` see them.

Program side (`captured`): every warning is recorded (filter "always": the test's own filters decide,
when it is emitted again) and, when the program uses `logging`, a handler on its root logger records every
record that its loggers let through, with the test's logger levels applied for the call (a
test's `caplog.set_level(logging.INFO)` lowers the program's levels as it would in one process). Events go
back with the call's answer as plain data, in the order they happened:

    ["w", [category class names along the MRO], message, lineno]
    ["log", logger name, levelno, message, lineno, function name, traceback text or None]

Test side (`replay`): a warning becomes `warnings.warn_explicit` of the test side's class for its category
(the stand-in of a program warning class, else the first built-in Warning class along its MRO); a record
becomes a `LogRecord` handled by the test's logger of the same name. Only the message text, numbers and
names cross: the file name is always "solution.py" (never a path the program chooses), and an event that
does not follow the format is a protocol error of the program.
"""

from __future__ import annotations

import builtins
import sys

MAX_EVENTS = 1000  # per call
MAX_TEXT = 4000


class Malformed(ValueError):
    """An event list that does not follow the format above."""


def test_levels() -> list[list]:
    """The test process's logger levels to apply in the program's process for a call ([name, level], the root
    as ""): every logger the test gave an explicit level, and the root's when it is not Python's default."""
    logging = sys.modules.get("logging")
    if logging is None:
        return []
    out = [[name, lg.level] for name, lg in list(logging.Logger.manager.loggerDict.items())
           if isinstance(lg, logging.Logger) and lg.level]
    root = logging.getLogger().level
    return out + ([["", root]] if root != logging.WARNING else [])  # Python's default root level: nothing to apply


_SINK: list = [None]  # the events list of the call being answered (None between calls: dropped)
_INSTALLED: set[str] = set()


def captured(answer, levels, *args) -> dict:
    """`answer(*args)` with the warnings and log records it emitted attached as `events` (program side).
    Only once the program's process has `warnings` or `logging` loaded (a program that emits either imports
    it; the harness does not, so a run that never warns pays nothing); the hooks are installed once, a call
    only points them at its own list."""
    warnings, logging = sys.modules.get("warnings"), sys.modules.get("logging")
    if warnings is None and logging is None:
        return answer(*args)
    if warnings is not None and "warnings" not in _INSTALLED:
        _install_warnings(warnings)
    if logging is not None and "logging" not in _INSTALLED:
        _install_logging(logging)
    events: list = []
    outer, _SINK[0] = _SINK[0], events
    undo = _apply_levels(logging, levels) if logging is not None and levels else None
    try:
        resp = answer(*args)
    finally:
        _SINK[0] = outer
        if undo is not None:
            undo()
    if events:
        resp["events"] = events[:MAX_EVENTS]
    return resp


def _install_warnings(warnings) -> None:
    """Every warning is recorded (the test's filters decide when it is emitted again there), never printed."""

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        events = _SINK[0]
        if events is not None and len(events) < MAX_EVENTS:
            names = [c.__name__ for c in getattr(category, "__mro__", ())][:20]
            events.append(["w", names, str(message)[:MAX_TEXT], lineno if type(lineno) is int else 0])

    warnings.simplefilter("always")
    warnings.showwarning = show
    _INSTALLED.add("warnings")


def _install_logging(logging) -> None:
    """A handler on the program's root logger recording every record that reaches it."""

    class Capture(logging.Handler):
        def emit(self, record) -> None:
            events = _SINK[0]
            if events is None or len(events) >= MAX_EVENTS:
                return
            try:
                text = record.getMessage()
                exc = logging.Formatter().formatException(record.exc_info) if record.exc_info else None
            except Exception:  # noqa: BLE001 - a record its own formatting breaks: dropped, as a handler would
                return
            events.append(["log", str(record.name)[:200], int(record.levelno), text[:MAX_TEXT],
                           int(record.lineno or 0), str(record.funcName)[:200], exc and exc[:MAX_TEXT]])

    logging.getLogger().addHandler(Capture(0))
    _INSTALLED.add("logging")


def _apply_levels(logging, levels):
    """Set the test's logger levels for the call; returns the undo."""
    saved = []
    for name, level in levels if type(levels) is list else []:
        lg = logging.getLogger(name) if name else logging.getLogger()
        saved.append((lg, lg.level))
        lg.setLevel(level)

    def undo() -> None:
        for lg, level in reversed(saved):
            lg.setLevel(level)

    return undo


def replay(events, classes: dict) -> None:
    """Emit the program's warnings and log records again in the test process (test side)."""
    if events is None:
        return
    if type(events) is not list or len(events) > MAX_EVENTS:
        raise Malformed("malformed events")
    for ev in events:
        if type(ev) is not list or not ev:
            raise Malformed("malformed event")
        if ev[0] == "w" and len(ev) == 4 and type(ev[1]) is list and type(ev[2]) is str and type(ev[3]) is int:
            import warnings

            warnings.warn_explicit(ev[2], _category([str(n) for n in ev[1]], classes), "solution.py", ev[3],
                                   module="solution")
        elif ev[0] == "log" and len(ev) == 7 and all(type(ev[i]) is str for i in (1, 3, 5)) and \
                all(type(ev[i]) is int for i in (2, 4)) and (ev[6] is None or type(ev[6]) is str):
            _log(*ev[1:])
        else:
            raise Malformed("malformed event")


def _category(names: list[str], classes: dict) -> type:
    own = classes.get(names[0]) if names else None
    for cls in [own] + [getattr(builtins, n, None) for n in names]:
        if isinstance(cls, type) and issubclass(cls, Warning):
            return cls
    return UserWarning


def _log(name: str, levelno: int, text: str, lineno: int, func: str, exc: str | None) -> None:
    import logging

    record = logging.LogRecord(name, levelno, "solution.py", lineno, text, None, None, func)
    record.module = "solution"
    if exc:
        record.exc_text = exc
    (logging.getLogger(name) if name and name != "root" else logging.getLogger()).handle(record)
