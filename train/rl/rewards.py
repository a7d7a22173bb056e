"""RL rewards: thin adapters over the verifiers in `curate.verify` (the only code that judges correctness).

Klear-Reasoner's shaping (paper §3.2.4, official reward code):
  format: no `</think>` -> -0.5, else no `<think>` -> -2.0 (checked in that order, before verification)
  math:   +1 if the text after the last `</think>` verifies against the answer, else -1
  code:   soft reward = test pass fraction in [0, 1] (the paper); `signed=True` gives 2p - 1 (the official code);
          no program extracted -> `incorrect`
A rollout counts as *correct* (for the SFT term and accuracy) when its reward equals `correct` (1.0).

`make_reward_func` returns a TRL reward function f(completions, completion_ids, ability, ground_truth, tests, ...)
that routes each row by its `ability` column: "code" -> tests, answer abilities (math, science, other) -> math verifier.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class RewardConfig:
    """Reward values and the think-tag format rules (defaults: Klear-Reasoner's ScoringConfig)."""

    correct: float = 1.0
    incorrect: float = -1.0
    no_think_end: float = -0.5
    no_think_start: float = -2.0
    think_start: str = "<think>"
    think_end: str = "</think>"
    require_think: bool = True          # apply the format penalties at all
    think_start_in_prompt: bool = False  # the chat template already opened <think> (e.g. Qwen3 thinking mode)
    code_signed: bool = False            # 2p-1 instead of p
    answer_abilities: tuple[str, ...] = ("math", "science", "other")  # rewarded by answer checking
    math_timeout_s: float = 5.0
    workers: int | None = None


def format_penalty(text: str, cfg: RewardConfig) -> float | None:
    """The think-tag penalty for `text`, or None when the format is fine."""
    if not cfg.require_think:
        return None
    if cfg.think_end not in text:
        return cfg.no_think_end
    if not cfg.think_start_in_prompt and cfg.think_start not in text:
        return cfg.no_think_start
    return None


def math_rewards(responses: Sequence[str], answers: Sequence[str], cfg: RewardConfig | None = None) -> list[float]:
    """+-1 from `verify_math_batch` on the text after `</think>`; format-penalised rows are not verified."""
    from cotforge.curate.verify.math import verify_math_batch

    cfg = cfg or RewardConfig()
    out: list[float | None] = [format_penalty(r, cfg) for r in responses]
    todo = [i for i, v in enumerate(out) if v is None]
    if todo:
        verdicts = verify_math_batch([(responses[i], answers[i]) for i in todo], think_end=cfg.think_end,
                                     workers=cfg.workers, timeout_s=cfg.math_timeout_s)
        for i, v in zip(todo, verdicts, strict=True):
            out[i] = cfg.correct if v.correct else cfg.incorrect
    return [float(v) for v in out]  # type: ignore[arg-type]


def code_rewards(responses: Sequence[str], tests: Sequence[str], cfg: RewardConfig | None = None,
                 limits: Any = None) -> list[float | None]:
    """Soft pass fraction of the program after `</think>` under the sandbox; signed 2p-1 when cfg.code_signed.

    None (TRL: unscorable, advantage 0) when the sandbox itself fails on a row (status "sandbox_error")."""
    from cotforge.curate.verify.code import extract_program, run_tests_batch
    from cotforge.curate.verify.sandbox import SandboxLimits

    cfg = cfg or RewardConfig()
    out: list[float | None] = [format_penalty(r, cfg) for r in responses]
    items, idx = [], []
    for i, (resp, t) in enumerate(zip(responses, tests, strict=True)):
        if out[i] is not None:
            continue
        program = extract_program(resp, think_end=cfg.think_end)
        if not program or not t:
            out[i] = cfg.incorrect
            continue
        items.append((program, t))
        idx.append(i)
    if items:
        verdicts = run_tests_batch(items, limits if limits is not None else SandboxLimits(), cfg.workers)
        for i, v in zip(idx, verdicts, strict=True):
            if v.status == "sandbox_error":  # malformed tests / runner failure: not the policy's fault
                log.warning("code reward: sandbox error on row %d: %s", i, "; ".join(v.details)[:200])
                out[i] = None
                continue
            p = float(v.pass_fraction)
            out[i] = (2 * p - 1) if cfg.code_signed else p
    return [None if v is None else float(v) for v in out]


def completion_texts(completions: Sequence[Any], completion_ids: Sequence[Sequence[int]] | None,
                     tokenizer: Any = None) -> list[str]:
    """Completion text with special tokens kept (TRL decodes with skip_special_tokens=True, which can drop
    `<think>`/`</think>` when a tokenizer marks them special): re-decode ids when a tokenizer is given."""
    if tokenizer is not None and completion_ids is not None:
        stop = {tokenizer.eos_token_id, tokenizer.pad_token_id}
        return [tokenizer.decode([t for t in ids if t not in stop], skip_special_tokens=False)
                for ids in completion_ids]
    return [c[-1]["content"] if isinstance(c, list) else str(c) for c in completions]


def make_reward_func(cfg: RewardConfig | None = None, tokenizer: Any = None,
                     custom: dict[str, Callable[[list[str], list[Any]], list[float]]] | None = None
                     ) -> Callable[..., list[float | None]]:
    """A TRL reward function routing each row by `ability` to math/code (or a `custom[ability]` scorer).

    Dataset columns used: `ability`, `ground_truth` (math answer), `tests` (code tests JSON). `custom` maps an
    ability to f(texts, ground_truths) -> rewards, e.g. for synthetic tasks.
    """
    cfg = cfg or RewardConfig()
    custom = dict(custom or {})

    def verifiable_reward(completions: list[Any], completion_ids: list[list[int]] | None = None,
                          ability: list[str] | None = None, ground_truth: list[Any] | None = None,
                          tests: list[Any] | None = None, **_: Any) -> list[float | None]:
        texts = completion_texts(completions, completion_ids, tokenizer)
        n = len(texts)
        ability = ability or ["math"] * n
        ground_truth = ground_truth or [None] * n
        tests = tests or [None] * n
        out: list[float | None] = [0.0] * n
        for kind in sorted(set(ability)):
            idx = [i for i in range(n) if ability[i] == kind]
            if kind in custom:
                vals = custom[kind]([texts[i] for i in idx], [ground_truth[i] for i in idx])
            elif kind in cfg.answer_abilities:
                vals = math_rewards([texts[i] for i in idx], [str(ground_truth[i]) for i in idx], cfg)
            elif kind == "code":
                vals = code_rewards([texts[i] for i in idx], [tests[i] or "" for i in idx], cfg)
            else:
                raise ValueError(f"no reward for ability {kind!r} (rows {idx[:5]}...); expected code, one of "
                                 f"{list(cfg.answer_abilities)} or a custom scorer {sorted(custom)}")
            for i, v in zip(idx, vals, strict=True):
                out[i] = None if v is None else float(v)
        return out

    return verifiable_reward
