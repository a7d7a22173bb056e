"""What a datatrove task process pays before its work: loguru's library-folder list is computed once per
sys.path (and equals loguru's own), and the local executor's fork server preloads the text kernel (without
polars) so task processes start with it."""

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


def test_fork_server_warm_module_loads_kernel_without_polars():
    """The fork server's preload runs the kernel once and never imports polars (a process that forks must
    not have polars' thread pool running)."""
    import subprocess

    code = ("import sys, cotforge.curate.engine.warm\n"
            "from cotforge.curate.text import columns, kernel\n"
            "assert 'polars' not in sys.modules, 'polars imported'\n"
            "assert not columns.kernel_installed() or kernel._normalize_kernel.signatures\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_local_executor_preloads_the_fork_server(tmp_path):
    """A local step with several workers asks the fork server to preload the warm module, and its tasks run."""
    import multiprocess.forkserver
    from datatrove.pipeline.base import PipelineStep

    from cotforge.curate.engine.executor import FORKSERVER_PRELOAD, SharedCoresExecutor

    class Touch(PipelineStep):
        name = "touch"

        def __init__(self, folder: str):
            super().__init__()
            self.folder = folder

        def run(self, data=None, rank: int = 0, world_size: int = 1):
            (__import__("pathlib").Path(self.folder) / f"{rank}.done").write_text("x")
            yield from data or []

    SharedCoresExecutor(pipeline=[Touch(str(tmp_path))], tasks=2, workers=2, logging_dir=str(tmp_path / "logs")).run()
    assert sorted(p.name for p in tmp_path.glob("*.done")) == ["0.done", "1.done"]
    assert multiprocess.forkserver._forkserver._preload_modules == list(FORKSERVER_PRELOAD)
