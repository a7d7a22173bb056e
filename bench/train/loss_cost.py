"""Cost of the policy loss: gppo vs ppo_clip (and cispo, gspo) forward+backward time on random tensors.

Target: gppo <= 1.05x ppo_clip. Runs are interleaved (ppo_clip, gppo, ... in turn) and the minimum and median over
repetitions are reported, so background load affects both sides alike.

    python -m bench.train.loss_cost                   # 64 x 4096 tokens, 30 reps
    python -m bench.train.loss_cost --batch 8 --seq 1024 --reps 10   # quick
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from cotforge.train.rl.losses import policy_loss


def loss_cost(batch: int = 64, seq: int = 4096, reps: int = 30,
              losses: tuple[str, ...] = ("ppo_clip", "gppo")) -> dict[str, dict[str, float]]:
    """{loss: {min, median}} seconds of one policy_loss forward+backward on [batch, seq] tensors."""
    g = torch.Generator().manual_seed(0)
    old = -torch.rand(batch, seq, generator=g) * 3
    base = old + torch.randn(batch, seq, generator=g) * 0.3
    adv, mask = torch.randn(batch, generator=g), torch.ones(batch, seq)
    times: dict[str, list[float]] = {lt: [] for lt in losses}
    for rep in range(reps + 2):
        for lt in losses:
            logp = base.clone().requires_grad_(True)
            t0 = time.perf_counter()
            loss, _ = policy_loss(lt, logp, old, adv, mask)
            loss.backward()
            if rep >= 2:  # warm-up
                times[lt].append(time.perf_counter() - t0)
    return {lt: {"min": min(t), "median": statistics.median(t)} for lt, t in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    res = loss_cost(args.batch, args.seq, args.reps, ("ppo_clip", "gppo", "cispo", "gspo"))
    base = res["ppo_clip"]
    print(f"policy_loss fwd+bwd, {args.batch}x{args.seq} tokens, {args.reps} interleaved reps, {args.threads} thread(s)")
    print(f"{'loss':10s} {'min ms':>8s} {'median ms':>10s} {'x ppo_clip (min)':>17s} {'x ppo_clip (median)':>20s}")
    for lt, t in res.items():
        print(f"{lt:10s} {t['min'] * 1e3:8.1f} {t['median'] * 1e3:10.1f} {t['min'] / base['min']:17.3f} "
              f"{t['median'] / base['median']:20.3f}")


if __name__ == "__main__":
    main()
