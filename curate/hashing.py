"""Vectorised hashing of normalised text: word and word n-gram hashes, MinHash signatures.

Shared by dedup (problem signatures) and decontamination (the benchmark n-gram index). Everything
works on a whole batch at once (texts joined by `BATCH_SEP`), so the per-row Python cost is nil.
"""

from __future__ import annotations

import numpy as np

from curate.normalize import BATCH_SEP

_U64 = np.uint64
_P = _U64(0x100000001B3)  # byte multiplier (odd)
_Q = _U64(0x9E3779B97F4A7C15)  # word multiplier for n-grams (odd)
_POW: list[np.ndarray] = [np.ones(1, dtype=_U64)]


def _powers(n: int) -> np.ndarray:
    """P^k mod 2^64 for k < n (k = byte position inside a word; cached)."""
    if len(_POW[0]) < n:
        p = np.full(max(n, 64), _P, dtype=_U64)
        p[0] = 1
        with np.errstate(over="ignore"):
            _POW[0] = np.cumprod(p, dtype=_U64)
    return _POW[0][:n]


def _fmix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: spreads polynomial hashes over all 64 bits."""
    with np.errstate(over="ignore"):
        x = x ^ (x >> _U64(30))
        x = x * _U64(0xBF58476D1CE4E5B9)
        x = x ^ (x >> _U64(27))
        x = x * _U64(0x94D049BB133111EB)
        return x ^ (x >> _U64(31))


def hash_words_bytes(y: bytes) -> tuple[np.ndarray, np.ndarray]:
    """64-bit hashes of the words of a normalised batch (bytes, rows split by \\x00) and each word's row.

    Vectorised over all bytes: h(word) = fmix(len + sum_k b_k P^k mod 2^64)."""
    if not y:
        return np.zeros(0, dtype=_U64), np.zeros(0, dtype=np.int64)
    arr = np.frombuffer(y, dtype=np.uint8)
    isw = (arr != 32) & (arr != 0)
    prev = np.concatenate(([False], isw[:-1]))
    nxt = np.concatenate((isw[1:], [False]))
    starts = np.flatnonzero(isw & ~prev)
    ends = np.flatnonzero(isw & ~nxt) + 1
    if len(starts) == 0:
        return np.zeros(0, dtype=_U64), np.zeros(0, dtype=np.int64)
    lens = ends - starts
    chars = np.flatnonzero(isw)
    first = np.concatenate(([0], np.cumsum(lens)[:-1]))
    word_of_char = np.repeat(np.arange(len(starts)), lens)
    pos = chars - starts[word_of_char]
    with np.errstate(over="ignore"):
        val = arr[chars].astype(_U64) * _powers(int(lens.max()))[pos]
        raw = np.add.reduceat(val, first) + lens.astype(_U64)
    rows = np.searchsorted(np.flatnonzero(arr == 0), starts).astype(np.int64)
    return _fmix(raw), rows


def word_hashes(norm_texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Word hashes of already-normalised texts (and each word's text index)."""
    return hash_words_bytes(BATCH_SEP.join(norm_texts).encode("utf-8"))


def ngram_hashes(wh: np.ndarray, rows: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hashes of all word n-grams that do not cross a text boundary: (hashes, text index, start word)."""
    m = len(wh) - n + 1
    if m <= 0:
        return np.zeros(0, dtype=_U64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    acc = np.zeros(m, dtype=_U64)
    with np.errstate(over="ignore"):
        for j in range(n):
            acc = acc * _Q + wh[j:j + m]
    ok = rows[:m] == rows[n - 1:]
    starts = np.flatnonzero(ok)
    return _fmix(acc[ok]), rows[:m][ok], starts




def affine_perms(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Affine permutations a*h + b mod 2^64 (a odd), datasketch's "affine64" scheme."""
    rng = np.random.RandomState(seed)
    a = rng.randint(1, 2**63 - 1, size=num_perm, dtype=np.int64).astype(_U64) * _U64(2) + _U64(1)
    b = rng.randint(0, 2**63 - 1, size=num_perm, dtype=np.int64).astype(_U64)
    return a, b


def minhash_matrix(shingles: np.ndarray, rows: np.ndarray, n_rows: int, a: np.ndarray, b: np.ndarray,
                   chunk: int = 8192) -> np.ndarray:
    """MinHash signatures (n_rows x num_perm, uint64) of grouped shingle hashes; empty rows stay max."""
    out = np.full((n_rows, len(a)), np.iinfo(np.uint64).max, dtype=_U64)
    if len(shingles) == 0:
        return out
    order = np.argsort(rows, kind="stable")
    shingles, rows = shingles[order], rows[order]
    for s in range(0, len(shingles), chunk):
        sh, rw = shingles[s:s + chunk], rows[s:s + chunk]
        with np.errstate(over="ignore"):
            ph = a[None, :] * sh[:, None] + b[None, :]
        bounds = np.flatnonzero(np.r_[True, rw[1:] != rw[:-1]])
        mins = np.minimum.reduceat(ph, bounds, axis=0)
        ids = rw[bounds]
        out[ids] = np.minimum(out[ids], mins)
    return out
