"""verl reward function for cotforge's RL shards: scores rollouts with cotforge's verifiers.

Stock verl has no scorer for cotforge's `data_source` names (`math_longcot_math_verify`, `coder1_longcot`)
and cannot read a code row's `ground_truth` (cotforge's tests JSON, run in cotforge's sandbox). Point verl's
`custom_reward_function` at this file; it routes each row like `train.rl.rewards` (code rows: their tests,
every other row: the math verifier on the text after `</think>`) and returns Klear-Reasoner's shaped reward.

verl 0.9.1 pins transformers < 5.11, so run it in its own environment (or `pip install --no-deps verl==0.9.1`
plus omegaconf, tensordict, cloudpickle, pyvers next to cotforge to read and score shards); cotforge must be
importable there. The RL shards are the mix stage's `OUT/rl/*.parquet`; verl wants the file list, not a folder:

    python3 -m verl.trainer.main_ppo \\
        data.train_files="$(python -m cotforge.train.verl_reward files RUN/mix/rl)" \\
        data.prompt_key=prompt data.max_prompt_length=2048 data.max_response_length=16384 \\
        reward.custom_reward_function.path="$(python -m cotforge.train.verl_reward path)" \\
        reward.custom_reward_function.name=compute_score \\
        +reward.custom_reward_function.reward_kwargs.require_think=true ...

`reward_kwargs` are `RewardConfig` fields (unknown keys are an error). verl's NaiveRewardManager decodes
responses with `skip_special_tokens=True`: if the tokenizer marks `<think>`/`</think>` as special tokens they
vanish before scoring, so use `require_think=false` (or a tokenizer where they are plain text) there.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from pathlib import Path
from typing import Any

from cotforge.curate.io.codetests import normalize_tests
from cotforge.train.rl.data import resolve_parquet
from cotforge.train.rl.rewards import RewardConfig, code_rewards, math_rewards

CODE_SOURCES = ("coder1_longcot",)  # mix stage's default code data_source (curate.mix.stage)
_FIELDS = {f.name for f in dataclasses.fields(RewardConfig)}
# keys verl itself may pass to a compute_score (default_compute_score's parameters, reward loop extras)
_VERL_KEYS = {"sandbox_fusion_url", "concurrent_semaphore", "memory_limit_mb", "num_turns", "rollout_reward_scores"}


@functools.lru_cache(maxsize=32)
def _config(items: tuple[tuple[str, Any], ...]) -> RewardConfig:
    return RewardConfig(**dict(items))


def reward_config(kwargs: dict[str, Any]) -> RewardConfig:
    """RewardConfig from verl's reward_kwargs; an unknown key is a ValueError naming it."""
    unknown = sorted(set(kwargs) - _FIELDS - _VERL_KEYS)
    if unknown:
        raise ValueError(f"reward_kwargs: unknown RewardConfig field(s) {unknown}; known: {sorted(_FIELDS)}")
    items = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in kwargs.items() if k in _FIELDS))
    return _config(items)


def is_code_row(data_source: str, ground_truth: Any, extra_info: dict[str, Any] | None) -> bool:
    """Code rows: a code data_source, or tests in extra_info (the mix stage writes them for code rows only)."""
    tests = (extra_info or {}).get("tests")
    return data_source in CODE_SOURCES or bool(tests) and tests == ground_truth


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None,
                  **kwargs: Any) -> dict[str, Any]:
    """verl's custom reward signature: {"score", "acc"} for one rollout (acc: the reward equals `correct`).

    Code: the reward mode's test score in the sandbox (tests in any shape `normalize_tests` reads, e.g. Klear's
    `{"inputs", "outputs"}` ground truth), 0.0 when the sandbox itself fails on the row (verl needs a number);
    math and other answer rows: +-1 from the math verifier; both after the think-tag format penalties."""
    cfg = reward_config(kwargs)
    if is_code_row(data_source, ground_truth, extra_info):
        tests = normalize_tests((extra_info or {}).get("tests") or ground_truth) or ""
        value = code_rewards([solution_str], [tests], cfg)[0]
        score = 0.0 if value is None else value
    else:
        score = math_rewards([solution_str], [str(ground_truth)], cfg)[0]
    return {"score": float(score), "acc": bool(score == cfg.correct)}


def train_files(folder: str | Path) -> list[str]:
    """The shard files under an RL folder, sorted (verl's RLHFDataset rejects a folder)."""
    return resolve_parquet([str(folder)])


def main(argv: list[str]) -> int:
    """`files FOLDER...`: a Hydra list of the shards; `path`: this file (for custom_reward_function.path)."""
    if argv[:1] == ["path"]:
        print(Path(__file__).resolve())
        return 0
    if argv[:1] == ["files"] and len(argv) > 1:
        print(json.dumps([f for d in argv[1:] for f in train_files(d)]))
        return 0
    print("usage: python -m cotforge.train.verl_reward files RL_FOLDER... | path", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
