"""`GPPOConfig`: TRL's `GRPOConfig` with cotforge's GPPO fields, the report's batch structure and cotforge's defaults.

Written the way TRL's own GRPO variants are (e.g. `trl.experimental.gmpo.GMPOConfig`): every GRPOConfig /
TrainingArguments field can be set in YAML; the fields below are added or have a different default.

Batch structure (Klear-Reasoner [P] §4.1, official scripts [R] `perf_run_dapo_ours_{math,code}.sh`): one *rollout
batch* is `rollout_prompts` prompts x `num_generations` samples (128 x 8); it is consumed in *mini-batches* of
`mini_batch_prompts` prompts, one optimizer step each (16 for math, 32 for code), so a rollout batch gives
S = rollout_prompts / mini_batch_prompts optimizer steps (8 or 4), times `num_iterations` passes (ppo_epochs, 1).
Only the first of them is on-policy; the others see ratios != 1, which is where PPO clips and GPPO keeps a
bounded gradient. The mapping onto TRL (per process; P processes, micro-batch m = per_device_train_batch_size):

    gradient_accumulation_steps = mini_batch_prompts * num_generations / (m * P)
    steps_per_generation        = S * gradient_accumulation_steps      (generation_batch_size = rollout rows)

TRL computes old log-probs (`old_per_token_logps`) only when `gradient_accumulation_steps % (steps_per_generation
* num_iterations) != 0`, i.e. exactly when S * num_iterations > 1; otherwise it uses logp.detach() and every ratio
is 1, so GPPO, PPO-clip and plain policy gradient coincide. Such a config is refused unless `on_policy: true`.

cotforge defaults that differ from GRPOConfig's: loss_type gppo (TRL dapo), epsilon_high 0.28 (TRL = epsilon),
delta (dual-clip c) 10 (TRL none), bf16 auto = only on a bf16-capable CUDA device (TRL True), gradient
checkpointing off (TRL on), weight_decay 0.1, warmup 10 steps, constant_with_warmup (the official optimiser),
seed 0, logging every step, saves every 50 steps (3 kept), max_completion_length 1024 (TRL 512), vLLM IS
correction token_truncate with cap 2 (TRL sequence_mask, 3), one epoch, output_dir runs/rl, tqdm off.
"""

from __future__ import annotations

import logging
import os
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from trl import GRPOConfig

from cotforge.train.defaults import fill_auto_defaults
from cotforge.train.rl.groups import BALANCE_MODES, FILTER_METRICS, MINIBATCH_RULES
from cotforge.train.rl.losses import AGG_MODES, LOSS_TYPES
from cotforge.train.rl.rewards import RewardConfig

log = logging.getLogger(__name__)

OFFICIAL_MAX_LENGTH = 32768  # [R] README: below this the overlong filter is needed for stable training
# TRL loss knobs that GPPOTrainer.compute_loss does not implement: a non-default value would be silently ignored.
_UNSUPPORTED = {"beta": 0.0, "importance_sampling_level": "token", "top_entropy_quantile": 1.0, "entropy_coef": 0.0,
                "use_adaptive_entropy": False, "off_policy_mask_threshold": None, "use_liger_kernel": False,
                "mask_truncated_completions": False, "multi_objective_aggregation": "sum_then_normalize"}


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass
class GPPOConfig(GRPOConfig):
    """Configuration of `GPPOTrainer` (see the module docstring for the batch structure and the defaults)."""

    # ---- data
    model: str | None = field(default=None, metadata=_help("Starting checkpoint (the SFT output): folder or hub id."))
    train_files: list[str] = field(default_factory=list, metadata=_help(
        "verl-style RL parquet shards (files, folders or globs) written by the curation `mix` stage."))
    limit: int | None = field(default=None, metadata=_help("Use only the first N prompts (None: all)."))
    abilities: list[str] | None = field(default=None, metadata=_help(
        "Train only on rows of these abilities (e.g. [math] for the math RL stage, [code] for the code stage; "
        "[P] §4.1 runs math RL, then code RL). None: every row."))
    reward: dict[str, Any] = field(default_factory=dict, metadata=_help(
        "Reward values and format rules, KEY=VALUE (repeatable); keys (default): "
        + ", ".join(f"{f.name} ({f.default!r})" for f in fields(RewardConfig) if f.default is not MISSING)
        + ". Defaults are Klear-Reasoner's scoring."))

    # ---- loss (train.rl.losses.policy_loss)
    loss_type: str = field(default="gppo", metadata=_help(
        f"Policy loss: {' | '.join(LOSS_TYPES)}. ppo_clip with epsilon_high 0.28 is DAPO clip-higher; cispo clamps "
        "its detached weight to [1-epsilon, 1+epsilon_high] (verl's convention, not TRL's one-sided cap)."))
    epsilon_high: float | None = field(default=0.28, metadata=_help(
        "Upper clip 1+epsilon_high ([P] §4.1 and [R]: 0.28, Skywork-OR1's clip-higher)."))
    delta: float | None = field(default=10.0, metadata=_help(
        "Dual-clip c (verl clip_ratio_c): for A<0 the loss is capped at -c*A, zero gradient where r > c. Official "
        "scripts 10; the paper has none (null). Default 10: [R]'s value, and it only acts on ratios above 10. "
        "Not applied to cispo (its weight is already a clamped constant)."))
    gppo_beta1: float = field(default=1.0, metadata=_help(
        "GPPO general form ([P] Eq. 17 / CE-GPPO): scale of the low-side clipped gradient (A<0, r<1-epsilon)."))
    gppo_beta2: float = field(default=1.0, metadata=_help(
        "GPPO general form: scale of the high-side clipped gradient (A>0, r>1+epsilon_high). Klear-8B used 1/1."))
    loss_agg_mode: str = field(default="token-mean", metadata=_help(
        f"Loss reduction: {' | '.join(AGG_MODES)}. token-mean is [P] Eq. 7, over the tokens of one mini-batch."))
    sft_alpha: float = field(default=0.1, metadata=_help(
        "Weight of the token-mean NLL on correct rollouts ([P] §3.2.3, Table 6: 0.1; 0 = off)."))

    # ---- batch structure ([P] §4.1)
    rollout_prompts: int = field(default=128, metadata=_help(
        "Prompts per rollout batch (after group filtering); x num_generations samples each. [P]: 128."))
    mini_batch_prompts: int = field(default=16, metadata=_help(
        "Prompts per optimizer step. [P]: 16 (math), 32 (code) -> 8 or 4 optimizer steps per rollout batch."))
    on_policy: bool = field(default=False, metadata=_help(
        "Allow one optimizer step per rollout batch (ratio identically 1: GPPO = PPO-clip = policy gradient)."))
    oversample: int = field(default=2, metadata=_help(
        "Prompts sampled per rollout batch = oversample x rollout_prompts; after group filtering the first "
        "rollout_prompts kept groups are trained on ([R]: 256 sampled for 128, never regenerated). 1 = no top-up "
        "(the paper's zero-advantage ablation, §5.2.5)."))

    group_balance: str = field(default="tokens", metadata=_help(
        f"{' | '.join(BALANCE_MODES)}: which surviving groups the top-up keeps and where they train. tokens: the "
        "first in sampling order ([R] batch[:traj_bsz]), then whole groups moved between processes so each has the "
        "same number of groups (+-1) and about the same prompt + completion tokens (greedy, largest group first); "
        "procs: the same number from each process, groups stay where they were generated; first: the first in "
        "sampling order, left where generated (with several processes the first ones fill up). One process: all "
        "the same."))

    minibatch_rule: str = field(default="fixed", metadata=_help(
        f"{' | '.join(MINIBATCH_RULES)}: how the kept groups of a rollout fill its optimizer steps when fewer than "
        "rollout_prompts survive. fixed: every step of the rollout trains on a share (smaller mini-batches); ceil: "
        "the official rule, mini-batches of mini_batch_prompts groups, ceil(N / mini_batch_prompts) steps, the last "
        "one's loss scaled by its size / mini_batch_prompts, the rollout's remaining steps left out (no gradient, "
        "no optimizer or weight-decay change, no LR-schedule step; global_step, logging and saves count only the "
        "steps taken, max_steps and the epochs bound the loop of taken + left-out steps)."))

    # ---- filtering and advantages (train.rl.groups)
    filter_groups: bool = field(default=True, metadata=_help(
        "Drop groups whose metric is constant (DAPO dynamic sampling; [R] filter_groups.enable)."))
    filter_groups_metric: str = field(default="acc", metadata=_help(
        f"{' | '.join(FILTER_METRICS)}: acc = reward == correct score ([R] metric=acc); reward = raw reward range."))
    overlong_filter: bool | None = field(default=None, metadata=_help(
        "Drop truncated samples before grouping ([R] actor.overlong_filter). None: on when max_completion_length < "
        f"{OFFICIAL_MAX_LENGTH} ([R] README: needed below 32K, where GPPO and GRPO were unstable without it)."))
    advantage_eps: float = field(default=1e-6, metadata=_help("eps in (R - mean) / (std + eps) ([R]: 1e-6)."))

    # ---- cotforge defaults over GRPOConfig / TrainingArguments
    output_dir: str | None = field(default="runs/rl", metadata=_help("Checkpoints, final/ and the logs."))
    max_completion_length: int | None = field(default=1024, metadata=_help("Maximum completion tokens."))
    bf16: bool | None = field(default=None, metadata=_help(
        "bf16 mixed precision; None: on only when a bf16-capable CUDA device is used (TRL's default is on)."))
    activation_checkpointing: bool | None = field(default=None, metadata=_help(
        "Recompute activations in the backward pass to save memory; None: off (TRL's GRPOConfig: on)."))
    gradient_checkpointing: bool | None = field(default=None, metadata=_help(
        "Deprecated alias of activation_checkpointing (transformers 5)."))
    weight_decay: float = field(default=0.1, metadata=_help("AdamW weight decay ([R]: 0.1)."))
    warmup_steps: float = field(default=10, metadata=_help(
        "LR warmup in optimizer steps. The official `lr_warmup_steps=10` counts rollout batches (verl steps its "
        "scheduler once per update_actor): set warmup_rollouts instead to follow it."))
    warmup_rollouts: float | None = field(default=None, metadata=_help(
        "LR warmup in rollout batches ([R] lr_warmup_steps: 10); sets warmup_steps = warmup_rollouts x optimizer "
        "steps per rollout batch (10 x 8 = 80 for math, 10 x 4 = 40 for code). None: warmup_steps as given."))
    max_prompt_length: int | None = field(default=None, metadata=_help(
        "Prompt cap in tokens, left-truncated (the start of a long prompt is cut; [R] max_prompt_length 4096, "
        "truncation 'left'). None: no cap."))
    lr_scheduler_type: str = field(default="constant_with_warmup", metadata=_help(
        "LR schedule ([P] §4.1: constant 1e-6 for math, 5e-7 for code, after warmup)."))
    num_train_epochs: float = field(default=1.0, metadata=_help("Passes over the prompts (when max_steps <= 0)."))
    seed: int = field(default=0, metadata=_help("Seed of the sampler, init and sampling."))
    logging_steps: float = field(default=1, metadata=_help("Log every N optimizer steps."))
    save_steps: float = field(default=50, metadata=_help("Checkpoint every N optimizer steps."))
    save_total_limit: int | None = field(default=3, metadata=_help("Checkpoints kept."))
    report_to: None | str | list[str] = field(default_factory=lambda: ["tensorboard"], metadata=_help(
        "Loggers besides log.jsonl/log.csv/curves.png ([] or none: only those)."))
    disable_tqdm: bool | None = field(default=True, metadata=_help("Progress bars off (logs are per step)."))
    vllm_importance_sampling_mode: str = field(default="token_truncate", metadata=_help(
        "vLLM sampler/trainer IS correction: token_truncate | token_mask | sequence_truncate | sequence_mask."))
    vllm_importance_sampling_clip_max: float | None = field(default=2.0, metadata=_help("Upper IS-weight cap."))

    def __post_init__(self) -> None:
        self._check_own_fields()
        self._derive_batches()
        if self.warmup_rollouts is not None:
            if self.warmup_steps not in (0, 10) and self.warmup_steps != self._rollout_warmup():
                raise ValueError(f"warmup_rollouts: {self.warmup_rollouts} and warmup_steps: {self.warmup_steps} both "
                                 "set; give the warmup in one unit (rollout batches or optimizer steps)")
            self.warmup_steps = self._rollout_warmup()
        fill_auto_defaults(self, checkpointing=False)
        if self.overlong_filter is None:
            self.overlong_filter = (self.max_completion_length or 0) < OFFICIAL_MAX_LENGTH
        if isinstance(self.train_files, str):
            self.train_files = [self.train_files]
        if isinstance(self.abilities, str):
            self.abilities = [self.abilities]
        if self.report_to in ([], None):
            self.report_to = "none"
        super().__post_init__()
        if self.world_size != self._assumed_world_size:
            raise ValueError(f"per_device_train_batch_size: the batch structure was derived for "
                             f"{self._assumed_world_size} process(es) (WORLD_SIZE), but {self.world_size} run")

    # ------------------------------------------------------------------ batch structure
    def optimizer_steps_per_rollout(self) -> int:
        """Optimizer steps one rollout batch feeds: (rollout_prompts / mini_batch_prompts) x num_iterations."""
        return self.rollout_prompts // self.mini_batch_prompts * self.num_iterations

    def _rollout_warmup(self) -> int:
        return int(round(float(self.warmup_rollouts or 0) * self.optimizer_steps_per_rollout()))

    def describe_batches(self) -> str:
        """One line for logs and the dry-run: the rollout and mini-batch structure in the report's terms."""
        return (f"rollout batch {self.rollout_prompts} prompts x {self.num_generations} samples "
                f"(sampled from {self.oversample * self.rollout_prompts} prompts), mini-batch "
                f"{self.mini_batch_prompts} prompts; optimizer steps per rollout batch: "
                f"{self.optimizer_steps_per_rollout()}; lr {self.learning_rate:g}, warmup {self.warmup_steps:g} optimizer "
                f"steps" + (f" ({self.warmup_rollouts:g} rollout batches)" if self.warmup_rollouts is not None else "")
                + (f", prompts <= {self.max_prompt_length} tokens (left-truncated)" if self.max_prompt_length else "")
                + (", ceil(kept groups / mini-batch) steps" if self.minibatch_rule == "ceil" else ""))

    def _derive_batches(self) -> None:
        """Set TRL's gradient_accumulation_steps / steps_per_generation from the report's batch structure."""
        procs = int(os.environ.get("WORLD_SIZE", "1"))
        self._assumed_world_size = procs
        g, m = int(self.num_generations or 0), int(self.per_device_train_batch_size)
        if g < 2:
            raise ValueError(f"num_generations: {g}; group-normalised advantages need >= 2 samples per prompt")
        for name in ("rollout_prompts", "mini_batch_prompts", "oversample", "per_device_train_batch_size",
                     "num_iterations"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)}")
        if self.rollout_prompts % self.mini_batch_prompts:
            raise ValueError(f"rollout_prompts: {self.rollout_prompts} is not a multiple of mini_batch_prompts "
                             f"({self.mini_batch_prompts})")
        mini_rows = self.mini_batch_prompts * g
        if mini_rows % (m * procs):
            raise ValueError(f"per_device_train_batch_size: a mini-batch of {self.mini_batch_prompts} prompts x {g} = "
                             f"{mini_rows} samples does not split into micro-batches of {m} on {procs} process(es)")
        ga = mini_rows // (m * procs)
        spg = self.rollout_prompts // self.mini_batch_prompts * ga
        for name, derived, unset in (("gradient_accumulation_steps", ga, (1,)), ("steps_per_generation", spg, (None,)),
                                     ("generation_batch_size", self.rollout_prompts * g, (None,))):
            given = getattr(self, name)
            if given not in unset and given != derived:
                raise ValueError(f"{name}: {given} contradicts the batch structure (derived {derived} from "
                                 f"rollout_prompts, mini_batch_prompts, num_generations, per_device_train_batch_size)")
        self.gradient_accumulation_steps, self.steps_per_generation, self.generation_batch_size = ga, spg, None
        steps = self.optimizer_steps_per_rollout()
        if steps == 1 and not self.on_policy:
            raise ValueError(
                f"mini_batch_prompts: {self.mini_batch_prompts} = rollout_prompts with num_iterations 1 gives one "
                "optimizer step per rollout batch, so every ratio is exactly 1 and GPPO/PPO-clip never clip; use "
                "mini_batch_prompts < rollout_prompts (the report: 128 / 16 = 8 steps), or set on_policy: true")
        if steps > 1 and self.on_policy:
            raise ValueError(f"on_policy: true, but the batch structure gives {steps} optimizer steps per rollout")

    def _check_own_fields(self) -> None:
        """Validate the cotforge fields, naming the field (before TRL's own checks)."""
        checks = (("loss_type", self.loss_type in LOSS_TYPES, f"one of {LOSS_TYPES}"),
                  ("loss_agg_mode", self.loss_agg_mode in AGG_MODES, f"one of {AGG_MODES}"),
                  ("filter_groups_metric", self.filter_groups_metric in FILTER_METRICS, f"one of {FILTER_METRICS}"),
                  ("group_balance", self.group_balance in BALANCE_MODES, f"one of {BALANCE_MODES}"),
                  ("minibatch_rule", self.minibatch_rule in MINIBATCH_RULES, f"one of {MINIBATCH_RULES}"),
                  ("epsilon", 0.0 <= self.epsilon < 1.0, "in [0, 1)"),
                  ("epsilon_high", self.epsilon_high is None or self.epsilon_high >= 0.0, ">= 0"),
                  ("delta", self.delta is None or self.delta > 1.0, "> 1 (or null: no dual-clip)"),
                  ("gppo_beta1", self.gppo_beta1 >= 0.0, ">= 0"), ("gppo_beta2", self.gppo_beta2 >= 0.0, ">= 0"),
                  ("sft_alpha", self.sft_alpha >= 0.0, ">= 0"), ("advantage_eps", self.advantage_eps > 0.0, "> 0"),
                  ("warmup_rollouts", self.warmup_rollouts is None or self.warmup_rollouts >= 0, ">= 0 (or null)"),
                  ("max_prompt_length", self.max_prompt_length is None or self.max_prompt_length >= 1,
                   ">= 1 (or null: no cap)"),
                  ("oversample", self.oversample == 1 or self.filter_groups,
                   "1 when filter_groups is off (nothing to top up)"))
        for name, ok, want in checks:
            if not ok:
                raise ValueError(f"{name}: {getattr(self, name)!r} must be {want}")
        for name, default in _UNSUPPORTED.items():
            if getattr(self, name) != default:
                raise ValueError(f"{name}: {getattr(self, name)!r} is not supported by GPPOTrainer (its loss does not "
                                 f"implement it; leave it at {default!r})"
                                 + ("; use overlong_filter" if name == "mask_truncated_completions" else ""))
        if not isinstance(self.reward, dict):
            raise ValueError(f"reward: expected a mapping of RewardConfig fields, got {type(self.reward).__name__}")
        try:
            RewardConfig(**self.reward)
        except TypeError as e:
            raise ValueError(f"reward: {e}") from e

    def reward_config(self) -> RewardConfig:
        """The RewardConfig built from `reward`."""
        return RewardConfig(**self.reward)
