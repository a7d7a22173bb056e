"""SFT data: load curated shards, render them with a chat template, build assistant-only labels, and
check that packed samples stay isolated.

The flow is `load_sft_dataset` -> `prepare_sft_dataset` (messages -> `input_ids` + `labels`, where every
non-assistant token is -100) -> TRL's `SFTTrainer`, which sees an already tokenised dataset and only
truncates / packs / collates it. Doing the tokenisation here (not in TRL) keeps the label rule in one
place for every chat template:

* ``mask_mode="generation"``: the template marks assistant text with ``{% generation %}`` and
  ``return_assistant_tokens_mask`` gives the mask (the tiny test tokenizer has these markers).
* ``mask_mode="diff"``: for templates without markers (most hub models), each assistant turn's span is
  found by rendering the conversation up to that turn with ``add_generation_prompt=True`` and again
  with the turn included, and diffing the token ids. The span is cut after its last EOS token, so the
  end-of-turn token is trained and the separator the template prints after it is not.
* ``mask_mode="auto"`` (default) picks ``generation`` when the markers exist, otherwise ``diff``.
* ``mask_mode="none"`` trains on every token.

Packing: on CUDA with FlashAttention, TRL's padding-free collator passes ``cu_seq_lens`` to the varlen
kernels. With ``sdpa``/``eager`` (CPU, or GPU without flash-attn) transformers >= 5 derives a block-
diagonal causal mask from the restarting ``position_ids`` -- but only when no attention mask and no
KV cache are passed; with ``use_cache=True`` packed samples silently attend to each other.
`packing_leak` measures this on the real model so the trainer can refuse or fall back explicitly.
"""

from __future__ import annotations

import glob
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cotforge.curate.schema import chat_messages

log = logging.getLogger(__name__)

MASK_MODES = ("auto", "generation", "diff", "none")
OVERLONG_POLICIES = ("drop", "truncate")
ROLES = ("system", "user", "assistant", "tool")
_THINK_RE = re.compile(r"<think>(.*?)</think>", re.DOTALL)
_HF_DIR_MARKERS = ("dataset_info.json", "dataset_dict.json", "state.json")


class SFTDataError(ValueError):
    """Bad SFT input: the message names the file, row and field at fault."""


# --------------------------------------------------------------------------- loading


@dataclass
class RowLocator:
    """Maps a global row index back to `file row N (id=...)` so errors name where a bad row lives."""

    origin: str
    files: list[str] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)

    def __call__(self, index: int, row_id: Any = None) -> str:
        """Describe row `index` of the loaded dataset (file and row within it when known)."""
        where = f"{self.origin} row {index}"
        start = 0
        for path, n in zip(self.files, self.counts, strict=False):
            if index < start + n:
                where = f"{path} row {index - start}"
                break
            start += n
        return f"{where} (id={row_id})" if row_id not in (None, "") else where


def _parquet_rows(path: str) -> int:
    """Row count from the Parquet footer (cheap: no data pages are read)."""
    import pyarrow.parquet as pq

    return pq.read_metadata(path).num_rows


def resolve_data_files(spec: str) -> list[str]:
    """Expand one local data spec (file, glob, folder, curation stage folder) into sorted data files."""
    from cotforge.curate.io.inputs import is_stage_dir, stage_files

    p = Path(spec)
    if p.is_dir():
        if is_stage_dir(p):
            return [str(f) for f in stage_files(p)]
        for pattern in ("*.parquet", "*.jsonl", "*.jsonl.gz", "**/*.parquet"):
            files = sorted(str(f) for f in p.glob(pattern))
            if files:
                return files
        raise SFTDataError(f"{spec}: folder holds no *.parquet or *.jsonl[.gz] files")
    if p.is_file():
        return [str(p)]
    files = sorted(glob.glob(spec))
    if not files:
        raise SFTDataError(f"{spec}: no such file, folder or glob match")
    return files


def load_sft_dataset(spec: str | Sequence[str]):
    """Load SFT rows from Parquet/JSONL files or folders, a `save_to_disk` folder, or `hf:org/name[:split]`.

    Returns `(dataset, locator)`; the locator turns a row index into `file row N` for error messages.
    """
    import datasets

    specs = [spec] if isinstance(spec, str) else list(spec)
    if not specs:
        raise SFTDataError("no SFT data given (config key `data`)")
    if len(specs) > 1 and any(s.startswith("hf:") for s in specs):
        raise SFTDataError(f"{specs}: an hf:org/name dataset must be the only `data` entry")
    if len(specs) == 1 and specs[0].startswith("hf:"):
        name, _, split = specs[0][3:].partition(":")
        return datasets.load_dataset(name, split=split or "train"), RowLocator(specs[0])
    if len(specs) == 1 and Path(specs[0]).is_dir() and any((Path(specs[0]) / m).exists() for m in _HF_DIR_MARKERS):
        ds = datasets.load_from_disk(specs[0])
        if isinstance(ds, datasets.DatasetDict):
            if "train" not in ds:
                raise SFTDataError(f"{specs[0]}: DatasetDict has no 'train' split (has {sorted(ds)})")
            ds = ds["train"]
        return ds, RowLocator(specs[0])
    files = [f for s in specs for f in resolve_data_files(s)]
    kinds = {"parquet" if f.endswith(".parquet") else "json" if ".jsonl" in f or f.endswith(".json") else "?"
             for f in files}
    if kinds - {"parquet", "json"} or len(kinds) != 1:
        raise SFTDataError(f"{', '.join(specs)}: expected only Parquet or only JSONL files, got {files[:5]}")
    kind = kinds.pop()
    ds = datasets.load_dataset(kind, data_files=files, split="train")
    counts = [_parquet_rows(f) for f in files] if kind == "parquet" else []
    return ds, RowLocator(", ".join(specs), files if counts else [], counts)


# --------------------------------------------------------------------------- messages


def row_messages(row: dict[str, Any], where: str = "row", system_prompt: str | None = None) -> list[dict[str, str]]:
    """The conversation of one shard row: its `messages`, or one built from `prompt`/`response`.

    A system turn comes from the row's messages, else `meta["system"]`, else `system_prompt`.
    """
    msgs = row.get("messages")
    if isinstance(msgs, str) and msgs.strip():
        try:
            msgs = json.loads(msgs)
        except json.JSONDecodeError as e:
            raise SFTDataError(f"{where}: field 'messages' is not valid JSON ({e})") from e
    if msgs:
        out = _validate_messages(msgs, where)
    else:
        prompt, response = row.get("prompt"), row.get("response")
        if not isinstance(prompt, str) or not prompt.strip():
            raise SFTDataError(f"{where}: field 'prompt' is empty and there is no 'messages' column value")
        if not isinstance(response, str) or not response.strip():
            raise SFTDataError(f"{where}: field 'response' is empty (an SFT row needs the assistant's answer)")
        out = chat_messages(row, system_prompt)  # the same messages the mix stage writes
    if system_prompt and out[0]["role"] != "system":
        out = [{"role": "system", "content": system_prompt}, *out]
    return out


def _validate_messages(msgs: Any, where: str) -> list[dict[str, str]]:
    """Check a `messages` value is a list of {role, content} with known roles and one assistant turn."""
    if not isinstance(msgs, (list, tuple)):
        raise SFTDataError(f"{where}: field 'messages' must be a list of {{role, content}}, got {type(msgs).__name__}")
    out = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise SFTDataError(f"{where}: field 'messages[{i}]' must be a dict with 'role' and 'content'")
        if m["role"] not in ROLES:
            raise SFTDataError(f"{where}: field 'messages[{i}].role' is {m['role']!r}, expected one of {ROLES}")
        if not isinstance(m["content"], str):
            raise SFTDataError(f"{where}: field 'messages[{i}].content' must be a string")
        out.append({"role": m["role"], "content": m["content"]})
    if not any(m["role"] == "assistant" for m in out):
        raise SFTDataError(f"{where}: field 'messages' has no assistant turn to train on")
    return out


# --------------------------------------------------------------------------- rendering and masks


def has_generation_markers(template: str | dict | None) -> bool:
    """True when a chat template marks assistant text with `{% generation %}` (TRL's check)."""
    from trl.chat_template_utils import has_generation_markers as _trl_has

    return bool(template) and _trl_has(template)


def resolve_mask_mode(tokenizer, mask_mode: str) -> str:
    """Turn `auto` into `generation` (template has markers) or `diff`; validate the others."""
    if mask_mode not in MASK_MODES:
        raise SFTDataError(f"mask_mode {mask_mode!r} is not one of {MASK_MODES}")
    if tokenizer.chat_template is None and mask_mode != "none":
        raise SFTDataError("the tokenizer has no chat template; set `chat_template_path` to a .jinja file")
    if mask_mode == "auto":
        return "generation" if has_generation_markers(tokenizer.chat_template) else "diff"
    if mask_mode == "generation" and not has_generation_markers(tokenizer.chat_template):
        raise SFTDataError("mask_mode 'generation' needs {% generation %} markers in the chat template; "
                           "use mask_mode 'diff' (or 'auto')")
    return mask_mode


def _render_ids(tokenizer, messages: list[dict[str, str]], **kwargs) -> list[int]:
    """Token ids of a conversation rendered with the tokenizer's chat template."""
    out = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True, **kwargs)
    return list(out["input_ids"])


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two id lists."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def assistant_mask_generation(tokenizer, messages: list[dict[str, str]]) -> tuple[list[int], list[int]]:
    """(ids, mask) from the template's `{% generation %}` markers (`return_assistant_tokens_mask`)."""
    out = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True,
                                        return_assistant_tokens_mask=True)
    return list(out["input_ids"]), list(out["assistant_masks"])


def assistant_mask_diff(tokenizer, messages: list[dict[str, str]]) -> tuple[list[int], list[int]]:
    """(ids, mask) for any template: each assistant span is full(upto turn) minus prompt(before turn).

    The span runs from where `render(messages[:i], add_generation_prompt=True)` stops matching
    `render(messages[:i+1])` to the last EOS token inside the new tokens (inclusive), so the model
    learns to stop but not the separator after the turn. A turn whose rendering is not a prefix of the
    whole conversation (templates that rewrite history, e.g. strip old reasoning) is skipped with a warning.
    """
    ids = _render_ids(tokenizer, messages)
    mask = [0] * len(ids)
    eos = tokenizer.eos_token_id
    for i, msg in enumerate(messages):
        if msg["role"] != "assistant":
            continue
        prompt = _render_ids(tokenizer, messages[:i], add_generation_prompt=True) if i else []
        upto = ids if i == len(messages) - 1 else _render_ids(tokenizer, messages[: i + 1])
        if common_prefix_length(upto, ids) < len(upto):
            log.warning("assistant turn %d renders differently inside the full conversation; not trained", i)
            continue
        start = common_prefix_length(prompt, upto)
        end = len(upto)
        eos_at = [j for j in range(start, end) if ids[j] == eos]
        if eos_at:
            end = eos_at[-1] + 1
        mask[start:end] = [1] * (end - start)
    return ids, mask


def reasoning_bodies(messages: list[dict[str, str]]) -> list[str]:
    """The non-empty `<think>...</think>` bodies of the assistant turns."""
    return [b.strip() for m in messages if m["role"] == "assistant"
            for b in _THINK_RE.findall(m["content"]) if b.strip()]


def _squash(text: str) -> str:
    """Text without whitespace: tokenizers differ in how they decode spaces, not in the words."""
    return re.sub(r"\s+", "", text)


def tokenize_conversation(tokenizer, messages: list[dict[str, str]], mask_mode: str,
                          where: str = "row") -> dict[str, list[int]]:
    """Render one conversation; labels = ids on assistant tokens, -100 elsewhere (mask_mode already resolved).

    Raises SFTDataError when the template drops an assistant's `<think>` block, or nothing is trainable.
    """
    if mask_mode == "generation":
        ids, mask = assistant_mask_generation(tokenizer, messages)
    elif mask_mode == "diff":
        ids, mask = assistant_mask_diff(tokenizer, messages)
    elif mask_mode == "none":
        ids = _render_ids(tokenizer, messages)
        mask = [1] * len(ids)
    else:
        raise SFTDataError(f"mask_mode {mask_mode!r} must be resolved first (resolve_mask_mode)")
    if not any(mask):
        raise SFTDataError(f"{where}: no assistant tokens after rendering with the chat template")
    bodies = reasoning_bodies(messages)
    if bodies:
        trained = _squash(tokenizer.decode([t for t, k in zip(ids, mask, strict=True) if k]))
        for body in bodies:
            if _squash(body) not in trained:
                raise SFTDataError(
                    f"{where}: field 'messages': the chat template drops or moves the <think> reasoning block "
                    "out of the trained assistant turn; set `chat_template_path` to a template that keeps it")
    return {"input_ids": ids, "labels": [t if k else -100 for t, k in zip(ids, mask, strict=True)]}


# --------------------------------------------------------------------------- the dataset


@dataclass
class PrepareStats:
    """Counts from `prepare_sft_dataset` (logged, and written next to the run's outputs)."""

    rows_in: int = 0
    rows_kept: int = 0
    dropped_overlong: int = 0
    tokens: int = 0
    assistant_tokens: int = 0
    max_tokens: int = 0
    mask_mode: str = ""

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return dict(self.__dict__)


def _map_row(row: dict[str, Any], idx: int, tokenizer, mask_mode: str, locator: RowLocator,
             system_prompt: str | None) -> dict[str, Any]:
    """datasets.map body: one shard row -> input_ids, labels, n_assistant."""
    where = locator(idx, row.get("id"))
    out = tokenize_conversation(tokenizer, row_messages(row, where, system_prompt), mask_mode, where)
    out["n_assistant"] = sum(1 for t in out["labels"] if t != -100)
    return out


def prepare_sft_dataset(dataset, tokenizer, *, max_length: int | None, mask_mode: str = "auto",
                        overlong: str = "drop", locator: RowLocator | None = None,
                        system_prompt: str | None = None, num_proc: int | None = None):
    """Tokenise shard rows into `input_ids` + `labels` (assistant-only), dropping overlong rows if asked.

    Returns `(dataset, PrepareStats)`; the dataset has only the columns TRL's packer and collator use.
    `overlong="drop"` removes rows longer than `max_length` (a truncated chain of thought teaches the
    model to stop mid-thought); `"truncate"` keeps them for TRL to cut (keep_start) or pack-split.
    """
    if overlong not in OVERLONG_POLICIES:
        raise SFTDataError(f"overlong {overlong!r} is not one of {OVERLONG_POLICIES}")
    mode = resolve_mask_mode(tokenizer, mask_mode)
    stats = PrepareStats(rows_in=len(dataset), mask_mode=mode)
    out = dataset.map(
        _map_row, with_indices=True, remove_columns=dataset.column_names, num_proc=num_proc,
        fn_kwargs={"tokenizer": tokenizer, "mask_mode": mode, "locator": locator or RowLocator("data"),
                   "system_prompt": system_prompt},
        desc="Rendering SFT rows",
    )
    if max_length is not None and overlong == "drop":
        before = len(out)
        out = out.filter(_fits, input_columns="input_ids", fn_kwargs={"max_length": max_length},
                         num_proc=num_proc, desc="Dropping overlong rows")
        stats.dropped_overlong = before - len(out)
    lengths = [len(x) for x in out["input_ids"]]
    stats.rows_kept = len(out)
    stats.tokens = sum(lengths)
    stats.max_tokens = max(lengths, default=0)
    stats.assistant_tokens = int(sum(out["n_assistant"]))
    if stats.rows_kept == 0:
        raise SFTDataError(f"no SFT rows left after preparation ({stats.dropped_overlong} longer than "
                           f"max_length={max_length}); raise max_length or set overlong: truncate")
    log.info("SFT data: %d rows in, %d kept (%d overlong dropped), %d tokens, %.1f%% assistant, mask=%s",
             stats.rows_in, stats.rows_kept, stats.dropped_overlong, stats.tokens,
             100.0 * stats.assistant_tokens / max(stats.tokens, 1), mode)
    return out.remove_columns(["n_assistant"]), stats


def _fits(ids: list[int], max_length: int) -> bool:
    """Filter predicate: the row fits into `max_length` tokens."""
    return len(ids) <= max_length


# --------------------------------------------------------------------------- packing helpers


def collate(examples: list[dict[str, Any]], pad_token_id: int, padding_free: bool) -> dict[str, Any]:
    """Collate tokenised rows exactly as SFTTrainer does (TRL's DataCollatorForLanguageModeling)."""
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    return DataCollatorForLanguageModeling(pad_token_id=pad_token_id, padding_free=padding_free)(examples)


def padding_share(batch: dict[str, Any]) -> tuple[int, int]:
    """(real tokens, computed positions) of one collated batch; padding share = 1 - real/computed."""
    total = int(batch["input_ids"].numel())
    if "attention_mask" in batch:
        return int(batch["attention_mask"].sum()), total
    return int(batch["cu_seq_lens_q"][-1]), total


def packing_leak(model, lengths: Sequence[int] = (9, 6), use_cache: bool = False, seed: int = 0) -> float:
    """Max |logit difference| between samples run alone and the same samples packed into one row.

    The packed row is built by TRL's padding-free collator (restarting `position_ids`, no attention
    mask), i.e. what the trainer feeds the model. ~0 means the attention backend isolates packed
    samples; a large value means they attend to each other. `use_cache=True` reproduces the leak that
    a KV cache causes on sdpa/eager (transformers then skips the packed-sequence mask).
    """
    import torch

    gen = torch.Generator().manual_seed(seed)
    vocab = int(model.get_input_embeddings().weight.shape[0])
    samples = [torch.randint(0, vocab, (n,), generator=gen).tolist() for n in lengths]
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            alone = [model(input_ids=torch.tensor([s], device=device), use_cache=False).logits[0] for s in samples]
            batch = collate([{"input_ids": s} for s in samples], pad_token_id=0, padding_free=True)
            batch = {k: v.to(device) if hasattr(v, "to") else v for k, v in batch.items() if k != "labels"}
            packed = model(**batch, use_cache=use_cache).logits[0]
    finally:
        model.train(was_training)
    return float((packed.float() - torch.cat(alone).float()).abs().max())
