"""Planning a run: check the recipe against the stage registry (stage names, option keys and values,
source and benchmark paths, inputs) and give each stage its inputs, built config and completion hash.

Every stage's config is built here with the loader the run uses (`cotforge.curate.core.config.build`) and
validates itself on construction, so `--dry-run` rejects what a run would. The one exception is a stage
run through `launch:` (a distributed trainer on other machines): its keys and value types are checked
here, and the launched process builds the config itself (its checks depend on that machine: bf16 needs a
GPU). Nothing here is keyed on a stage's name: what differs between stages is declared on their `Stage`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cotforge.curate.core.config import build, check, init_fields, unknown_key
from cotforge.pipelines.config import GENERATED, RUNNER_KEYS, Recipe, RecipeError, config_hash
from cotforge.pipelines.stages import ORDER, SECTION_STAGES, get_stage
from cotforge.pipelines.stages.spec import Stage

OLD_CLI = re.compile(r"-m\s+pipelines\.cli\b")


@dataclass
class PlannedStage:
    """A stage as it will run: its Stage, inputs, options, plan-time config and completion hash."""

    stage: Stage
    inputs: list[str]  # upstream stage names (or absolute folders given with `input:`)
    options: dict[str, Any]  # the recipe's options for it (runner keys removed, recipe seed filled in)
    cfg: Any  # the config built from options + recipe defaults (a checked dict for launched stages)
    hash: str = ""
    seed: int | None = None
    launch: str | None = None
    where: str = ""  # the YAML field of its options, for messages

    @property
    def name(self) -> str:
        return self.stage.name


def enabled_stages(recipe: Recipe) -> list[str]:
    """Stage names the recipe runs, in pipeline order; unknown names are errors."""
    for name in recipe.stages:
        if name not in ORDER or name in SECTION_STAGES.values():
            raise unknown_key(f"{recipe.path}: stages", name, [n for n in ORDER if n not in SECTION_STAGES.values()],
                              error=RecipeError)
    sectioned = {stage for section, stage in SECTION_STAGES.items() if getattr(recipe, section) is not None}
    return [n for n in ORDER if n in sectioned
            or (n in recipe.stages and recipe.stages[n].get("enabled", True) is not False)]


def stage_options(recipe: Recipe, name: str) -> tuple[dict[str, Any], str]:
    """(options, YAML field) of a stage: its `stages.<name>` mapping, or the recipe section it reads."""
    for section, stage in SECTION_STAGES.items():
        if stage == name:
            return dict(getattr(recipe, section) or {}), f"{recipe.path}: {section}"
    return dict(recipe.stages.get(name) or {}), f"{recipe.path}: stages.{name}"


def recipe_defaults(stage: Stage, recipe: Recipe, run_dir: Path | None) -> dict[str, Any]:
    """Option values the stage takes from recipe sections when its own options leave them out
    (paths resolved into `run_dir`; `<run>` placeholders when planning without one)."""
    out: dict[str, Any] = {}
    for d in stage.defaults:
        value = getattr(getattr(recipe, d.section), d.key)
        if value:
            out[d.field] = recipe.resolve_path(value, run_dir) if d.path else value
    return out


def _inputs(stage: Stage, opts: dict[str, Any], done: list[str], recipe: Recipe, where: str) -> list[str]:
    """Upstream stages: `input:` if given (a stage name or a path), else by the stage's `reads`."""
    if "input" in opts:
        given = opts["input"] if isinstance(opts["input"], list) else [opts["input"]]
        out = []
        for g in map(str, given):
            if g in ORDER:
                if g not in done:
                    raise RecipeError(f"{where}.input: stage {g!r} is not enabled before {stage.name!r} "
                                      f"(enabled before it: {', '.join(done) or 'none'})")
                out.append(g)
            else:
                p = Path(recipe.resolve_path(g))
                if not p.exists():
                    raise RecipeError(f"{where}.input: {g!r} is neither a stage nor an existing folder")
                out.append(str(p))
        return out
    if stage.reads == "shards":
        earlier = [n for n in done if n in stage.after]
        if not earlier:
            raise RecipeError(f"{where}: no input: enable `ingest` (or an earlier curation stage) before it, "
                              "or give `input:`")
        return [earlier[-1]]
    return [n for n in done if n in stage.needs]


def _check_requirements(stage: Stage, own: dict[str, Any], done: list[str], where: str) -> None:
    for r in stage.requires:
        if not set(r.stages) & set(done) and not own.get(r.field):
            raise RecipeError(f"{where}: {r.missing}: enable `{r.stages[0]}` before it or set "
                              f"{where.split(': ', 1)[-1]}.{r.field}")


def _launch(stage: Stage, opts: dict[str, Any], where: str) -> str | None:
    launch = opts.get("launch")
    if launch is None:
        return None
    if stage.launched is None:
        raise RecipeError(f"{where}.launch: only training stages (sft, rl) run through a launcher")
    if OLD_CLI.search(str(launch)):
        raise RecipeError(f"{where}.launch: `-m pipelines.cli` is the old module path; the command line is "
                          f"`-m cotforge.pipelines.cli` now (got {launch!r})")
    return str(launch)


def plan_stage(stage: Stage, recipe: Recipe, done: list[str], hashes: dict[str, str]) -> PlannedStage:
    """One stage: its inputs, checked options, plan-time config and completion hash."""
    opts, where = stage_options(recipe, stage.name)
    inputs = _inputs(stage, opts, done, recipe, where)
    launch = _launch(stage, opts, where)
    own = {k: v for k, v in opts.items() if k not in RUNNER_KEYS}
    if stage.seeded and "seed" in init_fields(stage.config) and "seed" not in own:
        own["seed"] = recipe.seed
    _check_requirements(stage, own, done, where)
    values = {**recipe_defaults(stage, recipe, None), **own}
    cfg = (check if launch else build)(stage.config, values, where, error=RecipeError)
    sections = {s: recipe.section(s) for s in stage.uses}
    h = config_hash(stage.name, own, sections, [hashes.get(i, i) for i in inputs], stage.code_hash())
    return PlannedStage(stage, inputs, own, cfg, h, own.get("seed"), launch, where)


def plan(recipe: Recipe) -> list[PlannedStage]:
    """Validate the recipe against the registry and return the stages in order, with hashes.

    Checks unknown stage names and option keys, option values, source and benchmark paths, benchmark
    names, and that every stage has its input."""
    names = enabled_stages(recipe)
    if not names:
        raise RecipeError(f"{recipe.path}: no stages enabled")
    stages = [get_stage(n) for n in names]
    validate_sources(recipe, stages)
    validate_benchmarks(recipe, stages)
    planned: list[PlannedStage] = []
    hashes: dict[str, str] = {}
    for stage in stages:
        p = plan_stage(stage, recipe, [q.name for q in planned], hashes)
        hashes[p.name] = p.hash
        planned.append(p)
    return planned


def validate_sources(recipe: Recipe, stages: list[Stage]) -> None:
    """Stages reading the recipe's sources have some; every source path exists (or is generated)."""
    for st in stages:
        if st.reads == "sources" and not recipe.sources:
            raise RecipeError(f"{recipe.path}: stages.{st.name} needs `sources:` (a list of {{name, path}})")
    seen: set[str] = set()
    for i, s in enumerate(recipe.sources):
        where = f"{recipe.path}: sources[{i}] ({s.name})"
        if s.name in seen:
            raise RecipeError(f"{where}: duplicate source name {s.name!r}")
        seen.add(s.name)
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


def validate_benchmarks(recipe: Recipe, stages: list[Stage]) -> None:
    """Benchmark names are known to the registry (or a local/generated registry file); the dir exists; a
    stage that takes its benchmarks from `benchmarks.names` has some."""
    b = recipe.benchmarks
    if b.dir:
        _check_path(recipe, b.dir, f"{recipe.path}: benchmarks.dir")
    if b.registry:
        _check_path(recipe, b.registry, f"{recipe.path}: benchmarks.registry")
    if not b.names:
        for st in stages:
            own = recipe.stages.get(st.name) or {}
            for d in st.defaults:
                if (d.section, d.key) == ("benchmarks", "names") and not own.get(d.field):
                    raise RecipeError(f"{recipe.path}: stages.{st.name} needs benchmarks.names")
        return
    from cotforge.curate.core.benchmarks import REGISTRY, load_registry_yaml

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
