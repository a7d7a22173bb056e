"""The one row schema every curation stage reads and writes.

A row is one (problem, response) pair. Later stages add columns (``correct``, ``difficulty``...)
but never drop these eight.
"""

from __future__ import annotations

import ast
import hashlib
import json
from typing import Any

import pyarrow as pa

DOMAINS = ("math", "code", "science", "other")

CORE_FIELDS = ("id", "source", "domain", "prompt", "response", "answer", "tests", "meta")

SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("domain", pa.string(), nullable=False),
        pa.field("prompt", pa.string(), nullable=False),
        pa.field("response", pa.string()),
        pa.field("answer", pa.string()),
        pa.field("tests", pa.string()),
        pa.field("meta", pa.string()),
    ]
)

# Columns every `removed/` shard carries on top of the row's own columns.
REMOVED_FIELDS = [
    pa.field("reason", pa.string(), nullable=False),
    pa.field("duplicate_of", pa.string()),
]


def removed_schema(base: pa.Schema = SCHEMA) -> pa.Schema:
    """Schema of `removed/` shards: the input schema plus `reason` and `duplicate_of`."""
    out = base
    for f in REMOVED_FIELDS:
        if out.get_field_index(f.name) < 0:
            out = out.append(f)
    return out


def make_id(source: str, prompt: str, response: str | None) -> str:
    """Stable row id: a hash of source + prompt + response (used when the input has no id)."""
    h = hashlib.blake2b(digest_size=12)
    for part in (source, prompt, response or ""):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


def normalize_domain(value: Any) -> str:
    """Map free-form domain labels ("general/math", "coding", "physics") onto DOMAINS."""
    if value is None:
        return "other"
    v = str(value).strip().lower()
    if v in DOMAINS:
        return v
    for key, dom in (("math", "math"), ("code", "code"), ("coding", "code"), ("program", "code"),
                     ("science", "science"), ("physics", "science"), ("chem", "science"),
                     ("bio", "science")):
        if key in v:
            return dom
    return "other"


def dump_meta(meta: dict[str, Any]) -> str:
    """Serialise `meta` deterministically (sorted keys, non-JSON values stringified)."""
    return json.dumps(meta, sort_keys=True, ensure_ascii=False, default=str)


def as_bool(value: Any) -> bool | None:
    """A correctness label (bool, "True"/"false", "Yes"/"No", "correct"/"incorrect", 1/0) as bool; anything
    else None (unverified). The one reader of shipped labels: ingest presets and the profile stage call it."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("true", "yes", "1", "correct"):
            return True
        if v in ("false", "no", "0", "incorrect"):
            return False
    return None


def load_meta(value: str | dict[str, Any] | None) -> dict[str, Any]:
    """A JSON-object column (`meta`, and `tests` specs) as a dict: a dict passes through; text is read as
    JSON, else as a Python literal (some real sources store `str(dict)`); anything else gives {}.
    The one parser of these columns: curation, verification, training and evaluation all call it."""
    if isinstance(value, dict):
        return value
    if not value or not isinstance(value, str):
        return {}
    for parse in (json.loads, ast.literal_eval):
        try:
            parsed = parse(value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        return parsed if isinstance(parsed, dict) else {}
    return {}


def chat_messages(row: dict[str, Any], system_prompt: str | None = None) -> list[dict[str, str]]:
    """A row as a chat list: a system turn (meta["system"], else `system_prompt`), the user prompt and,
    when there is one, the assistant response. The mix's `messages` column and the SFT trainer's
    rendering of rows without one both come from here."""
    system = load_meta(row.get("meta")).get("system")
    system = system if isinstance(system, str) else system_prompt
    msgs = [{"role": "system", "content": system}] if system is not None else []
    msgs.append({"role": "user", "content": row["prompt"]})
    if row.get("response"):
        msgs.append({"role": "assistant", "content": row["response"]})
    return msgs


def seeded_hash(seed: int, row_id: str) -> int:
    """Order-independent pseudo-random 64-bit value of a row (same seed + id -> same value): the mix's draw
    order and the policy's per-problem cap both sort by it."""
    return int.from_bytes(hashlib.blake2b(f"{seed}\x00{row_id}".encode(), digest_size=8).digest(), "big")
