"""Per-item metrics (avg@k, unbiased pass@k, maj@k with answer voting) and confidence intervals over items.

Definitions: see the `train.evaluate` module docstring."""

from __future__ import annotations

import math
import re
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k = 1 - C(n-c, k)/C(n, k), computed as 1 - prod_{i=n-c+1}^{n} (1 - k/i) for stability."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k: need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def avg_at_k(correct: Sequence[bool]) -> float:
    """Mean accuracy over an item's samples (avg@k); pass@1 estimated from all k samples."""
    if not correct:
        raise ValueError("avg_at_k: no samples")
    return sum(bool(c) for c in correct) / len(correct)


def normalize_answer(ans: str | None) -> str | None:
    """Cheap canonical form for voting: drop \\boxed{}, $, spaces, trailing dots, \\left/\\right, text{} wrappers."""
    if ans is None:
        return None
    s = str(ans).strip()
    m = re.fullmatch(r"\\boxed\{(.*)\}", s, flags=re.S)
    s = m.group(1) if m else s
    s = re.sub(r"\\(left|right|!|,|;|:)", "", s)
    s = re.sub(r"\\text\{([^{}]*)\}", r"\1", s)
    s = s.replace("$", "").replace(" ", "").rstrip(".")
    s = re.sub(r"^\{(.*)\}$", r"\1", s)
    s = re.sub(r"\\[dt]frac", r"\\frac", s)
    return s or None


def math_equivalent(a: str, b: str) -> bool:
    """math-verify equivalence of two extracted answers (timeouts only on the main thread, where they work)."""
    try:
        from math_verify import parse, verify
    except ImportError:  # pragma: no cover - math-verify is in the train extra
        return False
    main = threading.current_thread() is threading.main_thread()
    kw_p: dict[str, Any] = {} if main else {"parsing_timeout": None}
    kw_v: dict[str, Any] = {} if main else {"timeout_seconds": None}
    try:
        pa_, pb = parse(f"${a}$", **kw_p), parse(f"${b}$", **kw_p)
        return bool(pa_ and pb and verify(pa_, pb, **kw_v))
    except Exception:  # noqa: BLE001 - any parser failure means "not shown equivalent"
        return False


def maj_at_k(answers: Sequence[str | None], correct: Sequence[bool],
             equivalent: Callable[[str, str], bool] | None = None, max_groups: int = 8) -> bool:
    """Whether the majority-voted answer is correct.

    Votes: all correct samples form one group (they all equal the gold answer per the verifier); the others
    group by `normalize_answer`, then groups are merged with `equivalent` when there are at most `max_groups`
    of them (math-verify is the costly part). Unextracted answers do not vote. Ties: the earliest-seen group
    wins (deterministic; the correct group is not favoured).
    """
    if len(answers) != len(correct):
        raise ValueError(f"maj_at_k: {len(answers)} answers but {len(correct)} verdicts")
    keys: list[str] = []
    votes: Counter[str] = Counter()
    rep: dict[str, str] = {}
    for a, c in zip(answers, correct, strict=True):
        key = "\x00correct" if c else normalize_answer(a)
        if key is None:
            continue
        if key not in votes:
            keys.append(key)
            rep[key] = a or ""
        votes[key] += 1
    if not votes:
        return False
    wrong = [k for k in keys if k != "\x00correct"]
    if equivalent is not None and 1 < len(wrong) <= max_groups:
        for i, ka in enumerate(wrong):
            for kb in wrong[i + 1:]:
                if votes[ka] and votes[kb] and equivalent(rep[ka], rep[kb]):
                    votes[ka] += votes[kb]
                    votes[kb] = 0
    best = max(keys, key=lambda k: (votes[k], -keys.index(k)))
    return best == "\x00correct"


def mean_ci(values: Sequence[float], method: str = "bootstrap", level: float = 0.95, n_boot: int = 2000,
            seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high) over items: bootstrap percentile interval, or mean +- z * sd / sqrt(N)."""
    import numpy as np

    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("mean_ci: no values")
    mean = float(x.mean())
    if x.size == 1:
        return mean, mean, mean
    alpha = 1.0 - level
    if method == "normal":
        half = _normal_quantile(1 - alpha / 2) * float(x.std(ddof=1)) / math.sqrt(x.size)
        lo, hi = mean - half, mean + half
        if x.min() >= 0 and x.max() <= 1:  # proportions: keep the interval inside [0, 1]
            lo, hi = max(0.0, lo), min(1.0, hi)
        return mean, lo, hi
    if method != "bootstrap":
        raise ValueError(f"mean_ci: unknown method {method!r}")
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return mean, float(lo), float(hi)


def _normal_quantile(p: float) -> float:
    """Standard normal quantile via the inverse error function (statistics.NormalDist)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)
