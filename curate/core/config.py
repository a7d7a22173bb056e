"""The one loader of cotforge's config dataclasses: YAML files, `--set KEY=VALUE` overrides and plain mappings
(recipe sections, command-line flags) all become a config through `build`.

`build(cls, data, where)` checks every key against the dataclass's init fields (an unknown key is an error
with a did-you-mean hint), recurses into nested dataclass fields (`select.policy`, `recipe.sources[i]`),
checks each value against the field's annotation, then calls `cls(**data)`: the config's own `__post_init__`
validates the values, and any ValueError/TypeError it raises is re-raised as a `ConfigError` naming `where`
(a file and a YAML path such as `demo.yaml: stages.dedup`). It works on TRL/transformers dataclasses
(`CotSFTConfig(SFTConfig)`) too: their annotations are resolved with `typing.get_type_hints`, and two YAML 1.1
surprises are undone by type: `8e-5` (a string to YAML) becomes a float where the field takes floats, and
`no` (False to YAML) becomes the string "no" where the field takes strings but not booleans
(`save_strategy: no`).

It lives in curate, the lowest layer, because train loads its own configs with it (`load_sft_config`) and
pipelines (recipes, the CLI) builds every stage's config with it. Only PyYAML and the standard library.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """A bad config: unknown key, wrong type, bad value or bad override; the message names where."""


# --------------------------------------------------------------------------- --set and dotted keys


def parse_set(text: str, empty: Any = None) -> tuple[str, Any]:
    """`key=value` -> (key, value parsed as YAML: numbers, bools, lists, null); `empty` when the value is
    blank. Raises ConfigError naming the bad item."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {text!r}: expected KEY=VALUE")
    if not raw.strip():
        return key.strip(), empty
    try:
        return key.strip(), yaml.safe_load(raw)
    except yaml.YAMLError as e:
        raise ConfigError(f"--set {text!r}: value is not valid YAML ({e})") from e


def set_dotted(data: dict[str, Any], keys: list[str], value: Any) -> None:
    """data[k1][k2]...= value, creating mappings on the way; a list is indexed by number."""
    node: Any = data
    for i, k in enumerate(keys[:-1]):
        if isinstance(node, list):
            node = node[_index(node, k, keys)]
            continue
        if node.get(k) is None:
            node[k] = {}
        node = node[k]
        if not isinstance(node, (dict, list)):
            raise ConfigError(f"--set {'.'.join(keys)}: {'.'.join(keys[: i + 1])} is not a mapping")
    if isinstance(node, list):
        node[_index(node, keys[-1], keys)] = value
    else:
        node[keys[-1]] = value


def _index(node: list, k: str, keys: list[str]) -> int:
    if not k.isdigit() or int(k) >= len(node):
        raise ConfigError(f"--set {'.'.join(keys)}: {k!r} is not an index of a {len(node)}-item list")
    return int(k)


def apply_sets(data: dict[str, Any], overrides: Iterable[str], empty: Any = None) -> dict[str, Any]:
    """`data` with every `a.b=value` override applied in order (dotted keys go into nested mappings)."""
    for text in overrides:
        key, value = parse_set(text, empty)
        set_dotted(data, key.split("."), value)
    return data


def load_yaml(path: str | Path, what: str = "config") -> dict[str, Any]:
    """A YAML file holding a mapping; a missing file, bad YAML or a non-mapping is a ConfigError."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: {what} file not found")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: invalid YAML ({e})") from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: a {what} is a YAML mapping, got {type(data).__name__}")
    return data


# --------------------------------------------------------------------------- building


def join(where: str, key: str) -> str:
    """`file: a.b` + `c` -> `file: a.b.c`; a bare `file` + `c` -> `file: c`."""
    return f"{where}.{key}" if ": " in where else f"{where}: {key}"


def unknown_key(where: str, key: str, known: Iterable[str], what: str = "key",
                error: type[ConfigError] = ConfigError) -> ConfigError:
    """`where: unknown key 'x' (did you mean 'y'? known: ...)`."""
    known = sorted(known)
    hint = difflib.get_close_matches(key, known, n=1)
    did = f"did you mean {hint[0]!r}? " if hint else ""
    return error(f"{where}: unknown {what} {key!r} ({did}known: {', '.join(known)})")


def init_fields(cls: type) -> dict[str, dataclasses.Field]:
    """The fields a config takes in its constructor (TrainingArguments has non-init ones)."""
    return {f.name: f for f in dataclasses.fields(cls) if f.init}


def type_hints(cls: type) -> dict[str, Any]:
    """Resolved annotations of `cls` ({} when some cannot be resolved: the constructor still validates)."""
    try:
        return typing.get_type_hints(cls)
    except Exception:  # an annotation naming a type that is not importable here
        return {}


def build(cls: type, data: Mapping[str, Any] | None, where: str = "config", *, what: str = "key",
          hidden: Iterable[str] = (), error: type[ConfigError] = ConfigError) -> Any:
    """`cls(**data)` with unknown keys, wrong types and bad values reported against `where`.

    `hidden` names init fields that a caller sets itself and YAML may not give (e.g. a recipe's base_dir)."""
    if isinstance(data, cls):
        return data
    values = check(cls, data, where, what=what, hidden=hidden, error=error)
    fields = init_fields(cls)
    try:
        return cls(**values)
    except (TypeError, ValueError, AttributeError) as e:
        raise error(_located(where, str(e), fields)) from e


def check(cls: type, data: Mapping[str, Any] | None, where: str = "config", *, what: str = "key",
          hidden: Iterable[str] = (), error: type[ConfigError] = ConfigError) -> dict[str, Any]:
    """The keys and value types of `data` checked against `cls` (nested dataclasses built) without
    constructing `cls`: for configs that another process builds, e.g. a trainer started by `launch:` on a
    GPU node, whose own checks (bf16 needs a GPU) would fail here."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise error(f"{where}: expected a mapping, got {type(data).__name__}")
    fields = init_fields(cls)
    hidden = set(hidden)
    for k in data:
        if k not in fields or k in hidden:
            raise unknown_key(where, str(k), [n for n in fields if n not in hidden], what, error)
    hints = type_hints(cls)
    return {k: _value(v, hints.get(k, Any), join(where, k), error) for k, v in data.items()}


def _located(where: str, msg: str, fields: Mapping[str, Any]) -> str:
    """A config's own message under `where`; "field: ..." messages become `where.field: ...`."""
    head = msg.split(":", 1)[0]
    if head in fields:
        return f"{join(where, head)}:{msg.split(':', 1)[1]}"
    return f"{where}: {msg}"


def _value(v: Any, tp: Any, where: str, error: type[ConfigError]) -> Any:
    """One value: nested dataclasses built, YAML 1.1 surprises undone, then the type checked."""
    sub = nested_dataclass(tp)
    if sub is not None and isinstance(v, Mapping):
        return build(sub, v, where, error=error)
    item = list_item_dataclass(tp)
    if item is not None and isinstance(v, list):
        return [build(item, x, f"{where}[{i}]", error=error) if isinstance(x, Mapping) else x
                for i, x in enumerate(v)]
    v = coerce(v, tp)
    if not type_matches(v, tp):
        raise error(f"{where}: expected {type_name(tp)}, got {_describe(v)}")
    return v


_EXP_FLOAT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+$")


def coerce(v: Any, tp: Any) -> Any:
    """Undo YAML 1.1 surprises by the field's type: `8e-5` -> 8e-05 for floats, `no` -> "no" for strings;
    values of a dict field get the same treatment against the dict's value type."""
    if isinstance(v, dict):
        vt = _dict_value_type(tp)
        return {k: coerce(x, vt) for k, x in v.items()}
    if isinstance(v, str) and _EXP_FLOAT.match(v.strip()) and _accepts(tp, float):
        return float(v)
    if isinstance(v, bool) and tp is not Any and not _accepts(tp, bool) and _accepts(tp, str):
        return "yes" if v else "no"
    return v


def _dict_value_type(tp: Any) -> Any:
    for t in _union_args(tp):
        if typing.get_origin(t) is dict and len(typing.get_args(t)) == 2:
            return typing.get_args(t)[1]
    return Any


def _union_args(tp: Any) -> tuple[Any, ...]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return typing.get_args(tp)
    return (tp,)


def _accepts(tp: Any, kind: type) -> bool:
    """True when the annotation admits values of `kind` (Any admits everything)."""
    return any(t is Any or (typing.get_origin(t) or t) is kind for t in _union_args(tp))


def nested_dataclass(tp: Any) -> type | None:
    """The dataclass a field holds (`PolicyConfig | None` -> PolicyConfig), else None."""
    for t in _union_args(tp):
        if dataclasses.is_dataclass(t) and isinstance(t, type):
            return t
    return None


def list_item_dataclass(tp: Any) -> type | None:
    """The dataclass of a `list[SomeConfig]` field, else None."""
    for t in _union_args(tp):
        if typing.get_origin(t) is list and typing.get_args(t):
            item = typing.get_args(t)[0]
            if dataclasses.is_dataclass(item) and isinstance(item, type):
                return item
    return None


_SIMPLE: dict[Any, tuple[type, ...]] = {int: (int,), float: (int, float), str: (str,), bool: (bool,),
                                         list: (list,), dict: (dict,), tuple: (list, tuple)}
_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false", list: "a list",
          dict: "a mapping", tuple: "a list", type(None): "null"}


def type_matches(value: Any, tp: Any) -> bool:
    """Check a YAML value against an annotation: unions, Literal, simple types, list items of simple
    types; other containers by kind; types this check does not know (enums, TRL's own) pass."""
    if tp is Any:
        return True
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(type_matches(value, a) for a in typing.get_args(tp))
    if origin is typing.Literal:
        return value in typing.get_args(tp)
    if value is None:
        return tp is type(None)
    base = origin or tp
    if base in _SIMPLE:
        if isinstance(value, bool) and base in (int, float):
            return False
        if not isinstance(value, _SIMPLE[base]):
            return False
        args = typing.get_args(tp)
        if base is list and args and args[0] in _SIMPLE:
            return all(type_matches(x, args[0]) for x in value)
        return True
    if dataclasses.is_dataclass(base):
        return isinstance(value, (dict, base))
    return True


def type_name(tp: Any) -> str:
    """`int | None` -> "an integer or null" (for messages)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return " or ".join(dict.fromkeys(type_name(a) for a in typing.get_args(tp)))
    if typing.get_origin(tp) is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    base = typing.get_origin(tp) or tp
    if base in _NAMES:
        return _NAMES[base]
    return getattr(tp, "__name__", str(tp))


def _describe(v: Any) -> str:
    return f"{type(v).__name__} {v!r}" if not isinstance(v, str) else repr(v)


def load(cls: type, path: str | Path | None = None, overrides: Iterable[str] = (),
         values: Mapping[str, Any] | None = None, *, base: Mapping[str, Any] | None = None,
         section: str | None = None, where: str | None = None, what: str = "key",
         error: type[ConfigError] = ConfigError) -> Any:
    """A config from (lowest to highest precedence) `base`, a YAML file, `--set` overrides and `values`
    (e.g. the flags typed on the command line). A YAML file may hold the fields under `section:`."""
    data: dict[str, Any] = dict(base or {})
    origin = where or (str(path) if path else "config")
    if path:
        try:
            loaded = load_yaml(path)
        except ConfigError as e:
            raise error(str(e)) from e
        if section and isinstance(loaded.get(section), dict):
            loaded = loaded[section]
        data.update(loaded)
    try:
        apply_sets(data, overrides)
    except ConfigError as e:
        raise error(str(e)) from e
    data.update(values or {})
    try:
        return build(cls, data, origin, what=what, error=error)
    except ConfigError as e:
        raise error(blame_sets(str(e), origin, overrides)) from e


def blame_sets(message: str, where: str, overrides: Iterable[str]) -> str:
    """`message` (an error located at `where: key...`) blamed on the `--set KEY=VALUE` that gave the key,
    when one did: the file or recipe named in `where` did not hold it."""
    for text in overrides:
        key = text.partition("=")[0].strip()
        parent, _, last = key.rpartition(".")
        at = join(where, parent) if parent else where
        unknown = message.startswith(f"{at}: unknown ") and f" {last!r} (" in message
        if unknown or message.startswith(f"{join(where, key)}:") or message.startswith(f"{join(where, key)}["):
            return f"--set {text}: {message[len(where) + 2:] if message.startswith(where + ': ') else message}"
    return message
