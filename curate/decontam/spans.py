"""Where a match sits in the training row's ORIGINAL text (for the report): normalised word positions ->
character offsets.

The matcher knows the copy as normalised words [j0, j1) of the row. Normalisation drops and maps things
(LaTeX commands, wrappers, Unicode math), so words do not map 1:1 to the original's characters; plain
words do, though: the k-th occurrence of "collinear" among the normalised words is the k-th occurrence of
"collinear" as a whole word in the lower-cased original. `locate` anchors the span's start and end on such
words (alphabetic, >= 3 letters, not a name the normaliser writes itself), one regex search each, so it
costs about the same for a 60k-character response as for a prompt.
"""

from __future__ import annotations

from functools import lru_cache

from cotforge.curate.text import mathmap


@lru_cache(maxsize=1)
def _made_up() -> frozenset[str]:
    """Words the normaliser can write that need not be in the original (command names, Greek, symbols)."""
    names = {v.strip().lstrip("\\").split("[")[0].lower() for v in mathmap.MATH.values()}
    names |= {k.lower() for k in mathmap.COMMANDS} | {v for v in mathmap.COMMANDS.values() if v} | {"zzreq"}
    return frozenset(n for n in names if n)


def _plain(w: str) -> bool:
    return len(w) >= 3 and w.isascii() and w.isalpha() and w not in _made_up()


def _kth(lower: str, word: str, k: int) -> tuple[int, int] | None:
    """(start, end) of the k-th (0-based) whole-word occurrence of `word` in `lower` (not inside a longer
    alphabetic run; str.find, no regex per word)."""
    pos, seen, n = 0, 0, len(word)
    while True:
        at = lower.find(word, pos)
        if at < 0:
            return None
        before = lower[at - 1] if at else " "
        after = lower[at + n] if at + n < len(lower) else " "
        if not before.isalpha() and not after.isalpha():
            if seen == k:
                return at, at + n
            seen += 1
        pos = at + 1


def locate(text: str, words: list[str], j0: int, j1: int, probe: int = 12) -> tuple[int, int] | None:
    """Character span [start, end) of normalised words[j0:j1] in `text`, or None when no anchor is found.
    The span runs from the first plain word at or after j0 to the end of the last plain word before j1
    (so it may leave out a few symbols at either end)."""
    if not text or j1 <= j0:
        return None
    lower = text.lower()
    start = end = None
    for j in range(j0, min(j1, j0 + probe)):
        if _plain(words[j]):
            hit = _kth(lower, words[j], words[:j].count(words[j]))
            if hit:
                start = hit[0]
                break
    for j in range(j1 - 1, max(j0, j1 - probe) - 1, -1):
        if _plain(words[j]):
            hit = _kth(lower, words[j], words[:j].count(words[j]))
            if hit:
                end = hit[1]
                break
    if start is None or end is None or end <= start:
        return None
    return start, end
