"""Compiled twins of two numpy helpers of `hashing.py` that decontamination runs on every word of a batch:
`ngram_hashes` (word n-gram hashes within each text) and `BitPrefilter.maybe` (one bit per hash's high bits).

numpy computes an n-gram hash in n multiply-add passes plus a boundary mask, a gather and five passes of
`fmix`, and the prefilter in seven; each pass reads and writes the whole array. One compiled loop per array
does the same arithmetic (uint64, wrapping) in one pass, so the results are bit for bit numpy's
(tests/test_decontam_speed.py). Imported only where the kernel is (`text/columns.use_kernel`).
"""

from __future__ import annotations

import numpy as np

from cotforge.curate.text import hashing
from cotforge.curate.text.hashing import BitPrefilter
from cotforge.curate.text.kernel import compiled


@compiled
def _ngram_kernel(wh, rows, n, out_h, out_r, out_s):
    """hashing.ngram_hashes into the out arrays; returns how many n-grams stay inside one text."""
    k = 0
    q = np.uint64(0x9E3779B97F4A7C15)  # hashing._Q, the word multiplier
    for i in range(len(wh) - n + 1):
        if rows[i] != rows[i + n - 1]:
            continue
        acc = np.uint64(0)
        for j in range(n):
            acc = acc * q + wh[i + j]
        x = acc ^ (acc >> np.uint64(30))
        x = x * np.uint64(0xBF58476D1CE4E5B9)
        x = x ^ (x >> np.uint64(27))
        x = x * np.uint64(0x94D049BB133111EB)
        out_h[k] = x ^ (x >> np.uint64(31))
        out_r[k] = rows[i]
        out_s[k] = i
        k += 1
    return k


@compiled
def _maybe_kernel(h, table, shift, out):
    for i in range(len(h)):
        idx = h[i] >> shift
        out[i] = (table[idx >> np.uint64(3)] >> (idx & np.uint64(7))) & np.uint8(1)


def ngram_hashes(wh: np.ndarray, rows: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`hashing.ngram_hashes(wh, rows, n)`: (hashes, text index, start word) of the word n-grams inside one text."""
    m = len(wh) - n + 1
    if m <= 0 or n < 1:
        return hashing.ngram_hashes(wh, rows, n)
    out_h, out_r, out_s = np.empty(m, np.uint64), np.empty(m, rows.dtype), np.empty(m, np.int64)
    k = _ngram_kernel(np.ascontiguousarray(wh, dtype=np.uint64), np.ascontiguousarray(rows), n, out_h, out_r, out_s)
    return out_h[:k], out_r[:k], out_s[:k]


def maybe(prefilter: BitPrefilter, h: np.ndarray) -> np.ndarray:
    """`prefilter.maybe(h)`: which hashes may be keys."""
    out = np.empty(len(h), dtype=np.uint8)
    if len(h):
        _maybe_kernel(np.ascontiguousarray(h, dtype=np.uint64), prefilter.table, np.uint64(prefilter.shift), out)
    return out.view(bool)
