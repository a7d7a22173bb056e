"""Math conformance suites: peer graders' test cases (as data) run through `verify_math_batch`.

The suites live in tests/data/math_conformance/*.jsonl (built by bench/builders/math_conformance.py; the first
line of each file is a header naming the source repository, commit and licence). A case is
``{"id", "gold", "prediction", "expected", "settings", "match_types"}``; `settings` holds the comparison
settings the peer test states (math-verify's ``precision=4`` -> ``decimal_places=4``, ``strict`` ->
``strict_variables``, ``allow_set_relation_comp``), applied on top of the caller's; a math-verify test that
extracts with LaTeX targets only (``match_types == ["latex"]``) runs with ``plain_numbers=False``.

How a prediction becomes a response (`embed`), so that it is read the way a model's output is:
  * a prediction that carries its own ``</think>`` is used as it is;
  * otherwise the response starts with a closed reasoning block, ``<think>\\n{THINK}\\n</think>\\n\\n``;
  * a *bare answer* follows it as ``So the final answer is $\\boxed{X}$.``: X is the prediction stripped, or
    the content of its one enclosing math span (``$..$``, ``$$..$$``, ``\\[..\\]``, ``\\(..\\)``). A
    prediction is bare when it is exactly one such span without ``\\boxed`` inside, or when it holds no
    ``$`` (``\\$`` aside), ``\\boxed``, ``\\[``, ``\\(`` and no run of 3+ letters outside LaTeX commands,
    environment names and ``\\text{..}``-style units (``7,425,000``, ``1000,99``, ``x+1``, ``10\\text{ cm}``); every hendrycks_math and qwen25_math prediction is bare;
  * any other prediction is model prose (``Answer \\[ 9 \\]``, a solution ending in ``\\boxed{..}``,
    ``28 percent``, ``the number is 1,000.99€``) and follows the block verbatim.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

THINK = "Let me work through the problem step by step and check the result before answering."
SUITES = ("math_verify", "hendrycks_math", "qwen25_math")


@dataclass
class Case:
    """One conformance case."""

    id: str
    gold: str
    prediction: str
    expected: bool
    settings: dict[str, Any] = field(default_factory=dict)
    group: str = ""
    why: str = ""
    match_types: list[str] = field(default_factory=list)

    def effective_settings(self) -> dict[str, Any]:
        """The case's settings; a math-verify test that extracts with LaTeX targets only (match_types
        ["latex"]) also gets plain_numbers=False, the same extraction in our lenient fallback."""
        extra = {"plain_numbers": False} if self.match_types == ["latex"] else {}
        return {**extra, **self.settings}


@dataclass
class CaseResult:
    """A case with our verdict."""

    case: Case
    response: str
    status: str
    correct: bool
    extracted: str | None

    @property
    def agrees(self) -> bool:
        return self.correct == self.case.expected

    @property
    def false_accept(self) -> bool:
        return self.correct and not self.case.expected


def load_suite(path: str | Path) -> tuple[dict[str, Any], list[Case]]:
    """(header, cases) of one suite file; a malformed line is a ValueError naming file and line."""
    header: dict[str, Any] = {}
    cases: list[Case] = []
    names = {f.name for f in dataclasses.fields(Case)}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                row = json.loads(line)
                if "header" in row:
                    header = row["header"]
                    continue
                cases.append(Case(**{k: v for k, v in row.items() if k in names}))
            except (json.JSONDecodeError, TypeError) as e:
                raise ValueError(f"{path}:{n}: bad conformance case: {e}") from e
    return header, cases


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file (the held-out suites' hashes are recorded in the tests)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


_SPAN = re.compile(r"^\s*(?:\$\$(?P<a>[^$]*)\$\$|\$(?P<b>[^$]*)\$|\\\[(?P<c>.*)\\\]|\\\((?P<d>.*)\\\))\s*$", re.DOTALL)
_COMMAND = re.compile(r"\\(?:begin|end|text|textbf|mathrm|mbox|operatorname)\s*\{[^{}]*\}|\\[A-Za-z]+")
_WORD = re.compile(r"[A-Za-z]{3,}")


def bare_answer(prediction: str) -> str | None:
    """The answer itself when `prediction` is a bare answer (rule in the module docstring), else None."""
    m = _SPAN.match(prediction)
    if m:
        inner = next(g for g in m.groups() if g is not None)
        return None if "\\boxed" in inner or not inner.strip() else inner.strip()
    if any(t in prediction.replace("\\$", "") for t in ("$", "\\boxed", "\\[", "\\(")):
        return None
    if _WORD.search(_COMMAND.sub(" ", prediction)):
        return None
    return prediction.strip() or None


def embed(case: Case, suite: str = "") -> str:
    """The model-style response for a case (rule in the module docstring)."""
    if "</think>" in case.prediction:
        return case.prediction
    block = f"<think>\n{THINK}\n</think>\n\n"
    bare = bare_answer(case.prediction)
    if bare is not None:
        return f"{block}So the final answer is $\\boxed{{{bare}}}$."
    return block + case.prediction


def run_cases(cases: Iterable[Case], suite: str, **kwargs: Any) -> list[CaseResult]:
    """Verdicts for `cases` through `verify_math_batch(**kwargs)`; cases with their own settings are run in
    groups with those settings laid over kwargs["compare"]."""
    from cotforge.curate.verify.math import MathCompare, verify_math_batch

    cases = list(cases)
    base = kwargs.pop("compare", None) or MathCompare()
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(cases):
        groups.setdefault(json.dumps(c.effective_settings(), sort_keys=True), []).append(i)
    out: list[CaseResult | None] = [None] * len(cases)
    for key, idx in groups.items():
        compare = dataclasses.replace(base, **json.loads(key))
        responses = [embed(cases[i], suite) for i in idx]
        verdicts = verify_math_batch([(r, cases[i].gold) for r, i in zip(responses, idx, strict=True)],
                                     compare=compare, **kwargs)
        for i, r, v in zip(idx, responses, verdicts, strict=True):
            out[i] = CaseResult(cases[i], r, v.status, bool(v.correct), v.extracted)
    return out  # type: ignore[return-value]
