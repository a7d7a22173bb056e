"""Label problem difficulty with a reference model's pass rate (Klear-Reasoner §3.1, §5.1.1).

A problem's pass rate p is the share of N sampled responses of a reference model that the verifiers
accept. Bins (thresholds configurable):

    hard:   p <= t_hard   (default 0.25: at most 2 of 8 samples correct)
    easy:   p >= t_easy   (default 0.75: at least 6 of 8 samples correct)
    medium: otherwise

Where p comes from, per row, first match wins:
1. an existing non-null `pass_rate` column (an earlier run, or data that ships one);
2. a numeric level in meta (``level_key``, e.g. MATH-style ``"difficulty": 5.0`` or ``"level": "Level 3"``):
   level >= hard_level -> hard, level <= easy_level -> easy, else medium (pass_rate stays null);
3. sampling: N responses per unique problem, verified with `cotforge.curate.verify.verify_rows` (rows
   need an `answer` or `tests`). Two ways to sample:
   - in process (default): an injected generator (the pipeline and the CLI pass `StageContext.make_generator`,
     built from `cotforge.train.rollout.make_generator`: vLLM with the `gpu` extra and a GPU, HF generate
     otherwise; curation never imports the trainer): CPU demos, one machine;
   - through datatrove's inference runner (`server` set: endpoint / vllm / sglang / hf): the generate
     stage's path (`curate/generate`), on the stage's executor, so a large pool's pass rates run on
     Slurm/Ray with a server per task or against an endpoint, resumable batch by batch;
4. otherwise null (unknown).
Output columns: `pass_rate` (float|null), `difficulty` ("hard"|"medium"|"easy"|null), `difficulty_n`
(samples behind p; 0 for meta levels). All rows are kept; stats.json counts rows per bin and method.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from cotforge.curate.core.schema import load_meta
from cotforge.curate.io.inputs import counted_rows, input_schema
from cotforge.curate.io.remote import remote_output
from cotforge.curate.io.writer import StageWriter

if TYPE_CHECKING:
    from cotforge.curate.context import StageContext

log = logging.getLogger(__name__)

DEFAULT_T_HARD = 0.25
DEFAULT_T_EASY = 0.75
BACKENDS = ("auto", "vllm", "hf")
DIFFICULTY_FIELDS = [pa.field("pass_rate", pa.float64()), pa.field("difficulty", pa.string()),
                     pa.field("difficulty_n", pa.int64())]


@dataclass
class DifficultyConfig:
    """Thresholds, the meta-level mapping and the sampling settings of the difficulty step."""

    t_hard: float = field(default=DEFAULT_T_HARD, metadata={"help": "p <= t_hard is hard."})
    t_easy: float = field(default=DEFAULT_T_EASY, metadata={"help": "p >= t_easy is easy."})
    level_key: str | None = field(default=None, metadata={
        "help": "meta key with a numeric level (MATH: level, DeepScaleR: difficulty)."})
    hard_level: float = field(default=5.0, metadata={"help": "A meta level >= this is hard."})
    easy_level: float = field(default=2.0, metadata={"help": "A meta level <= this is easy."})
    model: str | None = field(default=None, metadata={
        "help": "Reference model (path or name) to sample n_samples responses per problem; none: no sampling."})
    backend: str = field(default="auto", metadata={
        "help": "Generation backend the caller builds for `model`.", "choices": BACKENDS})
    n_samples: int = field(default=8, metadata={"help": "Samples per problem.", "flag": ["-n", "--n-samples"]})
    temperature: float = field(default=0.6, metadata={"help": "Sampling temperature."})
    top_p: float = field(default=0.95, metadata={"help": "Nucleus sampling top_p."})
    max_new_tokens: int = field(default=4096, metadata={"help": "Max generated tokens per sample."})
    seed: int = field(default=0, metadata={"help": "Sampling seed."})
    batch_problems: int = field(default=64, metadata={"help": "Problems per generate() call (server set: per "
                                                             "runner batch, a resumable unit)."})
    server: str | None = field(default=None, metadata={
        "help": "Sample through datatrove's inference runner instead of in process: endpoint (with --endpoint), "
                "vllm / sglang (a server per task), hf (cotforge's CPU server per task) or dummy."})
    endpoint: str | None = field(default=None, metadata={
        "help": "server=endpoint: base URL of an OpenAI-compatible server serving `model`."})
    api_key_env: str = field(default="OPENAI_API_KEY", metadata={
        "help": "server=endpoint: environment variable with the API key (never logged)."})
    max_concurrent: int = field(default=64, metadata={"help": "server set: requests in flight per task."})
    recompute: bool = field(default=False, metadata={"help": "Ignore existing pass_rate / difficulty columns."})

    def __post_init__(self) -> None:
        if not 0.0 <= self.t_hard < self.t_easy <= 1.0:
            raise ValueError(f"t_hard: need 0 <= t_hard < t_easy <= 1, got {self.t_hard}, {self.t_easy}")
        if self.n_samples < 1:
            raise ValueError(f"n_samples: must be >= 1, got {self.n_samples}")
        if self.batch_problems < 1:
            raise ValueError(f"batch_problems: must be >= 1, got {self.batch_problems}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend: {self.backend!r} is not one of {', '.join(BACKENDS)}")
        if self.server is not None:
            self.runner_config()  # ValueError naming a bad server / endpoint now, not after pass 1

    def runner_config(self):
        """The generate stage's config that samples this reference model through the runner."""
        from cotforge.curate.generate.config import GenerateConfig

        return GenerateConfig(model=self.model or "", server=self.server or "endpoint", endpoint=self.endpoint,
                              api_key_env=self.api_key_env, n=self.n_samples, temperature=self.temperature,
                              top_p=self.top_p, max_tokens=self.max_new_tokens, seed=self.seed,
                              max_concurrent=self.max_concurrent, on_truncated="flag", think="merge")


def bin_pass_rate(p: float | None, t_hard: float = DEFAULT_T_HARD, t_easy: float = DEFAULT_T_EASY) -> str | None:
    """hard (p <= t_hard), easy (p >= t_easy), medium otherwise; None for None."""
    if p is None:
        return None
    return "hard" if p <= t_hard else "easy" if p >= t_easy else "medium"


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def parse_level(value: Any) -> float | None:
    """A numeric level from 5, 5.0, "5", "Level 5"; None when there is no number."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    m = _NUMBER.search(str(value))
    return float(m.group()) if m else None


def bin_level(level: float | None, cfg: DifficultyConfig) -> str | None:
    """Meta level -> bin with cfg.hard_level / cfg.easy_level."""
    if level is None:
        return None
    return "hard" if level >= cfg.hard_level else "easy" if level <= cfg.easy_level else "medium"


@dataclass(frozen=True)
class SamplingRequest:
    """What the generator is asked for: the fields of the generation interface's sampling settings
    (`cotforge.train.rollout.SamplingConfig` reads the same names), filled from a DifficultyConfig."""

    n: int
    temperature: float
    top_p: float
    max_new_tokens: int
    seed: int
    top_k: int = 0
    repetition_penalty: float = 1.0


def _sampling_config(cfg: DifficultyConfig) -> SamplingRequest:
    return SamplingRequest(n=cfg.n_samples, temperature=cfg.temperature, top_p=cfg.top_p,
                           max_new_tokens=cfg.max_new_tokens, seed=cfg.seed)


def sample_pass_rates(problems: list[dict[str, Any]], generator: Any, verifier: Callable[[list[dict]], list[dict]],
                      cfg: DifficultyConfig) -> list[float]:
    """Pass rate of each problem row: share of cfg.n_samples generated responses the verifier accepts.

    p = (1/N) * sum_i [verify(response_i) is correct]; verifier errors count as incorrect."""
    sampling = _sampling_config(cfg)
    out: list[float] = []
    for start in range(0, len(problems), cfg.batch_problems):
        chunk = problems[start:start + cfg.batch_problems]
        prompts = [[{"role": "user", "content": p["prompt"]}] for p in chunk]
        completions = generator.generate(prompts, sampling)
        if len(completions) != len(chunk):
            raise RuntimeError(f"generator returned {len(completions)} prompt results for {len(chunk)} prompts")
        cand = [{**p, "response": c.text} for p, comps in zip(chunk, completions, strict=True) for c in comps]
        verdicts = verifier(cand) if cand else []
        k = 0
        for comps in completions:
            ok = sum(1 for v in verdicts[k:k + len(comps)] if v.get("correct") is True)
            out.append(ok / len(comps) if comps else 0.0)
            k += len(comps)
        log.info("difficulty: sampled %d/%d problems", min(start + len(chunk), len(problems)), len(problems))
    return out


def _existing(row: dict[str, Any], cfg: DifficultyConfig) -> tuple[float | None, str | None, int | None] | None:
    """(pass_rate, difficulty, n) when the row already has a usable label, else None."""
    if cfg.recompute:
        return None
    p = row.get("pass_rate")
    if p is not None:
        n = row.get("difficulty_n")
        return float(p), bin_pass_rate(float(p), cfg.t_hard, cfg.t_easy), n
    if row.get("difficulty") in ("hard", "medium", "easy"):
        return None, row["difficulty"], row.get("difficulty_n")
    return None


@remote_output
def run(cfg: DifficultyConfig, ctx: StageContext) -> dict[str, Any]:
    """Label problems hard/medium/easy from a reference model's pass rate (columns pass_rate, difficulty).

    The reference model is sampled in process by `ctx.make_generator` (injected by the caller), or with
    `server` set through datatrove's inference runner on the stage's executor (Slurm/Ray at scale). Every
    row is kept with pass_rate / difficulty / difficulty_n (malformed input rows removed)."""
    specs, out_dir, strict, rows_per_shard = ctx.inputs, ctx.out_dir, ctx.strict, ctx.rows_per_shard
    if cfg.server and cfg.model:
        from cotforge.curate.generate.sampling import RunnerGenerator

        generator: Any = RunnerGenerator(cfg.runner_config(), Path(out_dir) / "_sampling", ctx.executor)
    else:
        generator = ctx.make_generator(cfg.model, cfg.backend) if cfg.model and ctx.make_generator else None
    from cotforge.curate.select.profile import problem_key

    labels: dict[str, tuple[float | None, str | None, int | None, str]] = {}
    to_sample: dict[str, dict[str, Any]] = {}
    for row in counted_rows(specs, None, strict):  # pass 1: which problems need sampling
        if _existing(row, cfg) is not None:
            continue
        level = parse_level(load_meta(row.get("meta")).get(cfg.level_key)) if cfg.level_key else None
        key = problem_key(row["prompt"])
        if level is None and key not in to_sample and (row.get("answer") or row.get("tests")):
            to_sample[key] = {k: row.get(k) for k in ("id", "source", "domain", "prompt", "answer", "tests", "meta")}
    if to_sample and generator is None and cfg.model:
        raise ValueError(f"difficulty: {len(to_sample)} problems need sampling from {cfg.model!r} but no generator "
                         "was given (the pipeline and `cotforge curate difficulty` build one for `model`)")
    if to_sample and generator is not None:
        from cotforge.curate.verify import verify_rows as verifier
        keys = list(to_sample)
        rates = sample_pass_rates([to_sample[k] for k in keys], generator, verifier, cfg)
        for k, p in zip(keys, rates, strict=True):
            labels[k] = (p, bin_pass_rate(p, cfg.t_hard, cfg.t_easy), cfg.n_samples, "sampled")
    elif to_sample:
        log.warning("difficulty: %d problems have no pass rate or level and no --model was given; "
                    "their difficulty stays null", len(to_sample))
    schema = input_schema(specs)
    for f in DIFFICULTY_FIELDS:
        if schema.get_field_index(f.name) < 0:
            schema = schema.append(f)
    writer = StageWriter(out_dir, "difficulty", schema=schema, rows_per_shard=rows_per_shard, config=asdict(cfg))
    by_bin: Counter[str] = Counter()
    by_method: Counter[str] = Counter()
    for row in counted_rows(specs, writer, strict):  # pass 2: write
        got = _existing(row, cfg)
        method = "column"
        if got is None:
            level = parse_level(load_meta(row.get("meta")).get(cfg.level_key)) if cfg.level_key else None
            if level is not None:
                got, method = (None, bin_level(level, cfg), 0), "meta_level"
            else:
                p, d, n, method = labels.get(problem_key(row["prompt"]), (None, None, None, "none"))
                got = (p, d, n)
        row["pass_rate"], row["difficulty"], row["difficulty_n"] = got
        by_bin[str(got[1])] += 1
        by_method[method] += 1
        writer.keep(row)
    return writer.close({"difficulty_bins": dict(sorted(by_bin.items())), "difficulty_methods": dict(by_method),
                         "problems_sampled": len(labels)})
