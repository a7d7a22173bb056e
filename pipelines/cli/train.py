"""`cotforge train ...`: SFT, RL and the tiny offline model used by tests and the demo."""

from __future__ import annotations

import click

from cotforge.pipelines.cli.lazy import LazyGroup


@click.group(cls=LazyGroup, lazy={
    "sft": "cotforge.train.sft:sft_command",
    "rl": "cotforge.train.rl.trainer:rl_command",
    "tiny-model": "cotforge.train.tiny:tiny_model_command",
})
def train() -> None:
    """Training stages: long-CoT SFT and GPPO RL on curated shards."""
