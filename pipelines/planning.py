"""Planning a run: check the recipe against the stage registry (stage names, option keys and values,
source and benchmark paths, inputs) and give each stage its inputs, built options and completion hash."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cotforge.pipelines.config import (
    GENERATED,
    RUNNER_KEYS,
    Recipe,
    RecipeError,
    build_dataclass,
    config_hash,
    unknown_key_error,
)
from cotforge.pipelines.stages import ORDER, STAGES
from cotforge.pipelines.stages.model import ModelConfig, gguf_path
from cotforge.pipelines.stages.spec import StageSpec


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
    from cotforge.curate.schema import DOMAINS

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
        check_source_input(recipe, s, where)


def check_source_input(recipe: Recipe, s: Any, where: str) -> str:
    """The one detection step at plan time: every file's format is known and the preset is valid (a bad one
    is a RecipeError naming the source, never a traceback later). Returns the --dry-run description."""
    from cotforge.curate.io.readers import InputError, InputSpec, describe_input

    if s.path.startswith(GENERATED):
        return "written by `generate:`"
    try:
        spec = InputSpec(recipe.resolve_path(s.path), s.name, dict(s.mapping), s.domain, **s.reader_options())
        return describe_input(spec)
    except (InputError, ValueError) as e:
        raise RecipeError(f"{where}: {e}") from e


def _check_path(recipe: Recipe, value: str, where: str) -> None:
    if value.startswith("hf:") or "://" in value:  # existence checked by check_source_input (sources)
        return
    if value.startswith(GENERATED):
        if recipe.generate is None:
            raise RecipeError(f"{where}: {value!r} is generated, but the recipe has no `generate:` section")
        from cotforge.pipelines.demo_data import GENERATED_FILES

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
    from cotforge.curate.benchmarks import REGISTRY, load_registry_yaml

    known = set(REGISTRY)
    if b.registry and b.registry.startswith(GENERATED):
        from cotforge.pipelines.demo_data import GENERATED_BENCHMARKS

        known |= set(GENERATED_BENCHMARKS)
    elif b.registry:
        known |= set(load_registry_yaml(recipe.resolve_path(b.registry)))
    for n in b.names:
        if n not in known:
            raise RecipeError(f"{recipe.path}: benchmarks.names: unknown benchmark {n!r} "
                              f"(known: {', '.join(sorted(known))})")
