"""How an extracted answer is compared with the gold: math-verify, with settings that fit the answer.

`MathCompare` holds the settings (defaults in brackets; examples in docs/curation.md, "Verification"):

* **Numbers.** math-verify decides first: exact/symbolic equality, or, when one side is a decimal, equality
  after rounding both to `decimal_places` [6] places (math-verify's ``float_rounding``). Where that rounding
  would keep fewer significant digits of the larger number than F = min(`min_sig_digits`, the digits the
  decimal is written with), both are compared at F significant digits instead: 2.88e-19 != 2.89e-19 (plain
  rounding makes both 0.000000), 4.6e-24 = 4.57e-24 (the gold gives 2 digits), 1e-7 != 0. Then:
  - `round_to_written` [on]: a decimal written with d >= 1 places stands for every number that rounds to it
    at d places (half away from zero), when the other side is more precise: exact with a decimal expansion
    longer than d + 2 places or none (1/3, 100/3, sqrt 2, pi/4), or a decimal written with >= d + 3 places;
    and the shorter decimal has >= `min_sig_digits` [3] significant digits. So 1/3 = 0.333 = 0.3333,
    8/3 = 2.6667, 0.290244 = 0.290243531; but 1/3 != 0.33 (2 digits), 2.5 != 2.46 and 2.5 != 49/20 = 2.45
    (too few places beyond the decimal), 6630.65 != 6630 (an integer is exact).
  - `rel_tol` [0, off]: also equal when |a - b| <= rel_tol * max(|a|, |b|) (Qwen2.5-Math's grader uses 1e-4;
    off by default because it accepts 6630 for 6630.65).
  These rules also apply entry by entry inside tuples, sets, intervals and matrices: math-verify 0.9's grader
  calls `sympy_numeric_eq` for every pair of numbers, and we wrap that function (`install_numeric_hook`).
* **Lists** (`list_order` ["auto"]). A set written ``\\{a, b\\}`` is unordered, and so is a gold written as
  several boxes or several math spans (``$21, 16$ or $11$``); a tuple ``(a, b)`` is ordered (math-verify). A *bare comma list* ``a, b`` (also several boxes read as one answer) is, under "auto":
  unordered when the problem text asks for all solutions/values/roots (``all``/``every`` + a plural noun), says
  "in any order" or "separated by commas" without asking for an order; ordered when the problem asks for an
  order ("in increasing order", "in order", "respectively", "ordered"); otherwise unordered when every item
  is a tuple/interval or a labelled assignment (``(1, 2), (2, 1)``; ``x = 1, y = 2``: items carry their own
  identity) and ordered in every other case (``10, 4, -2`` != ``4, 10, -2``). "ordered" / "unordered" force
  one reading for bare lists. The gold decides: a prediction is read the way the gold is.
* **Decimal comma** (`decimal_comma` [False]). False: math-verify's reading (``7,425,000`` and ``10,455`` are
  thousands separators, ``0,111`` is 0.111, otherwise a comma separates items: ``1000,99`` is {1000, 99}).
  True (data written with decimal commas): a comma between two digits is a decimal point in both gold and
  prediction (``1000,99`` = 1000.99, ``1.000,5`` = 1000.5); items must then be separated by ``;`` or ``, ``.
* **E-notation.** A whole answer written ``1e-5`` / ``3e8`` is 1·10^-5 / 3·10^8 (math-verify alone reads the
  ``e`` as Euler's number).
* **Variables, relations, intervals** as math-verify: `strict_variables` [True] (``f(x)`` != ``f(y)``; False
  matches variables by position), `allow_set_relation_comp` [False] (True lets a gold set ``x \\in [-2, 7]``
  match a predicted relation ``-2 <= x <= 7``; a predicted set always matches a gold relation); interval ends
  must agree in openness.
"""

from __future__ import annotations

import contextlib
import contextvars
import decimal
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

LIST_ORDERS = ("auto", "ordered", "unordered")


@dataclass(frozen=True)
class MathCompare:
    """Comparison settings for math verdicts (rules and examples in the module docstring)."""

    decimal_places: int = field(default=6, metadata={
        "help": "Decimal places both sides are rounded to when one is a decimal (math-verify's float_rounding)."})
    round_to_written: bool = field(default=True, metadata={
        "help": "A decimal equals a more precise value that rounds to it at the places it is written with."})
    min_sig_digits: int = field(default=3, metadata={
        "help": "Significant digits a decimal needs before round_to_written applies to it."})
    rel_tol: float = field(default=0.0, metadata={
        "help": "Relative tolerance for numbers, |a-b| <= rel_tol*max(|a|,|b|); 0 turns it off."})
    list_order: str = field(default="auto", metadata={
        "help": "Bare comma lists: auto (by the problem text and the items), ordered or unordered."})
    decimal_comma: bool = field(default=False, metadata={
        "help": "The data writes decimal commas: 1000,99 is 1000.99 (lists then need ';' or ', ')."})
    strict_variables: bool = field(default=True, metadata={
        "help": "Variable names matter (math-verify strict); False matches variables by position."})
    allow_set_relation_comp: bool = field(default=False, metadata={
        "help": "Let a gold set match a predicted relation (math-verify allow_set_relation_comp)."})
    plain_numbers: bool = field(default=True, metadata={
        "help": "Lenient mode without an answer marker: also read plain-text numbers/expressions, not only "
                "LaTeX spans (math-verify's ExprExtractionConfig)."})

    def __post_init__(self) -> None:
        if not isinstance(self.decimal_places, int) or not 0 <= self.decimal_places <= 30:
            raise ValueError(f"MathCompare.decimal_places: expected an int in 0..30, got {self.decimal_places!r}")
        if not isinstance(self.min_sig_digits, int) or self.min_sig_digits < 1:
            raise ValueError(f"MathCompare.min_sig_digits: expected an int >= 1, got {self.min_sig_digits!r}")
        if not isinstance(self.rel_tol, (int, float)) or not 0 <= self.rel_tol < 1:
            raise ValueError(f"MathCompare.rel_tol: expected a number in [0, 1), got {self.rel_tol!r}")
        if self.list_order not in LIST_ORDERS:
            raise ValueError(f"MathCompare.list_order: expected one of {LIST_ORDERS}, got {self.list_order!r}")

    @classmethod
    def from_value(cls, value: MathCompare | dict[str, Any] | None, where: str = "math_compare") -> MathCompare:
        """A MathCompare from itself, a mapping (recipes) or None (defaults); unknown keys name `where`."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            known = set(cls.__dataclass_fields__)
            bad = sorted(set(value) - known)
            if bad:
                raise ValueError(f"{where}: unknown key(s) {bad} (known: {sorted(known)})")
            return cls(**value)
        raise ValueError(f"{where}: expected a mapping or MathCompare, got {type(value).__name__}")


# ----------------------------------------------------------------------------- numbers

_ACTIVE: contextvars.ContextVar[MathCompare | None] = contextvars.ContextVar("math_compare", default=None)
_DEFAULT = MathCompare()
_ORIGINAL_NUMERIC_EQ: Any = None


@contextlib.contextmanager
def active(cfg: MathCompare) -> Iterator[None]:
    """Make `cfg` the settings the numeric hook sees (per thread/context) for the duration of the block."""
    token = _ACTIVE.set(cfg)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def _places_of_float(x: Any) -> int:
    """Decimal places a Float was written with (its shortest round-trip repr)."""
    exp = decimal.Decimal(repr(float(x))).normalize().as_tuple().exponent
    return max(0, -int(exp))


def _sig_digits(x: Any) -> int:
    return len(decimal.Decimal(repr(float(x))).normalize().as_tuple().digits)


def _exact_places(v: Any) -> float:
    """Places of an exact number's decimal expansion: Integer 0, p/q with q = 2^a 5^b max(a, b), else inf."""
    import sympy

    if v.is_Integer:
        return 0
    if v.is_Rational:
        q = int(v.q)
        a = b = 0
        while q % 2 == 0:
            q, a = q // 2, a + 1
        while q % 5 == 0:
            q, b = q // 5, b + 1
        return max(a, b) if q == 1 else float("inf")
    if isinstance(v, sympy.Float):
        return _places_of_float(v)
    return float("inf")


def _as_number(e: Any) -> Any:
    """`e` as a real sympy number (evaluated), or None."""
    try:
        e = e.doit() if hasattr(e, "doit") else e
        if getattr(e, "is_number", False) and e.is_real is not False and e.is_finite is not False:
            return e
    except Exception:  # sympy raises many kinds on odd input
        return None
    return None


def _rounds_to(value: Any, x: Any, places: int) -> bool:
    """round(value, places) half away from zero == the decimal x."""
    digits = places + 25
    v = decimal.Decimal(str(value.evalf(digits))).quantize(decimal.Decimal(1).scaleb(-places),
                                                           rounding=decimal.ROUND_HALF_UP)
    return v == decimal.Decimal(repr(float(x))).quantize(decimal.Decimal(1).scaleb(-places))


def written_places_eq(a: Any, b: Any, min_sig_digits: int = 3) -> bool:
    """The `round_to_written` rule (module docstring) for two sympy numbers."""
    import sympy

    for x, y in ((a, b), (b, a)):
        if not isinstance(x, sympy.Float) or not y.is_number:
            continue
        d = _places_of_float(x)
        if d < 1 or _sig_digits(x) < min_sig_digits:
            continue
        if _exact_places(y) >= d + 3 and _rounds_to(y, x, d):
            return True
    return False


def _written_digits(e: Any) -> int | None:
    """Significant digits the decimals in `e` were written with (the most of its Float atoms); None if none."""
    import sympy

    floats = [f for f in sympy.preorder_traversal(e) if isinstance(f, sympy.Float)]
    return max(_sig_digits(f) for f in floats) if floats else None


def _significant_eq(a: Any, b: Any, places: int, min_sig_digits: int) -> bool | None:
    """Two real numbers, at least one written as a decimal: when rounding at `places` decimal places keeps
    fewer significant digits of the larger than F = min(min_sig_digits, the digits the decimals were written
    with), both are compared at F significant digits of the larger instead (2.88e-19 != 2.89e-19, which
    plain rounding to 6 places makes equal as 0.000000). None when the rule does not apply."""
    import sympy

    written = [d for d in (_written_digits(a), _written_digits(b)) if d is not None]
    if not written or not (getattr(a, "is_number", False) and getattr(b, "is_number", False)):
        return None
    da, db = (decimal.Decimal(str(sympy.N(v, 30))) for v in (a, b))
    m = max(abs(da), abs(db))
    if m == 0:
        return None
    floor = min([min_sig_digits, *written])
    if places + m.adjusted() + 1 >= floor:  # plain rounding keeps enough digits: math-verify decides
        return None
    q = decimal.Decimal(1).scaleb(m.adjusted() - floor + 1)
    return da.quantize(q, decimal.ROUND_HALF_UP) == db.quantize(q, decimal.ROUND_HALF_UP)


def _numeric_eq(a: Any, b: Any, float_rounding: int, numeric_precision: int) -> bool:
    """math-verify's `sympy_numeric_eq` (or `_significant_eq` where rounding to decimal places would keep too
    few digits), then the written-places rule and `rel_tol` of the active settings."""
    cfg = _ACTIVE.get() or _DEFAULT
    try:
        sig = _significant_eq(a, b, float_rounding, cfg.min_sig_digits)
    except (TypeError, ValueError, ArithmeticError, decimal.InvalidOperation):
        sig = None
    if sig if sig is not None else _ORIGINAL_NUMERIC_EQ(a, b, float_rounding, numeric_precision):
        return True
    if not (cfg.round_to_written or cfg.rel_tol):
        return False
    x, y = _as_number(a), _as_number(b)
    if x is None or y is None:
        return False
    try:
        if cfg.round_to_written and written_places_eq(x, y, cfg.min_sig_digits):
            return True
        if cfg.rel_tol:
            fx, fy = float(x), float(y)
            return abs(fx - fy) <= cfg.rel_tol * max(abs(fx), abs(fy))
    except (TypeError, ValueError, ArithmeticError, decimal.InvalidOperation):
        return False
    return False


def install_numeric_hook() -> None:
    """Wrap math_verify.grader.sympy_numeric_eq (called for every number pair, also inside containers)."""
    global _ORIGINAL_NUMERIC_EQ
    import math_verify.grader as grader

    if _ORIGINAL_NUMERIC_EQ is None:
        if not callable(getattr(grader, "sympy_numeric_eq", None)):
            raise ImportError("math_verify.grader.sympy_numeric_eq is gone: this math-verify version is not "
                              "supported (pyproject pins >=0.9,<0.10)")
        _ORIGINAL_NUMERIC_EQ = grader.sympy_numeric_eq
        grader.sympy_numeric_eq = _numeric_eq


# ----------------------------------------------------------------------------- text normalisation

_THOUSANDS_DOT = re.compile(r"(?<![\d.])\d{1,3}(?:\.\d{3})+,\d+")
_DIGIT_COMMA = re.compile(r"(?<=\d),(?=\d)")
_FONT = re.compile(r"\\(?:textbf|mathbf|bf)\s*\{([^{}]*)\}")


_E_NOTATION = re.compile(r"^\s*(-?\d+(?:\.\d+)?)[eE]([+-]?\d+)\s*$")


def localize(text: str, cfg: MathCompare) -> str:
    """A whole answer in e-notation (``1e-5``, ``3e8``; math-verify reads ``e`` as Euler's number) as
    ``1\\times10^{-5}``; decimal commas to points when `cfg.decimal_comma` (module docstring)."""
    m = _E_NOTATION.match(text)
    if m:
        text = f"{m.group(1)}\\times10^{{{int(m.group(2))}}}"
    if not cfg.decimal_comma:
        return text
    text = _THOUSANDS_DOT.sub(lambda m: m.group(0).replace(".", ""), text)
    return _DIGIT_COMMA.sub(".", text)


def strip_fonts(text: str) -> str:
    """Drop bold wrappers (AIME answers written \\textbf{(051)})."""
    return _FONT.sub(lambda m: m.group(1).strip().strip("()"), text)


# ----------------------------------------------------------------------------- list order

_UNORDERED_CUE = re.compile(
    r"\b(?:all|every|each)\b[^.?!]{0,60}?\b(?:solutions|roots|values|zeros|zeroes|numbers|integers|pairs|triples"
    r"|points|possibilities|answers|x|n|k)\b|in any order|separated by commas|comma[- ]separated",
    re.IGNORECASE)
_ORDERED_CUE = re.compile(
    r"\bin (?:increasing|decreasing|ascending|descending|that|this|the given|the same)?\s*order\b|\brespectively\b"
    r"|\bordered\b(?! pairs?\b)|\bordered (?:list|sequence|tuple)\b", re.IGNORECASE)


def bare_lists_ordered(problem: str | None, cfg: MathCompare) -> bool | None:
    """Whether bare lists are ordered: True/False when settled by the setting or the problem text, None when
    the items decide (module docstring)."""
    if cfg.list_order != "auto":
        return cfg.list_order == "ordered"
    if problem:
        if _ORDERED_CUE.search(problem):
            return True
        if _UNORDERED_CUE.search(problem):
            return False
    return None


def _items_carry_identity(items: tuple[Any, ...]) -> bool:
    """Every item is a tuple/interval or a labelled assignment (x = 1): such lists are read as sets."""
    import sympy
    from math_verify.grader import is_assignment_relation

    return bool(items) and all(isinstance(i, (sympy.Tuple, sympy.Interval)) or is_assignment_relation(i)
                               for i in items)


def is_set_literal(text: str) -> bool:
    """The answer text is written as a set: \\{..\\} or \\left\\{..\\right\\}."""
    return "\\{" in text


_SPAN = re.compile(r"(?<!\\)\$[^$]+\$|\\\(.+?\\\)", re.DOTALL)


def is_unordered_gold(text: str) -> bool:
    """The gold is written as a set: a set literal \\{..\\}, several boxes (``\\boxed{2}, \\boxed{3}``) or,
    without boxes, several math spans (``$21, 16$ or $11$``: alternatives)."""
    from cotforge.curate.verify.math_extract import boxes, last_box_group

    if "\\{" in text:
        return True
    group = last_box_group(text)
    if group is not None:
        return len(group[1]) > 1
    return not boxes(text) and len(_SPAN.findall(text.replace("$$", "$"))) > 1


def gold_list_ordered(gold: list[Any], ordered: bool | None, set_literal: bool) -> bool:
    """Whether the gold's bare list (if any) is compared in order: never for a gold written as a set
    (`is_unordered_gold`); else `ordered` when settled (setting or problem text); else unless its items carry
    their own identity."""
    import sympy

    if set_literal or ordered is False:
        return False
    if ordered:
        return True
    for g in gold:
        items = getattr(g, "_unsorted_args", None)
        if isinstance(g, sympy.FiniteSet) and items is not None and len(items) > 1:
            return not _items_carry_identity(tuple(items))
    return False


def as_tuples(parsed: list[Any]) -> list[Any]:
    """Bare lists (math-verify FiniteSets that keep their written order) as tuples, compared item by item."""
    import sympy

    out = []
    for p in parsed:
        items = getattr(p, "_unsorted_args", None)
        if isinstance(p, sympy.FiniteSet) and items is not None and len(items) > 1:
            p = sympy.Tuple(*items)
        out.append(p)
    return out
