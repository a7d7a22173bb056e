"""MinHash signatures of grouped shingle hashes: one compiled loop (numba) or `hashing.minhash_matrix` (numpy).

Both compute, for every text r and permutation k, min over the text's shingles h of (a[k] * h + b[k]) mod 2^64
(datasketch's affine64 scheme), so their outputs are equal bit for bit (tests/test_dedup_speed.py). The numpy
form materialises a (chunk x num_perm) product per chunk and reduces it with `minimum.reduceat`; the compiled
loop keeps one row of minima in registers and never writes the products, ~3-5x faster at 100 permutations.
The compiled loop is used when the stage's `text_kernel` setting runs the kernel (numba installed), and shares
the kernel's on-disk cache folder (curate/text/kernel.py sets it), so a worker compiles it once per install.
"""

from __future__ import annotations

import numpy as np

from cotforge.curate.text.columns import use_kernel
from cotforge.curate.text.hashing import minhash_matrix

_compiled = None


def _minhash_loop():
    """The compiled loop, built on first use (importing numba costs ~1 s: only processes that sign pay it)."""
    global _compiled
    if _compiled is None:
        from numba import njit

        import cotforge.curate.text.kernel  # noqa: F401  (sets numba's cache folder before the first compile)

        @njit(cache=True, nogil=True)
        def loop(sh, starts, a, b, out):  # pragma: no cover - compiled
            n_perm = len(a)
            for r in range(len(starts) - 1):
                for j in range(starts[r], starts[r + 1]):
                    h = sh[j]
                    for k in range(n_perm):
                        v = a[k] * h + b[k]
                        if v < out[r, k]:
                            out[r, k] = v
            return out

        _compiled = loop
    return _compiled


def minhash_rows(shingles: np.ndarray, rows: np.ndarray, n_rows: int, a: np.ndarray, b: np.ndarray,
                 kernel: str = "auto") -> np.ndarray:
    """MinHash signatures (n_rows x len(a), uint64; rows without shingles stay at the uint64 maximum) of
    shingle hashes `shingles` belonging to texts `rows`, equal to `hashing.minhash_matrix`'s."""
    if not use_kernel(kernel) or len(shingles) == 0:
        return minhash_matrix(shingles, rows, n_rows, a, b)
    order = np.argsort(rows, kind="stable")
    starts = np.searchsorted(rows[order], np.arange(n_rows + 1))
    out = np.full((n_rows, len(a)), np.iinfo(np.uint64).max, dtype=np.uint64)
    return _minhash_loop()(np.ascontiguousarray(shingles[order], dtype=np.uint64), starts.astype(np.int64),
                           np.ascontiguousarray(a, dtype=np.uint64), np.ascontiguousarray(b, dtype=np.uint64), out)


__all__ = ["minhash_rows"]
