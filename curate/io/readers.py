"""Read JSONL / JSONL.gz / Parquet / Hugging Face datasets into rows of the one schema.

Field names are auto-detected from the aliases below (the chosen mapping is logged) and can be
overridden with ``--map prompt=problem``. Chat lists (``messages`` / ``conversations``) become
prompt/response. A bad row never raises unless ``strict``: it comes back as a `Quarantined`
record naming the file, line/row and field, so every input row ends up somewhere.
"""

from __future__ import annotations

import ast
import gzip
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from cotforge.curate.schema import dump_meta, make_id, normalize_domain

log = logging.getLogger(__name__)

ALIASES: dict[str, tuple[str, ...]] = {
    "id": ("id", "uid", "unique_id", "task_id", "problem_id", "question_id"),
    "prompt": ("prompt", "problem", "question", "instruction", "query", "input_text"),
    "response": ("response", "solution", "completion", "generation", "output", "answer_text",
                 "generated_solution"),
    "answer": ("answer", "ground_truth", "gold", "gt", "expected_answer", "final_answer", "target",
               "reward_model"),
    "tests": ("tests", "test", "test_cases", "input_output", "test_list"),
    "source": ("source", "data_source", "dataset"),
    "domain": ("domain", "ability", "category"),
}
CHAT_KEYS = ("messages", "conversations", "conversation")
TARGETS = tuple(ALIASES)

DATA_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".parquet")


class InputError(Exception):
    """A bad input: names the file, line/row and field. `what` is the message without the place."""

    def __init__(self, message: str, what: str | None = None):
        super().__init__(message)
        self.what = what or message


def _err(origin: Origin, what: str) -> InputError:
    return InputError(f"{origin}: {what}", what)


@dataclass
class Origin:
    """Where a record came from: file (as given) and 1-based line (JSONL) or 0-based row index."""

    file: str
    index: int
    unit: str = "line"

    def __str__(self) -> str:
        return f"{self.file}, {self.unit} {self.index}"

    def as_meta(self) -> dict[str, Any]:
        return {"file": self.file, self.unit: self.index}


@dataclass
class Quarantined:
    """A record that could not become a row, with the reason (`malformed: ...`)."""

    origin: Origin
    reason: str
    raw: Any = None
    source: str = ""

    def to_row(self) -> dict[str, Any]:
        raw = self.raw if isinstance(self.raw, str) else json.dumps(self.raw, default=str)[:2000]
        meta = {"_origin": self.origin.as_meta(), "_raw": (raw or "")[:2000]}
        prompt = ""
        if isinstance(self.raw, dict):
            for k in ALIASES["prompt"]:
                if isinstance(self.raw.get(k), str):  # shown as is, minus what UTF-8 cannot hold
                    prompt = self.raw[k].encode("utf-8", "replace").decode("utf-8")
                    break
        return {
            "id": make_id(self.source, f"{self.origin}", raw),
            "source": self.source,
            "domain": "other",
            "prompt": prompt,
            "response": None,
            "answer": None,
            "tests": None,
            "meta": dump_meta(meta),
            "reason": self.reason,
            "duplicate_of": None,
        }


@dataclass
class InputSpec:
    """One input: a path or `hf:org/name[:split]`, plus per-input overrides."""

    path: str
    source_name: str | None = None
    mapping: dict[str, str] = field(default_factory=dict)
    domain: str | None = None

    @property
    def default_source(self) -> str:
        if self.source_name:
            return self.source_name
        if self.path.startswith("hf:"):
            return self.path[3:].split(":")[0].rstrip("/").split("/")[-1]
        name = Path(self.path.rstrip("/")).name
        for suf in (".gz", ".jsonl", ".json", ".parquet"):
            name = name.removesuffix(suf)
        return name


# --------------------------------------------------------------------------- raw records


def _is_hf_dir(path: Path) -> bool:
    return any((path / f).exists() for f in ("dataset_info.json", "dataset_dict.json", "state.json"))


def iter_raw(spec: InputSpec) -> Iterator[tuple[Origin, dict[str, Any] | Quarantined]]:
    """Yield (origin, record) for every raw record of one input; bad lines come as Quarantined."""
    p = spec.path
    if p.startswith("hf:"):
        yield from _iter_hf(spec)
        return
    path = Path(p)
    if not path.exists():
        raise InputError(f"{p}: no such file or directory")
    if path.is_dir():
        if _is_hf_dir(path):
            yield from _iter_hf(spec)
            return
        files = sorted(f for f in path.rglob("*") if f.is_file() and str(f).endswith(DATA_SUFFIXES))
        if not files:
            raise InputError(f"{p}: directory holds no .jsonl/.jsonl.gz/.parquet files")
        for f in files:
            yield from iter_raw(InputSpec(str(f), spec.source_name, spec.mapping, spec.domain))
        return
    if not os.access(path, os.R_OK):
        raise InputError(f"{p}: not readable")
    name = path.name
    if name.endswith(".parquet"):
        yield from _iter_parquet(path, p)
    elif name.endswith((".jsonl", ".jsonl.gz", ".json", ".json.gz")):
        yield from _iter_jsonl(path, p)
    else:
        raise InputError(f"{p}: unknown format (expected .jsonl, .jsonl.gz, .parquet, a dataset dir or hf:)")


def _iter_jsonl(path: Path, shown: str) -> Iterator[tuple[Origin, dict[str, Any] | Quarantined]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        fh = opener(path, "rb")
        first = fh.read(1)
    except (OSError, EOFError) as e:
        raise InputError(f"{shown}: cannot read ({e})") from e
    if not first:
        log.warning("%s: empty file", shown)
        fh.close()
        return
    if path.name.endswith((".json", ".json.gz")) and first == b"[":
        data = json.loads(first + fh.read())
        fh.close()
        for i, rec in enumerate(data):
            o = Origin(shown, i, "row")
            yield o, rec if isinstance(rec, dict) else Quarantined(o, "malformed: record is not an object", rec)
        return
    with fh:
        lineno = 0
        pending = first
        for raw in fh:
            raw = pending + raw
            pending = b""
            lineno += 1
            yield _parse_line(raw, Origin(shown, lineno))
        if pending:
            yield _parse_line(pending, Origin(shown, 1))


def _parse_line(raw: bytes, origin: Origin) -> tuple[Origin, dict[str, Any] | Quarantined]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return origin, Quarantined(origin, f"malformed: invalid UTF-8 at byte {e.start}",
                                   raw.decode("utf-8", "replace"))
    if not text.strip():
        return origin, Quarantined(origin, "malformed: empty line", text)
    try:
        rec = json.loads(text)
    except json.JSONDecodeError as e:
        return origin, Quarantined(origin, f"malformed: invalid JSON ({e.msg} at column {e.colno})", text)
    if not isinstance(rec, dict):
        return origin, Quarantined(origin, "malformed: line is not a JSON object", text)
    return origin, rec


def _iter_parquet(path: Path, shown: str) -> Iterator[tuple[Origin, dict[str, Any] | Quarantined]]:
    try:
        pf = pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises several types for broken files
        raise InputError(f"{shown}: not a readable Parquet file ({e})") from e
    i = 0
    for batch in pf.iter_batches(batch_size=2048):
        for rec in batch.to_pylist():
            yield Origin(shown, i, "row"), rec
            i += 1
    if i == 0:
        log.warning("%s: empty file", shown)


def _iter_hf(spec: InputSpec) -> Iterator[tuple[Origin, dict[str, Any] | Quarantined]]:
    """Local `save_to_disk` directories, or hub names / local dataset dirs through `load_dataset`."""
    import datasets

    p = spec.path
    if p.startswith("hf:"):
        name, _, split = p[3:].partition(":")
        split = split or "train"
        try:
            if Path(name).is_dir() and _is_hf_dir(Path(name)):
                ds = datasets.load_from_disk(name)
            else:
                ds = datasets.load_dataset(name, split=split)
        except Exception as e:
            raise InputError(f"{p}: cannot load dataset ({type(e).__name__}: {e})") from e
    else:
        name, split = p, "train"
        ds = datasets.load_from_disk(p)
    if isinstance(ds, datasets.DatasetDict):
        if split not in ds:
            raise InputError(f"{p}: no split {split!r} (has {sorted(ds)})")
        ds = ds[split]
    log.info("%s: %d rows (split %s)", p, len(ds), split)
    for i, rec in enumerate(ds):
        yield Origin(p, i, "row"), rec


# --------------------------------------------------------------------------- mapping


def detect_mapping(keys: list[str], overrides: dict[str, str] | None = None) -> dict[str, str]:
    """Choose input field per schema field: explicit overrides first, then the first alias present."""
    mapping: dict[str, str] = {}
    overrides = overrides or {}
    for target in TARGETS:
        if target in overrides:
            mapping[target] = overrides[target]
            continue
        for alias in ALIASES[target]:
            if alias in keys and alias not in mapping.values():
                mapping[target] = alias
                break
    chat = next((k for k in CHAT_KEYS if k in keys), None)
    if chat and "prompt" not in overrides and ("prompt" not in mapping or "response" not in mapping):
        mapping["chat"] = chat
    return mapping


def _text(value: Any, field_name: str, origin: Origin, *, required: bool) -> str | None:
    if value is None:
        if required:
            raise _err(origin, f"field {field_name!r} is missing or null")
        return None
    if isinstance(value, str):
        if required and not value.strip():
            raise _err(origin, f"field {field_name!r} is empty")
        return value
    raise _err(origin, f"field {field_name!r} must be a string, got {type(value).__name__}")


def _scalar_text(value: Any) -> str | None:
    """Answers may be numbers or lists in the wild; keep them as text."""
    if value is None:
        return None
    if isinstance(value, dict) and "ground_truth" in value:  # verl reward_model
        return _scalar_text(value["ground_truth"])
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float, bool)):
        return str(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def normalize_tests(value: Any) -> str | None:
    """Code tests as the JSON text the verifiers take: {"kind": "stdio", "cases": [...]} or
    {"kind": "assert", "test": code, "entry_point": name|None, "setup"?}. MBPP's {"kind": "assert_list",
    "test_list", "setup"} becomes one assert script; an empty `setup` is dropped, so the verifier's own
    default applies (the LeetCode prelude for `Solution()` tests). Unknown shapes are kept as JSON. The one
    normaliser of tests: ingest and evaluation both call it."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            return normalize_tests(json.loads(value))
        except json.JSONDecodeError:
            return json.dumps({"kind": "assert", "test": value, "entry_point": None}) if "assert" in value else value
    if isinstance(value, dict):
        if value.get("kind") == "assert_list":  # MBPP-style registry items: one assert script
            value = {"kind": "assert", "test": "\n".join(value.get("test_list") or []), "entry_point": None,
                     **({"setup": value["setup"]} if value.get("setup") else {})}
        if value.get("kind") == "assert" and "setup" in value and not value["setup"]:
            value = {k: v for k, v in value.items() if k != "setup"}  # no setup: the verifier's default applies
        if "kind" in value:
            return json.dumps(value, ensure_ascii=False)
        ins, outs = value.get("inputs"), value.get("outputs")
        if isinstance(ins, list) and isinstance(outs, list) and len(ins) == len(outs) and not value.get("fn_name"):
            cases = [{"input": _as_text(i), "output": _as_text(o)} for i, o in zip(ins, outs, strict=True)]
            return json.dumps({"kind": "stdio", "cases": cases}, ensure_ascii=False)
    if isinstance(value, list) and value:
        if all(isinstance(t, dict) and "input" in t and "output" in t for t in value):
            cases = [{"input": _as_text(t["input"]), "output": _as_text(t["output"])} for t in value]
            return json.dumps({"kind": "stdio", "cases": cases}, ensure_ascii=False)
        if all(isinstance(t, str) for t in value) and any("assert" in t for t in value):  # MBPP test_list
            return json.dumps({"kind": "assert", "test": "\n".join(value), "entry_point": None})
    return json.dumps(value, ensure_ascii=False, default=str)


def _as_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        return "\n".join(str(x) for x in v)
    return str(v)


def _chat_to_pair(msgs: Any, origin: Origin, key: str) -> tuple[str, str | None, str | None]:
    """(prompt, response, system) from a chat list: the last assistant turn is the response."""
    if not isinstance(msgs, list) or not msgs:
        raise _err(origin, f"field {key!r} must be a non-empty list of messages")
    turns = []
    for m in msgs:
        if not isinstance(m, dict):
            raise _err(origin, f"field {key!r} holds a non-object message")
        role = str(m.get("role", m.get("from", ""))).lower()
        content = m.get("content", m.get("value"))
        if not isinstance(content, str):
            raise _err(origin, f"field {key!r}: message content must be a string")
        role = {"human": "user", "gpt": "assistant", "model": "assistant", "bot": "assistant"}.get(role, role)
        turns.append((role, content))
    system = "\n".join(c for r, c in turns if r == "system") or None
    last_asst = max((i for i, (r, _) in enumerate(turns) if r == "assistant"), default=None)
    before = turns if last_asst is None else turns[:last_asst]
    users = [c for r, c in before if r == "user"]
    if not users:
        raise _err(origin, f"field {key!r} has no user turn")
    prompt = users[-1] if len(users) == 1 else "\n\n".join(users)
    response = None if last_asst is None else turns[last_asst][1]
    return prompt, response, system


def _parse_meta(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.strip():
        for parse in (json.loads, ast.literal_eval):
            try:
                out = parse(value)
                return out if isinstance(out, dict) else {"meta": out}
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
        return {"meta": value}
    return {} if value is None else {"meta": value}


def to_row(rec: dict[str, Any], mapping: dict[str, str], spec: InputSpec, origin: Origin) -> dict[str, Any]:
    """Turn one raw record into a schema row; raises InputError naming file, line and field."""
    used = set(mapping.values())
    system = None
    if "chat" in mapping and ("prompt" not in mapping or "response" not in mapping):
        prompt, response, system = _chat_to_pair(rec.get(mapping["chat"]), origin, mapping["chat"])
        if "prompt" in mapping and rec.get(mapping["prompt"]) is not None:
            prompt = _text(rec.get(mapping["prompt"]), mapping["prompt"], origin, required=True)
    else:
        if "prompt" not in mapping:
            raise _err(origin, f"no prompt field (looked for {', '.join(ALIASES['prompt'])}, "
                             f"{', '.join(CHAT_KEYS)}; use --map prompt=FIELD)")
        value = rec.get(mapping["prompt"])
        if isinstance(value, list):  # verl-style prompt as a chat list
            prompt, _, system = _chat_to_pair(value, origin, mapping["prompt"])
        else:
            prompt = _text(value, mapping["prompt"], origin, required=True)
        response = _text(rec.get(mapping["response"]), mapping["response"], origin, required=False) \
            if "response" in mapping else None
    if response is not None and not response.strip():
        response = None
    answer = _scalar_text(rec.get(mapping["answer"])) if "answer" in mapping else None
    tests = normalize_tests(rec.get(mapping["tests"])) if "tests" in mapping else None
    source = spec.source_name or (str(rec[mapping["source"]]) if rec.get(mapping.get("source", "")) else spec.default_source)
    domain_v = spec.domain or (rec.get(mapping["domain"]) if "domain" in mapping else None)
    domain = normalize_domain(domain_v) if domain_v else ("code" if tests else "math" if answer else "other")
    meta: dict[str, Any] = {}
    for k, v in rec.items():
        if k in used or k in CHAT_KEYS:
            continue
        if k == "meta":
            meta.update(_parse_meta(v))
        else:
            meta[k] = v
    if tests is None and isinstance(meta.get("tests"), (str, list, dict)):  # e.g. DeepCoder keeps tests in meta
        tests = normalize_tests(meta.pop("tests"))
    if system:
        meta["system"] = system
    meta["_origin"] = origin.as_meta()
    given_id = rec.get(mapping["id"]) if "id" in mapping else None
    row_id = str(given_id) if given_id not in (None, "") else make_id(source, prompt, response)
    row = {"id": row_id, "source": source, "domain": domain, "prompt": prompt, "response": response,
           "answer": answer, "tests": tests, "meta": dump_meta(meta)}
    _check_unicode(row, mapping, origin)
    return row


def _check_unicode(row: dict[str, Any], mapping: dict[str, str], origin: Origin) -> None:
    """Text that cannot be written as UTF-8 (a lone surrogate from a JSON `\\ud800` escape) is bad input:
    raise naming the field, instead of failing later when the shard is written."""
    for name, value in row.items():
        if isinstance(value, str) and not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as e:
                field = mapping.get(name, name)
                raise _err(origin, f"field {field!r}: invalid Unicode (lone surrogate at character {e.start})") from e


def read_rows(spec: InputSpec, strict: bool = False) -> Iterator[dict[str, Any] | Quarantined]:
    """Rows of one input in file order; bad records come back as Quarantined (or raise if strict)."""
    mapping: dict[str, str] | None = None
    logged: set[tuple] = set()
    for origin, rec in iter_raw(spec):
        if isinstance(rec, Quarantined):
            rec.source = spec.source_name or spec.default_source
            if strict:
                raise InputError(f"{origin}: {rec.reason}")
            yield rec
            continue
        # re-detect when a mapped field (incl. the chat list) is absent: files or rows of another shape
        unmapped = mapping is not None and "prompt" not in mapping and "chat" not in mapping
        if mapping is None or (spec.mapping == {} and (unmapped or not set(mapping.values()) <= set(rec))):
            new = detect_mapping(list(rec), spec.mapping)
            key = tuple(sorted(new.items()))
            if key not in logged:
                logged.add(key)
                log.info("%s: field mapping %s", spec.path, ", ".join(f"{k}<-{v}" for k, v in new.items()))
            mapping = new
        try:
            yield to_row(rec, mapping, spec, origin)
        except InputError as e:
            if strict:
                raise
            yield Quarantined(origin, f"malformed: {e.what}", rec, spec.source_name or spec.default_source)
