"""verl reads the mix stage's RL shards (RLHFDataset) and scores a batch of rollouts through cotforge's reward
module loaded the way verl loads it (`custom_reward_function`), with its NaiveRewardManager. Skips without
verl (`pip install --no-deps verl==0.9.1 tensordict` + omegaconf cloudpickle pyvers; .ci/run installs them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("verl", reason="verl not installed (pip install --no-deps verl==0.9.1 tensordict; "
                                   "pip install omegaconf cloudpickle pyvers; .ci/run does)")

from omegaconf import OmegaConf  # noqa: E402

from cotforge.pipelines.stages import run_stage  # noqa: E402
from cotforge.train.verl_reward import compute_score, reward_config, train_files  # noqa: E402

DOUBLE = "<think>read n, print twice n</think>\n```python\nprint(2 * int(input()))\n```"
PLUS_ONE = "<think>off by one</think>\n```python\nn = int(input())\nprint(n + 3)\n```"  # passes 1 of 2 cases


@pytest.fixture(scope="module")
def rl_folder(tmp_path_factory) -> Path:
    """The mix stage's rl/ folder over 3 math problems and 1 code problem (stdio tests)."""
    from cotforge.curate.io.inputs import resolve_inputs
    from cotforge.curate.mix.stage import MixConfig

    root = tmp_path_factory.mktemp("verl")
    rows = [{"id": f"m{i}", "source": "mathA", "domain": "math", "problem": f"What is {i} + {i}?",
             "response": f"<think>add</think> \\boxed{{{2 * i}}}", "answer": str(2 * i)} for i in range(1, 4)]
    rows.append({"id": "c0", "source": "codeA", "domain": "code", "problem": "Read n, print 2n.", "response": DOUBLE,
                 "tests": json.dumps({"kind": "stdio", "cases": [{"input": "3\n", "output": "6\n"},
                                                                 {"input": "2\n", "output": "4\n"}]})})
    (root / "pool.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run_stage("mix", resolve_inputs([str(root / "pool.jsonl")]), root / "mix", MixConfig(name="verl", card=False))
    return root / "mix" / "rl"


def _batch(ds, tok, responses: list[str]):
    """A DataProto as verl's rollout hands it to the reward manager: left-padded prompts, right-padded
    responses, the dataset's non-tensor columns (reward_model, data_source, extra_info)."""
    from verl import DataProto
    from verl.utils.dataset.rl_dataset import collate_fn

    items = [ds[i] for i in range(len(responses))]
    nt = collate_fn(items)
    p_ids = [tok.apply_chat_template(it["raw_prompt"], add_generation_prompt=True, tokenize=True, return_dict=False)
             for it in items]
    r_ids = [tok(r, add_special_tokens=False)["input_ids"] for r in responses]
    P, R, pad = max(map(len, p_ids)), max(map(len, r_ids)), tok.pad_token_id
    prompts = torch.tensor([[pad] * (P - len(p)) + p for p in p_ids])
    resp = torch.tensor([r + [pad] * (R - len(r)) for r in r_ids])
    mask = torch.tensor([[0] * (P - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (R - len(r))
                         for p, r in zip(p_ids, r_ids, strict=True)])
    non_tensors = {k: v for k, v in nt.items() if not isinstance(v, torch.Tensor)}
    return DataProto.from_dict(tensors={"prompts": prompts, "responses": resp, "attention_mask": mask},
                               non_tensors=non_tensors)


def test_verl_reads_and_scores_the_rl_shards(rl_folder, tiny_model_dir, tmp_path):
    from transformers import AutoTokenizer
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.utils.dataset.rl_dataset import RLHFDataset
    from verl.workers.reward_manager.naive import NaiveRewardManager

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    files = train_files(rl_folder)
    assert files and all(f.endswith(".parquet") for f in files)
    ds = RLHFDataset(files, tok, OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 256,
                                                    "cache_dir": str(tmp_path / "cache")}))
    assert len(ds) == 4
    order = [ds[i]["extra_info"]["id"] for i in range(4)]
    truth = {ds[i]["extra_info"]["id"]: ds[i]["reward_model"]["ground_truth"] for i in range(4)}
    by_id = {"m1": "<think>1 + 1</think> The answer is \\boxed{2}.",  # correct
             "m2": "<think>2 + 2</think> The answer is \\boxed{5}.",  # wrong
             "m3": "The answer is \\boxed{6}.",                        # correct, no think block
             "c0": PLUS_ONE}                                           # half the tests pass
    responses = [by_id[i] for i in order]
    path = subprocess.run([sys.executable, "-m", "cotforge.train.verl_reward", "path"], capture_output=True,
                          text=True, check=True).stdout.strip()

    def score(**reward_kwargs):
        cfg = OmegaConf.create({"reward": {"custom_reward_function": {
            "path": path, "name": "compute_score", "reward_kwargs": reward_kwargs}}})
        manager = NaiveRewardManager(tok, num_examine=0, compute_score=get_custom_reward_fn(cfg))
        out = manager(_batch(ds, tok, responses), return_dict=True)
        return (dict(zip(order, out["reward_tensor"].sum(-1).tolist(), strict=True)),
                dict(zip(order, out["reward_extra_info"]["acc"], strict=True)))

    # the tiny tokenizer marks <think>/</think> special: verl decodes with skip_special_tokens=True, so the
    # format rule sees no </think> anywhere (-0.5 each): the pitfall the module docstring documents
    assert score(require_think=True)[0] == dict.fromkeys(order, -0.5), truth
    rewards, acc = score(require_think=False)
    assert rewards == {"m1": 1.0, "m2": -1.0, "m3": 1.0, "c0": 0.5}, (rewards, truth)
    assert acc == {"m1": True, "m2": False, "m3": True, "c0": False}


def test_reward_module_routing_and_kwargs():
    tests = json.dumps({"kind": "stdio", "cases": [{"input": "3\n", "output": "6\n"}]})
    assert compute_score("coder1_longcot", DOUBLE, tests, {"tests": tests}) == {"score": 1.0, "acc": True}
    # a code row under another data_source is still recognised by its tests
    assert compute_score("my_code", DOUBLE, tests, {"tests": tests})["score"] == 1.0
    assert compute_score("math_longcot_math_verify", "\\boxed{4}", "4", {}, require_think=False)["acc"]
    assert compute_score("x", "<think>a</think>\\boxed{4}", "4", None, code_signed=True)["score"] == 1.0
    with pytest.raises(ValueError, match=r"unknown RewardConfig field\(s\) \['requre_think'\]"):
        reward_config({"requre_think": False})
