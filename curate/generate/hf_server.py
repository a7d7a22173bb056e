"""A small OpenAI-compatible HTTP server around a transformers causal LM, for CPU runs without vLLM.

    python -m cotforge.curate.generate.hf_server --model DIR --port 8000 [--request-log FILE]

Serves `GET /v1/models`, `POST /v1/chat/completions` and `POST /v1/completions` (one choice per
request: `max_tokens`, `temperature`, `top_p`, `seed`, `stop` are honoured; `finish_reason` is `length` when
the reply reached max_tokens, else `stop`). Requests are answered one at a time (one model, stdlib
threads). A request with a `seed` is sampled from a generator seeded with it, so the same request gives the
same reply on any run of this server. `--request-log` appends one JSON line per answered request (its key:
a hash of the request without `model`), which is how tests check that a resumed run asks nothing twice.
The generate stage starts it per task as `server: hf` (through datatrove's custom-server type); tests
and bench/generate.py start it themselves on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def request_key(body: dict[str, Any]) -> str:
    """Hash of a request's content (model name left out): equal keys = the same question asked again."""
    clean = {k: v for k, v in body.items() if k != "model"}
    return hashlib.sha256(json.dumps(clean, sort_keys=True).encode()).hexdigest()[:24]


class Model:
    """The tokenizer + model, and one generate call per request (serialised by a lock)."""

    def __init__(self, path: str, threads: int | None = None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads:
            torch.set_num_threads(threads)
        self.torch = torch
        self.tok = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        self.name = path
        self.lock = threading.Lock()

    def render(self, body: dict[str, Any]) -> str:
        if "messages" not in body:
            return str(body.get("prompt", ""))
        if self.tok.chat_template:
            return self.tok.apply_chat_template(body["messages"], tokenize=False, add_generation_prompt=True)
        return "".join(f"{m['role']}: {m['content']}\n" for m in body["messages"]) + "assistant: "

    def complete(self, body: dict[str, Any]) -> tuple[str, str, int, int]:
        """(text, finish_reason, prompt_tokens, completion_tokens) of one request."""
        torch = self.torch
        ids = self.tok(self.render(body), return_tensors="pt").input_ids
        max_new = int(body.get("max_tokens") or body.get("max_completion_tokens") or 256)
        temperature = float(body.get("temperature", 1.0))
        kw: dict[str, Any] = {"max_new_tokens": max_new, "pad_token_id": self.tok.pad_token_id or 0}
        if temperature > 0:
            kw.update(do_sample=True, temperature=temperature, top_p=float(body.get("top_p", 1.0)), top_k=0)
        else:
            kw.update(do_sample=False)
        with self.lock, torch.no_grad():
            if body.get("seed") is not None:
                torch.manual_seed(int(body["seed"]))
            out = self.model.generate(ids, **kw)[0, ids.shape[1]:]
        n_out = int(out.shape[0])
        eos = self.tok.eos_token_id
        stopped = eos is not None and n_out and int(out[-1]) == eos
        text = self.tok.decode(out, skip_special_tokens=True)
        for s in ([body["stop"]] if isinstance(body.get("stop"), str) else body.get("stop") or []):
            if s and s in text:
                text, stopped = text.split(s, 1)[0], True
        finish = "stop" if stopped or n_out < max_new else "length"
        return text, finish, int(ids.shape[1]), n_out


class State:
    """Server-wide settings shared by the handler threads."""

    def __init__(self, model: Model, log_path: str | None, pause_after: int | None):
        self.model, self.log_path, self.pause_after = model, log_path, pause_after
        self.answered = self.admitted = 0
        self.count_lock = threading.Lock()


def make_handler(state: State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms delayed-ACK stall

        def _send(self, code: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(200, {"object": "list", "data": [{"id": state.model.name, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:  # noqa: N802
            chat = self.path.rstrip("/").endswith("/chat/completions")
            if not chat and not self.path.rstrip("/").endswith("/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                if chat and not isinstance(body.get("messages"), list):
                    raise ValueError("messages: expected a list of chat turns")
            except (ValueError, TypeError) as e:
                self._send(400, {"error": {"message": f"bad request: {e}", "type": "BadRequestError"}})
                return
            with state.count_lock:  # requests are admitted in arrival order; past pause_after they hang
                state.admitted += 1
                paused = state.pause_after is not None and state.admitted > state.pause_after
            if paused:  # tests: hold the request open until the client is killed
                time.sleep(3600)
                return
            text, finish, n_in, n_out = state.model.complete(body)
            choice = {"index": 0, "finish_reason": finish,
                      **({"message": {"role": "assistant", "content": text}} if chat else {"text": text})}
            reply = {"id": f"cmpl-{request_key(body)}", "object": "chat.completion" if chat else "text_completion",
                     "created": int(time.time()), "model": body.get("model", state.model.name), "choices": [choice],
                     "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}}
            self._send(200, reply)
            with state.count_lock:
                state.answered += 1
                if state.log_path:
                    with open(state.log_path, "a") as fh:
                        fh.write(json.dumps({"key": request_key(body), "seed": body.get("seed"),
                                             "completion_tokens": n_out, "t": time.time()}) + "\n")

        def log_message(self, fmt: str, *args: Any) -> None:
            pass

    return Handler


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="transformers model folder or hub id")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    ap.add_argument("--request-log", default=None, help="append one JSON line per answered request")
    ap.add_argument("--pause-after", type=int, default=None,
                    help="hold every request after this many answers open (tests of killed runs)")
    args, _unknown = ap.parse_known_args(argv)  # datatrove's custom server passes its own flags too
    state = State(Model(args.model, args.threads), args.request_log, args.pause_after)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(state))
    server.daemon_threads = True
    print(f"Uvicorn running on http://{args.host}:{server.server_port} (cotforge hf_server, {args.model})",
          file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
