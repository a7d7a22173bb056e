"""The RL data branch (`rl_data`, curate/mix/rl_data.py): the report's RL sources through their presets, exact
dedup, decontamination against a benchmark, the >= 16-tests rule, the pass-rate window from a reference model
(a scripted generator here; the SFT checkpoint in a run) -> rl_math/ and rl_code/ verl rows the RL loader takes.
Every row ends in one removed/ or in kept/."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cotforge.curate.context import StageContext
from cotforge.curate.mix.rl_data import RLDataConfig, run

PROGRAM = "<think>read and add one</think>\n```python\nprint(int(input()) + 1)\n```"
WRONG = "<think>guess</think>\n```python\nprint(0)\n```"


@dataclass
class _Completion:
    text: str


class ScriptedGenerator:
    """Answers by prompt: 2+2 always right (p = 1), 3*3 right half the time, the hard one never (p = 0), the code
    problem with a right and a wrong program (p = 0.5)."""

    def __init__(self):
        self.prompts: list[str] = []

    def generate(self, prompts, cfg):
        out = []
        for p in prompts:
            text = p[-1]["content"]
            self.prompts.append(text)
            if "2 + 2" in text:
                comps = ["<think>x</think> \\boxed{4}"] * cfg.n
            elif "3 * 3" in text:
                comps = ["<think>x</think> \\boxed{9}", "<think>x</think> \\boxed{8}"] * (cfg.n // 2)
            elif "plus one" in text:
                comps = [PROGRAM, WRONG] * (cfg.n // 2)
            else:
                comps = ["<think>x</think> \\boxed{0}"] * cfg.n
            out.append([_Completion(c) for c in comps])
        return out


def _verl(prompt: str, ability: str, truth: str) -> dict:
    return {"data_source": "skywork", "prompt": [{"role": "user", "content": prompt}], "ability": ability,
            "reward_model": {"style": "rule", "ground_truth": truth}, "extra_info": {"index": 0}}


def _sources(tmp_path: Path, shared_data: Path) -> list[dict]:
    aime = json.loads((shared_data / "benchmarks" / "aime2024.jsonl").read_text().splitlines()[0])["problem"]
    many = json.dumps({"inputs": [f"{i}\n" for i in range(20)], "outputs": [f"{i + 1}\n" for i in range(20)]})
    few = json.dumps({"inputs": ["1\n", "2\n", "3\n"], "outputs": ["2\n", "3\n", "4\n"]})
    verl = [_verl("What is 2 + 2?", "math", "4"), _verl("What is 3 * 3?", "math", "9"),
            _verl("Find the hard number nobody finds.", "math", "7"), _verl(aime, "math", "204"),
            _verl("Read n and print n plus one.", "code", many), _verl("Read n and print n plus two.", "code", few)]
    ace = [{"problem": "What is 2 + 2?", "answer": "4"},              # duplicate of the verl row: dropped
           {"problem": "Name a colour.", "answer": ""}]              # no answer: nothing to reward against
    (tmp_path / "skywork.jsonl").write_text("".join(json.dumps(r) + "\n" for r in verl))
    (tmp_path / "ace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ace))
    return [{"name": "skywork", "path": str(tmp_path / "skywork.jsonl"), "preset": "verl"},
            {"name": "acereason", "path": str(tmp_path / "ace.jsonl"), "preset": "acereason_math"}]


@pytest.mark.slow
def test_rl_data_branch_end_to_end(tmp_path, shared_data):
    pytest.importorskip("cotforge.curate.verify.code")
    gen = ScriptedGenerator()
    cfg = RLDataConfig(sources=_sources(tmp_path, shared_data), benchmarks=["aime2024"],
                       benchmarks_dir=str(shared_data / "benchmarks"), model="sft-checkpoint", backend="hf",
                       n_samples=2, max_new_tokens=64)
    ctx = StageContext(out_dir=tmp_path / "rl_data", make_generator=lambda model, backend: gen)
    stats = run(cfg, ctx)
    out = tmp_path / "rl_data"
    steps = stats["steps"]
    assert steps["filter"]["removed_by_reason"] == {"duplicate_prompt": 1, "no_answer": 1, "too_few_tests": 1}
    assert steps["decontaminate"]["removed_by_reason"] and steps["decontaminate"]["kept"] == 4
    assert "AIME" not in " ".join(gen.prompts) and len(gen.prompts) == 4  # only decontaminated rows sampled
    assert stats["removed_by_reason"] == {"pass_rate_high": 1, "pass_rate_low": 1}
    assert stats["rl_rows"] == {"math": 1, "code": 1} and stats["kept"] == 2
    # every input row in exactly one place
    removed = sum(sum(s["removed_by_reason"].values()) for s in steps.values()) + stats["removed"]
    assert steps["ingest"]["rows_in"] == 8 == removed + stats["kept"]
    # the RL loader takes the shards; the code row's 20 tests are there
    from cotforge.train.rl.data import load_rl_dataset

    math = load_rl_dataset(str(out / "rl_math"))
    code = load_rl_dataset(str(out / "rl_code"))
    assert [r["ground_truth"] for r in math] == ["9"]
    assert len(json.loads(code[0]["tests"])["cases"]) == 20
    assert pq.read_table(out / "rl_code" / "part-00000.parquet").column("data_source").to_pylist() == ["coder1_longcot"]


def test_rl_data_config_errors(tmp_path):
    with pytest.raises(ValueError, match="sources: the RL data branch needs"):
        RLDataConfig()
    with pytest.raises(ValueError, match=r"sources\[0\] \(a\): preset: unknown preset 'nope'"):
        RLDataConfig(sources=[{"name": "a", "path": "x.jsonl", "preset": "nope"}])
    with pytest.raises(ValueError, match=r"sources\[0\]: unknown key\(s\) \['colour'\]"):
        RLDataConfig(sources=[{"name": "a", "path": "x.jsonl", "colour": 1}])
    with pytest.raises(ValueError, match="pass_rate_min"):
        RLDataConfig(sources=[{"name": "a", "path": "x.jsonl"}], pass_rate_min=0.5, pass_rate_max=0.5)
