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
from cotforge.curate.text.kernel import compiled, push_pair


@compiled
def _ngram_at(wh, s, n):
    """The n-gram hash of words s..s+n-1 (hashing.ngram_hashes: a polynomial in hashing._Q, then fmix)."""
    acc = np.uint64(0)
    for j in range(n):
        acc = acc * np.uint64(0x9E3779B97F4A7C15) + wh[s + j]
    x = acc ^ (acc >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@compiled
def _ngram_kernel(wh, rows, n, out_h, out_r, out_s):
    """hashing.ngram_hashes into the out arrays; returns how many n-grams stay inside one text."""
    k = 0
    for i in range(len(wh) - n + 1):
        if rows[i] != rows[i + n - 1]:
            continue
        out_h[k] = _ngram_at(wh, i, n)
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


@compiled
def _keys_at_kernel(wh, rows, cand, ks, k_off, keys, out_j, out_k):
    """For each length ks[i] (in order) and each position cand[j] (in order): the ks[i]-gram hash at cand[j]
    (`hashing.ngram_hashes_at`, inside one text) when it is among keys[k_off[i]:k_off[i + 1]] (sorted);
    returns the count of (j, i) pairs written, or -1 when the out arrays are too small."""
    n = 0
    nw = len(wh)
    for i in range(len(ks)):
        k = ks[i]
        lo = k_off[i]
        hi = k_off[i + 1]
        for j in range(len(cand)):
            s = cand[j]
            if s + k > nw or rows[s] != rows[s + k - 1]:
                continue
            x = _ngram_at(wh, s, k)
            a, b = lo, hi
            while a < b:
                m = (a + b) // 2
                if keys[m] < x:
                    a = m + 1
                else:
                    b = m
            if a < hi and keys[a] == x:
                n = push_pair(out_j, out_k, n, j, i)
                if n < 0:
                    return -1
    return n


def keys_at(wh: np.ndarray, rows: np.ndarray, cand: np.ndarray, ks: list[int], keys_by_k: list[np.ndarray]
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(position index j into `cand`, its length index i into `ks`, the hash) of every ks[i]-gram starting at
    cand[j] that stays inside one text and is one of keys_by_k[i]: what `ngram_hashes_at` + a membership test
    per length give, in the same order (by length, then position)."""
    sorted_keys = [np.sort(np.asarray(k, dtype=np.uint64)) for k in keys_by_k]
    k_off = np.zeros(len(ks) + 1, dtype=np.int64)
    k_off[1:] = np.cumsum([len(k) for k in sorted_keys])
    flat = np.concatenate(sorted_keys) if sorted_keys else np.zeros(0, dtype=np.uint64)
    ks_arr = np.asarray(ks, dtype=np.int64)
    cand = np.ascontiguousarray(cand, dtype=np.int64)
    cap = len(cand) + 1024
    while True:
        out_j, out_k = np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64)
        n = _keys_at_kernel(np.ascontiguousarray(wh, dtype=np.uint64), np.ascontiguousarray(rows), cand, ks_arr,
                            k_off, flat, out_j, out_k)
        if n >= 0:
            break
        cap *= 4
    out_j, out_k = out_j[:n], out_k[:n]
    h = np.zeros(n, dtype=np.uint64)
    for i in np.unique(out_k).tolist():
        sel = out_k == i
        h[sel] = hashing.ngram_hashes_at(wh, rows, cand[out_j[sel]], ks[i])[0]
    return out_j, out_k, h
