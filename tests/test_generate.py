"""The generate stage: prompts -> n teacher responses per prompt through datatrove's InferenceRunner.

Unit tests use datatrove's in-process `dummy` server; the rest go through a real OpenAI-compatible server
process on 127.0.0.1 (cotforge.curate.generate.hf_server around the tiny random Qwen2 of conftest), started
here: seeded rows are identical across runs, and a run killed mid-way resumes without asking the server
any answered request again.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from conftest import free_port

from cotforge.curate.generate.config import GenerateConfig
from cotforge.curate.generate.stage import compose, removal_reason, response_id
from cotforge.pipelines.cli.main import main

pytest.importorskip("aiosqlite")
pytest.importorskip("httpx")


def write_prompts(path: Path, n: int) -> Path:
    rows = [{"id": f"p{i}", "problem": f"What is {i} + {i * 3}? Give the number.", "answer": str(4 * i),
             "source": "arith", "domain": "math"} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def read(folder: Path) -> pa.Table:
    files = sorted(folder.glob("*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files]) if files else pa.table({})


def cli(*args: str):
    return CliRunner().invoke(main, ["curate", "generate", *args], catch_exceptions=False)


# --------------------------------------------------------------------------- units


def test_dummy_server_one_row_per_response(tmp_path):
    prompts = write_prompts(tmp_path / "p.jsonl", 5)
    res = cli(str(prompts), "-o", str(tmp_path / "out"), "--server", "dummy", "--model", "m", "--n", "3",
              "--workers", "1", "--seed", "7")
    assert res.exit_code == 0, res.output
    kept = read(tmp_path / "out" / "kept").to_pylist()
    assert [r["id"] for r in kept] == [response_id(f"p{i}", k) for i in range(5) for k in range(3)]
    assert {r["teacher"] for r in kept} == {"m"} and {r["finish_reason"] for r in kept} == {"stop"}
    assert [json.loads(r["sampling"])["seed"] for r in kept[:3]] == [7, 8, 9]
    assert all(r["prompt_id"] == r["id"].split("#")[0] and r["response"] for r in kept)
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert (stats["rows_in"], stats["kept"], stats["removed"]) == (15, 15, 0)
    assert stats["generate"]["prompts_by_outcome"] == {"complete": 5}
    assert "15 kept" in res.output


def test_repeated_prompt_ids_give_distinct_response_ids(tmp_path):
    """Ingest makes a repeated id unique (`same~2`), so no two response rows share an id."""
    rows = [{"id": "same", "problem": "first?", "source": "s"}, {"id": "same", "problem": "second?", "source": "s"}]
    src = tmp_path / "p.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = cli(str(src), "-o", str(tmp_path / "out"), "--server", "dummy", "--model", "m", "--n", "2", "--workers", "1")
    assert res.exit_code == 0, res.output
    kept = read(tmp_path / "out" / "kept").to_pylist()
    assert [r["id"] for r in kept] == ["same#0", "same#1", "same~2#0", "same~2#1"]
    assert [r["prompt"] for r in kept] == ["first?", "first?", "second?", "second?"]


def test_keep_responses_answers_only_prompt_only_rows(tmp_path):
    rows = [{"id": f"r{i}", "problem": f"Q{i}?", "answer": "1", "source": "mixed", "domain": "math",
             "response": f"old answer {i}" if i % 2 else None} for i in range(6)]
    src = tmp_path / "p.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = cli(str(src), "-o", str(tmp_path / "out"), "--server", "dummy", "--model", "m", "--n", "2",
              "--keep-responses", "--workers", "1", "--rows-per-task", "2")
    assert res.exit_code == 0, res.output
    kept = read(tmp_path / "out" / "kept").to_pylist()
    assert [r["id"] for r in kept] == ["r0#0", "r0#1", "r1", "r2#0", "r2#1", "r3", "r4#0", "r4#1", "r5"]
    assert [r["response"] for r in kept if r["teacher"] is None] == ["old answer 1", "old answer 3", "old answer 5"]
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert (stats["rows_in"], stats["kept"]) == (9, 9)
    assert stats["generate"]["prompts_by_outcome"] == {"complete": 3, "kept_response": 3}


def test_think_and_truncation_policies():
    res = {"text": "The answer is 4.", "reasoning": "2+2=4", "finish_reason": "stop"}
    merged = compose(res, GenerateConfig(model="m"))
    assert merged == "<think>\n2+2=4\n</think>\n\nThe answer is 4."
    assert compose(res, GenerateConfig(model="m", think="strip")) == "The answer is 4."
    bare = {"text": "4", "finish_reason": "stop"}
    assert removal_reason(bare, compose(bare, GenerateConfig(model="m")), GenerateConfig(model="m")) is None
    assert removal_reason(bare, "4", GenerateConfig(model="m", think="require")).startswith("no_think")
    cut = {"text": "<think>long", "finish_reason": "length"}
    assert removal_reason(cut, "<think>long", GenerateConfig(model="m", max_tokens=9)).startswith("truncated")
    assert removal_reason(cut, "<think>long", GenerateConfig(model="m", on_truncated="flag")) is None
    assert removal_reason({"error": "Error http status 404"}, "", GenerateConfig(model="m")) == \
        "request_failed: Error http status 404"
    assert removal_reason(None, "", GenerateConfig(model="m")).startswith("no_result")


class FlakyHandler(BaseHTTPRequestHandler):
    """An OpenAI-compatible stub: the first request of each prompt gets 429, a prompt with BAD gets 400."""

    seen: dict[str, int] = {}

    def do_GET(self):  # noqa: N802
        self._reply(200, {"data": [{"id": "stub"}]})

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"]
        key = f"{prompt}|{body.get('seed')}"
        FlakyHandler.seen[key] = FlakyHandler.seen.get(key, 0) + 1
        if "BAD" in prompt:
            self._reply(400, {"error": {"message": "prompt rejected by policy"}})
        elif FlakyHandler.seen[key] == 1:
            self._reply(429, {"error": {"message": "slow down"}})
        else:
            self._reply(200, {"choices": [{"message": {"content": f"ok {body.get('seed')}"}, "finish_reason": "stop"}],
                              "usage": {"prompt_tokens": 3, "completion_tokens": 2}})

    def _reply(self, code: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_retries_429_and_accounts_for_rejected_prompts(tmp_path, monkeypatch):
    """429 is retried with backoff; a 400 ends in removed/ with the server's reason; the API key is never
    written anywhere under OUT (work folder kept)."""
    import threading

    monkeypatch.setenv("COTFORGE_TEST_KEY", "sk-do-not-leak-42")
    srv = ThreadingHTTPServer(("127.0.0.1", 0), FlakyHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    rows = [{"id": "a", "problem": "fine question", "source": "s"}, {"id": "b", "problem": "BAD question", "source": "s"}]
    src = tmp_path / "p.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    try:
        res = cli(str(src), "-o", str(tmp_path / "out"), "--endpoint", f"http://127.0.0.1:{srv.server_port}/v1",
                  "--model", "stub", "--n", "2", "--workers", "1", "--backoff-s", "0.05", "--keep-work",
                  "--api-key-env", "COTFORGE_TEST_KEY")
    finally:
        srv.shutdown()
    assert res.exit_code == 0, res.output
    kept = read(tmp_path / "out" / "kept").to_pylist()
    assert [(r["id"], r["response"]) for r in kept] == [("a#0", "ok 0"), ("a#1", "ok 1")]
    assert FlakyHandler.seen["fine question|0"] == 2  # one 429, one answer
    removed = read(tmp_path / "out" / "removed").to_pylist()
    assert [r["id"] for r in removed] == ["b#0", "b#1"]
    assert all(r["reason"].startswith("request_failed") and "prompt rejected by policy" in r["reason"] for r in removed)
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["generate"]["prompts_by_outcome"] == {"complete": 1, "none_kept": 1}
    for f in (tmp_path / "out").rglob("*"):
        if f.is_file():
            assert b"sk-do-not-leak-42" not in f.read_bytes(), f


class RemoteHandler(FlakyHandler):
    """A 'remote' OpenAI-compatible stub that returns reasoning apart (reasoning_content) and records what
    it was sent."""

    calls: list = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        RemoteHandler.calls.append((self.headers.get("Authorization"), body))
        self._reply(200, {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                          "choices": [{"index": 0, "finish_reason": "stop", "message": {
                              "role": "assistant", "content": "The answer is 4.", "reasoning_content": "2+2=4"}}],
                          "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}})


def test_remote_endpoint_key_extra_fields_and_reasoning(tmp_path, monkeypatch):
    """A non-local endpoint goes through the OpenAI client: the key from the environment is sent (and
    written nowhere), fields the client does not know reach the server, and reasoning returned apart is
    merged back as a <think> block."""
    pytest.importorskip("openai")
    import threading

    monkeypatch.setenv("COTFORGE_TEST_KEY", "sk-remote-secret-7")
    srv = ThreadingHTTPServer(("127.0.0.2", 0), RemoteHandler)  # not "localhost": the remote code path
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    prompts = write_prompts(tmp_path / "p.jsonl", 2)
    try:
        res = cli(str(prompts), "-o", str(tmp_path / "out"), "--endpoint", f"http://127.0.0.2:{srv.server_port}/v1",
                  "--model", "r1", "--n", "1", "--workers", "1", "--api-key-env", "COTFORGE_TEST_KEY", "--keep-work",
                  "--extra-params", "chat_template_kwargs={enable_thinking: true}", "--think", "require")
    finally:
        srv.shutdown()
    assert res.exit_code == 0, res.output
    kept = read(tmp_path / "out" / "kept").to_pylist()
    assert [r["response"] for r in kept] == ["<think>\n2+2=4\n</think>\n\nThe answer is 4."] * 2
    auth, body = RemoteHandler.calls[-1]
    assert auth == "Bearer sk-remote-secret-7" and body["chat_template_kwargs"] == {"enable_thinking": True}
    assert body["seed"] == 0 and body["model"] == "r1"
    for f in (tmp_path / "out").rglob("*"):
        if f.is_file():
            assert b"sk-remote-secret-7" not in f.read_bytes(), f


@pytest.mark.parametrize("args, message", [
    (["--model", "m"], "needs the URL of an OpenAI-compatible server"),
    (["--endpoint", "http://127.0.0.1:9/v1"], "the teacher model is not set"),
    (["--model", "m", "--endpoint", "http://user:secret@127.0.0.1:9/v1"], "not in the URL"),
    (["--model", "m", "--server", "dummy", "--n", "0"], "n: must be >= 1"),
    (["--model", "m", "--endpoint", "http://127.0.0.1:9/v1"], "http://127.0.0.1:9/v1 does not answer GET /models"),
])
def test_bad_settings_are_clear_errors(tmp_path, args, message):
    prompts = write_prompts(tmp_path / "p.jsonl", 2)
    res = CliRunner().invoke(main, ["curate", "generate", str(prompts), "-o", str(tmp_path / "o"), *args])
    assert res.exit_code != 0 and message in res.output, res.output
    assert "Traceback" not in res.output and "secret" not in res.output


# --------------------------------------------------------------------------- a real server process



def start_server(model: Path, port: int, log: Path, pause_after: int | None = None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "cotforge.curate.generate.hf_server", "--model", str(model), "--port", str(port),
           "--threads", "1", "--request-log", str(log)]
    if pause_after is not None:
        cmd += ["--pause-after", str(pause_after)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"hf_server exited: {proc.stderr.read()}") from None
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("hf_server did not start")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module")
def server(tiny_model_dir, tmp_path_factory):
    """The tiny model behind a real OpenAI-compatible HTTP server on 127.0.0.1 (its own process)."""
    log = tmp_path_factory.mktemp("srv") / "requests.jsonl"
    port = free_port()
    proc = start_server(tiny_model_dir, port, log)
    yield {"url": f"http://127.0.0.1:{port}/v1", "log": log, "model": tiny_model_dir}
    stop(proc)


GEN = ["--model", "tiny", "--n", "2", "--max-tokens", "8", "--workers", "1", "--max-concurrent", "4"]


def test_real_server_seeded_rows_are_identical_across_runs(server, tmp_path):
    prompts = write_prompts(tmp_path / "p.jsonl", 6)
    for out in ("a", "b"):
        res = cli(str(prompts), "-o", str(tmp_path / out), "--endpoint", server["url"], *GEN,
                  "--on-truncated", "flag")
        assert res.exit_code == 0, res.output
    a, b = read(tmp_path / "a" / "kept"), read(tmp_path / "b" / "kept")
    assert a.num_rows == 12 and a.equals(b)
    rows = a.to_pylist()
    assert {r["finish_reason"] for r in rows} <= {"stop", "length"}
    assert all(r["truncated"] == (r["finish_reason"] == "length") for r in rows)
    assert all(0 < r["completion_tokens"] <= 8 for r in rows)
    # the two samples of a prompt differ (seed + sample index), the same sample is the same in both runs
    assert sum(rows[2 * i]["response"] != rows[2 * i + 1]["response"] for i in range(6)) >= 4


@pytest.mark.slow
def test_killed_run_resumes_without_asking_twice(server, tmp_path):
    """Kill the CLI while half the requests are answered (the server holds the rest open), rerun against
    a fresh server on the same port: every request is answered exactly once over both runs, and the rows
    equal an uninterrupted run's."""
    n_prompts, n = 8, 2
    prompts = write_prompts(tmp_path / "p.jsonl", n_prompts)
    ref = cli(str(prompts), "-o", str(tmp_path / "ref"), "--endpoint", server["url"], *GEN, "--on-truncated", "flag")
    assert ref.exit_code == 0, ref.output

    port, log = free_port(), tmp_path / "requests.jsonl"
    out = tmp_path / "out"
    args = [sys.executable, "-m", "cotforge.pipelines.cli", "curate", "generate", str(prompts), "-o", str(out),
            "--endpoint", f"http://127.0.0.1:{port}/v1", *GEN, "--on-truncated", "flag", "--records-per-chunk", "2"]
    half = n_prompts * n // 2
    srv = start_server(server["model"], port, log, pause_after=half)
    job = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and (not log.exists() or len(log.read_text().splitlines()) < half):
            assert job.poll() is None, "the run ended before it was killed"
            time.sleep(0.2)
        time.sleep(1.0)  # the client stores the last answers in its request cache
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    finally:
        stop(srv)
    assert not (out / "kept").exists()  # nothing published by the killed run
    first = [json.loads(x)["key"] for x in log.read_text().splitlines()]
    assert len(first) == half

    srv = start_server(server["model"], port, log)
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    finally:
        stop(srv)
    assert done.returncode == 0, done.stderr[-3000:]
    keys = [json.loads(x)["key"] for x in log.read_text().splitlines()]
    assert len(keys) == n_prompts * n and len(set(keys)) == len(keys), "a request was asked twice"
    assert read(out / "kept").equals(read(tmp_path / "ref" / "kept"))
    stats = json.loads((out / "stats.json").read_text())
    assert (stats["rows_in"], stats["kept"] + stats["removed"]) == (16, 16)
    assert stats["generate"]["completion_tokens_this_run"] < stats["generate"]["completion_tokens"]


def test_difficulty_samples_through_the_runner(server, tmp_path):
    """`cotforge curate difficulty --server endpoint`: the reference model is sampled by the generate stage's
    runner (n_samples requests per problem), verified, and binned; rows with a meta level are not sampled."""
    rows = [{"id": f"d{i}", "problem": f"Compute {i} * 7.", "answer": str(7 * i), "source": "s", "domain": "math",
             "meta": json.dumps({"level": 5} if i == 0 else {})} for i in range(4)]
    src = tmp_path / "d.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = CliRunner().invoke(main, ["curate", "difficulty", str(src), "-o", str(tmp_path / "diff"), "--model", "tiny",
                                    "--server", "endpoint", "--endpoint", server["url"], "-n", "2",
                                    "--max-new-tokens", "6", "--level-key", "level", "--workers", "1"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    out = {r["id"]: r for r in read(tmp_path / "diff" / "kept").to_pylist()}
    assert (out["d0"]["difficulty"], out["d0"]["difficulty_n"]) == ("hard", 0)  # from the level, not sampled
    for i in (1, 2, 3):  # the tiny random model answers nothing right: p = 0/2
        assert (out[f"d{i}"]["pass_rate"], out[f"d{i}"]["difficulty_n"]) == (0.0, 2)
    sampled = read(tmp_path / "diff" / "_sampling" / "batch-00000" / "out" / "kept").to_pylist()
    assert len(sampled) == 6 and {r["sample_index"] for r in sampled} == {0, 1}


def test_generated_rows_flow_through_verify_and_mix(tmp_path):
    """generate -> verify -> mix from the command line: every response row reaches the SFT shards."""
    prompts = write_prompts(tmp_path / "p.jsonl", 4)
    assert cli(str(prompts), "-o", str(tmp_path / "gen"), "--server", "dummy", "--model", "m", "--n", "2",
               "--workers", "1").exit_code == 0
    for stage, src, dst in (("verify", "gen", "ver"), ("mix", "ver", "mix")):
        res = CliRunner().invoke(main, ["curate", stage, str(tmp_path / src), "-o", str(tmp_path / dst)],
                                 catch_exceptions=False)
        assert res.exit_code == 0, res.output
    sft = read(tmp_path / "mix" / "sft").to_pylist()
    assert sorted(r["id"] for r in sft) == sorted(response_id(f"p{i}", k) for i in range(4) for k in range(2))
    assert all(r["messages"][-1]["role"] == "assistant" and r["teacher"] == "m" for r in sft)





@pytest.mark.slow
def test_slurm_executor_matches_local(slurm, server, tmp_path):
    """`--executor slurm` (2 array tasks against the real server): the same rows and accounting as local."""
    prompts = write_prompts(tmp_path / "p.jsonl", 6)
    common = [str(prompts), "--endpoint", server["url"], *GEN, "--on-truncated", "flag"]
    assert cli(*common, "-o", str(tmp_path / "local")).exit_code == 0
    res = cli(*common, "-o", str(tmp_path / "slurm"), "--executor", "slurm", "--tasks", "2", "--workers", "2",
              "--poll-s", "0.5")
    assert res.exit_code == 0, res.output
    assert read(tmp_path / "slurm" / "kept").equals(read(tmp_path / "local" / "kept"))
    stats = json.loads((tmp_path / "slurm" / "stats.json").read_text())
    assert (stats["rows_in"], stats["kept"], stats["generate"]["prompts_by_outcome"]) == (12, 12, {"complete": 6})
