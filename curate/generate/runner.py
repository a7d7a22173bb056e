"""Inside a generate task: the prompt adapter, request settings, rate limit, progress, the OpenAI-compatible
endpoint client and the runner (datatrove's InferenceRunner with cotforge's request and result handling)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from datatrove.pipeline.inference.run_inference import InferenceRunner
from datatrove.pipeline.inference.servers import EndpointServer
from datatrove.pipeline.inference.types import InferenceError
from loguru import logger

from cotforge.curate.core.schema import load_meta
from cotforge.curate.generate.config import RETRY_STATUSES

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)


# request fields the OpenAI client takes as arguments (others go to `extra_body` for remote endpoints)
OPENAI_FIELDS = frozenset({"messages", "prompt", "temperature", "top_p", "max_tokens", "max_completion_tokens",
                           "seed", "n", "stop", "presence_penalty", "frequency_penalty", "logprobs", "top_logprobs",
                           "logit_bias", "user", "response_format", "reasoning_effort"})


@dataclass
class PromptAdapter:
    """ParquetReader adapter: a prompt row -> a Document whose id is the row's position in its work shard
    (unique and stable across reruns, whatever the input ids) and whose metadata holds the request text."""

    system_prompt: str | None = None

    def __call__(self, reader: Any, data: dict, path: str, id_in_file: int | str) -> dict:
        system = load_meta(data.get("meta")).get("system")
        system = system if isinstance(system, str) else self.system_prompt
        prompt = data.get("prompt") or ""
        # an empty text would make datatrove skip the row (and shift positions): it is answered with an error
        return {"text": prompt or "(empty prompt)", "id": f"{int(id_in_file):09d}",
                "metadata": {"system": system, "empty": not prompt}}


@dataclass(frozen=True)
class RequestSettings:
    """What a rollout needs to build and retry its request (picklable: it travels to Slurm/Ray tasks)."""

    model: str
    chat: bool
    prompt_template: str
    sampling: tuple[tuple[str, Any], ...]  # GenerateConfig.sampling(0) without the seed
    seed: int | None
    retries: int
    backoff_s: float

    def payload(self, doc: Any, sample: int) -> dict[str, Any]:
        system = doc.metadata.get("system")
        body: dict[str, Any] = {"model": self.model, **dict(self.sampling)}
        if self.seed is not None:
            body["seed"] = self.seed + sample
        if self.chat:
            msgs = [{"role": "system", "content": system}] if system is not None else []
            body["messages"] = [*msgs, {"role": "user", "content": doc.text}]
        else:
            body["prompt"] = self.prompt_template.format(prompt=doc.text, system=system or "")
        return body


class RateLimiter:
    """At most `per_s` request starts per second within one task (None: no limit)."""

    def __init__(self, per_s: float | None):
        self.interval = 1.0 / per_s if per_s else 0.0
        self.next_at = 0.0
        self.lock = asyncio.Lock()

    async def wait(self) -> None:
        if not self.interval:
            return
        async with self.lock:
            now = time.monotonic()
            delay = self.next_at - now
            self.next_at = max(now, self.next_at) + self.interval
        if delay > 0:
            await asyncio.sleep(delay)


class Progress:
    """Counts a task's finished responses and generated tokens and logs them every `every_s` seconds."""

    def __init__(self, every_s: float, rank: int | None = None):
        self.every_s, self.rank = every_s, rank
        self.started = self.last = time.monotonic()
        self.responses = self.failed = self.tokens = 0

    def add(self, tokens: int, failed: bool = False) -> None:
        self.responses += 1
        self.failed += failed
        self.tokens += tokens
        now = time.monotonic()
        if now - self.last >= self.every_s:
            self.last = now
            rate = self.tokens / max(now - self.started, 1e-9)
            line = (f"generate: {self.responses} responses ({self.failed} failed), {self.tokens} tokens, "
                    f"{rate:.1f} tokens/s")
            log.info(line)
            logger.info(line)  # the task's datatrove log


def shared_state(requests_per_s: float | None, progress_s: float) -> dict[str, Any]:
    """Per-task objects the rollouts share (made inside the task's event loop)."""
    return {"limiter": RateLimiter(requests_per_s), "progress": Progress(progress_s)}


def _retryable(error: str) -> bool:
    return any(f"status {s}" in error for s in RETRY_STATUSES)


async def rollout(doc: Any, generate: Any, *, settings: RequestSettings, limiter: RateLimiter,
                  progress: Progress) -> dict[str, Any]:
    """One response of one prompt: a dict with the text (and reasoning, finish reason, token counts), or
    with `error` (the server's reason) when the request failed for good; never None, never raises for a
    request error, so a failed response is accounted for instead of failing the task."""
    sample = int(generate.keywords["rollout_idx"])  # the runner's sample index of this rollout
    if doc.metadata.get("empty"):
        return {"sample": sample, "error": "empty prompt"}
    for attempt in range(settings.retries + 1):
        await limiter.wait()
        try:
            res = await generate(settings.payload(doc, sample))
        except InferenceError as e:
            error = str(e.error)[:1000]
            if _retryable(error) and attempt < settings.retries:
                wait = settings.backoff_s * 2 ** attempt * (1 + random.random() / 4)
                logger.warning(f"generate: {error}; retry {attempt + 1}/{settings.retries} in {wait:.1f}s")
                await asyncio.sleep(wait)
                continue
            progress.add(0, failed=True)
            return {"sample": sample, "error": error}
        usage = res.usage or {}
        tokens = int(usage.get("completion_tokens") or 0)
        progress.add(tokens)
        return {"sample": sample, "text": res.text, "reasoning": res.reasoning or "",
                "finish_reason": res.finish_reason, "completion_tokens": tokens,
                "prompt_tokens": int(usage.get("prompt_tokens") or 0)}
    raise AssertionError("unreachable")


class OpenAIEndpoint(EndpointServer):
    """datatrove's EndpointServer for a base URL that ends in /v1 (as OpenAI-compatible servers document
    it): readiness is `GET <url>/models`, and local plain-HTTP requests go to `<url>/chat/completions`."""

    def get_base_url(self) -> str:
        url = self.endpoint_url.rstrip("/")
        return url[:-3] if url.endswith("/v1") else url

    async def is_ready(self) -> bool:
        import httpx

        headers = {"Authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else {}
        try:
            async with httpx.AsyncClient() as session:
                r = await session.get(f"{self.endpoint_url.rstrip('/')}/models", headers=headers, timeout=10.0)
                return r.status_code == 200
        except Exception:
            return False


    async def _make_request(self, payload: dict) -> dict:
        """Local plain HTTP: datatrove's client. Remote: the OpenAI client, with fields it does not know
        (chat_template_kwargs, top_k ...) in `extra_body`, and the reasoning a server returns apart
        (`reasoning_content`, e.g. DeepSeek-R1) kept, which datatrove's remote path drops."""
        if self.client is None:
            return await super()._make_request(payload)
        from openai import (
            APIConnectionError,
            APITimeoutError,
            AuthenticationError,
            BadRequestError,
            InternalServerError,
            NotFoundError,
            PermissionDeniedError,
            RateLimitError,
        )

        body = dict(payload)
        model = body.pop("model")
        extra = {k: body.pop(k) for k in list(body) if k not in OPENAI_FIELDS}
        try:
            if self.config.use_chat:
                r = await self.client.chat.completions.create(model=model, extra_body=extra or None, **body)
                msg = r.choices[0].message
                reasoning = getattr(msg, "reasoning_content", None) or getattr(msg, "reasoning", None) or ""
                choice = {"message": {"content": msg.content or "", "reasoning_content": reasoning}}
            else:
                r = await self.client.completions.create(model=model, extra_body=extra or None, **body)
                choice = {"text": r.choices[0].text or ""}
        except (AuthenticationError, BadRequestError, NotFoundError, PermissionDeniedError) as e:
            raise InferenceError(None, f"{type(e).__name__}: {e}") from e  # not retried
        except (APIConnectionError, RateLimitError, InternalServerError) as e:
            raise ConnectionError(str(e)) from e  # retried by datatrove with backoff
        except APITimeoutError as e:
            raise TimeoutError(str(e)) from e
        usage = {"prompt_tokens": r.usage.prompt_tokens, "completion_tokens": r.usage.completion_tokens} \
            if r.usage else {}
        return {"choices": [{**choice, "finish_reason": r.choices[0].finish_reason}], "usage": usage}


class GenerateRunner(InferenceRunner):
    """InferenceRunner whose endpoint server reads its API key from the environment inside the task, so
    the key is never part of the pickled pipeline, the executor's saved config or any log."""

    def __init__(self, *args: Any, api_key_env: str = "OPENAI_API_KEY", **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.api_key_env = api_key_env

    def _init_server(self, rank: int):
        if self.config.server_type != "endpoint":
            return super()._init_server(rank)
        import os

        config = dataclasses.replace(self.config, api_key=os.environ.get(self.api_key_env) or None)
        return OpenAIEndpoint(config, rank)


def results_adapter(writer: Any, document: Any) -> dict:
    """JsonlWriter adapter: what the stage reads back per prompt (its position id and its results)."""
    return {"id": document.id, "results": document.metadata.get("rollout_results", [])}
