"""How a pipeline stage is declared (`StageSpec`) and what its adapter gets (`StageContext`), plus the
`module:attr` import/call helpers the registry uses to reach stage code lazily."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cotforge.pipelines.config import Recipe, RecipeError


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
        from cotforge.curate.io.inputs import resolve_inputs
        from cotforge.curate.io.readers import InputSpec

        if not self.inputs:
            return [InputSpec(self.recipe.resolve_path(s.path, self.run_dir), s.name, dict(s.mapping), s.domain,
                              **s.reader_options()) for s in self.recipe.sources]
        return resolve_inputs(self.input_dirs())

    def exec_cfg(self) -> Any:
        from cotforge.curate.engine import ExecutorConfig

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
