"""`--set KEY=VALUE` overrides, parsed the same way by `cotforge train sft|rl` and `cotforge run`."""

from __future__ import annotations

from typing import Any

import yaml


def parse_set(text: str, empty: Any = None) -> tuple[str, Any]:
    """`key=value` -> (key, value parsed as YAML: numbers, bools, lists, null); `empty` when the value is
    blank. Raises ValueError naming the bad item."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--set {text!r}: expected KEY=VALUE")
    if not raw.strip():
        return key.strip(), empty
    try:
        return key.strip(), yaml.safe_load(raw)
    except yaml.YAMLError as e:
        raise ValueError(f"--set {text!r}: value is not valid YAML ({e})") from e
