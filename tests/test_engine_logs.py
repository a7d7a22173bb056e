"""The engine's datatrove log wrappers: loguru's library-folder list is computed once per sys.path, and the
list is the same as loguru's own."""

from __future__ import annotations

import sys

import pytest

import cotforge.curate.engine  # noqa: F401  (installs the wrappers at import)

better = pytest.importorskip("loguru._better_exceptions")


def test_loguru_lib_dirs_memoised_per_sys_path(monkeypatch):
    fmt = better.ExceptionFormatter
    assert getattr(fmt._get_lib_dirs, "_cotforge_memo", False)
    calls = []
    import sysconfig

    real = sysconfig.get_scheme_names
    monkeypatch.setattr(sysconfig, "get_scheme_names", lambda: calls.append(1) or real())
    monkeypatch.setattr(sys, "path", [*sys.path, "/nonexistent-cotforge-test"])  # a new key: computed once
    first = fmt._get_lib_dirs()
    second = fmt._get_lib_dirs()
    assert first == second and len(calls) == 1
    schemes, names = real(), ["stdlib", "platstdlib", "platlib", "purelib"]
    import os

    paths = {sysconfig.get_path(n, s) for s in schemes for n in names}
    assert sorted(first) == sorted(os.path.abspath(p).lower() + os.sep for p in paths if p in sys.path)
    second.append("x")  # callers get their own list
    assert "x" not in fmt._get_lib_dirs()
