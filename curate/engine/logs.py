"""datatrove logs on stderr at WARNING+ only: datatrove logs through loguru and adds a DEBUG stderr sink
per task; cotforge keeps its own stderr readable and leaves the per-task log files complete.

`install_quiet_task_logger` runs when `cotforge.curate.engine` is imported, so it also applies in executor worker
processes, which import the engine when they unpickle our steps."""

from __future__ import annotations

import io
import os
import sys


def quiet_datatrove(drop: str = "") -> None:
    """Route datatrove's loguru output to stderr at WARNING+ only (COTFORGE_DATATROVE_LOG_LEVEL overrides,
    e.g. DEBUG for -vv); per-task log files under the work folder keep everything."""
    level = os.environ.get("COTFORGE_DATATROVE_LOG_LEVEL", "WARNING")
    try:
        from loguru import logger

        for hid, h in list(logger._core.handlers.items()):
            if getattr(h, "_name", "") in ("<stderr>", drop):
                logger.remove(hid)
        logger.add(sys.stderr, level=level, format="{time:HH:mm:ss} {level} datatrove: {message}")
    except Exception:  # loguru internals changed: leave datatrove's logging alone
        pass


def memoise_loguru_lib_dirs() -> None:
    """Every `logger.add` builds a loguru ExceptionFormatter, which lists the library folders through
    `sysconfig` for every install scheme (~5 ms). datatrove adds two sinks per task and the quiet wrappers below
    two more, so a run of many short tasks spent seconds there. The list depends only on `sys.path`, so it is
    kept per `sys.path` and the same folders result."""
    try:
        from loguru import _better_exceptions as better
    except ImportError:
        return
    formatter = getattr(better, "ExceptionFormatter", None)
    original = getattr(formatter, "_get_lib_dirs", None)
    if original is None or getattr(original, "_cotforge_memo", False):
        return
    cache: dict[tuple[str, ...], list[str]] = {}

    def lib_dirs() -> list[str]:
        key = tuple(sys.path)
        if key not in cache:
            cache[key] = original()
        return list(cache[key])

    lib_dirs._cotforge_memo = True  # type: ignore[attr-defined]
    formatter._get_lib_dirs = staticmethod(lib_dirs)


def install_quiet_task_logger() -> None:
    """datatrove's `add_task_logger` sends INFO to stderr for every task (pipeline listing, progress);
    wrap it so stderr gets WARNING+ only (per-task log files are untouched). Runs at import, so it also
    applies in executor worker processes, which import this module when they unpickle our steps."""
    try:
        import datatrove.executor.base as base
    except ImportError:
        return
    memoise_loguru_lib_dirs()
    original = base.add_task_logger
    if getattr(original, "_cotforge_quiet", False):
        return

    def quiet_add_task_logger(*args, **kwargs):
        real, sys.stderr = sys.stderr, io.StringIO()  # swallows its stderr handler and "Launching ..." line
        try:
            logfile = original(*args, **kwargs)
        finally:
            sink, sys.stderr = sys.stderr, real
        quiet_datatrove(drop=repr(sink))
        return logfile

    def quiet_close_task_logger(logfile):
        close_original(logfile)  # re-adds datatrove's default DEBUG stderr handler
        quiet_datatrove()

    close_original = base.close_task_logger
    quiet_add_task_logger._cotforge_quiet = True  # type: ignore[attr-defined]
    base.add_task_logger = quiet_add_task_logger
    base.close_task_logger = quiet_close_task_logger

