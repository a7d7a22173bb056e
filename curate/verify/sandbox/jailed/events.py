"""Warnings and log records the program emits during a call, carried to the test process and emitted
there again, so `pytest.warns`, `warnings.catch_warnings(record=True)`, `caplog` and `assertLogs` see them.

Program side (`captured`): during each call every warning is recorded (filter "always": the test's own
filters decide, when it is emitted again) and, when the program uses `logging`, a handler on its root logger
records every record that its loggers let through, with the test's logger levels applied for the call (a
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
    as ""): the root's level and every logger the test gave an explicit level; empty when the test does not
    use `logging`."""
    logging = sys.modules.get("logging")
    if logging is None:
        return []
    out = [["", logging.getLogger().level]]
    for name, lg in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(lg, logging.Logger) and lg.level:
            out.append([name, lg.level])
    return out


def captured(answer, levels, *args) -> dict:
    """`answer(*args)` with the warnings and log records it emitted attached as `events` (program side)."""
    import warnings

    events: list = []
    logging = sys.modules.get("logging")
    undo = _capture_logs(logging, levels, events) if logging is not None else None

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        if len(events) < MAX_EVENTS:
            names = [c.__name__ for c in getattr(category, "__mro__", ())][:20]
            events.append(["w", names, str(message)[:MAX_TEXT], lineno if type(lineno) is int else 0])

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = show
            resp = answer(*args)
    finally:
        if undo is not None:
            undo()
    if events:
        resp["events"] = events
    return resp


def _capture_logs(logging, levels, events: list):
    """Apply the test's levels and attach a recording handler to the root logger; returns the undo."""

    class Capture(logging.Handler):
        def emit(self, record) -> None:
            if len(events) >= MAX_EVENTS:
                return
            try:
                text = record.getMessage()
                exc = logging.Formatter().formatException(record.exc_info) if record.exc_info else None
            except Exception:  # noqa: BLE001 - a record its own formatting breaks: dropped, as a handler would
                return
            events.append(["log", str(record.name)[:200], int(record.levelno), text[:MAX_TEXT],
                           int(record.lineno or 0), str(record.funcName)[:200], exc and exc[:MAX_TEXT]])

    saved = []
    for name, level in levels if type(levels) is list else []:
        lg = logging.getLogger(name) if name else logging.getLogger()
        saved.append((lg, lg.level))
        lg.setLevel(level)
    root, handler = logging.getLogger(), Capture(0)
    root.addHandler(handler)

    def undo() -> None:
        root.removeHandler(handler)
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
