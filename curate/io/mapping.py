"""Field detection and row mapping for sources without a preset.

Field names are auto-detected from the aliases below (the chosen mapping is logged) and can be
overridden (`mapping={"prompt": "problem"}`). Chat lists (``messages`` / ``conversations``) become
prompt/response; every unmapped field goes to `meta`.
"""

from __future__ import annotations

import ast
import json
from typing import TYPE_CHECKING, Any

from cotforge.curate.core.schema import dump_meta, make_id, normalize_domain
from cotforge.curate.io.codetests import normalize_tests
from cotforge.curate.io.records import PROMPT_KEYS, InputError, Origin, err

if TYPE_CHECKING:  # to_row reads an InputSpec's source and domain options
    from cotforge.curate.io.spec import InputSpec

ALIASES: dict[str, tuple[str, ...]] = {
    "id": ("id", "uid", "unique_id", "task_id", "problem_id", "question_id"),
    "prompt": PROMPT_KEYS,
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
ROLE_NAMES = {"human": "user", "gpt": "assistant", "model": "assistant", "bot": "assistant"}


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


def text_field(value: Any, field_name: str, origin: Origin, *, required: bool) -> str | None:
    """A string field; None/empty when required, or a non-string, is an InputError naming the field."""
    if value is None:
        if required:
            raise err(origin, f"field {field_name!r} is missing or null")
        return None
    if isinstance(value, str):
        if required and not value.strip():
            raise err(origin, f"field {field_name!r} is empty")
        return value
    raise err(origin, f"field {field_name!r} must be a string, got {type(value).__name__}")


def scalar_text(value: Any) -> str | None:
    """Answers may be numbers or lists in the wild; keep them as text."""
    if value is None:
        return None
    if isinstance(value, dict) and "ground_truth" in value:  # verl reward_model
        return scalar_text(value["ground_truth"])
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float, bool)):
        return str(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def chat_turns(msgs: Any, origin: Origin, key: str) -> list[tuple[str, str, dict]]:
    """(role, content, message) per turn of a chat list, roles normalised (human -> user, gpt -> assistant)."""
    if not isinstance(msgs, list) or not msgs:
        raise err(origin, f"field {key!r} must be a non-empty list of messages")
    turns = []
    for m in msgs:
        if not isinstance(m, dict):
            raise err(origin, f"field {key!r} holds a non-object message")
        role = str(m.get("role", m.get("from", ""))).lower()
        content = m.get("content", m.get("value"))
        if not isinstance(content, str):
            raise err(origin, f"field {key!r}: message content must be a string")
        turns.append((ROLE_NAMES.get(role, role), content, m))
    return turns


def chat_to_pair(msgs: Any, origin: Origin, key: str) -> tuple[str, str | None, str | None]:
    """(prompt, response, system) from a chat list: the last assistant turn is the response."""
    turns = chat_turns(msgs, origin, key)
    system = "\n".join(c for r, c, _ in turns if r == "system") or None
    last_asst = max((i for i, (r, _, _) in enumerate(turns) if r == "assistant"), default=None)
    before = turns if last_asst is None else turns[:last_asst]
    users = [c for r, c, _ in before if r == "user"]
    if not users:
        raise err(origin, f"field {key!r} has no user turn")
    prompt = users[-1] if len(users) == 1 else "\n\n".join(users)
    response = None if last_asst is None else turns[last_asst][1]
    return prompt, response, system


def parse_meta(value: Any) -> dict[str, Any]:
    """A raw input's `meta` column as a dict (JSON text or a Python repr, as some datasets ship it). Unlike
    `schema.load_meta` (which reads cotforge's own meta column and drops what is not an object), a value that
    is not an object is kept under "meta": ingest loses nothing of the input."""
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
        prompt, response, system = chat_to_pair(rec.get(mapping["chat"]), origin, mapping["chat"])
        if "prompt" in mapping and rec.get(mapping["prompt"]) is not None:
            prompt = text_field(rec.get(mapping["prompt"]), mapping["prompt"], origin, required=True)
    else:
        if "prompt" not in mapping:
            raise err(origin, f"no prompt field among the record's columns ({', '.join(map(str, rec)) or 'none'}; "
                              f"looked for {', '.join(ALIASES['prompt'])}, {', '.join(CHAT_KEYS)}; "
                              "use --map prompt=COLUMN)")
        value = rec.get(mapping["prompt"])
        if isinstance(value, list):  # verl-style prompt as a chat list
            prompt, _, system = chat_to_pair(value, origin, mapping["prompt"])
        else:
            prompt = text_field(value, mapping["prompt"], origin, required=True)
        response = text_field(rec.get(mapping["response"]), mapping["response"], origin, required=False) \
            if "response" in mapping else None
    if response is not None and not response.strip():
        response = None
    answer = scalar_text(rec.get(mapping["answer"])) if "answer" in mapping else None
    tests = normalize_tests(rec.get(mapping["tests"])) if "tests" in mapping else None
    source = spec.source_name or (str(rec[mapping["source"]]) if rec.get(mapping.get("source", "")) else spec.default_source)
    domain_v = spec.domain or (rec.get(mapping["domain"]) if "domain" in mapping else None)
    domain = normalize_domain(domain_v) if domain_v else ("code" if tests else "math" if answer else "other")
    meta: dict[str, Any] = {}
    for k, v in rec.items():
        if k in used or k in CHAT_KEYS:
            continue
        if k == "meta":
            meta.update(parse_meta(v))
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
    check_unicode(row, mapping, origin)
    return row


def check_unicode(row: dict[str, Any], mapping: dict[str, str], origin: Origin) -> None:
    """Text that cannot be written as UTF-8 (a lone surrogate from a JSON `\\ud800` escape) is bad input:
    raise naming the field, instead of failing later when the shard is written."""
    for name, value in row.items():
        if isinstance(value, str) and not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as e:
                field = mapping.get(name, name)
                raise err(origin, f"field {field!r}: invalid Unicode (lone surrogate at character {e.start})") from e


__all__ = ["ALIASES", "CHAT_KEYS", "TARGETS", "InputError", "chat_to_pair", "chat_turns", "check_unicode",
           "detect_mapping", "parse_meta", "scalar_text", "text_field", "to_row"]
