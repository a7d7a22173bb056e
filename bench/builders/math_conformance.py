"""Build the math conformance suites in tests/data/math_conformance/ from the peer repositories' test files.

The peer suites' *cases* become data (gold, prediction, expected verdict, the comparison settings a case
states); none of their code is copied. Each file's first line is a header object with the source repository,
commit, path, licence and the embedding rule the runners apply (`cotforge.curate.verify.conformance`).

  math_verify.jsonl  huggingface/Math-Verify tests/*.py: every parametrised (gold, pred, expected) case,
                     read from pytest's collection (`item.callspec.params`, no test body is run), plus the
                     one `compare_strings` call of `test_precision`. `test_string_extraction.py` (multiple-choice
                     letters, no gold) is left out. Per-case settings kept: `precision` when it is not the
                     helper's default 6, `strict`, `allow_set_relation_comp`, and the extraction targets.
  hendrycks_math.jsonl  hendrycks/math modeling/math_equivalence_test.py: each test's `test_in` (gold) and
                     `test_out` (prediction), expected = assertTrue/assertFalse (read with `ast`).
  qwen25_math.jsonl  QwenLM/Qwen2.5-Math evaluation/grader.py `_test_math_equal`: the 17 (prediction, gold)
                     examples (16 commented out, 1 live). The source states no verdicts; expected = whether
                     the two denote the same answer, decided case by case (field `why`) before any tuning.

    python -m bench.builders.math_conformance --math-verify GITDIR --hendrycks GITDIR --qwen GITDIR [--out DIR]

Each GITDIR is a git directory (e.g. a mirror clone) of the repository; files are read at its HEAD, whose
commit goes into the header.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.paths import REPO

OUT = REPO / "tests" / "data" / "math_conformance"


def _commit(git_dir: Path) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()


def _show(git_dir: Path, path: str) -> str:
    """One file of the repository at HEAD."""
    return subprocess.run(["git", "--git-dir", str(git_dir), "show", f"HEAD:{path}"], capture_output=True,
                          text=True, check=True).stdout


def _write(path: Path, header: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    with path.open("w") as f:
        f.write(json.dumps({"header": header}, ensure_ascii=False) + "\n")
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{path}: {len(rows)} cases")


class _Collector:
    """pytest plugin: keep the parameters of every collected parametrised test."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str, dict[str, Any]]] = []

    def pytest_collection_modifyitems(self, items: list[Any]) -> None:
        for it in items:
            params = getattr(getattr(it, "callspec", None), "params", None)
            if params is not None:
                self.items.append((it.nodeid.split("::")[0], it.originalname, dict(params)))


# extraction targets and fixed arguments of each math-verify test function (read from its body)
_MV_CALLS = {
    "test_number_extraction": {"match_types": ["expr"]},
    "test_latex_notation": {"match_types": ["latex"]},
    "test_latex_notation_math": {"match_types": ["latex"]},
    "test_relations_math": {"match_types": ["latex"]},
    "test_matrix_extraction": {"match_types": ["latex"]},
    "test_set_rel_assymetry": {"match_types": ["latex"]},
    "test_float_precision": {"match_types": ["latex", "expr"], "precision": 5},
    "test_sqrt_precision": {"match_types": ["latex", "expr"], "precision": 5},
    "test_symbols": {"match_types": ["latex", "expr"], "precision": 5},
    "test_string_extraction": {"match_types": ["default"]},  # test_yujianll.py: parse() defaults
}


def math_verify_cases(git_dir: Path) -> list[dict[str, Any]]:
    """All (gold, pred, expected) cases of Math-Verify's tests, via pytest collection of its tests/."""
    import pytest

    names = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "--name-only", "HEAD", "tests/"],
                           capture_output=True, text=True, check=True).stdout.split()
    col = _Collector()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "tests").mkdir()
        for name in names:
            (Path(tmp) / name).write_text(_show(git_dir, name))
        sys.path.insert(0, tmp)
        try:
            pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "--rootdir", tmp, f"{tmp}/tests"],
                        plugins=[col])
        finally:
            sys.path.remove(tmp)
    rows = []
    for path, func, p in col.items:
        if path.endswith("test_string_extraction.py"):
            continue
        gold, pred = p["gold"], p["pred"]
        expected = p.get("expected", p.get("result"))
        settings: dict[str, Any] = {}
        call = dict(_MV_CALLS.get(func, {"match_types": ["latex", "expr"]}))
        precision = p.get("precision", call.pop("precision", 6))
        if precision != 6:
            settings["decimal_places"] = precision
        if "strict" in p:
            settings["strict_variables"] = bool(p["strict"])
        if "allow_set_relation_comp" in p:
            settings["allow_set_relation_comp"] = bool(p["allow_set_relation_comp"])
        rows.append({"id": f"{Path(path).name}::{func}[{len([r for r in rows if r['group'] == func])}]",
                     "group": func, "gold": gold, "prediction": pred, "expected": bool(expected),
                     "settings": settings, "match_types": call["match_types"]})
    # test_precision's one string-level assertion (its other four call sympy directly, no strings)
    rows.append({"id": "test_all.py::test_precision[0]", "group": "test_precision", "gold": "$\\frac{1}{3}$",
                 "prediction": "0.3333$", "expected": True, "settings": {"decimal_places": 4},
                 "match_types": ["latex", "expr"]})
    return rows


def hendrycks_cases(git_dir: Path) -> list[dict[str, Any]]:
    """The 16 unittest methods of math_equivalence_test.py as (gold=test_in, prediction=test_out)."""
    tree = ast.parse(_show(git_dir, "modeling/math_equivalence_test.py"))
    rows = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
            continue
        values: dict[str, str] = {}
        expected = None
        for stmt in node.body:
            if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
                values[stmt.targets[0].id] = ast.literal_eval(stmt.value)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                expected = stmt.value.func.attr == "assertTrue"  # type: ignore[union-attr]
        rows.append({"id": f"math_equivalence_test.py::{node.name}", "group": "is_equiv",
                     "gold": values["test_in"], "prediction": values["test_out"], "expected": expected,
                     "settings": {}})
    return rows


# Qwen2.5-Math states no verdicts: expected = same answer (why), decided before tuning.
_QWEN_EXPECTED = [
    (True, "1/12 = 0.08333...; the decimal is its correct rounding at 16 places"),
    (True, "same pair: 4.5 = 9/2"),
    (True, "x/7 + 2/7 = (x+2)/7"),
    (True, "sec^2 y = tan^2 y + 1 (identity)"),
    (True, "the same matrix; the gold only wraps it in parentheses"),
    (True, "x^{2/3} = (cbrt x)^2 for real x, entry by entry the same matrix"),
    (True, "-8x^2/(9u^{5/3}) + 2/(3u^{2/3}) = -2(x^2+6)/(9u^{5/3}) with u = x^2-2"),
    (True, "the same plane: one equation is the other times -1"),
    (True, "33.3 is 100/3 rounded to the one place the gold is written with"),
    (True, "each entry of the prediction rounds to the gold's entry at the gold's places"),
    (True, "same expression, denominator terms swapped"),
    (False, "(+5)(b+2) lacks the a: a different polynomial"),
    (False, "(1+sqrt 5)/2 = 1.618 != 2"),
    (False, "(34 + sqrt 1358)/16 = 4.43 != 4"),
    (False, "1 != 1*sqrt(19) (the gold's doubled backslash is a JSON escape)"),
    (True, "2.6667 is 8/3 at 4 places; 0.6 = 3/5; same open/closed ends"),
    (False, "x+1 != x+2n+1"),
]


def qwen_cases(git_dir: Path) -> list[dict[str, Any]]:
    """The 17 examples of grader.py's `_test_math_equal` (commented `print(math_equal(pred, gt))` calls and
    `pred = ...` / `gt = ...` pairs), in source order."""
    src = _show(git_dir, "evaluation/grader.py")
    body = src[src.index("def _test_math_equal"):src.index('if __name__ == "__main__"')]
    pairs: list[tuple[str, str]] = []
    pending: dict[str, str] = {}
    for raw in body.splitlines():
        line = raw.strip().lstrip("#").strip()
        m = re.match(r"print\(math_equal\((.+?),\s*(['\"].*['\"])(?:,\s*timeout=True)?\)\)$", line)
        if m and not line.startswith("print(math_equal(pred"):
            pairs.append((ast.literal_eval(m.group(1)), ast.literal_eval(m.group(2))))
            continue
        for name, value in re.findall(r"(pred|gt)\s*=\s*('[^']*'|\"[^\"]*\")", line):
            pending[name] = ast.literal_eval(value)
        if "pred" in pending and "gt" in pending:
            pairs.append((pending.pop("pred"), pending.pop("gt")))
    if len(pairs) != len(_QWEN_EXPECTED):
        raise SystemExit(f"grader.py: found {len(pairs)} examples, expected {len(_QWEN_EXPECTED)}")
    return [{"id": f"grader.py::_test_math_equal[{i}]", "group": "math_equal", "gold": gt, "prediction": pred,
             "expected": exp, "why": why, "settings": {}}
            for i, ((pred, gt), (exp, why)) in enumerate(zip(pairs, _QWEN_EXPECTED, strict=True))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--math-verify", type=Path, required=True)
    ap.add_argument("--hendrycks", type=Path, required=True)
    ap.add_argument("--qwen", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    embed = "cotforge.curate.verify.conformance.embed (see its docstring)"
    _write(args.out / "math_verify.jsonl",
           {"suite": "math_verify", "repo": "https://github.com/huggingface/Math-Verify",
            "commit": _commit(args.math_verify), "path": "tests/*.py (parametrised cases)",
            "licence": "Apache-2.0 (LICENCE; test files carry an MIT header)", "role": "tuning",
            "embedding": embed}, math_verify_cases(args.math_verify))
    _write(args.out / "hendrycks_math.jsonl",
           {"suite": "hendrycks_math", "repo": "https://github.com/hendrycks/math",
            "commit": _commit(args.hendrycks), "path": "modeling/math_equivalence_test.py", "licence": "MIT",
            "role": "held out", "embedding": embed}, hendrycks_cases(args.hendrycks))
    _write(args.out / "qwen25_math.jsonl",
           {"suite": "qwen25_math", "repo": "https://github.com/QwenLM/Qwen2.5-Math",
            "commit": _commit(args.qwen), "path": "evaluation/grader.py (_test_math_equal)",
            "licence": "MIT (evaluation/LICENSE)", "role": "held out",
            "note": "the source gives no verdicts; `expected` and `why` were written for this suite",
            "embedding": embed}, qwen_cases(args.qwen))


if __name__ == "__main__":
    main()
