"""`cotforge curate ...`: one command per curation stage, generated from its Stage object.

Every command takes the same input flags (INPUTS..., -o/--out, --map, --source-name, --domain, --strict,
--rows-per-shard, and the reader options of `InputSpec`: --preset, --format, --config-name, --split,
--revision, --data-files, --no-streaming), the datatrove executor flags for datatrove-based stages (--executor, --workers, --tasks,
--rows-per-task, --executor-option KEY=VALUE, --keep-work), one flag per field of the stage's config, and
--config YAML / --set KEY=VALUE for any field. All of them go through the one config loader, and the
command calls the same `run(cfg, ctx)` as `cotforge run`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import click

from cotforge.curate.context import StageContext
from cotforge.curate.core.benchmarks import BenchmarkError
from cotforge.curate.core.config import ConfigError, build, load
from cotforge.curate.core.schema import DOMAINS
from cotforge.curate.engine import ExecutorConfig, JobsFailed, JobsPending
from cotforge.curate.io.inputs import resolve_inputs
from cotforge.curate.io.lock import RunLocked
from cotforge.curate.io.readers import InputError, InputSpec
from cotforge.pipelines.cli.fields import FlagSet, GroupedCommand, grouped_options
from cotforge.pipelines.cli.lazy import LazyGroup
from cotforge.pipelines.lineage import LineageError, check_one_run, history, upstream, write_lineage
from cotforge.pipelines.stages import get_stage, stage_names
from cotforge.pipelines.stages.spec import Stage, make_generator

log = logging.getLogger(__name__)


def _pairs(values: tuple[str, ...], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        key, sep, val = v.partition("=")
        if not sep or not key or not val:
            raise click.BadParameter(f"{v!r}: expected KEY=VALUE", param_hint=what)
        out[key] = val
    return out


# the per-input reader options of InputSpec, as flags (their help comes from the InputSpec fields)
READER_FIELDS = ("preset", "format", "config_name", "split", "revision", "data_files", "streaming")


def input_specs(inputs: tuple[str, ...], maps: tuple[str, ...], source_names: tuple[str, ...],
                domain: str | None, reader: dict[str, Any] | None = None) -> list[Any]:
    """Resolve command-line inputs into InputSpecs with the reader options `reader` (raw inputs only: a stage
    folder's shards are already in the schema); a bad path or value is a usage error (exit 2)."""
    names: dict[str, str] = {}
    for v in source_names:
        names.update(_pairs((v,), "--source-name") if "=" in v else {p: v for p in inputs})
    try:
        specs = resolve_inputs(inputs, source_names=names, mapping=_pairs(maps, "--map"), domain=domain)
        if reader:
            specs = [dataclasses.replace(s, **reader) if s.path in inputs else s for s in specs]
    except (InputError, ValueError) as e:
        raise click.UsageError(str(e)) from e
    return specs


INPUT_PARAMS = [
    click.Argument(["inputs"], nargs=-1, required=True),
    click.Option(["out", "-o", "--out"], required=True, metavar="DIR|URL",
                 help="Output folder, local or an fsspec URL such as s3://bucket/run/dedup (gets kept/, removed/, "
                      "stats.json)."),
    click.Option(["maps", "--map"], multiple=True, metavar="FIELD=INPUT_FIELD",
                 help="Field mapping override, e.g. --map prompt=problem (repeatable)."),
    click.Option(["source_names", "--source-name"], multiple=True, metavar="[INPUT=]NAME",
                 help="Source name for an input (INPUT=NAME), or for all inputs (NAME)."),
    click.Option(["domain", "--domain"], type=click.Choice(DOMAINS), default=None,
                 help="Domain for rows whose input has no domain field."),
]
RUN_PARAMS = [
    click.Option(["overwrite", "--overwrite"], is_flag=True,
                 help="Replace a finished stage output (or other files) already in OUT; without it such a folder "
                      "is refused. An interrupted run of the same stage in OUT is resumed either way."),
    click.Option(["allow_empty", "--allow-empty"], is_flag=True,
                 help="Exit 0 when no row was read or none was kept (default: exit 1 naming what was empty)."),
]
CONFIG_PARAMS = [
    click.Option(["config_path", "--config"], type=click.Path(exists=True, dir_okay=False), default=None,
                 help="YAML with the stage's config fields; --set and flags override it."),
    click.Option(["overrides", "--set"], multiple=True, metavar="KEY=VALUE",
                 help="Set any config field (YAML value; dotted keys for nested fields). Repeatable."),
]


def stage_command(stage: Stage) -> click.Command:
    """The `cotforge curate <stage>` command: flags from the stage's config (and the executor's)."""
    context_flags = FlagSet(StageContext, "ctx", include=("strict", "rows_per_shard"))
    reader_flags = FlagSet(InputSpec, "in", include=READER_FIELDS)
    executor_flags = FlagSet(ExecutorConfig, "exec") if stage.datatrove else None
    config_flags = FlagSet(stage.config, "cfg")
    params = [*INPUT_PARAMS, *reader_flags.options, *context_flags.options, *(executor_flags.options if executor_flags else []),
              *config_flags.options, *RUN_PARAMS, *CONFIG_PARAMS]

    def callback(**params: Any) -> None:
        ctx = click.get_current_context()
        specs = input_specs(params["inputs"], params["maps"], params["source_names"], params["domain"],
                            reader_flags.values(ctx))
        try:
            cfg = load(stage.config, params["config_path"], params["overrides"], config_flags.values(ctx),
                       where=params["config_path"] or "command line")
            executor = build(ExecutorConfig, executor_flags.values(ctx) if executor_flags else {}, "executor")
            run_ctx = build(StageContext, {"out_dir": params["out"], **context_flags.values(ctx)}, "command line")
        except ConfigError as e:
            raise click.UsageError(str(e)) from e
        if "://" not in params["out"]:  # a remote OUT: its lock and the publish step guard it
            check_out_dir(Path(params["out"]), stage.name, overwrite=params["overwrite"])
        run_ctx.inputs, run_ctx.input_dirs = specs, list(params["inputs"])
        try:
            if stage.name == "mix":  # the card's history: the run the inputs belong to (or --history, one run)
                run_ctx.earlier = _mix_history(cfg, list(params["inputs"]))
        except LineageError as e:
            raise click.UsageError(str(e)) from e
        run_ctx.executor, run_ctx.make_generator = executor, make_generator
        try:
            stats = stage.run(cfg, run_ctx)
        except (InputError, BenchmarkError, ValueError, JobsPending, JobsFailed, RunLocked) as e:
            raise click.ClickException(str(e)) from e  # Slurm jobs pending/failed, stage folder in use: no traceback
        write_lineage(params["out"], stage.name, list(params["inputs"]))
        click.echo(stage.report(stats, params["out"]) if stage.report else str(stats))
        empty = empty_result(stats)
        if empty and not params["allow_empty"]:
            raise click.ClickException(f"{empty} (see {params['out'].rstrip('/')}/stats.json); pass --allow-empty "
                                       "if that is expected")

    by_name = {p.name: p for p in params}
    sections = [("Inputs", [*INPUT_PARAMS, *reader_flags.options]),
                ("Outputs", [by_name["out"], *RUN_PARAMS, *context_flags.options]),
                ("Executor", executor_flags.options if executor_flags else []),
                *grouped_options(config_flags, "Tuning" if getattr(stage.config, "CLI_GROUPS", None) else "Options"),
                ("Config file and overrides", CONFIG_PARAMS)]
    return GroupedCommand(stage.name, params=params, callback=callback, help=stage.help, sections=sections,
                          context_settings={"max_content_width": 110})


def _mix_history(cfg: Any, inputs: list[str]) -> dict[str, str]:
    """The stage folders whose stats the mix card reports: `--history` as given (checked to be one run), else
    the history of the run the input stage folders belong to (`pipelines.lineage`)."""
    given = list(getattr(cfg, "history", None) or [])
    if given:
        check_one_run([Path(h).resolve() for h in given] + upstream(inputs), "--history")
        return {}
    found = history(inputs)
    if found:
        log.info("mix: the card reports the run's stages %s", ", ".join(found))
    return found


# what a stage leaves in OUT besides its published outputs while it runs (resumable work, partial output, lock)
_IN_PROGRESS = ("_work", ".partial-", ".cotforge.lock")


def check_out_dir(out: Path, stage: str, *, overwrite: bool) -> None:
    """Refuse an OUT that already holds a finished stage output or unrelated files, unless `overwrite`.

    An empty or missing folder is fine, and so is one holding only an interrupted run of the same stage
    (`_work/<stage>`, `.partial-<stage>`): the stage resumes it (its work key decides what is reused)."""
    if not out.exists() or overwrite:
        return
    if not out.is_dir():
        raise click.UsageError(f"-o/--out: {out} is a file, not a folder")
    entries = sorted(p.name for p in out.iterdir())
    stats = out / "stats.json"
    if stats.is_file():
        try:
            done = json.loads(stats.read_text(encoding="utf-8")).get("stage", "?")
        except (OSError, ValueError):
            done = "?"
        raise click.UsageError(f"-o/--out: {out} already holds a finished {done!r} stage output (stats.json, "
                               "kept/, removed/); pass --overwrite to replace it, or choose another folder")
    others = [e for e in entries if not e.startswith(_IN_PROGRESS)]
    interrupted = [e for e in entries if e.startswith(_IN_PROGRESS)]
    other_stage = [w.name for w in (out / "_work").iterdir() if w.name != stage] if (out / "_work").is_dir() else []
    other_stage += [e[len(".partial-"):] for e in interrupted if e.startswith(".partial-") and e != f".partial-{stage}"]
    if others or other_stage:
        what = f"files ({', '.join(others[:5])}{', ...' if len(others) > 5 else ''})" if others else \
            f"an interrupted {other_stage[0]!r} stage"
        raise click.UsageError(f"-o/--out: {out} is not empty: it holds {what}; pass --overwrite to write "
                               "into it anyway, or choose another folder")


def empty_result(stats: dict[str, Any]) -> str | None:
    """Why a finished stage's result is empty ("0 rows read from the inputs", "0 of N rows kept"), or None."""
    rows_in, kept = stats.get("rows_in"), stats.get("kept")
    if not isinstance(rows_in, int) or not isinstance(kept, int):
        return None
    if rows_in == 0:
        return "0 rows read from the inputs"
    if kept == 0:
        removed = stats.get("removed_by_reason") or {}
        why = ", ".join(f"{k} {v}" for k, v in removed.items())
        return f"0 of {rows_in} rows kept ({why})" if why else f"0 of {rows_in} rows kept"
    return None


CURATE_MODULE = "cotforge.pipelines.stages.curate"


class _CurateStages(Mapping[str, Stage]):
    """The curation stages (kind `curate`) by name, each built (its code imported) on first access."""

    def __init__(self) -> None:
        self._names = stage_names(CURATE_MODULE, "curate")

    def __getitem__(self, name: str) -> Stage:
        if name not in self._names:
            raise KeyError(name)
        return get_stage(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


CURATE_STAGES: Mapping[str, Stage] = _CurateStages()


def _command_of(name: str) -> click.Command:
    return stage_command(get_stage(name))


# each stage's command (and the stage's code) is built when that command is used or listed
@click.group(cls=LazyGroup, lazy={name: partial(_command_of, name) for name in CURATE_STAGES})
def curate() -> None:
    """Curation stages. Each reads raw files or an earlier stage's folder and writes
    OUT/kept/*.parquet, OUT/removed/*.parquet (with `reason`) and OUT/stats.json."""




class _Commands(Mapping[str, click.Command]):
    """`cotforge curate`'s stage commands by name, each built on first access."""

    def __getitem__(self, name: str) -> click.Command:
        command = curate.get_command(click.Context(curate), name) if name in curate.lazy else None
        if command is None:
            raise KeyError(name)
        return command

    def __iter__(self) -> Iterator[str]:
        return iter(curate.lazy)

    def __len__(self) -> int:
        return len(curate.lazy)


COMMANDS: Mapping[str, click.Command] = _Commands()
