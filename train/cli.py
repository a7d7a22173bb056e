"""`cotforge train ...`: SFT, RL and the tiny offline model used by tests and the demo."""

from __future__ import annotations

import click

from pipelines.lazy import LazyGroup


@click.group(cls=LazyGroup, lazy={
    "sft": "train.sft:sft_command",
    "rl": "train.rl:rl_command",
    "tiny-model": "train.tiny:tiny_model_command",
})
def train() -> None:
    """Training stages: long-CoT SFT and GPPO RL on curated shards."""
