"""The vectorised part of matching: a batch of texts normalised, tokenised, hashed and looked up at once.

`HashedBatch` runs the shared normaliser (plus decontam/canon.py) and hashes words and rolling word n-grams, with
the compiled kernel or the polars / numpy path (`DecontamConfig.text_kernel`, curate/text/columns.py), and
`ngram_candidates` / `short_candidates` / `shingle_candidates` look them up in the index: a bit-array
prefilter on the hashes' high bits, then an exact binary search of the few that pass, then per (text, entry)
counts. Python per-row work starts only for the candidate pairs these return (`cotforge.curate.decontam.match`).
"""

from __future__ import annotations

import numpy as np

from cotforge.curate.decontam.canon import matcher_norm
from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.decontam.index import DecontamIndex
from cotforge.curate.text.columns import ngram_hashes, prefilter_maybe, use_kernel, word_and_ngram_hashes
from cotforge.curate.text.hashing import ngram_hashes_at, sorted_lookup


def _member(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a[i] in b, via a sorted copy of b (cheaper than np.isin for the small arrays used here)."""
    return sorted_lookup(np.sort(b), a)[1]


class HashedBatch:
    """A normalised batch and its word / n-gram hashes (computed once, used by every tier)."""

    def __init__(self, texts, cfg: DecontamConfig, known: frozenset[str] = frozenset()):
        self.kernel = cfg.text_kernel
        self.norm = matcher_norm(texts, cfg.norm, known, cfg.text_kernel)
        self.n = len(self.norm)
        self.wh, self.rows, self.h, self.hr, self.hs = word_and_ngram_hashes(self.norm, cfg.ngram, cfg.text_kernel)
        self.row_start = np.searchsorted(self.rows, np.arange(self.n + 1))  # first word of each row
        self.ng_start = np.searchsorted(self.hr, np.arange(self.n + 1))  # first n-gram of each row
        self._words: dict[int, list[str]] = {}
        self._texts: dict[int, str] = {}
        self._in_index: np.ndarray | None = None
        self._row_ngrams: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def text(self, r: int) -> str:
        """Normalised text of row r (made only for candidate rows)."""
        if r not in self._texts:
            self._texts[r] = self.norm[r].as_py()
        return self._texts[r]

    def words(self, r: int) -> list[str]:
        """Normalised words of row r (made only for candidate rows)."""
        if r not in self._words:
            t = self.text(r)
            self._words[r] = t.split(" ") if t else []
        return self._words[r]

    def n_words(self, r: int) -> int:
        return int(self.row_start[r + 1] - self.row_start[r])

    def row_ngrams(self, r: int, index: DecontamIndex | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(n-gram hashes, start word within the row) of row r; with `index`, only the n-grams some entry has
        (the others cannot be part of a copy; found for the whole batch at once, kept per row: a row is a
        candidate of several entries). Read-only arrays."""
        lo, hi = self.ng_start[r], self.ng_start[r + 1]
        h, pos = self.h[lo:hi], self.hs[lo:hi] - self.row_start[r]
        if index is None:
            return h, pos
        got = self._row_ngrams.get(r)
        if got is None:
            if self._in_index is None:
                m = prefilter_maybe(index.all_prefilter, self.h, self.kernel)
                m[m] = sorted_lookup(index.all_ngrams, self.h[m])[1]
                self._in_index = m
            keep = self._in_index[lo:hi]
            got = self._row_ngrams[r] = (h[keep], pos[keep])
            for a in got:
                a.flags.writeable = False
        return got


def ngram_candidates(index: DecontamIndex, hb: HashedBatch, cfg: DecontamConfig) -> tuple[np.ndarray, np.ndarray]:
    """(text, entry) pairs worth the copy check: the text holds >= `prefilter` of the entry's n-grams (and
    >= min_ngrams), or enough of them to be mostly a long copy of part of a long entry (row_fraction)."""
    empty = np.zeros(0, dtype=np.int64)
    if len(hb.h) == 0 or len(index.keys) == 0:
        return empty, empty
    cand = prefilter_maybe(index.prefilter, hb.h, hb.kernel)
    r2, e2, cnt = index.pair_counts(hb.h[cand], hb.hr[cand], index.keys, index.offsets, index.entry_of,
                                    len(index.entries))
    tot = index.n_ngrams[e2]
    ok = (cnt >= cfg.prefilter * tot) & (cnt >= np.minimum(cfg.min_ngrams, tot))
    row_tot = np.bincount(hb.hr, minlength=hb.n)[r2]
    ok |= (cnt >= cfg.diverge_chunk_words - cfg.ngram + 1) & (cnt >= 0.5 * cfg.row_fraction * row_tot)
    return r2[ok], e2[ok]


def short_candidates(index: DecontamIndex, hb: HashedBatch, min_words: int) -> list[tuple[int, int, int, int]]:
    """(text, entry, start word in the text, k) where a short key of >= `min_words` words (a whole short item
    or a short item's content) occurs as a whole, not glued to another number. Only positions whose first two
    words are those of some short key are hashed further (bigram hashes of the whole batch, bit prefilter)."""
    out: list[tuple[int, int, int, int]] = []
    if len(index.short) == 0 or len(hb.wh) < 2:
        return out
    b2, _, s2 = ngram_hashes(hb.wh, hb.rows, 2, hb.kernel)
    maybe = prefilter_maybe(index.short_prefilter, b2, hb.kernel)
    cand = s2[maybe][sorted_lookup(index.short_first2, b2[maybe])[1]]
    if not len(cand):
        return out
    ks = index.short[:, 0]
    lengths = np.unique(ks[ks >= min_words]).tolist()
    sels = [ks == k for k in lengths]
    for i, start, h in _short_hits(hb, cand, lengths, [index.short_h[sel] for sel in sels]):
        k = lengths[i]
        r = int(hb.rows[start])
        rw = hb.words(r)
        a = start - int(hb.row_start[r])
        b = a + k
        if (a > 0 and rw[a - 1].isdigit()) or (b < len(rw) and rw[b].isdigit()):
            continue
        out.extend((r, int(e), a, k) for e in index.short[sels[i], 1][index.short_h[sels[i]] == h].tolist())
    return out


def _short_hits(hb: HashedBatch, cand: np.ndarray, lengths: list[int], keys: list[np.ndarray]
                ) -> list[tuple[int, int, np.uint64]]:
    """(length index, start word, hash) of every lengths[i]-gram at a candidate position that is one of
    keys[i], by length then position: one compiled pass under the kernel (text/lookup.py), else numpy per
    length."""
    if use_kernel(hb.kernel):
        from cotforge.curate.text.lookup import keys_at

        js, ki, hs = keys_at(hb.wh, hb.rows, cand, lengths, keys)
        return list(zip(ki.tolist(), cand[js].tolist(), hs, strict=True))
    out = []
    for i, (k, kh) in enumerate(zip(lengths, keys, strict=True)):
        h, inside = ngram_hashes_at(hb.wh, hb.rows, cand, k)
        hit = inside & _member(h, kh) if len(h) else inside
        out += [(i, int(cand[j]), h[j]) for j in np.flatnonzero(hit).tolist()]
    return out


def shingle_candidates(index: DecontamIndex, hb: HashedBatch, cfg: DecontamConfig, todo: list[int]
                       ) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Texts among `todo` holding enough of some entry's rare shingles (half the fuzzy threshold) to be worth
    an LSH query: (those texts, and the batch's shingle hashes / text of each, restricted to them)."""
    empty = np.zeros(0, dtype=np.int64)
    if not todo:
        return [], empty, empty
    sh, sr, _ = ngram_hashes(hb.wh, hb.rows, cfg.fuzzy_ngram, hb.kernel)
    want = np.zeros(hb.n, dtype=bool)
    want[todo] = True
    m = want[sr]
    sh, sr = sh[m], sr[m]
    if len(sh) == 0:
        return [], empty, empty
    cand = prefilter_maybe(index.sh_prefilter, sh, hb.kernel)
    r2, e2, cnt = index.pair_counts(sh[cand], sr[cand], index.sh_keys, index.sh_koff, index.sh_ent, len(index.entries))
    ok = (cnt >= cfg.fuzzy_min_shingles) & (cnt >= 0.5 * cfg.fuzzy_threshold * index.n_rare[e2])
    rows = sorted(set(r2[ok].tolist()))
    keep = np.isin(sr, rows)
    return rows, sh[keep], sr[keep]
