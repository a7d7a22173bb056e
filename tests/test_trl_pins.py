"""TRL internals the RL trainer builds on, pinned: every private name `GPPOTrainer` reads or overrides
(`self._step`, `self._metrics`, `super()._generate_and_score_completions`, ...) must still exist in the installed
TRL's GRPOTrainer / transformers' Trainer, and every private method it overrides must keep its parameters. A TRL
upgrade that renames or re-signs one fails here, by name, instead of silently changing training."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

pytest.importorskip("trl")

TRAINER = Path(__file__).resolve().parents[1] / "train" / "rl" / "trainer.py"


def _gppo_class() -> ast.ClassDef:
    tree = ast.parse(TRAINER.read_text())
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "GPPOTrainer")


def _own_names(cls: ast.ClassDef) -> set[str]:
    """Methods GPPOTrainer defines and attributes it assigns itself (in __init__ or anywhere)."""
    own = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    for node in ast.walk(cls):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    own.add(t.attr)
    return own


def _read_names(cls: ast.ClassDef) -> set[str]:
    """Private names read through `self.` or `super().`."""
    out = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            v = node.value
            if (isinstance(v, ast.Name) and v.id == "self") or (
                    isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super"):
                out.add(node.attr)
    return out


def _parent_source() -> str:
    from transformers import Trainer
    from trl import GRPOTrainer

    return "\n".join(inspect.getsource(c) for c in (GRPOTrainer, Trainer))


def test_private_names_the_rl_trainer_reads_exist_in_trl():
    from trl import GRPOTrainer

    cls = _gppo_class()
    src = _parent_source()
    inherited = sorted(_read_names(cls) - _own_names(cls)
                       | {m for m in _own_names(cls) if m.startswith("_") and hasattr(GRPOTrainer, m)})
    missing = [n for n in inherited if not hasattr(GRPOTrainer, n)
               and not re.search(rf"self\.{re.escape(n)}\b\s*(:[^=\n]*)?=", src)]
    assert inherited, "the pin list is empty: the parser no longer sees GPPOTrainer's use of TRL internals"
    assert not missing, f"TRL no longer defines {missing} (read or overridden by train/rl/trainer.py)"


def test_overridden_private_methods_keep_their_parameters():
    from trl import GRPOTrainer

    cls = _gppo_class()
    changed = []
    for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
        if fn.name.startswith("_") and not fn.name.startswith("__") and hasattr(GRPOTrainer, fn.name):
            ours = [a.arg for a in fn.args.args]
            theirs = list(inspect.signature(getattr(GRPOTrainer, fn.name)).parameters)
            if ours != theirs[:len(ours)] or any(
                    p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                    for p in list(inspect.signature(getattr(GRPOTrainer, fn.name)).parameters.values())[len(ours):]):
                changed.append(f"{fn.name}: ours {ours}, TRL {theirs}")
    assert not changed, changed
