"""Model-side SFT setup: the attention default on GPUs, the packing decision, and where generation stops.

Split from `train/sft/trainer.py` (config + trainer wiring). The functions take the config duck-typed (any
object with the CotSFTConfig/TrainingArguments fields they read), so this module does not import it.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from cotforge.curate.core.config import ConfigError
from cotforge.train.sft.data import packing_probe

log = logging.getLogger(__name__)

PACKING_FALLBACKS = ("unpacked", "error")
_FLASH_HINTS = ("flash", "varlen")


class SFTConfigError(ConfigError):
    """A bad SFT config: unknown key, bad value or bad override; the message names the key."""


def default_attn_implementation(cfg) -> str | None:
    """flash_attention_2 when training on CUDA with flash-attn installed, else None (the model's default, sdpa).

    Without varlen kernels a packed row's attention is computed as one dense masked (T x T) problem. With
    them each packed sample only costs its own block, so leaving them unused on a GPU that has them wastes it.
    """
    import importlib.util

    import torch

    if cfg.use_cpu or not torch.cuda.is_available() or importlib.util.find_spec("flash_attn") is None:
        return None
    return "flash_attention_2"


def _is_sharded(cfg) -> bool:
    """DeepSpeed/FSDP runs: parameters are partitioned, so a probe forward outside the engine is impossible."""
    env = any(os.environ.get(k, "false").lower() in ("1", "true")
              for k in ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_FSDP"))
    return bool(env or cfg.deepspeed or cfg.fsdp
                or dist_type(cfg) in ("DEEPSPEED", "FSDP"))


def dist_type(cfg) -> str:
    """accelerate's distributed type as a plain string ("NO", "MULTI_GPU", "DEEPSPEED", ...)."""
    kind = cfg.distributed_state.distributed_type
    return str(getattr(kind, "value", kind))


def _probe_autocast(cfg, model):
    """The autocast dtype training will run the model under on its device (None: no autocast)."""
    import torch

    if next(model.parameters()).device.type != "cuda" or model.dtype != torch.float32:
        return None
    return torch.bfloat16 if cfg.bf16 else torch.float16 if cfg.fp16 else None


def check_packing(cfg, model) -> tuple[bool, dict[str, Any]]:
    """Whether to pack, and why: yes for FlashAttention varlen; for other backends only if the probe passes.

    The probe (`train.sft.data.packing_probe`) runs on the model's device under training's autocast dtype.
    A failure triggers `packing_fallback`: `unpacked` or `error`.
    """
    impl = str(getattr(model.config, "_attn_implementation", None) or "")
    info: dict[str, Any] = {"requested": bool(cfg.packing), "attn_implementation": impl}
    if not cfg.packing:
        return False, {**info, "packed": False}
    if cfg.packing_strategy == "wrapped":
        log.warning("packing_strategy 'wrapped' cuts samples mid-sequence and lets their pieces see each other; "
                    "use bfd or bfd_split for isolated samples")
    if any(h in impl for h in _FLASH_HINTS):
        return True, {**info, "packed": True, "probe": "varlen kernels (not probed)"}
    if cfg.per_device_train_batch_size > 1:
        log.warning("packing with attn_implementation=%s: the padding-free collator flattens %d packed rows into one "
                    "sequence of up to %s tokens, whose attention is one dense masked problem; prefer "
                    "per_device_train_batch_size 1 with gradient_accumulation_steps", impl,
                    cfg.per_device_train_batch_size, cfg.per_device_train_batch_size * (cfg.max_length or 0))
    if _is_sharded(cfg):
        log.warning("packing with attn_implementation=%s under DeepSpeed/FSDP relies on transformers' "
                    "position_ids block mask and is not probed; prefer flash_attention_2", impl)
        return True, {**info, "packed": True, "probe": "sharded (not probed)"}
    probe = packing_probe(model, autocast_dtype=_probe_autocast(cfg, model))
    info["probe"] = probe.as_dict()
    if probe.isolated():
        log.info("packing: attn_implementation=%s isolates packed samples (leak %.2e, vs alone %.2e, scale %.2e)",
                 impl, probe.leak, probe.vs_alone, probe.scale)
        return True, {**info, "packed": True}
    msg = (f"packing: attn_implementation={impl} does not isolate packed samples (max logit change from the "
           f"other samples {probe.leak:.3g}, vs alone {probe.vs_alone:.3g}, logit scale {probe.scale:.3g})")
    if cfg.packing_fallback == "error":
        raise SFTConfigError(msg + "; set packing: false, or use flash_attention_2")
    log.warning("%s; training UNPACKED instead (packing_fallback: unpacked)", msg)
    return False, {**info, "packed": False}


def decide_packing(cfg, model) -> bool:
    """`check_packing` without the explanation."""
    return check_packing(cfg, model)[0]


def stop_at_end_of_turn(model, tokenizer, end_of_turn_id: int | None) -> list[int]:
    """Make `generate` stop at the template's end-of-turn token as well as at eos (saved with the model)."""
    gen = model.generation_config
    current = gen.eos_token_id
    ids = [] if current is None else [current] if isinstance(current, int) else list(current)
    stops = list(dict.fromkeys(int(i) for i in (end_of_turn_id, *ids, tokenizer.eos_token_id) if i is not None))
    gen.eos_token_id = stops
    if gen.pad_token_id is None and tokenizer.pad_token_id is not None:
        gen.pad_token_id = tokenizer.pad_token_id
    return stops
