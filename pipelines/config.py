"""Recipe schema: a pipeline YAML as dataclasses, with loading, `--set` overrides and validation.

A recipe names its sources, benchmarks, datatrove executor and an ordered `stages:` mapping whose
options are checked against each stage's own config dataclass (see `pipelines.stages.STAGES`), so an
unknown key, a bad path, an unknown benchmark or a stage whose input is missing is a clear error
naming the YAML field before anything runs.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import hashlib
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cotforge.train.overrides import parse_set

GENERATED = "generated:"  # path prefix: a file the recipe's `generate:` step writes into the run dir
# Keys every stage accepts on top of its own config fields: `input` (upstream stage or folder),
# `enabled`, and for train/eval stages `launch` (a command template run instead of in-process, e.g.
# "accelerate launch --config_file X -m cotforge.pipelines.cli train sft --config {config}").
RUNNER_KEYS = ("input", "enabled", "launch")


class RecipeError(ValueError):
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


@dataclass
class BenchmarksConfig:
    """Benchmarks to decontaminate against: registry names plus an optional local benchmark folder."""

    names: list[str] = field(default_factory=list)
    dir: str | None = None  # local folder laid out like ../shared/data/benchmarks (<name>.jsonl ...)
    registry: str | None = None  # YAML of extra benchmark specs (curate.benchmarks.load_registry_yaml)


# The recipe's `executor:` section is the curation executor config itself (options validated by name).
from cotforge.curate.engine import ExecutorConfig as ExecutorSection  # noqa: E402


@dataclass
class Recipe:
    """A whole pipeline: where data comes from and which stages run with which options."""

    name: str
    description: str = ""
    seed: int = 0
    runs_root: str = "runs"
    publish_cards: str | None = None  # copy the dataset card + contamination report here
    torch_threads: int | None = None  # torch CPU threads for model stages (None: torch's default)
    generate: dict[str, Any] | None = None  # `pipelines.demo_data.DemoDataConfig` fields
    sources: list[SourceConfig] = field(default_factory=list)
    benchmarks: BenchmarksConfig = field(default_factory=BenchmarksConfig)
    executor: ExecutorSection = field(default_factory=ExecutorSection)
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)
    base_dir: str = "."  # folder of the recipe file; relative paths resolve against it
    path: str = "<recipe>"  # the recipe file, for messages

    def resolve_path(self, value: str, run_dir: Path | None = None) -> str:
        """A recipe path made absolute: `generated:` lives in RUN/data, hf: stays, else relative to the file."""
        if value.startswith("hf:") or "://" in value:  # Hub ids and fsspec URLs stay as given
            return value
        if value.startswith(GENERATED):
            base = run_dir / "data" if run_dir is not None else Path("<run>/data")
            return str(base / value[len(GENERATED):])
        p = Path(value).expanduser()
        return str(p if p.is_absolute() else (Path(self.base_dir) / p).resolve())

    def to_dict(self) -> dict[str, Any]:
        """The recipe as plain data (what the manifest stores)."""
        d = dataclasses.asdict(self)
        d.pop("profiles")
        return d


# --------------------------------------------------------------------------- loading


def _known(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def unknown_key_error(where: str, key: str, known: list[str] | tuple[str, ...]) -> RecipeError:
    """`where: unknown key 'x' (did you mean 'y'?; known: ...)`."""
    hint = difflib.get_close_matches(key, list(known), n=1)
    did = f"did you mean {hint[0]!r}? " if hint else ""
    return RecipeError(f"{where}: unknown key {key!r} ({did}known: {', '.join(sorted(known))})")


def build_dataclass(cls: type, data: Any, where: str, extra_ok: tuple[str, ...] = ()) -> Any:
    """`cls(**data)` with unknown keys and bad values reported against the YAML field `where`."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise RecipeError(f"{where}: expected a mapping, got {type(data).__name__}")
    known = _known(cls)
    for k in data:
        if k not in known and k not in extra_ok:
            raise unknown_key_error(where, str(k), known + list(extra_ok))
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # unresolvable annotations: skip the type check, the constructor still validates
        hints = {}
    for k, v in data.items():
        if k in hints and not type_matches(v, hints[k]):
            raise RecipeError(f"{where}.{k}: expected {_type_name(hints[k])}, got {type(v).__name__} {v!r}")
    try:
        return cls(**{k: v for k, v in data.items() if k in known})
    except (TypeError, ValueError, AttributeError) as e:
        raise RecipeError(f"{where}: {e}") from e


_SIMPLE = {int: (int,), float: (int, float), str: (str,), bool: (bool,), list: (list,), dict: (dict,),
           tuple: (list, tuple)}


def type_matches(value: Any, tp: Any) -> bool:
    """Loose check of a YAML value against an annotation (containers by kind only; unknown types pass)."""
    if tp is Any:
        return True
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(type_matches(value, a) for a in typing.get_args(tp))
    if value is None:
        return tp is type(None)
    base = origin or tp
    if base in _SIMPLE:
        if isinstance(value, bool) and base in (int, float):
            return False
        return isinstance(value, _SIMPLE[base])
    if dataclasses.is_dataclass(base):
        return isinstance(value, (dict, base))
    return True


def _type_name(tp: Any) -> str:
    return str(tp).replace("typing.", "") if typing.get_origin(tp) else getattr(tp, "__name__", str(tp))


def parse_override(text: str) -> tuple[list[str], Any]:
    """`a.b.c=value` -> (["a", "b", "c"], value parsed as a YAML scalar/list)."""
    try:
        key, value = parse_set(text, empty="")
    except ValueError as e:
        raise RecipeError(f"{e}, e.g. stages.sft.max_steps=2") from e
    return key.split("."), value


def apply_override(data: dict[str, Any], keys: list[str], value: Any) -> None:
    """Set data[k1][k2]...= value, creating mappings on the way; lists index by number."""
    node: Any = data
    for i, k in enumerate(keys[:-1]):
        if isinstance(node, list):
            node = node[_index(node, k, keys[: i + 1])]
            continue
        if node.get(k) is None:
            node[k] = {}
        node = node[k]
        if not isinstance(node, (dict, list)):
            raise RecipeError(f"--set {'.'.join(keys)}: {'.'.join(keys[: i + 1])} is not a mapping")
    last = keys[-1]
    if isinstance(node, list):
        node[_index(node, last, keys)] = value
    else:
        node[last] = value


def _index(node: list, k: str, keys: list[str]) -> int:
    if not k.isdigit() or int(k) >= len(node):
        raise RecipeError(f"--set {'.'.join(keys)}: {k!r} is not an index of a {len(node)}-item list")
    return int(k)


def load_raw(path: str | Path) -> dict[str, Any]:
    """The recipe file as a mapping; a missing file or bad YAML is a RecipeError."""
    p = Path(path)
    if not p.is_file():
        raise RecipeError(f"{p}: recipe file not found")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        raise RecipeError(f"{p}: invalid YAML ({e})") from e
    if not isinstance(data, dict):
        raise RecipeError(f"{p}: a recipe is a YAML mapping, got {type(data).__name__}")
    return data


def load_recipe(path: str | Path, overrides: list[str] | tuple[str, ...] = (), profile: str | None = None) -> Recipe:
    """Load a recipe file, apply a named profile then `--set` overrides, and build the dataclasses."""
    p = Path(path)
    data = load_raw(p)
    profiles = data.get("profiles") or {}
    if profile:
        if profile not in profiles:
            raise RecipeError(f"{p}: no profile {profile!r} (has: {', '.join(sorted(profiles)) or 'none'})")
        for key, value in (profiles[profile] or {}).items():
            apply_override(data, str(key).split("."), copy.deepcopy(value))
    for o in overrides:
        apply_override(data, *parse_override(o))
    return recipe_from_dict(data, base_dir=p.resolve().parent, path=str(p))


def recipe_from_dict(data: dict[str, Any], base_dir: str | Path = ".", path: str = "<recipe>") -> Recipe:
    """Build a Recipe from plain data, checking every section's keys and types."""
    known = _known(Recipe)
    for k in data:
        if k not in known or k in ("base_dir", "path"):
            raise unknown_key_error(path, str(k), [n for n in known if n not in ("base_dir", "path")])
    if not isinstance(data.get("name"), str) or not data["name"].strip():
        raise RecipeError(f"{path}: 'name' is required (a short recipe name used in the run directory)")
    sources = data.get("sources") or []
    if not isinstance(sources, list):
        raise RecipeError(f"{path}: sources: expected a list of {{name, path, domain, mapping}}")
    stages = data.get("stages") or {}
    if not isinstance(stages, dict):
        raise RecipeError(f"{path}: stages: expected a mapping of stage name -> options")
    for name, opts in stages.items():
        if opts is not None and not isinstance(opts, dict):
            raise RecipeError(f"{path}: stages.{name}: expected a mapping of options, got {type(opts).__name__}")
    seed = data.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise RecipeError(f"{path}: seed: expected an integer, got {seed!r}")
    generate = data.get("generate")
    if generate is not None and not isinstance(generate, dict):
        raise RecipeError(f"{path}: generate: expected a mapping of demo-data options")
    return Recipe(
        name=data["name"], description=str(data.get("description") or ""), seed=seed,
        runs_root=str(data.get("runs_root") or "runs"), publish_cards=data.get("publish_cards"),
        torch_threads=_optional_int(data.get("torch_threads"), f"{path}: torch_threads"),
        generate=generate,
        sources=[build_dataclass(SourceConfig, s, f"{path}: sources[{i}]") for i, s in enumerate(sources)],
        benchmarks=build_dataclass(BenchmarksConfig, data.get("benchmarks"), f"{path}: benchmarks"),
        executor=build_dataclass(ExecutorSection, data.get("executor"), f"{path}: executor"),
        stages={str(k): dict(v or {}) for k, v in stages.items()},
        profiles=dict(data.get("profiles") or {}), base_dir=str(base_dir), path=path,
    )


def _optional_int(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RecipeError(f"{where}: expected a positive integer or null, got {value!r}")
    return value


# --------------------------------------------------------------------------- hashing


def config_hash(*parts: Any) -> str:
    """Stable short hash of JSON-able parts (sorted keys); a stage's completion marker stores it."""
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
