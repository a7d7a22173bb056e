"""Load verl-style RL prompt shards (written by the curation `mix` stage) as a TRL-ready `datasets.Dataset`.

Input rows: data_source, prompt (list of {role, content}), ability, reward_model {style, ground_truth},
extra_info {id, source, tests, answer, ...}. Output columns: prompt, ability, ground_truth, tests, data_source, id
(TRL passes every column except `prompt` to the reward functions).

Code tests are read from `extra_info.tests` (cotforge's mix shards) or, without it, from
`reward_model.ground_truth` (verl rows as published: Klear-Reasoner's `{"inputs": [...], "outputs": [...]}`,
code-r1's `{"functional": ...}`, APPS call-based `fn_name` rows...), converted by the one normaliser the
curation side uses (`curate.io.codetests.normalize_tests`) and validated with the verifier's `parse_tests` here,
at load: a row whose tests cannot be parsed is an error naming the file, row and field, never a None reward at
training time.
"""

from __future__ import annotations

import glob
import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

class RLDataError(ValueError):
    """A row of the RL shards cannot be trained on; the message names the file, row and field."""


RL_COLUMNS = ("prompt", "ability", "ground_truth", "tests", "data_source", "id")


def resolve_parquet(paths: list[str] | str) -> list[str]:
    """Files, folders (all *.parquet below, sorted) or globs -> sorted parquet paths; error when none."""
    paths = [paths] if isinstance(paths, str) else list(paths)
    out: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out.extend(sorted(str(f) for f in path.rglob("*.parquet")))
        elif any(ch in p for ch in "*?["):
            out.extend(sorted(glob.glob(p, recursive=True)))
        elif path.exists():
            out.append(str(path))
        else:
            raise FileNotFoundError(f"RL data path not found: {p}")
    if not out:
        raise FileNotFoundError(f"no parquet files under {paths}")
    return out


def to_trl_row(row: dict[str, Any], where: str) -> dict[str, Any]:
    """One verl row -> the flat TRL row; `where` (file:row) names the culprit in errors."""
    prompt = row.get("prompt")
    if not isinstance(prompt, list) or not prompt or not all(isinstance(m, dict) and m.get("role")
                                                             and isinstance(m.get("content"), str) for m in prompt):
        raise RLDataError(f"{where}: field 'prompt' must be a non-empty list of {{role, content}} messages")
    ability = row.get("ability")
    if not isinstance(ability, str) or not ability:
        raise RLDataError(f"{where}: field 'ability' must be a non-empty string")
    rm = row.get("reward_model") or {}
    extra = row.get("extra_info") or {}
    truth = rm.get("ground_truth") if isinstance(rm, dict) else None
    if truth is None:
        truth = extra.get("answer")
    if ability == "math" and not truth:
        raise RLDataError(f"{where}: math row without reward_model.ground_truth")
    tests = code_tests(extra, truth, where) if ability == "code" else ""
    if ability == "code":
        truth = None  # the tests are the ground truth of a code row
    elif not isinstance(truth, str) and truth is not None:
        truth = truth if not isinstance(truth, list | tuple) or len(truth) != 1 else truth[0]
    return {"prompt": [{"role": m["role"], "content": m["content"]} for m in prompt], "ability": ability,
            "ground_truth": "" if truth is None else str(truth), "tests": tests,
            "data_source": str(row.get("data_source") or ""), "id": str(extra.get("id") or where)}


def code_tests(extra: dict[str, Any], truth: Any, where: str) -> str:
    """The tests of a code row as the verifier's JSON: `extra_info.tests`, else `reward_model.ground_truth`, through
    `normalize_tests`, then checked with `parse_tests`; RLDataError naming `where` and the field otherwise."""
    from cotforge.curate.io.codetests import normalize_tests
    from cotforge.curate.verify.code import TestsError, parse_tests

    given = extra.get("tests") if isinstance(extra, dict) else None
    field, value = ("extra_info.tests", given) if given not in (None, "") else ("reward_model.ground_truth", truth)
    if value in (None, "") or (isinstance(value, list | dict) and not value):
        raise RLDataError(f"{where}: code row without tests (extra_info.tests or reward_model.ground_truth)")
    decoded = _json_or_none(value) if isinstance(value, str) else value
    if isinstance(decoded, dict) and ("inputs_file" in decoded or "outputs_file" in decoded):
        raise RLDataError(f"{where}: field {field!r}: tests in external files (inputs_file/outputs_file) are not "
                         "supported; inline them as inputs/outputs lists")
    starter = extra.get("starter_code") if isinstance(extra, dict) else None
    tests = normalize_tests(value, starter if isinstance(starter, str) else None)
    try:
        parse_tests(tests or "")
    except TestsError as e:
        raise RLDataError(f"{where}: field {field!r}: {e} (value {str(value)[:120]!r})") from e
    return tests or ""


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def load_rl_dataset(paths: list[str] | str, *, limit: int | None = None, abilities: list[str] | None = None):
    """Read verl-style parquet shards into a `datasets.Dataset` with RL_COLUMNS (deterministic order). Every row
    is checked (RLDataError on the first bad one); with `abilities`, only rows of those abilities are kept (the
    others counted in the log); an empty result is an error naming the files."""
    import pyarrow.parquet as pq
    from datasets import Dataset

    files = resolve_parquet(paths)
    rows: list[dict[str, Any]] = []
    skipped: dict[str, int] = {}
    for f in files:
        for i, row in enumerate(pq.read_table(f).to_pylist()):
            out = to_trl_row(row, f"{f}:{i}")
            if abilities is not None and out["ability"] not in abilities:
                skipped[out["ability"]] = skipped.get(out["ability"], 0) + 1
                continue
            rows.append(out)
            if limit is not None and len(rows) >= limit:
                break
        if limit is not None and len(rows) >= limit:
            break
    if abilities is not None and not rows:
        raise RLDataError(f"{', '.join(files[:3])}{'...' if len(files) > 3 else ''}: no rows of abilities "
                          f"{list(abilities)} (found {skipped or 'none'})")
    log.info("loaded %d RL prompts%s", len(rows),
             f" of abilities {list(abilities)}; skipped {skipped}" if abilities is not None else "")
    return Dataset.from_list(rows)
