"""SFT data: load curated shards, render them with the chat template as inference will see them, and build
assistant-only labels; rows that cannot be rendered faithfully are dropped with their reason.

The flow is `load_sft_dataset` -> `prepare_sft_dataset` (messages -> `input_ids` + `labels`, where every
prompt token is -100) -> TRL's `SFTTrainer`, which sees an already tokenised dataset and only
truncates / packs / collates it. Doing the tokenisation here (not in TRL) keeps the label rule in one
place for every chat template. `train.sft.render` has the rendering rules:

* ``mask_mode="diff"`` (what ``auto`` picks): prompt = the generation prompt of the history, labels = what
  the model must generate after it, up to and including the template's end-of-turn token;
* ``mask_mode="generation"``: the template's ``{% generation %}`` markers, as they are;
* ``mask_mode="none"``: every token of the ``diff`` rendering is trained.

Dropped rows (bad fields, templates that lose the reasoning with repair off, ...) are counted per reason
and sampled in `PrepareStats` (written as `sft_data_stats.json` by the trainer); `strict=True` raises on
the first one instead. Packing helpers live in `train.sft.packing`.
"""

from __future__ import annotations

import glob
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cotforge.curate.core.schema import chat_messages
from cotforge.train.sft.packing import PackingProbe, collate, packing_leak, packing_probe, padding_share
from cotforge.train.sft.render import (
    DROP_REASONS,
    MASK_MODES,
    REASONING_MODES,
    ChatFormat,
    Rendered,
    SFTDataError,
    chat_format,
    render_conversation,
    render_with_markers,
    resolve_mask_mode,
)

log = logging.getLogger(__name__)

__all__ = ["DROP_REASONS", "MASK_MODES", "OVERLONG_POLICIES", "REASONING_MODES", "ChatFormat", "PackingProbe",
           "PrepareStats",
           "RowLocator", "SFTDataError", "chat_format", "collate", "load_sft_dataset", "packing_leak",
           "packing_probe", "padding_share", "prepare_sft_dataset", "render_row", "resolve_mask_mode", "row_messages",
           "tokenize_conversation"]

OVERLONG_POLICIES = ("drop", "truncate")
ROLES = ("system", "user", "assistant", "tool")
SAMPLES_PER_REASON = 5  # dropped rows kept as examples per reason in the stats
_HF_DIR_MARKERS = ("dataset_info.json", "dataset_dict.json", "state.json")


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


# --------------------------------------------------------------------------- one conversation


def render_row(tokenizer, fmt: ChatFormat, messages: list[dict[str, str]], mask_mode: str, *,
               reasoning_markers: str = "keep", repair: bool = True) -> Rendered:
    """Render one conversation with a resolved mask mode (`diff`, `generation` or `none`); never raises per row."""
    if mask_mode == "generation":
        return render_with_markers(tokenizer, fmt, messages, reasoning_markers=reasoning_markers)
    if mask_mode not in ("diff", "none"):
        raise SFTDataError(f"mask_mode {mask_mode!r} must be resolved first (resolve_mask_mode)")
    out = render_conversation(tokenizer, fmt, messages, reasoning_markers=reasoning_markers, repair=repair)
    if mask_mode == "none" and not out.drop:
        out.labels = list(out.input_ids)
    return out


def tokenize_conversation(tokenizer, messages: list[dict[str, str]], mask_mode: str, where: str = "row", *,
                          fmt: ChatFormat | None = None, reasoning_markers: str = "keep",
                          repair: bool = True) -> dict[str, list[int]]:
    """Render one conversation; labels = ids on trained assistant tokens, -100 elsewhere.

    `mask_mode` must be resolved (`resolve_mask_mode`). Raises SFTDataError naming `where` and the drop
    reason when the row cannot be rendered faithfully (`prepare_sft_dataset` drops such rows instead).
    """
    fmt = fmt or chat_format(tokenizer)
    out = render_row(tokenizer, fmt, messages, mask_mode, reasoning_markers=reasoning_markers, repair=repair)
    if out.drop:
        raise SFTDataError(f"{where}: field 'messages': {out.drop} ({out.detail})")
    return {"input_ids": out.input_ids, "labels": out.labels}


# --------------------------------------------------------------------------- the dataset


@dataclass
class PrepareStats:
    """Counts from `prepare_sft_dataset`, logged and written as `sft_data_stats.json`.

    rows_in = rows_kept + dropped_overlong + sum(dropped.values()).
    """

    rows_in: int = 0
    rows_kept: int = 0
    dropped_overlong: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    dropped_samples: list[dict[str, str]] = field(default_factory=list)
    repaired: dict[str, int] = field(default_factory=dict)
    markers_normalised: dict[str, int] = field(default_factory=dict)
    reasoning_markers: str = "keep"
    target_markers: list[str] | None = None
    history_turns_trained: int = 0
    history_turns_untrained: int = 0
    tokens: int = 0
    assistant_tokens: int = 0
    max_tokens: int = 0
    mask_mode: str = ""
    end_of_turn: str = ""
    end_of_turn_id: int | None = None
    eos_token: str | None = None
    packing: dict[str, Any] = field(default_factory=dict)  # the packing decision (filled by the trainer)

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return dict(self.__dict__)


def _map_row(row: dict[str, Any], idx: int, tokenizer, fmt: ChatFormat, mask_mode: str, locator: RowLocator,
             system_prompt: str | None, reasoning_markers: str, repair: bool, strict: bool) -> dict[str, Any]:
    """datasets.map body: one shard row -> ids, labels and what happened to it (drop reason, repairs)."""
    where = locator(idx, row.get("id"))
    try:
        msgs = row_messages(row, where, system_prompt)
    except SFTDataError as e:
        if strict:
            raise
        out = Rendered(drop="invalid_row", detail=str(e))
    else:
        out = render_row(tokenizer, fmt, msgs, mask_mode, reasoning_markers=reasoning_markers, repair=repair)
    if out.drop and strict:
        raise SFTDataError(f"{where}: field 'messages': {out.drop} ({out.detail}); strict mode stops here")
    return {"input_ids": out.input_ids, "labels": out.labels, "drop": out.drop, "detail": out.detail,
            "where": where, "repairs": out.repairs, "normalised": out.normalised,
            "hist_ok": out.history_trained, "hist_bad": out.history_untrained,
            "n_assistant": sum(1 for t in out.labels if t != -100)}


def _count(values: Sequence[Any]) -> dict[str, int]:
    """Occurrences of each non-empty value, sorted by key."""
    counts: dict[str, int] = {}
    for v in values:
        if v:
            counts[v] = counts.get(v, 0) + 1
    return dict(sorted(counts.items()))


def _drop_stats(out, stats: PrepareStats) -> None:
    """Fill the drop / repair / normalisation / history counts from the mapped columns."""
    drops = out["drop"]
    stats.dropped = _count(drops)
    per_reason: dict[str, int] = {}
    for i, reason in enumerate(drops):
        if reason and per_reason.get(reason, 0) < SAMPLES_PER_REASON:
            per_reason[reason] = per_reason.get(reason, 0) + 1
            stats.dropped_samples.append({"where": out[i]["where"], "reason": reason, "detail": out[i]["detail"]})
    stats.repaired = _count([r for rs in out["repairs"] for r in rs])
    stats.markers_normalised = _count(out["normalised"])
    stats.history_turns_trained = int(sum(out["hist_ok"]))
    stats.history_turns_untrained = int(sum(out["hist_bad"]))
    for reason, n in stats.dropped.items():
        log.warning("SFT data: %d row(s) dropped: %s (%s); e.g. %s", n, reason, DROP_REASONS.get(reason, ""),
                    next(s["where"] for s in stats.dropped_samples if s["reason"] == reason))


def prepare_sft_dataset(dataset, tokenizer, *, max_length: int | None, mask_mode: str = "auto",
                        overlong: str = "drop", locator: RowLocator | None = None,
                        system_prompt: str | None = None, num_proc: int | None = None,
                        reasoning_markers: str = "keep", repair: bool = True, strict: bool = False,
                        template_kwargs: dict[str, Any] | None = None):
    """Tokenise shard rows into `input_ids` + `labels` (assistant-only), dropping unfaithful and overlong rows.

    Returns `(dataset, PrepareStats)`; the dataset has only the columns TRL's packer and collator use.
    `overlong="drop"` removes rows longer than `max_length` (a truncated chain of thought teaches the
    model to stop mid-thought); `"truncate"` keeps them for TRL to cut (keep_start) or pack-split.
    `strict=True` raises SFTDataError at the first row that would be dropped (not for overlong rows).
    """
    if overlong not in OVERLONG_POLICIES:
        raise SFTDataError(f"overlong {overlong!r} is not one of {OVERLONG_POLICIES}")
    if reasoning_markers not in REASONING_MODES:
        raise SFTDataError(f"reasoning_markers {reasoning_markers!r} is not one of {REASONING_MODES}")
    mode = resolve_mask_mode(tokenizer, mask_mode)
    fmt = chat_format(tokenizer, template_kwargs)
    stats = PrepareStats(rows_in=len(dataset), mask_mode=mode, end_of_turn=fmt.end_of_turn,
                         end_of_turn_id=fmt.end_of_turn_id, eos_token=tokenizer.eos_token,
                         reasoning_markers=reasoning_markers,
                         target_markers=list(fmt.target_markers) if fmt.target_markers else None)
    if fmt.end_of_turn != tokenizer.eos_token:
        log.info("SFT data: turns end with %r (from the chat template), eos_token is %r", fmt.end_of_turn,
                 tokenizer.eos_token)
    out = dataset.map(
        _map_row, with_indices=True, remove_columns=dataset.column_names, num_proc=num_proc,
        fn_kwargs={"tokenizer": tokenizer, "fmt": fmt, "mask_mode": mode, "locator": locator or RowLocator("data"),
                   "system_prompt": system_prompt, "reasoning_markers": reasoning_markers, "repair": repair,
                   "strict": strict},
        desc="Rendering SFT rows",
    )
    _drop_stats(out, stats)
    out = out.filter(_kept, input_columns="drop", num_proc=num_proc, desc="Dropping unfaithful rows")
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
        err = SFTDataError(f"no SFT rows left after preparation ({stats.dropped_overlong} longer than "
                           f"max_length={max_length}; dropped: {stats.dropped or 'none'}); raise max_length, set "
                           "overlong: truncate, or see the dropped reasons")
        err.stats = stats  # what was dropped, for callers that report instead of training
        raise err
    log.info("SFT data: %d rows in, %d kept (%d overlong, %d unfaithful dropped), %d tokens, %.1f%% assistant, "
             "mask=%s", stats.rows_in, stats.rows_kept, stats.dropped_overlong, sum(stats.dropped.values()),
             stats.tokens, 100.0 * stats.assistant_tokens / max(stats.tokens, 1), mode)
    return out.select_columns(["input_ids", "labels"]), stats


def _kept(drop: str) -> bool:
    """Filter predicate: the row has no drop reason."""
    return not drop


def _fits(ids: list[int], max_length: int) -> bool:
    """Filter predicate: the row fits into `max_length` tokens."""
    return len(ids) <= max_length
