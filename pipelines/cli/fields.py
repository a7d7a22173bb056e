"""Command-line flags generated from config dataclasses (the way TRL's parser turns config fields into
flags): one flag per field, its help from `field(metadata={"help": ...})`, its default shown from the field,
so no default is written twice.

Rules, from the field's annotation and metadata:
- `--field-name` (underscores become dashes); `metadata["flag"]` gives other names (a string or a list,
  e.g. "--rows" or ["-n", "--n-samples"]; "--x/--no-x" makes an on/off pair);
- bool fields: `--x` when the default is False, `--no-x` when it is True, `--x/--no-x` when it is None;
- list fields (and `tuple[X, ...]`) are repeatable (`metadata["sep"]` also splits each value, e.g. "a,b");
- dict fields are repeatable KEY=VALUE (`metadata["metavar"]` names them, e.g. SOURCE=WEIGHT);
- nested dataclass fields are flattened into their own fields' flags (`select.policy.hard` -> `--hard`); an
  optional one whose default is set gets `--no-<field>` (e.g. `--no-policy`);
- `metadata["cli"] = False` leaves a field to `--config` / `--set`; `metadata["choices"]` restricts values.

Only the values typed on the command line are collected (`FlagSet.values`), as a nested mapping that goes
through the one config loader with the YAML file and `--set` overrides.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import click
import yaml
from click.core import ParameterSource

from cotforge.curate.core.config import init_fields, nested_dataclass, type_hints

SCALARS = {int: click.INT, float: click.FLOAT, str: click.STRING}


def field_help(cls: type, name: str) -> str:
    """The field's help: its own metadata, else that of the same field in a base class (TRL's fields)."""
    for klass in cls.__mro__:
        f = getattr(klass, "__dataclass_fields__", {}).get(name)
        if f is not None and f.metadata.get("help"):
            return str(f.metadata["help"]).replace("%%", "%")  # TRL's help is written for argparse
    return ""


def cotforge_fields(cls: type) -> list[str]:
    """Fields declared by cotforge's own classes in `cls`'s MRO: all of a plain config, only the added and
    re-defaulted ones of a TRL subclass (CotSFTConfig(SFTConfig)); TRL's own fields are set with --set."""
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        if klass.__module__.startswith("cotforge.") and dataclasses.is_dataclass(klass):
            names += [n for n in getattr(klass, "__annotations__", {}) if n not in names]
    return [n for n in names if n in init_fields(cls)]


def _args(tp: Any) -> list[Any]:
    """Union members of an annotation, None left out."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return [a for a in typing.get_args(tp) if a is not type(None)]
    return [tp]


def _kind(tp: Any) -> tuple[str, Any]:
    """("list"|"dict"|"bool"|"scalar"|"other", item type) of a field annotation. A union of str with other
    scalars (TRL's `resume: str | bool | None`) is "other": a string, or true/false/null parsed as YAML."""
    members = _args(tp)
    origins = [typing.get_origin(a) or a for a in members]
    for a, o in zip(members, origins, strict=True):
        if o is list or (o is tuple and typing.get_args(a)[1:] == (Ellipsis,)):  # list[X] / tuple[X, ...]
            args = typing.get_args(a)
            return "list", args[0] if args else str
        if o is dict:
            args = typing.get_args(a)
            return "dict", args[1] if len(args) == 2 else Any
    if str in origins:
        return ("scalar", str) if len(origins) == 1 else ("other", str)
    if bool in origins:
        return "bool", bool
    for o in origins:
        if o in SCALARS:
            return "scalar", o
    return "other", str


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


@dataclass
class _Flag:
    param: str  # click parameter name
    path: tuple[str, ...]  # where the value goes in the config mapping
    kind: str
    item: Any = str
    sep: str | None = None
    metavar: str = "KEY=VALUE"
    none: bool = False  # `--no-<nested>`: the value is None


@dataclass
class FlagSet:
    """The flags of one config dataclass. `include` limits them to these field names (e.g. the fields a
    TRL subclass declares); `prefix` keeps parameter names apart between flag sets of one command."""

    cls: type
    prefix: str
    include: Iterable[str] | None = None
    exclude: Iterable[str] = ()
    names: dict[str, list[str]] = field(default_factory=dict)  # flag names for fields whose metadata we do
    # not own (inherited TRL fields, e.g. {"output_dir": ["-o", "--output-dir"]})
    flags: list[_Flag] = field(default_factory=list, init=False)
    options: list[click.Option] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self._add(self.cls, (), set(self.include) if self.include is not None else None, set(self.exclude))

    def _add(self, cls: type, path: tuple[str, ...], include: set[str] | None, exclude: set[str]) -> None:
        hints = type_hints(cls)
        for name, f in init_fields(cls).items():
            if (include is not None and name not in include) or name in exclude or f.metadata.get("cli") is False:
                continue
            tp = hints.get(name, str)
            sub = nested_dataclass(tp)
            if sub is not None:
                if _default(f) is not None and type(None) in typing.get_args(tp):
                    what = field_help(cls, name)
                    self._option(_Flag(self._param(path + (name, "none")), path + (name,), "none", none=True),
                                 [f"--no-{name.replace('_', '-')}"],
                                 f"Leave out {name} (set it to null; its options below then cannot be given)"
                                 + (f"; {name}: {what}" if what else "."), is_flag=True)
                self._add(sub, path + (name,), None, set())
                continue
            self._field_option(cls, f, tp, path + (name,))

    def _param(self, path: tuple[str, ...]) -> str:
        return "__".join((self.prefix, *path))

    def _field_option(self, cls: type, f: dataclasses.Field, tp: Any, path: tuple[str, ...]) -> None:
        kind, item = _kind(tp)
        md = f.metadata
        given = self.names.get(f.name) if not path[:-1] else None
        given = given or md.get("flag")
        names = [given] if isinstance(given, str) else list(given or [f"--{f.name.replace('_', '-')}"])
        flag = _Flag(self._param(path), path, kind, item, md.get("sep"), md.get("metavar", "KEY=VALUE"))
        default = _default(f)
        kw: dict[str, Any] = {}
        if kind == "bool":
            if "/" in names[0]:  # an explicit on/off pair
                kw.update(default=None, show_default=str(default).lower())
            elif default is None:
                base = names[0].lstrip("-")
                names = [f"--{base}/--no-{base}"]
                kw.update(default=None)
            else:  # one switch that flips the default
                if given is None and default is True:
                    names = [f"--no-{f.name.replace('_', '-')}"]
                kw.update(is_flag=True, flag_value=not default, default=default)
                if default is True:
                    kw["help_prefix"] = "Turn off (on by default): "
        elif kind == "scalar":
            ptype = click.Choice(list(md["choices"])) if "choices" in md else SCALARS[item]
            kw.update(type=ptype, default=default, show_default=default is not None)
        elif kind == "list":
            kw.update(multiple=True, type=SCALARS.get(item, click.STRING), metavar=md.get("metavar"),
                      show_default=", ".join(map(str, default)) if default else False)
        elif kind == "dict":
            kw.update(multiple=True, metavar=flag.metavar,
                      show_default=", ".join(f"{k}={v}" for k, v in default.items()) if default else False)
        else:
            kw.update(type=click.STRING, default=None, show_default=False if default is None else str(default))
        help_text = field_help(cls, f.name)
        prefix = kw.pop("help_prefix", "")
        if prefix and help_text:
            help_text = prefix + help_text
        self._option(flag, names, help_text, **kw)

    def _option(self, flag: _Flag, names: list[str], help_text: str, **kw: Any) -> None:
        self.flags.append(flag)
        self.options.append(click.Option([flag.param, *names], help=help_text, **kw))

    def values(self, ctx: click.Context) -> dict[str, Any]:
        """The values typed on the command line, as a nested mapping of config fields."""
        out: dict[str, Any] = {}
        for flag in self.flags:
            if ctx.get_parameter_source(flag.param) not in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT):
                continue
            raw = ctx.params[flag.param]
            if flag.kind == "list" and not raw:
                continue
            node = out
            for key in flag.path[:-1]:
                if key in node and node[key] is None:
                    raise click.UsageError(f"--no-{key.replace('_', '-')} cannot be combined with options of {key}")
                node = node.setdefault(key, {})
            node[flag.path[-1]] = self._value(flag, raw)
        return out

    @staticmethod
    def _value(flag: _Flag, raw: Any) -> Any:
        if flag.none:
            return None
        if flag.kind == "list":
            items = [p.strip() for v in raw for p in (v.split(flag.sep) if flag.sep else [v]) if p.strip()] \
                if flag.item is str else list(raw)
            return items
        if flag.kind == "dict":
            return dict(_pair(v, flag) for v in raw)
        if flag.kind == "other" and isinstance(raw, str):
            return yaml.safe_load(raw) if raw.strip().lower() in ("true", "false", "null") else raw
        return raw


def _pair(text: str, flag: _Flag) -> tuple[str, Any]:
    """`KEY=VALUE` of a dict flag, the value parsed for the dict's value type."""
    key, sep, raw = text.rpartition("=")
    hint = f"--{flag.path[-1].replace('_', '-')}"
    if not sep or not key:
        raise click.BadParameter(f"{text!r}: expected {flag.metavar}", param_hint=hint)
    if flag.item is float or flag.item is int:
        try:
            return key, flag.item(raw)
        except ValueError as e:
            raise click.BadParameter(f"{text!r}: expected {flag.metavar} with a number", param_hint=hint) from e
    if flag.item is str:
        return key, raw
    return key, yaml.safe_load(raw) if raw.strip() else ""


def grouped_options(flags: FlagSet, default: str, groups: dict[str, tuple[str, ...]] | None = None,
                    ) -> list[tuple[str, list[click.Option]]]:
    """A flag set's options in `--help` sections: `groups` ({title: field names}, by top-level field; default:
    the config class's `CLI_GROUPS`) first, every other option under `default`."""
    if groups is None:
        groups = getattr(flags.cls, "CLI_GROUPS", {})
    where = {name: title for title, names in groups.items() for name in names}
    out: dict[str, list[click.Option]] = {title: [] for title in groups}
    for flag, option in zip(flags.flags, flags.options, strict=True):
        out.setdefault(where.get(flag.path[0], default), []).append(option)
    return [(title, options) for title, options in out.items() if options]


class GroupedCommand(click.Command):
    """A command whose `--help` lists its options in titled sections (inputs, outputs, executor, ...)."""

    def __init__(self, *args: Any, sections: list[tuple[str, list[click.Parameter]]] = (), **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.sections = list(sections)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        placed: set[int] = set()
        for title, params in [*self.sections, ("Other options", self.get_params(ctx))]:
            rows = []
            for param in params:
                if id(param) in placed:
                    continue
                placed.add(id(param))
                record = param.get_help_record(ctx)
                if record is not None:
                    rows.append(record)
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
