"""Reasoning markers (curate/text/reasoning.py) as SFT rendering uses them."""

from __future__ import annotations

import pytest

from cotforge.curate.core.reasoning import REASONING_MARKERS, find_reasoning, marker_pair, replace_markers


@pytest.mark.parametrize("opener, closer", REASONING_MARKERS)
def test_every_known_pair_is_found_with_its_body(opener, closer):
    text = f"{opener}\n add 2 and 2 \n{closer}\n\nThe answer is 4."
    block = find_reasoning(text)
    assert (block.pair, block.body, block.closing_only) == ((opener, closer), "add 2 and 2", False)
    assert text[block.start:block.end] == f"{opener}\n add 2 and 2 \n{closer}"


def test_closing_only_trace_and_precedence():
    r1 = "Let me add 2 and 2.\n</think>\n\nThe final answer is \\boxed{4}."
    block = find_reasoning(r1)
    assert block.closing_only and block.body == "Let me add 2 and 2." and (block.start, block.opener) == (0, "<think>")
    mixed = "<thinking>plan</thinking> then <think>work</think> done"
    assert find_reasoning(mixed).opener == "<thinking>"  # earliest opener
    assert find_reasoning("x </think> <|begin_of_thought|>y<|end_of_thought|>").opener == "<|begin_of_thought|>"
    assert find_reasoning("<think>\n\n</think>\n\nA").body == ""  # an empty block is still a block
    assert find_reasoning("no reasoning here") is None


def test_replace_markers_keeps_body_and_closing_only_shape():
    text = "<|begin_of_thought|>\nR\n<|end_of_thought|>\n\nA"
    out = replace_markers(text, find_reasoning(text), marker_pair("<think>"))
    assert out == "<think>\nR\n</think>\n\nA"
    trace = "R\n<|end_of_thought|>\nA"
    assert replace_markers(trace, find_reasoning(trace), ("<think>", "</think>")) == "R\n</think>\nA"
    with pytest.raises(ValueError, match="known"):
        marker_pair("<nope>")


def test_explicit_target_marker_rewrites_where_auto_finds_none():
    pytest.importorskip("torch")
    from cotforge.train.sft.data import resolve_mask_mode, tokenize_conversation
    from cotforge.train.tiny_chat import CASES, FULL, chat_tokenizer

    tok = chat_tokenizer("qwen2_5")  # its template and vocabulary name no reasoning markers
    mode = resolve_mask_mode(tok, "auto")
    other = CASES["other markers"]
    assert tokenize_conversation(tok, other, mode, reasoning_markers="auto") == tokenize_conversation(tok, other, mode)
    explicit = tokenize_conversation(tok, other, mode, reasoning_markers="<think>")
    assert explicit == tokenize_conversation(tok, [other[0], {"role": "assistant", "content": FULL}], mode)
