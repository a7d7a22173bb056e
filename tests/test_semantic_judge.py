"""The semantic tier's LLM judge (`curate/text/judge.py`) against a local OpenAI-compatible stand-in server:
which candidates reach it, what its answer does, the on-disk cache, and the errors a user sees."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from test_semantic import CLEAN, ITEM, NUMBER_CHANGED, QUESTION_CHANGED, REPHRASED

from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.text.embed import build_tiny_encoder
from cotforge.curate.text.judge import says_yes
from cotforge.pipelines.cli.main import main


class _Endpoint(BaseHTTPRequestHandler):
    """/v1/models lists one model; /v1/chat/completions answers `answer` and records the prompt."""

    answer = "Yes"
    yes_pairs: set[frozenset[str]] = set()  # when set: "Yes" exactly for these (A, B) pairs, in either order
    prompts: list[str] = []

    def _send(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._send({"data": [{"id": "judge-model"}]})

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert body["model"] == "judge-model" and body["temperature"] == 0
        prompt = body["messages"][0]["content"]
        type(self).prompts.append(prompt)
        answer = type(self).answer
        if type(self).yes_pairs:
            a, b = re.search(r"Problem A:\n(.*)\n\nProblem B:\n(.*)\n\nIs Problem B", prompt, re.DOTALL).groups()
            answer = "Yes" if frozenset((a, b)) in type(self).yes_pairs else "No"
        self._send({"choices": [{"message": {"content": answer}}]})

    def log_message(self, *args) -> None:
        pass


@pytest.fixture()
def endpoint():
    _Endpoint.prompts = []
    _Endpoint.answer = "Yes"
    _Endpoint.yes_pairs = set()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory) -> Path:
    return build_tiny_encoder(tmp_path_factory.mktemp("enc"), corpus=[ITEM, REPHRASED, CLEAN] * 5)


def _run(tmp_path: Path, out: str, encoder: Path, *extra: str):
    bench = tmp_path / "bench"
    bench.mkdir(exist_ok=True)
    (bench / "mybench.jsonl").write_text(json.dumps({"id": "b1", "problem": ITEM, "answer": "10"}) + "\n")
    rows = [{"id": "r", "prompt": REPHRASED, "response": "10"}, {"id": "n", "prompt": NUMBER_CHANGED, "response": "x"},
            {"id": "q", "prompt": QUESTION_CHANGED, "response": "x"}, {"id": "c", "prompt": CLEAN, "response": "40"}]
    src = tmp_path / "train.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # the rules' cosine bound at 1.0: no candidate passes the rules, each goes to the judge or is rejected
    return CliRunner().invoke(main, ["curate", "decontaminate", str(src), "-o", str(tmp_path / out), "--benchmarks",
                                     "mybench", "--benchmarks-dir", str(bench), "--workers", "1", "--semantic",
                                     "--semantic-model", str(encoder), "--semantic-cosine", "1.0",
                                     "--semantic-judge-cosine", "-1", *extra])


def _removed(out: Path) -> dict[str, dict]:
    files = sorted((out / "removed").glob("*.parquet"))
    return {r["id"]: r for r in pl.read_parquet(files).iter_rows(named=True)} if files else {}


@pytest.mark.slow  # six stage runs (~20 s)
def test_the_judge_decides_what_the_rules_leave_and_never_sees_changed_numbers(tmp_path, endpoint, tiny_encoder,
                                                                              monkeypatch):
    monkeypatch.setenv("COTFORGE_CACHE_DIR", str(tmp_path / "cache"))
    judge = ["--semantic-judge", endpoint, "--semantic-judge-model", "judge-model"]
    res = _run(tmp_path, "yes", tiny_encoder, *judge)
    assert res.exit_code == 0, res.output
    got = _removed(tmp_path / "yes")
    assert got["r"]["match_kind"] == "semantic"
    assert json.loads(got["r"]["matches"])[0]["judge"] == {"model": "judge-model", "answer": "Yes"}
    # only the rephrasing was asked: the number-changed look-alike and the clean row fail the number rule first,
    # the question-changed row is the lexical tiers' (it shares the item's words)
    assert len(_Endpoint.prompts) == 1 and REPHRASED in _Endpoint.prompts[0] and ITEM in _Endpoint.prompts[0]
    assert "n" not in got and "c" not in got and got["q"]["match_kind"] != "semantic"
    stats = json.loads((tmp_path / "yes" / "stats.json").read_text())
    assert stats["semantic_judge"] == {"model": "judge-model", "pairs": 1, "asked": 1}

    # a rerun asks nothing (answers cached on disk) and writes the same rows
    res = _run(tmp_path, "again", tiny_encoder, *judge)
    assert res.exit_code == 0, res.output
    assert len(_Endpoint.prompts) == 1
    assert sorted(_removed(tmp_path / "again")) == sorted(got)
    assert json.loads((tmp_path / "again" / "stats.json").read_text())["semantic_judge"]["asked"] == 0

    # a "No" keeps the row; without a judge the rules alone keep it too
    monkeypatch.setenv("COTFORGE_CACHE_DIR", str(tmp_path / "cache2"))
    _Endpoint.answer = "No."
    assert _run(tmp_path, "no", tiny_encoder, *judge).exit_code == 0
    assert "r" not in _removed(tmp_path / "no")
    assert _run(tmp_path, "off", tiny_encoder).exit_code == 0
    assert "r" not in _removed(tmp_path / "off")

    # --semantic-judge-numbers: the pairs whose numbers disagree go to the judge too (here it says "No" to all)
    asked = len(_Endpoint.prompts)
    monkeypatch.setenv("COTFORGE_CACHE_DIR", str(tmp_path / "cache3"))
    assert _run(tmp_path, "numbers", tiny_encoder, *judge, "--semantic-judge-numbers").exit_code == 0
    sent = _Endpoint.prompts[asked:]
    assert len(sent) == 3 and any(NUMBER_CHANGED in p for p in sent) and any(CLEAN in p for p in sent)
    assert not {"r", "n", "c"} & set(_removed(tmp_path / "numbers"))


@pytest.mark.slow  # three stage runs (~11 s)
def test_dedup_merges_what_the_judge_calls_the_same_problem(tmp_path, endpoint, tiny_encoder, monkeypatch):
    """Dedup with a judge: every candidate pair the graded check does not merge goes to it (the look-alikes too:
    in dedup the judge replaces the semantic pair check), and its "Yes" merges. REPHRASED is a rewording the
    rules keep apart (numbers in words, sentences moved)."""
    monkeypatch.setenv("COTFORGE_CACHE_DIR", str(tmp_path / "cache"))
    _Endpoint.yes_pairs = {frozenset((ITEM, REPHRASED))}
    rows = [{"id": "a", "prompt": ITEM, "response": "10"}, {"id": "r", "prompt": REPHRASED, "response": "10"},
            {"id": "n", "prompt": NUMBER_CHANGED, "response": "14"}, {"id": "c", "prompt": CLEAN, "response": "40"}]
    src = tmp_path / "train.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["curate", "dedup", str(src), "--workers", "1", "--semantic", "--semantic-model", str(tiny_encoder),
            "--semantic-judge", endpoint, "--semantic-judge-model", "judge-model", "--semantic-judge-cosine", "-1"]
    res = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    removed = pl.read_parquet(sorted((tmp_path / "out" / "removed").glob("*.parquet")))
    assert removed["id"].to_list() == ["r"]
    assert any(NUMBER_CHANGED in p for p in _Endpoint.prompts)  # asked, and said "No"
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())["dedup"]
    assert stats["semantic_judge_merged"] == 1 and stats["semantic_judge_kept"] >= 1
    asked = len(_Endpoint.prompts)
    res = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "again")])
    assert res.exit_code == 0 and len(_Endpoint.prompts) == asked  # cached answers
    res = CliRunner().invoke(main, ["curate", "dedup", str(src), "-o", str(tmp_path / "bad"), "--semantic",
                                    "--semantic-model", str(tiny_encoder), "--semantic-judge", "http://127.0.0.1:9/v1",
                                    "--semantic-judge-model", "m"])
    assert res.exit_code != 0 and "http://127.0.0.1:9/v1" in res.output and "Traceback" not in res.output


def test_an_unreachable_judge_is_a_clear_error(tmp_path, tiny_encoder):
    res = _run(tmp_path, "o", tiny_encoder, "--semantic-judge", "http://127.0.0.1:9/v1", "--semantic-judge-model", "m")
    assert res.exit_code != 0
    assert "http://127.0.0.1:9/v1" in res.output and "Traceback" not in res.output


def test_a_model_the_endpoint_does_not_serve_is_named(tmp_path, endpoint, tiny_encoder):
    res = _run(tmp_path, "o", tiny_encoder, "--semantic-judge", endpoint, "--semantic-judge-model", "other")
    assert res.exit_code != 0 and "'other' is not served" in res.output and "judge-model" in res.output


def test_judge_settings_are_checked():
    with pytest.raises(ValueError, match="turn on --semantic"):
        DecontamConfig(semantic_judge="http://localhost:8000/v1")
    with pytest.raises(ValueError, match="http"):
        DecontamConfig(semantic=True, semantic_judge="localhost:8000")
    with pytest.raises(ValueError, match="semantic_judge_model"):
        DecontamConfig(semantic=True, semantic_judge="http://localhost:8000/v1")
    assert says_yes("Yes.") and says_yes(" yes, same problem") and not says_yes("No") and not says_yes("")
    assert not says_yes("Yesterday")
