"""The user's door to training: every `cotforge train ...` command with missing or misspelt inputs ends in one
line naming the flag (exit 1 or 2), never a traceback; `--dry-run` checks the inputs for real (model config,
data, attention implementation, lengths) without loading weights; the help says what flags do."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from cotforge.pipelines.cli.main import main


def _invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=True)


def _user_error(result, *needles: str) -> None:
    """Exit 1/2 through click (SystemExit), no Python traceback, and the message names what is wrong."""
    assert result.exit_code in (1, 2), (result.exit_code, result.output)
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    for n in needles:
        assert n in result.output, (n, result.output)


@pytest.fixture(scope="module")
def rl_shard(tmp_path_factory) -> Path:
    """One verl-style prompt shard (what `cotforge curate mix` writes to rl/)."""
    path = tmp_path_factory.mktemp("rl") / "part-00000.parquet"
    rows = [{"data_source": "toy", "prompt": [{"role": "user", "content": f"What is {i} + {i}?"}], "ability": "math",
             "reward_model": {"style": "rule", "ground_truth": str(2 * i)}, "extra_info": {"id": f"toy-{i}"}}
            for i in range(4)]
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.fixture(scope="module")
def sft_shard(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sft") / "part-00000.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": "a", "source": "toy", "domain": "math", "prompt": "1+1?",
                                          "response": "<think>1+1=2</think> \\boxed{2}", "answer": "2"}]), path)
    return path


# ---------------------------------------------------------------------------------------------- train rl


@pytest.mark.parametrize("args,needles", [
    ((), ["--train-files", "required"]),
    (("--dry-run",), ["--train-files", "required"]),
    (("--data", "no/such/shards.parquet"), ["no/such/shards.parquet", "not found"]),
    (("--data", "no_such_*.parquet"), ["matches no file"]),
])
def test_rl_missing_or_misspelt_data(args, needles, tmp_path):
    _user_error(_invoke("train", "rl", *args, "-o", str(tmp_path / "o")), *needles)


def test_rl_missing_or_misspelt_model(rl_shard, tmp_path):
    _user_error(_invoke("train", "rl", "--data", str(rl_shard), "-o", str(tmp_path / "o")), "--model", "required")
    _user_error(_invoke("train", "rl", "--data", str(rl_shard), "--model", str(tmp_path / "no_model")),
                "--model", "no_model", "not found")
    _user_error(_invoke("train", "rl", "--data", str(rl_shard), "--model", str(tmp_path)), "--model",
                "config.json")


def test_rl_data_that_is_not_verl_rows(tmp_path, tiny_model_dir):
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_pylist([{"question": "1+1?"}]), bad)
    _user_error(_invoke("train", "rl", "--dry-run", "--data", str(bad), "--model", str(tiny_model_dir)),
                "--train-files", "prompt", "mix")
    text = tmp_path / "text.parquet"
    text.write_text("not parquet")
    _user_error(_invoke("train", "rl", "--dry-run", "--data", str(text), "--model", str(tiny_model_dir)),
                "not a readable Parquet file")


def test_rl_dry_run_checks_and_prints(rl_shard, tiny_model_dir, tmp_path):
    out = tmp_path / "rl_out"
    result = _invoke("train", "rl", "--dry-run", "--data", str(rl_shard), "--model", str(tiny_model_dir),
                     "-o", str(out), "--learning-rate", "3e-6", "--num-generations", "4", "--epsilon", "0.1",
                     "--temperature", "0.7", "--rollout-prompts", "4", "--mini-batch-prompts", "2")
    assert result.exit_code == 0, result.output
    cfg = json.loads(result.stdout[result.stdout.index("{"):])
    assert cfg["learning_rate"] == 3e-6 and cfg["num_generations"] == 4
    assert cfg["epsilon"] == 0.1 and cfg["temperature"] == 0.7
    assert "checks passed" in result.output and '"prompts": 4' in result.output
    assert not out.exists()  # a dry run writes nothing
    # a completion longer than the model's positions is refused before loading anything
    _user_error(_invoke("train", "rl", "--dry-run", "--data", str(rl_shard), "--model", str(tiny_model_dir),
                        "--max-completion-length", "100000"), "--max-completion-length", "100000", "positions")


def test_rl_bad_value_is_one_line(rl_shard, tiny_model_dir):
    _user_error(_invoke("train", "rl", "--data", str(rl_shard), "--model", str(tiny_model_dir),
                        "--num-generations", "1"), "num_generations")
    _user_error(_invoke("train", "rl", "--data", str(rl_shard), "--set", "rollout_promptz=4"),
                "--set rollout_promptz=4", "did you mean 'rollout_prompts'")


# ---------------------------------------------------------------------------------------------- train sft


@pytest.mark.parametrize("args,needles", [
    (("--dry-run",), ["--data", "required"]),
    (("--data", "no/such/dir"), ["--data", "no/such/dir", "not found"]),
])
def test_sft_missing_or_misspelt_data(args, needles, tmp_path):
    _user_error(_invoke("train", "sft", *args, "-o", str(tmp_path / "o")), *needles)


def test_sft_missing_or_misspelt_model(sft_shard, tmp_path):
    _user_error(_invoke("train", "sft", "--dry-run", "--data", str(sft_shard)), "--model", "required")
    _user_error(_invoke("train", "sft", "--data", str(sft_shard), "--model", "./no_such_model",
                        "-o", str(tmp_path / "o")), "--model", "no_such_model")
    assert not (tmp_path / "o").exists()


def test_sft_dry_run_is_a_real_check(sft_shard, tiny_model_dir, tmp_path):
    base = ("train", "sft", "--dry-run", "--data", str(sft_shard), "--model", str(tiny_model_dir),
            "-o", str(tmp_path / "o"))
    # the recipe default 32768 on a 4,096-position model: said before loading, naming the flag
    _user_error(_invoke(*base), "--max-length", "32768", "4096")
    # an attention implementation this machine lacks (no CUDA, or no flash-attn): said before loading
    _user_error(_invoke(*base, "--max-length", "1024", "--attn-implementation", "flash_attention_2",
                        "--set", "use_cpu=true"), "flash_attention_2", "sdpa")
    ok = _invoke(*base, "--max-length", "1024")
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout[ok.stdout.index("{"):])["max_length"] == 1024
    assert "checks passed" in ok.output


def test_sft_example_yaml_leaves_attention_to_the_machine():
    """The shipped example does not force flash_attention_2 (it crashed on machines without flash-attn)."""
    import yaml

    example = yaml.safe_load((Path(__file__).parents[1] / "pipelines" / "sft_example.yaml").read_text())
    assert example.get("attn_implementation") is None


def test_tiny_model_without_out():
    _user_error(_invoke("train", "tiny-model"), "--out")


# ---------------------------------------------------------------------------------------------- help


def test_train_help_one_naming_scheme():
    rl = _invoke("train", "rl", "--help").output
    sft = _invoke("train", "sft", "--help").output
    for flag in ("--output-dir", "--out", "--data"):
        assert flag in rl and flag in sft, flag
    assert "--train-files" in rl
    for flag in ("--learning-rate", "--num-generations", "--epsilon", "--temperature"):
        assert flag in rl, flag
    assert "[P] cites" in rl  # the reference markers are explained
    assert "train.rl.rewards" not in rl and "RewardConfig" not in rl  # no internal Python paths
    assert "correct (1.0)" in " ".join(rl.split())
    for text in (rl, sft):  # one checkpointing flag, not two with the same help
        assert "--gradient-checkpointing" not in text


@pytest.mark.parametrize("command, sections", [
    ("sft", ["Config", "Data", "Model", "Optimisation", "Output and logging"]),
    ("rl", ["Config", "Data and reward", "Model", "Loss (GPPO and its baselines)", "Rollouts and batches",
            "Optimisation", "Output and logging"]),
])
def test_train_help_is_grouped(command, sections):
    """Every flag of `train sft/rl --help` sits in a titled section; only --help is left under 'Other options'."""
    text = _invoke("train", command, "--help").output
    titles = [line[:-1] for line in text.splitlines() if line and not line.startswith(" ") and line.endswith(":")]
    assert titles == [*sections, "Other options"], titles
    other = text.split("Other options:")[1]
    assert [ln.split()[0] for ln in other.splitlines() if ln.startswith("  -")] == ["--help"]
