"""Benchmark decontamination rules: when a training row holds a benchmark item.

How a row is judged (prompt side, and separately the whole response):

1. Text is normalised (`cotforge.curate.text.normalize`: case, whitespace, punctuation, LaTeX, Unicode math,
   code fences, stock wrappers; numbers kept) and hashed for a whole batch at once (`scan.HashedBatch`).
2. **ngram tier** -- candidates are items sharing >= `prefilter` of their n-grams with the row (n-grams in
   more than `max_item_df` items are stop n-grams and do not count). The copy check (`copy_score`) aligns
   the item's n-grams with the row's: maximal runs on one alignment, chained in order across
   *substitutions* (both texts change <= 4 non-numeric words; at most `max_substitutions` distinct such
   changes, each as often as it occurs: "Find" -> "Determine", a renamed function) and across *deletions*
   of >= `min_deleted_words` item words where the row runs on seamlessly (a statement without its examples).
   The chain is a copy when it covers >= `threshold` of the item and is >= `min_chunk_words` long
   (`diverge_chunk_words` when row and item both go on differently past it; no minimum at >= `full_fraction`),
   no *other* part of the item matches near it in the row, and it is not bounded by two different numbers;
   a row that is >= `row_fraction` such a copy of >= `diverge_chunk_words` words counts too. Templated
   variants (another number, an inserted condition, a short deleted condition) break the chain and leave an
   unexplained run: different problems. **Reordered** copies (sentences moved) are parts of >=
   `reorder_min_words` words in another order that together cover >= `full_fraction` of the item and all of
   its numbers, close together in the row. Far from the chain (more than the item's length away), other
   partial quotes in a long response are ignored.
3. **short keys** -- whole items shorter than n words, and the content of short request-style items
   ("Write a function to <verb> <content>", MBPP: the content behind any other request template), found
   as a whole and not glued to another number (response side: >= `response_short_words` words).
4. **exact** -- a prompt equal to an item after normalisation.
5. **fuzzy tier** (prompts nothing else flagged) -- rare-shingle prefilter, MinHash-LSH (datasketch's banding as
   numpy arrays, `decontam/lsh.py`) over word
   `fuzzy_ngram`-shingles; a candidate counts when its shingle containment >= `fuzzy_threshold` and all of
   its numbers occur in the row (as often as in the item: a number changed where the item repeats it
   is another problem).

The index is built once per run (`index.build_index`) and loaded by every task.

One module on purpose: the tiers share one `Matcher` (its index arrays, batch hashes and per-item caches) and
the copy check's alignment helpers; split, each half would need the other's private state.
"""

from __future__ import annotations

import copy
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.decontam.index import DecontamIndex, text_keys
from cotforge.curate.decontam.runs import batch_runs, pair_runs
from cotforge.curate.decontam.scan import HashedBatch, ngram_candidates, shingle_candidates, short_candidates
from cotforge.curate.text.hashing import affine_perms, minhash_matrix, sorted_lookup

log = logging.getLogger(__name__)

MAX_GAP = 4  # words a substitution may change on either side


class SharedMatches(list):
    """The Match list of a prompt-side verdict, built once per distinct prompt and shared (read-only) by every
    row holding that prompt; `described` keeps `stage.describe_matches`' result for it with the text it was
    made from (a removed row repeats it instead of locating the span and writing the JSON again)."""

    __slots__ = ("described",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.described: tuple[str, dict[str, Any]] | None = None


class PromptVerdict:
    """One prompt's cached verdict: `found` [(entry, kind, score, span)], its normalised text (None when it has
    no match), and the rows' shared Match list, made at first use (`Matcher.match_batch`)."""

    __slots__ = ("found", "text", "_matches")

    def __init__(self, found: list[tuple[int, str, float, tuple[int, int]]], text: str | None):
        self.found, self.text = found, text
        self._matches: SharedMatches | None = None

    def matches(self, index: DecontamIndex) -> SharedMatches:
        """The Match list of this verdict, sorted as match_batch sorts every row's (built once)."""
        if self._matches is None:
            words = self.text.split(" ") if self.text else []
            ms = SharedMatches()
            for e, kind, sc, span in self.found:
                en = index.entries[e]
                ms.append(Match(en.benchmark, en.item_id, en.part, kind, "prompt", sc, e, span, words))
            ms.sort(key=lambda m: (m.side != "prompt", -m.score, m.entry))
            self._matches = ms
        return self._matches


_NO_MATCH = PromptVerdict([], None)  # prompt_side's verdict of a prompt without matches (never mutated)


@dataclass
class Match:
    """One (row, benchmark entry) match; `span` = (first, end) normalised word of the copy in the row's text."""

    benchmark: str
    benchmark_id: str
    part: str
    match_kind: str
    side: str
    score: float
    entry: int
    span: tuple[int, int] = (0, 0)
    words: list[str] | None = None  # the row side's normalised words (None: describe_matches normalises again)
    detail: dict[str, Any] | None = None  # semantic matches: cosine, aligned numbers, both texts

    def as_dict(self) -> dict[str, Any]:
        d = {"benchmark": self.benchmark, "benchmark_id": self.benchmark_id, "part": self.part,
             "match_kind": self.match_kind, "side": self.side, "score": round(self.score, 4)}
        return {**d, **self.detail} if self.detail else d


# --------------------------------------------------------------------------- the copy check


def _chain(runs: np.ndarray, best: int, iw: list[str], rw: list[str], cfg: DecontamConfig) -> list[tuple[int, int, int]]:
    """The best run extended in order across substitutions (<= MAX_GAP non-numeric words on both sides, at
    most `max_substitutions` distinct changes) and across deletions of >= `min_deleted_words` item words
    where the row runs on seamlessly."""
    seg = [tuple(int(x) for x in runs[best])]
    subs: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()
    r_i0, r_i1, r_j0 = runs[:, 0], runs[:, 1], runs[:, 2]
    r_j1 = r_j0 + (r_i1 - r_i0)

    def link(gi: tuple[int, int], gj: tuple[int, int]) -> bool:
        a, b = iw[gi[0]:gi[1]], rw[gj[0]:gj[1]]
        if any(w.isdigit() for w in a + b):
            return False
        key = (tuple(a), tuple(b))
        if key not in subs and len(subs) >= cfg.max_substitutions:
            return False
        subs.add(key)
        return True

    for forward in (True, False):
        while True:
            i0, i1, j0 = seg[-1] if forward else seg[0]
            j1 = j0 + i1 - i0
            if forward:
                gi, gj = r_i0 - i1, r_j0 - j1
                sub = np.flatnonzero((gi >= 1) & (gi <= MAX_GAP) & (gj >= 1) & (gj <= MAX_GAP))
                dele = np.flatnonzero((gj == 0) & (gi >= cfg.min_deleted_words))
            else:
                gi, gj = i0 - r_i1, j0 - r_j1
                sub = np.flatnonzero((gi >= 1) & (gi <= MAX_GAP) & (gj >= 1) & (gj <= MAX_GAP))
                dele = np.flatnonzero((gj == 0) & (gi >= cfg.min_deleted_words))
            nxt = None
            for k in sub[np.argsort(gi[sub] + gj[sub], kind="stable")].tolist():
                gap_i = (int(i1), int(r_i0[k])) if forward else (int(r_i1[k]), int(i0))
                gap_j = (int(j1), int(r_j0[k])) if forward else (int(r_j1[k]), int(j0))
                if link(gap_i, gap_j):
                    nxt = k
                    break
            if nxt is None and len(dele):
                nxt = int(dele[np.argmin(gi[dele])])
            if nxt is None:
                break
            s = tuple(int(x) for x in runs[nxt])
            if forward:
                seg.append(s)
            else:
                seg.insert(0, s)
    return seg


def copy_score(iw: list[str], ih: np.ndarray, rw: list[str], rh: np.ndarray, rpos: np.ndarray,
               cfg: DecontamConfig, item: str | None = None, row: str | None = None,
               rare: np.ndarray | None = None, runs: np.ndarray | None = None) -> tuple[float, int, int]:
    """(score, row start word, row end word) of the item in the row, score 0.0 when the match looks like an
    edited variant rather than a copy (see the module docstring). `rare`: which of the item's n-grams (text
    order) are in <= max_item_df items (the excerpt rule counts them; None: the rule is off). `runs`: the
    pair's `pair_runs`, when the caller computed them for many pairs at once (`runs.batch_runs`)."""
    n = cfg.ngram
    if len(ih) == 0 or len(rh) == 0:
        return 0.0, 0, 0
    item = " ".join(iw) if item is None else item
    row = " ".join(rw) if row is None else row
    at = f" {row} ".find(f" {item} ")
    if at >= 0:  # the whole item, verbatim after normalisation (the common case: one C substring search)
        j0 = row.count(" ", 0, at) if at else 0
        return 1.0, j0, j0 + len(iw)
    runs = pair_runs(ih, rh, rpos, n) if runs is None else runs
    if not len(runs):
        return 0.0, 0, 0
    best = int(np.argmax(runs[:, 1] - runs[:, 0]))
    seg = _chain(runs, best, iw, rw, cfg)
    i0, j0 = seg[0][0], seg[0][2]
    i1, j1 = seg[-1][1], seg[-1][2] + seg[-1][1] - seg[-1][0]
    # covered item words: the segments, plus the item words a substitution changed (not deleted parts)
    chunk = sum(b - a for a, b, _ in seg) + sum(s[0] - p[1] for p, s in zip(seg, seg[1:], strict=False)
                                                 if s[2] > p[2] + p[1] - p[0])
    ni = max(len(iw), 1)
    # runs near the chain that it does not explain: an edited variant, or the parts of a reordered copy
    win = max(len(iw), 30)
    near = (runs[:, 2] < j1 + win) & (runs[:, 2] + runs[:, 1] - runs[:, 0] > j0 - win)
    in_chain = np.array([any(a <= r[0] and r[1] <= b for a, b, _ in seg) or any(
        j <= r[2] and r[2] + r[1] - r[0] <= j + b - a for a, b, j in seg) for r in runs.tolist()], dtype=bool)
    other = near & ~in_chain
    if other.any():
        got = _reordered(runs[near], iw, cfg)
        return got if got[0] else _reordered_words(iw, rw, j0, j1, cfg)
    if cfg.verify_numbers:
        if i1 < len(iw) and j1 < len(rw) and iw[i1].isdigit() and rw[j1].isdigit():
            return 0.0, 0, 0  # the copy ends where the row and the item have different numbers
        if i0 > 0 and j0 > 0 and iw[i0 - 1].isdigit() and rw[j0 - 1].isdigit():
            return 0.0, 0, 0
    diverge = (i1 < len(iw) and j1 < len(rw)) or (i0 > 0 and j0 > 0)
    share = chunk / ni
    if share >= cfg.full_fraction:
        return share, j0, j1
    if (not diverge and rare is not None and chunk >= cfg.min_chunk_words and chunk >= cfg.row_fraction * len(rw)
            and _rare_in(seg, rare, n) >= cfg.excerpt_rare_ngrams):
        return max(share, chunk / len(rw)), j0, j1  # the row is one excerpt of the item (its last lines, say)
    if chunk < (cfg.diverge_chunk_words if diverge else cfg.min_chunk_words):
        return _reordered_words(iw, rw, j0, j1, cfg)
    if chunk >= cfg.diverge_chunk_words and chunk / max(len(rw), 1) >= cfg.row_fraction:
        return max(share, chunk / len(rw)), j0, j1  # the row is mostly a long copy of part of the item
    return share, j0, j1


def _one_to_one(runs: np.ndarray) -> np.ndarray:
    """Runs (item start, item end, row start) kept longest first, dropping any that overlaps a kept one in the
    item or in the row: a phrase the item says twice must not be covered twice by one place of the row (an
    item with a repeated block and one number changed is not a reordered copy)."""
    kept: list[tuple[int, int, int]] = []
    for a, b, j in sorted(runs.tolist(), key=lambda r: (r[0] - r[1], r[2])):
        k = j + b - a
        if any(a < b2 and a2 < b or j < j2 + b2 - a2 and j2 < k for a2, b2, j2 in kept):
            continue
        kept.append((a, b, j))
    return np.array(kept, dtype=np.int64).reshape(-1, 3)


REORDER_WORDS_MAX = 120  # items up to this many words get the word-level reorder check
REORDER_K = 3  # its parts: runs of >= this many words


def _reordered_words(iw: list[str], rw: list[str], j0: int, j1: int, cfg: DecontamConfig) -> tuple[float, int, int]:
    """Reordered copies whose moved parts are shorter than the n-gram (a short item's two sentences swapped:
    "What is the value of N? The sum of the first N positive odd numbers is 121."): word 3-gram runs of the
    item in the row within one item length of the chain, kept when they cover >= full_fraction of the item and
    every one of its numbers, runs of >= reorder_min_words cover at least half of it, they are not in the item's
    own order and span <= 1.5 item lengths of the row. Items of <= REORDER_WORDS_MAX words (a window of at most
    three item lengths of the row, Python per candidate). Runs are matched one to one (longest first)."""
    k, ni = REORDER_K, len(iw)
    if not cfg.ngram <= ni <= REORDER_WORDS_MAX:
        return 0.0, 0, 0
    lo, hi = max(0, j0 - ni), min(len(rw), j1 + ni)
    win = rw[lo:hi]
    if len(win) < ni:
        return 0.0, 0, 0
    ih = _tuple_hashes(iw, k)
    rh = _tuple_hashes(win, k)
    runs = pair_runs(ih, rh, np.arange(len(rh)), k)
    if len(runs) < 2:
        return 0.0, 0, 0
    runs = _one_to_one(runs)
    cov, cov_long = np.zeros(ni, dtype=bool), np.zeros(ni, dtype=bool)
    for a, b, _ in runs.tolist():
        cov[a:b] = True
        if b - a >= cfg.reorder_min_words:
            cov_long[a:b] = True
    span = runs[:, 1] - runs[:, 0]
    order = runs[np.argsort(runs[:, 2], kind="stable"), 0]
    r0, r1 = int(runs[:, 2].min()), int((runs[:, 2] + span).max())
    numbers_ok = all(c for c, w in zip(cov.tolist(), iw, strict=True) if w.isdigit())
    if (len(runs) >= 2 and cov.mean() >= cfg.full_fraction and cov_long.mean() >= 0.5 and numbers_ok
            and np.any(np.diff(order) < 0) and r1 - r0 <= 1.5 * ni):
        return float(cov.mean()), lo + r0, lo + r1
    return 0.0, 0, 0


def _tuple_hashes(words: list[str], k: int) -> np.ndarray:
    """hash(tuple(words[i:i + k])) for every i (the tuples made by zip: the same values, half the time)."""
    grams = zip(*(words[j:] for j in range(k)), strict=False)  # stops at the shortest: the last full k-gram
    return np.fromiter(map(hash, grams), dtype=np.int64, count=max(len(words) - k + 1, 0))


def _rare_in(seg: list[tuple[int, int, int]], rare: np.ndarray, n: int) -> int:
    """How many of the item's rare n-grams lie inside the chain's segments."""
    m = np.zeros(len(rare), dtype=bool)
    for a, b, _ in seg:
        m[a:max(a, b - n + 1)] = True
    return int((m & rare).sum())


def _reordered(runs: np.ndarray, iw: list[str], cfg: DecontamConfig) -> tuple[float, int, int]:
    """Parts of the item in another order: long parts (>= reorder_min_words, matched one to one) covering >=
    full_fraction of the item and every one of its numbers, within 1.5 item lengths of each other in the row."""
    long = _one_to_one(runs[(runs[:, 1] - runs[:, 0]) >= max(cfg.reorder_min_words, cfg.ngram)])
    if len(long) < 2 or np.all(np.diff(long[np.argsort(long[:, 2]), 0]) >= 0):
        return 0.0, 0, 0  # one part, or parts in the item's own order: an edited variant
    cov = np.zeros(len(iw), dtype=bool)
    for a, b, _ in long.tolist():
        cov[a:b] = True
    j0, j1 = int(long[:, 2].min()), int((long[:, 2] + long[:, 1] - long[:, 0]).max())
    share = cov.mean() if len(iw) else 0.0
    numbers_ok = all(c for c, w in zip(cov.tolist(), iw, strict=True) if w.isdigit())
    if share >= cfg.full_fraction and numbers_ok and j1 - j0 <= 1.5 * len(iw):
        return float(share), j0, j1
    return 0.0, 0, 0


# --------------------------------------------------------------------------- the matcher


class Matcher:
    """Finds matches of batches of rows against a loaded `DecontamIndex`."""

    PROMPT_CACHE_SIZE = 100_000

    def __init__(self, index: DecontamIndex):
        self.index = index
        self._cache: dict[int, PromptVerdict] = {}
        self._cache_cfg: DecontamConfig | None = None
        self._rare: dict[int, np.ndarray] = {}
        self._numbers: dict[int, Counter] = {}
        self.coarse_stats: dict[str, int] = {}
        self._semantic = None  # decontam/semantic.py's tier, loaded at first use

    def clear_cache(self) -> None:
        """Forget cached prompt verdicts (benchmarks time cold runs)."""
        self._cache = {}

    def rare_ngrams(self, e: int, ih: np.ndarray, n: int) -> np.ndarray:
        """Which n-grams `ih` of entry `e` (text order) are not stop n-grams: for the index's own n, a slice of
        the index's one lookup of all entries' n-grams (`DecontamIndex.rare_all`; per entry, the lookups cost
        more than the copy checks of many batches); otherwise looked up and cached per entry."""
        idx = self.index
        if n == idx.cfg_dict["ngram"]:
            return idx.rare_all[idx.ent_ng_off[e]:idx.ent_ng_off[e + 1]]
        if e not in self._rare:
            self._rare[e] = sorted_lookup(idx.keys, ih)[1]
        return self._rare[e]

    def side(self, hb: HashedBatch, cfg: DecontamConfig, prompt: bool) -> dict[int, dict[int, tuple[str, float, tuple[int, int]]]]:
        """{text: {entry: (kind, score, span)}} for one side of a batch."""
        idx = self.index
        res: dict[int, dict[int, tuple[str, float, tuple[int, int]]]] = {}

        def add(r: int, e: int, kind: str, sc: float, span: tuple[int, int]) -> None:
            d = res.setdefault(r, {})
            if e not in d or sc > d[e][1]:
                d[e] = (kind, sc, span)

        if prompt and len(idx.exact):
            for r, e in idx.exact_entries(text_keys(hb.norm)):
                add(r, e, "ngram", 1.0, (0, hb.n_words(r)))
        threshold = cfg.threshold if prompt else cfg.response_threshold
        r2, e2 = ngram_candidates(idx, hb, cfg)
        pairs = list(zip(r2.tolist(), e2.tolist(), strict=True))
        items = [idx.entry_ngrams(e, cfg.ngram) for _, e in pairs]
        rows = [hb.row_ngrams(r, idx) for r, _ in pairs]
        runs = batch_runs([ih for _, ih in items], [rh for rh, _ in rows], [rp for _, rp in rows], cfg.ngram)
        for (r, e), (iw, ih), (rh, rpos), ru in zip(pairs, items, rows, runs, strict=True):
            sc, j0, j1 = copy_score(iw, ih, hb.words(r), rh, rpos, cfg, idx.entries[e].norm, hb.text(r),
                                    self.rare_ngrams(e, ih, cfg.ngram), ru)
            if sc >= threshold:
                add(r, e, "ngram", sc, (j0, j1))
        min_short = cfg.short_min_words if prompt else cfg.response_short_words
        for r, e, a, k in short_candidates(idx, hb, max(min_short, 1)):
            add(r, e, "ngram", k / max(idx.entries[e].norm.count(" ") + 1, 1), (a, a + k))
        if prompt and cfg.fuzzy:
            for r, lst in self.fuzzy(hb, cfg, [i for i in range(hb.n) if i not in res]).items():
                for e, sc in lst:
                    add(r, e, "fuzzy", sc, (0, hb.n_words(r)))
        return res

    def fuzzy(self, hb: HashedBatch, cfg: DecontamConfig, todo: list[int]) -> dict[int, list[tuple[int, float]]]:
        """MinHash-LSH candidates among `todo` texts (all of them in one query, `decontam/lsh.py`), kept when
        the item's shingle containment >= fuzzy_threshold and its numbers all occur in the text."""
        out: dict[int, list[tuple[int, float]]] = {}
        rows, sh, sr = shingle_candidates(self.index, hb, cfg, todo)
        if not rows:
            return out
        a, b = affine_perms(cfg.num_perm, cfg.seed)
        sigs = minhash_matrix(sh, sr, hb.n, a, b)
        qi, qe = self.index.get_lsh().query(sigs[rows])
        order = np.argsort(sr, kind="stable")
        sh_sorted, sr_sorted = sh[order], sr[order]
        for q, e in zip(qi.tolist(), qe.tolist(), strict=True):  # by row, then entry
            i = rows[q]
            mine = np.unique(sh_sorted[np.searchsorted(sr_sorted, i):np.searchsorted(sr_sorted, i, side="right")])
            theirs = self.index.shingles[self.index.sh_offsets[e]:self.index.sh_offsets[e + 1]]
            c = np.isin(theirs, mine, assume_unique=True).sum() / max(len(theirs), 1)
            if c < cfg.fuzzy_threshold:
                continue
            if cfg.verify_numbers:
                row_nums = Counter(w for w in hb.words(i) if w.isdigit())
                if self._item_numbers(e) - row_nums:
                    continue
            out.setdefault(i, []).append((e, float(c)))
        return out

    def _item_numbers(self, e: int) -> Counter:
        """The numbers of entry e's normalised text, with their counts (cached)."""
        got = self._numbers.get(e)
        if got is None:
            got = self._numbers[e] = Counter(w for w in self.index.entries[e].norm.split(" ") if w.isdigit())
        return got

    def prompt_side(self, prompts, cfg: DecontamConfig) -> list[PromptVerdict]:
        """Prompt-side verdict per prompt: matches [(entry, kind, score, span)], with the normalised prompt when
        it has any (the report locates the span with it; None otherwise). Each distinct prompt is matched once per
        batch, and (with `prompt_cache`) once per task: verdicts are remembered by a 64-bit hash of the prompt
        for a copy of the config (a config changed in place starts a new cache)."""
        import polars as pl

        s = pl.Series("p", prompts, dtype=pl.String).fill_null("")
        keys = s.hash(seed=3).to_numpy()
        if self._cache_cfg != cfg or len(self._cache) > self.PROMPT_CACHE_SIZE or not cfg.prompt_cache:
            self._cache, self._cache_cfg = {}, copy.copy(cfg)
        klist = keys.tolist()
        uniq, first = np.unique(keys, return_index=True)
        todo = [int(i) for k, i in zip(uniq.tolist(), first.tolist(), strict=True) if k not in self._cache]
        for lo, hi in _byte_batches(s.gather(todo) if todo else s.clear(), cfg):
            sub = todo[lo:hi]
            hb = HashedBatch(s.gather(sub), cfg, self.index.defined_names)
            found = self.side(hb, cfg, prompt=True)
            self._cache.update(dict.fromkeys(keys[sub].tolist(), _NO_MATCH))  # most prompts: one shared value
            for j, d in found.items():
                self._cache[klist[sub[j]]] = PromptVerdict([(e, kind, sc, span) for e, (kind, sc, span) in d.items()],
                                                           hb.text(j))
        out = [self._cache[k] for k in klist]
        if not cfg.prompt_cache:
            self._cache = {}
        return out

    def _coarse_filter(self, rs, todo: list[int], cfg: DecontamConfig) -> list[int]:
        """The responses among `todo` the coarse tier passes (`decontam/coarse.py`; all of them with
        `coarse_tier: none` or an index it cannot vouch for). Counts go to `coarse_stats`."""
        tier = self.index.coarse_tier() if cfg.coarse_tier == "coarse" else None
        st = self.coarse_stats
        st["responses"] = st.get("responses", 0) + len(todo)
        if tier is None or tier.weak or not todo:
            st["passed"] = st.get("passed", 0) + len(todo)
            return todo
        keep = tier.candidates(rs.gather(todo))
        passed = [i for i, k in zip(todo, keep.tolist(), strict=True) if k]
        st["passed"] = st.get("passed", 0) + len(passed)
        return passed

    def match_batch(self, prompts, responses, cfg: DecontamConfig) -> list[list[Match]]:
        """All matches per row: prompt side (exact, n-gram, short keys, fuzzy), then the whole response
        (n-gram, short keys; capped at `response_chars` characters when that is > 0) of rows the prompt side
        did not flag. `prompts`/`responses`: lists or Arrow/polars string columns."""
        import polars as pl

        words: dict[int, list[str]] = {}
        found = self.prompt_side(prompts, cfg)
        out: list[list[Match]] = [v.matches(self.index) if v.found else [] for v in found]
        res: dict[int, dict[int, tuple[str, float, tuple[int, int]]]] = {}  # response-side matches
        if cfg.check_response and responses is not None:
            rs = pl.Series("r", responses, dtype=pl.String)
            if cfg.response_chars:
                rs = rs.str.slice(0, cfg.response_chars)
            todo = [i for i in (rs.str.len_bytes() > 0).fill_null(False).arg_true().to_list() if not out[i]]
            todo = self._coarse_filter(rs, todo, cfg)
            part = rs.gather(todo) if todo else rs.clear()
            for lo, hi in _byte_batches(part, cfg):
                sub = todo[lo:hi]
                hb = HashedBatch(part.slice(lo, hi - lo), cfg, self.index.defined_names)
                for j, d in self.side(hb, cfg, prompt=False).items():
                    words[sub[j]] = hb.words(j)
                    res[sub[j]] = d
        for i, d in res.items():
            ms = out[i] = []
            for e, (kind, sc, span) in d.items():
                en = self.index.entries[e]
                ms.append(Match(en.benchmark, en.item_id, en.part, kind, "response", sc, e, span, words[i]))
            ms.sort(key=lambda m: (m.side != "prompt", -m.score, m.entry))
        if cfg.semantic:
            self.semantic_matches(prompts, responses, out, cfg)
        return out

    def semantic_matches(self, prompts, responses, out: list[list[Match]], cfg: DecontamConfig) -> None:
        """The semantic tier (decontam/semantic.py) on the rows no other tier flagged: match kind `semantic`,
        score = cosine, the aligned numbers and both texts in `detail`."""
        from cotforge.curate.decontam.semantic import SemanticTier, hit_detail, semantic_hits

        if self._semantic is None or self._semantic.cfg != cfg:  # a process may run stages of other settings
            self._semantic = SemanticTier(self.index.dir, [e.text for e in self.index.entries], cfg)
        for i, side, text, h in semantic_hits(self._semantic, prompts, responses, [bool(ms) for ms in out], cfg):
            en = self.index.entries[h.entry]
            out[i].append(Match(en.benchmark, en.item_id, en.part, "semantic", side, h.cosine, h.entry,
                                detail=hit_detail(self._semantic, text, h)))


def _byte_batches(s, cfg: DecontamConfig) -> list[tuple[int, int]]:
    """[lo, hi) row ranges of `s` holding <= batch_bytes of text and <= batch_size rows (a row longer than
    batch_bytes is a batch of its own)."""
    if len(s) == 0:
        return []
    size = s.str.len_bytes().fill_null(0).to_numpy().astype(np.int64)
    out, lo, acc = [], 0, 0
    for i, b in enumerate(size.tolist()):
        if i > lo and (acc + b > cfg.batch_bytes or i - lo >= cfg.batch_size):
            out.append((lo, i))
            lo, acc = i, 0
        acc += b
    out.append((lo, len(size)))
    return out
