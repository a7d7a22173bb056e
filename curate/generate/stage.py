"""The generate stage (`cotforge curate generate`): N teacher responses per prompt through datatrove's
`InferenceRunner`, one row per response.

Flow: ingest the prompts into work shards -> the rows to answer (all, or with keep_responses only those
without a response) into `_work/generate/todo/`, rows_per_task per datatrove task -> per task, `InferenceRunner` sends
`n` requests per prompt (`rollouts_per_document`) to the teacher (an OpenAI-compatible endpoint, or a
vLLM / SGLang server the task starts on its node) and writes each prompt's results to
`_work/generate/responses/<rank>/chunk_<i>.jsonl` -> the results are joined back to the prompt rows in
input order and published as kept/ (one row per usable response) and removed/ (one row per response that
could not be used, with its reason).

Accounting: the stage's unit is the requested response, so `rows_in` = prompts x n (+ malformed input
rows). Every request ends in exactly one place: kept, or removed with `request_failed: <the server's
error>`, `truncated: ...` (finish_reason=length, unless on_truncated=flag), `no_think: ...`
(think=require) or `no_result: ...`. stats.json says per prompt whether it was answered n times,
partially or not at all.

Resuming: the runner keeps a request cache (sqlite) and per-chunk checkpoints under `_work/generate/
checkpoints`; a killed or preempted run, rerun with the same command, replays finished prompts and cached
requests and asks the server only for the rest (the work folder is reused while inputs and config match).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from datatrove.pipeline.inference.run_inference import InferenceConfig, InferenceRunner
from datatrove.pipeline.inference.servers import EndpointServer
from datatrove.pipeline.inference.types import InferenceError, ServerError
from datatrove.pipeline.readers import ParquetReader
from datatrove.pipeline.writers import JsonlWriter
from loguru import logger

from cotforge.curate.core.schema import load_meta
from cotforge.curate.engine import JobsFailed, Step, finish_stage, run_steps, start_stage
from cotforge.curate.generate.config import RETRY_STATUSES, GenerateConfig
from cotforge.curate.io.remote import remote_output

if TYPE_CHECKING:
    from cotforge.curate.context import StageContext

log = logging.getLogger(__name__)

STAGE = "generate"
# columns every response row gets (kept and removed)
GENERATE_FIELDS = [
    pa.field("prompt_id", pa.string()),
    pa.field("sample_index", pa.int32()),
    pa.field("teacher", pa.string()),
    pa.field("finish_reason", pa.string()),
    pa.field("truncated", pa.bool_()),
    pa.field("completion_tokens", pa.int64()),
    pa.field("sampling", pa.string()),
]
# request fields the OpenAI client takes as arguments (others go to `extra_body` for remote endpoints)
OPENAI_FIELDS = frozenset({"messages", "prompt", "temperature", "top_p", "max_tokens", "max_completion_tokens",
                           "seed", "n", "stop", "presence_penalty", "frequency_penalty", "logprobs", "top_logprobs",
                           "logit_bias", "user", "response_format", "reasoning_effort"})
# columns that describe an earlier response of the row: cleared on the new response
RESPONSE_COLUMNS = ("correct", "verify_status", "tests_passed", "tests_total")


def response_id(prompt_id: str, sample: int) -> str:
    """Id of response `sample` of a prompt: `<prompt id>#<sample>` (stable across reruns)."""
    return f"{prompt_id}#{sample}"


# --------------------------------------------------------------------------- inside a task


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


# --------------------------------------------------------------------------- the stage


def inference_config(cfg: GenerateConfig, server_logs: Path) -> InferenceConfig:
    """datatrove's InferenceConfig for `cfg` (no API key: the task reads it from the environment)."""
    server_type, kwargs = cfg.server, dict(cfg.server_options)
    delay = 5.0 if cfg.server in ("vllm", "sglang") else 1.0  # seconds between readiness polls
    # an endpoint is already up or unreachable: give up after 30 s; a server we start gets its start timeout
    attempts = 30 if cfg.server == "endpoint" else max(1, int(cfg.server_start_timeout_s // delay))
    if cfg.server == "hf":  # datatrove's custom server type runs `python SCRIPT --port P --KEY=VALUE ...`
        from cotforge.curate.generate import hf_server

        server_type = "custom"
        kwargs = {"server_script": hf_server.__file__, "model": cfg.model, "threads": 1, **kwargs}
    return InferenceConfig(
        server_type=server_type, model_name_or_path=cfg.model, model_max_context=cfg.model_max_context,
        use_chat=cfg.chat, endpoint_url=cfg.endpoint, metric_interval=max(1, int(cfg.progress_s)), tp=cfg.tp,
        rollouts_per_document=cfg.n, max_concurrent_generations=cfg.max_concurrent,
        request_timeout=cfg.request_timeout_s, model_kwargs=kwargs or None,
        server_log_folder=str(server_logs), server_start_timeout_sec=cfg.server_start_timeout_s,
        server_ready_max_attempts=attempts, server_ready_delay_sec=delay)


def build_pipeline(cfg: GenerateConfig, work: Path, batch_rows: int) -> list:
    """[prompt reader, GenerateRunner]: the datatrove pipeline of one generate task."""
    sampling = {k: v for k, v in cfg.sampling(0).items() if k != "seed"}
    settings = RequestSettings(model=cfg.model, chat=cfg.chat, prompt_template=cfg.prompt_template,
                               sampling=tuple(sorted(sampling.items())), seed=cfg.seed, retries=cfg.retries,
                               backoff_s=cfg.backoff_s)
    reader = ParquetReader(str(work / "todo"), adapter=PromptAdapter(cfg.system_prompt), glob_pattern="*.parquet",
                           batch_size=batch_rows)
    writer = JsonlWriter(str(work / "responses"), output_filename="${rank}/chunk_${chunk_index}.jsonl",
                         compression=None, adapter=results_adapter)
    runner = GenerateRunner(partial(rollout, settings=settings), inference_config(cfg, work / "server_logs"),
                            writer, shared_context=partial(shared_state, cfg.requests_per_s, cfg.progress_s),
                            checkpoints_local_dir=str(work / "checkpoints"), records_per_chunk=cfg.records_per_chunk,
                            api_key_env=cfg.api_key_env)
    return [reader, runner]


def load_results(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """position id -> results, from one task's response files."""
    out: dict[str, list[dict[str, Any]]] = {}
    for f in sorted(folder.glob("chunk_*.jsonl")):
        with open(f, "rb") as fh:
            for line in fh:
                if line.strip():
                    rec = orjson.loads(line)
                    out[rec["id"]] = rec["results"]
    return out


def compose(result: dict[str, Any], cfg: GenerateConfig) -> str:
    """The response text of a result under cfg.think: separately returned reasoning is put back as
    `<think>\\n...\\n</think>\\n\\n` before the answer (merge/require); strip keeps only the answer."""
    text, reasoning = result.get("text") or "", result.get("reasoning") or ""
    merged = f"{cfg.think_start}\n{reasoning}\n{cfg.think_end}\n\n{text}" if reasoning else text
    if cfg.think == "strip" and cfg.think_end in merged:
        return merged.rsplit(cfg.think_end, 1)[1].strip()
    return merged


def removal_reason(result: dict[str, Any] | None, response: str, cfg: GenerateConfig) -> str | None:
    """Why a response cannot be kept (None: keep it)."""
    if result is None:
        return "no_result: the runner returned no result for this prompt"
    if result.get("error"):
        return f"request_failed: {result['error']}"
    if result.get("finish_reason") == "length" and cfg.on_truncated == "remove":
        return f"truncated: finish_reason=length (cut at max_tokens={cfg.max_tokens})"
    if cfg.think == "require" and cfg.think_end not in response:
        return f"no_think: no closed {cfg.think_start}...{cfg.think_end} block"
    return None


@dataclass
class Tally:
    """Per-prompt and per-response counts for stats.json."""

    prompts: Counter[str] = field(default_factory=Counter)
    finish: Counter[str] = field(default_factory=Counter)
    prompt_tokens: int = 0
    completion_tokens: int = 0


def emit(row: dict[str, Any], results: list[dict[str, Any]] | None, cfg: GenerateConfig, writer: Any,
         tally: Tally) -> None:
    """The n response rows of one prompt row into kept/ or removed/."""
    writer.count_in(row["source"], cfg.n - 1)  # ingest counted the prompt once; the unit is the response
    by_sample = {int(r["sample"]): r for r in results or [] if "sample" in r}
    base = {k: v for k, v in row.items() if k not in RESPONSE_COLUMNS}
    kept = 0
    for k in range(cfg.n):
        res = by_sample.get(k) if results is not None else None
        ok = res is not None and not res.get("error")
        response = compose(res, cfg) if ok else None
        finish = res.get("finish_reason") if ok else None
        out = {**base, "id": response_id(row["id"], k), "prompt_id": row["id"], "sample_index": k,
               "teacher": cfg.model, "sampling": json.dumps(cfg.sampling(k), sort_keys=True), "response": response,
               "finish_reason": finish, "truncated": finish == "length" if ok else None,
               "completion_tokens": res.get("completion_tokens") if ok else None}
        if ok:
            tally.finish[str(finish)] += 1
            tally.prompt_tokens += res.get("prompt_tokens") or 0
            tally.completion_tokens += res.get("completion_tokens") or 0
        reason = removal_reason(res, response or "", cfg)
        if reason:
            writer.remove(out, reason)
        else:
            kept += 1
            writer.keep(out)
    tally.prompts["complete" if kept == cfg.n else "partial" if kept else "none_kept"] += 1


def needs_answer(row: dict[str, Any], cfg: GenerateConfig) -> bool:
    """False for a row that keeps the response it has (keep_responses); True otherwise."""
    return not (cfg.keep_responses and row.get("response"))


def write_todo(area: Any, cfg: GenerateConfig, rows_per_task: int) -> int:
    """Write the rows the teacher answers into `work/todo/NNNNN.parquet`, `rows_per_task` per file (one
    file per datatrove task, in input order); returns the number of files. Deterministic, so a resumed
    run rewrites the same files and its checkpoints still point at the same rows."""
    todo = area.work / "todo"
    if todo.exists():
        for f in todo.glob("*.parquet"):
            f.unlink()
    todo.mkdir(parents=True, exist_ok=True)
    buf: list[dict[str, Any]] = []
    files = 0

    def flush() -> None:
        nonlocal buf, files
        pq.write_table(pa.Table.from_pylist(buf, schema=area.schema), todo / f"{files:05d}.parquet")
        files, buf = files + 1, []

    for shard in area.shards:
        for batch in pq.ParquetFile(shard).iter_batches(batch_size=1024):
            for row in batch.to_pylist():
                if needs_answer(row, cfg):
                    buf.append(row)
                    if len(buf) == rows_per_task:
                        flush()
    if buf:
        flush()
    return files


def collect_responses(area: Any, cfg: GenerateConfig, rows_per_task: int) -> Tally:
    """Join the tasks' results back to the prompt rows in input order; rows that keep their response pass
    through as one row. The i-th answered row is row i % rows_per_task of task i // rows_per_task."""
    tally = Tally()
    loaded: dict[int, dict[str, list[dict[str, Any]]]] = {}
    i = 0
    for shard in area.shards:
        for batch in pq.ParquetFile(shard).iter_batches(batch_size=1024):
            for row in batch.to_pylist():
                if not needs_answer(row, cfg):
                    tally.prompts["kept_response"] += 1
                    area.writer.keep(row)
                    continue
                rank, pos = divmod(i, rows_per_task)
                if rank not in loaded:
                    loaded.clear()  # one task's results in memory at a time
                    loaded[rank] = load_results(area.work / "responses" / f"{rank:05d}")
                emit(row, loaded[rank].get(f"{pos:09d}"), cfg, area.writer, tally)
                i += 1
    return tally


def _fresh_tokens(logs: Path) -> int:
    """Completion tokens generated in this invocation (datatrove's per-task stats count only requests
    that went to the server, not the ones replayed from the request cache)."""
    total = 0
    for f in (logs / "stats").glob("*.json"):
        for step in json.loads(f.read_text()):
            got = step.get("stats", {}).get("completion_tokens")
            if isinstance(got, dict):
                total += int(got.get("total", 0))
    return total


def public_config(cfg: GenerateConfig) -> dict[str, Any]:
    """The config as recorded in stats.json and hashed into the work key (the endpoint without a query)."""
    out = dataclasses.asdict(cfg)
    if out.get("endpoint"):
        out["endpoint"] = out["endpoint"].split("?", 1)[0]
    return out


def check_dependencies(cfg: GenerateConfig) -> None:
    """The runner's optional packages (the `generate` extra), checked before any work starts."""
    import importlib.util
    from urllib.parse import urlparse

    needed = ["httpx", "aiosqlite", "aiofiles"]
    host = urlparse(cfg.endpoint or "").hostname
    local = (cfg.endpoint or "").startswith("http://") and host in ("localhost", "127.0.0.1", "::1")
    if cfg.server == "endpoint" and not local:
        needed.append("openai")  # datatrove calls remote endpoints through the OpenAI client
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if missing:
        raise ValueError(f"generate: missing packages {', '.join(missing)}: pip install cotforge (they are its dependencies)")


def with_generate_fields(schema: pa.Schema) -> pa.Schema:
    """The kept rows' schema: the input's plus the generate columns."""
    for f in GENERATE_FIELDS:
        i = schema.get_field_index(f.name)
        schema = schema.set(i, f) if i >= 0 else schema.append(f)
    return schema


def check_endpoint(cfg: GenerateConfig, tries: int = 3) -> None:
    """Fail early, naming the URL, when a local run cannot reach the endpoint's `GET /models` (Slurm/Ray
    tasks may reach endpoints this machine cannot, so only local runs check)."""
    import httpx

    url = f"{cfg.endpoint.rstrip('/')}/models"
    key = cfg.api_key()
    error = ""
    for i in range(tries):
        try:
            r = httpx.get(url, headers={"Authorization": f"Bearer {key}"} if key else {}, timeout=10.0)
            if r.status_code == 200:
                return
            error = f"HTTP {r.status_code}"
            if r.status_code in (401, 403):
                break
        except httpx.HTTPError as e:
            error = type(e).__name__
        if i < tries - 1:
            time.sleep(1.0 * (i + 1))
    hint = f" (is ${cfg.api_key_env} set?)" if error in ("HTTP 401", "HTTP 403") else ""
    raise ValueError(f"generate: endpoint {cfg.public_endpoint()} does not answer GET /models: {error}{hint}")


@remote_output
def run(cfg: GenerateConfig, ctx: StageContext) -> dict[str, Any]:
    """Generate n teacher responses per prompt (one row each, with teacher, sampling and finish reason)
    through datatrove's inference runner: an OpenAI-compatible endpoint or a vLLM/SGLang server per task."""
    cfg.check_runnable()
    check_dependencies(cfg)
    if cfg.server == "endpoint" and ctx.executor.executor == "local":
        check_endpoint(cfg)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per readiness poll otherwise
    exec_cfg = ctx.executor
    if cfg.executor_options:
        exec_cfg = dataclasses.replace(exec_cfg, options={**exec_cfg.options, **cfg.executor_options})
    exec_cfg = exec_cfg.for_inputs(ctx.inputs)
    area = start_stage(ctx.inputs, ctx.out_dir, STAGE, exec_cfg, removed_extra=GENERATE_FIELDS,
                       kept_schema=with_generate_fields, strict=ctx.strict, rows_per_shard=ctx.rows_per_shard,
                       config=public_config(cfg))
    with area:
        secs = None
        tasks = write_todo(area, cfg, exec_cfg.rows_per_task)
        if tasks:
            log.info("generate: %d tasks, %d responses per prompt from %s (%s)", tasks, cfg.n, cfg.model,
                     cfg.server if cfg.server != "endpoint" else cfg.public_endpoint())
            pipeline = build_pipeline(cfg, area.work, area.batch_rows(cap=1000))
            t0 = time.time()
            try:
                run_steps(area.work, [Step(STAGE, pipeline, tasks)], exec_cfg, STAGE)
            except ServerError as e:  # a task run in this process (one worker) lost its server
                raise JobsFailed(f"generate: the teacher's server failed ({e}); finished requests are kept: run the "
                                 "same command again to resume") from e
            secs = round(time.time() - t0, 3)  # the datatrove step (Slurm: queueing included)
        tally = collect_responses(area, cfg, exec_cfg.rows_per_task)
        fresh = _fresh_tokens(area.work / "logs" / f"1_{STAGE}")
        extra = {"generate": {
            "teacher": cfg.model, "n": cfg.n,
            "prompts": sum(v for k, v in tally.prompts.items() if k != "kept_response"),
            "prompts_by_outcome": dict(sorted(tally.prompts.items())),
            "finish_reasons": dict(sorted(tally.finish.items())),
            "prompt_tokens": tally.prompt_tokens, "completion_tokens": tally.completion_tokens,
            "completion_tokens_this_run": fresh, "seconds_this_run": secs,
            "tokens_per_s_this_run": round(fresh / secs, 1) if secs else None}}
        stats = finish_stage(area, extra)
    g = stats["generate"]
    log.info("generate: %d prompts (%s), %d responses kept, %s tokens/s", g["prompts"], g["prompts_by_outcome"],
             stats["kept"], g["tokens_per_s_this_run"])
    return stats


# --------------------------------------------------------------------------- other stages' sampling


@dataclass
class Sampled:
    """One response as the generation interface returns it (`.text`; "" when the request failed)."""

    text: str
    finish_reason: str | None


class RunnerGenerator:
    """The generation interface the difficulty stage samples with (`generate(prompts, sampling)` ->
    one list of responses per prompt), run as a generate stage: datatrove's runner on `executor` (so a
    large pool's pass rates run on Slurm/Ray, with a server per task or an endpoint). Each call is one
    stage run into `work/batch-<i>`; a batch already published with the same prompts and settings is read
    back instead of sampled again, so a rerun after a failure resumes batch by batch."""

    def __init__(self, base: GenerateConfig, work: Path, executor: Any, ctx_fields: dict[str, Any] | None = None):
        self.base, self.work, self.executor = base, Path(work), executor
        self.ctx_fields = ctx_fields or {}
        self.calls = 0

    def generate(self, prompts: list[list[dict[str, str]]], sampling: Any) -> list[list[Sampled]]:
        from cotforge.curate.context import StageContext
        from cotforge.curate.io.inputs import resolve_inputs

        cfg = dataclasses.replace(self.base, n=sampling.n, temperature=sampling.temperature, top_p=sampling.top_p,
                                  max_tokens=sampling.max_new_tokens, seed=sampling.seed, on_truncated="flag")
        folder = self.work / f"batch-{self.calls:05d}"
        self.calls += 1
        folder.mkdir(parents=True, exist_ok=True)
        lines = []
        for i, msgs in enumerate(prompts):
            system = next((m["content"] for m in msgs if m["role"] == "system"), None)
            user = [m["content"] for m in msgs if m["role"] == "user"][-1]
            lines.append(json.dumps({"id": f"q{i:07d}", "prompt": user, "source": "sampled", "domain": "other",
                                     "meta": json.dumps({"system": system} if system else {})}))
        src = folder / "prompts.jsonl"
        text = "\n".join(lines) + "\n"
        out = folder / "out"
        stats_file = out / "stats.json"
        done = (stats_file.exists() and src.exists() and src.read_text() == text
                and json.loads(stats_file.read_text()).get("config") == public_config(cfg))
        if not done:
            src.write_text(text)
            ctx = StageContext(out_dir=out, inputs=resolve_inputs([str(src)]), executor=self.executor,
                               **self.ctx_fields)
            run(cfg, ctx)
        got: dict[str, dict[int, Sampled]] = {}
        for part in ("kept", "removed"):
            for f in sorted((out / part).glob("*.parquet")):
                for r in pq.read_table(f, columns=["prompt_id", "sample_index", "response",
                                                   "finish_reason"]).to_pylist():
                    if r["prompt_id"] is not None:
                        got.setdefault(r["prompt_id"], {})[r["sample_index"]] = Sampled(r["response"] or "",
                                                                                        r["finish_reason"])
        return [[got.get(f"q{i:07d}", {}).get(k, Sampled("", None)) for k in range(cfg.n)]
                for i in range(len(prompts))]
