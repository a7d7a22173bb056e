"""`GPPOTrainer`: TRL's GRPOTrainer with cotforge's policy losses and the official Klear batch rules.

Written the way TRL's own GRPO variants are (`trl.experimental.gmpo.GMPOTrainer`): a module-level subclass whose
config is `GPPOConfig(GRPOConfig)`. What comes from TRL 1.16 (pinned trl>=1.16,<1.17): prompt batching into groups,
generation (HF generate with use_vllm=False; vLLM colocate/server otherwise), reward calls, the log-prob forward,
checkpointing and report_to logging.

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
    kept); the batch is cut to the kept rows, whole groups moved between processes by tokens (`_move_groups`,
    `group_balance: tokens`); old log-probs (TRL's call returns a placeholder during the rollout) and vLLM's
    sampler/trainer IS weights are computed after that, for the rows that train only. TRL then shuffles and
    splits the batch into the mini-batches (or `_ceil_micro_batches` arranges them under the ceil rule).
  * `_LeaveOutEmptySteps` (a callback) and `_init_training_state`: an optimizer step that trains nothing on any
    process is left out: no optimizer or LR-schedule step, not counted in `global_step`; resume finds the data
    position from the left-out steps a checkpoint records.
  * `get_train_dataloader` / `_get_train_sampler`: the sampler yields `oversample` x rollout_prompts prompts per
    rollout batch (TRL's RepeatSampler with a larger batch), the prompts the top-up draws from.
Logs: report_to plus output_dir/log.jsonl, log.csv and curves.png (train.callbacks).

One module on purpose: every override reads the same TRL internals (pinned by tests/test_trl_pins.py) and the
batch state they share; losses, groups, rewards and data live in their own modules.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from transformers import TrainerCallback
from trl import GRPOTrainer
from trl.models.utils import disable_gradient_checkpointing
from trl.trainer.utils import RepeatSampler

from cotforge.curate.core.config import build
from cotforge.train.defaults import resolve_resume
from cotforge.train.distributed import check_training_args
from cotforge.train.rl.config import GPPOConfig
from cotforge.train.rl.groups import assign_groups, ceil_micro_batches, rows_to_train, select_groups
from cotforge.train.rl.losses import masked_nll, policy_loss, sampler_is_ratio
from cotforge.train.rl.rewards import make_reward_func

if TYPE_CHECKING:
    from cotforge.curate.context import StageContext

log = logging.getLogger(__name__)

PLOT_KEYS = ("reward", "accuracy", "entropy", "clip/frac_high", "clip/frac_low", "ratio/max",
             "completions/mean_length", "filter/dropped_group_frac", "loss", "grad_norm")
LEFT_OUT_FILE = "left_out_steps.json"  # in a checkpoint: optimizer steps left out before it
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
        self._deferring_old = self._deferred_old = False
        self._step_acc: dict[str, float] = {}
        self._mb_tokens: tuple[int, torch.Tensor] | None = None
        self._ceil_buffers: list[dict[str, Any]] | None = None
        self._skip_step = False
        self._left_out_steps = 0  # optimizer steps left out so far (not in global_step)
        super().__init__(model, reward_funcs, args=args, **kwargs)
        # right after transformers' DefaultFlowCallback (which decides logging and saving from the step count):
        # every later callback sees a left-out step with global_step already taken back
        flow = next((i for i, c in enumerate(self.callback_handler.callbacks) if type(c).__name__ == "DefaultFlowCallback"),
                    -1)
        self.callback_handler.callbacks.insert(flow + 1, _LeaveOutEmptySteps(self))

    @property
    def left_out_steps(self) -> int:
        """Optimizer steps left out so far (trained nothing on any process; not counted in `state.global_step`)."""
        return self._left_out_steps

    def _init_training_state(self, max_steps, num_update_steps_per_epoch, num_train_epochs, resume_from_checkpoint,
                             trial):
        """transformers' state set-up; on resume, the data position counts the optimizer steps left out before the
        checkpoint too (`global_step` counts only the steps taken; see `_LeaveOutEmptySteps`), and TRL's micro-step
        counter `_step` (not saved by TRL) is put at that position, so a checkpoint taken inside a rollout batch
        resumes at its place in the rollout (TRL regenerates the rollout there: its samples are not saved)."""
        epochs, in_epoch = super()._init_training_state(max_steps, num_update_steps_per_epoch, num_train_epochs,
                                                        resume_from_checkpoint, trial)
        self._left_out_steps = 0
        if resume_from_checkpoint is None:
            return epochs, in_epoch
        record = Path(resume_from_checkpoint) / LEFT_OUT_FILE
        if record.is_file():
            self._left_out_steps = int(json.loads(record.read_text())["left_out_steps"])
        loop = self.state.global_step + self._left_out_steps
        self._step = loop * self.args.gradient_accumulation_steps
        if self._left_out_steps:
            epochs = loop // num_update_steps_per_epoch
            if not self.args.ignore_data_skip:
                in_epoch = loop % num_update_steps_per_epoch * self.args.gradient_accumulation_steps
        return epochs, in_epoch

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
    def _tokenize_prompts(self, prompts: list):
        """TRL's prompt tokenisation, then the `max_prompt_length` cap: a longer prompt keeps its last tokens
        (left truncation, as [R]'s `truncation='left'`), so the question's end and the generation prompt stay."""
        prompt_ids, images, fields = super()._tokenize_prompts(prompts)
        cap = self.args.max_prompt_length
        if cap:
            long = sum(len(ids) > cap for ids in prompt_ids)
            if long:
                log.warning("%d of %d prompts longer than max_prompt_length=%d tokens: left-truncated", long,
                            len(prompt_ids), cap)
                prompt_ids = [list(ids)[-cap:] for ids in prompt_ids]
            self._metrics["train" if self.model.training else "eval"]["prompts/truncated_frac"].append(
                long / max(len(prompt_ids), 1))
        return prompt_ids, images, fields

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        """TRL's reward call; the gathered [rows, funcs] rewards (NaN = None) are kept for the group filter."""
        out = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._rewards_per_func = out
        return out

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        """TRL's log-prob forward; during a rollout whose old log-probs are deferred (see `_defer_old`) the call
        TRL makes for them returns a zero placeholder instead: they are computed after the group filter, for the
        rows that train only (`_old_logps_for_kept`)."""
        if self._deferring_old and not torch.is_grad_enabled():
            self._deferred_old = True
            return torch.zeros(input_ids.size(0), logits_to_keep, device=input_ids.device), None, None
        return super()._get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep,
                                                         *args, **kwargs)

    def _defer_old(self) -> bool:
        """Old log-probs wait for the group filter (training, text models: a multimodal model's forward needs extra
        inputs). With vLLM's sampler/trainer IS correction on, TRL's weight from the placeholder is discarded and
        recomputed for the kept rows (`_is_ratio_for_kept`)."""
        return self.model.training and not getattr(self, "_is_vlm", False)

    def _prepare_inputs(self, generation_batch):
        """TRL's buffering; under minibatch_rule ceil, the rollout's micro-batches are the ones `_ceil_micro_batches`
        arranged (TRL's shuffled equal split of the same rows is discarded)."""
        inputs = super()._prepare_inputs(generation_batch)
        if self.model.training and self._ceil_buffers is not None:
            self._buffered_inputs, self._ceil_buffers = self._ceil_buffers, None
            inputs = self._buffered_inputs[self._step % self.args.steps_per_generation]
        return inputs

    def _generate_and_score_completions(self, inputs):
        """TRL's rollout, then `select_groups` on the gathered rewards and a cut of the batch to the kept rows;
        old log-probs are computed after the cut, for the kept rows only (`_defer_old`)."""
        self._rewards_per_func = None
        self._deferring_old, self._deferred_old = self._defer_old(), False
        try:
            out = super()._generate_and_score_completions(inputs)
        finally:
            self._deferring_old = False
        if not self.model.training:
            return out
        sel, truncated = self._select(out)
        n = len(out["completion_mask"])
        procs, me = self.accelerator.num_processes, self.accelerator.process_index
        g = self.num_generations
        dev = out["completion_mask"].device
        keep = sel.keep[me * n:(me + 1) * n]
        if self.args.group_balance == "tokens" and procs > 1 and bool(sel.keep.any()):
            cut, gids, weight, counts = self._move_groups(out, sel)
        else:  # groups stay where they were generated
            rows = self._rows_to_train(keep)
            gids = rows + me * n
            weight = keep[rows].to(torch.float32)
            cut = {k: _take_rows(v, rows, n) for k, v in out.items()}
            counts = sel.keep.view(procs, -1, g).any(2).sum(1).tolist()
        weight = weight.to(dev)
        cut["advantages"] = sel.advantages[gids].to(dev)
        cut["rl_weight"], cut["rl_correct"] = weight, sel.correct[gids].to(torch.float32).to(dev)
        if self._deferred_old and "old_per_token_logps" in cut:
            cut["old_per_token_logps"] = self._old_logps_for_kept(cut, weight > 0)
            if self.use_vllm and self.vllm_importance_sampling_correction:
                cut["importance_sampling_ratio"] = self._is_ratio_for_kept(cut, weight > 0)
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
        m["balance/groups_per_process_min"].append(float(min(counts)))
        m["balance/groups_per_process_max"].append(float(max(counts)))
        if self.args.minibatch_rule == "ceil":
            n_kept = int((weight > 0).sum())
            self._ceil_buffers = self._ceil_micro_batches(cut, (gids[:n_kept] // g).tolist(), counts)
        return cut

    def _move_groups(self, out: dict[str, Any], sel) -> tuple[dict[str, Any], torch.Tensor, torch.Tensor, list[int]]:
        """`group_balance: tokens` on several processes: the kept rows of every process are gathered (padded to
        the longest prompt and completion), whole kept groups are assigned to processes by `groups.assign_groups`
        on their prompt + completion tokens, and this process keeps the rows of its groups, in sampling order.
        Returns that batch, the global row of each of its rows, their weights (1; 0 on zero-weight rows that only
        fill TRL's equal split under `minibatch_rule: fixed`, or stand in for a process without groups), and the
        kept groups per process. Cost: one padded all-gather of the kept rows (old log-probs are computed after
        it, on the rows that train)."""
        n = len(out["completion_mask"])
        procs, me, g = self.accelerator.num_processes, self.accelerator.process_index, self.num_generations
        per_row = {k: v for k, v in out.items() if isinstance(v, torch.Tensor) and v.ndim > 0 and v.shape[0] == n}
        lists = [k for k, v in out.items() if isinstance(v, list) and len(v) == n]
        if lists:
            raise ValueError(f"group_balance: tokens cannot move the per-row lists {lists} between processes; use "
                             "group_balance: procs")
        # placeholders of deferred old log-probs / IS weights are not sent: they are recomputed after the move
        later = {"old_per_token_logps", "importance_sampling_ratio"} if self._deferred_old else set()
        keep = sel.keep.view(procs, n)
        idx = torch.nonzero(keep[me]).squeeze(1).to(out["completion_mask"].device)
        gathered = {k: self._gather_rows(v[idx], pad_first=k.startswith("prompt")) for k, v in per_row.items()
                    if k not in later}
        for k in later & set(per_row):  # same shape as the moved completions (per token) or one per row
            cols = gathered["completion_mask"].size(1) if per_row[k].size(1) == per_row["completion_mask"].size(1) else 1
            gathered[k] = torch.ones(len(gathered["completion_mask"]), cols, dtype=per_row[k].dtype,
                                     device=per_row[k].device)
        width = gathered["completion_mask"].shape[0] // procs  # kept rows per process after padding
        position = {}  # global row -> its row in `gathered`
        for p in range(procs):
            for j, i in enumerate(torch.nonzero(keep[p]).squeeze(1).tolist()):
                position[p * n + i] = p * width + j
        row_tokens = (gathered["prompt_mask"].sum(1) + gathered["completion_mask"].sum(1)).double().cpu()
        groups = sorted({r // g for r in position})
        group_tokens = [float(sum(row_tokens[position[r]] for r in range(grp * g, (grp + 1) * g) if r in position))
                        for grp in groups]
        assignment = assign_groups(group_tokens, procs)
        mine = [r for i in assignment[me] for r in range(groups[i] * g, (groups[i] + 1) * g) if r in position]
        m = len(mine)
        spg = self.args.steps_per_generation
        pad = ((-m) % spg if m else spg) if self.args.minibatch_rule == "fixed" else (0 if m else 1)
        gids = torch.tensor(mine + [mine[0] if m else next(iter(position))] * pad, dtype=torch.long)
        at = torch.tensor([position[int(r)] for r in gids], dtype=torch.long)
        cut = {k: gathered[k][at.to(v.device)] if k in per_row else v for k, v in out.items()}  # TRL's key order
        weight = torch.cat([torch.ones(m), torch.zeros(pad)])
        self._metrics["train"]["balance/tokens_max_over_min"].append(
            max(sum(group_tokens[i] for i in a) for a in assignment)
            / max(1.0, min(sum(group_tokens[i] for i in a) for a in assignment)))
        return cut, gids, weight, [len(a) for a in assignment]

    def _gather_rows(self, t: torch.Tensor, pad_first: bool) -> torch.Tensor:
        """All processes' rows of `t` stacked (process p's at [p * R, (p + 1) * R), R the most rows any process
        has), padded with zeros to the same row count and, for per-token tensors, the same width (prompts on the
        left, as TRL pads them)."""
        acc = self.accelerator
        t = acc.pad_across_processes(t.contiguous(), dim=0)
        if t.ndim > 1:
            t = acc.pad_across_processes(t, dim=1, pad_first=pad_first)
        return acc.gather(t)

    def _ceil_micro_batches(self, cut: dict[str, Any], row_groups: list[int], counts: list[int]) -> list[dict]:
        """The rollout's micro-batches under the official ceil(N / mini-batch) rule (`groups.ceil_micro_batches`):
        optimizer step k trains on the kept groups of mini-batch slot k, its loss scaled by the slot's group count
        / mini_batch_prompts (`rl_scale`); each step's GA micro-batches split its local rows evenly; a micro-batch
        without rows gets one zero-weight row (one completion column after `trim_padding`), and a step without
        any rows on any process is left out (`_LeaveOutEmptySteps`). `row_groups`: the group of each kept row of
        `cut` (its first rows); `counts`: kept groups per process."""
        a = self.args
        ga = a.gradient_accumulation_steps
        steps = a.steps_per_generation // ga
        micro, sizes = ceil_micro_batches(row_groups, counts, self.accelerator.process_index, a.mini_batch_prompts,
                                          steps, ga)
        n = len(cut["completion_mask"])
        spare = {k: _take_rows(v, torch.tensor([0]), n) for k, v in cut.items()}
        spare["rl_weight"] = torch.zeros_like(spare["rl_weight"])
        spare["rl_correct"] = torch.zeros_like(spare["rl_correct"])
        buffers = []
        for k, rows in enumerate(micro):
            chunk = torch.tensor(rows, dtype=torch.long)
            batch = {kk: _take_rows(v, chunk, n) for kk, v in cut.items()} if len(chunk) else dict(spare)
            batch["rl_scale"] = torch.tensor(sizes[k // ga] / a.mini_batch_prompts, device=cut["completion_mask"].device)
            buffers.append(batch)
        self._metrics["train"]["rollout/optimizer_steps"].append(float(sum(1 for x in sizes if x)))
        return buffers

    def _old_logps_for_kept(self, cut: dict[str, Any], kept: torch.Tensor) -> torch.Tensor:
        """Old log-probs of the kept rows (zeros on the zero-weight padding rows, which never enter the loss), in
        forward chunks of per_device_train_batch_size. Every process runs the same number of forward passes (the
        most any process needs; a process with fewer repeats a one-row pass and discards it): a sharded model's
        forward is a collective."""
        comp = cut["completion_ids"]
        old = torch.zeros(comp.shape, dtype=torch.float32, device=comp.device)
        idx = torch.nonzero(kept).squeeze(1)
        bs = self.args.per_device_train_batch_size
        chunks = [idx[i:i + bs] for i in range(0, len(idx), bs)]
        most = int(self.accelerator.gather(torch.tensor([len(chunks)], device=comp.device)).max())
        spare = torch.zeros(1, dtype=torch.long, device=comp.device)
        with torch.no_grad(), disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
            for k in range(most):
                rows = chunks[k] if k < len(chunks) else spare
                ids = torch.cat([cut["prompt_ids"][rows], comp[rows]], dim=1)
                am = torch.cat([cut["prompt_mask"][rows], cut["completion_mask"][rows]], dim=1)
                lp, _, _ = super()._get_per_token_logps_and_entropies(self.model, ids, am, comp.size(1),
                                                                      batch_size=bs)
                if k < len(chunks):
                    old[rows] = lp.to(old.dtype)
        m = self._metrics["train"]
        m["rollout/old_logp_rows"].append(float(self.accelerator.gather(
            torch.tensor([float(len(idx))], device=comp.device)).sum()))
        return old

    def _is_ratio_for_kept(self, cut: dict[str, Any], kept: torch.Tensor) -> torch.Tensor:
        """vLLM's sampler/trainer IS weight (`losses.sampler_is_ratio`, TRL's formula) from the kept rows' old
        log-probs; 1 on the zero-weight padding rows. TRL's five `sampling/*` metrics of this rollout, computed from
        the placeholder, are replaced by the same statistics over the kept rows (TRL: over every sampled row)."""
        mask = _loss_mask(cut)
        old, sampling = cut["old_per_token_logps"], cut["sampling_per_token_logps"]
        ratio = sampler_is_ratio(old, sampling, mask, self.vllm_importance_sampling_mode,
                                 self.vllm_importance_sampling_clip_min, self.vllm_importance_sampling_clip_max)
        ratio = torch.where(kept[:, None], ratio, torch.ones_like(ratio))
        live = mask.bool() & kept[:, None]
        delta = (old - sampling).abs()
        delta = delta[live & ~torch.isnan(delta)]
        flat = ratio[kept].flatten() if ratio.size(1) == 1 else ratio[live]
        dev = ratio.device
        zero = torch.zeros((), device=dev)
        stats = {"sampling/sampling_logp_difference/mean": (delta.mean() if delta.numel() else zero, "mean"),
                 "sampling/sampling_logp_difference/max": (delta.max() if delta.numel() else zero, "max"),
                 "sampling/importance_sampling_ratio/min": (flat.min() if flat.numel() else zero, "min"),
                 "sampling/importance_sampling_ratio/mean": (flat.mean() if flat.numel() else zero, "mean"),
                 "sampling/importance_sampling_ratio/max": (flat.max() if flat.numel() else zero, "max")}
        m = self._metrics["train"]
        for key, (value, how) in stats.items():
            everyone = self.accelerator.gather(value.float().reshape(1))
            if m.get(key):
                m[key].pop()  # TRL's value, from the placeholder
            m[key].append(float(getattr(everyone, how)()))
        return ratio

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
        tokens = self.accelerator.gather(lengths).cpu()
        a = self.args
        sel = select_groups(self._total_rewards().cpu(), self.num_generations,
                            correct_score=a.reward_config().correct, truncated=truncated,
                            overlong_filter=bool(a.overlong_filter), filter_groups=a.filter_groups,
                            metric=a.filter_groups_metric, max_groups=a.rollout_prompts, scale=str(a.scale_rewards),
                            eps=a.advantage_eps, n_procs=self.accelerator.num_processes, tokens=tokens,
                            balance=a.group_balance)
        return sel, truncated

    def _rows_to_train(self, keep: torch.Tensor) -> torch.Tensor:
        """`groups.rows_to_train` with TRL's micro-steps per rollout (`steps_per_generation`)."""
        return rows_to_train(keep, self.args.steps_per_generation)

    # ------------------------------------------------------------------ loss: the documented extension point
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """policy_loss(args.loss_type) over kept tokens / kept tokens of the mini-batch, + sft_alpha * NLL(correct)."""
        if return_outputs:
            raise ValueError("GPPOTrainer does not return outputs")
        mode = "train" if self.model.training else "eval"
        a = self.args
        inputs = trim_padding(inputs)
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
        scale = inputs.get("rl_scale", 1.0)  # ceil rule: the last mini-batch's size / mini_batch_prompts
        pg = pg * scale
        loss = pg if token_norm is not None else pg / ga
        nll = torch.zeros((), dtype=logps.dtype, device=logps.device)
        if a.sft_alpha > 0:
            correct = inputs.get("rl_correct", torch.zeros_like(weight)).to(logps.dtype) * weight
            nll = masked_nll(logps, mask * correct[:, None]) * scale
            loss = loss + a.sft_alpha * nll / ga
        self._accumulate(mode, metrics, entropies, loss_mask, pg if token_norm is not None else pg / ga, nll / ga)
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
        """Pool the loss metrics over the micro-batches of one optimizer step; log them once at its last one.

        `pg` and `nll` are this micro-batch's shares of the optimised loss (already divided by the gradient
        accumulation steps where compute_loss divides them), so their sum over the step's micro-batches, averaged
        over processes (DDP averages the gradients), is the loss the optimizer step minimises:
        loss = policy_loss + sft_alpha * sft_nll, the `loss` the Trainer logs."""
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
        procs = self.accelerator.num_processes
        if mode == "train" and n_all == 0:
            # nothing trained in this step on any process: the step is left out (`_LeaveOutEmptySteps`), and
            # logs nothing of its own (its zeros would be averaged into the next logged step)
            self._skip_step = True
            return
        out["policy_loss"].append(tot["pg"] / procs)
        out["sft_nll"].append(tot["nll"] / procs)
        out["tokens/trained"].append(n_all)
        out["entropy"].append(tot["ent"] / n_all if n_all else math.nan)
        for k in _COUNTS:
            out[f"clip/{k.replace('clip_', '')}"].append(tot[k] / n_all if n_all else 0.0)
        out["ratio/mean"].append(tot["ratio_sum"] / n_all if n_all else math.nan)
        out["ratio/min"].append(lo if n_all else math.nan)
        out["ratio/max"].append(hi if n_all else math.nan)
        if mode == "train":
            out["rollout/left_out_steps"].append(float(self._left_out_steps))  # so far, not in global_step
            every = self.args.steps_per_generation * self.num_iterations
            out["rollout/minibatch"].append(float((self._step % every) // ga))
            out["rollout/index"].append(float(self._step // every))


class _LeaveOutEmptySteps(TrainerCallback):
    """Leaves out an optimizer step that trained on no token on any process (the rollout's slots beyond
    ceil(N / mini-batch), or a rollout whose groups were all filtered), as if the loop had not reached it, the way
    the official verl loop never has such a step: the gradients are dropped before the optimizer runs (AdamW
    changes neither the weights, nor its state, nor applies weight decay), the LR schedule does not advance (the
    scheduler's own step is taken back: every schedule TRL/transformers build is a closed-form LambdaLR), and
    `global_step` counts only steps taken, so the logged step, `logging_steps`, `save_steps` and the checkpoint
    names follow optimizer steps taken. The step logs and saves nothing of its own, except the final save when
    the loop ends on it. `max_steps` and the epochs still bound the loop itself (taken + left-out steps), which
    is what the sampler and resume count: a checkpoint records the left-out steps (`LEFT_OUT_FILE`) and
    `GPPOTrainer._init_training_state` puts the data position back from them."""

    def __init__(self, trainer: GPPOTrainer):
        self.trainer = trainer
        self.leaving_out = False

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        if self.trainer._skip_step:
            for p in self.trainer.model.parameters():
                p.grad = None
            self.trainer._skip_step, self.leaving_out = False, True

    def on_step_end(self, args, state, control, **kwargs):
        t = self.trainer
        if self.leaving_out:
            self.leaving_out = False
            state.global_step -= 1
            t._left_out_steps += 1
            sched = getattr(t.lr_scheduler, "scheduler", t.lr_scheduler)  # accelerate's wrapper holds the schedule
            if isinstance(sched, torch.optim.lr_scheduler.LambdaLR):
                sched.last_epoch -= 2
                sched.step()  # back to the LR of the step not taken
            control.should_log = control.should_evaluate = False
            control.should_save = control.should_save and control.should_training_stop
        if state.max_steps > 0 and state.global_step + t._left_out_steps >= state.max_steps:
            control.should_training_stop = True
            control.should_save = control.should_save or args.save_strategy == "steps"

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if folder.is_dir() and state.is_world_process_zero:
            (folder / LEFT_OUT_FILE).write_text(json.dumps({"left_out_steps": self.trainer._left_out_steps}))


_PER_TOKEN = ("completion_ids", "completion_mask", "tool_mask", "old_per_token_logps", "sampling_per_token_logps",
              "ref_per_token_logps", "importance_sampling_ratio")


def trim_padding(batch: dict[str, Any]) -> dict[str, Any]:
    """One micro-batch without its all-padding columns: completions cut after the last token any *trained* row
    (rl_weight > 0) has, prompts cut before the first real prompt token of any row. TRL pads every row to the
    longest completion of the whole rollout, so a micro-batch of short completions (or only zero-weight padding
    rows, which then cost one completion column) would otherwise run at that width. The loss is unchanged: the
    cut columns are masked out, completions are causal, and rotary positions only enter as differences.
    Multimodal batches are left as they are."""
    if "pixel_values" in batch:
        return batch
    cmask = batch["completion_mask"]
    width = cmask.size(1)
    weight = batch.get("rl_weight")
    live = cmask.bool() & (weight[:, None] > 0) if weight is not None else cmask.bool()
    cols = live.any(0).nonzero()
    keep_c = int(cols.max()) + 1 if len(cols) else 1
    pcols = batch["prompt_mask"].bool().any(0).nonzero()
    first_p = int(pcols.min()) if len(pcols) else 0
    if keep_c == width and first_p == 0:
        return batch
    out = dict(batch)
    for key in _PER_TOKEN:
        v = out.get(key)
        if isinstance(v, torch.Tensor) and v.dim() == 2 and v.size(1) == width:
            out[key] = v[:, :keep_c]
    out["prompt_ids"], out["prompt_mask"] = batch["prompt_ids"][:, first_p:], batch["prompt_mask"][:, first_p:]
    return out


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
        train_dataset = load_rl_dataset(cfg.train_files, limit=cfg.limit, abilities=cfg.abilities)
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
