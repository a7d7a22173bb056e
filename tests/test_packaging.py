"""One import package with one-way layers: the layering contract, the `-m` form beside a user's own
`train.py` and `pipelines/`, no bare top-level names, packaged recipes, and the built wheel running the demo
from an empty folder."""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from cotforge.pipelines.config import RecipeError, load_recipe, recipe_from_dict
from cotforge.pipelines.planning import plan

REPO = Path(__file__).resolve().parents[1]

# layer -> what its modules may not import (at module level or inside functions)
FORBIDDEN = {
    "curate": ("cotforge.train", "cotforge.pipelines", "click"),
    "train": ("cotforge.pipelines", "click"),
}


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
    return out


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layers_point_one_way(layer):
    """curate imports neither train nor pipelines (nor click); train imports curate only (nor click)."""
    bad = []
    for f in sorted((REPO / layer).rglob("*.py")):
        for name in _imports(f):
            if any(name == b or name.startswith(b + ".") for b in FORBIDDEN[layer]):
                bad.append(f"{f.relative_to(REPO)}: {name}")
    assert not bad, bad


def test_the_contract_check_sees_lazy_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def g():\n    from cotforge.pipelines.runner import plan\n    import click\n")
    assert {"cotforge.pipelines.runner", "click"} <= _imports(f)


def _run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, env={**os.environ, **env}, timeout=600)


def test_cli_and_module_form_beside_a_users_train_py_and_pipelines(tmp_path):
    """`accelerate launch -m cotforge.pipelines.cli ...` puts the working folder first on sys.path: a user's
    own `train.py` and `pipelines/` there must not shadow anything."""
    (tmp_path / "train.py").write_text("raise SystemExit('the user train.py was imported')\n")
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "__init__.py").write_text("raise SystemExit('the user pipelines/ was imported')\n")
    (tmp_path / "curate.py").write_text("raise SystemExit('the user curate.py was imported')\n")
    (tmp_path / "in.jsonl").write_text('{"problem": "What is 1 + 1?", "solution": "2"}\n')
    m = _run([sys.executable, "-m", "cotforge.pipelines.cli", "curate", "ingest", "in.jsonl", "-o", "out"], tmp_path)
    assert m.returncode == 0 and "1 rows in, 1 kept" in m.stdout, m.stderr
    cli = shutil.which("cotforge", path=str(Path(sys.executable).parent)) or "cotforge"
    c = _run([cli, "recipes"], tmp_path)
    assert c.returncode == 0 and "demo" in c.stdout, c.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["curate.py", "in.jsonl", "out", "pipelines", "train.py"]


def test_no_bare_top_level_packages(tmp_path):
    code = ("import importlib\nfor name in ('curate', 'train', 'pipelines'):\n"
            "    try:\n        importlib.import_module(name)\n    except ModuleNotFoundError:\n        continue\n"
            "    raise SystemExit(f'bare {name} importable')\n"
            "import cotforge.curate, cotforge.train, cotforge.pipelines\nprint('ok')\n")
    r = _run([sys.executable, "-c", code], tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_old_launch_line_names_the_new_module(tmp_path):
    data = {"name": "old", "stages": {"model": {}, "mix": {"input": str(tmp_path)}, "sft": {
        "launch": "accelerate launch -m pipelines.cli train sft --config {config}"}}}
    with pytest.raises(RecipeError, match=r"stages.sft.launch: `-m pipelines.cli` .*`-m cotforge.pipelines.cli`"):
        plan(recipe_from_dict(data, tmp_path, "old.yaml"))
    data["stages"]["sft"]["launch"] = "accelerate launch -m cotforge.pipelines.cli train sft --config {config}"
    assert [s.name for s in plan(recipe_from_dict(data, tmp_path, "old.yaml"))] == ["mix", "model", "sft"]


def test_packaged_recipes_by_name(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from cotforge.pipelines.cli.main import main

    monkeypatch.chdir(tmp_path)
    assert load_recipe("demo").path == str(REPO / "pipelines" / "demo.yaml")
    res = CliRunner().invoke(main, ["recipes"])
    assert res.exit_code == 0 and {"demo", "klear_math_code", "smollm2_cpu"} <= {
        line.split()[0] for line in res.output.splitlines() if line and not line.startswith(" ")}
    with pytest.raises(RecipeError, match="recipe file not found .*packaged recipes: demo"):
        load_recipe("nope")
    with pytest.raises(RecipeError, match="publish_cards: .*--publish-cards"):
        recipe_from_dict({"name": "x", "publish_cards": "../data_cards"})


def _snapshot(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("setuptools") is None, reason="building the wheel needs setuptools")
def test_built_wheel_runs_the_demo_from_an_empty_folder(tmp_path):
    """Build the wheel (from a copy of the sources, so the checkout gets no build/), check its only top-level
    name is `cotforge` and that it carries the recipes and accelerate configs, install it non-editable
    (--no-deps, on top of this environment's packages), and run `cotforge run demo --profile small` from an
    empty folder: the installed package is what runs, and nothing is written outside the run folder."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "curate", "train", "pipelines"):
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(src),
                    "-w", str(tmp_path / "dist")], check=True, cwd=src, timeout=600)
    wheel = next((tmp_path / "dist").glob("cotforge-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"cotforge", wheel.name.split("-py")[0] + ".dist-info"}
    assert {"cotforge/pipelines/demo.yaml", "cotforge/pipelines/accelerate/fsdp2.yaml",
            "cotforge/pipelines/accelerate/deepspeed_zero3.yaml", "cotforge/curate/dedup/wordnet_synonyms.txt.gz"} <= set(names)
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, timeout=600)
    before = _snapshot(site)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {"PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    where = _run([sys.executable, "-c", "import cotforge.pipelines.cli.main as m; print(m.__file__)"], empty, **env)
    assert where.stdout.strip() == str(site / "cotforge" / "pipelines" / "cli" / "main.py"), where.stderr
    r = _run([str(site / "bin" / "cotforge"), "run", "demo", "--profile", "small"], empty, **env)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    runs = list((empty / "runs").iterdir())
    assert [p.name for p in empty.iterdir()] == ["runs"] and len(runs) == 1
    assert (runs[0] / "summary.md").exists() and (runs[0] / "rl" / "final" / "config.json").exists()
    assert _snapshot(site) == before  # nothing written into the installed package (no cards, no caches)
