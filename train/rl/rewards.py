"""RL rewards: thin adapters over the verifiers in `curate.verify` (the only code that judges correctness).

Klear-Reasoner's shaping (paper §3.2.4, official reward code), in two reward modes (`RewardConfig.mode`):
  format (both modes): no `</think>` -> -0.5, else no `<think>` -> -2.0 (checked in that order, before
          verification); a `<think>` the prompt opened (chat templates whose generation prompt ends in `<think>`,
          e.g. R1-distill, Qwen3-Thinking-2507) counts as present, since the completion then never repeats it
  code (both modes): no ```python block after `</think>` -> `format_error` (-1), before anything runs (official
          `code_r1_compute.py`: the last ```python block after `</think>`, else ScoringConfig.format_error_score)

  mode "official" (the official scripts' reward; the Klear recipe's default):
    math: +1 if math-verify's own extraction of the text after the last `</think>` (any answer, boxed or not)
          verifies against the gold, else -1 (`math_mode: official`, `math_dapo.py`)
    code: the mean of +1 (test passed) / -1 (failed) over at most `code_max_tests` = 16 tests sampled from
          the row's tests, i.e. 2p - 1 over the sample (`code_r1_compute.py`, MAX_TEST_CASES = 16). The sample
          is seeded: a function of (`test_seed`, the row's tests, the trainer's step and how many rollouts
          came before at that step), so it is the same for the G samples of one prompt in one rollout (advantages compare programs on the same tests) and
          differs between rollouts; the official code draws per response, unseeded. A fence with no program
          in it scores `incorrect` (-1), as an empty program failing every test does there.
  mode "strict" (stricter: what the paper describes, with cotforge's stricter extraction):
    math: +1 only for the last `\boxed{}` after the last `</think>` (`math_mode: strict`): a correct unboxed
          answer scores -1 (official: +1)
    code: the pass fraction p in [0, 1] over *all* tests (the paper's soft reward). Against the fixed format
          penalties this reorders outcomes: a complete program failing every test scores 0 here, above the
          -0.5 of a truncated response (official: -1, below it); within a group p and 2p - 1 give the same
          advantages only when no row is format-penalised. A fence with no program scores below every
          program (`incorrect` = -1 < 0)
  Each field a mode sets (`math_mode`, `code_signed`, `code_max_tests`, `code_no_program`) can be set on its
  own to override it, e.g. `code_signed: true` in strict mode gives 2p - 1 over all tests (-1.5 without a
  program).

  Per code status of a program that ran (`code_reward`): pass -> counts as passed; fail, timeout, memory,
  runtime_error, syntax_error -> counts as failed; sandbox_error (the sandbox failed before the program
  started), or a row without tests -> None (TRL: unscorable, advantage 0); the program cannot cause it.
  Malformed tests are refused when the RL rows are loaded (`train.rl.data`), not here.
A rollout counts as *correct* (for the SFT term and accuracy) when its reward equals `correct` (1.0).

`make_reward_func` returns a TRL reward function f(completions, completion_ids, ability, ground_truth, tests, ...)
that routes each row by its `ability` column: "code" -> tests, answer abilities (math, science, other) -> math verifier.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
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
    format_error: float = -1.0           # code: no ```python block after the reasoning block
    think_start: str = "<think>"
    think_end: str = "</think>"
    require_think: bool = True          # apply the format penalties at all
    think_start_in_prompt: bool | None = None  # the prompt already opened <think>; None: detect it per row
    mode: str = "strict"                 # official | strict: the defaults of the four fields below (module doc)
    code_signed: bool | None = None      # 2p-1 instead of p (official: True, strict: False)
    code_max_tests: int | None = None    # tests sampled per row; 0 = all (official: 16, strict: 0)
    code_no_program: float | None = None  # reward without a program (official: incorrect; strict: below all)
    answer_abilities: tuple[str, ...] = ("math", "science", "other")  # rewarded by answer checking
    math_mode: str | None = None         # curate.verify.math extraction (official: official, strict: strict)
    test_seed: int = 0                   # seed of the code test sample
    math_timeout_s: float = 5.0
    workers: int | None = None

    def __post_init__(self) -> None:
        from cotforge.curate.verify.math import MODES

        if self.mode not in REWARD_MODES:
            raise ValueError(f"reward field 'mode': expected one of {list(REWARD_MODES)}, got {self.mode!r}")
        for name, value in REWARD_MODES[self.mode].items():
            if getattr(self, name) is None:
                setattr(self, name, value)
        if self.mode == "official" and self.code_no_program is None:
            self.code_no_program = self.incorrect
        if self.math_mode not in MODES:
            raise ValueError(f"reward field 'math_mode': expected one of {MODES}, got {self.math_mode!r}")
        if self.code_max_tests is None or self.code_max_tests < 0:
            raise ValueError(f"reward field 'code_max_tests': expected >= 0 (0 = all), got {self.code_max_tests!r}")


# What each reward mode sets (module docstring); a field given explicitly wins.
REWARD_MODES: dict[str, dict[str, Any]] = {
    "official": {"math_mode": "official", "code_signed": True, "code_max_tests": 16},
    "strict": {"math_mode": "strict", "code_signed": False, "code_max_tests": 0},
}


def format_penalty(text: str, cfg: RewardConfig, opened: bool = False) -> float | None:
    """The think-tag penalty for `text`, or None when the format is fine. `opened`: the prompt already opened
    the reasoning block (so `<think>` is not expected in the completion)."""
    if not cfg.require_think:
        return None
    if cfg.think_end not in text:
        return cfg.no_think_end
    if not (opened or cfg.think_start_in_prompt) and cfg.think_start not in text:
        return cfg.no_think_start
    return None


def opens_reasoning(prompt_text: str, cfg: RewardConfig) -> bool:
    """True when the rendered prompt ends inside a reasoning block: its last `think_start` is not followed by a
    `think_end` (R1-distill's generation prompt `<｜Assistant｜><think>\n`; Qwen3's `enable_thinking=False` prompt
    `<think>\n\n</think>` is closed, so False)."""
    start = prompt_text.rfind(cfg.think_start) if cfg.think_start else -1
    return start >= 0 and prompt_text.find(cfg.think_end, start) < 0


def _render_prompt(prompt: Any, tokenizer: Any, template_kwargs: dict[str, Any]) -> str:
    """The text the model continues from: a string prompt as is, a conversation through the chat template with
    the generation prompt (continuing a final assistant message, as TRL does)."""
    if isinstance(prompt, str):
        return prompt
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return ""
    cont = bool(prompt) and prompt[-1].get("role") == "assistant"
    return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=not cont,
                                         continue_final_message=cont, **template_kwargs)


def prompt_opened(prompts: Sequence[Any] | None, n: int, cfg: RewardConfig, tokenizer: Any = None,
                  template_kwargs: dict[str, Any] | None = None) -> list[bool]:
    """Per completion: did its prompt open the reasoning block? `cfg.think_start_in_prompt` True/False forces the
    answer; None detects it from the rendered prompt (TRL passes `prompts`), or, without prompts, from the
    tokenizer's generation prompt on a one-message probe conversation."""
    if cfg.think_start_in_prompt is not None or not cfg.require_think:
        return [bool(cfg.think_start_in_prompt)] * n
    kwargs = dict(template_kwargs or {})
    if prompts is None:
        probe = _render_prompt([{"role": "user", "content": "1 + 1?"}], tokenizer, kwargs)
        return [opens_reasoning(probe, cfg)] * n
    seen: dict[str, bool] = {}
    out = []
    for p in prompts:
        key = p if isinstance(p, str) else repr(p)
        if key not in seen:
            seen[key] = opens_reasoning(_render_prompt(p, tokenizer, kwargs), cfg)
        out.append(seen[key])
    return out


_PY_FENCE = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\n", re.IGNORECASE)


def has_code_block(text: str, think_end: str = "</think>") -> bool:
    """True when a ```python (or ```py / ```python3) fence opens after the last `think_end` (the official code's
    format: `</think>.*```python\n(.*?)\n````). A prose answer has none and scores `format_error`."""
    tail = text.rsplit(think_end, 1)[-1] if think_end else text
    return bool(_PY_FENCE.search(tail))


def _answer_text(response: str, cfg: RewardConfig) -> str:
    """The response as the verifier should read it: with `require_think` off, a response without `think_end`
    has no reasoning block, so all of it is the answer part (strict mode would otherwise find no answer)."""
    if cfg.require_think or not cfg.think_end or cfg.think_end in response:
        return response
    return cfg.think_end + response


def math_rewards(responses: Sequence[str], answers: Sequence[str], cfg: RewardConfig | None = None,
                 opened: Sequence[bool] | None = None, problems: Sequence[str | None] | None = None) -> list[float]:
    """+-1 from `verify_math_batch` in `cfg.math_mode` (set by the reward mode; strict: only the last box after
    `</think>` counts; official: any answer after it); format-penalised rows are not verified. `opened[i]`: row
    i's prompt opened the reasoning block (`prompt_opened`); `problems[i]`: its problem text (the verifier's
    list-order rule reads it)."""
    from cotforge.curate.verify.math import verify_math_batch

    cfg = cfg or RewardConfig()
    opened = opened if opened is not None else [False] * len(responses)
    out: list[float | None] = [format_penalty(r, cfg, o) for r, o in zip(responses, opened, strict=True)]
    todo = [i for i, v in enumerate(out) if v is None]
    if todo:
        verdicts = verify_math_batch([(_answer_text(responses[i], cfg), answers[i]) for i in todo],
                                     think_end=cfg.think_end,
                                     workers=cfg.workers, timeout_s=cfg.math_timeout_s, mode=cfg.math_mode,
                                     problems=[problems[i] for i in todo] if problems is not None else None)
        for i, v in zip(todo, verdicts, strict=True):
            out[i] = cfg.correct if v.correct else cfg.incorrect
    return [float(v) for v in out]  # type: ignore[arg-type]


def code_reward(verdict: Any, cfg: RewardConfig) -> float | None:
    """The reward of one CodeVerdict (the status -> value mapping in the module docstring)."""
    if verdict.status == "sandbox_error":
        return None
    if verdict.status == "no_answer":
        if cfg.code_no_program is not None:
            return float(cfg.code_no_program)
        return cfg.incorrect - (0.5 if cfg.code_signed else 0.0)
    p = float(verdict.pass_fraction)
    return (2 * p - 1) if cfg.code_signed else p


def sample_tests(tests: str, k: int, seed: int, step: int = 0, repeat: int = 0) -> str:
    """At most `k` stdio cases of `tests`, drawn without replacement by a generator seeded with (seed, step,
    repeat, the tests text), in their original order; other kinds (one assert script, a pytest file) and k = 0
    unchanged. `repeat` counts earlier rollouts at the same trainer step (a rollout whose rows were all left out
    does not advance the step; the next one must still draw new tests). The official reward samples
    MAX_TEST_CASES = 16 cases per response ([R] `code_r1_compute.py`)."""
    if k <= 0 or not tests:
        return tests
    try:
        spec = json.loads(tests)
    except json.JSONDecodeError:
        return tests
    cases = spec.get("cases") if isinstance(spec, dict) and spec.get("kind") == "stdio" else None
    if not isinstance(cases, list) or len(cases) <= k:
        return tests
    key = f"{step}" if repeat == 0 else f"{step}.{repeat}"
    digest = hashlib.sha256(f"{seed}:{key}:{tests}".encode()).digest()
    picked = sorted(random.Random(int.from_bytes(digest[:8], "big")).sample(range(len(cases)), k))
    return json.dumps({**spec, "cases": [cases[i] for i in picked]}, ensure_ascii=False)


def code_rewards(responses: Sequence[str], tests: Sequence[str], cfg: RewardConfig | None = None,
                 limits: Any = None, opened: Sequence[bool] | None = None, step: int = 0,
                 repeat: int = 0) -> list[float | None]:
    """`code_reward` of the program after `</think>` run against each row's tests (at most `cfg.code_max_tests`
    of them, `sample_tests` with the trainer's `step` and `repeat`) in the sandbox; format-penalised rows are not
    run, a response without a ```python block gets `cfg.format_error` (never run), a row without tests is
    unscorable (None: TRL gives it advantage 0), as is a sandbox failure. `opened` as in `math_rewards`."""
    from cotforge.curate.verify.code import extract_program, run_tests_batch
    from cotforge.curate.verify.sandbox import SandboxLimits

    cfg = cfg or RewardConfig()
    opened = opened if opened is not None else [False] * len(responses)
    out: list[float | None] = [format_penalty(r, cfg, o) for r, o in zip(responses, opened, strict=True)]
    items, idx = [], []
    for i, (resp, t) in enumerate(zip(responses, tests, strict=True)):
        if out[i] is not None:
            continue
        if not has_code_block(resp, cfg.think_end):
            out[i] = cfg.format_error
            continue
        if not t:
            log.warning("code reward: row %d has no tests; unscorable", i)
            continue
        t = sample_tests(t, int(cfg.code_max_tests or 0), cfg.test_seed, step, repeat)
        items.append((extract_program(resp, think_end=cfg.think_end, require_fence=True), t))
        idx.append(i)
    if items:
        verdicts = run_tests_batch(items, limits if limits is not None else SandboxLimits(), cfg.workers)
        for i, v in zip(idx, verdicts, strict=True):
            if v.status == "sandbox_error":  # malformed tests / the sandbox failed before the program started
                log.warning("code reward: sandbox error on row %d: %s", i, "; ".join(v.details)[:200])
            out[i] = code_reward(v, cfg)
    return [None if v is None else float(v) for v in out]


def problem_texts(prompts: Sequence[Any] | None, n: int) -> list[str | None]:
    """The problem of each row: a string prompt itself, else the last user message of the conversation."""
    if prompts is None:
        return [None] * n
    out: list[str | None] = []
    for p in prompts:
        if isinstance(p, str):
            out.append(p)
            continue
        users = [m.get("content") for m in p if isinstance(m, dict) and m.get("role") == "user"]
        out.append(users[-1] if users and isinstance(users[-1], str) else None)
    return out


def completion_texts(completions: Sequence[Any], completion_ids: Sequence[Sequence[int]] | None,
                     tokenizer: Any = None) -> list[str]:
    """Completion text with special tokens kept (TRL decodes with skip_special_tokens=True, which can drop
    `<think>`/`</think>` when a tokenizer marks them special): re-decode ids when a tokenizer is given."""
    if tokenizer is not None and completion_ids is not None:
        stop = {tokenizer.eos_token_id, tokenizer.pad_token_id}
        return [tokenizer.decode([t for t in ids if t not in stop], skip_special_tokens=False)
                for ids in completion_ids]
    return [c[-1]["content"] if isinstance(c, list) else str(c) for c in completions]


class RolloutCounter:
    """(trainer step, calls before this one at that step): a rollout whose rows were all left out leaves
    `global_step` where it was, and the next rollout must not draw the same code tests again."""

    def __init__(self) -> None:
        self.step: int | None = None
        self.repeat = 0

    def next(self, step: int) -> tuple[int, int]:
        """Count a call of the reward function at trainer step `step`."""
        self.repeat = self.repeat + 1 if step == self.step else 0
        self.step = step
        return step, self.repeat


def make_reward_func(cfg: RewardConfig | None = None, tokenizer: Any = None,
                     custom: dict[str, Callable[[list[str], list[Any]], list[float]]] | None = None,
                     chat_template_kwargs: dict[str, Any] | None = None) -> Callable[..., list[float | None]]:
    """A TRL reward function routing each row by `ability` to math/code (or a `custom[ability]` scorer).

    Dataset columns used: `ability`, `ground_truth` (math answer), `tests` (code tests JSON). `custom` maps an
    ability to f(texts, ground_truths) -> rewards, e.g. for synthetic tasks. `prompts` (TRL passes them), rendered
    with the tokenizer's chat template and `chat_template_kwargs`, tell whether the prompt opened `<think>`.
    """
    cfg = cfg or RewardConfig()
    custom = dict(custom or {})
    rollouts = RolloutCounter()

    def verifiable_reward(completions: list[Any], completion_ids: list[list[int]] | None = None,
                          ability: list[str] | None = None, ground_truth: list[Any] | None = None,
                          tests: list[Any] | None = None, prompts: list[Any] | None = None,
                          trainer_state: Any = None, **_: Any) -> list[float | None]:
        texts = completion_texts(completions, completion_ids, tokenizer)
        n = len(texts)
        opened = prompt_opened(prompts, n, cfg, tokenizer, chat_template_kwargs)
        problems = problem_texts(prompts, n)
        ability = ability or ["math"] * n
        ground_truth = ground_truth or [None] * n
        tests = tests or [None] * n
        step, repeat = rollouts.next(int(getattr(trainer_state, "global_step", 0) or 0))
        out: list[float | None] = [0.0] * n
        for kind in sorted(set(ability)):
            idx = [i for i in range(n) if ability[i] == kind]
            if kind in custom:
                vals = custom[kind]([texts[i] for i in idx], [ground_truth[i] for i in idx])
            elif kind in cfg.answer_abilities:
                vals = math_rewards([texts[i] for i in idx], [str(ground_truth[i]) for i in idx], cfg,
                                    opened=[opened[i] for i in idx], problems=[problems[i] for i in idx])
            elif kind == "code":
                vals = code_rewards([texts[i] for i in idx], [tests[i] or "" for i in idx], cfg,
                                    opened=[opened[i] for i in idx], step=step, repeat=repeat)
            else:
                raise ValueError(f"no reward for ability {kind!r} (rows {idx[:5]}...); expected code, one of "
                                 f"{list(cfg.answer_abilities)} or a custom scorer {sorted(custom)}")
            for i, v in zip(idx, vals, strict=True):
                out[i] = None if v is None else float(v)
        return out

    return verifiable_reward
