"""Which run a stage folder belongs to, so that `cotforge curate mix` run stage by stage finds the history
of its run (the card's per-stage tables and the contamination section) and refuses folders of different runs.

Each `cotforge curate <stage>` writes OUT/lineage.json: the stage, a run id (the one of its input stage
folders, or a new one when it read raw files) and its input stage folders. A folder of a `cotforge run`
recipe run has no lineage.json; its run folder's manifest.json lists the stages instead.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

LINEAGE = "lineage.json"


class LineageError(ValueError):
    """Stage folders that do not belong to one run."""


def is_stage_folder(path: str | Path) -> bool:
    p = Path(path)
    return p.is_dir() and (p / "stats.json").is_file()


def read_lineage(folder: str | Path) -> dict[str, Any] | None:
    p = Path(folder) / LINEAGE
    try:
        return json.loads(p.read_text(encoding="utf-8")) if p.is_file() else None
    except (OSError, ValueError):
        return None


def _recipe_run(folder: Path) -> str | None:
    """The run folder of a recipe run's stage folder (its parent holds manifest.json), else None."""
    manifest = folder.parent / "manifest.json"
    return str(folder.parent) if manifest.is_file() else None


def run_of(folder: str | Path) -> str | None:
    """The run id of a stage folder: its lineage's, or its recipe run folder's; None when unknown."""
    lin = read_lineage(folder)
    if lin and lin.get("run"):
        return str(lin["run"])
    return _recipe_run(Path(folder).resolve())


def _finished(folder: Path) -> str:
    """When a recipe stage finished (its _SUCCESS.json; ISO time sorts as text), else the stats file's mtime."""
    try:
        return str(json.loads((folder / "_SUCCESS.json").read_text())["finished"])
    except (OSError, ValueError, KeyError):
        return f"{(folder / 'stats.json').stat().st_mtime:020.6f}"


def _finished_before(run: Path, folder: Path) -> list[Path]:
    """The curation stage folders of a recipe run that finished before `folder`, in the order they finished."""
    mine = _finished(folder)
    earlier = [p for p in run.iterdir() if p != folder and is_stage_folder(p) and _finished(p) < mine]
    return sorted(earlier, key=_finished)


def upstream(inputs: list[str]) -> list[Path]:
    """The stage folders among a command's inputs (absolute)."""
    return [Path(i).resolve() for i in inputs if is_stage_folder(i)]


def check_one_run(folders: list[Path], what: str) -> str | None:
    """The one run id of `folders` (None when none is known); folders of different runs are a LineageError."""
    runs: dict[str, list[str]] = {}
    for f in folders:
        r = run_of(f)
        if r is not None:
            runs.setdefault(r, []).append(str(f))
    if len(runs) > 1:
        listing = "; ".join(f"run {r}: {', '.join(fs)}" for r, fs in runs.items())
        raise LineageError(f"{what}: these stage folders come from different runs ({listing}); pass folders of one "
                           "run, or name the history explicitly with --history")
    return next(iter(runs), None)


def write_lineage(out: str | Path, stage: str, inputs: list[str]) -> dict[str, Any]:
    """Record OUT/lineage.json for a finished stage (run id inherited from its input stage folders)."""
    if "://" in str(out) or not Path(out).is_dir():  # a remote stage folder: no lineage (mix needs --history)
        return {}
    ups = upstream(inputs)
    runs = {r for r in (run_of(u) for u in ups) if r is not None}
    run = next(iter(runs)) if len(runs) == 1 else uuid.uuid4().hex[:12]
    record = {"stage": stage, "run": run, "inputs": [str(u) for u in ups]}
    (Path(out) / LINEAGE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record


def history(inputs: list[str]) -> dict[str, str]:
    """The earlier stage folders of the run the input stage folders belong to, upstream first:
    {stage name: folder}. Follows lineage.json links; for a recipe run, the stages its manifest lists."""
    ups = upstream(inputs)
    check_one_run(ups, "inputs")
    chain: list[Path] = []
    seen: set[Path] = set()

    def visit(folder: Path) -> None:
        if folder in seen:
            return
        seen.add(folder)
        lin = read_lineage(folder)
        parents = [Path(p) for p in (lin or {}).get("inputs", []) if is_stage_folder(p)]
        if lin is None and (run := _recipe_run(folder)) is not None:
            for p in _finished_before(Path(run), folder):
                if p not in seen:
                    seen.add(p)
                    chain.append(p)
        else:
            for p in parents:
                visit(p)
        chain.append(folder)

    for u in ups:
        visit(u)
    out: dict[str, str] = {}
    for folder in chain:
        stats = json.loads((folder / "stats.json").read_text())
        out.setdefault(str(stats.get("stage") or folder.name), str(folder))
    return out
