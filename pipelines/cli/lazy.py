"""A click group whose subcommands are built only when used (keeps `--help` and curation fast: torch and
transformers load only for the train and eval commands)."""

from __future__ import annotations

from collections.abc import Callable

import click


class LazyGroup(click.Group):
    """`lazy={"name": factory}`: each factory returns its command and is called on first use."""

    def __init__(self, *args, lazy: dict[str, Callable[[], click.Command]] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy and name not in self.commands:
            self.add_command(self.lazy[name](), name)
        return super().get_command(ctx, name)
