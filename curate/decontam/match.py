"""Benchmark decontamination: a hashed n-gram index with a copy check, plus a MinHash-LSH fuzzy tier.

How a training row is judged (prompt side, and separately the response side):

1. Text is normalised exactly like `curate.normalize.normalize` (case, whitespace, punctuation, LaTeX
   delimiters and spacing, code fences, stock instruction wrappers; numbers kept), but for a whole
   batch at once (`normalize_batch`), and cut into word n-grams (n = 8) hashed to uint64 with numpy.
2. **ngram tier** -- candidates are items sharing >= `prefilter` of their n-grams with the row (n-grams
   found in more than `max_item_df` benchmark items, e.g. shared preambles and stock phrases, are
   stop n-grams and do not count). A candidate is a copy when the longest chunk of the item that the
   row contains verbatim (after normalisation) covers >= `threshold` of the item's words and is
   >= `min_chunk_words` long (`diverge_chunk_words` when row and item both continue differently past
   the chunk; no minimum when it covers >= `full_fraction` of the item), no *other* part of the
   item matches elsewhere in the row, and the chunk is not bounded by two different numbers.
   A chunk may skip parts (>= `min_deleted_words`) of the item when the row continues seamlessly (the
   item with parts deleted, e.g. a LeetCode statement kept without its examples; a short deletion such as
   a dropped condition makes another problem); a row that is >= `row_fraction` such a copy,
   >= `diverge_chunk_words` long, counts even when it covers under `threshold` of a long item.
   Verbatim, re-spaced, wrapped, truncated and restated copies are one chunk; templated variants
   ("... 12 red marbles ..." vs "... 10 red marbles ...", an inserted condition) are several chunks
   or end at a different number, and are different problems. Stock phrases are short chunks.
   A prompt equal to an item after normalisation, or containing a whole item shorter than n words
   (not glued to another number), also counts (score 1.0).
3. **fuzzy tier** (prompt side, rows the n-gram tier did not flag) -- a vectorised rare-shingle
   prefilter, then datasketch MinHash-LSH over word `fuzzy_ngram`-shingles; a candidate counts when
   its shingle containment >= `fuzzy_threshold` and all of its numbers occur in the row.

The index is built once per run (curate/decontam_index.py: build_index) and loaded by every task
(`DecontamIndex`). DECONTAM_DEFAULTS_NOTE there says how the defaults were chosen (bench/decontam.py
reproduces the numbers).
"""

from __future__ import annotations

import copy
import json
import logging
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

from cotforge.curate.benchmarks import BenchmarkItem
from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.decontam.index import Entry, build_index, text_key
from cotforge.curate.text.hashing import (
    _U64,
    affine_perms,
    hash_words_bytes,
    minhash_matrix,
    ngram_hashes,
    ngram_hashes_at,
    sorted_lookup,
    word_hashes,
)
from cotforge.curate.text.normalize import fast_normalize, normalize_batch

log = logging.getLogger(__name__)

_BITMAP_SIZE = 1 << 23  # prefilter bit table slots
_SMALL_BITS = 1 << 16  # bit table for the first words of short items


def _member(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a[i] in b, via a sorted copy of b (cheaper than np.isin for the small arrays used here)."""
    return sorted_lookup(np.sort(b), a)[1]


@dataclass
class Match:
    """One (row, benchmark entry) match."""

    benchmark: str
    benchmark_id: str
    part: str
    match_kind: str
    side: str
    score: float
    entry: int

    def as_dict(self) -> dict[str, Any]:
        return {"benchmark": self.benchmark, "benchmark_id": self.benchmark_id, "part": self.part,
                "match_kind": self.match_kind, "side": self.side, "score": round(self.score, 4)}


@dataclass
class _Hashed:
    """A normalised batch and its word / n-gram hashes (computed once, used by every tier)."""

    norms: list[str]
    wh: np.ndarray
    rows: np.ndarray
    h: np.ndarray
    hr: np.ndarray
    hs: np.ndarray  # start word (global index) of each n-gram

    @classmethod
    def of(cls, texts: list[str | None], cfg: DecontamConfig) -> _Hashed:
        y, norms = normalize_batch(texts, cfg.norm)
        wh, rows = hash_words_bytes(y)
        h, hr, hs = ngram_hashes(wh, rows, cfg.ngram)
        return cls(norms, wh, rows, h, hr, hs)

    def row_slice(self, arr_rows: np.ndarray, r: int) -> slice:
        return slice(int(np.searchsorted(arr_rows, r)), int(np.searchsorted(arr_rows, r, side="right")))


class DecontamIndex:
    """The loaded index: finds matches for batches of texts."""

    ARRAYS = ("keys", "offsets", "entry_of", "ent_ng", "ent_ng_off", "shingles", "sh_offsets", "sh_keys", "sh_koff", "sh_ent", "n_rare", "sigs", "exact", "short", "short_h")

    def __init__(self, index_dir: str | Path):
        d = self.dir = Path(index_dir)
        meta = json.loads((d / "entries.json").read_text())
        self.cfg_dict = meta["config"]
        self.entries = [Entry(**e) for e in meta["entries"]]
        for k in self.ARRAYS:
            setattr(self, k, np.load(d / f"{k}.npy"))
        self.n_ngrams = np.array([e.n_ngrams for e in self.entries], dtype=np.int64)
        self.exact_map: dict[int, list[int]] = {}
        for k, i in self.exact.tolist():
            self.exact_map.setdefault(int(k), []).append(int(i))
        self._lsh = None
        self._entry_cache: dict[tuple[int, int], tuple[list[str], np.ndarray]] = {}
        self._cache: dict[int, list[tuple[int, str, float]]] = {}  # prompt hash -> prompt-side verdicts
        self._cache_cfg: DecontamConfig | None = None  # the config those verdicts were made with
        # prefilter: a bit-per-slot table on the low hash bits skips most binary searches
        self.bitmap = np.zeros(_BITMAP_SIZE, dtype=bool)
        self.bitmap[(self.keys & _U64(_BITMAP_SIZE - 1)).astype(np.int64)] = True
        # short items: a small bit table and the sorted hashes of their first words
        short_wh, short_rows = word_hashes([self.entries[e].norm for e in self.short[:, 1].tolist()])
        starts = np.flatnonzero(np.r_[True, short_rows[1:] != short_rows[:-1]]) if len(short_rows) else short_rows
        self.short_first = np.unique(short_wh[starts])
        self.short_first_bits = np.zeros(_SMALL_BITS, dtype=bool)
        self.short_first_bits[(self.short_first & _U64(_SMALL_BITS - 1)).astype(np.int64)] = True
        self.sh_bitmap = np.zeros(_BITMAP_SIZE, dtype=bool)
        self.sh_bitmap[(self.sh_keys & _U64(_BITMAP_SIZE - 1)).astype(np.int64)] = True

    @classmethod
    def build(cls, benchmarks: dict[str, list[BenchmarkItem]], cfg: DecontamConfig, out_dir: str | Path):
        """Build, save and load an index in one call (tests, benchmarks)."""
        build_index(benchmarks, cfg, out_dir)
        return cls(out_dir)

    @staticmethod
    def pair_counts(h: np.ndarray, hr: np.ndarray, keys: np.ndarray, offsets: np.ndarray, entry_of: np.ndarray,
                    n_entries: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(text, entry, number of distinct shared keys) for every text/entry sharing a key."""
        empty = np.zeros(0, dtype=np.int64)
        if len(h) == 0 or len(keys) == 0:
            return empty, empty, empty
        order = np.argsort(h)  # sorted queries make the binary searches cache-friendly
        h, hr = h[order], hr[order]
        pos, hit = sorted_lookup(keys, h)
        if not hit.any():
            return empty, empty, empty
        nk = len(keys)
        pr = np.unique(hr[hit] * nk + pos[hit])  # distinct (text, key)
        r, k = pr // nk, pr % nk
        lens = offsets[k + 1] - offsets[k]
        rr = np.repeat(r, lens)
        idx = np.repeat(offsets[k] - np.cumsum(lens) + lens, lens) + np.arange(len(rr))
        ee = entry_of[idx].astype(np.int64)
        pe, cnt = np.unique(rr * n_entries + ee, return_counts=True)
        return pe // n_entries, pe % n_entries, cnt

    # ---- n-gram tier
    def ngram_matches(self, hb: _Hashed, cfg: DecontamConfig, threshold: float) -> dict[int, list[tuple[int, float]]]:
        """Per text index: [(entry, containment)] passing the containment rule (and the number check)."""
        out: dict[int, list[tuple[int, float]]] = {}
        if len(hb.h) == 0 or len(self.keys) == 0:
            return out
        cand = self.bitmap[(hb.h & _U64(_BITMAP_SIZE - 1)).astype(np.int64)]
        r2, e2, cnt = self.pair_counts(hb.h[cand], hb.hr[cand], self.keys, self.offsets, self.entry_of,
                                       len(self.entries))
        tot = self.n_ngrams[e2]
        cont = cnt / np.maximum(tot, 1)
        ok = (cont >= cfg.prefilter) & (cnt >= np.minimum(cfg.min_ngrams, tot))
        # or the row is mostly a long copy of part of a long item (see row_fraction in chunk_score)
        row_tot = np.bincount(hb.hr, minlength=len(hb.norms))[r2]
        ok |= (cnt >= cfg.diverge_chunk_words - cfg.ngram + 1) & (cnt >= 0.5 * cfg.row_fraction * row_tot)
        for ri, ei in zip(r2[ok].tolist(), e2[ok].tolist(), strict=True):
            sc = self.chunk_score(hb, ri, ei, cfg)
            if sc >= threshold:
                out.setdefault(ri, []).append((ei, float(sc)))
        return out

    def _entry_ngrams(self, e: int, n: int) -> tuple[list[str], np.ndarray]:
        key = (e, n)
        if key not in self._entry_cache:
            norm = self.entries[e].norm
            if n == self.cfg_dict["ngram"]:
                h = self.ent_ng[self.ent_ng_off[e]:self.ent_ng_off[e + 1]]
            else:
                wh, rows = word_hashes([norm])
                h, _, _ = ngram_hashes(wh, rows, n)
            self._entry_cache[key] = (norm.split(" ") if norm else [], h)
        return self._entry_cache[key]

    def chunk_score(self, hb: _Hashed, r: int, e: int, cfg: DecontamConfig) -> float:
        """Share of the item's words in the longest chunk the row copies verbatim (after normalisation),
        or 0.0 when the match looks like an edited variant rather than a copy.

        A copy -- verbatim, re-spaced, wrapped, truncated, restated -- is one contiguous chunk of the
        item. A templated variant (same sentence, other numbers or an inserted condition) matches the
        item in several chunks on different alignments, or the chunk is bounded by two different
        numbers; those are different problems and score 0."""
        n = cfg.ngram
        if f" {self.entries[e].norm} " in f" {hb.norms[r]} ":  # the whole item, verbatim after normalisation
            return 1.0
        iw, ih = self._entry_ngrams(e, n)
        sl = hb.row_slice(hb.hr, r)
        rh, rpos = hb.h[sl], hb.hs[sl] - int(np.searchsorted(hb.rows, r))
        if len(ih) == 0 or len(rh) == 0:
            return 0.0
        order = np.argsort(rh, kind="stable")
        rh_s, rpos_s = rh[order], rpos[order]
        lo, hi = np.searchsorted(rh_s, ih), np.searchsorted(rh_s, ih, side="right")
        cnt = hi - lo
        if cnt.sum() == 0:
            return 0.0
        ii = np.repeat(np.arange(len(ih)), cnt)
        jj = rpos_s[np.repeat(lo - np.cumsum(cnt) + cnt, cnt) + np.arange(int(cnt.sum()))]
        d = jj - ii
        o = np.lexsort((ii, d))
        ii, jj, d = ii[o], jj[o], d[o]
        brk = np.ones(len(ii), dtype=bool)
        brk[1:] = (d[1:] != d[:-1]) | (ii[1:] != ii[:-1] + 1)
        run_id = np.cumsum(brk) - 1
        run_len = np.bincount(run_id)
        starts = np.flatnonzero(brk)
        best = int(np.argmax(run_len))
        rw = hb.norms[r].split(" ")
        # merge runs on the same alignment separated by a few non-numeric substituted words ("Find" ->
        # "Determine"): still a copy. Numbers or more than `max_substitutions` words: an edited variant.
        same = [k for k in range(len(run_len)) if d[starts[k]] == d[starts[best]]]
        pos = same.index(best)
        lo_k = hi_k = pos
        subs = 0
        dd = int(d[starts[best]])

        def gap(k1: int, k2: int) -> list[int]:
            a_ = int(ii[starts[same[k1]]]) + int(run_len[same[k1]]) + n - 1
            return list(range(a_, int(ii[starts[same[k2]]])))

        for step in (-1, 1):
            k = pos
            while 0 <= k + step < len(same):
                g = gap(k + step, k) if step < 0 else gap(k, k + step)
                if subs + len(g) > cfg.max_substitutions or any(
                        iw[x].isdigit() or (0 <= x + dd < len(rw) and rw[x + dd].isdigit()) for x in g):
                    break
                subs += len(g)
                k += step
            lo_k, hi_k = (k, hi_k) if step < 0 else (lo_k, k)
        i0 = int(ii[starts[same[lo_k]]])
        j0 = i0 + dd
        i1 = int(ii[starts[same[hi_k]]]) + int(run_len[same[hi_k]]) + n - 1
        j1 = i1 + dd
        segs = self._deletion_joins([(i0, i1, j0)], ii[starts], jj[starts], run_len + n - 1, cfg.min_deleted_words)
        i0, j0 = segs[0][0], segs[0][2]
        i1, j1 = segs[-1][1], segs[-1][2] + segs[-1][1] - segs[-1][0]
        chunk = sum(b - a for a, b, _ in segs)
        # other parts of the item matched at other places of the row: an edited variant, not a copy
        # (repeats inside the copied chunks, on either side, are fine)
        in_i = np.zeros(len(ii), dtype=bool)
        in_j = np.zeros(len(jj), dtype=bool)
        for a, b, j in segs:
            in_i |= (ii >= a) & (ii + n <= b)
            in_j |= (jj >= j) & (jj + n <= j + b - a)
        if np.any(~in_i & ~in_j):
            return 0.0
        if cfg.verify_numbers:
            if i1 < len(iw) and j1 < len(rw) and iw[i1].isdigit() and rw[j1].isdigit():
                return 0.0  # chunk ends where the row and the item have different numbers
            if i0 > 0 and j0 > 0 and iw[i0 - 1].isdigit() and rw[j0 - 1].isdigit():
                return 0.0
        rlen = hb.norms[r].count(" ") + 1
        diverge = (i1 < len(iw) and j1 < rlen) or (i0 > 0 and j0 > 0)  # both texts go on differently
        share = chunk / max(len(iw), 1)
        if share >= cfg.full_fraction:
            return share
        if chunk < (cfg.diverge_chunk_words if diverge else cfg.min_chunk_words):
            return 0.0
        if chunk >= cfg.diverge_chunk_words and chunk / rlen >= cfg.row_fraction:
            return max(share, chunk / rlen)  # the row is mostly a long copy of part of the item
        return share

    @staticmethod
    def _deletion_joins(segs: list[tuple[int, int, int]], run_i: np.ndarray, run_j: np.ndarray,
                        run_w: np.ndarray, min_gap: int) -> list[tuple[int, int, int]]:
        """Extend a copied chunk [(item start, item end, row start)] with runs that continue it in the row
        right where it stops but resume >= `min_gap` words later in the item: the row is the item with
        whole parts deleted (LeetCode statements without their examples and constraints). An insertion
        or a changed word leaves a gap in the row, and a short deletion (a dropped condition: another
        problem) a short gap in the item; neither is joined."""
        while True:  # forward: a run starting in the row exactly where the last segment ends
            a, b, j = segs[-1]
            k = np.flatnonzero((run_j == j + b - a) & (run_i >= b + min_gap))
            if not len(k):
                break
            k = int(k[np.argmin(run_i[k])])
            segs.append((int(run_i[k]), int(run_i[k] + run_w[k]), int(run_j[k])))
        while True:  # backward: a run ending in the row exactly where the first segment starts
            a, b, j = segs[0]
            k = np.flatnonzero((run_j + run_w == j) & (run_i + run_w <= a - min_gap))
            if not len(k):
                break
            k = int(k[np.argmax(run_i[k])])
            segs.insert(0, (int(run_i[k]), int(run_i[k] + run_w[k]), int(run_j[k])))
        return segs

    def exact_matches(self, hb: _Hashed) -> dict[int, list[tuple[int, float]]]:
        """Texts equal to an entry after normalisation."""
        out: dict[int, list[tuple[int, float]]] = {}
        for i, t in enumerate(hb.norms):
            if t:
                for e in self.exact_map.get(text_key(t), []):
                    out.setdefault(i, []).append((e, 1.0))
        return out

    def short_matches(self, hb: _Hashed) -> dict[int, list[tuple[int, float]]]:
        """Items shorter than n words found as a whole inside a text (not next to another number).
        Only positions whose word is the first word of some short item are hashed."""
        out: dict[int, list[tuple[int, float]]] = {}
        if len(self.short) == 0 or len(hb.wh) == 0:
            return out
        cand = np.flatnonzero(self.short_first_bits[(hb.wh & _U64(_SMALL_BITS - 1)).astype(np.int64)])
        cand = cand[_member(hb.wh[cand], self.short_first)] if len(cand) else cand
        for k in np.unique(self.short[:, 0]).tolist():
            sel = self.short[:, 0] == k
            kh, ke = self.short_h[sel], self.short[sel, 1]
            h, inside = ngram_hashes_at(hb.wh, hb.rows, cand, k)
            hit = inside & _member(h, kh) if len(h) else inside
            for j in np.flatnonzero(hit).tolist():
                start = int(cand[j])
                r = int(hb.rows[start])
                first = int(np.searchsorted(hb.rows, r))
                rw = hb.norms[r].split(" ")
                a, b = start - first, start - first + k
                if (a > 0 and rw[a - 1].isdigit()) or (b < len(rw) and rw[b].isdigit()):
                    continue
                for e in ke[kh == h[j]].tolist():
                    out.setdefault(r, []).append((int(e), 1.0))
        return out

    # ---- fuzzy tier
    def _fuzzy_numbers_ok(self, row_norm: str, e: int) -> bool:
        """A reformatted copy keeps the item's numbers: every number of the item occurs in the row."""
        item_nums = {w for w in self.entries[e].norm.split(" ") if w.isdigit()}
        return item_nums <= {w for w in row_norm.split(" ") if w.isdigit()}

    def _get_lsh(self):
        if self._lsh is None:
            with open(self.dir / "lsh.pkl", "rb") as fh:
                self._lsh = pickle.load(fh)
        return self._lsh

    def fuzzy_matches(self, hb: _Hashed, cfg: DecontamConfig, todo: list[int]) -> dict[int, list[tuple[int, float]]]:
        """MinHash-LSH candidates among `todo` texts with enough rare benchmark shingles, kept when the
        item's shingle containment >= fuzzy_threshold and its numbers all occur in the text."""
        from datasketch import MinHash

        out: dict[int, list[tuple[int, float]]] = {}
        if not todo:
            return out
        sh, sr, _ = ngram_hashes(hb.wh, hb.rows, cfg.fuzzy_ngram)
        want = np.zeros(len(hb.norms), dtype=bool)
        want[todo] = True
        m = want[sr]
        sh, sr = sh[m], sr[m]
        if len(sh) == 0:
            return out
        cand = self.sh_bitmap[(sh & _U64(_BITMAP_SIZE - 1)).astype(np.int64)]
        r2, e2, cnt = self.pair_counts(sh[cand], sr[cand], self.sh_keys, self.sh_koff, self.sh_ent, len(self.entries))
        # prefilter: enough of some item's rare shingles (half the final threshold) to be worth an LSH query
        ok = (cnt >= cfg.fuzzy_min_shingles) & (cnt >= 0.5 * cfg.fuzzy_threshold * self.n_rare[e2])
        todo = sorted(set(r2[ok].tolist()))
        if not todo:
            return out
        lsh = self._get_lsh()
        a, b = affine_perms(cfg.num_perm, cfg.seed)
        perms = np.stack([a, b])
        keep = np.isin(sr, todo)
        sh, sr = sh[keep], sr[keep]
        sigs = minhash_matrix(sh, sr, len(hb.norms), a, b)
        order = np.argsort(sr, kind="stable")
        sh_sorted, sr_sorted = sh[order], sr[order]
        for i in todo:
            cands = lsh.query(MinHash(hashvalues=sigs[i], permutations=perms, scheme="affine64"))
            if not cands:
                continue
            lo, hi = np.searchsorted(sr_sorted, i), np.searchsorted(sr_sorted, i, side="right")
            mine = np.unique(sh_sorted[lo:hi])
            for e in sorted(cands):
                theirs = self.shingles[self.sh_offsets[e]:self.sh_offsets[e + 1]]
                c = np.isin(theirs, mine, assume_unique=True).sum() / max(len(theirs), 1)
                if c >= cfg.fuzzy_threshold and (not cfg.verify_numbers or self._fuzzy_numbers_ok(hb.norms[i], e)):
                    out.setdefault(i, []).append((e, float(c)))
        return out

    # ---- everything for a batch
    PROMPT_CACHE_SIZE = 100_000  # prompts whose verdicts are remembered (SFT data repeats each problem per response)

    def clear_cache(self) -> None:
        """Forget cached prompt verdicts (benchmarks time cold runs)."""
        self._cache = {}

    def prompt_side(self, prompts: list[str], cfg: DecontamConfig) -> list[list[tuple[int, str, float]]]:
        """Prompt-side matches [(entry, kind, score)] per prompt: exact, n-gram, short item, then fuzzy for
        prompts nothing else flagged. Each distinct prompt is matched once; verdicts are cached per config
        (a copy of it, so a config changed in place starts a new cache), keyed by a 128-bit hash of the
        prompt so the cache stays small whatever the prompts' length."""
        if self._cache_cfg != cfg or len(self._cache) > self.PROMPT_CACHE_SIZE:
            self._cache, self._cache_cfg = {}, copy.copy(cfg)
        keys = [xxhash.xxh3_128_intdigest(p.encode("utf-8", "surrogatepass")) for p in prompts]
        todo_at = {k: i for i, k in enumerate(keys) if k not in self._cache}  # distinct uncached prompts
        if todo_at:
            todo = [prompts[i] for i in todo_at.values()]
            res: dict[int, dict[int, tuple[str, float]]] = {}  # only flagged prompts get an entry

            def add(found: dict[int, list[tuple[int, float]]], kind: str) -> None:
                for i, lst in found.items():
                    d = res.setdefault(i, {})
                    for e, sc in lst:
                        if e not in d or sc > d[e][1]:
                            d[e] = (kind, sc)

            hp = _Hashed.of(todo, cfg)
            add(self.exact_matches(hp), "ngram")
            add(self.ngram_matches(hp, cfg, cfg.threshold), "ngram")
            add(self.short_matches(hp), "ngram")
            if cfg.fuzzy:
                add(self.fuzzy_matches(hp, cfg, [i for i in range(len(todo)) if i not in res]), "fuzzy")
            for i, k in enumerate(todo_at):
                self._cache[k] = [(e, kind, sc) for e, (kind, sc) in res.get(i, {}).items()]
        return [self._cache[k] for k in keys]

    def match_batch(self, prompts: list[str | None], responses: list[str | None],
                    cfg: DecontamConfig) -> list[list[Match]]:
        """All matches per row: prompt side (exact, n-gram, short item, fuzzy), then the response side
        (n-gram, short item) of rows the prompt side did not flag."""
        found = self.prompt_side([p or "" for p in prompts], cfg)
        res: dict[int, dict[tuple[int, str], tuple[str, float]]] = {  # flagged rows only
            i: {(e, "prompt"): (kind, sc) for e, kind, sc in lst} for i, lst in enumerate(found) if lst}
        if cfg.check_response and any(responses):
            # rows already contaminated on the prompt side are not re-checked on the response side
            responses = [None if i in res else (r[: cfg.response_chars] if r and cfg.response_chars else r)
                         for i, r in enumerate(responses)]
            hr_ = _Hashed.of(responses, cfg)
            for part in (self.ngram_matches(hr_, cfg, cfg.response_threshold), self.short_matches(hr_)):
                for i, lst in part.items():
                    d = res.setdefault(i, {})
                    for e, sc in lst:
                        cur = d.get((e, "response"))
                        if cur is None or sc > cur[1]:
                            d[(e, "response")] = ("ngram", sc)
        out: list[list[Match]] = [[] for _ in prompts]
        for i, d in res.items():
            ms = out[i]
            for (e, side), (kind, sc) in d.items():
                en = self.entries[e]
                ms.append(Match(en.benchmark, en.item_id, en.part, kind, side, sc, e))
            ms.sort(key=lambda m: (m.side != "prompt", -m.score, m.entry))
        return out

    def overlap_text(self, text: str, entry: int, cfg: DecontamConfig, kind: str, limit: int = 300) -> str:
        """The longest run of the row's normalised words covered by n-grams of `entry` (for reports)."""
        norm = fast_normalize(text, cfg.norm)
        words = norm.split(" ") if norm else []
        en = self.entries[entry]
        n = min(cfg.ngram if kind == "ngram" else cfg.fuzzy_ngram, max(en.norm.count(" ") + 1, 1))
        _, mine = self._entry_ngrams(entry, n)
        wh, rows = word_hashes([norm])
        h, _, starts = ngram_hashes(wh, rows, n)
        covered = np.zeros(len(words) + 1, dtype=np.int64)
        if len(h):
            hit = starts[np.isin(h, mine)]
            np.add.at(covered, hit, 1)
            np.add.at(covered, np.minimum(hit + n, len(words)), -1)
        mask = np.cumsum(covered)[: len(words)] > 0
        best, cur, best_end = 0, 0, 0
        for i, m in enumerate(mask.tolist()):
            cur = cur + 1 if m else 0
            if cur > best:
                best, best_end = cur, i + 1
        if best == 0:
            return norm[:limit]
        return " ".join(words[best_end - best:best_end])[:limit]
