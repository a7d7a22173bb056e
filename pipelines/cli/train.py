"""`cotforge train ...`: SFT, RL and the tiny offline model, with flags generated from their configs.

`sft` and `rl` take `--config YAML`, `--set KEY=VALUE` (any field, TRL's included) and one flag per field
cotforge declares (`cotforge_fields`); all go through the one config loader. Each command is built on
first use (building it imports torch and TRL).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from cotforge.curate.core.config import ConfigError, build, load
from cotforge.pipelines.cli.fields import FlagSet, GroupedCommand, cotforge_fields, grouped_options
from cotforge.pipelines.cli.lazy import LazyGroup

log = logging.getLogger(__name__)

CONFIG = click.Option(["config_path", "-c", "--config"], type=click.Path(exists=True, dir_okay=False), default=None,
                      help="YAML config (the config's fields); --set and flags override it.")
SETS = click.Option(["overrides", "--set"], multiple=True, metavar="KEY=VALUE",
                    help="Set any config field, TRL's included (YAML value; dotted keys go into dicts). Repeatable.")


DRY_RUN = click.Option(["dry_run", "--dry-run"], is_flag=True,
                       help="Check the config and the inputs (data paths, the model's config.json, attention on this "
                            "machine, lengths) without loading weights; print the resolved config.")
# one naming scheme for both commands: every flag is its YAML key with dashes; --data and --out are the
# short aliases both accept for the data and the output folder
OUTPUT_NAMES = ["-o", "--output-dir", "--out"]
RL_TRL_FLAGS = ("learning_rate", "num_generations", "epsilon", "temperature", "max_steps", "resume_from_checkpoint",
                "max_completion_length")
# `--help` sections of the two commands (by YAML key; a key not listed is shown under "Other options")
SFT_HELP_GROUPS = {
    "Data": ("data", "eval_data", "max_length", "packing", "packing_fallback", "mask_mode", "overlong",
             "system_prompt", "reasoning_markers", "chat_template_kwargs", "repair_rows", "strict"),
    "Model": ("model", "tokenizer", "attn_implementation", "dtype", "bf16", "activation_checkpointing"),
    "Optimisation": ("learning_rate", "lr_scheduler_type", "lr_scheduler_kwargs", "num_train_epochs",
                     "per_device_train_batch_size"),
    "Output and logging": ("output_dir", "resume", "log_curves", "logging_steps", "save_total_limit"),
}
RL_HELP_GROUPS = {
    "Data and reward": ("train_files", "limit", "abilities", "reward", "max_prompt_length"),
    "Model": ("model", "bf16", "activation_checkpointing"),
    "Loss (GPPO and its baselines)": ("loss_type", "epsilon", "epsilon_high", "delta", "gppo_beta1", "gppo_beta2",
                                      "loss_agg_mode", "sft_alpha", "advantage_eps"),
    "Rollouts and batches": ("num_generations", "temperature", "max_completion_length", "rollout_prompts",
                             "mini_batch_prompts", "on_policy", "oversample", "group_balance", "minibatch_rule",
                             "filter_groups", "filter_groups_metric", "overlong_filter",
                             "vllm_importance_sampling_mode", "vllm_importance_sampling_clip_max"),
    "Optimisation": ("learning_rate", "weight_decay", "warmup_steps", "warmup_rollouts", "lr_scheduler_type",
                     "num_train_epochs", "max_steps", "seed"),
    "Output and logging": ("output_dir", "resume_from_checkpoint", "logging_steps", "save_steps",
                           "save_total_limit", "report_to", "disable_tqdm"),
}
REFERENCES = "[P] cites the Klear-Reasoner paper (arXiv 2508.07629), [R] its official training scripts."
# user mistakes a training command reports in one line (the traceback is logged at debug level, -v)
USER_ERRORS = (ConfigError, ValueError, FileNotFoundError, NotADirectoryError, PermissionError)


def _fail(e: BaseException) -> click.ClickException:
    """A one-line error for a user mistake (traceback with -v)."""
    log.debug("training command failed", exc_info=e)
    text = str(e).strip() or type(e).__name__
    return click.ClickException(text)


def _echo_dry_run(cfg: Any, checks: dict[str, Any]) -> None:
    click.echo(cfg.to_json_string())
    click.echo("checks passed: " + json.dumps(checks, default=str), err=True)


def _train_or_check(load_cfg: Callable[[], Any], preflight: Callable[[Any], dict[str, Any]],
                    train_fn: Callable[[Any], Any], dry_run: bool) -> tuple[Any, Any] | None:
    """Load the config, then either print the dry run's checks (None) or train and return (cfg, result).

    A config mistake is a usage error; a data or path mistake is a one-line error, never a traceback."""
    from cotforge.train.distributed import finish_distributed

    try:
        cfg = load_cfg()
    except ConfigError as e:
        raise click.UsageError(str(e)) from e
    try:
        if dry_run:
            _echo_dry_run(cfg, preflight(cfg))
            return None
        result = train_fn(cfg)
        finish_distributed()
    except USER_ERRORS as e:
        raise _fail(e) from e
    return cfg, result


def sft_command() -> click.Command:
    """`cotforge train sft`: TRL SFTTrainer on curated long-CoT shards (works under `accelerate launch`)."""
    from cotforge.train.sft.trainer import CotSFTConfig, load_sft_config, preflight, run_sft

    flags = FlagSet(CotSFTConfig, "cfg", include=[*cotforge_fields(CotSFTConfig), "output_dir"],
                    exclude=("gradient_checkpointing",),
                    names={"output_dir": OUTPUT_NAMES, "data": ["--data"]})

    def callback(config_path: str | None, overrides: tuple[str, ...], dry_run: bool, **_: Any) -> None:
        done = _train_or_check(
            lambda: load_sft_config(config_path, overrides, **flags.values(click.get_current_context())),
            preflight, run_sft, dry_run)
        if done is None:
            return
        result = done[1]
        click.echo(json.dumps({"output_dir": result.output_dir, "global_step": result.global_step,
                               "train_loss": result.train_loss, "packed": result.packed,
                               "rows": result.data.get("rows_kept")}))

    return GroupedCommand("sft", params=[CONFIG, SETS, *flags.options, DRY_RUN], callback=callback,
                         sections=[("Config", [CONFIG, SETS, DRY_RUN]),
                                   *grouped_options(flags, "Other options", SFT_HELP_GROUPS)],
                         context_settings={"max_content_width": 110},
                         help="Supervised fine-tuning on curated long-CoT shards (TRL SFTTrainer; works under "
                              "`accelerate launch`). Flags are the YAML keys of train/sft.py's CotSFTConfig; any "
                              "other TRL field goes through --set.")


def rl_command() -> click.Command:
    """`cotforge train rl`: GPPO / PPO-clip / CISPO / GSPO on verl-style prompt shards."""
    from cotforge.train.rl.config import GPPOConfig
    from cotforge.train.rl.trainer import preflight, run_rl

    flags = FlagSet(GPPOConfig, "cfg", include=[*cotforge_fields(GPPOConfig), *RL_TRL_FLAGS],
                    exclude=("gradient_checkpointing",),
                    names={"train_files": ["--train-files", "--data"], "output_dir": OUTPUT_NAMES,
                           "resume_from_checkpoint": ["--resume-from-checkpoint", "--resume"]})

    def callback(config_path: str | None, overrides: tuple[str, ...], dry_run: bool, **_: Any) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        done = _train_or_check(
            lambda: load(GPPOConfig, config_path, overrides, flags.values(click.get_current_context()),
                         what="RL config key"),
            preflight, run_rl, dry_run)
        if done is None:
            return
        cfg, trainer = done
        click.echo(f"done: {trainer.state.global_step} steps; model in {Path(cfg.output_dir) / 'final'}; "
                   f"logs in {Path(cfg.output_dir) / 'log.csv'}")

    return GroupedCommand("rl", params=[CONFIG, SETS, *flags.options, DRY_RUN], callback=callback,
                         sections=[("Config", [CONFIG, SETS, DRY_RUN]),
                                   *grouped_options(flags, "Other options", RL_HELP_GROUPS)],
                         context_settings={"max_content_width": 110},
                         help="GPPO / PPO-clip / CISPO / GSPO RL on verl-style prompt shards, from an SFT checkpoint. "
                              "Flags are the YAML keys of train/rl/config.py's GPPOConfig; any other TRL field goes "
                              "through --set.", epilog=REFERENCES)


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
