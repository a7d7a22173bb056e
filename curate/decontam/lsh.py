"""MinHash-LSH of the fuzzy tier as numpy arrays: datasketch's `MinHashLSH` banding, queried a batch at a time.

The fuzzy tier used to pickle a datasketch `MinHashLSH` at index build and unpickle it in every task (about
0.5 s per task, plus 0.9 s to import datasketch and scipy in every worker, 2.7 s to build and pickle it), then
query it one row at a time through a `MinHash` object. The candidates of an LSH query are exactly the entries
that share one whole band (r consecutive signature values) with the query, so this module stores, per band, the
entries' band hashes sorted, looks up all queries of a batch with one binary search per band, and verifies the
band values themselves (a band hash collision cannot add a candidate): the same candidate sets as datasketch's
`query` (whose bucket key is the band's raw bytes), for the same (b, r), which `optimal_params` chooses as
datasketch's `_optimal_param` does (tests/test_decontam_lsh.py checks both against datasketch).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from cotforge.curate.text.hashing import U64, fmix

_Q = U64(0x9E3779B97F4A7C15)


@lru_cache(maxsize=32)
def optimal_params(threshold: float, num_perm: int, fp_weight: float = 0.5, fn_weight: float = 0.5) -> tuple[int, int]:
    """(bands b, rows per band r) minimising the weighted false positive + false negative probability mass, as
    datasketch's `_optimal_param` (first minimum in its b-then-r order). Its integrands are polynomials of degree
    b*r <= num_perm, so Gauss-Legendre quadrature with num_perm/2 + 2 nodes is exact here (datasketch's adaptive
    one is accurate to ~1e-10); all (b, r) pairs at once, no scipy import."""
    pairs = np.array([(b, r) for b in range(1, num_perm + 1) for r in range(1, num_perm // b + 1)], dtype=np.float64)
    x, w = np.polynomial.legendre.leggauss(num_perm // 2 + 2)
    b, r = pairs[:, :1], pairs[:, 1:]

    def mass(lo: float, hi: float, miss: bool) -> np.ndarray:
        s = 0.5 * (hi - lo) * x[None, :] + 0.5 * (hi + lo)
        p = (1 - s ** r) ** b  # probability that no band matches at similarity s
        return 0.5 * (hi - lo) * ((p if miss else 1 - p) @ w)

    err = mass(0.0, threshold, False) * fp_weight + mass(threshold, 1.0, True) * fn_weight
    bb, rr = pairs[int(np.argmin(err))]
    return int(bb), int(rr)


def band_hashes(sigs: np.ndarray, b: int, r: int) -> np.ndarray:
    """(rows x b) uint64 hashes of each signature's b bands of r values (a polynomial combine, then fmix)."""
    out = np.empty((len(sigs), b), dtype=U64)
    with np.errstate(over="ignore"):
        for i in range(b):
            acc = np.zeros(len(sigs), dtype=U64)
            for j in range(i * r, (i + 1) * r):
                acc = acc * _Q + sigs[:, j]
            out[:, i] = fmix(acc)
    return out


class BandIndex:
    """Entries' MinHash signatures banded for lookup: per band, the entries sorted by band hash."""

    def __init__(self, sigs: np.ndarray, members: np.ndarray, b: int, r: int):
        """`sigs`: every entry's signature (entries x num_perm); `members`: the entries that are indexed."""
        self.sigs, self.b, self.r = sigs, b, r
        self.members = members.astype(np.int64)
        bh = band_hashes(sigs[self.members], b, r)
        self.order = np.argsort(bh, axis=0, kind="stable")  # per band: member positions by band hash
        self.sorted = np.take_along_axis(bh, self.order, axis=0)

    def query(self, qsigs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """All (query row, entry) pairs where the entry shares a whole band with the query signature, unique,
        sorted by query row then entry (what datasketch's `query` returns for each row, as sets)."""
        empty = np.zeros(0, dtype=np.int64)
        if not len(qsigs) or not len(self.members):
            return empty, empty
        qh = band_hashes(qsigs, self.b, self.r)
        rows, ents = [], []
        for i in range(self.b):
            col = self.sorted[:, i]
            lo, hi = np.searchsorted(col, qh[:, i]), np.searchsorted(col, qh[:, i], side="right")
            cnt = hi - lo
            if not cnt.any():
                continue
            q = np.repeat(np.arange(len(qsigs)), cnt)
            pos = np.repeat(lo - np.cumsum(cnt) + cnt, cnt) + np.arange(int(cnt.sum()))
            e = self.members[self.order[pos, i]]
            sl = slice(i * self.r, (i + 1) * self.r)
            same = (self.sigs[e, sl] == qsigs[q, sl]).all(axis=1)  # the band itself, not only its hash
            rows.append(q[same])
            ents.append(e[same])
        if not rows:
            return empty, empty
        n = len(self.sigs)
        pair = np.unique(np.concatenate(rows) * n + np.concatenate(ents))
        return pair // n, pair % n
