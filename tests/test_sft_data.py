"""SFT data: loading shards, rendering with the chat template, assistant-only labels, collation."""

from __future__ import annotations

import gzip
import json
import random
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("torch")

from cotforge.train.sft.data import (  # noqa: E402
    SFTDataError,
    collate,
    load_sft_dataset,
    prepare_sft_dataset,
    resolve_mask_mode,
    row_messages,
    tokenize_conversation,
)
from cotforge.train.tiny import CHAT_TEMPLATE  # noqa: E402

NO_MARKERS = CHAT_TEMPLATE.replace("{% generation %}", "").replace("{% endgeneration %}", "")
# Like DeepSeek-R1's template: keeps only the text after </think> in assistant turns.
DROPS_THINK = NO_MARKERS.replace("message['content'] + '<|im_end|>'",
                                 "message['content'].split('</think>')[-1] + '<|im_end|>'")

CONVO = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is 12 + 30?"},
    {"role": "assistant", "content": "<think>12 plus 30 is 42.</think> The answer is \\boxed{42}."},
    {"role": "user", "content": "And 5 + 6?"},
    {"role": "assistant", "content": "<think>5 plus 6 is 11.</think> 11."},
]


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def _rows(n: int, seed: int = 0, long_every: int = 0) -> list[dict]:
    """Schema rows with prompt/response (+ meta.system on odd rows, a long response every `long_every`)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        extra = " check the sum again" * 40 if long_every and i % long_every == 0 else ""
        rows.append({"id": f"r{i}", "source": "syn", "domain": "math", "prompt": f"What is {a} + {b}?",
                     "response": f"<think>{a} plus {b} is {a + b}.{extra}</think> The answer is \\boxed{{{a + b}}}.",
                     "answer": str(a + b), "tests": "", "meta": json.dumps({"system": "Be brief."} if i % 2 else {})})
    return rows


def _expected_labels(tok, messages, ends_at_turn_end=False):
    """Independent oracle: assistant char spans found by string search, mapped to tokens via offsets.

    `ends_at_turn_end`: the sequence stops after the last turn's end-of-turn token (the `diff` rendering:
    inference prompt + completion), instead of the template's whole text with its trailing separator.
    """
    text = tok.apply_chat_template(messages, tokenize=False)
    if ends_at_turn_end:
        text = text[:text.rindex(tok.eos_token) + len(tok.eos_token)]
    spans, pos = [], 0
    for m in messages:
        if m["role"] != "assistant":
            continue
        target = m["content"] + tok.eos_token
        start = text.index("<|im_start|>assistant\n" + target, pos) + len("<|im_start|>assistant\n")
        spans.append((start, start + len(target)))
        pos = start + len(target)
    enc = tok(text, return_offsets_mapping=True, add_special_tokens=False)
    labels = [t if any(s <= a and b <= e for s, e in spans) else -100
              for t, (a, b) in zip(enc["input_ids"], enc["offset_mapping"], strict=True)]
    return enc["input_ids"], labels


def test_row_messages_builds_from_prompt_response_and_meta_system():
    row = _rows(2)[1]
    msgs = row_messages(row)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant"]
    assert msgs[0]["content"] == "Be brief." and msgs[2]["content"] == row["response"]
    assert [m["role"] for m in row_messages(_rows(1)[0])] == ["user", "assistant"]
    assert row_messages(_rows(1)[0], system_prompt="S")[0] == {"role": "system", "content": "S"}
    given = {"messages": CONVO, "prompt": "ignored", "response": "ignored"}
    assert row_messages(given) == CONVO


@pytest.mark.parametrize("row, field", [
    ({"prompt": "q", "response": ""}, "response"),
    ({"prompt": "", "response": "a"}, "prompt"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": "x"}]}, "messages"),
    ({"messages": [{"role": "user"}]}, "messages[0]"),
])
def test_row_messages_errors_name_the_row_and_field(row, field):
    with pytest.raises(SFTDataError, match=re.escape(f"shard.parquet row 7: field '{field}")):
        row_messages(row, "shard.parquet row 7")


@pytest.mark.parametrize("mode", ["generation", "diff"])
def test_labels_are_minus100_exactly_on_non_assistant_tokens(tok, mode):
    out = tokenize_conversation(tok, CONVO, mode)
    ids, expected = _expected_labels(tok, CONVO, ends_at_turn_end=mode == "diff")
    assert out["input_ids"] == ids
    assert out["labels"] == expected
    trained = tok.decode([t for t in out["labels"] if t != -100])
    assert trained == "".join(m["content"] + "<|im_end|>" for m in CONVO if m["role"] == "assistant")
    assert "Be brief" not in trained and "What is" not in trained


def test_auto_mode_is_the_inference_split_with_or_without_markers(tok):
    assert resolve_mask_mode(tok, "auto") == "diff"  # markers are not where inference splits in general
    with_markers = tokenize_conversation(tok, CONVO, "generation")
    tok2 = tok.__class__.from_pretrained(tok.name_or_path)
    tok2.chat_template = NO_MARKERS
    assert resolve_mask_mode(tok2, "auto") == "diff"
    with pytest.raises(SFTDataError, match="generation"):
        resolve_mask_mode(tok2, "generation")
    diff = tokenize_conversation(tok2, CONVO, "diff")
    # this template's markers cover exactly the inference completions: same labels, minus the final '\n'
    assert diff["input_ids"] == with_markers["input_ids"][:-1] and diff["labels"] == with_markers["labels"][:-1]
    everything = tokenize_conversation(tok2, CONVO, "none")
    assert everything["labels"] == everything["input_ids"] == diff["input_ids"]


def test_template_that_drops_reasoning_is_repaired_or_refused(tok):
    tok2 = tok.__class__.from_pretrained(tok.name_or_path)
    tok2.chat_template = DROPS_THINK
    with pytest.raises(SFTDataError, match="row 3: field 'messages': reasoning_lost"):
        tokenize_conversation(tok2, CONVO, "diff", where="row 3", repair=False)
    out = tokenize_conversation(tok2, CONVO, "diff")  # rebuilt: generation prompt + the response as written
    trained = tok2.decode([t for t in out["labels"] if t != -100])
    assert trained == CONVO[-1]["content"] + "<|im_end|>"  # history turns render differently: context only
    prompt = tok2.apply_chat_template(CONVO[:-1], add_generation_prompt=True, tokenize=True)["input_ids"]
    assert out["input_ids"][:len(prompt)] == list(prompt)


def test_collator_masks_padding_and_packed_boundaries(tok):
    rows = [tokenize_conversation(tok, row_messages(r), "generation") for r in _rows(3)]
    padded = collate(rows, tok.pad_token_id, padding_free=False)
    assert padded["labels"].shape == padded["input_ids"].shape
    assert (padded["labels"][padded["attention_mask"] == 0] == -100).all()
    assert (padded["attention_mask"] == 0).any()
    packed = collate(rows, tok.pad_token_id, padding_free=True)
    assert packed["input_ids"].shape == (1, sum(len(r["input_ids"]) for r in rows))
    starts = (packed["position_ids"][0] == 0).nonzero().flatten().tolist()
    assert starts == [0, len(rows[0]["input_ids"]), len(rows[0]["input_ids"]) + len(rows[1]["input_ids"])]
    assert (packed["labels"][0, starts] == -100).all()


def _write_parquet(path, rows, with_messages=False):
    table = pa.Table.from_pylist([dict(r, messages=row_messages(r)) if with_messages else r for r in rows])
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def test_load_forms_and_error_names_file_and_row(tmp_path, tok):
    rows = _rows(6)
    _write_parquet(tmp_path / "sft" / "a.parquet", rows[:4], with_messages=True)
    bad = dict(rows[5], response="")
    _write_parquet(tmp_path / "sft" / "b.parquet", [rows[4], bad], with_messages=False)
    ds, locator = load_sft_dataset(str(tmp_path / "sft"))
    assert len(ds) == 6 and locator(5, "r5").endswith("b.parquet row 1 (id=r5)")
    with pytest.raises(SFTDataError, match=r"b\.parquet row 1 \(id=r5\): field 'response'"):
        prepare_sft_dataset(ds, tok, max_length=512, locator=locator, strict=True)
    kept, stats = prepare_sft_dataset(ds, tok, max_length=512, locator=locator)  # default: dropped, recorded
    assert (len(kept), stats.dropped) == (5, {"invalid_row": 1})
    assert stats.dropped_samples[0]["where"].endswith("b.parquet row 1 (id=r5)")
    # a curation stage folder (kept/ shards) and a save_to_disk folder
    _write_parquet(tmp_path / "stage" / "kept" / "part-0.parquet", rows[:3])
    assert len(load_sft_dataset(str(tmp_path / "stage"))[0]) == 3
    ds.select(range(4)).save_to_disk(str(tmp_path / "disk"))
    assert len(load_sft_dataset(str(tmp_path / "disk"))[0]) == 4
    with pytest.raises(SFTDataError, match="no such file"):
        load_sft_dataset(str(tmp_path / "missing"))


def test_prepare_drops_overlong_rows_and_counts(tmp_path, tok):
    _write_parquet(tmp_path / "sft" / "a.parquet", _rows(9, long_every=3))
    ds, locator = load_sft_dataset(str(tmp_path / "sft"))
    out, stats = prepare_sft_dataset(ds, tok, max_length=120, locator=locator)
    assert out.column_names == ["input_ids", "labels"]
    assert (stats.rows_in, stats.rows_kept, stats.dropped_overlong) == (9, 6, 3)
    assert all(len(x) <= 120 for x in out["input_ids"])
    assert stats.assistant_tokens == sum(sum(1 for t in lab if t != -100) for lab in out["labels"])
    kept, stats2 = prepare_sft_dataset(ds, tok, max_length=120, overlong="truncate", locator=locator)
    assert stats2.rows_kept == 9 and max(len(x) for x in kept["input_ids"]) > 120  # TRL truncates later
    with pytest.raises(SFTDataError, match="no SFT rows left"):
        prepare_sft_dataset(ds, tok, max_length=10, locator=locator)


def test_real_long_cot_rows_render_with_reasoning_inside_the_assistant_turn(shared_data, tok):
    path = shared_data / "sft_sources" / "marco_o1_cot_demo.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        recs = [json.loads(line) for _, line in zip(range(12), f, strict=False)]
    tok2 = tok.__class__.from_pretrained(tok.name_or_path)
    tok2.chat_template = NO_MARKERS
    for i, rec in enumerate(recs):
        row = {"prompt": rec["problem"], "response": rec["response"]}
        msgs = row_messages(row, f"{path} row {i}")
        gen = tokenize_conversation(tok, msgs, "generation")
        diff = tokenize_conversation(tok2, msgs, "diff")
        assert diff["input_ids"] == gen["input_ids"][:-1] and diff["labels"] == gen["labels"][:-1]
        trained = tok.decode([t for t in diff["labels"] if t != -100])
        assert trained == rec["response"] + "<|im_end|>"
