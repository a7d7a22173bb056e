"""Load verl-style RL prompt shards (written by the curation `mix` stage) as a TRL-ready `datasets.Dataset`.

Input rows: data_source, prompt (list of {role, content}), ability, reward_model {style, ground_truth},
extra_info {id, source, tests, answer, ...}. Output columns: prompt, ability, ground_truth, tests, data_source, id
(TRL passes every column except `prompt` to the reward functions).
"""

from __future__ import annotations

import glob
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

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
        raise ValueError(f"{where}: field 'prompt' must be a non-empty list of {{role, content}} messages")
    ability = row.get("ability")
    if not isinstance(ability, str) or not ability:
        raise ValueError(f"{where}: field 'ability' must be a non-empty string")
    rm = row.get("reward_model") or {}
    extra = row.get("extra_info") or {}
    truth = rm.get("ground_truth") if isinstance(rm, dict) else None
    if truth is None:
        truth = extra.get("answer")
    tests = extra.get("tests") if isinstance(extra, dict) else None
    if ability == "math" and not truth:
        raise ValueError(f"{where}: math row without reward_model.ground_truth")
    if ability == "code" and not (tests or truth):
        raise ValueError(f"{where}: code row without extra_info.tests")
    return {"prompt": [{"role": m["role"], "content": m["content"]} for m in prompt], "ability": ability,
            "ground_truth": "" if truth is None else str(truth), "tests": tests or (truth if ability == "code" else ""),
            "data_source": str(row.get("data_source") or ""), "id": str(extra.get("id") or where)}


def load_rl_dataset(paths: list[str] | str, *, limit: int | None = None):
    """Read verl-style parquet shards into a `datasets.Dataset` with RL_COLUMNS (deterministic order)."""
    import pyarrow.parquet as pq
    from datasets import Dataset

    rows: list[dict[str, Any]] = []
    for f in resolve_parquet(paths):
        for i, row in enumerate(pq.read_table(f).to_pylist()):
            rows.append(to_trl_row(row, f"{f}:{i}"))
            if limit is not None and len(rows) >= limit:
                break
        if limit is not None and len(rows) >= limit:
            break
    log.info("loaded %d RL prompts", len(rows))
    return Dataset.from_list(rows)
