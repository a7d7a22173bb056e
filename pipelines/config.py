"""Recipe schema: a pipeline YAML as dataclasses, built by the one config loader (`cotforge.curate.core.config`),
with named profiles, `--set` overrides and the recipes shipped in the package.

A recipe names its sources, benchmarks, datatrove executor and a `stages:` mapping whose options are
checked against each stage's own config dataclass at plan time (`pipelines/planning.py`), so an unknown
key, a bad value, a bad path, an unknown benchmark or a stage whose input is missing is a clear error
naming the YAML field before anything runs. A recipe is a file path or the name of a packaged recipe
(`cotforge recipes` lists them: `cotforge run demo`).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cotforge.curate.core.config import ConfigError, blame_sets, build, load_yaml, parse_set, set_dotted
from cotforge.curate.core.schema import DOMAINS
from cotforge.curate.engine import ExecutorConfig

GENERATED = "generated:"  # path prefix: a file the recipe's `generate:` step writes into the run dir
# Keys every stage accepts on top of its own config fields: `input` (upstream stage or folder),
# `enabled`, and for train stages `launch` (a command template run instead of in-process, e.g.
# "accelerate launch --config_file X -m cotforge.pipelines.cli train sft --config {config}").
RUNNER_KEYS = ("input", "enabled", "launch")
RECIPES_DIR = Path(__file__).resolve().parent  # the packaged recipes (pipelines/*.yaml)


class RecipeError(ConfigError):
    """A recipe problem; the message names the file and the YAML field."""


@dataclass
class SourceConfig:
    """One raw input: a path (relative to the recipe file), an fsspec URL (`s3://b/p/*.jsonl.gz`, globs),
    `generated:<file>` or `hf:org/name[:split]`, with the reader options of `curate.io.spec.InputSpec`."""

    name: str
    path: str
    domain: str | None = None
    mapping: dict[str, str] = field(default_factory=dict)
    preset: str | None = None  # source preset (curate/io/presets.py); None: detected from the columns
    format: str = "auto"
    config_name: str | None = None  # Hub dataset config
    split: str | None = None
    revision: str | None = None
    data_files: str | list[str] | None = None
    streaming: bool = True

    def reader_options(self) -> dict[str, Any]:
        """The InputSpec fields this source sets beyond path/name/mapping/domain."""
        return {k: getattr(self, k) for k in ("preset", "format", "config_name", "split", "revision", "data_files",
                                              "streaming")}

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ValueError("name: a source needs a non-empty name")
        if self.domain is not None and self.domain not in DOMAINS:
            raise ValueError(f"domain: {self.domain!r} is not one of {', '.join(DOMAINS)}")


@dataclass
class BenchmarksConfig:
    """Benchmarks to decontaminate against: registry names plus an optional local benchmark folder."""

    names: list[str] = field(default_factory=list)
    dir: str | None = None  # local folder laid out like ../shared/data/benchmarks (<name>.jsonl ...)
    registry: str | None = None  # YAML of extra benchmark specs (curate.core.benchmarks.load_registry_yaml)

    def __post_init__(self) -> None:
        if len(set(self.names)) != len(self.names) or not all(n.strip() for n in self.names):
            raise ValueError(f"names: expected distinct, non-empty benchmark names, got {self.names}")


@dataclass
class Recipe:
    """A whole pipeline: where data comes from and which stages run with which options."""

    name: str = ""
    description: str | None = ""
    seed: int = 0
    runs_root: str = "runs"
    torch_threads: int | None = None  # torch CPU threads for model stages (None: torch's default)
    strict: bool = False  # stop at the first malformed input row instead of quarantining it
    generate: dict[str, Any] | None = None  # `pipelines.demo_data.DemoDataConfig` fields
    sources: list[SourceConfig] = field(default_factory=list)
    benchmarks: BenchmarksConfig = field(default_factory=BenchmarksConfig)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    stages: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    profiles: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    base_dir: str = "."  # folder of the recipe file; relative paths resolve against it
    path: str = "<recipe>"  # the recipe file, for messages

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("'name' is required (a short recipe name used in the run directory)")
        self.description = self.description or ""
        if self.torch_threads is not None and self.torch_threads < 1:
            raise ValueError(f"torch_threads: expected a positive integer or null, got {self.torch_threads}")
        for name, opts in self.stages.items():
            if opts is not None and not isinstance(opts, dict):
                raise ValueError(f"stages: {name}: expected a mapping of options, got {type(opts).__name__}")
        self.stages = {str(k): dict(v or {}) for k, v in self.stages.items()}
        self.base_dir = str(self.base_dir)

    def resolve_path(self, value: str, run_dir: Path | None = None) -> str:
        """A recipe path made absolute: `generated:` lives in RUN/data, hf: stays, else relative to the file."""
        if value.startswith("hf:") or "://" in value:  # Hub ids and fsspec URLs stay as given
            return value
        if value.startswith(GENERATED):
            base = run_dir / "data" if run_dir is not None else Path("<run>/data")
            return str(base / value[len(GENERATED):])
        p = Path(value).expanduser()
        return str(p if p.is_absolute() else (Path(self.base_dir) / p).resolve())

    def section(self, name: str) -> Any:
        """A top-level section as plain data (what a stage's hash records for the sections it `uses`)."""
        value = getattr(self, name)
        if isinstance(value, list):
            return [dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v for v in value]
        return dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value

    def to_dict(self) -> dict[str, Any]:
        """The recipe as plain data (what the manifest stores)."""
        d = dataclasses.asdict(self)
        d.pop("profiles")
        return d


# --------------------------------------------------------------------------- loading


def packaged_recipes() -> dict[str, Path]:
    """The recipes shipped in the package (pipelines/*.yaml with `stages:`), by name."""
    out: dict[str, Path] = {}
    for p in sorted(RECIPES_DIR.glob("*.yaml")):
        try:
            data = load_yaml(p)
        except ConfigError:
            continue
        if "stages" in data:
            out[p.stem] = p
    return out


def find_recipe(recipe: str | Path) -> Path:
    """A recipe file: the path when it exists, else the packaged recipe of that name (`demo`, `demo.yaml`)."""
    p = Path(recipe)
    if p.is_file():
        return p
    shipped = packaged_recipes()
    name = p.name[:-5] if p.name.endswith(".yaml") else p.name
    if p.parent == Path(".") and name in shipped:
        return shipped[name]
    raise RecipeError(f"{p}: recipe file not found (packaged recipes: {', '.join(shipped) or 'none'})")


def parse_override(text: str) -> tuple[list[str], Any]:
    """`a.b.c=value` -> (["a", "b", "c"], value parsed as a YAML scalar/list)."""
    try:
        key, value = parse_set(text, empty="")
    except ConfigError as e:
        raise RecipeError(f"{e}, e.g. stages.sft.max_steps=2") from e
    return key.split("."), value


def load_raw(path: str | Path) -> dict[str, Any]:
    """The recipe file as a mapping; a missing file or bad YAML is a RecipeError."""
    try:
        return load_yaml(path, what="recipe")
    except ConfigError as e:
        raise RecipeError(str(e)) from e


def load_recipe(recipe: str | Path, overrides: list[str] | tuple[str, ...] = (), profile: str | None = None) -> Recipe:
    """Load a recipe (a file or a packaged recipe's name), apply a named profile then `--set` overrides,
    and build the dataclasses."""
    p = find_recipe(recipe)
    data = load_raw(p)
    profiles = data.get("profiles") or {}
    if profile:
        if profile not in profiles:
            raise RecipeError(f"{p}: no profile {profile!r} (has: {', '.join(sorted(profiles)) or 'none'})")
        for key, value in (profiles[profile] or {}).items():
            _set(data, str(key).split("."), copy.deepcopy(value))
    for o in overrides:
        _set(data, *parse_override(o))
    try:
        return recipe_from_dict(data, base_dir=p.resolve().parent, path=str(p))
    except RecipeError as e:
        raise RecipeError(blame_sets(str(e), str(p), overrides)) from e


def _set(data: dict[str, Any], keys: list[str], value: Any) -> None:
    try:
        set_dotted(data, keys, value)
    except ConfigError as e:
        raise RecipeError(str(e)) from e


def recipe_from_dict(data: dict[str, Any], base_dir: str | Path = ".", path: str = "<recipe>") -> Recipe:
    """Build a Recipe from plain data, checking every section's keys and types."""
    if "publish_cards" in data:
        raise RecipeError(f"{path}: publish_cards: a recipe no longer publishes cards by itself (a run writes "
                          "only under its run folder); use `cotforge run RECIPE --publish-cards DIR`")
    for k in ("base_dir", "path"):
        if k in data:
            raise RecipeError(f"{path}: {k!r} is set by the loader, not by the recipe")
    return build(Recipe, {**data, "base_dir": str(base_dir), "path": path}, path, error=RecipeError)


# --------------------------------------------------------------------------- hashing


def config_hash(*parts: Any) -> str:
    """Stable short hash of JSON-able parts (sorted keys); a stage's completion marker stores it."""
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
