"""Policy-gradient losses for RL on verifiable rewards: GPPO, PPO-clip (GRPO / DAPO clip-higher), CISPO, GSPO.

Pure tensor functions with one public entry point, `policy_loss`. Nothing here knows about trainers.

Notation (all per response token t of response i; tensors are [batch, seq]):
    r = exp(logp - old_logp)            token importance ratio pi_theta / pi_old
    A                                   advantage ([batch] broadcast over tokens, or [batch, seq])
    M                                   response-token mask (1 = counts)
    sg(.)                               stop-gradient
Every loss below is written as the per-token term l_t that is *minimised*; `agg` then reduces l_t * M.

The gradient of each loss w.r.t. logp_t has the form  -W_t * A_t * d(logp_t)  times the aggregation
normaliser; W_t is the "gradient weight" the docstrings and tests talk about.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

LOSS_TYPES = ("gppo", "ppo_clip", "cispo", "gspo")
AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")
_LOG_RATIO_CLAMP = 20.0  # as verl: keeps exp() finite when the policy drifts far from the sampler


def policy_loss(loss_type: str, logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
                mask: torch.Tensor, *, eps_low: float = 0.2, eps_high: float = 0.28, beta1: float = 1.0,
                beta2: float = 1.0, dual_clip: float | None = None, agg: str = "token-mean",
                is_weights: torch.Tensor | None = None, token_normalizer: float | torch.Tensor | None = None,
                norm_len: int | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """Return (scalar loss to minimise, metrics) for `loss_type` in LOSS_TYPES.

    Optional extras beyond the common contract: `is_weights` ([batch, seq] or [batch, 1], detached) multiplies each
    token's loss (rollout-vs-trainer importance-sampling correction); `token_normalizer` replaces the local token
    count of "token-mean" (a global count across gradient-accumulation micro-batches); `norm_len` is the constant
    length L of "seq-mean-token-sum-norm" (default: the padded sequence length).
    """
    if loss_type not in _LOSSES:
        raise ValueError(f"unknown loss_type {loss_type!r}; expected one of {LOSS_TYPES}")
    if agg not in AGG_MODES:
        raise ValueError(f"unknown agg {agg!r}; expected one of {AGG_MODES}")
    _check_shapes(logp, old_logp, advantages, mask)
    if not 0.0 <= eps_low < 1.0 or eps_high < 0.0:
        raise ValueError(f"need 0 <= eps_low < 1 and eps_high >= 0, got eps_low={eps_low}, eps_high={eps_high}")
    if dual_clip is not None and dual_clip <= 1.0:
        raise ValueError(f"dual_clip must be > 1 (or None), got {dual_clip}")
    mask = mask.to(logp.dtype)
    adv = advantages.to(logp.dtype)
    adv = adv.unsqueeze(-1) if adv.dim() == 1 else adv
    per_token, regions = _LOSSES[loss_type](logp, old_logp.detach(), adv.detach(), mask, eps_low=eps_low,
                                            eps_high=eps_high, beta1=beta1, beta2=beta2, dual_clip=dual_clip)
    if is_weights is not None:
        per_token = per_token * is_weights.detach().to(per_token.dtype)
    loss = aggregate(per_token, mask, agg, token_normalizer=token_normalizer, norm_len=norm_len)
    metrics = _metrics(regions, mask)
    metrics["loss"] = float(loss.detach())
    return loss, metrics


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, agg: str, *,
              token_normalizer: float | torch.Tensor | None = None, norm_len: int | None = None) -> torch.Tensor:
    """Reduce per-token losses l (masked by M) to a scalar.

    token-mean:               sum_{i,t} M l / sum_{i,t} M           (DAPO / the paper's Eq. 7: all tokens count equally)
    seq-mean-token-mean:      mean_{i: |y_i|>0} ( sum_t M l / |y_i| )  (original GRPO: each response counts equally)
    seq-mean-token-sum-norm:  sum_{i,t} M l / (B * L)               (Dr. GRPO: constant normaliser, L = norm_len)
    """
    per_token = per_token * mask
    if agg == "token-mean":
        denom = mask.sum() if token_normalizer is None else torch.as_tensor(token_normalizer, dtype=per_token.dtype)
        return per_token.sum() / denom.clamp(min=1.0)
    if agg == "seq-mean-token-mean":
        lengths = mask.sum(-1)
        seq = per_token.sum(-1) / lengths.clamp(min=1.0)
        nonempty = (lengths > 0).to(per_token.dtype)
        return (seq * nonempty).sum() / nonempty.sum().clamp(min=1.0)
    if agg == "seq-mean-token-sum-norm":
        length = norm_len if norm_len is not None else per_token.shape[-1]
        return per_token.sum() / float(per_token.shape[0] * length)
    raise ValueError(f"unknown agg {agg!r}; expected one of {AGG_MODES}")


def _check_shapes(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor) -> None:
    """Fail early with the offending shapes rather than broadcasting silently."""
    if logp.dim() != 2 or old_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"logp, old_logp, mask must share a [batch, seq] shape; got {tuple(logp.shape)}, "
                         f"{tuple(old_logp.shape)}, {tuple(mask.shape)}")
    if adv.shape not in (logp.shape[:1], logp.shape):
        raise ValueError(f"advantages must be [batch] or [batch, seq] = {tuple(logp.shape)}; got {tuple(adv.shape)}")


def _ratio(logp: torch.Tensor, old_logp: torch.Tensor) -> torch.Tensor:
    """r = exp(clamp(logp - old_logp, +-20))."""
    return torch.exp((logp - old_logp).clamp(-_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP))


def _clip_regions(r: torch.Tensor, adv: torch.Tensor, eps_low: float, eps_high: float,
                  dual_clip: float | None) -> dict[str, torch.Tensor]:
    """Boolean token regions: PPO's two clipped regions and the dual-clip region."""
    low = (r < 1.0 - eps_low) & (adv < 0)
    high = (r > 1.0 + eps_high) & (adv > 0)
    dual = (r > dual_clip) & (adv < 0) if dual_clip is not None else torch.zeros_like(low)
    return {"ratio": r.detach(), "low": low, "high": high, "dual": dual}


def _apply_dual_clip(per_token: torch.Tensor, adv: torch.Tensor, dual_clip: float | None) -> torch.Tensor:
    """Dual-clip (Ye et al. 2020; verl clip_ratio_c): for A<0, l = min(l, -c*A); the cap has no gradient."""
    if dual_clip is None:
        return per_token
    capped = torch.minimum(per_token, -adv * dual_clip)
    return torch.where(adv < 0, capped, per_token)


def ppo_clip_token_loss(logp, old_logp, adv, mask, *, eps_low, eps_high, dual_clip=None, **_):
    """PPO-clip / GRPO (eps_low = eps_high) / DAPO clip-higher (eps_high = 0.28).

    l = max(-A r, -A clip(r, 1-eps_low, 1+eps_high)), then the optional dual-clip l = min(l, -c A) for A<0.
    Gradient weight W = r inside the trust region and in the un-clipped tails, 0 where
    (A>0, r>1+eps_high) or (A<0, r<1-eps_low) (and for A<0, r>c under dual-clip).
    """
    r = _ratio(logp, old_logp)
    per_token = torch.maximum(-adv * r, -adv * r.clamp(1.0 - eps_low, 1.0 + eps_high))
    regions = _clip_regions(r, adv, eps_low, eps_high, dual_clip)
    regions["zero_grad"] = regions["low"] | regions["high"] | regions["dual"]
    return _apply_dual_clip(per_token, adv, dual_clip), regions


def gppo_token_loss(logp, old_logp, adv, mask, *, eps_low, eps_high, beta1=1.0, beta2=1.0, dual_clip=None, **_):
    """GPPO (Klear-Reasoner Eq. 11-12) and its general beta form (Eq. 17-18 / CE-GPPO).

    With low = (A<0, r<1-eps_low), high = (A>0, r>1+eps_high) and sg = stop-gradient:
        l = -A * beta1 (1-eps_low) r / sg(r)    on low
        l = -A * beta2 (1+eps_high) r / sg(r)   on high
        l = -A * r                              elsewhere (exactly where PPO's min picks the unclipped term)
    r/sg(r) == 1 in value, so with beta1 = beta2 = 1 the forward value equals PPO-clip's; its gradient is 1, so
    W = beta1 (1-eps_low) on low, beta2 (1+eps_high) on high, r elsewhere: no token's gradient is zeroed by the
    clip, whatever |log r| (the clipped branches do not go through the +-20 log-ratio clamp that keeps exp() finite
    in the unclipped branch). dual_clip=c then caps A<0 tokens at -c A (zero gradient for r>c), as in the official
    scripts (c=10): that cap, not the clip, is the only place GPPO zeroes a gradient.
    """
    log_r = logp - old_logp
    r = _ratio(logp, old_logp)
    regions = _clip_regions(r, adv, eps_low, eps_high, dual_clip)
    # The clipped branches are w * r / sg(r) = w * exp(log r - sg(log r)): value w, d/dlogp = w, computed from the
    # *unclamped* log-ratio. Writing them as w * clamp(r) / sg(clamp(r)) (the earlier form) would inherit the
    # zero gradient of the +-20 log-ratio clamp, so a token with |log r| > 20 would get weight 0, not w.
    w = torch.where(regions["low"], beta1 * (1.0 - eps_low), beta2 * (1.0 + eps_high))
    clipped = regions["low"] | regions["high"]
    coef = torch.where(clipped, w * torch.exp(log_r - log_r.detach()), r)
    regions["zero_grad"] = regions["dual"]
    return _apply_dual_clip(-adv * coef, adv, dual_clip), regions


def cispo_token_loss(logp, old_logp, adv, mask, *, eps_low, eps_high, **_):
    """CISPO (MiniMax-M1; Klear App. A.1 Eq. 15): l = -sg(clip(r, 1-eps_low, 1+eps_high)) A logp.

    Two-sided clamp (verl's convention; TRL's `cispo` caps only above). W = clip(r, 1-eps_low, 1+eps_high) for every
    token, whatever the sign of A; no token's gradient is zeroed. The forward value is not PPO's.
    """
    r = _ratio(logp, old_logp)
    weight = r.clamp(1.0 - eps_low, 1.0 + eps_high).detach()
    regions = _clip_regions(r, adv, eps_low, eps_high, None)
    regions["zero_grad"] = torch.zeros_like(regions["low"])
    return -weight * adv * logp, regions


def gspo_token_loss(logp, old_logp, adv, mask, *, eps_low, eps_high, dual_clip=None, **_):
    """GSPO (Zheng et al. 2025): sequence-level ratio s_i = exp( sum_t M (logp - old_logp) / |y_i| ).

    l_i = max(-A_i s_i, -A_i clip(s_i, 1-eps_low, 1+eps_high)) broadcast to every token of response i (use
    agg="seq-mean-token-mean" for the paper's per-sequence mean). ds_i/dlogp_t = s_i/|y_i|, so un-clipped
    W_t = s_i / |y_i| per token, and the whole response is zeroed when its s_i is clipped. The GSPO paper's eps are
    ~3e-4/4e-4, far smaller than the token-level defaults; pass them explicitly. A must be per sequence here.
    """
    if adv.shape[-1] != 1 and not torch.all(adv == adv[:, :1]):
        raise ValueError("gspo needs one advantage per sequence ([batch] or constant along seq)")
    a = adv[:, :1]
    lengths = mask.sum(-1, keepdim=True).clamp(min=1.0)
    log_s = ((logp - old_logp) * mask).sum(-1, keepdim=True) / lengths
    s = torch.exp(log_s.clamp(-_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP))
    per_seq = torch.maximum(-a * s, -a * s.clamp(1.0 - eps_low, 1.0 + eps_high))
    regions = _clip_regions(s.expand_as(logp), a.expand_as(logp), eps_low, eps_high, dual_clip)
    regions["zero_grad"] = regions["low"] | regions["high"] | regions["dual"]
    per_seq = _apply_dual_clip(per_seq, a, dual_clip)
    return per_seq.expand_as(logp), regions


_LOSSES: dict[str, Callable[..., tuple[torch.Tensor, dict[str, torch.Tensor]]]] = {
    "gppo": gppo_token_loss,
    "ppo_clip": ppo_clip_token_loss,
    "cispo": cispo_token_loss,
    "gspo": gspo_token_loss,
}


def _metrics(regions: dict[str, torch.Tensor], mask: torch.Tensor) -> dict[str, float]:
    """Masked token fractions of each clip region, ratio stats, this loss's / PPO's zero-gradient shares, and the
    number of real tokens they are fractions of (so a trainer can pool them over micro-batches)."""
    m = mask.detach() > 0
    n = int(m.sum())
    if n == 0:
        return {"clip_frac_high": 0.0, "clip_frac_low": 0.0, "dual_clip_frac": 0.0, "ppo_zero_grad_frac": 0.0,
                "zero_grad_frac": 0.0, "ratio_mean": math.nan, "ratio_min": math.nan, "ratio_max": math.nan,
                "n_tokens": 0}

    def frac(x: torch.Tensor) -> float:
        """Share of real tokens in region x."""
        return float((x & m).sum()) / n

    ratio = regions["ratio"][m]
    return {
        "clip_frac_high": frac(regions["high"]),
        "clip_frac_low": frac(regions["low"]),
        "dual_clip_frac": frac(regions["dual"]),
        "ppo_zero_grad_frac": frac(regions["low"] | regions["high"] | regions["dual"]),
        "zero_grad_frac": frac(regions["zero_grad"]),
        "ratio_mean": float(ratio.mean()),
        "ratio_min": float(ratio.min()),
        "ratio_max": float(ratio.max()),
        "n_tokens": n,
    }


def masked_nll(logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Token-mean negative log-likelihood  -sum M logp / sum M  (the SFT term on correct rollouts; 0 if empty)."""
    mask = mask.to(logp.dtype)
    return -(logp * mask).sum() / mask.sum().clamp(min=1.0)


IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


def sampler_is_ratio(old_logp: torch.Tensor, sampling_logp: torch.Tensor, mask: torch.Tensor, mode: str,
                     clip_min: float | None, clip_max: float | None) -> torch.Tensor:
    """The vLLM sampler/trainer importance-sampling weight of TRL 1.16 (computed inline in
    `GRPOTrainer._generate_and_score_completions`; here so it can run on the rows that train only):

        d_t = (log pi_old(t) - log pi_sampler(t)) * mask_t      (NaN sampler log-probs -> d_t = 0, weight 1)
        token_*: w_t = exp(d_t);   sequence_*: w = exp(sum_t d_t), shape [B, 1]
        *_truncate: w clamped to [clip_min, clip_max];   *_mask: w = 0 outside [clip_min, clip_max]

    A bound that is None is open."""
    if mode not in IS_MODES:
        raise ValueError(f"vllm_importance_sampling_mode {mode!r} is not one of {IS_MODES}")
    diff = torch.nan_to_num((old_logp - sampling_logp) * mask, nan=0.0)
    if mode.startswith("sequence"):
        diff = diff.sum(-1, keepdim=True)
    ratio = torch.exp(diff)
    if mode.endswith("truncate"):
        return torch.clamp(ratio, min=clip_min, max=clip_max)
    lo = -math.inf if clip_min is None else clip_min
    hi = math.inf if clip_max is None else clip_max
    return ratio.masked_fill((ratio < lo) | (ratio > hi), 0.0)
