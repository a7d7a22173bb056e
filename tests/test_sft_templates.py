"""SFT rendering with real chat templates (TRL 1.16's shipped ones + the original R1-Distill one).

Every family x case is checked token by token against an oracle written from the templates
(`train.tiny_chat.expected_completion`): the training ids must be the inference prompt
(`apply_chat_template(history, add_generation_prompt=True)`) followed by the completion the model must
generate, and only the completion (plus history turns the template renders unchanged) is labelled.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from cotforge.train.sft.data import (  # noqa: E402
    SFTDataError,
    prepare_sft_dataset,
    resolve_mask_mode,
    tokenize_conversation,
)
from cotforge.train.tiny_chat import (  # noqa: E402
    CASES,
    CLOSING_ONLY,
    FAMILIES,
    FULL,
    HISTORY,
    REASONING,
    chat_tokenizer,
    end_of_turn,
    expected_completion,
    history_is_trained,
)

_TOKS: dict[str, object] = {}


def tok_of(family: str):
    """One tiny tokenizer per family for the whole module (training a BPE takes ~50 ms)."""
    if family not in _TOKS:
        _TOKS[family] = chat_tokenizer(family)
    return _TOKS[family]


def _prompt_ids(tok, history):
    return list(tok.apply_chat_template(history, add_generation_prompt=True, tokenize=True,
                                        return_dict=True)["input_ids"])


def _ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def _dataset(rows):
    """A datasets.Dataset with the union of the rows' keys (missing values None)."""
    import datasets

    keys = sorted({k for r in rows for k in r})
    return datasets.Dataset.from_list([{k: r.get(k) for k in keys} for r in rows])


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("case", sorted(CASES))
def test_training_ids_are_inference_prompt_plus_expected_completion(family, case):
    tok = tok_of(family)
    msgs = CASES[case]
    expected = expected_completion(family, msgs[-1]["content"])
    mode = resolve_mask_mode(tok, "auto")
    if expected is None:
        with pytest.raises(SFTDataError, match="marker_mismatch"):
            tokenize_conversation(tok, msgs, mode, where="row 0")
        return
    out = tokenize_conversation(tok, msgs, mode)
    prompt, completion = _prompt_ids(tok, msgs[:-1]), _ids(tok, expected)
    assert out["input_ids"] == prompt + completion
    assert out["labels"][len(prompt):] == completion
    assert completion[-1] == tok.convert_tokens_to_ids(end_of_turn(family))
    assert REASONING in tok.decode(out["labels"][len(prompt):])
    history = [-100] * len(prompt)
    if case == "two turns" and history_is_trained(family):
        start = len(_prompt_ids(tok, msgs[:1]))
        span = _ids(tok, expected_completion(family, HISTORY))
        assert prompt[start:start + len(span)] == span
        history[start:start + len(span)] = span
    assert out["labels"][:len(prompt)] == history


def test_r1_closing_only_trace_keeps_its_reasoning():
    """Defect 1: with the R1 template, a `... </think>` trace lost its reasoning and the row was kept."""
    for family in ("deepseek_r1_distill", "deepseek_r1_distill_original"):
        tok = tok_of(family)
        msgs = CASES["closing-only trace"]
        out = tokenize_conversation(tok, msgs, resolve_mask_mode(tok, "auto"))
        trained = tok.decode([t for t in out["labels"] if t != -100])
        assert REASONING in trained and "</think>" in trained
        assert trained == expected_completion(family, CLOSING_ONLY)


def test_other_markers_are_refused_or_normalised_and_recorded():
    """Defect 1: `<|begin_of_thought|>` rows were never checked; `auto` rewrites them to the template's markers."""
    rows = [{"messages": CASES["other markers"]}, {"messages": CASES["single turn"]}]
    tok = tok_of("deepseek_r1_distill")
    kept, stats = prepare_sft_dataset(_dataset(rows), tok, max_length=None)
    assert (stats.rows_kept, stats.dropped) == (1, {"marker_mismatch": 1})
    assert stats.dropped_samples[0]["where"] == "data row 0"
    norm, stats = prepare_sft_dataset(_dataset(rows), tok, max_length=None, reasoning_markers="auto")
    assert stats.rows_kept == 2 and stats.markers_normalised == {"<|begin_of_thought|>": 1}
    assert norm["input_ids"][0] == norm["input_ids"][1]  # rewritten to exactly the <think> row


@pytest.mark.parametrize("family", ["qwen2_5_base", "qwen3_base"])
def test_end_of_turn_comes_from_the_template_not_eos(family):
    """Defect 2: eos <|endoftext|>, turns end with <|im_end|>: the span ended one token late (the '\\n')."""
    tok = tok_of(family)
    assert tok.eos_token == "<|endoftext|>"
    msgs = CASES["two turns"]
    out = tokenize_conversation(tok, msgs, resolve_mask_mode(tok, "auto"))
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    labelled = [i for i, t in enumerate(out["labels"]) if t != -100]
    assert out["input_ids"][-1] == im_end and labelled[-1] == len(out["input_ids"]) - 1
    newline = _ids(tok, "\n")
    assert all(out["labels"][i + 1] == -100 for i, t in enumerate(out["labels"][:-1]) if t == im_end)
    assert newline  # the separator exists and is never trained


def test_one_unfaithful_row_does_not_abort_and_strict_does():
    """Defect 3: a Qwen3 two-turn row raised `SFTDataError ... row 1` and nothing was prepared."""
    tok = tok_of("qwen3")
    rows = [{"messages": CASES["single turn"]}, {"messages": CASES["two turns"]},
            {"prompt": "What is 3 + 3?", "response": ""}, {"messages": CASES["other markers"]}]
    out, stats = prepare_sft_dataset(_dataset(rows), tok, max_length=None)
    assert stats.rows_in == 4 and stats.rows_kept == 2
    assert stats.dropped == {"invalid_row": 1, "marker_mismatch": 1}
    assert stats.rows_kept + stats.dropped_overlong + sum(stats.dropped.values()) == stats.rows_in
    assert (stats.history_turns_trained, stats.history_turns_untrained) == (0, 1)
    samples = {s["reason"]: s for s in stats.dropped_samples}
    assert "data row 2" in samples["invalid_row"]["detail"] and "'response'" in samples["invalid_row"]["detail"]
    with pytest.raises(SFTDataError, match=r"data row 2: field 'response'"):
        prepare_sft_dataset(_dataset(rows), tok, max_length=None, strict=True)


def test_r1_generation_prompt_split_is_where_inference_splits():
    """Defect 4: labels started after `<｜Assistant｜>` while inference prompts end with `<｜Assistant｜><think>\\n`."""
    tok = tok_of("deepseek_r1_distill")
    msgs = CASES["single turn"]
    out = tokenize_conversation(tok, msgs, resolve_mask_mode(tok, "auto"))
    prompt = _prompt_ids(tok, msgs[:-1])
    assert tok.decode(prompt).endswith("<｜Assistant｜><think>\n")
    first = next(i for i, t in enumerate(out["labels"]) if t != -100)
    assert first == len(prompt) and out["input_ids"][:first] == prompt
    assert tok.decode(out["input_ids"][first:]) == FULL.removeprefix("<think>\n") + "<｜end▁of▁sentence｜>"


def test_generation_prompt_that_closes_reasoning_qwen3_no_thinking():
    """Qwen3 with enable_thinking=False: the prompt ends with an empty think block, so only answers are trained."""
    tok = tok_of("qwen3")
    plain = [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "4."}]
    rows = [{"messages": CASES["single turn"]}, {"messages": plain}]
    out, stats = prepare_sft_dataset(_dataset(rows), tok, max_length=None,
                                     template_kwargs={"enable_thinking": False})
    assert (stats.rows_kept, stats.dropped) == (1, {"prompt_closes_reasoning": 1})
    prompt = list(tok.apply_chat_template(plain[:1], add_generation_prompt=True, enable_thinking=False,
                                          tokenize=True, return_dict=True)["input_ids"])
    assert tok.decode(prompt).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert out[0]["input_ids"] == prompt + _ids(tok, "4.<|im_end|>")
    assert out[0]["labels"] == [-100] * len(prompt) + _ids(tok, "4.<|im_end|>")
