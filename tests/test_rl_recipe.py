"""Issue 32: the Klear RL recipe as the report ran it. Klear-format RL rows load (tests normalised and checked at
load), the official and strict reward modes on hand-made completions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from cotforge.train.rl.data import load_rl_dataset, to_trl_row  # noqa: E402
from cotforge.train.rl.rewards import RewardConfig, code_rewards, make_reward_func, sample_tests  # noqa: E402

PROMPT = [{"role": "user", "content": "You are an expert Python programmer. Read n, print 2n."}]


def _klear_code_row(ground_truth, **extra) -> dict:
    """A row in the released KlearReasoner-CodeSub-15K schema (verl: ground_truth a JSON string)."""
    return {"data_source": "coder1_longcot", "prompt": PROMPT, "ability": "code",
            "reward_model": {"style": "rule", "ground_truth": ground_truth}, "extra_info": {"index": 3, **extra}}


def _write(tmp_path: Path, rows: list[dict]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "rl" / "part-0.parquet"
    path.parent.mkdir(exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


STDIO_GT = json.dumps({"inputs": ["2\n", "3\n", "5\n"], "outputs": ["4\n", "6\n", "10\n"]})
DOUBLE = "<think>double it</think>\n```python\nn = int(input())\nprint(n * 2)\n```"


@pytest.mark.parametrize("gt,kind", [
    (STDIO_GT, "stdio"),
    (json.loads(STDIO_GT), "stdio"),                                           # a struct, not a JSON string
    (json.dumps({"fn_name": "f", "inputs": [[1], [2]], "outputs": [2, 4]}), "assert"),  # APPS call-based
    (json.dumps({"functional": "assert f(1) == 2"}), "assert"),                 # code-r1 functional
    (json.dumps([{"input": "1\n", "output": "2\n"}]), "stdio"),
])
def test_klear_code_rows_are_normalised_at_load(tmp_path, gt, kind):
    ds = load_rl_dataset(str(_write(tmp_path, [_klear_code_row(gt)])))
    assert json.loads(ds[0]["tests"])["kind"] == kind and ds[0]["ability"] == "code"


@pytest.mark.parametrize("gt,why", [
    (json.dumps({"inputs": [], "outputs": []}), "non-empty list 'cases'"),
    (json.dumps({"inputs": ["1"], "outputs": ["1", "2"]}), "unknown kind"),    # unequal lengths: not a test list
    (json.dumps({"inputs_file": "in.txt", "outputs_file": "out.txt"}), "external files"),
    ("{not json", "unknown kind|invalid JSON"),
    (json.dumps({"weird": 1}), "unknown kind"),
])
def test_unparseable_code_tests_fail_at_load_naming_file_row_and_field(tmp_path, gt, why):
    good = _klear_code_row(STDIO_GT)
    path = _write(tmp_path, [good, _klear_code_row(gt)])
    with pytest.raises(ValueError, match=rf"part-0\.parquet:1: field 'reward_model\.ground_truth'.*({why})"):
        load_rl_dataset(str(path))
    with pytest.raises(ValueError, match="code row without tests"):
        to_trl_row(_klear_code_row(""), "f.parquet:7")


def test_cli_names_the_bad_row(tmp_path, tiny_model_dir):
    """From the user's door: `cotforge train rl` on a bad Klear row exits with the file:row and field, no traceback."""
    from click.testing import CliRunner

    from cotforge.pipelines.cli.train import train

    path = _write(tmp_path, [_klear_code_row(json.dumps({"inputs": [], "outputs": []}))])
    y = tmp_path / "c.yaml"
    y.write_text(f"model: {tiny_model_dir}\nnum_generations: 2\nrollout_prompts: 2\nmini_batch_prompts: 1\n"
                 "per_device_train_batch_size: 2\noversample: 1\nreport_to: []\n")
    res = CliRunner().invoke(train, ["rl", "--config", str(y), "--data", str(path), "-o", str(tmp_path / "o"),
                                     "--max-steps", "1"])
    assert res.exit_code != 0
    assert "part-0.parquet:0" in res.output and "reward_model.ground_truth" in res.output, res.output
    assert "Traceback" not in res.output


def test_klear_code_row_gets_a_reward(tmp_path):
    """The loaded Klear row's tests reach the sandbox: a correct program scores +1 (official), not None."""
    pytest.importorskip("cotforge.curate.verify.code")
    ds = load_rl_dataset(str(_write(tmp_path, [_klear_code_row(STDIO_GT)])))
    row = ds[0]
    wrong = DOUBLE.replace("n * 2", "n + 2")  # passes 2 -> 4 only
    out = make_reward_func(RewardConfig(mode="official", workers=2))(
        completions=[DOUBLE, wrong], ability=[row["ability"]] * 2, ground_truth=[row["ground_truth"]] * 2,
        tests=[row["tests"]] * 2)
    assert out == [1.0, pytest.approx(2 * 1 / 3 - 1)]


# ---------------------------------------------------------------- reward modes on hand-made completions
MATH = ["<think>2+2</think> The answer is 4.",      # unboxed, correct
        "<think>2+2</think> \\boxed{4}",              # boxed, correct
        "<think>\\boxed{4}</think> so 5",             # the box is inside the reasoning; the answer part says 5
        "<think>2+2</think> $4$",                     # a bare math span
        "2+2 is 4 \\boxed{4}",                        # no </think>
        "2+2 </think> \\boxed{4}"]                    # no <think>


def test_math_reward_modes():
    pytest.importorskip("cotforge.curate.verify.math")
    n = len(MATH)
    official = make_reward_func(RewardConfig(mode="official", workers=1))
    strict = make_reward_func(RewardConfig(mode="strict", workers=1))
    kw = dict(ability=["math"] * n, ground_truth=["4"] * n)
    assert official(completions=MATH, **kw) == [1.0, 1.0, -1.0, 1.0, -0.5, -2.0]
    assert strict(completions=MATH, **kw) == [-1.0, 1.0, -1.0, -1.0, -0.5, -2.0]
    # a field set on its own overrides the mode
    assert make_reward_func(RewardConfig(mode="official", math_mode="strict", workers=1))(
        completions=MATH[:1], ability=["math"], ground_truth=["4"]) == [-1.0]
    with pytest.raises(ValueError, match="'mode'"):
        RewardConfig(mode="paper")


def _fake_runner(monkeypatch, seen: list):
    """Replace the sandbox: a test passes when its expected output is even; records the tests each program saw."""
    import cotforge.curate.verify.code as verify

    def fake_run(items, limits, workers):
        out = []
        for prog, tests in items:
            spec = json.loads(tests)
            seen.append(spec)
            if not prog.strip():
                out.append(verify.CodeVerdict("no_answer", 0, len(spec["cases"]), [], []))
                continue
            res = ["pass" if int(c["output"]) % 2 == 0 else "fail" for c in spec["cases"]]
            out.append(verify.CodeVerdict("pass" if all(r == "pass" for r in res) else "fail",
                                          res.count("pass"), len(res), res, [""] * len(res)))
        return out

    monkeypatch.setattr(verify, "run_tests_batch", fake_run)


def test_code_reward_modes(monkeypatch):
    """official: mean of +-1 over <= 16 sampled tests; strict: pass fraction over all tests. 40 cases, 10 of
    them odd (failing). Format penalties and the no-program score per mode."""
    seen: list = []
    _fake_runner(monkeypatch, seen)
    cases = [{"input": str(i), "output": str(i)} for i in range(40)]
    tests = json.dumps({"kind": "stdio", "cases": cases})
    ok = "<think>x</think>\n```python\nprint(1)\n```"
    empty = "<think>x</think>\n```python\n\n```"
    texts = [ok, empty, "<think>x</think> prose", "no think"]
    strict = code_rewards(texts, [tests] * 4, RewardConfig(mode="strict"))
    assert strict == [0.5, -1.0, -1.0, -0.5] and len(seen[0]["cases"]) == 40
    seen.clear()
    official = code_rewards(texts, [tests] * 4, RewardConfig(mode="official"), step=3)
    sample = seen[0]["cases"]
    assert len(sample) == 16 and all(c in cases for c in sample)
    passed = sum(int(c["output"]) % 2 == 0 for c in sample)
    assert official[0] == pytest.approx((passed - (16 - passed)) / 16)
    assert official[1:] == [-1.0, -1.0, -0.5]
    # the strict mode's reordering: a program failing every test vs a truncated (no </think>) response
    seen.clear()
    all_odd = json.dumps({"kind": "stdio", "cases": [{"input": "1", "output": "1"}] * 3})
    assert code_rewards([ok], [all_odd], RewardConfig(mode="strict")) == [0.0]      # above -0.5
    assert code_rewards([ok], [all_odd], RewardConfig(mode="official")) == [-1.0]   # below -0.5


def test_test_sample_is_seeded_shared_within_a_rollout_and_redrawn_across():
    tests = json.dumps({"kind": "stdio", "cases": [{"input": str(i), "output": str(i)} for i in range(40)]})
    a = sample_tests(tests, 16, seed=0, step=5)
    assert a == sample_tests(tests, 16, seed=0, step=5)               # same prompt, same rollout: same sample
    assert a != sample_tests(tests, 16, seed=0, step=6)               # next rollout: a new sample
    assert a != sample_tests(tests, 16, seed=1, step=5)
    assert sample_tests(tests, 0, seed=0) == tests                    # 0 = all tests
    few = json.dumps({"kind": "stdio", "cases": [{"input": "1", "output": "1"}] * 3})
    assert sample_tests(few, 16, seed=0) == few
    idx = [int(c["input"]) for c in json.loads(a)["cases"]]
    assert idx == sorted(idx) and len(set(idx)) == 16



def test_a_rollout_that_trained_nothing_does_not_repeat_the_next_test_draw(monkeypatch):
    """TRL's reward function at the same `global_step` twice (the first rollout's rows were all left out, so the
    step did not advance): the second call draws other tests; the next step starts from the plain step draw."""
    from types import SimpleNamespace

    seen: list = []
    _fake_runner(monkeypatch, seen)
    tests = json.dumps({"kind": "stdio", "cases": [{"input": str(i), "output": str(i)} for i in range(40)]})
    ok = "<think>x</think>\n```python\nprint(1)\n```"
    reward = make_reward_func(RewardConfig(mode="official"))
    for step in (4, 4, 5):
        reward([ok], ability=["code"], tests=[tests], trainer_state=SimpleNamespace(global_step=step))
    first, again, nxt = (json.dumps(s) for s in seen)
    assert first == sample_tests(tests, 16, seed=0, step=4) and again != first
    assert again == sample_tests(tests, 16, seed=0, step=4, repeat=1)
    assert nxt == sample_tests(tests, 16, seed=0, step=5)

# ---------------------------------------------------------------- the policy_loss log
def _parity(texts: list[str], truths: list[str]) -> list[float]:
    """1.0 (correct: enters the SFT term) for even-length completions, 0.0 otherwise: mixed groups."""
    return [1.0 if len(t) % 2 == 0 else 0.0 for t in texts]


def _sevens_rows(n: int) -> list[dict]:
    return [{"data_source": "s", "prompt": [{"role": "user", "content": f"Reply with the digit 7 ({i})."}],
             "ability": "parity", "reward_model": {"style": "rule", "ground_truth": "7"},
             "extra_info": {"id": f"s{i}", "tests": None}} for i in range(n)]


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_logged_policy_loss_is_the_optimised_loss(tiny_model_dir, tmp_path, agg):
    """With gradient accumulation 2, the logged policy_loss + sft_alpha * sft_nll equals the Trainer's `loss`
    (the loss the step minimised); before issue 32 policy_loss was that loss / GA under token-mean."""
    from cotforge.train.rl.config import GPPOConfig
    from cotforge.train.rl.trainer import run_rl

    path = _write(tmp_path, _sevens_rows(8))
    cfg = GPPOConfig(model=str(tiny_model_dir), train_files=[str(path)], output_dir=str(tmp_path / agg),
                     num_generations=4, rollout_prompts=2, mini_batch_prompts=1, per_device_train_batch_size=2,
                     oversample=1, filter_groups_metric="reward", overlong_filter=False, max_completion_length=8,
                     learning_rate=0.05, warmup_steps=0, max_steps=2, save_steps=100, report_to=[], sft_alpha=0.5,
                     loss_agg_mode=agg, seed=0)
    assert cfg.gradient_accumulation_steps == 2
    trainer = run_rl(cfg, reward_funcs=[make_reward_func(RewardConfig(require_think=False),
                                                         custom={"parity": _parity})])
    logs = [r for r in trainer.state.log_history if "policy_loss" in r]
    assert len(logs) == 2
    for r in logs:
        assert r["policy_loss"] + 0.5 * r["sft_nll"] == pytest.approx(r["loss"], rel=1e-4, abs=1e-6)
    assert any(r["sft_nll"] > 0 for r in logs) and any(abs(r["policy_loss"]) > 1e-6 for r in logs)


# ---------------------------------------------------------------- warmup, prompt cap, two RL stages
def test_warmup_in_rollout_batches_or_optimizer_steps():
    from cotforge.train.rl.config import GPPOConfig

    math = GPPOConfig(warmup_rollouts=10)                                   # 128 / 16 = 8 steps per rollout
    code = GPPOConfig(warmup_rollouts=10, mini_batch_prompts=32)            # 4 steps per rollout
    assert (math.warmup_steps, code.warmup_steps) == (80, 40)
    assert GPPOConfig(warmup_steps=7).warmup_steps == 7                     # optimizer steps as given
    assert "warmup 80 optimizer steps (10 rollout batches)" in math.describe_batches()
    with pytest.raises(ValueError, match="warmup_rollouts: 10 and warmup_steps: 5 both set"):
        GPPOConfig(warmup_rollouts=10, warmup_steps=5)


def test_prompt_cap_left_truncates(tiny_model_dir, tmp_path):
    """max_prompt_length keeps the last tokens of a long prompt (the question's end and the generation prompt)."""
    from cotforge.train.rl.config import GPPOConfig
    from cotforge.train.rl.trainer import build_trainer

    path = _write(tmp_path, _sevens_rows(4))
    kw = dict(model=str(tiny_model_dir), train_files=[str(path)], num_generations=2, rollout_prompts=2,
              mini_batch_prompts=1, per_device_train_batch_size=2, oversample=1, report_to=[])
    long = [[{"role": "user", "content": " ".join(["a b c"] * 40) + " Reply with 7."}],
            [{"role": "user", "content": "Short?"}]]
    full = build_trainer(GPPOConfig(output_dir=str(tmp_path / "a"), **kw))._tokenize_prompts(long)[0]
    cap = len(full[1]) + 2  # the short prompt fits
    capped_trainer = build_trainer(GPPOConfig(output_dir=str(tmp_path / "b"), max_prompt_length=cap, **kw))
    capped_trainer.model.train()
    capped = capped_trainer._tokenize_prompts(long)[0]
    assert len(full[0]) > cap and list(capped[0]) == list(full[0])[-cap:]
    assert list(capped[1]) == list(full[1])
    assert capped_trainer._metrics["train"]["prompts/truncated_frac"] == [0.5]
    with pytest.raises(ValueError, match="max_prompt_length"):
        GPPOConfig(max_prompt_length=0)


def test_abilities_pick_the_rows_of_one_domain(tmp_path):
    math = {"data_source": "math_longcot_math_verify", "prompt": PROMPT, "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": "4"}, "extra_info": {"index": 1}}
    path = _write(tmp_path, [math, _klear_code_row(STDIO_GT), math])
    assert [r["ability"] for r in load_rl_dataset(str(path), abilities=["math"])] == ["math", "math"]
    assert [r["ability"] for r in load_rl_dataset(str(path), abilities=["code"])] == ["code"]
    with pytest.raises(ValueError, match="no rows of abilities \\['science'\\]"):
        load_rl_dataset(str(path), abilities=["science"])


def test_klear_recipe_dry_run_shows_both_rl_stages_with_the_reports_numbers():
    """`cotforge run pipelines/klear_math_code.yaml --dry-run`: math RL then code RL, each with the report's
    mini-batch, lr, warmup (in rollout batches), epochs and prompt cap; official rewards; avg@64 with HMMT."""
    from click.testing import CliRunner

    from cotforge.pipelines.cli.main import main

    recipe = Path(__file__).resolve().parents[1] / "pipelines" / "klear_math_code.yaml"
    res = CliRunner().invoke(main, ["run", str(recipe), "--dry-run"])
    assert res.exit_code == 0, res.output
    out = res.output
    rl, code = out.index(". rl "), out.index(". rl_code ")
    assert rl < code < out.index(". evaluate")
    assert "in: mix, model, sft, rl_data, rl\n" in out[code:] and out.index(". rl_data ") < rl
    math_line = re.search(r"batches: (.*)", out[rl:code]).group(1)
    code_line = re.search(r"batches: (.*)", out[code:]).group(1)
    assert "mini-batch 16 prompts; optimizer steps per rollout batch: 8; lr 1e-06, warmup 80" in math_line
    assert "mini-batch 32 prompts; optimizer steps per rollout batch: 4; lr 5e-07, warmup 40" in code_line
    for line in (math_line, code_line):
        assert "rollout batch 128 prompts x 8 samples" in line and "prompts <= 4096 tokens" in line
        assert "ceil(kept groups / mini-batch) steps" in line
    from cotforge.pipelines.config import load_recipe
    from cotforge.train.rl.trainer import config_from_dict

    stages = load_recipe(recipe).stages
    for name in ("rl", "rl_code"):
        cfg = config_from_dict({k: v for k, v in stages[name].items() if k != "launch"}, name)
        assert cfg.num_train_epochs == 5 and cfg.reward_config().mode == "official"
        assert cfg.reward_config().code_max_tests == 16 and cfg.max_grad_norm == 1.0 and cfg.weight_decay == 0.1
    assert stages["rl"]["abilities"] == ["math"] and stages["rl_code"]["abilities"] == ["code"]
    assert {"aime2024:64", "aime2025:64", "hmmt_feb:64", "livecodebench_v5:8"} <= set(stages["evaluate"]["benchmarks"])


def test_code_stage_starts_from_the_math_stages_model(tmp_path):
    from cotforge.curate.context import StageContext
    from cotforge.pipelines.stages import get_stage

    stage = get_stage("rl_code")
    ctx = StageContext(out_dir=tmp_path / "rl_code", earlier={"mix": str(tmp_path / "mix"), "sft": str(tmp_path / "sft"),
                                                               "rl": str(tmp_path / "rl")})
    filled = stage.fill({"abilities": ["code"]}, ctx)
    assert filled["model"] == str(tmp_path / "rl" / "final") and filled["output_dir"] == str(tmp_path / "rl_code")
    assert filled["train_files"] == [str(tmp_path / "mix" / "rl")]
    assert get_stage("evaluate").fill({}, StageContext(out_dir=tmp_path / "e", earlier={
        "rl": str(tmp_path / "rl"), "rl_code": str(tmp_path / "rl_code")}))["model"] == str(tmp_path / "rl_code" / "final")


# ---------------------------------------------------------------- balance over processes
def _simulate(balance: str, seed: int, procs: int = 8, mixed_p: float = 0.6):
    """The Klear recipe's shape on 8 processes: 256 groups sampled (32 per process) x 8 samples, 128 kept, 8
    mini-batches x GA 8 = 64 micro-steps per rollout on each process (micro-batch 2 rows). Returns the rows
    per micro-batch of each process, its filler rows, and its kept tokens."""
    from cotforge.train.rl.groups import rows_to_train, select_groups

    g, groups, micro_steps = 8, 256, 64
    gen = torch.Generator().manual_seed(seed)
    mixed = torch.rand(groups, generator=gen) < mixed_p
    correct = torch.zeros(groups, g)
    correct[mixed, 0] = 1.0  # one correct answer in a mixed group, none elsewhere
    rewards = torch.where(correct > 0, 1.0, -1.0).reshape(-1)
    tokens = torch.randint(500, 32768, (groups * g,), generator=gen)
    sel = select_groups(rewards, g, max_groups=128, n_procs=procs, tokens=tokens, balance=balance)
    per = groups * g // procs
    out = []
    for p in range(procs):
        keep = sel.keep[p * per:(p + 1) * per]
        rows = rows_to_train(keep, micro_steps)
        out.append({"rows_per_micro": len(rows) // micro_steps, "filler": int((~keep[rows]).sum()),
                    "kept_tokens": int(tokens[p * per:(p + 1) * per][keep].sum()),
                    "mixed": int(mixed[p * 32:(p + 1) * 32].sum())})
    assert sel.n_selected == 128
    return out


@pytest.mark.parametrize("seed", range(10))
def test_top_up_spreads_groups_over_processes(seed):
    """'first' (the official batch[:128] with groups left where they were generated) fills the first processes:
    micro-batches of 3-4 rows there (OOM risk at 32k), the last ones mostly filler. 'procs' keeps 16 groups on
    every process that has 16 mixed ones: 2 rows per micro-batch, no filler, and kept tokens within the spread of
    the row lengths themselves."""
    first, procs = _simulate("first", seed), _simulate("procs", seed)
    assert max(r["rows_per_micro"] for r in first) >= 3 and sum(r["filler"] for r in first) > 0
    if all(r["mixed"] >= 16 for r in procs):
        assert {r["rows_per_micro"] for r in procs} == {2} and sum(r["filler"] for r in procs) == 0
    else:  # a process short of groups: the others take its share, at most one extra row per micro-batch here
        assert max(r["rows_per_micro"] for r in procs) <= 3
    spread = lambda rs: max(r["kept_tokens"] for r in rs) / max(1, min(r["kept_tokens"] for r in rs))  # noqa: E731
    assert spread(procs) < spread(first) and spread(procs) < 1.6


def test_balanced_top_up_is_first_order_on_one_process():
    from cotforge.train.rl.groups import select_groups

    rewards = torch.tensor([1.0, -1, 1, 1, -1, 1, 1, -1, -1, -1, 1, -1])  # 6 groups of 2; groups 0, 2, 3, 5 mixed
    a = select_groups(rewards, 2, max_groups=2, balance="first")
    b = select_groups(rewards, 2, max_groups=2, balance="procs", n_procs=1)
    assert torch.equal(a.keep, b.keep) and a.keep.view(-1, 2).any(1).tolist() == [True, False, True] + [False] * 3
    c = select_groups(rewards, 2, max_groups=2, balance="procs", n_procs=2)  # one from each process's 3 groups
    assert c.keep.view(-1, 2).any(1).tolist() == [True, False, False, True, False, False]


def _simulate_recipe(balance: str, seed: int, procs: int = 8, mixed_p: float = 0.6) -> dict:
    """The Klear recipe's math stage on 8 processes, as the trainer arranges it: 256 groups sampled (32 per
    process) x 8 samples, the first 128 surviving kept, the ceil rule (mini-batch 16 groups, 8 steps, GA 8 micro-
    batches of 2 rows per process); prompts of 50-4,095 tokens, completions of 500-32,767. `tokens` moves whole
    groups (`assign_groups`), `procs` / `first` leave them where they were generated. Returns rows and tokens
    (prompt + completion) per micro-batch and tokens per process."""
    from cotforge.train.rl.groups import assign_groups, ceil_micro_batches, select_groups

    g, groups, steps, ga = 8, 256, 8, 8
    gen = torch.Generator().manual_seed(seed)
    mixed = torch.rand(groups, generator=gen) < mixed_p
    correct = torch.zeros(groups, g)
    correct[mixed, 0] = 1.0
    rewards = torch.where(correct > 0, 1.0, -1.0).reshape(-1)
    row_tokens = (torch.randint(500, 32768, (groups * g,), generator=gen)
                  + torch.randint(50, 4096, (groups,), generator=gen).repeat_interleave(g))
    sel = select_groups(rewards, g, max_groups=128, n_procs=procs, tokens=row_tokens, balance=balance)
    kept = sorted(set((torch.nonzero(sel.keep).squeeze(1) // g).tolist()))
    if balance == "tokens":
        tok = [float(row_tokens[k * g:(k + 1) * g].sum()) for k in kept]
        mine = [[kept[i] for i in a] for a in assign_groups(tok, procs)]
    else:
        per = groups // procs
        mine = [[k for k in kept if k // per == p] for p in range(procs)]
    counts = [len(x) for x in mine]
    rows, toks, proc_tokens = [], [], []
    for p in range(procs):
        my_rows = [r for k in mine[p] for r in range(k * g, (k + 1) * g)]
        micro, sizes = ceil_micro_batches([r // g for r in my_rows], counts, p, 16, steps, ga)
        assert sizes == [16] * 8
        rows += [len(mb) for mb in micro]
        toks += [int(row_tokens[[my_rows[i] for i in mb]].sum()) if mb else 0 for mb in micro]
        proc_tokens.append(int(row_tokens[my_rows].sum()) if my_rows else 0)
    assert sel.n_selected == 128
    return {"rows": rows, "tokens": toks, "proc_tokens": proc_tokens}


@pytest.mark.parametrize("seed", range(10))
def test_groups_are_assigned_to_processes_by_tokens(seed):
    """The recipe's shape on 8 processes: `tokens` gives every micro-batch exactly the configured 2 rows (no
    micro-batch without rows, none with 3-4) and every process within a few percent of the same tokens; leaving
    the groups where they were generated (`first`, the official order, or `procs`) gives micro-batches of 0-4 or
    1-3 rows and processes apart by far more."""
    first, procs, tokens = (_simulate_recipe(b, seed) for b in ("first", "procs", "tokens"))
    spread = lambda xs: max(xs) / max(1, min(xs))  # noqa: E731
    assert set(tokens["rows"]) == {2}
    assert max(first["rows"]) >= 3 and min(first["rows"]) == 0
    assert spread(tokens["proc_tokens"]) < 1.05 < spread(procs["proc_tokens"]) < spread(first["proc_tokens"])
    assert max(tokens["tokens"]) <= max(procs["tokens"]) and max(tokens["tokens"]) < max(first["tokens"])


def test_assign_groups_keeps_counts_equal_and_balances_tokens():
    from cotforge.train.rl.groups import assign_groups

    assert assign_groups([5.0, 1.0, 1.0, 1.0], 1) == [[0, 1, 2, 3]]        # one process: everything, in order
    a = assign_groups([10.0, 9.0, 1.0, 1.0, 5.0, 4.0], 2)                  # 3 groups each, 15 tokens each
    assert sorted(len(x) for x in a) == [3, 3] and sorted(x for p in a for x in p) == list(range(6))
    assert [sum([10.0, 9.0, 1.0, 1.0, 5.0, 4.0][i] for i in p) for p in a] == [15.0, 15.0]
    b = assign_groups([100.0, 1.0, 1.0, 1.0, 1.0], 2)                      # the cap: 3 + 2 groups, never 1 + 4
    assert sorted(len(x) for x in b) == [2, 3]
    assert assign_groups([3.0], 2) == [[0], []] and assign_groups([], 3) == [[], [], []]


def _count_no_grad_rows(monkeypatch, seen: list[int]) -> None:
    """Record the rows of every forward pass TRL runs without gradients (old / reference log-probs)."""
    from cotforge.train.rl.trainer import GPPOTrainer

    orig = GPPOTrainer.__mro__[1]._get_per_token_logps_and_entropies

    def spy(self, model, input_ids, *a, **kw):
        if not torch.is_grad_enabled():
            seen.append(input_ids.size(0))
        return orig(self, model, input_ids, *a, **kw)

    monkeypatch.setattr(GPPOTrainer.__mro__[1], "_get_per_token_logps_and_entropies", spy)



@pytest.mark.slow
def test_old_logps_only_for_rows_that_train_and_training_is_unchanged(tiny_model_dir, tmp_path, monkeypatch):
    """Old log-probs are computed after the group filter for the kept rows only (TRL computed them for all the
    2x oversampled rows); the update is the same as computing them for every row."""
    from safetensors.torch import load_file

    from cotforge.train.rl.config import GPPOConfig
    from cotforge.train.rl.trainer import GPPOTrainer, run_rl

    path = _write(tmp_path, _sevens_rows(8))
    rows_seen: dict[str, list[int]] = {}

    def run(name: str, defer: bool):
        monkeypatch.setattr(GPPOTrainer, "_defer_old", (lambda self: self.model.training) if defer
                            else (lambda self: False))
        _count_no_grad_rows(monkeypatch, rows_seen.setdefault(name, []))
        cfg = GPPOConfig(model=str(tiny_model_dir), train_files=[str(path)], output_dir=str(tmp_path / name),
                         num_generations=4, rollout_prompts=2, mini_batch_prompts=1, per_device_train_batch_size=2,
                         oversample=2, filter_groups_metric="reward", overlong_filter=False, max_completion_length=8,
                         learning_rate=0.05, warmup_steps=0, max_steps=2, save_steps=100, report_to=[],
                         sft_alpha=0.1, seed=0)
        trainer = run_rl(cfg, reward_funcs=[make_reward_func(RewardConfig(require_think=False),
                                                             custom={"parity": _parity})])
        monkeypatch.undo()
        kept = [r["filter/kept_rows"] for r in trainer.state.log_history if "filter/kept_rows" in r]
        return load_file(tmp_path / name / "final" / "model.safetensors"), kept

    w_all, kept_all = run("all", defer=False)
    w_kept, kept = run("kept", defer=True)
    assert kept == kept_all and kept[0] <= 8
    assert sum(rows_seen["all"]) == 16                    # 4 prompts x 4 samples, before the filter
    assert sum(rows_seen["kept"]) == kept[0]              # only the kept rows
    diff = max(float((w_all[k] - w_kept[k]).abs().max()) for k in w_all)
    assert diff < 1e-5, diff


def _fake_vllm(monkeypatch, trainer_cls) -> None:
    """vLLM without vLLM: generation is TRL's HF path, and the sampler's per-token log-probs (what vLLM returns
    with the completion) are near a random model's, -log(vocab) + 0 / +-0.1 by position, so the sampler/trainer
    IS weights spread around 1 by token and by sequence."""
    import math

    from trl import GRPOTrainer

    def generate(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        self.use_vllm = False
        try:
            ids, _ = GRPOTrainer._generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations,
                                                       has_tool_images)
        finally:
            self.use_vllm = True
        base = -math.log(self.model.config.vocab_size)
        return ids, [[base + 0.1 * (j % 3 - 1) for j in range(len(c))] for c in ids]

    monkeypatch.setattr(trainer_cls, "_generate_single_turn", generate, raising=False)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["token_truncate", "sequence_mask"])
def test_old_logps_with_vllm_is_correction_only_for_rows_that_train(tiny_model_dir, tmp_path, monkeypatch, mode):
    """With vLLM's sampler/trainer IS correction on (the recipe's GPU setting), old log-probs are computed after
    the group filter for the kept rows only, and their IS weights from them: the same update as TRL computing both
    for all 16 sampled rows (4 prompts x 4, 2x oversampled), with forward passes over the kept rows only."""
    from cotforge.train.rl.config import GPPOConfig
    from cotforge.train.rl.trainer import GPPOTrainer, build_trainer

    path = _write(tmp_path, _sevens_rows(8))
    rows_seen: dict[str, list[int]] = {}

    def run(name: str, defer: bool):
        if not defer:  # TRL's own path: old log-probs and IS weights for every sampled row, in the rollout
            monkeypatch.setattr(GPPOTrainer, "_defer_old", lambda self: False)
        _fake_vllm(monkeypatch, GPPOTrainer)
        _count_no_grad_rows(monkeypatch, rows_seen.setdefault(name, []))
        cfg = GPPOConfig(model=str(tiny_model_dir), train_files=[str(path)], output_dir=str(tmp_path / name),
                         num_generations=4, rollout_prompts=2, mini_batch_prompts=1, per_device_train_batch_size=2,
                         oversample=2, filter_groups_metric="reward", overlong_filter=False, max_completion_length=8,
                         learning_rate=0.05, warmup_steps=0, max_steps=2, save_steps=100, report_to=[],
                         sft_alpha=0.1, seed=0, vllm_importance_sampling_mode=mode,
                         vllm_importance_sampling_clip_min=0.5 if mode == "sequence_mask" else None,
                         vllm_importance_sampling_clip_max=2.0)
        trainer = build_trainer(cfg, reward_funcs=[make_reward_func(RewardConfig(require_think=False),
                                                                    custom={"parity": _parity})])
        assert trainer.vllm_importance_sampling_correction and not trainer.use_vllm
        trainer.use_vllm = True  # the rollouts come from the fake sampler above
        trainer.train()
        monkeypatch.undo()
        logs = [r for r in trainer.state.log_history if "filter/kept_rows" in r]
        weights = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
        return weights, logs

    w_all, logs_all = run("all", defer=False)
    w_kept, logs = run("kept", defer=True)
    kept = [r["filter/kept_rows"] for r in logs]
    assert kept == [r["filter/kept_rows"] for r in logs_all] and kept[0] < 16
    assert sum(rows_seen["all"]) == 16                    # TRL: every sampled row, before the filter
    assert sum(rows_seen["kept"]) == kept[0]              # only the kept rows
    lo, hi = logs[0]["sampling/importance_sampling_ratio/min"], logs[0]["sampling/importance_sampling_ratio/max"]
    assert lo != hi and (lo, hi) != (1.0, 1.0)            # the IS weights are not all 1: they enter the update
    diff = max(float((w_all[k] - w_kept[k]).abs().max()) for k in w_all)
    assert diff < 1e-5, diff


def test_sampler_is_ratio_follows_trls_modes():
    from cotforge.train.rl.losses import sampler_is_ratio

    old = torch.tensor([[-1.0, -2.0, -0.5], [-0.1, -0.1, 0.0]])
    samp = torch.tensor([[-2.0, -1.0, float("nan")], [-0.1, -0.3, -9.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    e = torch.e
    tok = sampler_is_ratio(old, samp, mask, "token_truncate", None, 2.0)
    assert tok.flatten().tolist() == pytest.approx([2.0, 1 / e, 1.0, 1.0, e ** 0.2, 1.0], rel=1e-6)
    masked = sampler_is_ratio(old, samp, mask, "token_mask", 0.5, 2.0)
    assert masked.flatten().tolist() == pytest.approx([0.0, 0.0, 1.0, 1.0, e ** 0.2, 1.0], rel=1e-6)
    seq = sampler_is_ratio(old, samp, mask, "sequence_truncate", 0.9, None)
    assert seq.shape == (2, 1) and seq.flatten().tolist() == pytest.approx([1.0, e ** 0.2], rel=1e-6)
    with pytest.raises(ValueError, match="token_truncate"):
        sampler_is_ratio(old, samp, mask, "tokens", None, None)


def test_rl_stages_read_the_rl_data_branch_when_it_ran(tmp_path):
    from cotforge.curate.context import StageContext
    from cotforge.pipelines.stages import get_stage

    earlier = {"mix": str(tmp_path / "mix"), "sft": str(tmp_path / "sft"), "rl_data": str(tmp_path / "rl_data")}
    rl = get_stage("rl").fill({}, StageContext(out_dir=tmp_path / "rl", earlier=earlier))
    assert rl["train_files"] == [str(tmp_path / "rl_data" / "rl_math")] and rl["model"] == str(tmp_path / "sft")
    code = get_stage("rl_code").fill({}, StageContext(out_dir=tmp_path / "c", earlier={**earlier, "rl": str(tmp_path / "rl")}))
    assert code["train_files"] == [str(tmp_path / "rl_data" / "rl_code")]
    data = get_stage("rl_data").fill({"sources": []}, StageContext(out_dir=tmp_path / "d", earlier=earlier))
    assert data["model"] == str(tmp_path / "sft")  # the pass-rate model: the SFT checkpoint


def test_verl_reward_reads_klear_ground_truth():
    """The verl entry point (train/verl_reward.py) normalises a Klear code row's ground truth too."""
    pytest.importorskip("cotforge.curate.verify.code")
    from cotforge.train.verl_reward import compute_score

    out = compute_score("coder1_longcot", DOUBLE, STDIO_GT, {"index": 0}, mode="official")
    assert out == {"score": 1.0, "acc": True}


def test_trim_padding_cuts_only_padding():
    from cotforge.train.rl.trainer import trim_padding

    batch = {"prompt_ids": torch.tensor([[0, 0, 5, 6], [0, 7, 8, 9]]), "prompt_mask": torch.tensor([[0, 0, 1, 1],
                                                                                                   [0, 1, 1, 1]]),
             "completion_ids": torch.tensor([[1, 2, 0, 0, 0], [3, 4, 5, 6, 0]]),
             "completion_mask": torch.tensor([[1, 1, 0, 0, 0], [1, 1, 1, 1, 0]]),
             "old_per_token_logps": torch.zeros(2, 5), "advantages": torch.tensor([1.0, -1.0]),
             "rl_weight": torch.tensor([1.0, 0.0])}
    out = trim_padding(batch)
    assert out["completion_ids"].tolist() == [[1, 2], [3, 4]]        # row 2 is zero-weight padding
    assert out["old_per_token_logps"].shape == (2, 2) and out["prompt_ids"].tolist() == [[0, 5, 6], [7, 8, 9]]
    assert out["advantages"] is batch["advantages"]
    only_padding = trim_padding({**batch, "rl_weight": torch.tensor([0.0, 0.0])})
    assert only_padding["completion_ids"].shape == (2, 1)            # a micro-batch of padding rows: 1 column


@pytest.mark.slow
def test_trimmed_micro_batches_train_the_same(tiny_model_dir, tmp_path, monkeypatch):
    """Training with per-micro-batch trimming equals training on TRL's padded width up to float rounding (loss,
    policy loss and gradient norm of every step; the weights themselves are not compared: Adam turns rounding-level
    differences of near-zero gradients into lr-sized steps), and compute_loss's forward passes run on fewer columns."""
    import cotforge.train.rl.trainer as tr
    from cotforge.train.rl.config import GPPOConfig

    rows = _sevens_rows(8)
    for i, r in enumerate(rows):  # prompts of different lengths: each micro-batch (one row) has its own width
        r["prompt"] = [{"role": "user", "content": "Reply " + "with the digit 7 " * (1 + 3 * (i % 4))}]
    path = _write(tmp_path, rows)

    def run(name: str, trim: bool):
        widths: list[int] = []
        monkeypatch.setattr(tr, "trim_padding", tr.trim_padding if trim else (lambda b: b))
        orig = tr.GPPOTrainer.__mro__[1]._get_per_token_logps_and_entropies

        def spy(self, model, input_ids, *a, **kw):
            if torch.is_grad_enabled():
                widths.append(input_ids.size(1))
            return orig(self, model, input_ids, *a, **kw)

        monkeypatch.setattr(tr.GPPOTrainer.__mro__[1], "_get_per_token_logps_and_entropies", spy)
        cfg = GPPOConfig(model=str(tiny_model_dir), train_files=[str(path)], output_dir=str(tmp_path / name),
                         num_generations=4, rollout_prompts=2, mini_batch_prompts=1, per_device_train_batch_size=1,
                         oversample=2, filter_groups_metric="reward", overlong_filter=False, max_completion_length=12,
                         learning_rate=0.05, warmup_steps=0, max_steps=2, save_steps=100, report_to=[],
                         sft_alpha=0.1, seed=0)
        t = tr.run_rl(cfg, reward_funcs=[make_reward_func(RewardConfig(require_think=False),
                                                          custom={"parity": _parity})])
        monkeypatch.undo()
        logs = [(r["loss"], r["grad_norm"], r["policy_loss"]) for r in t.state.log_history if "policy_loss" in r]
        return widths, logs

    widths_pad, logs_pad = run("padded", trim=False)
    widths_trim, logs_trim = run("trimmed", trim=True)
    assert len(widths_pad) == len(widths_trim) and sum(widths_trim) < sum(widths_pad)
    assert len(logs_pad) == 2
    for a, b in zip(logs_pad, logs_trim, strict=True):
        assert a == pytest.approx(b, rel=1e-5, abs=1e-6)


# ---------------------------------------------------------------- the official ceil(N / mini-batch) rule
def test_ceil_schedule_fills_full_mini_batches_round_robin():
    from cotforge.train.rl.groups import ceil_schedule

    counts = [13, 13, 13, 13, 12, 12, 12, 12]  # 100 kept groups on 8 processes; mini-batch 16, 8 slots
    sizes = ceil_schedule(counts, 0, 16, 8)[1]
    assert sizes == [16] * 6 + [4, 0]  # ceil(100 / 16) = 7 steps, the last of 4 groups (scaled by 4/16)
    per_slot = [[len(ceil_schedule(counts, p, 16, 8)[0][k]) for p in range(8)] for k in range(8)]
    assert all(row == [2] * 8 for row in per_slot[:6]) and sum(per_slot[6]) == 4 and sum(per_slot[7]) == 0
    assert sorted(j for k in range(8) for j in ceil_schedule(counts, 4, 16, 8)[0][k]) == list(range(12))
    with pytest.raises(ValueError, match="exceed"):
        ceil_schedule([20], 0, 4, 4)


def _switch(texts: list[str], truths: list[str]) -> list[float]:
    """Groups whose truth is 'mixed' get varying rewards (kept), 'flat' ones a constant (filtered)."""
    return [(1.0 if len(t) % 2 == 0 else 0.0) if g == "mixed" else 0.0 for t, g in zip(texts, truths, strict=True)]


@pytest.mark.parametrize("rule", ["ceil", "fixed"])
def test_ceil_rule_trains_full_mini_batches_and_leaves_the_rest_out(tiny_model_dir, tmp_path, rule):
    """4 prompts per rollout, mini-batches of 1 (4 optimizer steps), 2 groups survive. ceil: steps 1-2 train one
    group each, steps 3-4 are left out (weights unchanged from checkpoint-2, though weight decay is on); fixed:
    the 2 groups spread over all 4 steps, every step moves the weights."""
    from safetensors.torch import load_file

    from cotforge.train.rl.config import GPPOConfig
    from cotforge.train.rl.trainer import run_rl

    rows = _sevens_rows(4)
    for i, r in enumerate(rows):
        r["reward_model"]["ground_truth"] = "mixed" if i in (0, 2) else "flat"
    path = _write(tmp_path, rows)
    out = tmp_path / rule
    cfg = GPPOConfig(model=str(tiny_model_dir), train_files=[str(path)], output_dir=str(out), num_generations=4,
                     rollout_prompts=4, mini_batch_prompts=1, per_device_train_batch_size=4, oversample=1,
                     filter_groups_metric="reward", overlong_filter=False, max_completion_length=8,
                     learning_rate=0.05, warmup_steps=0, max_steps=4, save_steps=2, report_to=[], sft_alpha=0.1,
                     weight_decay=0.1, seed=0, minibatch_rule=rule, shuffle_dataset=False)
    trainer = run_rl(cfg, reward_funcs=[make_reward_func(RewardConfig(require_think=False),
                                                         custom={"parity": _switch})])
    logs = [r for r in trainer.state.log_history if "policy_loss" in r]
    assert logs[0]["filter/groups_kept"] == 2
    mid = load_file(out / "checkpoint-2" / "model.safetensors")
    assert sorted(x.name for x in out.glob("checkpoint-*")) == (["checkpoint-2"] if rule == "ceil"
                                                                 else ["checkpoint-2", "checkpoint-4"])
    end = load_file(out / "final" / "model.safetensors")
    same = all(torch.equal(mid[k], end[k]) for k in mid)
    if rule == "ceil":  # steps 3-4 left out: not logged, not counted, no checkpoint of their own
        assert [r["step"] for r in logs] == [1, 2] and logs[0]["rollout/optimizer_steps"] == 2
        assert all(r["tokens/trained"] > 0 for r in logs) and trainer.state.global_step == 2
        assert same  # final/ was saved after the two left-out steps (checkpoint-2 is the last checkpoint)
    else:
        assert [r["step"] for r in logs] == [1, 2, 3, 4] and not same
        assert all(r["rollout/left_out_steps"] == 0 for r in logs)


def _alternate(texts: list[str], truths: list[str]) -> list[float]:
    """'mixed' prompts: 0, 1, 0, 1 over their group's samples (always kept); 'flat' ones: 0 (always filtered)."""
    return [float(i % 2) if g == "mixed" else 0.0 for i, (t, g) in enumerate(zip(texts, truths, strict=True))]


def _ceil_run(tiny_model_dir, tmp_path, name: str, *, rollouts: int, resume: str | None = None, **kw):
    """The ceil rule on 4 prompts per rollout (mini-batches of 1: 4 loop steps each), 2 of 4 groups mixed: 2
    optimizer steps taken and 2 left out per rollout, `rollouts` rollout batches (one per epoch)."""
    from cotforge.train.rl.config import GPPOConfig
    from cotforge.train.rl.trainer import build_trainer

    rows = _sevens_rows(4)
    for i, r in enumerate(rows):
        r["reward_model"]["ground_truth"] = "mixed" if i in (0, 2) else "flat"
    path = _write(tmp_path, rows)
    cfg = GPPOConfig(model=str(tiny_model_dir), train_files=[str(path)], output_dir=str(tmp_path / name),
                     num_generations=4, rollout_prompts=4, mini_batch_prompts=1, per_device_train_batch_size=4,
                     oversample=1, filter_groups_metric="reward", overlong_filter=False, max_completion_length=8,
                     learning_rate=0.05, num_train_epochs=rollouts, report_to=[], sft_alpha=0.1, seed=0,
                     minibatch_rule="ceil", shuffle_dataset=False, **{"warmup_steps": 3, "save_steps": 100, **kw})
    trainer = build_trainer(cfg, reward_funcs=[make_reward_func(RewardConfig(require_think=False),
                                                                custom={"parity": _alternate})])
    trainer.train(resume_from_checkpoint=resume)
    return trainer, [r for r in trainer.state.log_history if "policy_loss" in r]


@pytest.mark.parametrize("schedule", ["constant_with_warmup", pytest.param("cosine", marks=pytest.mark.slow)])
def test_left_out_steps_advance_neither_the_schedule_nor_the_step(tiny_model_dir, tmp_path, schedule):
    """Schedule probe: 2 rollouts x 4 loop steps, 2 taken per rollout. The LR of the 4 steps taken is the
    schedule's value at steps 0, 1, 2, 3 (as if only the taken steps existed; before the fix the left-out steps
    advanced it: 0, 1/3, then 1, 1 at warmup 3) and the logged steps are 1-4 (before: 1, 2, 5, 6 of 8)."""
    from transformers import get_scheduler

    trainer, logs = _ceil_run(tiny_model_dir, tmp_path, schedule, rollouts=2, lr_scheduler_type=schedule)
    probe = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.05)
    sched = get_scheduler(schedule, probe, num_warmup_steps=3, num_training_steps=trainer.state.max_steps)
    want = []
    for _ in range(4):
        want.append(sched.get_last_lr()[0])
        probe.step()
        sched.step()
    assert [r["step"] for r in logs] == [1, 2, 3, 4] and trainer.state.global_step == 4
    assert [r["learning_rate"] for r in logs] == pytest.approx(want, abs=1e-12)
    assert [r["rollout/left_out_steps"] for r in logs] == [0, 0, 2, 2]
    assert all(r["loss"] == r["loss"] and r["tokens/trained"] > 0 for r in logs)  # finite, and trained


@pytest.mark.slow
def test_resume_after_left_out_steps_continues_where_the_loop_was(tiny_model_dir, tmp_path):
    """3 rollouts (12 loop steps, 6 taken); checkpoint-4 is taken step 4 = loop step 6 (2 left out before it).
    Resumed from it, the run finishes rollout 2 (its last 2 slots: left out) and trains rollout 3's two steps:
    steps 5 and 6, at the schedule's LR of taken steps 4 and 5. Without the record of the left-out steps the data
    position was loop step 4 (rollout 2 again, 8 steps in all)."""
    import shutil

    full, full_logs = _ceil_run(tiny_model_dir, tmp_path, "full", rollouts=3, save_steps=4)
    (tmp_path / "resumed").mkdir()
    shutil.copytree(tmp_path / "full" / "checkpoint-4", tmp_path / "resumed" / "checkpoint-4")
    assert json.loads((tmp_path / "resumed" / "checkpoint-4" / "left_out_steps.json").read_text()) == {
        "left_out_steps": 2}
    again, logs = _ceil_run(tiny_model_dir, tmp_path, "resumed", rollouts=3, save_steps=4,
                            resume=str(tmp_path / "resumed" / "checkpoint-4"))
    assert full.state.global_step == again.state.global_step == 6
    assert [(r["step"], r["learning_rate"]) for r in logs if r["step"] > 4] == [
        (r["step"], r["learning_rate"]) for r in full_logs if r["step"] > 4]
