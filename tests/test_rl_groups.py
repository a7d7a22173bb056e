"""The official batch rules on hand-made groups (train.rl.groups), and GPPO's clipped weight beyond the clamp."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from cotforge.train.rl.groups import select_groups  # noqa: E402
from cotforge.train.rl.losses import policy_loss  # noqa: E402

NAN = math.nan


def _sel(rows: list[list[float]], **kw):
    g = len(rows[0])
    sel = select_groups(torch.tensor([v for r in rows for v in r]), g, **kw)
    return sel, sel.keep.view(-1, g), sel.advantages.view(-1, g)


def test_accuracy_filter_drops_groups_without_a_correct_answer():
    """[R] filter_groups metric=acc: different format penalties but no correct answer -> dropped; under the
    reward-range test (the old behaviour) the truncated response without </think> (-0.5) got advantage +1.5."""
    _, keep, _ = _sel([[-1, -1, -0.5, -1], [1, -1, -1, -1]])
    assert keep[0].tolist() == [False] * 4 and keep[1].all()
    _, keep_r, adv_r = _sel([[-1, -1, -0.5, -1]], metric="reward")
    assert keep_r.all() and adv_r[0, 2] == pytest.approx(1.5, abs=1e-5)


def test_all_correct_and_all_wrong_groups_are_dropped_and_advantages_use_the_unbiased_std():
    sel, keep, adv = _sel([[1, 1, 1, 1], [-1, -1, -1, -1], [1, -1, -1, 1]])
    assert keep.tolist() == [[False] * 4, [False] * 4, [True] * 4]
    r = torch.tensor([1.0, -1, -1, 1])
    assert torch.allclose(adv[2], (r - r.mean()) / (r.std() + 1e-6))  # torch.std: N-1, as [R]
    assert (sel.n_groups, sel.n_mixed, sel.n_selected) == (3, 1, 1)


def test_unscorable_rewards_are_dropped_not_counted_as_zero():
    """[1, 1, 1, None]: a None counted as 0 made the group look mixed (all-zero advantages, NLL still applied).
    Now the None row is dropped: the rest is all correct, so the group goes; in a mixed group only the None row."""
    sel, keep, adv = _sel([[1, 1, 1, NAN], [1, -1, NAN, -1]])
    assert not keep[0].any()
    assert keep[1].tolist() == [True, True, False, True] and adv[1, 2] == 0
    r = torch.tensor([1.0, -1, -1])
    assert torch.allclose(adv[1, [0, 1, 3]], (r - r.mean()) / (r.std() + 1e-6))
    assert sel.n_unscorable == 2 and not sel.correct[3]


def test_overlong_rows_are_dropped_before_grouping():
    """[R] overlong_filter: truncated rows leave before the group test and the group mean/std."""
    rows = [[1, -1, -1, -1], [1, -1, -1, -1], [-1, 1, 1, 1]]
    trunc = torch.tensor([[True, False, False, False],    # the only correct one is truncated: group now all wrong
                          [False, True, True, True],      # one row left: kept, mean 0 / std 1 ([R] size-1 groups)
                          [False, True, False, False]]).reshape(-1)
    sel, keep, adv = _sel(rows, truncated=trunc, overlong_filter=True)
    assert not keep[0].any()
    assert keep[1].tolist() == [True, False, False, False] and adv[1, 0] == pytest.approx(1.0, abs=1e-5)
    assert keep[2].tolist() == [True, False, True, True]
    r = torch.tensor([-1.0, 1, 1])
    assert torch.allclose(adv[2, [0, 2, 3]], (r - r.mean()) / (r.std() + 1e-6))
    assert sel.n_truncated == 5
    _, keep_off, _ = _sel(rows, truncated=trunc, overlong_filter=False)  # filter off: truncation is ignored
    assert keep_off.all()


def test_top_up_keeps_the_first_mixed_groups_up_to_the_batch():
    """[R] gen_prompt_bsz 256 -> train_prompt_bsz 128: of the sampled groups, the first `max_groups` kept ones."""
    rows = [[1, 1], [1, -1], [-1, -1], [-1, 1], [1, -1], [1, -1]]
    sel, keep, _ = _sel(rows, max_groups=2)
    assert keep.all(1).tolist() == [False, True, False, True, False, False]
    assert (sel.n_mixed, sel.n_selected) == (4, 2)
    _, keep_few, _ = _sel(rows[:3], max_groups=2)  # fewer survive than the batch: a smaller batch, no refill
    assert keep_few.all(1).tolist() == [False, True, False]


def test_filter_off_and_scales():
    _, keep, adv = _sel([[1, 1, 1, 1], [2, 0, 0, 0]], filter_groups=False, scale="none")
    assert keep.all() and adv[0].tolist() == [0, 0, 0, 0] and adv[1].tolist() == [1.5, -0.5, -0.5, -0.5]
    with pytest.raises(ValueError, match="groups of 3"):
        select_groups(torch.zeros(4), 3)
    with pytest.raises(ValueError, match="metric"):
        select_groups(torch.zeros(4), 2, metric="std")


@pytest.mark.parametrize("log_r, adv, weight", [(25.0, 1.0, 1 + 0.28), (-25.0, -1.0, 1 - 0.2), (21.0, 2.0, 1 + 0.28)])
def test_gppo_clipped_weight_survives_log_ratios_beyond_the_clamp(log_r, adv, weight):
    """|log r| > 20: the exp() clamp must not zero GPPO's clipped-region weight (beta (1 +- eps)); PPO's is 0."""
    old = torch.tensor([[-30.0, -2.0]], dtype=torch.float64)
    logp = (old + torch.tensor([[log_r, 0.0]], dtype=torch.float64)).requires_grad_(True)
    a = torch.tensor([adv], dtype=torch.float64)
    mask = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    loss, m = policy_loss("gppo", logp, old, a, mask, eps_low=0.2, eps_high=0.28, dual_clip=None)
    loss.backward()
    assert logp.grad[0, 0].item() == pytest.approx(-weight * adv)  # d loss / d logp = -W A (one token)
    assert m["clip_frac_high" if adv > 0 else "clip_frac_low"] == 1.0
    logp2 = logp.detach().clone().requires_grad_(True)
    policy_loss("ppo_clip", logp2, old, a, mask, dual_clip=None)[0].backward()
    assert logp2.grad[0, 0].item() == 0.0
    for beta in (0.25, 0.5):  # CE-GPPO's general form: beta scales the same weight
        logp3 = logp.detach().clone().requires_grad_(True)
        policy_loss("gppo", logp3, old, a, mask, beta1=beta, beta2=beta, dual_clip=None)[0].backward()
        assert logp3.grad[0, 0].item() == pytest.approx(-beta * weight * adv)
