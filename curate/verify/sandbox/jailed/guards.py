"""Guards in the test process against comparisons that hold for degenerate values (issue 30).

numpy and pytest treat an EMPTY array as equal to any scalar: `np.all(np.array([]) == 3)`,
`np.allclose([], 3)`, `np.testing.assert_allclose([], 3)` and `np.array([]) == pytest.approx(3)` are all
true (comparison broadcasts to an empty result, and "all of nothing" holds). A program returning an empty
array would pass every such test. So empty arrays the program returns reach the test as `ProgramArray` (an
ndarray subclass defined here, holding decoded data: no program code), whose binary comparisons (and the
subtraction `isclose` compares through) with a non-empty value raise AssertionError: an empty array the
program computed compared with a non-empty value is a failed comparison, never a vacuous pass. Equal
shapes, empty vs empty, and every other operation behave as numpy's. pytest's `approx` of a scalar gets the
same rule (it iterates the array's elements, so the ufunc guard does not see it).
"""

from __future__ import annotations

import functools

COMPARISONS = frozenset({"equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "subtract",
                         "isclose"})
MESSAGE = "an empty array compared with a non-empty value (degenerate comparison: a failure here)"


def _size(x) -> int:
    size = getattr(x, "size", None)
    if isinstance(size, int):
        return size
    if isinstance(x, list | tuple):
        return len(x)
    return 1  # a scalar


@functools.cache
def program_array_class():
    """The ndarray subclass for arrays the program returns (numpy imported on first use only)."""
    import numpy as np

    class ProgramArray(np.ndarray):
        """An array computed by the program (see the module docstring)."""

        def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
            if method == "__call__" and ufunc.nin == 2 and ufunc.__name__ in COMPARISONS:
                sizes = [_size(x) for x in inputs]
                mine = [isinstance(x, ProgramArray) for x in inputs]
                for i in (0, 1):
                    if mine[i] and sizes[i] == 0 and sizes[1 - i] > 0:
                        raise AssertionError(MESSAGE)
            plain = [x.view(np.ndarray) if isinstance(x, ProgramArray) else x for x in inputs]
            if "out" in kwargs:
                kwargs["out"] = tuple(o.view(np.ndarray) if isinstance(o, ProgramArray) else o
                                      for o in kwargs["out"])
            result = getattr(ufunc, method)(*plain, **kwargs)
            if isinstance(result, np.ndarray) and type(result) is np.ndarray:
                return result.view(ProgramArray)
            return result

    return ProgramArray


def program_array(arr):
    """`arr` (a decoded ndarray) as a ProgramArray when it is empty (the only degenerate case guarded: every
    other array reaches the test as the plain ndarray it is, so `type(x) is np.ndarray` still holds)."""
    return arr.view(program_array_class()) if arr.size == 0 else arr


def install_pytest_guard() -> None:
    """`pytest.approx(scalar) == empty array` is False (pytest compares element-wise over no elements)."""
    import pytest

    ApproxScalar = type(pytest.approx(1.0))  # noqa: N806 - a class (its module moved between pytest versions)
    if getattr(ApproxScalar.__eq__, "_cotforge_guard", False):
        return
    original = ApproxScalar.__eq__

    def __eq__(self, actual) -> bool:  # noqa: N807 - replaces the dunder
        if _size(actual) == 0 and hasattr(actual, "shape"):
            return False
        return original(self, actual)

    __eq__._cotforge_guard = True
    ApproxScalar.__eq__ = __eq__
