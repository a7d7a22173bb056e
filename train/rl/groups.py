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
   more prompts than the batch and `max_groups` keeps that many of the groups that passed the filter; if fewer
   survive, the batch is smaller. Nothing is regenerated. Which ones (`balance`):
   * "first": the first in sampling order (the official `batch[:traj_bsz]`; verl's single controller then
     re-splits the batch over its workers). Here the groups stay on the process that generated them (process
     p holds groups [p*k, (p+1)*k)), so "first" fills the first processes and leaves the last with few or none;
   * "procs": the same number of groups from each process as far as their surviving groups allow
     (a process short of groups gives its share to the others), ties broken by fewest kept tokens, each
     process's groups taken in sampling order;
   * "tokens" (default): the first in sampling order, as "first"; then the kept groups are *moved*: whole groups
     are assigned to processes by `assign_groups` (the same number of groups on every process, +-1, and the
     token counts balanced greedily, largest group first), the way verl's single controller re-splits the kept
     batch over its workers. With one process the three rules are the same and nothing moves.
5. Advantages over the kept rows of each group ([R] `core_algos.compute_grpo_outcome_advantage`, computed after
   filtering): A = (R - mean_g) / (std_g + eps) with the unbiased std (torch.std) and eps = 1e-6; a group with one
   row gets mean 0 and std 1. [P] Eq. 4 writes the population std; the official code is followed here.
   `scale="none"` is Dr. GRPO (no std), `scale="batch"` divides by the std of all kept rows (TRL's option).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

FILTER_METRICS = ("acc", "reward")
BALANCE_MODES = ("tokens", "procs", "first")
MINIBATCH_RULES = ("fixed", "ceil")
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
                  tol: float = 1e-6, n_procs: int = 1, tokens: torch.Tensor | None = None,
                  balance: str = "procs") -> GroupSelection:
    """Apply rules 1-5 of the module docstring to one rollout batch of rewards ([N] float, NaN = unscorable).
    `n_procs`: processes holding the groups in equal contiguous blocks; `tokens`: [N] completion lengths (the
    tie-break of the "procs" top-up)."""
    if metric not in FILTER_METRICS:
        raise ValueError(f"metric {metric!r} is not one of {FILTER_METRICS}")
    if balance not in BALANCE_MODES:
        raise ValueError(f"balance {balance!r} is not one of {BALANCE_MODES}")
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
    if max_groups is None:
        selected = mixed
    elif balance in ("first", "tokens") or n_procs <= 1:
        selected = mixed & (torch.cumsum(mixed.long(), 0) <= max_groups)
    else:
        group_tokens = (torch.ones(n, dtype=torch.float64) if tokens is None else tokens.reshape(-1).double())
        group_tokens = torch.where(v.reshape(-1), group_tokens, torch.zeros_like(group_tokens))
        selected = balanced_top_up(mixed, group_tokens.view(-1, group_size).sum(1), n_procs, max_groups)
    keep = (v & selected[:, None]).reshape(-1)

    adv = _advantages(r, v & selected[:, None], count, scale, eps).reshape(-1)
    adv = torch.where(keep, adv, torch.zeros_like(adv))
    return GroupSelection(keep=keep, advantages=adv.to(torch.float32), correct=correct, n_groups=len(count),
                          n_mixed=int(mixed.sum()), n_selected=int(selected.sum()),
                          n_truncated=int((scored & trunc).sum()) if overlong_filter else 0,
                          n_unscorable=int((~scored).sum()))


def balanced_top_up(mixed: torch.Tensor, group_tokens: torch.Tensor, n_procs: int, max_groups: int) -> torch.Tensor:
    """Keep `max_groups` of the `mixed` groups (bool [groups]) spread over `n_procs` contiguous blocks: each pick
    goes to the process with the fewest kept groups (then fewest kept tokens, then lowest rank) that still has a
    mixed group left, and takes its next one in sampling order."""
    n_groups = mixed.numel()
    if n_groups % n_procs:
        raise ValueError(f"{n_groups} groups do not split over {n_procs} processes")
    per = n_groups // n_procs
    queues = [[p * per + i for i in range(per) if bool(mixed[p * per + i])] for p in range(n_procs)]
    count, toks, nxt = [0] * n_procs, [0.0] * n_procs, [0] * n_procs
    selected = torch.zeros(n_groups, dtype=torch.bool)
    for _ in range(min(max_groups, int(mixed.sum()))):
        p = min((q for q in range(n_procs) if nxt[q] < len(queues[q])), key=lambda q: (count[q], toks[q], q))
        g = queues[p][nxt[p]]
        nxt[p] += 1
        selected[g] = True
        count[p] += 1
        toks[p] += float(group_tokens[g])
    return selected


def assign_groups(group_tokens: list[float], n_procs: int) -> list[list[int]]:
    """Whole groups onto `n_procs` processes (returns, for each process, the positions of its groups in
    `group_tokens`, ascending): every process gets floor(N / P) or ceil(N / P) groups (rows per micro-batch stay
    the configured ones), and the token counts are balanced greedily: groups in decreasing token order, each to
    the process with the fewest tokens so far among those with room (LPT with a cardinality cap; ties: fewer
    groups, then lower rank, then sampling order). Deterministic: every process computes the same assignment."""
    n = len(group_tokens)
    base, extra = divmod(n, n_procs)
    count, toks = [0] * n_procs, [0.0] * n_procs
    full_plus = 0  # processes already holding base + 1 groups (at most `extra` may)
    out: list[list[int]] = [[] for _ in range(n_procs)]
    for g in sorted(range(n), key=lambda i: (-group_tokens[i], i)):
        room = [p for p in range(n_procs) if count[p] < base or (count[p] == base and full_plus < extra)]
        p = min(room, key=lambda q: (toks[q], count[q], q))
        full_plus += count[p] == base
        count[p] += 1
        toks[p] += group_tokens[g]
        out[p].append(g)
    return [sorted(x) for x in out]


def ceil_micro_batches(row_groups: list[int], counts: list[int], proc: int, mini_batch: int, steps: int,
                       ga: int) -> tuple[list[list[int]], list[int]]:
    """One process's micro-batches under the ceil rule: `row_groups[i]` is the group of its i-th kept row (groups
    in sampling order), `counts[p]` the kept groups of process p. Step k's rows are those of this process's groups
    in mini-batch slot k (`ceil_schedule`), split into `ga` micro-batches of near-equal row counts (in order).
    Returns the row positions of each of the steps x ga micro-batches and the global group count of each step."""
    local = list(dict.fromkeys(row_groups))
    mine, sizes = ceil_schedule(counts, proc, mini_batch, steps)
    micro: list[list[int]] = []
    for k in range(steps):
        members = {local[j] for j in mine[k]}
        idx = [i for i, grp in enumerate(row_groups) if grp in members]
        micro.extend(chunk.tolist() for chunk in torch.tensor_split(torch.tensor(idx, dtype=torch.long), ga))
    return micro, sizes


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


def rows_to_train(keep: torch.Tensor, micro_steps: int) -> torch.Tensor:
    """Indices of one process's kept rows, padded with rows it does not keep (weight 0 in the loss: no loss, no
    NLL) to a multiple of `micro_steps`, at least one row per micro-batch: TRL splits a rollout into
    `micro_steps` equal micro-batches and drops a remainder. Fewer kept rows mean smaller micro-batches, not fewer
    optimizer steps (verl would take ceil(N / mini-batch) steps); the padding rows are computed but do not train."""
    kept = torch.nonzero(keep).squeeze(1)
    pad = (-len(kept)) % micro_steps if len(kept) else micro_steps
    filler = torch.nonzero(~keep).squeeze(1)[:pad]
    return torch.cat([kept, filler])


def ceil_schedule(counts: list[int], proc: int, mini_batch: int, steps: int) -> tuple[list[list[int]], list[int]]:
    """The official mini-batch rule ([R] verl `update_actor`: the kept batch cut into mini-batches of `mini_batch`
    groups, ceil(N / mini_batch) optimizer steps, the last one smaller) over `len(counts)` processes holding
    `counts[p]` kept groups each. The groups are ordered round-robin over the processes (group j of every process,
    then group j + 1), so every mini-batch draws evenly from them. Returns, for each of the `steps` mini-batch
    slots, the positions (0..counts[proc]-1) of this process's groups in it, and the global group count of each
    slot (mini_batch for full ones, less for the last, 0 for the slots beyond ceil(N / mini_batch))."""
    order = [(p, j) for j in range(max(counts, default=0)) for p in range(len(counts)) if j < counts[p]]
    if len(order) > mini_batch * steps:
        raise ValueError(f"{len(order)} kept groups exceed {steps} mini-batches of {mini_batch}")
    mine: list[list[int]] = [[] for _ in range(steps)]
    for g, (p, j) in enumerate(order):
        if p == proc:
            mine[g // mini_batch].append(j)
    sizes = [max(0, min(mini_batch, len(order) - k * mini_batch)) for k in range(steps)]
    return mine, sizes
