"""Plans for running a test's `setup` cheaply in the program's process.

A setup such as the LeetCode prelude star-imports typing, collections, math... Importing all of that costs a
fresh interpreter ~20-40 ms (typing alone pulls in re, enum, collections, contextlib), more than the rest of
a typical run, while most programs use a few of those names (and LeetCode's `List[int]` hints only inside
annotations, which are never evaluated here). So for setups made of standard-library imports followed by
plain definitions, the host computes which module and attribute each imported name comes from (`plan`);
the harness then binds only the names the program's syntax tree refers to outside annotations (plus those
the setup's own definitions use) and runs the definitions. A program that reaches names dynamically
(`eval`, `exec`, `globals()`, `vars()`, `locals()`, `__import__`) gets the whole setup run as written. The
test process always runs the whole setup.
"""

from __future__ import annotations

import ast
import functools
import importlib
import sys


@functools.lru_cache(maxsize=64)
def plan(setup: str) -> dict | None:
    """{"bind": {name: [module, attribute or None]}, "eager": source, "eager_names": [...]} for `setup`, or
    None when it does not have the imports-then-definitions shape (it then runs as written)."""
    try:
        tree = ast.parse(setup)
    except SyntaxError:
        return None
    bind: dict[str, list] = {}
    body: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            if body or not _stdlib(node):
                return None
            for name, target in _bindings(node):
                bind[name] = target
        else:
            body.append(node)
    eager = ast.Module(body=body, type_ignores=[])
    names = [n for n in ast.walk(eager) if isinstance(n, ast.Name)]
    stored = {n.id for n in names if not isinstance(n.ctx, ast.Load)} | {
        n.name for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    used = sorted(({n.id for n in names if isinstance(n.ctx, ast.Load)} - stored) & set(bind))
    return {"bind": bind, "eager": ast.unparse(eager), "eager_names": used}


def _stdlib(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom) and node.level:
        return False
    mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    return all(m and m.split(".")[0] in sys.stdlib_module_names for m in mods)


def _bindings(node: ast.Import | ast.ImportFrom) -> list[tuple[str, list]]:
    if isinstance(node, ast.Import):
        return [(a.asname or a.name.split(".")[0], [a.name if a.asname else a.name.split(".")[0], None])
                for a in node.names]
    mod = node.module or ""
    if any(a.name == "*" for a in node.names):
        m = importlib.import_module(mod)  # a standard-library module: safe to import here
        names = getattr(m, "__all__", None) or [n for n in vars(m) if not n.startswith("_")]
        return [(n, [mod, n]) for n in names]
    return [(a.asname or a.name, [mod, a.name]) for a in node.names]
