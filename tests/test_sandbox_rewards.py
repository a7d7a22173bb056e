"""The code reward's status -> value mapping (train/rl/rewards.py, code part)."""

from __future__ import annotations

import json

import pytest

from cotforge.curate.verify.code import CodeVerdict
from cotforge.train.rl.rewards import RewardConfig, code_reward, code_rewards

STATUSES_FAILED = ["fail", "timeout", "memory", "runtime_error", "syntax_error"]


@pytest.mark.parametrize("signed", [False, True])
def test_every_status_has_a_defined_value(signed):
    cfg = RewardConfig(code_signed=signed)
    lo = -1.0 if signed else 0.0
    assert code_reward(CodeVerdict("pass", 4, 4, ["pass"] * 4), cfg) == 1.0
    for st in STATUSES_FAILED:
        assert code_reward(CodeVerdict(st, 0, 2, [st, st]), cfg) == lo
        assert code_reward(CodeVerdict(st, 1, 2, ["pass", st]), cfg) == (0.0 if signed else 0.5)
    prose = code_reward(CodeVerdict("no_answer", 0, 2, ["fail", "fail"]), cfg)
    assert prose < lo, "an answer without a program must score below every program"
    assert code_reward(CodeVerdict("sandbox_error", 0, 0, [], ["bad tests"]), cfg) is None
    assert code_reward(CodeVerdict("no_answer", 0, 1, ["fail"]), RewardConfig(code_no_program=-3.0)) == -3.0


def test_code_rewards_end_to_end():
    tests = json.dumps({"kind": "stdio", "cases": [{"input": "2\n", "output": "4"}, {"input": "3\n", "output": "6"}]})
    good = "<think>t</think>\n```python\nprint(int(input()) * 2)\n```"
    wrong = "<think>t</think>\n```python\nprint(0)\n```"
    prose = "<think>t</think>\nJust double the number."
    crash = "<think>t</think>\n```python\nraise SystemExit(70)\n```"
    got = code_rewards([good, wrong, prose, crash, good], [tests] * 4 + [""], RewardConfig(workers=2))
    assert got[0] == 1.0 and got[1] == 0.0 and got[3] == 0.0
    assert got[2] is not None and got[2] < got[1]
    assert got[4] is None  # a row without tests is the data's problem, not the policy's
