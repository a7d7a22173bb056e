"""One writer per run folder: a second invocation on a locked folder is refused with a clear error, a lock
left by a killed run is taken over, a lock from another host is judged by its heartbeat, and an S3 run
folder is locked by a conditional create (moto's S3 server)."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cotforge.curate.io.lock import LOCK_NAME, RunLock, RunLocked

HOLD = """
import sys, time
from cotforge.curate.io.lock import RunLock
lock = RunLock(sys.argv[1], what="run folder", command=["cotforge", "run", "demo.yaml"]).acquire()
print("locked", flush=True)
time.sleep(600)
"""


def _holder(folder: Path) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "locked"
    return p


def test_second_invocation_refused_then_stale_lock_taken_over(tmp_path, caplog):
    run = tmp_path / "run"
    p = _holder(run)
    try:
        with pytest.raises(RunLocked) as e:
            RunLock(run).acquire()
        msg = str(e.value)
        assert f"pid {p.pid} on {socket.gethostname()}" in msg and "cotforge run demo.yaml" in msg
        assert "is in use" in msg and str(run / LOCK_NAME) in msg
    finally:
        p.send_signal(signal.SIGKILL)  # a killed run: no cleanup, the lock file stays
        p.wait()
    assert (run / LOCK_NAME).exists()
    with caplog.at_level(logging.WARNING), RunLock(run) as lock:
        assert json.loads((run / LOCK_NAME).read_text())["pid"] == os.getpid()
        assert lock.holder()["token"] == lock.token
    assert "taking over a stale lock" in caplog.text and f"pid {p.pid}" in caplog.text
    assert not (run / LOCK_NAME).exists()


def test_lock_from_another_host_is_judged_by_heartbeat(tmp_path):
    """On a shared filesystem pids of other hosts cannot be checked: a fresh heartbeat holds, an old one is stale."""
    run = tmp_path / "run"
    run.mkdir()
    other = {"host": "node-17", "pid": 4242, "started_iso": "2026-12-01T00:00:00+00:00", "token": "t",
             "command": "cotforge run x.yaml", "heartbeat": time.time()}
    (run / LOCK_NAME).write_text(json.dumps(other))
    with pytest.raises(RunLocked, match="pid 4242 on node-17"):
        RunLock(run, stale_after_s=60).acquire()
    (run / LOCK_NAME).write_text(json.dumps({**other, "heartbeat": time.time() - 120}))
    with RunLock(run, stale_after_s=60) as lock:
        assert lock.holder()["host"] == socket.gethostname()


def test_heartbeat_keeps_lock_fresh_and_release_only_removes_own(tmp_path):
    run = tmp_path / "run"
    lock = RunLock(run, stale_after_s=0.4).acquire()
    first = lock.holder()["heartbeat"]
    time.sleep(0.35)
    assert lock.holder()["heartbeat"] > first  # rewritten every stale_after_s / 4
    (run / LOCK_NAME).write_text(json.dumps({"token": "someone-else", "host": "h", "pid": 1}))
    time.sleep(0.25)
    assert lock.lost
    with pytest.raises(RunLocked, match="taken over"):
        lock.check()
    lock.release()
    assert json.loads((run / LOCK_NAME).read_text())["token"] == "someone-else"


def test_pipeline_refuses_a_second_run_on_the_same_folder(tmp_path):
    from cotforge.pipelines.config import recipe_from_dict
    from cotforge.pipelines.runner import run_recipe

    run = tmp_path / "run"
    p = _holder(run)
    try:
        rec = recipe_from_dict({"name": "x", "generate": {"n_longcot_math": 4, "n_shortcot_math": 2, "n_code": 0,
                                                          "exact_dups": 0, "near_dups": 0, "humaneval_leaks": 0,
                                                          "bench_leaks": 0, "n_benchmark": 1, "malformed": 0}},
                               base_dir=tmp_path)
        with pytest.raises(RunLocked, match=f"run folder {run} is in use by pid {p.pid}"):
            run_recipe(rec, run)
        assert not (run / "data").exists()  # nothing of the second invocation was written
    finally:
        p.kill()
        p.wait()
    assert run_recipe(rec, run).statuses == {"data": "ran"}  # the killed holder's lock is stale


def test_s3_run_folder_lock_by_conditional_create(tmp_path, monkeypatch):
    moto_server = pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        for k, v in {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "AWS_DEFAULT_REGION": "us-east-1",
                     "AWS_ENDPOINT_URL": f"http://{host}:{port}"}.items():
            monkeypatch.setenv(k, v)
        import fsspec

        fsspec.filesystem("s3").clear_instance_cache()
        fs = fsspec.filesystem("s3", skip_instance_cache=True)
        fs.mkdir("runs")
        url = "s3://runs/demo-1"
        with RunLock(url, stale_after_s=30) as lock:
            assert fs.exists(f"runs/demo-1/{LOCK_NAME}")
            with pytest.raises(RunLocked, match="is in use"):
                RunLock(url, stale_after_s=30).acquire()  # If-None-Match: the object exists
            assert lock.holder()["token"] == lock.token
        assert not fs.exists(f"runs/demo-1/{LOCK_NAME}")
        # a holder that stopped beating (killed elsewhere) is taken over once its heartbeat is old
        with fs.open(f"runs/demo-1/{LOCK_NAME}", "wb") as f:
            f.write(json.dumps({"host": "h", "pid": 1, "token": "old", "heartbeat": time.time() - 100}).encode())
        with RunLock(url, stale_after_s=30) as lock:
            assert lock.holder()["token"] == lock.token
    finally:
        server.stop()


def test_cli_on_a_locked_stage_folder_says_who_holds_it(tmp_path):
    """`cotforge curate dedup IN -o OUT` while OUT is locked: a one-line error, exit 1, no traceback."""
    from click.testing import CliRunner

    from cotforge.pipelines.cli.main import main as cli

    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "a", "prompt": "p", "response": "r", "domain": "math"}) + "\n")
    out = tmp_path / "out"
    p = _holder(out)
    try:
        res = CliRunner().invoke(cli, ["curate", "dedup", str(src), "-o", str(out)])
    finally:
        p.kill()
        p.wait()
    assert res.exit_code == 1 and f"stage folder {out} is in use by pid {p.pid}" in res.output, res.output
    assert "Traceback" not in res.output
