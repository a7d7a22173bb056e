"""Which sampled rollouts a GPPO step trains on, and their advantages: the official Klear / DAPO batch rules.

Pure tensor functions over one rollout batch of N = groups x G rows (row i belongs to group i // G, the G samples
of one prompt, in TRL's order). Nothing here knows about trainers; `GPPOTrainer` calls `select_groups` on the
gathered rewards of every process. Every rule names its source ([P] = the Klear-Reasoner paper, arXiv 2508.07629
v1; [R] = github.com/suu990901/KlearReasoner @ 5d2d0b8; see /work/shared/docs/paper_notes.md §3.5-3.6):

1. Unscorable rows (reward None -> NaN, e.g. a sandbox failure that is not the policy's fault) are dropped: they
   count in no group statistic and get no loss and no NLL term. (TRL excludes them from the baseline and zeroes
   their advantage; [R] never produces them: a reward timeout scores -1.)
2. Overlong rows (`truncated`, the last token is not EOS/pad) are dropped *before grouping* when the overlong
   filter is on ([R] `reward_manager/dapo.py` `overlong_filter`: `is_finish`, applied in
   `dapo_ray_trainer.py` before `filter_groups`), so they enter neither the group mean/std nor the variance test.
3. Group filter ([R] `filter_groups.enable=True, metric=acc, adv=True`): a group is kept when the per-row metric
   over its remaining rows is not constant, or when it has exactly one remaining row. `metric="acc"` (official)
   tests accuracy, acc = (reward == correct score); so a group with no correct answer but different format
   penalties is dropped. `metric="reward"` tests the raw reward (DAPO's `seq_reward` option); the demo uses it
   because its tiny model never answers correctly, so only the format penalties carry signal.
4. Top-up ([R] `gen_prompt_bsz=256` for `train_prompt_bsz=128`, `max_num_gen_batches=1`): the caller samples
   more prompts than the batch and `max_groups` keeps the first that many kept groups in sampling order (the
   official `batch[:traj_bsz]`); if fewer survive, the batch is smaller. Nothing is regenerated.
5. Advantages over the kept rows of each group ([R] `core_algos.compute_grpo_outcome_advantage`, computed after
   filtering): A = (R - mean_g) / (std_g + eps) with the unbiased std (torch.std) and eps = 1e-6; a group with one
   row gets mean 0 and std 1. [P] Eq. 4 writes the population std; the official code is followed here.
   `scale="none"` is Dr. GRPO (no std), `scale="batch"` divides by the std of all kept rows (TRL's option).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

FILTER_METRICS = ("acc", "reward")
SCALE_MODES = ("group", "batch", "none")


@dataclass
class GroupSelection:
    """The rows one rollout batch trains on. Tensors are [N] over all rows, in the input order."""

    keep: torch.Tensor        # bool: row enters the loss
    advantages: torch.Tensor  # advantage of kept rows (0 elsewhere)
    correct: torch.Tensor     # bool: scored row with reward == correct score (accuracy, and the NLL term if kept)
    n_groups: int             # groups sampled
    n_mixed: int              # groups that passed the filter
    n_selected: int           # groups kept after the max_groups cut
    n_truncated: int          # rows dropped by the overlong filter
    n_unscorable: int         # rows whose reward was None/NaN


def select_groups(rewards: torch.Tensor, group_size: int, *, correct_score: float = 1.0,
                  truncated: torch.Tensor | None = None, overlong_filter: bool = False, filter_groups: bool = True,
                  metric: str = "acc", max_groups: int | None = None, scale: str = "group", eps: float = 1e-6,
                  tol: float = 1e-6) -> GroupSelection:
    """Apply rules 1-5 of the module docstring to one rollout batch of rewards ([N] float, NaN = unscorable)."""
    if metric not in FILTER_METRICS:
        raise ValueError(f"metric {metric!r} is not one of {FILTER_METRICS}")
    if scale not in SCALE_MODES:
        raise ValueError(f"scale {scale!r} is not one of {SCALE_MODES}")
    n = rewards.numel()
    if group_size < 1 or n % group_size:
        raise ValueError(f"{n} rewards do not split into groups of {group_size}")
    rewards = rewards.detach().to(torch.float64).reshape(-1)
    scored = ~torch.isnan(rewards)
    trunc = torch.zeros_like(scored) if truncated is None else truncated.reshape(-1).to(torch.bool)
    valid = scored & ~trunc if overlong_filter else scored
    correct = scored & ((rewards - correct_score).abs() <= tol)

    r = torch.where(valid, rewards, torch.zeros_like(rewards)).view(-1, group_size)
    v = valid.view(-1, group_size)
    count = v.sum(1)
    stat = (correct.to(torch.float64) if metric == "acc" else rewards).view(-1, group_size)
    hi = torch.where(v, stat, torch.full_like(stat, -torch.inf)).amax(1)
    lo = torch.where(v, stat, torch.full_like(stat, torch.inf)).amin(1)
    varies = (count >= 2) & ((hi - lo) > tol)
    mixed = (varies | (count == 1)) if filter_groups else count >= 1
    selected = mixed & (torch.cumsum(mixed.long(), 0) <= max_groups) if max_groups is not None else mixed
    keep = (v & selected[:, None]).reshape(-1)

    adv = _advantages(r, v & selected[:, None], count, scale, eps).reshape(-1)
    adv = torch.where(keep, adv, torch.zeros_like(adv))
    return GroupSelection(keep=keep, advantages=adv.to(torch.float32), correct=correct, n_groups=len(count),
                          n_mixed=int(mixed.sum()), n_selected=int(selected.sum()),
                          n_truncated=int((scored & trunc).sum()) if overlong_filter else 0,
                          n_unscorable=int((~scored).sum()))


def _advantages(r: torch.Tensor, v: torch.Tensor, count: torch.Tensor, scale: str, eps: float) -> torch.Tensor:
    """Group-normalised advantages over the rows `v` of each group ([groups, G] tensors, see rule 5)."""
    vf = v.to(r.dtype)
    k = vf.sum(1, keepdim=True)
    single = count[:, None] == 1
    mean = torch.where(single, torch.zeros_like(k), (r * vf).sum(1, keepdim=True) / k.clamp(min=1.0))
    centred = (r - mean) * vf
    if scale == "none":
        return centred
    if scale == "group":
        var = (centred ** 2).sum(1, keepdim=True) / (k - 1).clamp(min=1.0)
        std = torch.where(single, torch.ones_like(var), var.sqrt())
        return centred / (std + eps)
    total = vf.sum()
    flat = r[v]
    std = flat.std() if total >= 2 else torch.ones((), dtype=r.dtype)
    return centred / (std + eps)
