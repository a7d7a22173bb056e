"""Gradient checks of train.losses against the closed forms, on random tensors."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from cotforge.train.rl.losses import AGG_MODES, aggregate, masked_nll, policy_loss  # noqa: E402

EPS_L, EPS_H = 0.2, 0.28


def _batch(seed: int = 0, b: int = 6, t: int = 9, spread: float = 0.6):
    """Random logp/old_logp with ratios well spread over all clip regions, a ragged mask, signed advantages."""
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(b, t, generator=g, dtype=torch.float64) * 3 - 0.1
    logp = (old + torch.randn(b, t, generator=g, dtype=torch.float64) * spread).requires_grad_(True)
    lengths = torch.randint(2, t + 1, (b,), generator=g)
    mask = (torch.arange(t)[None, :] < lengths[:, None]).double()
    adv = torch.randn(b, generator=g, dtype=torch.float64)
    return logp, old, adv, mask


def _grad(loss_type: str, logp, old, adv, mask, **kw):
    logp = logp.detach().clone().requires_grad_(True)
    loss, metrics = policy_loss(loss_type, logp, old, adv, mask, **kw)
    loss.backward()
    return loss.detach(), logp.grad, metrics


def _regions(logp, old, adv):
    r = torch.exp(logp.detach() - old)
    a = adv[:, None].expand_as(r)
    low = (r < 1 - EPS_L) & (a < 0)
    high = (r > 1 + EPS_H) & (a > 0)
    return r, a, low, high


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gppo_forward_equals_ppo_and_grad_weights(seed):
    logp, old, adv, mask = _batch(seed)
    r, a, low, high = _regions(logp, old, adv)
    assert (low & (mask > 0)).any() and (high & (mask > 0)).any(), "test batch must hit both clip regions"
    l_ppo, g_ppo, m_ppo = _grad("ppo_clip", logp, old, adv, mask)
    l_gppo, g_gppo, m_gppo = _grad("gppo", logp, old, adv, mask)
    assert torch.allclose(l_ppo, l_gppo)
    n = mask.sum()
    # d loss / d logp = -W * A * M / N (token-mean)
    w_ppo = torch.where(low | high, torch.zeros_like(r), r)
    w_gppo = torch.where(low, torch.full_like(r, 1 - EPS_L), torch.where(high, torch.full_like(r, 1 + EPS_H), r))
    assert torch.allclose(g_ppo, -w_ppo * a * mask / n)
    assert torch.allclose(g_gppo, -w_gppo * a * mask / n)
    # GPPO is non-zero exactly where PPO is zero (among real tokens with A != 0)
    real = (mask > 0) & (a != 0)
    assert torch.equal((g_ppo == 0) & real, (low | high) & real)
    assert bool((g_gppo[real] != 0).all())
    frac = float(((low | high) & (mask > 0)).sum() / n)
    assert m_gppo["ppo_zero_grad_frac"] == pytest.approx(frac)
    assert m_ppo["zero_grad_frac"] == pytest.approx(frac) and m_gppo["zero_grad_frac"] == 0.0
    assert m_gppo["clip_frac_high"] == pytest.approx(float((high & (mask > 0)).sum() / n))
    assert m_gppo["clip_frac_low"] == pytest.approx(float((low & (mask > 0)).sum() / n))
    assert m_gppo["ratio_max"] == pytest.approx(float(r[mask > 0].max()))


def test_gppo_general_beta_weights_and_forward():
    logp, old, adv, mask = _batch(3)
    r, a, low, high = _regions(logp, old, adv)
    b1, b2 = 0.25, 0.7
    loss, g, _ = _grad("gppo", logp, old, adv, mask, beta1=b1, beta2=b2)
    n = mask.sum()
    w = torch.where(low, torch.full_like(r, b1 * (1 - EPS_L)), torch.where(high, torch.full_like(r, b2 * (1 + EPS_H)), r))
    assert torch.allclose(g, -w * a * mask / n)
    expected = (-a * w * mask).sum() / n  # forward value in the clipped regions is beta * bound * A
    assert torch.allclose(loss, expected)


def test_dual_clip_caps_negative_advantage_tokens():
    logp, old, adv, mask = _batch(4, spread=1.5)
    r, a, _, _ = _regions(logp, old, adv)
    c = 2.0
    dual = (r > c) & (a < 0) & (mask > 0)
    assert dual.any()
    for lt in ("gppo", "ppo_clip"):
        loss, g, m = _grad(lt, logp, old, adv, mask, dual_clip=c)
        assert bool((g[dual] == 0).all()), lt
        assert m["dual_clip_frac"] == pytest.approx(float(dual.sum() / mask.sum()))
        # capped value is -c*A on those tokens
        l0, _, _ = _grad(lt, logp, old, adv, mask)
        assert float(loss) < float(l0)
    with pytest.raises(ValueError, match="dual_clip"):
        policy_loss("gppo", logp, old, adv, mask, dual_clip=0.5)


def test_cispo_weight_is_detached_clipped_ratio():
    logp, old, adv, mask = _batch(5)
    r, a, _, _ = _regions(logp, old, adv)
    loss, g, m = _grad("cispo", logp, old, adv, mask)
    w = r.clamp(1 - EPS_L, 1 + EPS_H)
    n = mask.sum()
    assert torch.allclose(g, -w * a * mask / n)
    assert torch.allclose(loss, (-w * a * logp.detach() * mask).sum() / n)
    assert m["zero_grad_frac"] == 0.0


def test_gspo_sequence_ratio_and_weights():
    logp, old, adv, mask = _batch(6, spread=0.05)  # small drift: most sequences inside the trust region
    eps = 0.03
    lengths = mask.sum(-1)
    s = torch.exp(((logp.detach() - old) * mask).sum(-1) / lengths)
    loss, g, m = _grad("gspo", logp, old, adv, mask, eps_low=eps, eps_high=eps, agg="seq-mean-token-mean")
    clipped = ((s > 1 + eps) & (adv > 0)) | ((s < 1 - eps) & (adv < 0))
    assert (~clipped).any()
    b = logp.shape[0]
    # seq-mean-token-mean of a per-sequence constant l_i = -A_i s_i is mean_i l_i; dl_i/dlogp_t = -A_i s_i / |y_i|
    w = torch.where(clipped, torch.zeros_like(s), s) / lengths
    assert torch.allclose(g, (-w * adv / b)[:, None] * mask)
    seq_loss = torch.maximum(-adv * s, -adv * s.clamp(1 - eps, 1 + eps))
    assert torch.allclose(loss, seq_loss.mean())
    assert m["ratio_mean"] == pytest.approx(float((s[:, None].expand_as(mask))[mask > 0].mean()))


def test_agg_normalisers():
    g = torch.Generator().manual_seed(7)
    per_token = torch.randn(4, 10, generator=g, dtype=torch.float64)
    mask = torch.zeros(4, 10, dtype=torch.float64)
    mask[0, :10] = 1
    mask[1, :3] = 1
    mask[2, :7] = 1  # row 3 empty
    tm = aggregate(per_token, mask, "token-mean")
    assert torch.allclose(tm, (per_token * mask).sum() / 20)
    sm = aggregate(per_token, mask, "seq-mean-token-mean")
    rows = [per_token[i, : int(mask[i].sum())].mean() for i in range(3)]
    assert torch.allclose(sm, torch.stack(rows).mean())
    dr = aggregate(per_token, mask, "seq-mean-token-sum-norm", norm_len=64)
    assert torch.allclose(dr, (per_token * mask).sum() / (4 * 64))
    # Dr. GRPO's normaliser does not depend on response lengths: growing a response only adds its own terms
    mask2 = mask.clone()
    mask2[1, :9] = 1
    delta = aggregate(per_token, mask2, "seq-mean-token-sum-norm", norm_len=64) - dr
    assert torch.allclose(delta, per_token[1, 3:9].sum() / (4 * 64))
    assert torch.allclose(aggregate(per_token, mask, "token-mean", token_normalizer=40.0), (per_token * mask).sum() / 40)


@pytest.mark.parametrize("agg", AGG_MODES)
def test_all_aggs_run_for_all_losses(agg):
    logp, old, adv, mask = _batch(8)
    for lt in ("gppo", "ppo_clip", "cispo", "gspo"):
        loss, g, m = _grad(lt, logp, old, adv, mask, agg=agg)
        assert torch.isfinite(loss) and torch.isfinite(g).all()
        assert bool((g[mask == 0] == 0).all()), "padding must get no gradient"


def test_token_level_advantages_and_is_weights():
    logp, old, adv, mask = _batch(9)
    adv_tok = adv[:, None].expand_as(mask).clone()
    l1, g1, _ = _grad("gppo", logp, old, adv, mask)
    l2, g2, _ = _grad("gppo", logp, old, adv_tok, mask)
    assert torch.allclose(l1, l2) and torch.allclose(g1, g2)
    w = torch.rand_like(mask)
    _, g3, _ = _grad("gppo", logp, old, adv, mask, is_weights=w)
    assert torch.allclose(g3, g1 * w)


def test_bad_inputs_are_named():
    logp, old, adv, mask = _batch(0)
    with pytest.raises(ValueError, match="loss_type"):
        policy_loss("nope", logp, old, adv, mask)
    with pytest.raises(ValueError, match="agg"):
        policy_loss("gppo", logp, old, adv, mask, agg="sum")
    with pytest.raises(ValueError, match="advantages"):
        policy_loss("gppo", logp, old, adv[:3], mask)
    with pytest.raises(ValueError, match="shape"):
        policy_loss("gppo", logp, old[:, :4], adv, mask)


def test_masked_nll():
    logp, _, _, mask = _batch(1)
    assert torch.allclose(masked_nll(logp, mask), -(logp * mask).sum() / mask.sum())
    assert float(masked_nll(logp.detach(), torch.zeros_like(mask))) == 0.0
