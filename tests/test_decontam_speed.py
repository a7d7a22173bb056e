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
