"""A miniature of Klear-Reasoner's Figure 2: GPPO vs PPO-clip (DAPO clip-higher) vs CISPO on a verifiable toy task.

Task ("digit sum"): the prompt is a target d in 0..9; the policy writes T tokens from {0..9}; reward +1 if their
sum mod 10 == d, else -1 (exact, verifiable; random policy succeeds 10% of the time). The policy is a small
autoregressive MLP over (prompt, position, previous token). Each step samples `prompts x group` rollouts, takes
GRPO group-normalised advantages, drops zero-variance groups (dynamic sampling), and makes `minibatches`
optimizer steps over the batch (off-policy like the paper's 8 mini-batches per rollout batch, so ratios leave
the trust region and the losses differ). Same seeds, budget and hyper-parameters for every loss; only the loss
changes. Prints a table (mean +- std over seeds of reward over the last 10 steps, final entropy, a fresh
evaluation), and writes a PNG of the curves. Also times gppo vs ppo_clip forward+backward (bench/train/loss_cost.py).

    python -m bench.train.rl_toy                 # full: 5 seeds x 150 steps
    python -m bench.train.rl_toy --quick         # 2 seeds x 30 steps
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
from torch import nn

from bench.train.loss_cost import loss_cost
from cotforge.train.rl.losses import masked_nll, policy_loss

VOCAB, DIGITS = 10, 10
LOSSES = {  # name -> (loss_type, kwargs); eps as in the paper: 0.2 / 0.28
    "GPPO": ("gppo", {}),
    "PPO-clip (DAPO clip-higher)": ("ppo_clip", {}),
    "CISPO": ("cispo", {}),
    "GPPO beta1=0.25 (CE-GPPO)": ("gppo", {"beta1": 0.25}),
}


class Policy(nn.Module):
    """logits(token_t | prompt, t, token_{t-1}) from an MLP over summed embeddings."""

    def __init__(self, length: int, hidden: int = 64):
        super().__init__()
        self.length = length
        self.prompt = nn.Embedding(DIGITS, hidden)
        self.pos = nn.Embedding(length, hidden)
        self.prev = nn.Embedding(VOCAB + 1, hidden)  # VOCAB = start token
        self.mlp = nn.Sequential(nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, VOCAB))

    def logits(self, prompts: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """[B] prompts, [B, T] tokens -> [B, T, V] next-token logits (teacher forced)."""
        prev = torch.cat([torch.full_like(tokens[:, :1], VOCAB), tokens[:, :-1]], dim=1)
        pos = torch.arange(tokens.shape[1])
        return self.mlp(self.prompt(prompts)[:, None] + self.pos(pos)[None] + self.prev(prev))

    @torch.no_grad()
    def sample(self, prompts: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """Ancestral sampling at temperature 1."""
        toks = torch.zeros(len(prompts), 0, dtype=torch.long)
        for _ in range(self.length):
            step = torch.cat([toks, torch.zeros(len(prompts), 1, dtype=torch.long)], dim=1)
            probs = torch.softmax(self.logits(prompts, step)[:, -1], -1)
            toks = torch.cat([toks, torch.multinomial(probs, 1, generator=gen)], dim=1)
        return toks


def logp_entropy(policy: Policy, prompts: torch.Tensor, toks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-prob of the taken tokens and per-token entropy."""
    lp = torch.log_softmax(policy.logits(prompts, toks), -1)
    return lp.gather(-1, toks[..., None]).squeeze(-1), -(lp.exp() * lp).sum(-1)


def reward(prompts: torch.Tensor, toks: torch.Tensor) -> torch.Tensor:
    """+1 when sum(tokens) mod 10 equals the prompt digit, else -1."""
    return torch.where(toks.sum(-1) % 10 == prompts, 1.0, -1.0)


def run(loss_name: str, seed: int, args: argparse.Namespace) -> dict[str, list[float]]:
    """Train one policy with one loss; returns per-step curves."""
    loss_type, kw = LOSSES[loss_name]
    torch.manual_seed(seed)
    policy = Policy(args.length)
    opt = torch.optim.Adam(policy.parameters(), lr=args.lr)
    gen = torch.Generator().manual_seed(seed + 1000)
    curves: dict[str, list[float]] = {"reward": [], "entropy": [], "clip_frac": []}
    for _ in range(args.steps):
        prompts = torch.randint(0, DIGITS, (args.prompts,), generator=gen).repeat_interleave(args.group)
        toks = policy.sample(prompts, gen)
        r = reward(prompts, toks)
        grouped = r.view(-1, args.group)
        adv = ((grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-6)).view(-1)
        keep = (grouped.std(1) > 0).repeat_interleave(args.group)
        with torch.no_grad():
            old, ent = logp_entropy(policy, prompts, toks)
        curves["reward"].append(float(r.mean()))
        curves["entropy"].append(float(ent.mean()))
        idx = keep.nonzero().squeeze(-1)
        idx = idx[torch.randperm(len(idx), generator=gen)]
        clips = []
        for mb in idx.chunk(args.minibatches) if len(idx) else []:
            logp, _ = logp_entropy(policy, prompts[mb], toks[mb])
            mask = torch.ones_like(logp)
            loss, m = policy_loss(loss_type, logp, old[mb], adv[mb], mask, eps_low=0.2, eps_high=0.28, **kw)
            if args.sft_alpha > 0:
                loss = loss + args.sft_alpha * masked_nll(logp, mask * (r[mb] > 0).float()[:, None])
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            opt.step()
            clips.append(m["ppo_zero_grad_frac"])
        curves["clip_frac"].append(sum(clips) / len(clips) if clips else 0.0)
    ev = torch.arange(DIGITS).repeat_interleave(64)
    curves["eval_reward"] = [float(reward(ev, policy.sample(ev, torch.Generator().manual_seed(99))).mean())]
    return curves


def steps_to(curve: list[float], level: float, window: int = 5) -> int | None:
    """First step at which the `window`-step moving average of `curve` reaches `level` (None if never)."""
    for i in range(window - 1, len(curve)):
        if statistics.mean(curve[i - window + 1:i + 1]) >= level:
            return i
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--minibatches", type=int, default=8)
    ap.add_argument("--length", type=int, default=4)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--sft-alpha", type=float, default=0.0)
    ap.add_argument("--png", default="rl_toy.png", help="where to write the curves (default: ./rl_toy.png)")
    ap.add_argument("--quick", action="store_true", help="2 seeds x 30 steps")
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.steps = 2, 30
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    results = {name: [run(name, s, args) for s in range(args.seeds)] for name in LOSSES}
    tail = min(10, args.steps)
    print(f"digit-sum toy: {args.seeds} seeds x {args.steps} steps, {args.prompts} prompts x {args.group} rollouts, "
          f"{args.minibatches} minibatches/step, length {args.length}, lr {args.lr}, alpha {args.sft_alpha} "
          f"({time.perf_counter() - t0:.0f}s)")
    print(f"{'loss':30s} {'reward(last10)':>16s} {'eval reward':>14s} {'entropy(end)':>14s} {'PPO-zeroed %':>13s} "
          f"{'steps to 0.5':>13s}")
    for name, runs in results.items():
        def ms(vals: list[float]) -> str:
            """mean +- population std."""
            return f"{statistics.mean(vals):+.3f}+-{statistics.pstdev(vals):.3f}"
        last = [statistics.mean(c["reward"][-tail:]) for c in runs]
        ev = [c["eval_reward"][0] for c in runs]
        ent = [statistics.mean(c["entropy"][-tail:]) for c in runs]
        clip = [100 * statistics.mean(c["clip_frac"]) for c in runs]
        reach = [steps_to(c["reward"], 0.5) for c in runs]
        reached = [x for x in reach if x is not None]
        to_half = f"{statistics.mean(reached):.0f} ({len(reached)}/{len(reach)})" if reached else f"- (0/{len(reach)})"
        print(f"{name:30s} {ms(last):>16s} {ms(ev):>14s} {ms(ent):>14s} {statistics.mean(clip):13.1f} {to_half:>13s}")
    plot(results, args.png)
    cost = loss_cost()
    print(f"loss cost (64x4096 tokens, fwd+bwd, interleaved, min of 30): ppo_clip {cost['ppo_clip']['min'] * 1e3:.1f} "
          f"ms, gppo {cost['gppo']['min'] * 1e3:.1f} ms, ratio {cost['gppo']['min'] / cost['ppo_clip']['min']:.3f}x")


def plot(results: dict[str, list[dict[str, list[float]]]], path: str) -> None:
    """Mean curves (with min-max band over seeds) of reward and entropy per loss."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for name, runs in results.items():
        for ax, key in zip(axes, ("reward", "entropy"), strict=True):
            t = torch.tensor([c[key] for c in runs])
            x = range(t.shape[1])
            ax.plot(x, t.mean(0), label=name)
            ax.fill_between(x, t.min(0).values, t.max(0).values, alpha=0.15)
            ax.set_title(f"{key} (mean, min-max over seeds)")
            ax.set_xlabel("step")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
