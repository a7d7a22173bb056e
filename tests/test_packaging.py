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
ROOTS = ("curate", "train", "pipelines")

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


# The floors inside curate, lowest first: a module may import its own floor and those below, never above.
# Stage packages (decontam, dedup, verify, select, mix, generate, ...) stand on all of them.
CURATE_FLOORS = (("core",), ("text",), ("io",), ("engine",), ("context", "ingest"))


def _module_name(f: Path) -> str:
    parts = list(f.relative_to(REPO).with_suffix("").parts)
    return "cotforge." + ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, imported names) of every import outside `if TYPE_CHECKING:` blocks (a type-only reference is
    no runtime edge), at module level or inside functions."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING"
                   for n in ast.walk(node)}
    out = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append((node.module, [a.name for a in node.names]))
    return out


def import_graph() -> dict[str, set[str]]:
    """cotforge module -> the cotforge modules it imports at run time (`from pkg import mod` counts as mod)."""
    files = {_module_name(f): f for root in ROOTS for f in (REPO / root).rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, f in files.items():
        for name, items in _runtime_imports(f):
            targets = {f"{name}.{i}" for i in items} & files.keys() or {name} & files.keys()
            graph[mod] |= targets - {mod}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    """No two cotforge modules import each other, directly or around a circle (imports inside functions
    count: a circle held apart by a lazy import is still one)."""
    assert import_cycles(import_graph()) == []


def test_import_cycles_finds_a_circle():
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _floor(mod: str) -> int | None:
    rest = mod.removeprefix("cotforge.curate.").split(".")[0]
    return next((i for i, names in enumerate(CURATE_FLOORS) if rest in names), None)


def test_curate_floors_point_down():
    """Inside curate: core <- text <- io <- engine <- context/ingest <- the stage packages; nothing imports a
    floor above its own (the runner's helpers once ran back up from io to the executors and the context)."""
    bad = []
    for mod, targets in import_graph().items():
        if not mod.startswith("cotforge.curate."):
            continue
        own = _floor(mod)
        for t in targets:
            if not t.startswith("cotforge.curate."):
                continue
            theirs = _floor(t)
            if own is not None and (theirs is None or theirs > own):
                bad.append(f"{mod} -> {t}")
    assert not bad, bad


def test_no_private_names_across_modules():
    """A module imports only public names of another cotforge module (a `_name` import is a seam to make
    public or a helper to move)."""
    bad = []
    for root in ROOTS:
        for f in sorted((REPO / root).rglob("*.py")):
            for name, items in _runtime_imports(f):
                if name.startswith("cotforge."):
                    bad += [f"{f.relative_to(REPO)}: {name}.{i}" for i in items if i.startswith("_")]
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



def _shipped_files(repo: Path) -> set[str]:
    """What the wheel must hold: every file below the three folders (modules of every subpackage and every
    data file), as `cotforge/<folder>/...`; caches and hidden files aside."""
    out = set()
    for root in ROOTS:
        for f in (repo / root).rglob("*"):
            rel = f.relative_to(repo)
            if f.is_file() and "__pycache__" not in rel.parts and f.suffix != ".pyc" \
                    and not any(part.startswith(".") for part in rel.parts):
                out.add("cotforge/" + rel.as_posix())
    return out


def missing_from_wheel(names: list[str], repo: Path = REPO) -> list[str]:
    """Files of the checkout's package folders that the wheel (its member names) does not hold."""
    return sorted(_shipped_files(repo) - set(names))


def test_missing_from_wheel_names_a_dropped_subpackage():
    """The wheel check sees a subpackage left out of discovery (the hole that once shipped without
    cotforge.curate.executors) and a data file left out of package data."""
    full = sorted(_shipped_files(REPO))
    assert missing_from_wheel(full) == []
    dropped = [n for n in full if not n.startswith("cotforge/curate/engine/") and not n.endswith(".txt.gz")]
    missing = missing_from_wheel(dropped)
    assert "cotforge/curate/engine/__init__.py" in missing and "cotforge/curate/engine/slurm.py" in missing
    assert "cotforge/curate/dedup/pairs/wordnet_synonyms.txt.gz" in missing


def _build_wheel(tmp_path: Path) -> Path:
    """The wheel, built from a copy of the sources (so the checkout gets no build/)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", *ROOTS):
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, src / name,
                                                                     **({"ignore": shutil.ignore_patterns("__pycache__")}
                                                                        if (REPO / name).is_dir() else {}))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(src),
                    "-w", str(tmp_path / "dist")], check=True, cwd=src, timeout=600)
    return next((tmp_path / "dist").glob("cotforge-*.whl"))


def _fresh_venv(tmp_path: Path) -> Path:
    """A new venv with no cotforge in it: its dependencies come from this environment's site-packages through
    a .pth line (a folder named there is searched, but its own .pth files, such as an editable install's
    finder, are not run), so only the wheel installed into it can serve `cotforge`."""
    import sysconfig

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("setuptools") is None, reason="building the wheel needs setuptools")
def test_built_wheel_runs_the_demo_from_an_empty_folder(tmp_path):
    """Build the wheel, check it holds every subpackage and data file of the checkout and no other top-level
    name, install it (--no-deps) into a fresh venv that has no editable install of cotforge, and run
    `cotforge run demo --profile small` there from an empty folder: the installed package is what runs, and
    nothing is written outside the run folder."""
    wheel = _build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"cotforge", wheel.name.split("-py")[0] + ".dist-info"}
    assert missing_from_wheel(names) == []
    venv = _fresh_venv(tmp_path)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--no-deps", str(wheel)], check=True, timeout=600)
    site = next(venv.glob("lib/python3*/site-packages"))
    before = _snapshot(site)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import cotforge.pipelines.cli.main as m; print(m.__file__)"],
                           cwd=empty, capture_output=True, text=True, env=env, timeout=300)
    assert where.stdout.strip() == str(site / "cotforge" / "pipelines" / "cli" / "main.py"), where.stderr
    r = subprocess.run([str(venv / "bin" / "cotforge"), "run", "demo", "--profile", "small"], cwd=empty,
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    runs = list((empty / "runs").iterdir())
    assert [p.name for p in empty.iterdir()] == ["runs"] and len(runs) == 1
    assert (runs[0] / "summary.md").exists() and (runs[0] / "rl" / "final" / "config.json").exists()
    assert _snapshot(site) == before  # nothing written into the installed package (no cards, no caches)
