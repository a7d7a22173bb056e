"""Long chain-of-thought SFT: curated shards -> TRL `SFTTrainer` (transformers Trainer + accelerate).

cotforge adds the data handling (`train/sft/data.py`: rendering, assistant-only labels, overlong policy), the
paper's recipe as defaults (Klear-Reasoner §4.1: peak lr 8e-5, cosine decay to a floor of 4e-5, 4 epochs,
32k tokens), a packing guard for attention backends that could leak across packed samples, plain
CSV/JSON/PNG logs (the `cotforge train sft` command is generated from these fields in pipelines/cli). Training, checkpointing, resume (optimizer,
scheduler, RNG, data position), `report_to` and multi-GPU/multi-node scale-out are the Trainer's own.

Usage::

    cotforge train sft --config pipelines/sft_example.yaml --set learning_rate=5e-5 --set max_steps=100
    accelerate launch --config_file pipelines/accelerate/deepspeed_zero3.yaml -m cotforge.pipelines.cli \
        train sft --config cfg.yaml

Packing: `packing: true` uses TRL's best-fit-decreasing packer with padding-free batches (one row,
`position_ids` restart per sample). FlashAttention (`attn_implementation: flash_attention_2`, the default
on CUDA when flash-attn is installed) keeps samples apart with varlen kernels. For `sdpa`/`eager`/
`flex_attention` transformers builds a block-diagonal mask from the restarting position ids when no KV
cache is used; before training, `check_packing` probes the real model on its device and compute dtype
(`train.sft.data.packing_probe`: the last sample's logits must not depend on the other samples' tokens, and
must match the sample run alone). If the probe fails, `packing_fallback: unpacked` (default) trains unpacked
with a warning and `error` stops. The padding-free collator flattens `per_device_train_batch_size` packed
rows into one sequence, so without varlen kernels attention costs (batch * max_length)^2: the default batch
is one packed row; scale with gradient_accumulation_steps.

Generation: the saved `generation_config.eos_token_id` lists the chat template's end-of-turn token (e.g.
`<|im_end|>` for a Qwen base model whose eos is `<|endoftext|>`) so the trained model stops where it was
trained to stop.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trl import SFTConfig, SFTTrainer

from cotforge.curate.core.config import load
from cotforge.train.callbacks import DEFAULT_CURVES, CsvJsonLogger, quiet_printer, train_stats
from cotforge.train.defaults import fill_auto_defaults, resolve_resume
from cotforge.train.distributed import check_training_args
from cotforge.train.preflight import (
    check_attention,
    check_data,
    check_max_length,
    check_model,
    check_output_dir,
)
from cotforge.train.sft.data import (
    MASK_MODES,
    OVERLONG_POLICIES,
    REASONING_MODES,
    PrepareStats,
    load_sft_dataset,
    prepare_sft_dataset,
)
from cotforge.train.sft.model import (
    PACKING_FALLBACKS,
    SFTConfigError,
    check_packing,
    decide_packing,
    default_attn_implementation,
    dist_type,
    stop_at_end_of_turn,
)

if TYPE_CHECKING:
    from cotforge.curate.context import StageContext

log = logging.getLogger(__name__)

__all__ = ["PACKING_FALLBACKS", "CotSFTConfig", "SFTConfigError", "SFTResult", "build_trainer", "check_packing",
           "decide_packing", "default_attn_implementation", "load_sft_config", "preflight", "run_sft",
           "stop_at_end_of_turn"]
_MIN_LR_SCHEDULERS = ("cosine_with_min_lr", "cosine_warmup_with_min_lr")


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
    mask_mode: str = field(default="auto", metadata={
        "help": "Assistant labels: auto (= diff) | diff (prompt = the generation prompt, labels = the completion up "
                "to the end-of-turn token) | generation (the template's {% generation %} markers) | none (all)."})
    overlong: str = field(default="drop", metadata={"help": f"Rows longer than max_length: {OVERLONG_POLICIES}."})
    system_prompt: str | None = field(default=None, metadata={"help": "System turn for rows without one."})
    packing_fallback: str = field(
        default="unpacked", metadata={"help": f"When packed samples would leak: {PACKING_FALLBACKS}."})
    reasoning_markers: str = field(default="keep", metadata={
        "help": "Reasoning markers in responses: keep | auto (rewrite to the target template's, e.g. "
                "<|begin_of_thought|> -> <think>, counted in sft_data_stats.json) | an opening marker, e.g. <think>."})
    repair_rows: bool = field(default=True, metadata={
        "help": "Open closing-only traces and rebuild a row whose template rendering loses the trained turn's "
                "reasoning or does not extend the generation prompt; false: drop such rows."})
    strict: bool = field(default=False, metadata={
        "help": "Stop at the first row that would be dropped (default: drop it, with its reason counted and "
                "sampled in sft_data_stats.json)."})
    chat_template_kwargs: dict | None = field(default=None, metadata={
        "help": "Extra chat-template variables for rendering, e.g. {enable_thinking: false}."})
    attn_implementation: str | None = field(default=None, metadata={
        "help": "sdpa | eager | flex_attention | flash_attention_2 | ... (None: flash_attention_2 on CUDA when "
                "flash-attn is installed, else the model's default)."})
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
    per_device_train_batch_size: int = 1  # one packed row per step: padding-free flattens the batch into one row
    bf16: bool | None = None  # None: on when a CUDA device supports it and use_cpu is off
    logging_steps: float = 10
    save_total_limit: int | None = 3
    activation_checkpointing: bool | None = None  # None (and gradient_checkpointing None): on
    gradient_checkpointing: bool | None = None  # deprecated alias kept for YAML written for TRL

    def __post_init__(self):
        self._check_choices()
        fill_auto_defaults(self, checkpointing=True)
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
                             ("packing_fallback", PACKING_FALLBACKS), ("reasoning_markers", REASONING_MODES)):
            if getattr(self, key) not in allowed:
                raise SFTConfigError(f"{key}: {getattr(self, key)!r} is not one of {allowed}")
        for key in ("repair_rows", "strict"):
            if not isinstance(getattr(self, key), bool):
                raise SFTConfigError(f"{key}: expected true or false, got {getattr(self, key)!r}")
        if self.chat_template_kwargs is not None and not isinstance(self.chat_template_kwargs, dict):
            raise SFTConfigError(f"chat_template_kwargs: expected a mapping, got {self.chat_template_kwargs!r}")




# --------------------------------------------------------------------------- config loading


def load_sft_config(path: str | Path | None = None, overrides: Sequence[str] = (),
                    **shortcuts: Any) -> CotSFTConfig:
    """YAML file (flat keys, or under a top-level `sft:`) + `--set key=value` overrides + keyword shortcuts
    (None / empty ones are ignored), through the one config loader (`cotforge.curate.core.config`)."""
    values = {k: v for k, v in shortcuts.items() if v not in (None, (), [])}
    return load(CotSFTConfig, path, overrides, values, section="sft", what="SFT config key", error=SFTConfigError)


# --------------------------------------------------------------------------- checks before loading


def preflight(cfg: CotSFTConfig) -> dict[str, Any]:
    """Check the inputs before anything loads (train.preflight): data paths, the model's config.json, the
    attention implementation on this machine and max_length against the model's positions. Returns what
    `--dry-run` prints about them; raises PreflightError (a ConfigError) naming the flag."""
    check_data(cfg.data, "--data")
    if cfg.eval_data:
        check_data(cfg.eval_data, "--eval-data")
    model_config = check_model(cfg.model, "--model", trust_remote_code=cfg.trust_remote_code)
    if cfg.tokenizer:
        check_model(cfg.tokenizer, "--tokenizer", trust_remote_code=cfg.trust_remote_code)
    check_attention(cfg.attn_implementation, cfg.use_cpu)
    check_max_length(cfg.max_length, model_config)
    check_output_dir(cfg.output_dir)
    return {"model_type": getattr(model_config, "model_type", None),
            "max_position_embeddings": getattr(model_config, "max_position_embeddings", None),
            "attn_implementation": cfg.attn_implementation or default_attn_implementation(cfg) or "model default",
            "data": list(cfg.data or [])}


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
    attn = cfg.attn_implementation or default_attn_implementation(cfg)
    if attn:
        kwargs.setdefault("attn_implementation", attn)
    if dist_type(cfg) in ("MULTI_GPU", "DEEPSPEED", "FSDP"):
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


@dataclass
class SFTResult:
    """What an SFT run produced (for the pipeline runner's manifest)."""

    output_dir: str
    global_step: int
    train_loss: float | None
    packed: bool
    data: dict[str, Any]
    metrics: dict[str, Any]


def build_trainer(cfg: CotSFTConfig, callbacks: Sequence[Any] = (), *, model=None,
                  tokenizer=None) -> tuple[SFTTrainer, PrepareStats]:
    """Load model + data, decide packing and return a ready SFTTrainer plus the data statistics.

    `model` + `tokenizer` skip loading from `cfg.model` (benches build models from a config in memory).
    """
    if not cfg.data:
        raise SFTConfigError("data: required (SFT shards: files, folders or hf:org/name)")
    check_training_args(cfg)  # refuse launches that would silently train otherwise (train/distributed.py)
    if model is None:
        preflight(cfg)
        model, tok = load_model_and_tokenizer(cfg)
    elif tokenizer is None:
        raise SFTConfigError("build_trainer: a preloaded model needs its tokenizer")
    else:
        tok = tokenizer
    cfg.packing, packing_info = check_packing(cfg, model)
    if not cfg.packing:
        cfg.padding_free = False
    prep = dict(max_length=cfg.max_length, mask_mode=cfg.mask_mode, overlong=cfg.overlong,
                system_prompt=cfg.system_prompt, num_proc=cfg.dataset_num_proc, reasoning_markers=cfg.reasoning_markers,
                repair=cfg.repair_rows, strict=cfg.strict, template_kwargs=cfg.chat_template_kwargs)
    with cfg.main_process_first(desc="SFT data preparation"):
        raw, locator = load_sft_dataset(cfg.data)
        train_ds, stats = prepare_sft_dataset(raw, tok, locator=locator, **prep)
        eval_ds = None
        if cfg.eval_data:
            raw_eval, eval_locator = load_sft_dataset(cfg.eval_data)
            eval_ds, _ = prepare_sft_dataset(raw_eval, tok, locator=eval_locator, **prep)
    stats.packing = packing_info
    stops = stop_at_end_of_turn(model, tok, stats.end_of_turn_id)
    log.info("generation stops at %s (end of turn %r)", stops, stats.end_of_turn)
    logger = CsvJsonLogger(cfg.output_dir, curves=cfg.log_curves)
    trainer = SFTTrainer(model=model, args=cfg, train_dataset=train_ds, eval_dataset=eval_ds,
                         processing_class=tok, callbacks=[logger, *callbacks])
    stop_at_end_of_turn(trainer.model, tok, stats.end_of_turn_id)  # again: the Trainer re-aligns special tokens
    quiet_printer(trainer)
    return trainer, stats




def run_sft(cfg: CotSFTConfig, callbacks: Sequence[Any] = ()) -> SFTResult:
    """Train (or resume), save the final model + tokenizer to output_dir, write run files; the pipeline stage."""
    trainer, stats = build_trainer(cfg, callbacks)
    out = Path(cfg.output_dir)
    resume = resolve_resume(cfg.resume if cfg.resume is not None else cfg.resume_from_checkpoint, cfg.output_dir)
    result = trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(cfg.output_dir)
    if trainer.is_world_process_zero():
        out.mkdir(parents=True, exist_ok=True)
        (out / "sft_data_stats.json").write_text(json.dumps(stats.as_dict(), indent=2), encoding="utf-8")
        (out / "sft_config.json").write_text(cfg.to_json_string(), encoding="utf-8")
    return SFTResult(output_dir=str(out), global_step=trainer.state.global_step,
                     train_loss=getattr(result, "training_loss", None), packed=bool(cfg.packing),
                     data=stats.as_dict(), metrics=dict(result.metrics))


def run(cfg: CotSFTConfig, ctx: StageContext) -> dict[str, Any]:
    """The sft stage: TRL SFTTrainer on the mix's SFT shards; the model is saved in place in output_dir."""
    result = run_sft(cfg)
    stats = train_stats(cfg.output_dir)
    stats.update({"steps": result.global_step, "train_loss": result.train_loss, "data": result.data})
    return stats
