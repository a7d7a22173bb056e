"""A stage's code hash: the source of every cotforge module the stage runs, found by walking imports.

The seeds are the modules of the stage's `run` and of its config class, plus every module of their
curate/train subpackage (`cotforge.curate.dedup.*` for dedup). From there the hash follows every `cotforge.*` import,
at module level or inside functions (lazy imports count: the code runs), and the `__init__` of each
package on the way, so nobody keeps module lists by hand. Editing any of those files changes the hash and
re-runs the stage (and, through the input hashes, everything after it). Only the source text is read;
nothing is imported except package folders located by `importlib.util.find_spec`.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
from collections.abc import Iterable
from pathlib import Path

ROOT = "cotforge"


def module_file(name: str) -> Path | None:
    """The source file of module `name` (a package's `__init__.py`), None when it does not exist."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None) if spec else None
    return Path(origin) if origin and origin.endswith(".py") and Path(origin).is_file() else None


def _is_package(name: str) -> bool:
    f = module_file(name)
    return f is not None and f.name == "__init__.py"


def imports_of(name: str) -> set[str]:
    """The cotforge modules that module `name` imports anywhere in its source (relative imports resolved;
    `from pkg import sub` counts `pkg.sub` when that is a module)."""
    path = module_file(name)
    if path is None:
        return set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith(ROOT + "."))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            if not base.startswith(ROOT + "."):
                continue
            found.add(base)
            for a in node.names:
                if module_file(f"{base}.{a.name}") is not None:
                    found.add(f"{base}.{a.name}")
    return found


def _parents(name: str) -> list[str]:
    """Packages whose `__init__` runs before `name` (cotforge itself is a namespace package)."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(2, len(parts))]


def subpackage(name: str) -> list[str]:
    """Every module of the curate/train subpackage holding `name` (cotforge.curate.dedup.stage ->
    cotforge.curate.dedup.*); [] for modules directly under cotforge.curate / .train, and for pipelines
    (whose stages/ package is the registry, not one stage's code)."""
    parts = name.split(".")
    pkg = name if _is_package(name) else ".".join(parts[:-1])
    if len(pkg.split(".")) < 3 or pkg.split(".")[1] not in ("curate", "train"):
        return []
    folder = module_file(pkg)
    if folder is None:
        return []
    return [pkg] + [f"{pkg}.{f.stem}" for f in sorted(folder.parent.glob("*.py")) if f.name != "__init__.py"]


def closure(seeds: Iterable[str]) -> list[str]:
    """The seeds, their subpackages and every cotforge module reachable by imports, sorted."""
    todo = [m for s in seeds for m in (s, *subpackage(s))]
    seen: set[str] = set()
    while todo:
        m = todo.pop()
        if m in seen or module_file(m) is None:
            continue
        seen.add(m)
        todo.extend(_parents(m))
        todo.extend(imports_of(m) - seen)
    return sorted(seen)


@functools.cache
def code_hash(seeds: tuple[str, ...]) -> str:
    """Short sha256 of the names and source bytes of `closure(seeds)` (cached per process)."""
    h = hashlib.sha256()
    for m in closure(seeds):
        h.update(m.encode() + b"\0")
        h.update(module_file(m).read_bytes() + b"\0")  # type: ignore[union-attr]
    return h.hexdigest()[:16]
