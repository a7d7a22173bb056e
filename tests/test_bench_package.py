"""bench/ is a package of measurements run as modules: tests run it as a command and never import it, no bench
module edits sys.path to reach a sibling, and every frozen labelled set rebuilds to its recorded digest."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("COTFORGE_SHARED_DATA", REPO.parent / "shared" / "data"))


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    return names + [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and not n.level]


def test_no_test_imports_a_bench_module():
    offenders = [f"{p.relative_to(REPO)}: {m}" for p in sorted((REPO / "tests").rglob("*.py"))
                 for m in _imports(p) if m == "bench" or m.startswith("bench.")]
    offenders += [str(p.relative_to(REPO)) for p in sorted((REPO / "tests").rglob("*.py"))  # loading by path
                  if p != Path(__file__).resolve() and "spec_from_file_location" in (t := p.read_text(encoding="utf-8"))
                  and '"bench"' in t]
    assert not offenders, offenders


def test_bench_modules_import_siblings_as_a_package_without_sys_path_edits():
    bad = []
    for p in sorted((REPO / "bench").rglob("*.py")):
        text = p.read_text(encoding="utf-8")
        if "sys.path.insert(0, str(Path(__file__)" in text or "sys.path.insert(0, str(REPO))" in text:
            bad.append(f"{p.relative_to(REPO)}: sys.path edit")
        siblings = {q.stem for q in p.parent.glob("*.py")} - {"__init__"}
        bad += [f"{p.relative_to(REPO)}: bare import {m}" for m in _imports(p) if m.split(".")[0] in siblings]
    assert not bad, bad
    for folder in [REPO / "bench", *[d for d in (REPO / "bench").iterdir() if d.is_dir() and any(d.glob("*.py"))]]:
        assert (folder / "__init__.py").exists(), f"{folder.relative_to(REPO)} has modules but no __init__.py"


def test_frozen_cli_names_every_set_in_help():
    run = subprocess.run([sys.executable, "-m", "bench.frozen", "--help"], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    for name in ("dedup_heldout", "dedup_fresh", "dedup_fresh2", "dedup_code", "decontam_first", "decontam_forms",
                 "decontam_forms2", "decontam_forms3"):
        assert name in run.stdout


@pytest.mark.slow
def test_every_frozen_set_rebuilds_to_its_recorded_digest():
    """The recorded digests (bench/records) were written before the rules were tuned on the sets; a builder
    change that alters a set makes it no longer held out, so this must fail loudly."""
    pytest.importorskip("unicodeit")
    pytest.importorskip("pylatexenc")
    if not (SHARED / "MANIFEST.md").exists():
        pytest.skip(f"needs the shared real data ({SHARED})")
    run = subprocess.run([sys.executable, "-m", "bench.frozen", "--check", "--shared", str(SHARED)], cwd=REPO,
                         capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stderr[-4000:]
    assert run.stderr.count("MATCHES") == 8, run.stderr[-4000:]
