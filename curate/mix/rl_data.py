"""The RL prompt set of a recipe: its own sources, filtered the way Klear-Reasoner built its RL data.

Klear-Reasoner ([P] §3.2.1, §5.2.4) trains RL on a prompt set of its own (88K math + 18K code prompts from
Skywork-OR1, AceReason, NuminaMath and DeepCoder), not on the SFT problems: exact dedup, 9-gram decontamination
against the benchmarks, code problems with at least 16 test cases, and a pass-rate filter by a reference model.
This stage runs that branch, in this order (cheap steps first, sampling last), each step through the door of
the stage that owns it:

1. `steps/ingest`: the sources (presets read the published schemas: `verl` for Skywork-OR1 and the released
   Klear subsets, `numinamath`, `acereason_math`, `deepcoder`, ...) -> schema rows; malformed rows quarantined;
2. `steps/filter` (here): exact dedup on the normalised prompt (the dedup stage's problem key; first source
   wins), optionally against the SFT mix's prompts too (`exclude_sft_prompts`, not in the report); only math and
   code rows; a row needs what its reward reads (math: an answer; code: tests, at least `min_tests` of them);
3. `steps/decontaminate`: the decontamination stage against the recipe's benchmarks (`ngram` 9, as the report);
4. `steps/difficulty`: the difficulty stage with `model` (by default the SFT checkpoint: the model RL starts
   from) sampling `n_samples` responses per problem, verified -> pass rate p;
5. here: keep `pass_rate_min` < p < `pass_rate_max` (default 0 < p < 1: a problem the model always or never
   solves gives GRPO no signal; the report's reference-model filter kept majority-solved problems, a different
   rule, noted in docs/training.md); an unknown p is removed. Kept rows -> `kept/` (schema rows) and the verl
   rows the RL stages read, `rl_math/` and `rl_code/`.

Every row ends in exactly one removed/ (of the step that dropped it) or in kept/; stats.json chains the steps.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from cotforge.curate.io import fs
from cotforge.curate.io.codetests import count_tests
from cotforge.curate.io.inputs import counted_rows, input_schema, resolve_inputs
from cotforge.curate.io.spec import InputSpec
from cotforge.curate.io.writer import StageWriter
from cotforge.curate.mix.stage import DEFAULT_RL_DATA_SOURCE, RL_SCHEMA, to_rl_row

if TYPE_CHECKING:
    from cotforge.curate.context import StageContext

log = logging.getLogger(__name__)

RL_DOMAINS = ("math", "code")
_SPEC_KEYS = {"path", "domain", "mapping", "preset", "format", "config_name", "split", "revision", "data_files",
              "streaming"}


@dataclass
class RLDataConfig:
    """Sources and filters of the RL prompt set (defaults: the report's rules)."""

    sources: list[dict[str, Any]] = field(default_factory=list, metadata={
        "help": "RL prompt sources: {name, path, preset, domain, split, ...} as the recipe's `sources:` entries "
                "(relative paths: from the working directory)."})
    benchmarks: list[str] = field(default_factory=list, metadata={
        "help": "Benchmarks to decontaminate against (default: the recipe's benchmarks.names)."})
    benchmarks_dir: str | None = field(default=None, metadata={"help": "Local benchmark files (recipe default)."})
    registry_yaml: str | None = field(default=None, metadata={"help": "Extra benchmark registry (recipe default)."})
    ngram: int = field(default=9, metadata={"help": "Word n-gram of the decontamination ([P]: 9-gram)."})
    decontam: dict[str, Any] = field(default_factory=dict, metadata={
        "help": "Other options of the decontamination stage (DecontamConfig fields)."})
    exclude_sft_prompts: bool = field(default=False, metadata={
        "help": "Also drop prompts that are in the SFT mix (exact match on the normalised prompt; the report "
                "does not say it does this)."})
    sft_dir: str | None = field(default=None, metadata={
        "help": "The SFT mix's rows (default: the run's mix/sft) for exclude_sft_prompts."})
    min_tests: int = field(default=16, metadata={"help": "Code rows need at least this many test cases ([P]: 16)."})
    model: str | None = field(default=None, metadata={
        "help": "Pass-rate model (default: the newest model before this stage, i.e. the SFT checkpoint); "
                "null with filter_pass_rate false: no sampling."})
    backend: str = field(default="auto", metadata={"help": "Generation backend: auto | vllm | hf."})
    n_samples: int = field(default=16, metadata={"help": "Samples per problem ([P]: 16)."})
    temperature: float = field(default=0.6, metadata={"help": "Sampling temperature."})
    top_p: float = field(default=0.95, metadata={"help": "Sampling top_p."})
    max_new_tokens: int = field(default=32768, metadata={"help": "Max tokens per sample."})
    batch_problems: int = field(default=64, metadata={"help": "Problems per generate() call."})
    filter_pass_rate: bool = field(default=True, metadata={"help": "Apply the pass-rate window."})
    pass_rate_min: float = field(default=0.0, metadata={"help": "Keep p > pass_rate_min (exclusive)."})
    pass_rate_max: float = field(default=1.0, metadata={"help": "Keep p < pass_rate_max (exclusive)."})
    data_sources: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_RL_DATA_SOURCE), metadata={
        "help": "verl data_source per domain."})
    seed: int = field(default=0, metadata={"help": "Sampling seed."})

    def __post_init__(self) -> None:
        if not 0.0 <= self.pass_rate_min < self.pass_rate_max <= 1.0:
            raise ValueError(f"pass_rate_min: need 0 <= pass_rate_min < pass_rate_max <= 1, got "
                             f"{self.pass_rate_min}, {self.pass_rate_max}")
        for name in ("min_tests", "n_samples", "ngram"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)}")
        self.specs()  # every source checked at plan time

    def specs(self) -> list[InputSpec]:
        """The sources as InputSpecs; ValueError naming the source and field."""
        if not self.sources:
            raise ValueError("sources: the RL data branch needs at least one source ({name, path, ...})")
        out, seen = [], set()
        for i, s in enumerate(self.sources):
            where = f"sources[{i}]"
            if not isinstance(s, dict) or not s.get("name") or not s.get("path"):
                raise ValueError(f"{where}: needs `name` and `path`")
            if s["name"] in seen:
                raise ValueError(f"{where}: duplicate source name {s['name']!r}")
            seen.add(s["name"])
            unknown = set(s) - _SPEC_KEYS - {"name"}
            if unknown:
                raise ValueError(f"{where}: unknown key(s) {sorted(unknown)} (known: name, {', '.join(sorted(_SPEC_KEYS))})")
            try:
                out.append(InputSpec(source_name=s["name"], **{k: v for k, v in s.items() if k != "name"}))
            except ValueError as e:
                raise ValueError(f"{where} ({s['name']}): {e}") from e
        return out


def _sub(ctx: StageContext, name: str, inputs: list[InputSpec]) -> StageContext:
    """The context of one step: its folder under OUT/steps, its inputs, the run's executor and generator."""
    from dataclasses import replace

    return replace(ctx, out_dir=str(Path(ctx.out_dir) / "steps" / name), inputs=inputs, input_dirs=[])


def _kept(folder: Path) -> list[InputSpec]:
    """The kept/ shards of a step folder ([] when it kept nothing)."""
    return resolve_inputs([str(folder)]) if _count(folder) else []


def sft_prompt_keys(folder: str | Path) -> set[int]:
    """Problem keys of the SFT mix's rows (chat `messages` shards: the first user message is the prompt)."""
    from cotforge.curate.select.profile import problem_key

    keys: set[int] = set()
    for f in sorted(Path(folder).rglob("*.parquet")):
        table = pq.read_table(f)
        col = "messages" if "messages" in table.column_names else "prompt"
        for value in table.column(col).to_pylist():
            if isinstance(value, list):
                value = next((m.get("content") for m in value if isinstance(m, dict) and m.get("role") == "user"), None)
            if isinstance(value, str):
                keys.add(problem_key(value))
    return keys


def filter_rows(specs: list[InputSpec], out: Path, cfg: RLDataConfig, exclude: Iterable[int] = (), *,
                strict: bool = False, rows_per_shard: int = 50_000) -> dict[str, Any]:
    """Step 2: exact dedup (and SFT prompts), RL domains only, what the reward reads, >= min_tests tests."""
    from cotforge.curate.select.profile import problem_key

    excluded = set(exclude)
    seen: dict[int, str] = {}
    writer = StageWriter(out, "rl_filter", schema=input_schema(specs), rows_per_shard=rows_per_shard,
                         config={"min_tests": cfg.min_tests, "exclude_sft_prompts": cfg.exclude_sft_prompts})
    for row in counted_rows(specs, writer, strict):
        key = problem_key(row["prompt"])
        if key in seen:
            writer.remove(row, "duplicate_prompt", duplicate_of=seen[key])
        elif key in excluded:
            writer.remove(row, "sft_prompt")
        elif row["domain"] not in RL_DOMAINS:
            writer.remove(row, f"not_rl_domain: {row['domain']}")
        elif row["domain"] == "math" and not row.get("answer"):
            writer.remove(row, "no_answer")
        elif row["domain"] == "code" and count_tests(row.get("tests")) < cfg.min_tests:
            n = count_tests(row.get("tests"))
            writer.remove(row, f"too_few_tests: {n} < {cfg.min_tests}" if n else "no_tests")
        else:
            seen[key] = row["id"]
            writer.keep(row)
    return writer.close()


def pass_rate_window(specs: list[InputSpec], out: Path, cfg: RLDataConfig, *, strict: bool = False,
                     rows_per_shard: int = 50_000) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """Step 5: keep pass_rate_min < p < pass_rate_max; returns the stats and the verl rows per domain."""
    writer = StageWriter(out, "rl_data", schema=input_schema(specs), rows_per_shard=rows_per_shard,
                         config={"pass_rate_min": cfg.pass_rate_min, "pass_rate_max": cfg.pass_rate_max,
                                 "filter_pass_rate": cfg.filter_pass_rate})
    verl: dict[str, list[dict[str, Any]]] = {d: [] for d in RL_DOMAINS}
    for row in counted_rows(specs, writer, strict):
        p = row.get("pass_rate")
        if cfg.filter_pass_rate and p is None:
            writer.remove(row, "pass_rate_unknown")
        elif cfg.filter_pass_rate and p <= cfg.pass_rate_min:
            writer.remove(row, f"pass_rate_low: {p:.3g} <= {cfg.pass_rate_min:g}")
        elif cfg.filter_pass_rate and p >= cfg.pass_rate_max:
            writer.remove(row, f"pass_rate_high: {p:.3g} >= {cfg.pass_rate_max:g}")
        else:
            rl = to_rl_row(row, len(verl[row["domain"]]), cfg.data_sources)
            if rl is None:  # filter_rows keeps only rows with what the reward reads
                raise RuntimeError(f"rl_data: row {row['id']} lost its answer/tests between steps")
            verl[row["domain"]].append(rl)
            writer.keep(row)
    return writer.close({"rl_rows": {d: len(v) for d, v in verl.items()}}), verl


def write_verl(out: Path, verl: dict[str, list[dict[str, Any]]]) -> None:
    """OUT/rl_math and OUT/rl_code: the verl rows the RL stages read (an empty domain gets no folder)."""
    for domain, rows in verl.items():
        folder = out / f"rl_{domain}"
        if folder.exists():
            for f in folder.glob("*.parquet"):
                f.unlink()
        if rows:
            folder.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pylist(rows, schema=RL_SCHEMA), folder / "part-00000.parquet",
                           compression="zstd")


def run(cfg: RLDataConfig, ctx: StageContext) -> dict[str, Any]:
    """The RL data branch: ingest -> exact dedup + tests rule -> decontamination -> pass rate by the SFT model ->
    OUT/rl_math, OUT/rl_code (verl rows), OUT/kept, OUT/removed, OUT/steps/<step>/, OUT/stats.json."""
    from cotforge.curate import ingest
    from cotforge.curate.decontam import stage as decontam
    from cotforge.curate.decontam.config import DecontamConfig
    from cotforge.curate.select import difficulty

    if fs.is_url(ctx.out_dir):
        raise ValueError(f"rl_data: the output folder must be local (got {fs.shown(ctx.out_dir)}); the RL trainer "
                         "reads its shards from disk")
    out = Path(ctx.out_dir)
    steps: dict[str, dict[str, Any]] = {}
    steps["ingest"] = ingest.run(ingest.IngestConfig(), _sub(ctx, "ingest", cfg.specs()))
    exclude: set[int] = set()
    if cfg.exclude_sft_prompts:
        sft = cfg.sft_dir or (str(Path(ctx.earlier["mix"]) / "sft") if "mix" in ctx.earlier else None)
        if not sft or not Path(sft).exists():
            raise ValueError(f"exclude_sft_prompts: no SFT rows found (sft_dir {sft!r}); run the mix stage first "
                             "or set sft_dir")
        exclude = sft_prompt_keys(sft)
    steps["filter"] = filter_rows(_kept(out / "steps" / "ingest"), out / "steps" / "filter", cfg, exclude,
                                  strict=ctx.strict, rows_per_shard=ctx.rows_per_shard)
    last = out / "steps" / "filter"
    if cfg.benchmarks and steps["filter"]["kept"]:
        dcfg = DecontamConfig(**{"benchmarks": cfg.benchmarks, "benchmarks_dir": cfg.benchmarks_dir,
                                 "registry_yaml": cfg.registry_yaml, "ngram": cfg.ngram, **cfg.decontam})
        steps["decontaminate"] = decontam.run(dcfg, _sub(ctx, "decontaminate", _kept(last)))
        last = out / "steps" / "decontaminate"
    if cfg.filter_pass_rate and _count(last):
        if not cfg.model:
            raise ValueError("model: the pass-rate filter needs a model (default: the SFT checkpoint of the run)")
        dif = difficulty.DifficultyConfig(model=cfg.model, backend=cfg.backend, n_samples=cfg.n_samples,
                                          temperature=cfg.temperature, top_p=cfg.top_p,
                                          max_new_tokens=cfg.max_new_tokens, seed=cfg.seed,
                                          batch_problems=cfg.batch_problems, recompute=True)
        steps["difficulty"] = difficulty.run(dif, _sub(ctx, "difficulty", _kept(last)))
        last = out / "steps" / "difficulty"
    stats, verl = pass_rate_window(_kept(last), out, cfg, strict=ctx.strict, rows_per_shard=ctx.rows_per_shard)
    write_verl(out, verl)
    stats["steps"] = {k: {"rows_in": v.get("rows_in"), "kept": v.get("kept"), "removed_by_reason":
                          v.get("removed_by_reason")} for k, v in steps.items()}
    (out / "stats.json").write_text(json.dumps(stats, indent=2, sort_keys=True, default=str) + "\n")
    log.info("rl_data: %s math + %s code RL prompts -> %s", len(verl["math"]), len(verl["code"]), out)
    return stats


def _count(folder: Path) -> int:
    stats = folder / "stats.json"
    return int(json.loads(stats.read_text()).get("kept", 0)) if stats.exists() else 0
