"""`cotforge train ...`: SFT, RL and the tiny offline model, with flags generated from their configs.

`sft` and `rl` take `--config YAML`, `--set KEY=VALUE` (any field, TRL's included) and one flag per field
cotforge declares (`cotforge_fields`); all go through the one config loader. Each command is built on
first use (building it imports torch and TRL).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from cotforge.curate.core.config import ConfigError, build, load
from cotforge.pipelines.cli.fields import FlagSet, cotforge_fields
from cotforge.pipelines.cli.lazy import LazyGroup

CONFIG = click.Option(["config_path", "-c", "--config"], type=click.Path(exists=True, dir_okay=False), default=None,
                      help="YAML config (the config's fields); --set and flags override it.")
SETS = click.Option(["overrides", "--set"], multiple=True, metavar="KEY=VALUE",
                    help="Set any config field, TRL's included (YAML value; dotted keys go into dicts). Repeatable.")


def sft_command() -> click.Command:
    """`cotforge train sft`: TRL SFTTrainer on curated long-CoT shards (works under `accelerate launch`)."""
    from cotforge.train.sft.data import SFTDataError
    from cotforge.train.sft.trainer import CotSFTConfig, SFTConfigError, load_sft_config, run_sft

    flags = FlagSet(CotSFTConfig, "cfg", include=[*cotforge_fields(CotSFTConfig), "output_dir"],
                    names={"output_dir": ["-o", "--output-dir"]})
    dry = click.Option(["dry_run", "--dry-run"], is_flag=True, help="Validate and print the resolved config.")

    def callback(config_path: str | None, overrides: tuple[str, ...], dry_run: bool, **_: Any) -> None:
        try:
            cfg = load_sft_config(config_path, overrides, **flags.values(click.get_current_context()))
        except SFTConfigError as e:
            raise click.UsageError(str(e)) from e
        if dry_run:
            click.echo(cfg.to_json_string())
            return
        try:
            result = run_sft(cfg)
        except (SFTConfigError, SFTDataError) as e:
            raise click.ClickException(str(e)) from e
        click.echo(json.dumps({"output_dir": result.output_dir, "global_step": result.global_step,
                               "train_loss": result.train_loss, "packed": result.packed,
                               "rows": result.data.get("rows_kept")}))

    return click.Command("sft", params=[CONFIG, SETS, *flags.options, dry], callback=callback,
                         help="Supervised fine-tuning on curated long-CoT shards (TRL SFTTrainer; works under "
                              "`accelerate launch`).")


def rl_command() -> click.Command:
    """`cotforge train rl`: GPPO / PPO-clip / CISPO / GSPO on verl-style prompt shards."""
    from cotforge.train.rl.config import GPPOConfig
    from cotforge.train.rl.trainer import run_rl

    flags = FlagSet(GPPOConfig, "cfg", include=[*cotforge_fields(GPPOConfig), "max_steps", "resume_from_checkpoint"],
                    names={"train_files": ["--data"], "output_dir": ["-o", "--out"],
                           "resume_from_checkpoint": ["--resume"]})

    def callback(config_path: str | None, overrides: tuple[str, ...], **_: Any) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        try:
            cfg = load(GPPOConfig, config_path, overrides, flags.values(click.get_current_context()),
                       what="RL config key")
        except ConfigError as e:
            raise click.UsageError(str(e)) from e
        trainer = run_rl(cfg)
        click.echo(f"done: {trainer.state.global_step} steps; model in {Path(cfg.output_dir) / 'final'}; "
                   f"logs in {Path(cfg.output_dir) / 'log.csv'}")

    return click.Command("rl", params=[CONFIG, SETS, *flags.options], callback=callback,
                         help="GPPO / PPO-clip / CISPO / GSPO RL on verl-style prompt shards, from an SFT checkpoint.")


def tiny_model_command() -> click.Command:
    """`cotforge train tiny-model`: the offline tiny Qwen2 the tests and the demo use."""
    from cotforge.pipelines.stages.model import ModelConfig

    flags = FlagSet(ModelConfig, "cfg", include=("hidden_size", "layers", "vocab_size", "max_positions", "seed"))
    out = click.Option(["out", "-o", "--out"], required=True, type=click.Path(file_okay=False), help="Output folder.")

    def callback(out: str, **_: Any) -> None:
        from cotforge.train.tiny import build_tiny_model

        try:
            cfg = build(ModelConfig, {"kind": "tiny", **flags.values(click.get_current_context())}, "command line")
        except ConfigError as e:
            raise click.UsageError(str(e)) from e
        click.echo(str(build_tiny_model(out, vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size,
                                        layers=cfg.layers, max_positions=cfg.max_positions, seed=cfg.seed)))

    return click.Command("tiny-model", params=[out, *flags.options], callback=callback,
                         help="Build a tiny random Qwen2 model with a locally trained tokenizer (offline).")


@click.group(cls=LazyGroup, lazy={"sft": sft_command, "rl": rl_command, "tiny-model": tiny_model_command})
def train() -> None:
    """Training stages: long-CoT SFT and GPPO RL on curated shards."""
