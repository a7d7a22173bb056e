"""`GPPOTrainer`: TRL's GRPOTrainer with cotforge's policy losses and the official Klear batch rules.

Written the way TRL's own GRPO variants are (`trl.experimental.gmpo.GMPOTrainer`): a module-level subclass whose
config is `GPPOConfig(GRPOConfig)`. What comes from TRL 1.16 (pinned trl>=1.16,<1.17): prompt batching into groups,
generation (HF generate with use_vllm=False; vLLM colocate/server otherwise), reward calls, old log-probs for the
off-policy mini-batches, the vLLM sampler/trainer importance-sampling ratio, checkpointing and report_to logging.

What this module overrides, and why:
  * `compute_loss` (the documented extension point, TRL PR #6918): `policy_loss(args.loss_type, ...)` over the
    kept tokens, normalised by the kept tokens of the current mini-batch (one optimizer step; [P] Eq. 7 per step),
    plus sft_alpha x token-mean NLL on correct rollouts ([P] §3.2.3). It calls TRL's
    `_get_per_token_logps_and_entropies` (private, but the function TRL used for the old log-probs, so current and
    old log-probs come from the same code) and logs, once per optimizer step, clip fractions by side, ratio
    min/mean/max, the share of tokens PPO would have zeroed, and which mini-batch of the rollout it was.
  * `_generate_and_score_completions` is wrapped (super() is called, nothing copied): the gathered rewards (recorded
    by wrapping `_calculate_rewards`) go through `groups.select_groups` (unscorable and overlong rows dropped before
    grouping, accuracy-based group filter, top-up from the oversampled prompts, advantages recomputed over what is
    kept), and the batch is cut to the kept rows. TRL then shuffles and splits it into the mini-batches.
  * `get_train_dataloader` / `_get_train_sampler`: the sampler yields `oversample` x rollout_prompts prompts per
    rollout batch (TRL's RepeatSampler with a larger batch), the prompts the top-up draws from.
Logs: report_to plus output_dir/log.jsonl, log.csv and curves.png (train.callbacks).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from trl import GRPOTrainer
from trl.trainer.utils import RepeatSampler

from cotforge.curate.core.config import build
from cotforge.train.defaults import resolve_resume
from cotforge.train.distributed import check_training_args
from cotforge.train.rl.config import GPPOConfig
from cotforge.train.rl.groups import select_groups
from cotforge.train.rl.losses import masked_nll, policy_loss
from cotforge.train.rl.rewards import make_reward_func

if TYPE_CHECKING:
    from cotforge.curate.context import StageContext

log = logging.getLogger(__name__)

PLOT_KEYS = ("reward", "accuracy", "entropy", "clip/frac_high", "clip/frac_low", "ratio/max",
             "completions/mean_length", "filter/dropped_group_frac", "loss", "grad_norm")
_COUNTS = ("clip_frac_high", "clip_frac_low", "dual_clip_frac", "ppo_zero_grad_frac", "zero_grad_frac")


class GPPOTrainer(GRPOTrainer):
    """GRPOTrainer with GPPO / PPO-clip / CISPO / GSPO losses, SFT-on-correct and the official group filtering."""

    _tag_names = ["trl", "gppo", "cotforge"]

    def __init__(self, model: Any, reward_funcs: Any, args: GPPOConfig | None = None, **kwargs: Any):
        if args is None:
            args = GPPOConfig()
        if not isinstance(args, GPPOConfig):
            raise TypeError(f"GPPOTrainer needs a GPPOConfig, got {type(args).__name__}")
        self._rewards_per_func: torch.Tensor | None = None
        self._step_acc: dict[str, float] = {}
        self._mb_tokens: tuple[int, torch.Tensor] | None = None
        super().__init__(model, reward_funcs, args=args, **kwargs)

    # ------------------------------------------------------------------ data: oversampled prompts
    def _get_train_sampler(self, dataset=None):
        """TRL's RepeatSampler over `oversample` x the rollout's prompts (the pool the top-up draws from)."""
        if self.args.oversample == 1:
            return super()._get_train_sampler(dataset)
        dataset = self.train_dataset if dataset is None else dataset
        prompts = self.args.generation_batch_size // self.num_generations * self.args.oversample
        if len(dataset) < prompts:
            raise ValueError(f"oversample: a rollout samples {prompts} prompts but the dataset has {len(dataset)}")
        return RepeatSampler(data_source=dataset, mini_repeat_count=self.num_generations, batch_size=prompts,
                             repeat_count=self.num_iterations * self.args.steps_per_generation,
                             shuffle=self.shuffle_dataset, seed=self.args.seed)

    def get_train_dataloader(self):
        """TRL's dataloader, with `oversample` x the rows per rollout batch."""
        if self.args.oversample == 1:
            return super().get_train_dataloader()
        if isinstance(self.train_dataset, torch.utils.data.IterableDataset):
            raise ValueError("oversample > 1 needs a map-style dataset (datasets.Dataset), not an iterable one")
        return self._get_dataloader(dataset=self.train_dataset, description="Training",
                                    batch_size=self._train_batch_size * self.args.steps_per_generation
                                    * self.args.oversample, sampler_fn=self._get_train_sampler, is_training=True)

    # ------------------------------------------------------------------ rollouts: wrap, never copy
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        """TRL's reward call; the gathered [rows, funcs] rewards (NaN = None) are kept for the group filter."""
        out = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._rewards_per_func = out
        return out

    def _generate_and_score_completions(self, inputs):
        """TRL's rollout, then `select_groups` on the gathered rewards and a cut of the batch to the kept rows."""
        self._rewards_per_func = None
        out = super()._generate_and_score_completions(inputs)
        if not self.model.training:
            return out
        sel, truncated = self._select(out)
        n = len(out["completion_mask"])
        local = slice(self.accelerator.process_index * n, (self.accelerator.process_index + 1) * n)
        keep, adv, correct = sel.keep[local], sel.advantages[local], sel.correct[local]
        rows = self._rows_to_train(keep)
        dev = out["completion_mask"].device
        weight = keep[rows].to(torch.float32).to(dev)
        cut = {k: _take_rows(v, rows, n) for k, v in out.items()}
        cut["advantages"] = adv[rows].to(dev)
        cut["rl_weight"], cut["rl_correct"] = weight, correct[rows].to(torch.float32).to(dev)
        mask = _loss_mask(cut) * weight[:, None]
        cut["rl_num_tokens"] = self.accelerator.gather(mask.sum().reshape(1)).sum()
        cut["num_items_in_batch"] = cut["rl_num_tokens"]
        m = self._metrics["train"]
        scored = ~torch.isnan(self._total_rewards())
        m["accuracy"].append(float(sel.correct[scored].float().mean()) if scored.any() else math.nan)
        m["filter/groups_sampled"].append(float(sel.n_groups))
        m["filter/groups_kept"].append(float(sel.n_selected))
        m["filter/dropped_group_frac"].append(1.0 - sel.n_mixed / max(sel.n_groups, 1))
        m["filter/truncated_frac"].append(float(truncated.float().mean()))
        m["filter/unscorable_frac"].append(sel.n_unscorable / max(len(scored), 1))
        m["filter/kept_rows"].append(float(self.accelerator.gather(keep.sum().reshape(1).to(dev)).sum()))
        return cut

    def _total_rewards(self) -> torch.Tensor:
        """Weighted sum over reward functions of the gathered rewards; NaN where every function returned None."""
        rpf = self._rewards_per_func
        if rpf is None:
            raise RuntimeError("no rewards were recorded for this rollout (TRL's reward flow changed?)")
        total = (rpf * self.reward_weights.to(rpf.device)[None, :]).nansum(1)
        return torch.where(torch.isnan(rpf).all(1), torch.full_like(total, math.nan), total)

    def _select(self, out: dict[str, Any]):
        """Run the group rules on the gathered rollout; returns the selection and the gathered truncation flags."""
        ids, mask = out["completion_ids"], out["completion_mask"]
        lengths = mask.sum(1)
        last = ids.gather(1, (lengths - 1).clamp(min=0)[:, None]).squeeze(1)
        stop_ids = [t for t in (*self.eos_token_ids, self._tokenizer.pad_token_id) if t is not None]
        truncated = (lengths > 0) & ~torch.isin(last, torch.tensor(stop_ids, device=ids.device))
        truncated = self.accelerator.gather(truncated.int()).bool().cpu()
        a = self.args
        sel = select_groups(self._total_rewards().cpu(), self.num_generations,
                            correct_score=a.reward_config().correct, truncated=truncated,
                            overlong_filter=bool(a.overlong_filter), filter_groups=a.filter_groups,
                            metric=a.filter_groups_metric, max_groups=a.rollout_prompts, scale=str(a.scale_rewards),
                            eps=a.advantage_eps)
        return sel, truncated

    def _rows_to_train(self, keep: torch.Tensor) -> torch.Tensor:
        """Indices of the kept local rows, padded with zero-weight rows to a multiple of the micro-steps per rollout.

        TRL splits the batch into `steps_per_generation` equal micro-batches and drops a remainder, so the kept rows
        are padded (with rows that were dropped, weight 0: no loss, no NLL) to a multiple of it, at least one row per
        micro-batch. Fewer kept rows mean smaller mini-batches, not fewer optimizer steps (verl would take fewer)."""
        spg = self.args.steps_per_generation
        kept = torch.nonzero(keep).squeeze(1)
        pad = (-len(kept)) % spg if len(kept) else spg
        filler = torch.nonzero(~keep).squeeze(1)[:pad]
        return torch.cat([kept, filler])

    # ------------------------------------------------------------------ loss: the documented extension point
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """policy_loss(args.loss_type) over kept tokens / kept tokens of the mini-batch, + sft_alpha * NLL(correct)."""
        if return_outputs:
            raise ValueError("GPPOTrainer does not return outputs")
        mode = "train" if self.model.training else "eval"
        a = self.args
        prompt_ids, completion_ids = inputs["prompt_ids"], inputs["completion_ids"]
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention_mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        logps, entropies, _ = self._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, completion_ids.size(1), compute_entropy=True)
        mask = _loss_mask(inputs).to(logps.dtype)
        weight = inputs.get("rl_weight", torch.ones(mask.shape[0], device=mask.device)).to(logps.dtype)
        loss_mask = mask * weight[:, None]
        old = inputs.get("old_per_token_logps")
        old = logps.detach() if old is None else old
        ga = self.current_gradient_accumulation_steps if mode == "train" else 1
        token_norm = self._minibatch_tokens(loss_mask) if (a.loss_agg_mode == "token-mean" and mode == "train") else None
        is_w = inputs.get("importance_sampling_ratio") if self.use_vllm else None
        pg, metrics = policy_loss(a.loss_type, logps, old, inputs["advantages"], loss_mask, eps_low=a.epsilon,
                                  eps_high=self.epsilon_high, beta1=a.gppo_beta1, beta2=a.gppo_beta2,
                                  dual_clip=a.delta, agg=a.loss_agg_mode, is_weights=is_w,
                                  token_normalizer=token_norm, norm_len=self.max_completion_length)
        loss = pg if token_norm is not None else pg / ga
        nll = torch.zeros((), dtype=logps.dtype, device=logps.device)
        if a.sft_alpha > 0:
            correct = inputs.get("rl_correct", torch.zeros_like(weight)).to(logps.dtype) * weight
            nll = masked_nll(logps, mask * correct[:, None])
            loss = loss + a.sft_alpha * nll / ga
        self._accumulate(mode, metrics, entropies, loss_mask, pg, nll)
        return loss

    def _minibatch_tokens(self, loss_mask: torch.Tensor) -> torch.Tensor:
        """Kept tokens of the current mini-batch (all processes) / processes: the token-mean normaliser.

        The mini-batch is micro-batches [k*GA, (k+1)*GA) of TRL's buffered rollout; counting them exactly makes each
        optimizer step's loss the token mean over its own mini-batch. Falls back to this micro-batch x GA."""
        ga = self.current_gradient_accumulation_steps
        key = self._step // ga
        if self._mb_tokens is None or self._mb_tokens[0] != key:
            buf = getattr(self, "_buffered_inputs", None)
            spg = self.args.steps_per_generation
            k = (self._step % spg) // ga
            if buf and len(buf) == spg and all("rl_weight" in b for b in buf):
                local = sum((_loss_mask(b) * b["rl_weight"][:, None]).sum() for b in buf[k * ga:(k + 1) * ga])
            else:
                local = loss_mask.sum() * ga
            total = self.accelerator.gather(torch.as_tensor(local, dtype=torch.float32,
                                                            device=loss_mask.device).reshape(1)).sum()
            self._mb_tokens = (key, total)
        return self._mb_tokens[1].to(loss_mask.dtype) / self.accelerator.num_processes

    def _accumulate(self, mode: str, m: dict[str, float], entropies, mask, pg, nll) -> None:
        """Pool the loss metrics over the micro-batches of one optimizer step; log them once at its last one."""
        acc = self._step_acc
        n = float(m["n_tokens"])
        ent = float((entropies.detach() * mask).sum())
        local = {"n": n, "ent": ent, "pg": float(pg.detach()), "nll": float(nll.detach()), "micro": 1.0,
                 "ratio_sum": 0.0 if n == 0 else m["ratio_mean"] * n}
        local.update({k: m[k] * n for k in _COUNTS})
        for k, v in local.items():
            acc[k] = acc.get(k, 0.0) + v
        acc["ratio_min"] = min(acc.get("ratio_min", math.inf), m["ratio_min"] if n else math.inf)
        acc["ratio_max"] = max(acc.get("ratio_max", -math.inf), m["ratio_max"] if n else -math.inf)
        ga = self.current_gradient_accumulation_steps if mode == "train" else 1
        if mode == "train" and (self._step + 1) % ga:
            return
        keys = sorted(k for k in acc if k not in ("ratio_min", "ratio_max"))
        dev = mask.device
        sums = self.accelerator.gather(torch.tensor([acc[k] for k in keys], dtype=torch.float64, device=dev)[None])
        tot = dict(zip(keys, sums.sum(0).tolist(), strict=True))
        lo = float(self.accelerator.gather(torch.tensor([acc["ratio_min"]], device=dev)).min())
        hi = float(self.accelerator.gather(torch.tensor([acc["ratio_max"]], device=dev)).max())
        self._step_acc = {}
        out = self._metrics[mode]
        n_all = tot["n"]
        out["policy_loss"].append(tot["pg"] / tot["micro"])
        out["sft_nll"].append(tot["nll"] / tot["micro"])
        out["tokens/trained"].append(n_all)
        out["entropy"].append(tot["ent"] / n_all if n_all else math.nan)
        for k in _COUNTS:
            out[f"clip/{k.replace('clip_', '')}"].append(tot[k] / n_all if n_all else 0.0)
        out["ratio/mean"].append(tot["ratio_sum"] / n_all if n_all else math.nan)
        out["ratio/min"].append(lo if n_all else math.nan)
        out["ratio/max"].append(hi if n_all else math.nan)
        if mode == "train":
            every = self.args.steps_per_generation * self.num_iterations
            out["rollout/minibatch"].append(float((self._step % every) // ga))
            out["rollout/index"].append(float(self._step // every))


def _loss_mask(batch: dict[str, Any]) -> torch.Tensor:
    """Completion mask times TRL's tool mask (tokens a tool wrote are not the policy's)."""
    mask = batch["completion_mask"]
    return mask * batch["tool_mask"] if batch.get("tool_mask") is not None else mask


def _take_rows(value: Any, rows: torch.Tensor, n: int) -> Any:
    """Index a batch entry by rows when it is per-row (tensor with dim 0 == n, or a list of n); else keep it."""
    if isinstance(value, torch.Tensor) and value.ndim > 0 and value.shape[0] == n:
        return value[rows.to(value.device)]
    if isinstance(value, list) and len(value) == n:
        return [value[i] for i in rows.tolist()]
    return value


# ---------------------------------------------------------------------- entry points
def build_trainer(cfg: GPPOConfig, train_dataset=None, reward_funcs: list[Callable[..., list[float]]] | None = None,
                  model: Any = None, processing_class: Any = None, callbacks: Sequence[Any] = ()) -> GPPOTrainer:
    """A ready GPPOTrainer: data from cfg.train_files unless given; rewards from train.rl.rewards unless given;
    `callbacks` (transformers TrainerCallbacks) run after the log writer."""
    from transformers import AutoTokenizer

    from cotforge.train.callbacks import CsvJsonLogger, quiet_printer
    from cotforge.train.rl.data import load_rl_dataset

    if train_dataset is None and model is None:
        preflight(cfg)
    if train_dataset is None:
        if not cfg.train_files:
            raise ValueError("train_files: empty, and no dataset was given")
        train_dataset = load_rl_dataset(cfg.train_files, limit=cfg.limit)
    if model is None and not cfg.model:
        raise ValueError("model: empty, and no model was given")
    tok = processing_class or AutoTokenizer.from_pretrained(cfg.model)
    if reward_funcs is None:
        reward_funcs = [make_reward_func(cfg.reward_config(), tokenizer=tok,
                                         chat_template_kwargs=cfg.chat_template_kwargs)]
    log.info("GPPO: %s", cfg.describe_batches())
    check_training_args(cfg)  # refuse launches that would silently train otherwise (train/distributed.py)
    trainer = GPPOTrainer(model=model or cfg.model, reward_funcs=reward_funcs, args=cfg,
                          train_dataset=train_dataset, processing_class=tok,
                          callbacks=[CsvJsonLogger(cfg.output_dir, curves=PLOT_KEYS, png_name="curves.png"),
                                     *callbacks])
    quiet_printer(trainer)
    return trainer


def preflight(cfg: GPPOConfig) -> dict[str, Any]:
    """Check the inputs before anything loads (train.preflight): the prompt shards exist and their first row
    is a valid verl row, the model's config.json reads, the completion length fits the model. Returns what
    `--dry-run` prints; raises PreflightError (a ConfigError) naming the flag."""
    import pyarrow.parquet as pq

    from cotforge.train.preflight import (
        PreflightError,
        check_data,
        check_max_length,
        check_model,
        check_output_dir,
    )
    from cotforge.train.rl.data import resolve_parquet, to_trl_row

    check_data(cfg.train_files, "--train-files (--data)")
    try:
        files = resolve_parquet(cfg.train_files)
    except FileNotFoundError as e:
        raise PreflightError(f"--train-files (--data): {e}") from e
    rows = 0
    for f in files:
        try:
            pf = pq.ParquetFile(f)
        except Exception as e:  # pyarrow raises several types for a file that is not Parquet
            raise PreflightError(f"--train-files (--data): {f} is not a readable Parquet file ({e})") from e
        rows += pf.metadata.num_rows
        if rows and pf.metadata.num_rows:
            first = pf.read_row_group(0).slice(0, 1).to_pylist()[0]
            try:
                to_trl_row(first, f"{f}:0")
            except ValueError as e:
                raise PreflightError(f"--train-files (--data): {e} (expected the verl rows of `cotforge curate mix`'s "
                                     "rl/ folder)") from e
    if rows == 0:
        raise PreflightError(f"--train-files (--data): {len(files)} file(s), 0 rows")
    model_config = check_model(cfg.model, "--model")
    check_max_length(cfg.max_completion_length, model_config, flag="--max-completion-length")
    check_output_dir(cfg.output_dir)
    return {"files": len(files), "prompts": min(rows, cfg.limit) if cfg.limit else rows,
            "model_type": getattr(model_config, "model_type", None), "batches": cfg.describe_batches()}



def run_rl(cfg: GPPOConfig, **build_kw: Any) -> GPPOTrainer:
    """Train, save the final model to output_dir/final, write rl_config.json; returns the trainer."""
    trainer = build_trainer(cfg, **build_kw)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rl_config.json").write_text(cfg.to_json_string())
    trainer.train(resume_from_checkpoint=resolve_resume(cfg.resume_from_checkpoint, cfg.output_dir,
                                                                 "resume_from_checkpoint"))
    trainer.save_model(str(out / "final"))
    return trainer


def config_from_dict(data: dict[str, Any], where: str = "config") -> GPPOConfig:
    """GPPOConfig from a YAML mapping through the one config loader: unknown keys, wrong types and bad values
    are a ConfigError (a ValueError) naming `where` and the field."""
    return build(GPPOConfig, data, where, what="RL config key")


def run(cfg: GPPOConfig, ctx: StageContext) -> dict[str, Any]:
    """The rl stage: GPPO (or a baseline loss) on verl-style prompt rows; the model goes to output_dir/final."""
    from cotforge.train.callbacks import train_stats

    trainer = run_rl(cfg)
    return train_stats(cfg.output_dir, trainer.state.global_step)
