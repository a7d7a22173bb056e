"""A click group whose subcommands are imported only when used (keeps `--help` and curation fast:
torch and transformers load only for the train commands)."""

from __future__ import annotations

import importlib
import importlib.util

import click


class LazyGroup(click.Group):
    """`lazy={"name": "module.path:attr"}` registers commands without importing their modules."""

    def __init__(self, *args, lazy: dict[str, str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        present = {n for n, target in self.lazy.items() if _module_exists(target.split(":")[0])}
        return sorted(set(super().list_commands(ctx)) | present)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy:
            module, attr = self.lazy[name].split(":")
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)


def _module_exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False
