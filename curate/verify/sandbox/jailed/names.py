"""Which names of the program the test namespace binds, and to what (see `testrunner`'s docstring): the
program's functions, classes and exception classes (stand-ins, `remote.py`), module-level values the test
uses, and modules only from a fixed list (`TRUSTED_MODULES`): the test process never imports a module the
program names."""

from __future__ import annotations

import ast
import builtins
import sys

from . import codec, remote  # noqa: TID251 - inside the sandbox this folder is the package `jailed`
from .channel import Channel  # noqa: TID251
from .remote import Call  # noqa: TID251

PYTEST_PRELOAD = ("pytest", "_pytest.python", "_pytest.assertion.rewrite", "_pytest.capture", "_pytest.tmpdir",
                  "_pytest.monkeypatch", "_pytest.fixtures", "_pytest.main", "_pytest.runner", "_pytest.terminal")
PRELOAD = ("typing", "collections", "heapq", "bisect", "itertools", "functools", "math", "string", "operator",
           "re", "random", "datetime", "copy", "decimal", "fractions", "statistics", "cmath")
# The only modules a program's module name may bind in the test namespace (`import numpy as np` in the
# program, `np.array` in an MBPP test): a fixed list whose import has no side effect. The test process never
# imports a name the program chose (issue 30: `__name__ = "venv.__main__"` ran a tool and exited 0).
TRUSTED_MODULES = frozenset(PRELOAD) | frozenset({
    "numpy", "sortedcontainers", "sys", "os", "time", "array", "json", "enum", "dataclasses", "abc", "numbers",
    "textwrap", "unicodedata", "calendar", "hashlib", "struct", "types", "io", "collections.abc", "os.path"})


def overridable_names(test_source: str) -> set[str]:
    """Names a program definition may stand behind even where a builtin or a name the setup imports exists
    (as in Python, where the program runs after the setup): those the test only calls on literal arguments
    (`sum(10, 15)`, MBPP task 126) or passes on as a bare argument (`check(add)`). Anywhere else (`abs(result -
    expected)`, `isclose(result, expected)`, `is_same_list(result, expected)`) such a function would see or
    decide the comparison, so the builtin / setup binding is kept."""
    tree = ast.parse(test_source)
    fine: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Name) and all(_literal(a) for a in n.args) and \
                    all(_literal(k.value) for k in n.keywords):
                fine.add(id(n.func))
            fine.update(id(a) for a in n.args if isinstance(a, ast.Name))
    ok: dict[str, bool] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            ok[n.id] = ok.get(n.id, True) and isinstance(n.ctx, ast.Load) and id(n) in fine
    return {k for k, v in ok.items() if v}


def defined_names(source: str) -> set[str]:
    """Names a module body binds itself (def, class, assignment), as opposed to importing them."""
    out: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return out


def _literal(node) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def bind_program_names(ns: dict, names: dict, protected: set[str], overridable, ch: Channel,
                        used=None) -> None:
    """Bind the program's functions, classes (stand-ins, `remote.py`), exception classes, modules (trusted
    ones only) and, when the test uses them (`used`), module-level values the test may use (see the module
    docstring). Classes with fewer bases first, so a subclass's stand-in derives from its base's."""
    items = [(n, k) for n, k in list(names.items())[:codec.MAX_ITEMS] if type(n) is str and type(k) is str]
    for name, kind in sorted(items, key=lambda nk: nk[1].count(",")):
        if kind == "value" and (used is None or name not in used):  # before the overridable check: cheap
            continue
        if name in protected or ((hasattr(builtins, name) or name in ns) and name not in overridable):
            continue
        if kind in ("function", "class"):
            ns[name] = Call(ch, None, name)
        elif kind.startswith("class:"):
            mro, _, methods = kind[len("class:"):].partition(";")
            ns[name] = remote.program_class(ch, name, mro.split(","), ch.classes, methods.split())
        elif kind.startswith("exception:"):
            ns[name] = remote.program_exception(kind[len("exception:"):].split(","), ch.classes)
        elif kind == "value":
            ns[name] = ch.attr(None, name)
        elif kind.startswith("module:"):
            module = trusted_module(kind[len("module:"):])
            if module is not None:
                ns[name] = module


def trusted_module(modname: str):
    """The module `modname` when it is one of TRUSTED_MODULES (imported here if it is not yet), else None:
    a program chooses at most which of these side-effect-free modules a name stands for."""
    import importlib

    top = modname.split(".")[0]
    if modname not in TRUSTED_MODULES or not (top in sys.stdlib_module_names or top in ALLOWED_PACKAGES):
        return None
    try:
        return sys.modules.get(modname) or importlib.import_module(modname)
    except ImportError:
        return None


ALLOWED_PACKAGES: set[str] = set()
