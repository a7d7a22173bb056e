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

import dataclasses
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from datatrove.pipeline.inference.run_inference import InferenceConfig
from datatrove.pipeline.inference.types import ServerError
from datatrove.pipeline.readers import ParquetReader
from datatrove.pipeline.writers import JsonlWriter

from cotforge.curate.engine import JobsFailed, Step, finish_stage, run_steps, start_stage
from cotforge.curate.generate.config import GenerateConfig
from cotforge.curate.generate.runner import (
    GenerateRunner,
    PromptAdapter,
    RequestSettings,
    results_adapter,
    rollout,
    shared_state,
)
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
# columns that describe an earlier response of the row: cleared on the new response
RESPONSE_COLUMNS = ("correct", "verify_status", "tests_passed", "tests_total")


def response_id(prompt_id: str, sample: int) -> str:
    """Id of response `sample` of a prompt: `<prompt id>#<sample>` (stable across reruns)."""
    return f"{prompt_id}#{sample}"


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
