"""The stage registry: every pipeline stage in order, as `Stage` objects (see `spec.py`).

Stage objects live in three modules, loaded by module when a stage of theirs is asked for (and in `curate.py`
each stage's own code only when that stage is): `curate.py`
(data + curation: datatrove, polars), `model.py` (the base model) and `train.py` (SFT, RL, evaluation:
torch and TRL). So planning a curation-only recipe, and every `cotforge curate` command, never imports
torch; `tests/test_pipeline.py` checks that this index and the modules agree.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cotforge.curate.context import StageContext
from cotforge.curate.engine import ExecutorConfig
from cotforge.curate.io.readers import InputSpec
from cotforge.pipelines.stages.spec import LazyStages, Stage

# module -> its stages, in pipeline order
GROUPS: dict[str, tuple[str, ...]] = {
    "cotforge.pipelines.stages.curate": ("data", "ingest", "decontaminate", "dedup", "generate", "verify", "difficulty",
                                         "profile", "select", "mix"),
    "cotforge.pipelines.stages.model": ("model",),
    "cotforge.pipelines.stages.train": ("eval_base", "sft", "rl_data", "rl", "rl_code", "evaluate"),
}
ORDER: tuple[str, ...] = (*GROUPS["cotforge.pipelines.stages.curate"], "model", "eval_base", "sft", "rl_data",
                          "rl", "rl_code", "evaluate")
# stages whose options are a top-level recipe section (and which run when that section is present)
SECTION_STAGES = {"generate": "data"}
MODULE_OF = {name: module for module, names in GROUPS.items() for name in names}


def get_stage(name: str) -> Stage:
    """The Stage object called `name` (imports the module that holds it); KeyError for unknown names."""
    return importlib.import_module(MODULE_OF[name]).STAGES[name]


def group(module: str) -> dict[str, Stage]:
    """All stages of one module, built (e.g. every curation stage)."""
    return dict(importlib.import_module(module).STAGES)


def stage_names(module: str, kind: str | None = None) -> list[str]:
    """The names of one module's stages (of one kind), in order, without building them where the module's
    registry is lazy (`LazyStages`: no stage code imported)."""
    stages = importlib.import_module(module).STAGES
    if kind is None:
        return list(stages)
    kind_of = stages.kind if isinstance(stages, LazyStages) else (lambda name: stages[name].kind)
    return [name for name in stages if kind_of(name) == kind]


def run_stage(name: str, inputs: Iterable[InputSpec | str | Path], out: str | Path, cfg: Any = None,
              executor: ExecutorConfig | None = None, *, generator: Any = None, **ctx: Any) -> dict[str, Any]:
    """Run stage `name` from Python the way the command line does: its only door, `run(cfg, ctx)`, with a
    StageContext holding `inputs` (InputSpecs or paths/URLs), `out` (a folder or URL, kept as given) and the
    executor settings; returns the stage's stats. `generator` is what the injected `make_generator` returns
    (the difficulty stage's reference model); other keywords are StageContext fields (strict, rows_per_shard,
    input_dirs, earlier, make_generator)."""
    stage = get_stage(name)
    specs = [i if isinstance(i, InputSpec) else InputSpec(str(i)) for i in inputs]
    context = StageContext(out_dir=str(out), inputs=specs, executor=executor or ExecutorConfig(), **ctx)
    if generator is not None:
        context.make_generator = lambda model, backend: generator
    return stage.run(cfg if cfg is not None else stage.config(), context)
