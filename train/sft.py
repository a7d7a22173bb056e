"""Long chain-of-thought SFT: curated shards -> TRL `SFTTrainer` (transformers Trainer + accelerate).

cotforge adds the data handling (`train.data`: rendering, assistant-only labels, overlong policy), the
paper's recipe as defaults (Klear-Reasoner §4.1: peak lr 8e-5, cosine decay to a floor of 4e-5, 4 epochs,
32k tokens), a packing guard for attention backends that could leak across packed samples, plain
CSV/JSON/PNG logs, and the `cotforge train sft` command. Training, checkpointing, resume (optimizer,
scheduler, RNG, data position), `report_to` and multi-GPU/multi-node scale-out are the Trainer's own.

Usage::

    cotforge train sft --config pipelines/sft_example.yaml --set learning_rate=5e-5 --set max_steps=100
    accelerate launch --config_file pipelines/accelerate/deepspeed_zero3.yaml -m cotforge.pipelines.cli \
        train sft --config cfg.yaml

Packing: `packing: true` uses TRL's best-fit-decreasing packer with padding-free batches (one row,
`position_ids` restart per sample). FlashAttention (`attn_implementation: flash_attention_2`) keeps
samples apart with varlen kernels. For `sdpa`/`eager` (CPU, or GPU without flash-attn) transformers
builds a block-diagonal mask from the restarting position ids when no KV cache is used; before
training, `decide_packing` measures on the real model that packed logits equal unpacked ones. If
they do not, `packing_fallback: unpacked` (default) trains unpacked with a warning and `error` stops.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import yaml
from trl import SFTConfig, SFTTrainer

from cotforge.train.callbacks import DEFAULT_CURVES, CsvJsonLogger
from cotforge.train.data.sft import (
    MASK_MODES,
    OVERLONG_POLICIES,
    PrepareStats,
    SFTDataError,
    load_sft_dataset,
    packing_leak,
    prepare_sft_dataset,
)
from cotforge.train.distributed import check_training_args
from cotforge.train.overrides import parse_set

log = logging.getLogger(__name__)

PACKING_FALLBACKS = ("unpacked", "error")
_FLASH_HINTS = ("flash", "varlen")
_MIN_LR_SCHEDULERS = ("cosine_with_min_lr", "cosine_warmup_with_min_lr")


class SFTConfigError(ValueError):
    """A bad SFT config: unknown key, bad value or bad override; the message names the key."""


@dataclass
class CotSFTConfig(SFTConfig):
    """TRL's SFTConfig with cotforge's data options and the Klear-Reasoner SFT recipe as defaults.

    Every TrainingArguments/SFTConfig field can be set in YAML; the cotforge-only fields are below.
    Schedule (default): lr(t) = min_lr + (lr_peak - min_lr) * (1 + cos(pi * t / T)) / 2 after warmup,
    with lr_peak = 8e-5 and min_lr = 4e-5 (transformers' `cosine_with_min_lr`).
    """

    model: str | None = field(default=None, metadata={"help": "Hub id or local folder of the base model."})
    tokenizer: str | None = field(default=None, metadata={"help": "Tokenizer id/folder (default: `model`)."})
    data: list[str] | str | None = field(
        default=None, metadata={"help": "SFT shards: Parquet/JSONL files, folders, a save_to_disk folder or hf:org/name."})
    eval_data: list[str] | str | None = field(default=None, metadata={"help": "Optional eval shards (same forms)."})
    mask_mode: str = field(default="auto", metadata={"help": f"Assistant-label mode: {MASK_MODES}."})
    overlong: str = field(default="drop", metadata={"help": f"Rows longer than max_length: {OVERLONG_POLICIES}."})
    system_prompt: str | None = field(default=None, metadata={"help": "System turn for rows without one."})
    packing_fallback: str = field(
        default="unpacked", metadata={"help": f"When packed samples would leak: {PACKING_FALLBACKS}."})
    attn_implementation: str | None = field(
        default=None, metadata={"help": "sdpa | eager | flash_attention_2 | ... (None: the model's default)."})
    dtype: str = field(default="float32", metadata={
        "help": "Weights dtype: float32 (master weights; bf16 autocast on GPU) | bfloat16 | float16 | auto."})
    log_curves: list[str] = field(default_factory=lambda: list(DEFAULT_CURVES),
                                  metadata={"help": "Keys drawn into loss.png."})
    resume: str | bool | None = field(
        default=None, metadata={"help": "Checkpoint folder, or true/'latest' for the newest in output_dir."})

    # Recipe defaults (Klear-Reasoner §4.1) over TRL's.
    learning_rate: float = 8e-5
    lr_scheduler_type: str = "cosine_with_min_lr"
    lr_scheduler_kwargs: dict | str | None = field(default_factory=lambda: {"min_lr": 4e-5})
    num_train_epochs: float = 4.0
    max_length: int | None = 32768
    packing: bool = True
    bf16: bool | None = None  # None: on when a CUDA device supports it and use_cpu is off
    logging_steps: float = 10
    save_total_limit: int | None = 3
    activation_checkpointing: bool | None = None  # None (and gradient_checkpointing None): on
    gradient_checkpointing: bool | None = None  # deprecated alias kept for YAML written for TRL

    def __post_init__(self):
        self._check_choices()
        if self.bf16 is None:
            self.bf16 = _bf16_available(self.use_cpu) and not self.fp16
        if self.activation_checkpointing is None and self.gradient_checkpointing is None:
            self.activation_checkpointing = True
        if isinstance(self.data, str):
            self.data = [self.data]
        if isinstance(self.eval_data, str):
            self.eval_data = [self.eval_data]
        kwargs = self.lr_scheduler_kwargs
        sched = str(getattr(self.lr_scheduler_type, "value", self.lr_scheduler_type))
        if isinstance(kwargs, dict) and sched not in _MIN_LR_SCHEDULERS and "min_lr" in kwargs:
            log.info("lr_scheduler_type %s takes no min_lr; dropping it", self.lr_scheduler_type)
            self.lr_scheduler_kwargs = {k: v for k, v in kwargs.items() if k != "min_lr"}
        if self.assistant_only_loss:
            raise SFTConfigError("assistant_only_loss: cotforge builds assistant-only labels itself; "
                                 "use mask_mode (auto | generation | diff | none) instead")
        super().__post_init__()

    def _check_choices(self) -> None:
        """Validate the cotforge-only enumerations with a message naming the key."""
        for key, allowed in (("mask_mode", MASK_MODES), ("overlong", OVERLONG_POLICIES),
                             ("packing_fallback", PACKING_FALLBACKS)):
            if getattr(self, key) not in allowed:
                raise SFTConfigError(f"{key}: {getattr(self, key)!r} is not one of {allowed}")


def _bf16_available(use_cpu: bool) -> bool:
    """True when training will run on a CUDA device that supports bf16."""
    import torch

    return (not use_cpu) and torch.cuda.is_available() and torch.cuda.is_bf16_supported()


# --------------------------------------------------------------------------- config loading


def _set_dotted(target: dict[str, Any], dotted: str, value: Any) -> None:
    """`a.b=v` sets target["a"]["b"] (creating dicts); `a=v` sets target["a"]."""
    *parents, leaf = dotted.split(".")
    node = target
    for p in parents:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise SFTConfigError(f"--set {dotted}: {p!r} is not a mapping")
    node[leaf] = value


def parse_overrides(overrides: Sequence[str]) -> list[tuple[str, Any]]:
    """`key=value` strings -> (key, YAML-parsed value); e.g. `max_steps=10`, `lr_scheduler_kwargs.min_lr=1e-5`."""
    try:
        return [parse_set(item) for item in overrides]
    except ValueError as e:
        raise SFTConfigError(str(e)) from e


def config_from_dict(values: Mapping[str, Any], origin: str = "config") -> CotSFTConfig:
    """Build a CotSFTConfig from a flat mapping; unknown keys and bad values raise SFTConfigError."""
    names = {f.name for f in dataclasses.fields(CotSFTConfig) if f.init}
    unknown = sorted(set(values) - names)
    if unknown:
        hints = {k: difflib.get_close_matches(k, names, n=1) for k in unknown}
        text = ", ".join(f"{k}" + (f" (did you mean {h[0]}?)" if h else "") for k, h in hints.items())
        raise SFTConfigError(f"{origin}: unknown SFT config key(s): {text}")
    values = {k: _coerce(k, v) for k, v in values.items()}
    try:
        return CotSFTConfig(**values)
    except SFTConfigError as e:
        raise SFTConfigError(f"{origin}: {e}") from e
    except (TypeError, ValueError) as e:
        raise SFTConfigError(f"{origin}: {e}") from e


_EXP_FLOAT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+$")


def _coerce(key: str, value: Any) -> Any:
    """Undo two YAML 1.1 surprises: `8e-5` parsed as a string, `no` as False (`save_strategy: no`)."""
    ftype = str(_FIELD_TYPES.get(key, ""))
    if isinstance(value, dict):
        return {k: _coerce("", v) for k, v in value.items()}
    if isinstance(value, str) and _EXP_FLOAT.match(value.strip()) and (not ftype or "float" in ftype):
        return float(value)
    if isinstance(value, bool) and ftype and "bool" not in ftype:
        return "yes" if value else "no"
    return value


_FIELD_TYPES = {f.name: f.type for f in dataclasses.fields(CotSFTConfig)}


def load_sft_config(path: str | Path | None = None, overrides: Sequence[str] = (),
                    **shortcuts: Any) -> CotSFTConfig:
    """YAML file (flat keys, or under a top-level `sft:`) + `--set key=value` overrides + CLI shortcuts."""
    values: dict[str, Any] = {}
    origin = str(path) if path else "config"
    if path:
        try:
            loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as e:
            raise SFTConfigError(f"{path}: not valid YAML ({e})") from e
        if not isinstance(loaded, dict):
            raise SFTConfigError(f"{path}: expected a mapping of config keys, got {type(loaded).__name__}")
        values = dict(loaded.get("sft", loaded)) if isinstance(loaded.get("sft"), dict) else dict(loaded)
    for key, value in parse_overrides(overrides):
        _set_dotted(values, key, value)
    values.update({k: v for k, v in shortcuts.items() if v not in (None, (), [])})
    return config_from_dict(values, origin)


# --------------------------------------------------------------------------- model, packing, trainer


def load_model_and_tokenizer(cfg: CotSFTConfig):
    """Load the base model and tokenizer with the same from_pretrained calls for hub ids and local folders."""
    from transformers import AutoTokenizer
    from trl.trainer.utils import create_model_from_path

    if not cfg.model:
        raise SFTConfigError("model: required (a hub id or a local model folder)")
    tok = AutoTokenizer.from_pretrained(cfg.tokenizer or cfg.model, trust_remote_code=cfg.trust_remote_code)
    if cfg.chat_template_path:
        tok.chat_template = _read_template(cfg.chat_template_path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    kwargs = dict(cfg.model_init_kwargs or {})
    kwargs.setdefault("dtype", cfg.dtype)
    kwargs.setdefault("trust_remote_code", cfg.trust_remote_code)
    if cfg.attn_implementation:
        kwargs.setdefault("attn_implementation", cfg.attn_implementation)
    if _dist_type(cfg) in ("MULTI_GPU", "DEEPSPEED", "FSDP"):
        kwargs["device_map"] = None
    model = create_model_from_path(cfg.model, **kwargs)
    model.config.use_cache = False  # a KV cache would disable transformers' packed-sequence mask
    max_pos = getattr(model.config, "max_position_embeddings", None)
    if cfg.max_length and max_pos and cfg.max_length > max_pos:
        log.warning("max_length %d exceeds the model's max_position_embeddings %d (needs RoPE scaling)",
                    cfg.max_length, max_pos)
    return model, tok


def _read_template(path: str) -> str:
    """Read a Jinja chat template file (a tokenizer folder would also change the vocabulary: not supported)."""
    p = Path(path)
    if not (p.is_file() and p.suffix in (".jinja", ".j2")):
        raise SFTConfigError(f"chat_template_path: {path} must be a .jinja/.j2 file")
    return p.read_text(encoding="utf-8")


def _is_sharded(cfg: CotSFTConfig) -> bool:
    """DeepSpeed/FSDP runs: parameters are partitioned, so a probe forward outside the engine is impossible."""
    env = any(os.environ.get(k, "false").lower() in ("1", "true")
              for k in ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_FSDP"))
    return bool(env or cfg.deepspeed or cfg.fsdp
                or _dist_type(cfg) in ("DEEPSPEED", "FSDP"))


def _dist_type(cfg: CotSFTConfig) -> str:
    """accelerate's distributed type as a plain string ("NO", "MULTI_GPU", "DEEPSPEED", ...)."""
    kind = cfg.distributed_state.distributed_type
    return str(getattr(kind, "value", kind))


def decide_packing(cfg: CotSFTConfig, model) -> bool:
    """Whether to pack: yes for FlashAttention varlen; for other backends only if a probe shows no leak.

    The probe compares logits of two samples packed into one padding-free row with the samples run
    alone (`train.data.packing_leak`). A leak triggers `packing_fallback`: `unpacked` or `error`.
    """
    if not cfg.packing:
        return False
    if cfg.packing_strategy == "wrapped":
        log.warning("packing_strategy 'wrapped' cuts samples mid-sequence and lets their pieces see each other; "
                    "use bfd or bfd_split for isolated samples")
    impl = str(getattr(model.config, "_attn_implementation", None) or "")
    if any(h in impl for h in _FLASH_HINTS):
        return True
    if _is_sharded(cfg):
        log.warning("packing with attn_implementation=%s under DeepSpeed/FSDP relies on transformers' "
                    "position_ids block mask and is not probed; prefer flash_attention_2", impl)
        return True
    leak = packing_leak(model)
    tol = 1e-2 if str(model.dtype) == "torch.float32" else 1e-1  # leaks show up as O(0.1-10) differences
    if leak <= tol:
        log.info("packing: attn_implementation=%s isolates packed samples (max logit diff %.2e)", impl, leak)
        return True
    msg = (f"packing: attn_implementation={impl} lets packed samples attend to each other "
           f"(max logit diff {leak:.3g} > {tol})")
    if cfg.packing_fallback == "error":
        raise SFTConfigError(msg + "; set packing: false, or use flash_attention_2")
    log.warning("%s; training UNPACKED instead (packing_fallback: unpacked)", msg)
    return False


@dataclass
class SFTResult:
    """What an SFT run produced (for the pipeline runner's manifest)."""

    output_dir: str
    global_step: int
    train_loss: float | None
    packed: bool
    data: dict[str, Any]
    metrics: dict[str, Any]


def build_trainer(cfg: CotSFTConfig, callbacks: Sequence[Any] = ()) -> tuple[SFTTrainer, PrepareStats]:
    """Load model + data, decide packing and return a ready SFTTrainer plus the data statistics."""
    if not cfg.data:
        raise SFTConfigError("data: required (SFT shards: files, folders or hf:org/name)")
    check_training_args(cfg)  # refuse launches that would silently train otherwise (train/distributed.py)
    model, tok = load_model_and_tokenizer(cfg)
    cfg.packing = decide_packing(cfg, model)
    if not cfg.packing:
        cfg.padding_free = False
    with cfg.main_process_first(desc="SFT data preparation"):
        raw, locator = load_sft_dataset(cfg.data)
        train_ds, stats = prepare_sft_dataset(
            raw, tok, max_length=cfg.max_length, mask_mode=cfg.mask_mode, overlong=cfg.overlong,
            locator=locator, system_prompt=cfg.system_prompt, num_proc=cfg.dataset_num_proc)
        eval_ds = None
        if cfg.eval_data:
            raw_eval, eval_locator = load_sft_dataset(cfg.eval_data)
            eval_ds, _ = prepare_sft_dataset(
                raw_eval, tok, max_length=cfg.max_length, mask_mode=cfg.mask_mode, overlong=cfg.overlong,
                locator=eval_locator, system_prompt=cfg.system_prompt, num_proc=cfg.dataset_num_proc)
    logger = CsvJsonLogger(cfg.output_dir, curves=cfg.log_curves)
    trainer = SFTTrainer(model=model, args=cfg, train_dataset=train_ds, eval_dataset=eval_ds,
                         processing_class=tok, callbacks=[logger, *callbacks])
    return trainer, stats


def resolve_resume(cfg: CotSFTConfig) -> str | None:
    """The checkpoint to resume from: an explicit folder, or the newest in output_dir for true/'latest'."""
    from transformers.trainer_utils import get_last_checkpoint

    value = cfg.resume if cfg.resume is not None else cfg.resume_from_checkpoint
    if value in (None, False, "", "none"):
        return None
    if value is True or value in ("latest", "auto", "true"):
        last = get_last_checkpoint(cfg.output_dir) if Path(cfg.output_dir).is_dir() else None
        if last is None:
            log.info("resume: no checkpoint in %s; starting fresh", cfg.output_dir)
        return last
    if not Path(str(value)).is_dir():
        raise SFTConfigError(f"resume: {value} is not a checkpoint folder")
    return str(value)


def run_sft(cfg: CotSFTConfig | Mapping[str, Any], callbacks: Sequence[Any] = ()) -> SFTResult:
    """Train (or resume), save the final model + tokenizer to output_dir, write run files; the pipeline stage."""
    if not isinstance(cfg, CotSFTConfig):
        cfg = config_from_dict(cfg)
    trainer, stats = build_trainer(cfg, callbacks)
    out = Path(cfg.output_dir)
    resume = resolve_resume(cfg)
    result = trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(cfg.output_dir)
    if trainer.is_world_process_zero():
        out.mkdir(parents=True, exist_ok=True)
        (out / "sft_data_stats.json").write_text(json.dumps(stats.as_dict(), indent=2), encoding="utf-8")
        (out / "sft_config.json").write_text(cfg.to_json_string(), encoding="utf-8")
    return SFTResult(output_dir=str(out), global_step=trainer.state.global_step,
                     train_loss=getattr(result, "training_loss", None), packed=bool(cfg.packing),
                     data=stats.as_dict(), metrics=dict(result.metrics))


# --------------------------------------------------------------------------- CLI


@click.command("sft")
@click.option("-c", "--config", "config_path", type=click.Path(exists=True, dir_okay=False),
              help="YAML config (flat CotSFTConfig keys; see pipelines/sft_example.yaml).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config key (YAML value; dotted keys go into dicts). Repeatable.")
@click.option("--model", default=None, help="Shortcut for --set model=...")
@click.option("--data", multiple=True, help="Shortcut for --set data=... (repeatable).")
@click.option("-o", "--output-dir", default=None, help="Shortcut for --set output_dir=...")
@click.option("--resume", default=None, help="Checkpoint folder, or 'latest'.")
@click.option("--dry-run", is_flag=True, help="Validate and print the resolved config; do not train.")
def sft_command(config_path: str | None, overrides: tuple[str, ...], model: str | None, data: tuple[str, ...],
                output_dir: str | None, resume: str | None, dry_run: bool) -> None:
    """Supervised fine-tuning on curated long-CoT shards (TRL SFTTrainer; works under `accelerate launch`)."""
    try:
        cfg = load_sft_config(config_path, overrides, model=model, data=list(data) or None,
                              output_dir=output_dir, resume=resume)
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
