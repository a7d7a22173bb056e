"""Math verdicts: extract the final answer of a response, compare it with the gold via math-verify.

The public entry points take an explicit extraction `mode` and comparison settings:

* ``verify_math_batch(pairs, think_end, workers, timeout_s, mode="lenient", compare=None, problems=None)``
  (killable worker processes, a per-item deadline) and ``verify_math`` (one pair, in-process);
* `mode` (rules in `math_extract`): ``"strict"`` for RL rewards (the answer must be boxed after the reasoning
  block), ``"official"`` for RL rewards as Klear's official code gives them (math-verify's own extraction of
  anything after the reasoning block), ``"lenient"`` (default) for evaluation scores and SFT labels (also "the answer is", ``####``,
  "Answer" lines, and math-verify's own extraction);
* `compare`: a `MathCompare` (rules in `math_compare`: numeric tolerance, list order, decimal comma,
  variables, set/relation comparison); `problems`: the problem texts, read for the list-order rule.

Callers and their modes: the verify stage (`VerifyConfig.math_mode`, "lenient"), `verify_rows` ("lenient"),
evaluation scoring (the default, "lenient"), RL rewards (train/rl/rewards.py: "official" or "strict", by its reward mode).

How the gold is read (`parse_gold`): golds with ``\\boxed`` or ``$`` go through math-verify's extraction with
the box first; bare LaTeX golds are wrapped in ``\\boxed{}`` (env_notes §7). The prediction: box contents as
LaTeX; phrase/line answers as LaTeX, then as free text; in lenient mode without any marker, math-verify's
``parse`` of the whole answer part. Several boxes read as one answer are written the way the gold is: a set
``\\{..\\}`` when the gold is a set literal, a tuple ``(..)`` when the gold is one tuple, else a bare list.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from cotforge.curate.core.reasoning import REASONING_MARKERS
from cotforge.curate.verify.math_compare import (
    MathCompare,
    active,
    as_tuples,
    bare_lists_ordered,
    gold_list_ordered,
    install_numeric_hook,
    is_set_literal,
    is_unordered_gold,
    localize,
    strip_fonts,
)
from cotforge.curate.verify.math_extract import (
    MODES,
    Extracted,
    answer_part,
    extract,
    split_after_reasoning,
    strict_answer_part,
)
from cotforge.curate.verify.math_pool import MathPool, MathVerdict, get_pool, shutdown_pool

__all__ = [
    "MODES", "REASONING_MARKERS", "MathCompare", "MathPool", "MathVerdict", "extract_answer",
    "parse_gold", "shutdown_pool", "split_after_reasoning", "strict_answer_part", "verify_math",
    "verify_math_batch",
]

log = logging.getLogger(__name__)


class _DropTimeoutWarnings(logging.Filter):
    """math-verify warns on every call once its signal timeouts are off; we enforce our own deadline."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Timeout is disabled")


for _name in ("math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addFilter(_DropTimeoutWarnings())
install_numeric_hook()


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"math mode: expected one of {MODES}, got {mode!r}")


def extract_answer(response: str, think_end: str | None = "</think>", mode: str = "lenient") -> str | None:
    """The final-answer text of a response in `mode` (rules in `math_extract`), or None. In lenient mode
    without any answer marker this is the string math-verify's own extraction reads in the answer part."""
    _check_mode(mode)
    text = answer_part(response or "", think_end, mode)
    found = extract(text, mode) if text is not None else None
    if found is None:
        return None
    if found.kind == "math_verify":
        return _extracted_text(found, _parse(found.text)) or None
    return found.text


def _parse(text: str, box_first: bool = False, plain_numbers: bool = True) -> list[Any]:
    """math-verify's parse with its LaTeX (box first when `box_first`) and, with `plain_numbers`, expression
    targets."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    targets: list[Any] = [LatexExtractionConfig(boxed_match_priority=0) if box_first else LatexExtractionConfig()]
    if plain_numbers:
        targets.append(ExprExtractionConfig())
    return parse(text, targets, parsing_timeout=None)


def parse_gold(answer: str) -> list[Any]:
    """Parse a ground-truth string; bare LaTeX golds are wrapped in \\boxed{} (env_notes §7)."""
    gold = answer.strip()
    if "\\boxed" in gold or "$" in gold:
        parsed = _parse(gold, box_first=True)
        if parsed:
            return parsed
    gold = gold.removeprefix("####").strip()
    return _parse("\\boxed{" + gold + "}") or _parse(gold)


_TUPLE = re.compile(r"^\s*(?:\\left)?\(.*(?:\\right)?\)\s*$", re.DOTALL)


def _join_boxes(found: Extracted, gold_text: str, gold: list[Any]) -> str:
    """Several boxes as one answer, written the way the gold is (module docstring)."""
    import sympy

    body = ", ".join(found.boxes)
    if is_set_literal(gold_text):
        return "\\{" + body + "\\}"
    if gold and isinstance(gold[0], sympy.Tuple) and _TUPLE.match(gold_text) and gold_text.count("(") == 1:
        return "(" + body + ")"
    return body


def _parse_pred(found: Extracted, gold_text: str, gold: list[Any], cfg: MathCompare) -> list[Any]:
    """Parse the extracted answer (module docstring)."""
    if found.kind == "math_verify":
        return _parse(localize(found.text, cfg), plain_numbers=cfg.plain_numbers)
    text = found.text if found.kind != "boxes" else _join_boxes(found, gold_text, gold)
    text = localize(strip_fonts(text), cfg)
    if found.kind in ("boxed", "boxes"):
        return _parse("\\boxed{" + text + "}")
    return _parse(text) or _parse("\\boxed{" + text + "}")


def _norm(s: str) -> str:
    return re.sub(r"\s+|\\[,;! ]|\$|\\text\{([^}]*)\}", lambda m: m.group(1) or "", s).strip().lower()


def _whole_strings(parsed: list[Any]) -> list[Any]:
    """Drop math-verify's fallback strings that are cut-off fragments (unbalanced braces, e.g. "\\lambda_{"
    from a gold it failed to read): two such fragments compare equal as strings and made a false accept."""
    return [p for p in parsed if not isinstance(p, str) or p.count("{") == p.count("}")]


def _extracted_text(found: Extracted, pred: list[Any]) -> str:
    """What to report as extracted: math-verify's matched string when it did the extraction."""
    if found.kind == "math_verify":
        return next((p for p in pred if isinstance(p, str)), "")
    return found.text


def verify_math(response: str, answer: str, think_end: str | None = "</think>", *, mode: str = "lenient",
                compare: MathCompare | None = None, problem: str | None = None) -> MathVerdict:
    """Verdict for one (response, gold answer) pair in `mode` under `compare`, in-process with math-verify's
    signal timeouts off (safe in threads; no deadline: use `verify_math_batch` for untrusted input)."""

    _check_mode(mode)
    cfg = compare or MathCompare()
    text = answer_part(response or "", think_end, mode)
    found = extract(text, mode) if text is not None else None
    if found is None:
        return MathVerdict("no_answer", None, None)
    if answer is None or not str(answer).strip():
        return MathVerdict("error", None, found.text)
    gold_text = localize(str(answer), cfg)
    try:
        with active(cfg):
            return _compare(found, answer, gold_text, cfg, problem)
    except Exception as e:  # math-verify raises on pathological input; a verdict, not a crash
        log.debug("verify_math error on %r vs %r: %r", found.text[:80], str(answer)[:80], e)
        return MathVerdict("error", None, found.text)


def _compare(found: Extracted, answer: str, gold_text: str, cfg: MathCompare, problem: str | None) -> MathVerdict:
    """The verdict for an extracted answer against the (localized) gold text."""
    from math_verify import verify

    if found.kind != "math_verify" and _norm(localize(found.text, cfg)) == _norm(gold_text):
        return MathVerdict("correct", True, found.text)
    gold = parse_gold(gold_text)
    if not gold:
        return MathVerdict("error", None, found.text)
    pred = _parse_pred(found, gold_text, gold, cfg)
    extracted = _extracted_text(found, pred)
    if not pred:  # math-verify found nothing it could read: no answer; a marker it cannot parse: wrong
        return MathVerdict("no_answer" if found.kind == "math_verify" else "incorrect",
                           None if found.kind == "math_verify" else False, extracted or None)
    gold, pred = _whole_strings(gold), _whole_strings(pred)
    if not gold or not pred:
        return MathVerdict("incorrect", False, extracted)
    if gold_list_ordered(gold, bare_lists_ordered(problem, cfg), is_unordered_gold(gold_text)):
        gold, pred = as_tuples(gold), as_tuples(pred)
    ok = verify(gold, pred, float_rounding=cfg.decimal_places, strict=cfg.strict_variables,
                allow_set_relation_comp=cfg.allow_set_relation_comp, timeout_seconds=None)
    return MathVerdict("correct" if ok else "incorrect", bool(ok), extracted)


def verify_math_batch(pairs: Sequence[tuple[str, str]], think_end: str | None = "</think>",
                      workers: int | None = None, timeout_s: float = 5.0, *, mode: str = "lenient",
                      compare: MathCompare | None = None,
                      problems: Sequence[str | None] | None = None) -> list[MathVerdict]:
    """Verdicts for many (response, answer) pairs, in order, over `workers` processes (default: all cores)
    with a `timeout_s` deadline per item (status "timeout", never an exception).

    mode: "lenient" (default; eval scores, SFT labels), "strict" or "official" (RL rewards); compare: `MathCompare`
    (default settings when None); problems: one problem text (or None) per pair, for the list-order rule."""
    _check_mode(mode)
    if problems is not None and len(problems) != len(pairs):
        raise ValueError(f"verify_math_batch: {len(pairs)} pairs but {len(problems)} problems")
    if not pairs:
        return []
    cfg = MathCompare.from_value(compare)
    items = [(r, a, problems[i] if problems is not None else None) for i, (r, a) in enumerate(pairs)]
    return get_pool(workers, verify_math).run(items, (think_end, mode, cfg), timeout_s)
