"""Decontamination index: every benchmark item hashed once per run, saved, and loaded by every task.

Built by `build_index` (one process) and loaded as `DecontamIndex` (each datatrove task):
- **n-gram tier**: sorted unique uint64 word n-gram hashes (stop n-grams, found in more than `max_item_df`
  items, left out) with a CSR map hash -> entries, each entry's n-gram sequence, and a bit array on the
  high hash bits (`prefilter_bits` bits per key, about 1.5% of the slots set) that lets a batch's n-grams
  skip the binary search unless their bit is set;
- **short keys**: whole items shorter than n words, and the *content* of short request-style items (the
  words after the canonical request and its verb, `decontam/canon.py`: MBPP), each as one k-gram hash;
- **exact keys**: a hash of each item's whole normalised text;
- **fuzzy tier**: shingle sets, rare-shingle CSR for the prefilter, MinHash signatures, the entries that are
  LSH members and datasketch's (b, r) banding (queried as numpy arrays: `decontam/lsh.py`).
Arrays every task would otherwise derive again (the sorted unique n-grams of all entries) are saved too.
How rows are judged against it: `cotforge.curate.decontam.match`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cotforge.curate.core.benchmarks import BenchmarkItem, items_fingerprint
from cotforge.curate.decontam.canon import MARK, defined_names, identifier_like, matcher_norm
from cotforge.curate.decontam.coarse import CoarseTier, build_coarse, coarse_supported
from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.decontam.lsh import BandIndex, optimal_params
from cotforge.curate.text.hashing import (
    U64,
    BitPrefilter,
    affine_perms,
    hash_words_arrow,
    minhash_matrix,
    ngram_hashes,
    sorted_lookup,
    word_hashes,
)

log = logging.getLogger(__name__)

# Request openings of short code statements (normalised). The verb after them may be inflected in a copy
# ("Implement a Python function which finds ..."), so the content key starts after it.
REQUEST_OPENINGS = re.compile(rf"^{MARK} [a-z]+ ")  # a canonical request and its verb (decontam/canon.py)


def text_keys(norm) -> np.ndarray:
    """64-bit keys of whole normalised texts (a polars hash of an Arrow string array; the exact tier)."""
    import polars as pl

    return pl.Series(norm).hash(seed=17).to_numpy().astype(U64)


@dataclass
class Entry:
    """One indexed text: a benchmark item's problem (or solution)."""

    benchmark: str
    item_id: str
    part: str  # problem | solution
    n_ngrams: int
    n_shingles: int
    text: str
    norm: str = ""


def _unique_pairs(h: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (hash, row) pairs sorted by hash then row."""
    order = np.lexsort((r, h))
    h, r = h[order], r[order]
    keep = np.ones(len(h), dtype=bool)
    keep[1:] = (h[1:] != h[:-1]) | (r[1:] != r[:-1])
    return h[keep], r[keep]


def _csr_by_key(h: np.ndarray, r: np.ndarray, max_df: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """keys (sorted unique hashes with df <= max_df), offsets, rows per key, and how many were stop keys."""
    h, r = _unique_pairs(h, r)
    keys, df = np.unique(h, return_counts=True)
    stop = df > max_df
    keep = np.repeat(~stop, df)
    keys, df = keys[~stop], df[~stop]
    offsets = np.zeros(len(keys) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(df)
    return keys, offsets, r[keep].astype(np.int32), int(stop.sum())


def _short_keys(texts: list[str], wh: np.ndarray, rows: np.ndarray, cfg: DecontamConfig) -> np.ndarray:
    """(k, entry, start word, kind) of every short key: whole items of short_min_words..n-1 words (kind 0),
    and the content of short request-style items (kind 1, >= short_content_words words)."""
    out = []
    for i, t in enumerate(texts):
        k = t.count(" ") + 1 if t else 0
        if cfg.short_min_words <= k < cfg.ngram:
            out.append((k, i, 0, 0))
        if t and k <= cfg.short_item_words and (m := REQUEST_OPENINGS.match(t)):
            skip = m.group(0).count(" ")
            if k - skip >= cfg.short_content_words:
                out.append((k - skip, i, skip, 1))
    return np.array(out, dtype=np.int64).reshape(-1, 4)


def _kgram_at(wh: np.ndarray, rows: np.ndarray, entry: int, start: int, k: int) -> np.uint64:
    """The k-gram hash (as `ngram_hashes` computes it) of entry's words start..start+k."""
    first = int(np.searchsorted(rows, entry))
    h, _, _ = ngram_hashes(wh[first + start:first + start + k], np.zeros(k, dtype=np.int64), k)
    return h[0]


def build_index(benchmarks: dict[str, list[BenchmarkItem]], cfg: DecontamConfig, out_dir: str | Path) -> dict:
    """Hash every benchmark item once and save the index under `out_dir` (loaded by each task)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    raw, entries = [], []
    for name, items in benchmarks.items():
        for it in items:
            parts = [("problem", it.problem)] + ([("solution", it.solution)] if cfg.include_solutions
                                                 and it.solution else [])
            for part, text in parts:
                raw.append(text)
                entries.append(Entry(name, it.id, part, 0, 0, text[:4000]))
    known = frozenset(n for t in raw for n in defined_names(t) if identifier_like(n))
    # the polars path whatever `text_kernel` says: the index is built in the stage's main process, whose memory
    # should not carry the kernel's numba (same text either way: curate/text/columns.py)
    norm = matcher_norm(raw, cfg.norm, known, "python")
    texts = norm.to_pylist()
    for e, t in zip(entries, texts, strict=True):
        e.norm = t
    wh, rows, _ = hash_words_arrow(norm)
    h, hr, _ = ngram_hashes(wh, rows, cfg.ngram)
    keys, offsets, entry_of, n_stop = _csr_by_key(h, hr, cfg.max_item_df)
    ent_ng_off = np.zeros(len(entries) + 1, dtype=np.int64)  # each entry's n-gram hashes in text order
    ent_ng_off[1:] = np.cumsum(np.bincount(hr, minlength=len(entries)))
    n_ngrams = np.bincount(entry_of, minlength=len(entries))
    sh, sr, _ = ngram_hashes(wh, rows, cfg.fuzzy_ngram)  # fuzzy tier
    u_sh, u_sr = _unique_pairs(sh, sr)
    order = np.lexsort((u_sh, u_sr))
    ent_sh, ent_sr = u_sh[order], u_sr[order]
    n_sh = np.bincount(ent_sr, minlength=len(entries))
    sh_offsets = np.zeros(len(entries) + 1, dtype=np.int64)
    sh_offsets[1:] = np.cumsum(n_sh)
    sh_keys, sh_koff, sh_ent, _ = _csr_by_key(sh, sr, cfg.max_item_df)
    n_rare = np.bincount(sh_ent, minlength=len(entries))
    a, b = affine_perms(cfg.num_perm, cfg.seed)
    sigs = minhash_matrix(ent_sh, ent_sr, len(entries), a, b)
    short = _short_keys(texts, wh, rows, cfg)
    short_h = np.array([_kgram_at(wh, rows, int(e), int(s), int(k)) for k, e, s, _ in short.tolist()], dtype=U64)
    short_h, short = _drop_stop_keys(short_h, short, cfg.max_item_df)
    for i, e in enumerate(entries):
        e.n_ngrams, e.n_shingles = int(n_ngrams[i]), int(n_sh[i])
    ek = text_keys(norm)
    nonempty = np.flatnonzero(np.array([bool(t) for t in texts], dtype=bool))
    order = np.argsort(ek[nonempty], kind="stable")
    exact = np.stack([ek[nonempty][order], nonempty[order].astype(U64)], axis=1).reshape(-1, 2)
    lsh_members = np.flatnonzero(n_sh >= cfg.fuzzy_min_shingles).astype(np.int64)
    arrays = {"keys": keys, "offsets": offsets, "entry_of": entry_of, "ent_ng": h, "ent_ng_off": ent_ng_off,
              "shingles": ent_sh, "sh_offsets": sh_offsets, "sh_keys": sh_keys, "sh_koff": sh_koff, "sh_ent": sh_ent,
              "n_rare": n_rare, "sigs": sigs, "exact": exact, "short": short, "short_h": short_h,
              "all_ngrams": np.unique(h), "lsh_members": lsh_members}
    coarse_meta = None
    if cfg.coarse_tier == "coarse" and coarse_supported(cfg):
        c_arrays, coarse_meta = build_coarse(raw, texts, [h[ent_ng_off[i]:ent_ng_off[i + 1]] for i in range(len(entries))],
                                             keys, short, cfg.norm, cfg)
        arrays.update(c_arrays)
    for k, v in arrays.items():
        np.save(out / f"{k}.npy", v)
    meta = {"config": cfg.to_dict(), "entries": [dict(vars(e)) for e in entries], "stop_ngrams": n_stop,
            "keys": int(len(keys)), "short_keys": int(len(short)), "defined_names": sorted(known), "coarse": coarse_meta,
            "lsh_params": list(optimal_params(cfg.lsh_threshold, cfg.num_perm)),
            "benchmarks": {n: {"items": len(v), "fingerprint": items_fingerprint(v)} for n, v in benchmarks.items()}}
    if cfg.semantic:  # the semantic tier's item vectors (decontam/semantic.py)
        from cotforge.curate.decontam.semantic import build_semantic_index

        meta["semantic"] = build_semantic_index([e.text for e in entries], cfg, out)
    (out / "entries.json").write_text(json.dumps(meta, ensure_ascii=False))
    log.info("decontam index: %d entries, %d n-gram keys (%d stop n-grams dropped), %d short keys, %.1f MB",
             len(entries), len(keys), n_stop, len(short), sum(v.nbytes for v in arrays.values()) / 1e6)
    return meta


def _drop_stop_keys(short_h: np.ndarray, short: np.ndarray, max_df: int) -> tuple[np.ndarray, np.ndarray]:
    """Short keys shared by more than `max_df` items are stock phrases, not items."""
    if not len(short_h):
        return short_h, short
    _, inv, cnt = np.unique(short_h, return_inverse=True, return_counts=True)
    keep = cnt[inv] <= max_df
    return short_h[keep], short[keep]




_LOADED: dict[str, DecontamIndex] = {}  # load_index's one index of this process, by entries.json digest


def load_index(index_dir: str | Path) -> DecontamIndex:
    """The index in `index_dir`, loaded once per process: datatrove runs many ranks in one worker process, and
    each would otherwise load the arrays, build the prefilters and the LSH bands and warm the per-entry caches
    again. Keyed by the folder and a digest of entries.json (the arrays follow from it, the config and the code),
    so another index in the same folder, or another run's folder, is loaded afresh; only the latest is kept."""
    d = Path(index_dir)
    key = f"{d.resolve()}\0{hashlib.sha256((d / 'entries.json').read_bytes()).hexdigest()}"
    if key not in _LOADED:
        _LOADED.clear()
        _LOADED[key] = DecontamIndex(d)
    return _LOADED[key]


class DecontamIndex:
    """The loaded index (arrays, entries, prefilters); matching is `cotforge.curate.decontam.match.Matcher`."""

    ARRAYS = ("keys", "offsets", "entry_of", "ent_ng", "ent_ng_off", "shingles", "sh_offsets", "sh_keys", "sh_koff",
              "sh_ent", "n_rare", "sigs", "exact", "short", "short_h", "all_ngrams", "lsh_members")

    def __init__(self, index_dir: str | Path):
        d = self.dir = Path(index_dir)
        meta = json.loads((d / "entries.json").read_text())
        missing = [f"{k}.npy" for k in self.ARRAYS if not (d / f"{k}.npy").exists()]
        if "lsh_params" not in meta or missing:
            raise ValueError(f"decontam index {d}: built by an older cotforge (no {', '.join(missing) or 'lsh_params'}); "
                             "rebuild it (run decontaminate again with keep_index)")
        self.cfg_dict = meta["config"]
        self.entries = [Entry(**e) for e in meta["entries"]]
        self.defined_names = frozenset(meta.get("defined_names", ()))
        for k in self.ARRAYS:
            setattr(self, k, np.load(d / f"{k}.npy"))
        self.n_ngrams = np.array([e.n_ngrams for e in self.entries], dtype=np.int64)
        self.lsh_params = tuple(meta["lsh_params"])
        self._lsh: BandIndex | None = None
        self._entry_cache: dict[tuple[int, int], tuple[list[str], np.ndarray]] = {}
        self.prefilter = BitPrefilter(self.keys)
        # all_ngrams: np.unique(ent_ng), stop n-grams included (copy runs go through stock phrases)
        self.all_prefilter = BitPrefilter(self.all_ngrams)
        self.sh_prefilter = BitPrefilter(self.sh_keys)
        # short keys: the hashes of their first two words (a text position is a candidate only where those match)
        short_wh, short_rows = word_hashes([" ".join(self.entries[e].norm.split(" ")[s:s + 2])
                                            for _, e, s, _ in self.short.tolist()])
        b2, _, _ = ngram_hashes(short_wh, short_rows, 2)
        self.short_first2 = np.unique(b2)
        self.short_prefilter = BitPrefilter(self.short_first2)
        self.coarse_meta = meta.get("coarse")
        self._coarse: CoarseTier | None = None
        self._rare_all: np.ndarray | None = None

    @property
    def rare_all(self) -> np.ndarray:
        """Which of all entries' n-grams (`ent_ng`, text order) are not stop n-grams (one lookup, at first use)."""
        if self._rare_all is None:
            self._rare_all = sorted_lookup(self.keys, self.ent_ng)[1]
        return self._rare_all

    def coarse_tier(self) -> CoarseTier | None:
        """The coarse candidate tier (loaded on first use); None when the index was built without it."""
        if self._coarse is None and self.coarse_meta is not None:
            self._coarse = CoarseTier(np.load(self.dir / "coarse.npy"), np.load(self.dir / "coarse_short.npy"),
                                      self.coarse_meta, self.defined_names)
        return self._coarse

    @classmethod
    def build(cls, benchmarks: dict[str, list[BenchmarkItem]], cfg: DecontamConfig, out_dir: str | Path):
        """Build, save and load an index in one call (tests, benchmarks)."""
        build_index(benchmarks, cfg, out_dir)
        return cls(out_dir)

    def get_lsh(self) -> BandIndex:
        """The fuzzy tier's LSH over the member entries' signatures (banded on first use)."""
        if self._lsh is None:
            self._lsh = BandIndex(self.sigs, self.lsh_members, *self.lsh_params)
        return self._lsh

    def exact_entries(self, keys: np.ndarray) -> list[tuple[int, int]]:
        """(text index, entry) for texts whose whole normalised text equals an entry's."""
        pos, hit = sorted_lookup(self.exact[:, 0], keys)
        out = []
        for i in np.flatnonzero(hit).tolist():
            p = int(pos[i])
            while p < len(self.exact) and self.exact[p, 0] == keys[i]:
                out.append((i, int(self.exact[p, 1])))
                p += 1
        return out

    def entry_ngrams(self, e: int, n: int) -> tuple[list[str], np.ndarray]:
        """(normalised words, n-gram hashes in text order) of entry `e` (cached)."""
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

    @staticmethod
    def pair_counts(h: np.ndarray, hr: np.ndarray, keys: np.ndarray, offsets: np.ndarray, entry_of: np.ndarray,
                    n_entries: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(text, entry, number of distinct shared keys) for every text/entry sharing a key."""
        empty = np.zeros(0, dtype=np.int64)
        if len(h) == 0 or len(keys) == 0:
            return empty, empty, empty
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
