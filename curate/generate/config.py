"""`GenerateConfig`: the teacher, where it is served, how it is sampled and what happens to its answers."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

SERVERS = ("endpoint", "vllm", "sglang", "hf", "dummy")
THINK_MODES = ("merge", "require", "strip")
TRUNCATED = ("remove", "flag")
# HTTP statuses an endpoint answers when it is overloaded or restarting: retried with backoff
RETRY_STATUSES = (408, 429, 502, 503, 504)


@dataclass
class GenerateConfig:
    """Settings of the generate stage (recorded in stats.json; the API key never is: only its variable name).

    Sampling: every request carries `temperature`, `top_p`, `max_tokens` and, with `seed` set, the seed
    `seed + sample index`, so reruns of a seeded run on a server that honours seeds give identical rows.
    """

    model: str = field(default="", metadata={
        "help": "Teacher model: the name the endpoint serves, or the path/hub id a vllm/sglang server loads."})
    server: str = field(default="endpoint", metadata={
        "help": "endpoint: any OpenAI-compatible URL; vllm / sglang: a server started per task on its node (GPU); "
                "hf: cotforge's small transformers server started per task (CPU demos); dummy: datatrove's "
                "canned-answer server (tests).", "choices": SERVERS})
    endpoint: str | None = field(default=None, metadata={
        "help": "Base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (server=endpoint)."})
    api_key_env: str = field(default="OPENAI_API_KEY", metadata={
        "help": "Environment variable holding the endpoint's API key (read by each task, never logged or saved)."})
    keep_responses: bool = field(default=False, metadata={
        "help": "Rows that already have a response keep it (one row, teacher not asked); only prompt-only rows "
                "are answered. Default: every row's prompt is answered n times (old responses replaced)."})
    n: int = field(default=4, metadata={"help": "Responses per prompt.", "flag": ["-n", "--n"]})
    temperature: float = field(default=0.6, metadata={"help": "Sampling temperature."})
    top_p: float = field(default=0.95, metadata={"help": "Nucleus sampling top_p."})
    max_tokens: int = field(default=32768, metadata={"help": "Most generated tokens per response (the length limit)."})
    seed: int | None = field(default=0, metadata={
        "help": "Request seed of sample k is seed + k (null: unseeded). vLLM, SGLang and llama.cpp honour it."})
    extra_params: dict[str, Any] = field(default_factory=dict, metadata={
        "help": "More request fields sent as is, e.g. top_k=20 or chat_template_kwargs (YAML values).",
        "metavar": "KEY=VALUE"})
    chat: bool = field(default=True, metadata={
        "help": "Call /chat/completions (the server applies the model's chat template); --no-chat: "
                "/completions with the prompt rendered by `prompt_template`."})
    prompt_template: str = field(default="{prompt}", metadata={
        "help": "--no-chat: the raw prompt, a format string with {prompt} and {system}."})
    system_prompt: str | None = field(default=None, metadata={
        "help": "System turn of every request (a row's meta.system wins)."})
    think: str = field(default="merge", metadata={
        "help": "Reasoning the server returns apart (reasoning_content): merge: put it back as "
                "<think>...</think> before the answer; require: merge, and remove responses without a closed "
                "think block; strip: keep only the answer after the think block.", "choices": THINK_MODES})
    think_start: str = field(default="<think>", metadata={"help": "Opening tag of the reasoning block."})
    think_end: str = field(default="</think>", metadata={"help": "Closing tag of the reasoning block."})
    on_truncated: str = field(default="remove", metadata={
        "help": "Responses cut by the length limit (finish_reason=length): remove (to removed/ with reason "
                "`truncated`) or flag (kept, truncated=true).", "choices": TRUNCATED})
    max_concurrent: int = field(default=64, metadata={"help": "Requests in flight per task."})
    requests_per_s: float | None = field(default=None, metadata={
        "help": "Rate limit per task (requests started per second); null: none."})
    retries: int = field(default=5, metadata={
        "help": "Retries of a request the endpoint answers with 408/429/502/503/504 (connection errors: "
                "datatrove's own 6 tries with backoff)."})
    backoff_s: float = field(default=2.0, metadata={"help": "First retry wait; doubles each retry (plus jitter)."})
    request_timeout_s: float | None = field(default=1800.0, metadata={"help": "Seconds before a request times out."})
    model_max_context: int = field(default=40960, metadata={"help": "vllm/sglang: the server's context length."})
    server_options: dict[str, Any] = field(default_factory=dict, metadata={
        "help": "vllm/sglang: more server flags (datatrove's model_kwargs), e.g. gpu-memory-utilization=0.9.",
        "metavar": "KEY=VALUE"})
    tp: int = field(default=1, metadata={"help": "vllm/sglang: tensor parallel size (GPUs per server)."})
    server_start_timeout_s: float = field(default=1800.0, metadata={
        "help": "vllm/sglang: seconds a server may take to become ready."})
    executor_options: dict[str, Any] = field(default_factory=dict, metadata={
        "help": "Executor options for this stage only, over the run's (e.g. partition=gpu, gpus_per_task=8 for "
                "a vllm server per Slurm task).", "metavar": "KEY=VALUE"})
    records_per_chunk: int = field(default=500, metadata={
        "help": "Prompts per checkpoint chunk (a resumed task replays finished chunks without asking again)."})
    progress_s: float = field(default=30.0, metadata={"help": "Seconds between progress lines (responses, tokens/s)."})

    def __post_init__(self) -> None:
        if self.server not in SERVERS:
            raise ValueError(f"server: {self.server!r} is not one of {', '.join(SERVERS)}")
        if self.think not in THINK_MODES:
            raise ValueError(f"think: {self.think!r} is not one of {', '.join(THINK_MODES)}")
        if self.on_truncated not in TRUNCATED:
            raise ValueError(f"on_truncated: {self.on_truncated!r} is not one of {', '.join(TRUNCATED)}")
        for name in ("n", "max_tokens", "max_concurrent", "records_per_chunk", "tp", "model_max_context"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1 (got {getattr(self, name)})")
        if self.retries < 0 or self.backoff_s < 0:
            raise ValueError(f"retries / backoff_s: must be >= 0 (got {self.retries}, {self.backoff_s})")
        if self.requests_per_s is not None and self.requests_per_s <= 0:
            raise ValueError(f"requests_per_s: must be > 0 or null (got {self.requests_per_s})")
        if not 0.0 <= self.top_p <= 1.0 or self.temperature < 0:
            raise ValueError(f"temperature / top_p: need temperature >= 0 and 0 <= top_p <= 1 "
                             f"(got {self.temperature}, {self.top_p})")
        if "{prompt}" not in self.prompt_template:
            raise ValueError(f"prompt_template: must contain {{prompt}} (got {self.prompt_template!r})")
        if self.server == "endpoint" and self.endpoint:
            url = urlparse(self.endpoint)
            if url.scheme not in ("http", "https") or not url.hostname:
                raise ValueError(f"endpoint: {self.endpoint!r} is not an http(s) URL")
            if url.username or url.password:
                raise ValueError("endpoint: put the API key in the environment variable named by api_key_env, "
                                 "not in the URL")

    def check_runnable(self) -> None:
        """The settings a run needs (not needed to build a config for --dry-run or a recipe default)."""
        if not self.model:
            raise ValueError("generate: model: the teacher model is not set (--model)")
        if self.server == "endpoint" and not self.endpoint:
            raise ValueError("generate: endpoint: server=endpoint needs the URL of an OpenAI-compatible server "
                             "(--endpoint http://HOST:PORT/v1)")

    def public_endpoint(self) -> str:
        """The endpoint as it may be logged: scheme, host, port and path only."""
        url = urlparse(self.endpoint or "")
        return f"{url.scheme}://{url.hostname}{f':{url.port}' if url.port else ''}{url.path}"

    def api_key(self) -> str | None:
        """The endpoint's API key from the environment (None when the variable is unset or empty)."""
        return os.environ.get(self.api_key_env) or None

    def sampling(self, sample: int) -> dict[str, Any]:
        """The sampling fields of request `sample` (what the row's `sampling` column records)."""
        out: dict[str, Any] = {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens}
        if self.seed is not None:
            out["seed"] = self.seed + sample
        return {**out, **self.extra_params}
