"""Vectorised hashing of normalised text: word and word n-gram hashes, MinHash signatures.

Shared by dedup (problem signatures) and decontamination (the benchmark n-gram index). Everything
works on a whole batch at once (texts joined by `BATCH_SEP`), so the per-row Python cost is nil.
"""

from __future__ import annotations

import numpy as np

from cotforge.curate.text.normalize import BATCH_SEP

U64 = np.uint64
_P = U64(0x100000001B3)  # byte multiplier (odd)
_Q = U64(0x9E3779B97F4A7C15)  # word multiplier for n-grams (odd)
_POW: list[np.ndarray] = [np.ones(1, dtype=U64)]


def _powers(n: int) -> np.ndarray:
    """P^k mod 2^64 for k < n (k = byte position inside a word; cached)."""
    if len(_POW[0]) < n:
        p = np.full(max(n, 64), _P, dtype=U64)
        p[0] = 1
        with np.errstate(over="ignore"):
            _POW[0] = np.cumprod(p, dtype=U64)
    return _POW[0][:n]


def fmix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: spreads polynomial hashes over all 64 bits."""
    with np.errstate(over="ignore"):
        x = x ^ (x >> U64(30))
        x = x * U64(0xBF58476D1CE4E5B9)
        x = x ^ (x >> U64(27))
        x = x * U64(0x94D049BB133111EB)
        return x ^ (x >> U64(31))


_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [2**64 - 1], dtype=U64)  # keep the low k bytes
_K1 = U64(0xD6E8FEB86659FD93)


def hash_spans(arr: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """64-bit hashes of the byte spans arr[start:start+len] (words).

    Vectorised per word, not per byte: a word's first 16 bytes are read as two little-endian uint64
    (unaligned loads), so h(word) = fmix(lo ^ fmix(hi + len * K1)) for words up to 16 bytes; longer
    words also add sum_k b_k P^k over their remaining bytes (rare, so computed per byte)."""
    buf = np.zeros(len(arr) + 16, dtype=np.uint8)
    buf[: len(arr)] = arr
    v = np.ndarray((len(arr) + 9,), dtype="<u8", buffer=buf, strides=(1,))  # v[i] = bytes i..i+7
    lo = v[starts] & _MASKS[np.minimum(lens, 8)]
    hi = v[starts + 8] & _MASKS[np.clip(lens - 8, 0, 8)]
    with np.errstate(over="ignore"):
        hi = hi + lens.astype(U64) * _K1
        long = np.flatnonzero(lens > 16)
        if len(long):
            hi[long] += _tail_sums(arr, starts[long] + 16, lens[long] - 16)
    return fmix(lo ^ fmix(hi))


def hash_words_bytes(y: bytes) -> tuple[np.ndarray, np.ndarray]:
    """64-bit hashes of the words of a normalised batch (bytes, rows split by \\x00) and each word's row."""
    if not y:
        return np.zeros(0, dtype=U64), np.zeros(0, dtype=np.int64)
    arr = np.frombuffer(y, dtype=np.uint8)
    isw = ((arr != 32) & (arr != 0)).view(np.int8)
    edge = np.diff(isw, prepend=np.int8(0), append=np.int8(0))
    starts = np.flatnonzero(edge == 1)
    if len(starts) == 0:
        return np.zeros(0, dtype=U64), np.zeros(0, dtype=np.int64)
    lens = np.flatnonzero(edge == -1) - starts
    cuts = np.searchsorted(starts, np.flatnonzero(arr == 0))  # words before each row separator
    rows = np.repeat(np.arange(len(cuts) + 1, dtype=np.int64), np.diff(cuts, prepend=0, append=len(starts)))
    return hash_spans(arr, starts, lens), rows


def hash_words_arrow(arr) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Word hashes of a normalised pyarrow LargeStringArray (words separated by single spaces, rows
    stripped: what `normalize_arrow` returns), read straight from its buffers: (hashes, row of each word,
    byte offset of each word in its row). The hashes equal `hash_words_bytes`'s for the same words."""
    n = len(arr)
    offs = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset:arr.offset + n + 1]
    lo, hi = int(offs[0]), int(offs[-1])
    empty = np.zeros(0, dtype=np.int64)
    if hi == lo:
        return np.zeros(0, dtype=U64), empty, empty
    t = np.frombuffer(arr.buffers()[2], dtype=np.uint8)[lo:hi]
    o = offs - lo
    sp = t == 32
    first = np.empty_like(sp)  # word starts: after a space, or a row's first byte
    first[0] = True
    first[1:] = sp[:-1]
    row_start = o[:-1][o[:-1] < o[1:]]  # starts of non-empty rows
    first[row_start] = True
    first &= ~sp
    starts = np.flatnonzero(first)
    ends = np.empty_like(sp)  # word ends: before a space, or a row's last byte
    ends[-1] = True
    ends[:-1] = sp[1:]
    ends[o[1:][o[1:] > o[:-1]] - 1] = True
    ends &= ~sp
    lens = np.flatnonzero(ends) + 1 - starts
    rows = np.searchsorted(o, starts, side="right") - 1
    return hash_spans(t, starts, lens), rows, starts - o[rows]


def _tail_sums(arr: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """sum_k b_k P^k mod 2^64 over arr[start:start+len] for each (start, len) (the bytes of long words
    past their first 16)."""
    first = np.concatenate(([0], np.cumsum(lens)[:-1]))
    owner = np.repeat(np.arange(len(starts)), lens)
    pos = np.arange(int(lens.sum())) - first[owner]
    with np.errstate(over="ignore"):
        val = arr[starts[owner] + pos].astype(U64) * _powers(int(lens.max()))[pos]
        return np.add.reduceat(val, first)


def word_hashes(norm_texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Word hashes of already-normalised texts (and each word's text index)."""
    return hash_words_bytes(BATCH_SEP.join(norm_texts).encode("utf-8"))


def ngram_hashes(wh: np.ndarray, rows: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hashes of all word n-grams that do not cross a text boundary: (hashes, text index, start word)."""
    m = len(wh) - n + 1
    if m <= 0:
        return np.zeros(0, dtype=U64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    acc = np.zeros(m, dtype=U64)
    with np.errstate(over="ignore"):
        for j in range(n):
            acc = acc * _Q + wh[j:j + m]
    ok = rows[:m] == rows[n - 1:]
    starts = np.flatnonzero(ok)
    return fmix(acc[ok]), rows[:m][ok], starts


def ngram_hashes_at(wh: np.ndarray, rows: np.ndarray, starts: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The n-gram hashes (as `ngram_hashes` computes them) starting at word positions `starts`, and a
    mask of those that stay inside one text (cheap when only a few positions are candidates)."""
    ok = starts + n <= len(wh)
    s = starts[ok]
    acc = np.zeros(len(s), dtype=U64)
    with np.errstate(over="ignore"):
        for j in range(n):
            acc = acc * _Q + wh[s + j]
    inside = np.zeros(len(starts), dtype=bool)
    inside[ok] = rows[s] == rows[s + n - 1]
    out = np.zeros(len(starts), dtype=U64)
    out[ok] = fmix(acc)
    return out, inside


def affine_perms(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Affine permutations a*h + b mod 2^64 (a odd), datasketch's "affine64" scheme."""
    rng = np.random.RandomState(seed)
    a = rng.randint(1, 2**63 - 1, size=num_perm, dtype=np.int64).astype(U64) * U64(2) + U64(1)
    b = rng.randint(0, 2**63 - 1, size=num_perm, dtype=np.int64).astype(U64)
    return a, b


def minhash_matrix(shingles: np.ndarray, rows: np.ndarray, n_rows: int, a: np.ndarray, b: np.ndarray,
                   chunk: int = 8192) -> np.ndarray:
    """MinHash signatures (n_rows x num_perm, uint64) of grouped shingle hashes; empty rows stay max."""
    out = np.full((n_rows, len(a)), np.iinfo(np.uint64).max, dtype=U64)
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


def sorted_lookup(sorted_keys: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position in `sorted_keys`, found) of each of `keys`: one binary search, empty-safe."""
    if not len(sorted_keys):
        return np.zeros(len(keys), dtype=np.int64), np.zeros(len(keys), dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return pos, sorted_keys[pos] == keys


class BitPrefilter:
    """Membership prefilter on the high bits of uint64 hashes: one bit per slot, 2^bits slots; a hash whose
    bit is clear is surely absent, a set bit needs the exact check (a binary search of the sorted keys)."""

    def __init__(self, keys: np.ndarray, bits_per_key: int = 64, min_bits: int = 20, max_bits: int = 30):
        n = max(len(keys), 1) * bits_per_key
        self.bits = int(min(max(n.bit_length(), min_bits), max_bits))
        self.shift = U64(64 - self.bits)
        self.table = np.zeros(1 << (self.bits - 3), dtype=np.uint8)
        if len(keys):
            idx = (keys >> self.shift).astype(np.int64)
            np.bitwise_or.at(self.table, idx >> 3, (1 << (idx & 7)).astype(np.uint8))

    def maybe(self, h: np.ndarray) -> np.ndarray:
        """Bool mask: which of `h` may be keys."""
        idx = (h >> self.shift).astype(np.int64)
        return ((self.table[idx >> 3] >> (idx & 7).astype(np.uint8)) & 1).astype(bool)
