"""How a pipeline stage is declared: `Stage`, one object per stage, holding its config dataclass, its
`run(cfg, ctx)` (the contract of `cotforge.curate.context`) and what the runner needs to wire it into a
recipe (where its input comes from, which recipe sections feed it, what it writes).

Everything stage-specific is a field here, so the planner and the runner treat every stage the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cotforge.curate.context import StageContext
from cotforge.pipelines.codehash import code_hash


@dataclass(frozen=True)
class Requirement:
    """An input a stage cannot run without: an earlier enabled stage among `stages`, or option `field` set.
    The error is "stages.<name>: <missing>: enable `<stages[0]>` before it or set stages.<name>.<field>"."""

    stages: tuple[str, ...]
    field: str
    missing: str


@dataclass(frozen=True)
class RecipeDefault:
    """Option `field` of the stage defaults to the recipe value at `section.key` (e.g. benchmarks.names);
    `path` values are resolved like recipe paths (relative to the recipe file, `generated:` into the run)."""

    field: str
    section: str
    key: str
    path: bool = False


@dataclass(frozen=True)
class Stage:
    """One pipeline step: its config, its `run(cfg, ctx) -> stats`, and how a recipe wires it."""

    name: str
    kind: str  # data | curate | model | train | eval
    config: type
    run: Callable[[Any, StageContext], dict[str, Any]]
    # what it reads: "shards" (kept/ shards of the nearest earlier stage among `after`), "sources" (the
    # recipe's sources), "folders" (the earlier stages among `needs`, through `fill`) or "none"
    reads: str = "shards"
    after: tuple[str, ...] = ()  # curate: default input = the nearest enabled earlier stage among these
    needs: tuple[str, ...] = ()  # train/eval: inputs = the enabled earlier stages among these
    requires: tuple[Requirement, ...] = ()
    uses: tuple[str, ...] = ()  # recipe sections hashed into the stage ("sources", "benchmarks", "strict")
    defaults: tuple[RecipeDefault, ...] = ()
    fill: Callable[[dict[str, Any], StageContext], dict[str, Any]] | None = None  # options from the run folder
    launched: Callable[[Path], dict[str, Any]] | None = None  # may run through a recipe's `launch:` command
    # (a distributed launcher running `cotforge train ...`); then this reads its stats from the stage folder
    datatrove: bool = False  # runs datatrove steps: takes the executor settings
    seeded: bool = True  # a `seed` field the recipe leaves unset gets the recipe seed
    outputs: str = "kept/, removed/, stats.json"
    report: Callable[[dict[str, Any], str], str] | None = None  # what the CLI prints after a run

    @property
    def code_seeds(self) -> tuple[str, ...]:
        """Modules the code hash starts from: those of `run` and of the config class."""
        return tuple(sorted({self.run.__module__, self.config.__module__}))

    def code_hash(self) -> str:
        """Hash of the source of every cotforge module the stage runs (see pipelines/codehash.py)."""
        return code_hash(self.code_seeds)

    @property
    def help(self) -> str:
        """The first paragraph of the run function's docstring."""
        return (self.run.__doc__ or self.name).strip().split("\n\n")[0]


def make_generator(model: str, backend: str = "auto") -> Any:
    """The generation interface (`cotforge.train.rollout`) for a reference model; what the runner and the
    CLI inject into `StageContext.make_generator` (imported on first use: it loads torch)."""
    from cotforge.train.rollout import make_generator as build

    return build(model, backend=backend)


class LazyStages(Mapping[str, Stage]):
    """A registry module's stages, each built on first access by its factory, which imports that stage's own
    code: running one stage imports no other stage's modules (the verify stage's math-verify and sympy alone
    took ~0.5 s of every dedup or decontamination run). Names and kinds are known without building."""

    def __init__(self, factories: dict[str, tuple[str, Callable[[], Stage]]]):
        self._factories = dict(factories)
        self._built: dict[str, Stage] = {}

    def __getitem__(self, name: str) -> Stage:
        if name not in self._built:
            kind, factory = self._factories[name]
            stage = factory()
            if (stage.name, stage.kind) != (name, kind):
                raise RuntimeError(f"stage registry: {name!r} ({kind}) built {stage.name!r} ({stage.kind})")
            self._built[name] = stage
        return self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._factories)

    def __len__(self) -> int:
        return len(self._factories)

    def kind(self, name: str) -> str:
        """The stage's kind (data | curate | ...), without importing its code."""
        return self._factories[name][0]
