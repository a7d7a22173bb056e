"""GPPO RL (`cotforge train rl --config cfg.yaml`): a TRL GRPOTrainer subclass whose policy loss is train.losses.

What comes from TRL 1.16 (pinned trl>=1.16,<1.17): prompt batching into groups of `num_generations`, generation
(HF generate with use_vllm=False; vLLM colocate/server otherwise), reward calls, group-normalised advantages
(R - mean_g) / (std_g + 1e-4), the vLLM sampler/trainer importance-sampling ratio, overlong masking
(`mask_truncated_completions`), checkpointing and report_to logging.

What this module adds, and the TRL surface it relies on:
  * `compute_loss` (the documented extension point, TRL PR #6918): the policy term is `policy_loss(cfg.loss, ...)`,
    plus alpha * token-mean NLL on correct rollouts (Klear §3.2.3). It reads the documented `inputs` keys
    (prompt_ids/mask, completion_ids/mask, advantages, old_per_token_logps, importance_sampling_ratio) and calls
    `self._get_per_token_logps_and_entropies` -- private, but the same function TRL used for the old log-probs
    (it applies the temperature-aware fused LM head), so current and old log-probs stay consistent.
  * `_generate_and_score_completions` is *wrapped* (super() is called, nothing copied) to attach per-row tensors
    `rl_keep` (0 for zero-variance groups: DAPO dynamic sampling as masking -- the batch is not refilled),
    `rl_correct` (reward == correct score) and the scalar `rl_num_tokens` (kept tokens of the whole generation
    batch, the global token-mean normaliser). TRL shuffles/splits every batch-dim tensor of that dict together.
  * Rewards are recorded by wrapping the reward callables (their public contract), so the wrapper knows each
    row's reward; `self._metrics[mode]` is where TRL collects logged scalars.
Logs: report_to (TensorBoard/W&B) plus output_dir/log.jsonl, log.csv and curves.png (train.logging_utils).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cotforge.curate.config import load
from cotforge.train.distributed import check_training_args
from cotforge.train.rl.losses import AGG_MODES, LOSS_TYPES, masked_nll, policy_loss
from cotforge.train.rl.rewards import RewardConfig, make_reward_func

if TYPE_CHECKING:
    from cotforge.curate.context import StageContext

log = logging.getLogger(__name__)

PLOT_KEYS = ("reward", "accuracy", "entropy", "clip/frac_high", "clip/frac_low", "completions/mean_length",
             "filtered_group_frac", "loss", "grad_norm")


@dataclass
class RLConfig:
    """Everything one RL run needs; YAML keys are these field names (`reward:` is a RewardConfig mapping)."""

    model: str = ""
    train_files: list[str] = field(default_factory=list)
    output_dir: str = "runs/rl"
    limit: int | None = None                 # use only the first N prompts
    # loss (train.losses.policy_loss)
    loss: str = "gppo"
    eps_low: float = 0.2
    eps_high: float = 0.28
    beta1: float = 1.0
    beta2: float = 1.0
    dual_clip: float | None = None           # official Klear scripts: 10.0; None = the paper
    agg: str = "token-mean"
    sft_alpha: float = 0.1                   # weight of the NLL on correct rollouts (paper 0.1; 0 = off)
    # groups, batches, filtering
    num_generations: int = 8
    prompts_per_rollout: int = 16            # prompts per generation batch (per device)
    micro_batch_size: int = 8                # completions per forward/backward
    grad_accum: int = 16                     # micro-batches per optimizer step
    filter_zero_variance: bool = True        # dynamic sampling: drop groups whose rewards are all equal
    overlong_filter: bool = False            # mask truncated completions out of the loss
    scale_rewards: str = "group"             # group | batch | none (Dr. GRPO)
    # sampling
    max_completion_length: int = 1024
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    # generation backend
    use_vllm: bool = False
    vllm_mode: str = "colocate"
    vllm_is_correction: bool = True
    vllm_is_mode: str = "token_truncate"
    vllm_is_cap: float = 2.0
    # optimisation
    learning_rate: float = 1e-6
    weight_decay: float = 0.1
    warmup_steps: int = 10
    lr_scheduler_type: str = "constant_with_warmup"
    max_grad_norm: float = 1.0
    max_steps: int = -1
    num_train_epochs: float = 1.0
    bf16: bool = False
    gradient_checkpointing: bool = False
    seed: int = 0
    # logging / checkpoints
    logging_steps: int = 1
    save_steps: int = 50
    save_total_limit: int | None = 3
    resume_from_checkpoint: str | None = None  # a checkpoint folder, or "latest" (newest in output_dir)
    report_to: list[str] = field(default_factory=lambda: ["tensorboard"])
    reward: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.loss not in LOSS_TYPES:
            raise ValueError(f"config field 'loss': {self.loss!r} is not one of {LOSS_TYPES}")
        if self.agg not in AGG_MODES:
            raise ValueError(f"config field 'agg': {self.agg!r} is not one of {AGG_MODES}")
        gen = self.prompts_per_rollout * self.num_generations
        if self.num_generations < 2:
            raise ValueError("config field 'num_generations' must be >= 2 (group-normalised advantages)")
        if gen % self.micro_batch_size or (gen // self.micro_batch_size) % self.grad_accum:
            raise ValueError(f"prompts_per_rollout*num_generations ({gen}) must split into micro batches of "
                             f"{self.micro_batch_size} and then into grad_accum={self.grad_accum} groups")
        RewardConfig(**self.reward)  # validates reward keys early

    @classmethod
    def from_yaml(cls, path: str | Path, overrides: dict[str, Any] | None = None) -> RLConfig:
        """YAML + `overrides` (already typed) through the one config loader (`cotforge.curate.config`)."""
        return load(cls, path, values=overrides, what="RL config key")


def _wrap_reward(func: Callable[..., list[float]], sink: list[list[float | None]]) -> Callable[..., list[float]]:
    """Record each call's rewards in `sink` (keeps __name__, which TRL logs under)."""

    @functools.wraps(func)
    def recorded(*args: Any, **kwargs: Any) -> list[float]:
        out = func(*args, **kwargs)
        sink.append(list(out))
        return out

    return recorded


def _trl():
    """Import TRL lazily (keeps `cotforge --help` fast)."""
    from trl import GRPOTrainer

    return GRPOTrainer


def _make_trainer_class():
    """Build the GRPOTrainer subclass on first use (TRL imports torch/transformers)."""
    import torch

    GRPOTrainer = _trl()

    class GPPOTrainer(GRPOTrainer):
        """GRPOTrainer with a pluggable policy loss (train.losses), SFT-on-correct, and zero-variance filtering."""

        def __init__(self, *args: Any, rl_config: RLConfig, **kwargs: Any):
            self.rl = rl_config
            self._reward_sink: list[list[float | None]] = []
            funcs = kwargs.pop("reward_funcs")
            funcs = funcs if isinstance(funcs, list) else [funcs]
            kwargs["reward_funcs"] = [_wrap_reward(f, self._reward_sink) for f in funcs]
            super().__init__(*args, **kwargs)

        # ---- rollouts: wrap, never copy ----
        def _generate_and_score_completions(self, inputs):  # noqa: D401 - see module docstring
            self._reward_sink.clear()
            out = super()._generate_and_score_completions(inputs)
            device = out["completion_mask"].device
            rewards = self._local_rewards(len(out["completion_mask"]), device)
            mode = "train" if self.model.training else "eval"
            g = self.num_generations if mode == "train" else self.num_generations_eval
            all_rewards = self.accelerator.gather(rewards)
            grouped = all_rewards.view(-1, g)
            zero_var = (grouped.max(1).values - grouped.min(1).values).abs() <= 1e-6
            keep_all = (~zero_var).repeat_interleave(g) if self.rl.filter_zero_variance else torch.ones_like(
                all_rewards, dtype=torch.bool)
            correct_all = all_rewards >= self.rl_correct_score - 1e-6
            n = len(rewards)
            sl = slice(self.accelerator.process_index * n, (self.accelerator.process_index + 1) * n)
            keep, correct = keep_all[sl].float(), correct_all[sl].float()
            mask = out["completion_mask"] * (out["tool_mask"] if "tool_mask" in out else 1)
            kept_tokens = (mask * keep[:, None]).sum()
            out["rl_keep"], out["rl_correct"] = keep, correct
            out["rl_num_tokens"] = self.accelerator.gather(kept_tokens.reshape(1)).sum()
            self._metrics[mode]["accuracy"].append(correct_all.float().mean().item())
            self._metrics[mode]["filtered_group_frac"].append(zero_var.float().mean().item()
                                                               if self.rl.filter_zero_variance else 0.0)
            return out

        @property
        def rl_correct_score(self) -> float:
            """Reward value that counts as a correct rollout."""
            return float(self.rl.reward.get("correct", RewardConfig.correct))

        def _local_rewards(self, n: int, device) -> torch.Tensor:
            """Weighted sum of the recorded reward-function outputs for this process's n completions."""
            if len(self._reward_sink) != len(self.reward_funcs) or any(len(r) != n for r in self._reward_sink):
                raise RuntimeError(f"expected {len(self.reward_funcs)} reward calls of {n} values, recorded "
                                   f"{[len(r) for r in self._reward_sink]} (TRL reward flow changed?)")
            vals = torch.tensor([[math.nan if v is None else float(v) for v in r] for r in self._reward_sink],
                                dtype=torch.float32, device=device)
            w = self.reward_weights.to(device)[:, None]
            return torch.nan_to_num(vals * w, nan=0.0).sum(0)

        # ---- loss: the documented extension point ----
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            """policy_loss(cfg.loss) over kept tokens + sft_alpha * NLL(correct kept rollouts), scaled for GA."""
            if return_outputs:
                raise ValueError("GPPOTrainer does not return outputs")
            mode = "train" if self.model.training else "eval"
            prompt_ids, completion_ids = inputs["prompt_ids"], inputs["completion_ids"]
            completion_mask = inputs["completion_mask"]
            input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
            attention_mask = torch.cat([inputs["prompt_mask"], completion_mask], dim=1)
            logps, entropies, _ = self._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, completion_ids.size(1), compute_entropy=True)
            mask = completion_mask * inputs["tool_mask"] if "tool_mask" in inputs else completion_mask
            mask = mask.to(logps.dtype)
            keep = inputs.get("rl_keep", torch.ones(mask.shape[0], device=mask.device)).to(logps.dtype)
            loss_mask = mask * keep[:, None]
            old = inputs.get("old_per_token_logps")
            old = logps.detach() if old is None else old
            ga = self.current_gradient_accumulation_steps if mode == "train" else 1
            token_norm = None
            if self.rl.agg == "token-mean" and "rl_num_tokens" in inputs:
                token_norm = inputs["rl_num_tokens"].to(logps.dtype) / self.accelerator.num_processes
                if mode == "train":
                    token_norm = token_norm * ga / self.args.steps_per_generation
            is_w = inputs.get("importance_sampling_ratio") if self.use_vllm else None
            pg, metrics = policy_loss(self.rl.loss, logps, old, inputs["advantages"], loss_mask,
                                      eps_low=self.rl.eps_low, eps_high=self.rl.eps_high, beta1=self.rl.beta1,
                                      beta2=self.rl.beta2, dual_clip=self.rl.dual_clip, agg=self.rl.agg,
                                      is_weights=is_w, token_normalizer=token_norm,
                                      norm_len=self.max_completion_length)
            loss = pg if token_norm is not None else pg / ga
            if self.rl.sft_alpha > 0:
                correct = inputs.get("rl_correct", torch.zeros_like(keep)).to(logps.dtype) * keep
                nll = masked_nll(logps, mask * correct[:, None])
                loss = loss + self.rl.sft_alpha * nll / ga
                self._metrics[mode]["sft_nll"].append(float(nll.detach()))
            self._log_loss_metrics(mode, metrics, entropies, loss_mask, pg)
            return loss

        def _log_loss_metrics(self, mode: str, m: dict[str, float], entropies, mask, pg) -> None:
            """Entropy (masked mean) and the loss's clip/ratio metrics into TRL's metric store."""
            ent = (entropies.detach() * mask).sum() / mask.sum().clamp(min=1.0)
            self._metrics[mode]["entropy"].append(self.accelerator.gather(ent.reshape(1)).mean().item())
            self._metrics[mode]["policy_loss"].append(float(pg.detach()))
            for k in ("clip_frac_high", "clip_frac_low", "dual_clip_frac", "ppo_zero_grad_frac", "zero_grad_frac"):
                self._metrics[mode][f"clip/{k.replace('clip_', '')}"].append(m[k])
            for k in ("ratio_mean", "ratio_min", "ratio_max"):
                if not math.isnan(m[k]):
                    self._metrics[mode][f"ratio/{k[6:]}"].append(m[k])

    return GPPOTrainer


_TRAINER_CLASS = None


def trainer_class():
    """The GPPOTrainer class (built once; importing this module does not import TRL)."""
    global _TRAINER_CLASS
    if _TRAINER_CLASS is None:
        _TRAINER_CLASS = _make_trainer_class()
    return _TRAINER_CLASS


def grpo_args(cfg: RLConfig):
    """Map RLConfig onto TRL's GRPOConfig (loss knobs stay ours; TRL's loss_type is unused by compute_loss)."""
    import torch
    from trl import GRPOConfig

    gen = cfg.prompts_per_rollout * cfg.num_generations
    return GRPOConfig(
        output_dir=cfg.output_dir, per_device_train_batch_size=cfg.micro_batch_size,
        gradient_accumulation_steps=cfg.grad_accum, steps_per_generation=gen // cfg.micro_batch_size,
        num_generations=cfg.num_generations, max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k, beta=0.0, num_iterations=1,
        epsilon=cfg.eps_low, epsilon_high=cfg.eps_high, scale_rewards=cfg.scale_rewards,
        mask_truncated_completions=cfg.overlong_filter, use_vllm=cfg.use_vllm, vllm_mode=cfg.vllm_mode,
        vllm_importance_sampling_correction=cfg.vllm_is_correction, vllm_importance_sampling_mode=cfg.vllm_is_mode,
        vllm_importance_sampling_clip_max=cfg.vllm_is_cap, learning_rate=cfg.learning_rate,
        weight_decay=cfg.weight_decay, warmup_steps=cfg.warmup_steps, lr_scheduler_type=cfg.lr_scheduler_type,
        max_grad_norm=cfg.max_grad_norm, max_steps=cfg.max_steps, num_train_epochs=cfg.num_train_epochs,
        bf16=cfg.bf16, fp16=False, use_cpu=not torch.cuda.is_available(),
        gradient_checkpointing=cfg.gradient_checkpointing, seed=cfg.seed, data_seed=cfg.seed,
        logging_steps=cfg.logging_steps, save_strategy="steps", save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit, report_to=cfg.report_to or "none", dataloader_num_workers=0,
        disable_tqdm=True, log_completions=False,
    )


def build_trainer(cfg: RLConfig, train_dataset=None, reward_funcs: list[Callable[..., list[float]]] | None = None,
                  model: Any = None, processing_class: Any = None):
    """A ready GPPOTrainer: data from cfg.train_files unless given; rewards from train.rewards unless given."""
    from transformers import AutoTokenizer

    from cotforge.train.callbacks import CsvJsonLogger
    from cotforge.train.data.rl import load_rl_dataset

    if train_dataset is None:
        if not cfg.train_files:
            raise ValueError("config field 'train_files' is empty and no dataset was given")
        train_dataset = load_rl_dataset(cfg.train_files, limit=cfg.limit)
    tok = processing_class or AutoTokenizer.from_pretrained(cfg.model)
    if reward_funcs is None:
        reward_funcs = [make_reward_func(RewardConfig(**cfg.reward), tokenizer=tok)]
    args = grpo_args(cfg)
    check_training_args(args)  # refuse launches that would silently train otherwise (train/distributed.py)
    trainer = trainer_class()(model=model or cfg.model, reward_funcs=reward_funcs, args=args,
                              train_dataset=train_dataset, processing_class=tok, rl_config=cfg,
                              callbacks=[CsvJsonLogger(cfg.output_dir, curves=PLOT_KEYS, png_name="curves.png")])
    return trainer


def resolve_resume(cfg: RLConfig) -> str | None:
    """"latest" -> newest checkpoint-N in output_dir (None if there is none); a path must exist."""
    r = cfg.resume_from_checkpoint
    if not r:
        return None
    if r == "latest":
        ckpts = sorted(Path(cfg.output_dir).glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
        return str(ckpts[-1]) if ckpts else None
    if not Path(r).is_dir():
        raise FileNotFoundError(f"resume_from_checkpoint: {r} is not a folder")
    return r


def run_rl(cfg: RLConfig, **build_kw: Any):
    """Train, save the final model to output_dir/final, write config.json; returns the trainer."""
    trainer = build_trainer(cfg, **build_kw)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rl_config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=2))
    trainer.train(resume_from_checkpoint=resolve_resume(cfg))
    trainer.save_model(str(out / "final"))
    return trainer


def run(cfg: RLConfig, ctx: StageContext) -> dict[str, Any]:
    """The rl stage: GPPO (or a baseline loss) on verl-style prompt rows; the model goes to output_dir/final."""
    from cotforge.train.callbacks import train_stats

    trainer = run_rl(cfg)
    return train_stats(cfg.output_dir, trainer.state.global_step)
