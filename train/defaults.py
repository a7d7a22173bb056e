"""Defaults the SFT and RL trainers share: bf16 when the device has it, and which checkpoint a `resume` value
names. One meaning for both trainers, so a recipe's `resume: latest` does the same in every training stage."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from cotforge.curate.core.config import ConfigError

log = logging.getLogger(__name__)

LATEST = ("latest", "auto", "true")
NONE = ("", "none", "false")


def bf16_available(use_cpu: bool) -> bool:
    """True when training will run on a CUDA device that supports bf16 (the `bf16: null` default)."""
    import torch

    return (not use_cpu) and torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def fill_auto_defaults(cfg: Any, checkpointing: bool) -> None:
    """The `null` defaults of a trainer config (TRL TrainingArguments): `bf16` on where the device has it (and
    fp16 is off); activation checkpointing `checkpointing` when neither it nor its old alias
    `gradient_checkpointing` is set (SFT trains 32k-token rows: on; RL's default rows are short: off)."""
    if cfg.bf16 is None:
        cfg.bf16 = bf16_available(cfg.use_cpu) and not cfg.fp16
    if cfg.activation_checkpointing is None and cfg.gradient_checkpointing is None:
        cfg.activation_checkpointing = checkpointing


def resolve_resume(value: str | bool | None, output_dir: str, key: str = "resume") -> str | None:
    """The checkpoint folder to resume from. None / false / "" / "none": start fresh; true / "latest" / "auto":
    the newest `checkpoint-N` in `output_dir` (fresh when there is none); anything else is a checkpoint folder,
    which must exist (a ConfigError naming `key` otherwise)."""
    if value is None or value is False or (isinstance(value, str) and value.lower() in NONE):
        return None
    if value is True or (isinstance(value, str) and value.lower() in LATEST):
        ckpts = [p for p in Path(output_dir).glob("checkpoint-*") if p.is_dir() and p.name.split("-")[-1].isdigit()]
        if not ckpts:
            log.info("%s: no checkpoint in %s; starting fresh", key, output_dir)
            return None
        return str(max(ckpts, key=lambda p: int(p.name.split("-")[-1])))
    if not Path(str(value)).is_dir():
        raise ConfigError(f"{key}: {value} is not a checkpoint folder")
    return str(value)
