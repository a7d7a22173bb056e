"""Speed rewrites of decontamination give what the code they replace gave (issue 18, speed round)."""

from __future__ import annotations

import random
import re

from cotforge.curate.decontam.canon import _sub_names

ALPHABET = ["a", "b", "ab", "fn", "_", "1", "²", "é", "Ab", " ", "  ", "\t", "\n", "(", ")", ".", "\u3000", ",", "x"]


def _regex_sub(text: str, names: set[str], calls_only: bool) -> str:
    """The regex `rename_functions` compiled per text before (longest name first)."""
    alt = "|".join(re.escape(n) for n in sorted(names, key=lambda n: (-len(n), n)))
    return re.compile(r"\b(?:" + alt + r")\b" + (r"(?=\s*\()" if calls_only else "")).sub("fn", text)


def test_sub_names_equals_the_regex() -> None:
    rng = random.Random(0)
    pool = ["a", "ab", "ab_c", "b1", "fn", "x_y", "_a", "abab", "Ab"]
    changed = 0
    for _ in range(4000):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 30)))
        names = set(rng.sample(pool, rng.randint(1, 4)))
        for calls_only in (False, True):
            got = _sub_names(text, names, calls_only)
            assert got == _regex_sub(text, names, calls_only), (text, names, calls_only)
            changed += got != text
    assert changed > 500  # the fuzz exercises replacements, not only misses


def test_batch_runs_equal_per_pair_runs() -> None:
    import numpy as np

    from cotforge.curate.decontam.runs import batch_runs, pair_runs

    rng = np.random.default_rng(1)
    ihs, rhs, rposs = [], [], []
    for p in range(300):
        vocab = rng.integers(0, 2**63, size=rng.integers(1, 12), dtype=np.int64).astype(np.uint64)
        ih = vocab[rng.integers(0, len(vocab), size=rng.integers(0, 40))]  # repeated n-grams, empty items
        rh = vocab[rng.integers(0, len(vocab), size=rng.integers(0, 60))] if p % 7 else np.zeros(0, np.uint64)
        rpos = np.sort(rng.choice(200, size=len(rh), replace=False)).astype(np.int64)
        ihs.append(ih)
        rhs.append(rh)
        rposs.append(rpos)
    got = batch_runs(ihs, rhs, rposs, 8)
    runs = 0
    for p in range(300):
        want = pair_runs(ihs[p], rhs[p], rposs[p], 8)
        assert np.array_equal(got[p], want.reshape(-1, 3)), p
        runs += len(want)
    assert runs > 1000
    assert batch_runs([], [], [], 8) == []


def test_any_of_equals_contains_any() -> None:
    import polars as pl
    import pytest

    from cotforge.curate.text import mathmap
    from cotforge.curate.text.normalize import DEFAULT_NORM, any_of, normalized_wrappers

    for lits in ([w for w in normalized_wrappers(DEFAULT_NORM) if w.count(" ") >= 3], [k for k in mathmap.MATH if k.isascii()],
                 ["function", "code", "a.b", "x+y", "(c)", "[d]"]):
        texts = [f"x {w} y" for w in lits] + [f"x {w[:-1]}" for w in lits] + ["", "nothing", "a <= b", "ab", "c"]
        s = pl.Series(texts, dtype=pl.String)
        got = s.str.contains(any_of(lits))
        assert got.to_list() == s.str.contains_any(lits).to_list()
        assert got.sum() >= len(lits)
    with pytest.raises(ValueError):
        any_of([])
