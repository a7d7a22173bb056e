"""Shared fixtures: the tiny offline model, ../shared/data when present (skip otherwise), and a one-node Slurm."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("COTFORGE_SHARED_DATA") or REPO.parent / "shared" / "data")  # env: worktrees


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`../shared/data` (real benchmark and SFT files); tests using it skip when it is absent."""
    if not (SHARED_DATA / "MANIFEST.md").exists():
        pytest.skip("../shared/data not present")
    return SHARED_DATA


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny random Qwen2 model + locally trained tokenizer, saved with save_pretrained."""
    pytest.importorskip("torch")
    from cotforge.train.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"))


SLURM_SCRIPT = REPO / ".ci" / "slurm_localhost.sh"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """munged + slurmctld + slurmd on 127.0.0.1 (.ci/slurm_localhost.sh) for one test module, stopped (by pid)
    afterwards; skips (saying why) where Slurm cannot run: not root, or slurm-wlm/munge not installed."""
    if shutil.which("slurmctld") is None or shutil.which("munged") is None:
        pytest.skip("slurm-wlm/munge not installed (.ci/slurm_localhost.sh install; .ci/run does it)")
    if os.geteuid() != 0:
        pytest.skip("a localhost Slurm needs root here (slurmd runs jobs as their user)")
    state = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "SLURM_PORT": str(free_port())}
    res = subprocess.run([str(SLURM_SCRIPT), "start", str(state)], capture_output=True, text=True, env=env,
                         timeout=120)
    if res.returncode == 3:
        pytest.skip(res.stderr.strip())
    assert res.returncode == 0, res.stdout + res.stderr
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(state / "slurm.conf")
    try:
        yield state
    finally:
        subprocess.run([str(SLURM_SCRIPT), "stop", str(state)], capture_output=True, text=True, timeout=60)
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old


def run_forms(forms: dict, limits) -> dict:
    """Sandbox verdicts of honest-form cases {name: (right program, wrong program, tests)}, all in one batch:
    {name: (verdict of the right program, verdict of the wrong one)}."""
    from cotforge.curate.verify.code import run_tests_batch

    names = list(forms)
    items = [(forms[n][0], forms[n][2]) for n in names] + [(forms[n][1], forms[n][2]) for n in names]
    got = run_tests_batch(items, limits)
    return {n: (got[i], got[len(names) + i]) for i, n in enumerate(names)}


def case_assert(test: str, entry_point: str | None = None, setup: str | None = None) -> dict:
    """A code-test spec of kind `assert` (the tests run after the program, in its namespace)."""
    spec = {"kind": "assert", "test": test, "entry_point": entry_point}
    if setup is not None:
        spec["setup"] = setup
    return spec


def case_pytest(test: str) -> dict:
    """A code-test spec of kind `pytest` (the program is importable as `solution`)."""
    return {"kind": "pytest", "module": "solution", "test": test}


def pytest_generate_tests(metafunc) -> None:
    """A test taking `form` in a module with an honest-form table `FORMS` runs once per form."""
    if "form" in metafunc.fixturenames and "form_verdicts" in metafunc.fixturenames:
        metafunc.parametrize("form", list(metafunc.module.FORMS))


@pytest.fixture(scope="module")
def form_verdicts(request) -> dict:
    """The module's `FORMS` run under its `LIM`, in one sandbox batch: {form: (right verdict, wrong verdict)}."""
    return run_forms(request.module.FORMS, request.module.LIM)


def check_form(verdicts: dict, form: str) -> None:
    """The right program of an honest form passes its tests and the wrong one does not."""
    right, wrong = verdicts[form]
    assert right.status == "pass", (form, right.status, right.details)
    assert wrong.status != "pass", (form, wrong.status, wrong.details)
