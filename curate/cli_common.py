"""Options every curation command shares, and turning them into InputSpecs."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from cotforge.curate.io.inputs import resolve_inputs
from cotforge.curate.io.readers import InputError, InputSpec
from cotforge.curate.io.writer import DEFAULT_ROWS_PER_SHARD


def _pairs(values: tuple[str, ...], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        key, sep, val = v.partition("=")
        if not sep or not key or not val:
            raise click.BadParameter(f"{v!r}: expected KEY=VALUE", param_hint=what)
        out[key] = val
    return out


def input_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """INPUTS... -o OUT --map --source-name --domain --strict --rows-per-shard."""
    decorators = [
        click.argument("inputs", nargs=-1, required=True),
        click.option("-o", "--out", "out", required=True, type=click.Path(file_okay=False),
                     help="Output folder (gets kept/, removed/, stats.json)."),
        click.option("--map", "maps", multiple=True, metavar="FIELD=INPUT_FIELD",
                     help="Field mapping override, e.g. --map prompt=problem (repeatable)."),
        click.option("--source-name", "source_names", multiple=True, metavar="[INPUT=]NAME",
                     help="Source name for an input (INPUT=NAME), or for all inputs (NAME)."),
        click.option("--domain", type=click.Choice(["math", "code", "science", "other"]), default=None,
                     help="Domain for rows whose input has no domain field."),
        click.option("--strict", is_flag=True, help="Stop at the first malformed row instead of quarantining it."),
        click.option("--rows-per-shard", type=int, default=DEFAULT_ROWS_PER_SHARD, show_default=True),
    ]
    for d in reversed(decorators):
        f = d(f)
    return f


def specs_from_cli(inputs: tuple[str, ...], maps: tuple[str, ...], source_names: tuple[str, ...],
                   domain: str | None) -> list[InputSpec]:
    """Resolve CLI inputs into InputSpecs; a bad path is a clear click error, not a traceback."""
    mapping = _pairs(maps, "--map")
    names: dict[str, str] = {}
    for v in source_names:
        if "=" in v:
            names.update(_pairs((v,), "--source-name"))
        else:
            names.update({p: v for p in inputs})
    try:
        return resolve_inputs(inputs, source_names=names, mapping=mapping, domain=domain)
    except InputError as e:
        raise click.UsageError(str(e)) from e


def fail(e: Exception) -> None:
    """Report an input error to the user and exit 2."""
    click.echo(f"error: {e}", err=True)
    sys.exit(2)
