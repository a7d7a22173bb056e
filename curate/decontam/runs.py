"""Aligned runs of equal word n-grams between benchmark items and rows: the copy check's first step.

`pair_runs` does one (item, row) pair; `batch_runs` does every candidate pair of a batch with one sort and one
binary search over all of them (the per-pair numpy calls cost more than the work on the short arrays of a
pair), and gives each pair exactly the runs `pair_runs` gives it, in the same order.
"""

from __future__ import annotations

import numpy as np

from cotforge.curate.text.hashing import U64, fmix

_PAIR_MIX = U64(0xD1B54A32D192ED03)  # odd multiplier spreading the pair number over the key


def pair_runs(ih: np.ndarray, rh: np.ndarray, rpos: np.ndarray, n: int) -> np.ndarray:
    """Maximal aligned runs of equal n-grams as word spans: rows of (item start, item end, row start). The
    (short) item side is sorted, the (possibly long) row side is looked up in it."""
    order = np.argsort(ih, kind="stable")
    ih_s = ih[order]
    lo, hi = np.searchsorted(ih_s, rh), np.searchsorted(ih_s, rh, side="right")
    cnt = hi - lo
    total = int(cnt.sum())
    if total == 0:
        return np.zeros((0, 3), dtype=np.int64)
    jj = np.repeat(rpos, cnt)
    ii = order[np.repeat(lo - np.cumsum(cnt) + cnt, cnt) + np.arange(total)]
    return _split_runs(np.zeros(total, dtype=np.int64), ii, jj, n)[0]


def _split_runs(p: np.ndarray, ii: np.ndarray, jj: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Equal n-gram hits (pair p, item position ii, row position jj) joined into maximal aligned runs: sorted by
    pair, diagonal jj - ii and item position, a run breaks where one of them does not continue. Returns the runs
    as rows of (item start, item end, row start) in that order, and the pair of each."""
    d = jj - ii
    o = np.lexsort((ii, d, p))
    p, ii, jj, d = p[o], ii[o], jj[o], d[o]
    brk = np.ones(len(ii), dtype=bool)
    brk[1:] = (p[1:] != p[:-1]) | (d[1:] != d[:-1]) | (ii[1:] != ii[:-1] + 1)
    starts = np.flatnonzero(brk)
    length = np.diff(np.append(starts, len(ii)))
    return np.stack([ii[starts], ii[starts] + length + n - 1, jj[starts]], axis=1), p[starts]


def batch_runs(ihs: list[np.ndarray], rhs: list[np.ndarray], rposs: list[np.ndarray], n: int) -> list[np.ndarray]:
    """`[pair_runs(ihs[p], rhs[p], rposs[p], n) for p in pairs]` in one pass: item and row n-grams of all pairs are
    keyed by (pair, hash) -- mixed into one uint64 to sort and search, then checked exactly, so a key collision
    cannot join n-grams of different pairs or hashes -- and runs are split where the pair, the diagonal or the
    item position changes."""
    npairs = len(ihs)
    empty = np.zeros((0, 3), dtype=np.int64)
    li = np.array([len(x) for x in ihs], dtype=np.int64)
    lr = np.array([len(x) for x in rhs], dtype=np.int64)
    if not npairs or not li.sum() or not lr.sum():
        return [empty] * npairs
    ih, rh = np.concatenate(ihs).astype(U64), np.concatenate(rhs).astype(U64)
    ip, rp = np.repeat(np.arange(npairs), li), np.repeat(np.arange(npairs), lr)
    ii_all = np.arange(len(ih)) - np.repeat(np.cumsum(li) - li, li)  # position within the item
    rj = np.concatenate(rposs).astype(np.int64)
    with np.errstate(over="ignore"):
        ki = fmix(ih ^ (ip.astype(U64) * _PAIR_MIX))
        kr = fmix(rh ^ (rp.astype(U64) * _PAIR_MIX))
    order = np.argsort(ki, kind="stable")
    ks = ki[order]
    lo, hi = np.searchsorted(ks, kr), np.searchsorted(ks, kr, side="right")
    cnt = hi - lo
    total = int(cnt.sum())
    if total == 0:
        return [empty] * npairs
    q = np.repeat(np.arange(len(kr)), cnt)
    it = order[np.repeat(lo - np.cumsum(cnt) + cnt, cnt) + np.arange(total)]
    ok = (ip[it] == rp[q]) & (ih[it] == rh[q])
    it, q = it[ok], q[ok]
    runs, run_pair = _split_runs(rp[q], ii_all[it], rj[q], n)
    bounds = np.searchsorted(run_pair, np.arange(npairs + 1))
    return [runs[bounds[k]:bounds[k + 1]] for k in range(npairs)]
