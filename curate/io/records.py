"""What readers hand on: errors naming the place, where a record came from, and quarantined records."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cotforge.curate.core.schema import dump_meta, make_id

# Fields a quarantined record's prompt is taken from (to show it in removed/), in order.
PROMPT_KEYS = ("prompt", "problem", "question", "instruction", "query", "input_text")


class InputError(Exception):
    """A bad input: names the file, line/row and field. `what` is the message without the place."""

    def __init__(self, message: str, what: str | None = None):
        super().__init__(message)
        self.what = what or message


@dataclass
class Origin:
    """Where a record came from: file (as given) and 1-based line (JSONL/CSV), 0-based row index (Parquet,
    Arrow, JSON arrays, datasets) or compressed byte offset (`unit="byte"`, a broken stream)."""

    file: str
    index: int
    unit: str = "line"

    def __str__(self) -> str:
        return f"{self.file}, {self.unit} {self.index}"

    def as_meta(self) -> dict[str, Any]:
        return {"file": self.file, self.unit: self.index}


def err(origin: Origin, what: str) -> InputError:
    return InputError(f"{origin}: {what}", what)


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
            for k in PROMPT_KEYS:
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
