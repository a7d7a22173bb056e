"""Shared cases of the engine tests (Slurm, Ray): a small two-stage recipe on generated data, and byte
comparison of published stage folders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cotforge.pipelines.config import Recipe, recipe_from_dict
from cotforge.pipelines.demo_data import DemoDataConfig, generate_demo_data

STAGES = ("decontaminate", "dedup", "verify")


def make_data(root: Path) -> Path:
    """Generated sources with planted duplicates, benchmark leaks and malformed lines (deterministic)."""
    data = root / "data"
    if not (data / "truth.json").exists():
        generate_demo_data(data, DemoDataConfig(n_longcot_math=40, n_shortcot_math=30, n_code=12, n_benchmark=8,
                                                exact_dups=4, near_dups=3, humaneval_leaks=0, bench_leaks=3,
                                                malformed=2))
    return data


def recipe(data: Path, executor: dict[str, Any]) -> Recipe:
    """ingest -> decontaminate -> dedup -> verify over the generated sources, with the given `executor:` section."""
    return recipe_from_dict({
        "name": "engines",
        "sources": [
            {"name": "longcot_math", "path": str(data / "longcot_math.jsonl"), "domain": "math"},
            {"name": "shortcot_math", "path": str(data / "shortcot_math.jsonl"), "domain": "math",
             "mapping": {"prompt": "question", "response": "solution", "answer": "final_answer"}},
            {"name": "code_tests", "path": str(data / "code_tests.jsonl"), "domain": "code"},
        ],
        "benchmarks": {"names": ["demo_olympiad"], "dir": str(data / "benchmarks"),
                       "registry": str(data / "benchmarks" / "registry.yaml")},
        "executor": executor,
        "stages": {"ingest": {}, "decontaminate": {"ngram": 8, "threshold": 0.5},
                   "dedup": {"source_priority": ["longcot_math", "code_tests", "shortcot_math"]},
                   "verify": {"verify_workers": 1}},
    }, base_dir=data.parent, path="<engines test recipe>")


def shard_bytes(stage_dir: Path) -> dict[str, bytes]:
    """Every published shard of a stage folder (kept/, removed/) by relative path."""
    return {str(p.relative_to(stage_dir)): p.read_bytes()
            for part in ("kept", "removed") for p in sorted((stage_dir / part).glob("*.parquet"))}


def counts(stage_dir: Path) -> dict[str, Any]:
    stats = json.loads((stage_dir / "stats.json").read_text())
    return {k: stats[k] for k in ("rows_in", "kept", "removed", "removed_by_reason", "per_source")}


def assert_same_outputs(a: Path, b: Path, stages: tuple[str, ...] = STAGES) -> None:
    """Byte-identical shards and identical counts for every stage of two run folders."""
    for st in stages:
        sa, sb = shard_bytes(a / st), shard_bytes(b / st)
        assert sa, f"{st}: no shards published in {a}"
        assert sorted(sa) == sorted(sb), f"{st}: different shard files {sorted(sa)} vs {sorted(sb)}"
        for name in sa:
            assert sa[name] == sb[name], f"{st}/{name} differs between {a} and {b}"
        assert counts(a / st) == counts(b / st)
