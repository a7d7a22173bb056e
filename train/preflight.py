"""Checks of a training command's inputs before anything heavy loads: the model and data exist, the model's
config can be read, the attention implementation exists on this machine and `max_length` fits the model.

`cotforge train sft|rl` run them first (and `--dry-run` runs only them), so a missing or misspelt input, or a
setting the machine or model cannot honour, is one line naming the flag instead of a traceback minutes later.
Only the model's `config.json` is read (`AutoConfig`), never its weights.
"""

from __future__ import annotations

import glob
import importlib.util
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cotforge.curate.core.config import ConfigError

log = logging.getLogger(__name__)

FLASH_IMPLEMENTATIONS = ("flash_attention_2", "flash_attention_3")
BUILTIN_IMPLEMENTATIONS = ("eager", "sdpa", "flex_attention")


class PreflightError(ConfigError):
    """A training input that cannot work: the message names the flag (and YAML key) and what to do."""


def _remote(value: str) -> bool:
    return value.startswith("hf:") or "://" in value


def _looks_local(value: str) -> bool:
    """A model value meant as a folder (a path form a Hub id never has: ./x, /x, ~/x, a/b/c, x\\y)."""
    return value.startswith((".", "/", "~")) or value.count("/") > 1 or "\\" in value or Path(value).exists()


def check_data(paths: Sequence[str] | str | None, flag: str) -> list[str]:
    """Every local data path exists (globs must match); Hub and URL inputs are left to the loader."""
    items = [paths] if isinstance(paths, str) else list(paths or [])
    if not items:
        raise PreflightError(f"{flag}: required (the training data: files, folders or globs)")
    for p in items:
        if _remote(p):
            continue
        if any(ch in p for ch in "*?["):
            if not glob.glob(p, recursive=True):
                raise PreflightError(f"{flag}: {p!r} matches no file")
        elif not Path(p).expanduser().exists():
            raise PreflightError(f"{flag}: {p} not found")
    return items


def check_model(model: str | None, flag: str = "--model", trust_remote_code: bool = False) -> Any:
    """The model's transformers config (read from its config.json only); a missing folder, or a Hub id that
    cannot be resolved, is a PreflightError naming `flag`."""
    if not model:
        raise PreflightError(f"{flag}: required (a local model folder or a Hub id)")
    if _looks_local(model):
        path = Path(model).expanduser()
        if not path.is_dir():
            raise PreflightError(f"{flag}: {model} is not a model folder (not found)")
        if not (path / "config.json").is_file():
            raise PreflightError(f"{flag}: {model} has no config.json (not a transformers model folder)")
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(model, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, KeyError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PreflightError(f"{flag}: cannot read the model config of {model!r} ({first})") from e


def check_attention(attn: str | None, use_cpu: bool, flag: str = "--attn-implementation") -> None:
    """A FlashAttention implementation needs a CUDA device and the flash-attn package on this machine."""
    if attn not in FLASH_IMPLEMENTATIONS:
        return
    import torch

    missing = []
    if use_cpu or not torch.cuda.is_available():
        missing.append("a CUDA device" + (" (use_cpu is set)" if use_cpu else ""))
    package = "flash_attn_interface" if attn == "flash_attention_3" else "flash_attn"
    if importlib.util.find_spec(package) is None:
        missing.append(f"the {package} package")
    if missing:
        raise PreflightError(f"{flag}: {attn} needs {' and '.join(missing)}, which this machine lacks; use sdpa "
                             "(or leave it unset: flash_attention_2 where it exists, else the model's default)")


def check_max_length(max_length: int | None, model_config: Any, flag: str = "--max-length") -> None:
    """`max_length` must not exceed the model's positions unless the model declares RoPE scaling (a rope_type
    other than "default": transformers 5 fills `rope_parameters` with the default type for every model)."""
    positions = getattr(model_config, "max_position_embeddings", None)
    if not max_length or not positions or max_length <= positions:
        return
    scaling = getattr(model_config, "rope_scaling", None) or getattr(model_config, "rope_parameters", None)
    if isinstance(scaling, dict) and scaling.get("rope_type", scaling.get("type", "default")) != "default":
        log.warning("%s %d exceeds max_position_embeddings %d; relying on the model's rope_scaling", flag,
                    max_length, positions)
        return
    raise PreflightError(f"{flag}: {max_length} exceeds the model's {positions} positions "
                         f"(max_position_embeddings, no RoPE scaling); pass {flag} {positions} or less")


def check_output_dir(output_dir: str | None, flag: str = "-o/--output-dir") -> None:
    """The output folder may exist (checkpoints resume from it) but must not be a file."""
    if output_dir and Path(output_dir).exists() and not Path(output_dir).is_dir():
        raise PreflightError(f"{flag}: {output_dir} is a file, not a folder")
