"""Decontamination index: every benchmark item hashed once per run and saved for all tasks.

The index holds sorted unique uint64 word n-gram hashes with a CSR map hash -> benchmark entries, per-entry
n-gram sequences, shingle sets, MinHash signatures and a pickled MinHashLSH, saved as .npy/.json/.pkl and
loaded by every datatrove task (cotforge.curate.decontam.match: DecontamIndex, which also says how rows are
judged against it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from cotforge.curate.benchmarks import BenchmarkItem, items_fingerprint
from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.text.hashing import _U64, affine_perms, hash_words_bytes, minhash_matrix, ngram_hashes
from cotforge.curate.text.normalize import normalize_batch

log = logging.getLogger(__name__)

def text_key(norm_text: str) -> int:
    """64-bit key of a whole normalised text (the exact tier)."""
    return int.from_bytes(hashlib.blake2b(norm_text.encode("utf-8"), digest_size=8).digest(), "little")


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
    keys, first, df = np.unique(h, return_index=True, return_counts=True)
    stop = df > max_df
    keep = np.repeat(~stop, df)
    keys, df = keys[~stop], df[~stop]
    offsets = np.zeros(len(keys) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(df)
    return keys, offsets, r[keep].astype(np.int32), int(stop.sum())


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
                entries.append(Entry(name, it.id, part, 0, 0, text[:2000]))
    y, texts = normalize_batch(raw, cfg.norm)
    for e, t in zip(entries, texts, strict=True):
        e.norm = t
    wh, rows = hash_words_bytes(y)
    h, hr, _ = ngram_hashes(wh, rows, cfg.ngram)
    keys, offsets, entry_of, n_stop = _csr_by_key(h, hr, cfg.max_item_df)
    ent_ng_off = np.zeros(len(entries) + 1, dtype=np.int64)  # each entry's n-gram hashes in text order
    ent_ng_off[1:] = np.cumsum(np.bincount(hr, minlength=len(entries)))
    n_ngrams = np.bincount(entry_of, minlength=len(entries))
    # fuzzy tier: per-entry shingle sets, rare-shingle keys for the prefilter, MinHash signatures
    sh, sr, _ = ngram_hashes(wh, rows, cfg.fuzzy_ngram)
    u_sh, u_sr = _unique_pairs(sh, sr)
    order = np.lexsort((u_sh, u_sr))
    ent_sh, ent_sr = u_sh[order], u_sr[order]
    n_sh = np.bincount(ent_sr, minlength=len(entries))
    sh_offsets = np.zeros(len(entries) + 1, dtype=np.int64)
    sh_offsets[1:] = np.cumsum(n_sh)
    sh_keys, sh_koff, sh_ent, _ = _csr_by_key(sh, sr, cfg.max_item_df)  # rare shingles -> entries (prefilter)
    n_rare = np.bincount(sh_ent, minlength=len(entries))
    a, b = affine_perms(cfg.num_perm, cfg.seed)
    sigs = minhash_matrix(ent_sh, ent_sr, len(entries), a, b)
    # short items (fewer words than n): their whole word sequence, matched as a k-gram
    short = np.array([[k, i] for i, t in enumerate(texts) if t
                      for k in [t.count(" ") + 1] if cfg.short_min_words <= k < cfg.ngram], dtype=np.int64).reshape(-1, 2)
    short_h = np.zeros(len(short), dtype=_U64)
    for k in np.unique(short[:, 0]).tolist():
        sel = np.flatnonzero(short[:, 0] == k)
        ids = short[sel, 1]
        hk, hrk, _ = ngram_hashes(wh, rows, k)
        first = np.searchsorted(hrk, ids)
        short_h[sel] = hk[first]
    for i, e in enumerate(entries):
        e.n_ngrams, e.n_shingles = int(n_ngrams[i]), int(n_sh[i])
    exact = np.array(sorted({(text_key(t), i) for i, t in enumerate(texts) if t}), dtype=_U64).reshape(-1, 2)
    arrays = {"keys": keys, "offsets": offsets, "entry_of": entry_of, "ent_ng": h, "ent_ng_off": ent_ng_off, "shingles": ent_sh, "sh_offsets": sh_offsets,
              "sh_keys": sh_keys, "sh_koff": sh_koff, "sh_ent": sh_ent, "n_rare": n_rare, "sigs": sigs, "exact": exact, "short": short, "short_h": short_h}
    for k, v in arrays.items():
        np.save(out / f"{k}.npy", v)
    meta = {"config": cfg.to_dict(), "entries": [asdict(e) for e in entries],
            "stop_ngrams": n_stop, "keys": int(len(keys)),
            "benchmarks": {n: {"items": len(v), "fingerprint": items_fingerprint(v)} for n, v in benchmarks.items()}}
    (out / "entries.json").write_text(json.dumps(meta, ensure_ascii=False))
    _save_lsh(sigs, entries, cfg, a, b, out / "lsh.pkl")
    log.info("decontam index: %d entries, %d n-gram keys (%d stop n-grams dropped), %.1f MB", len(entries),
             len(keys), n_stop, sum(v.nbytes for v in arrays.values()) / 1e6)
    return meta


def _save_lsh(sigs: np.ndarray, entries: list[Entry], cfg: DecontamConfig, a: np.ndarray, b: np.ndarray,
              path: Path) -> None:
    """datasketch MinHashLSH over entries with enough shingles, pickled once for all tasks."""
    from datasketch import MinHash, MinHashLSH

    perms = np.stack([a, b])
    lsh = MinHashLSH(threshold=cfg.lsh_threshold, num_perm=cfg.num_perm)
    with lsh.insertion_session() as sess:
        for i, e in enumerate(entries):
            if e.n_shingles >= cfg.fuzzy_min_shingles:
                sess.insert(i, MinHash(hashvalues=sigs[i], permutations=perms, scheme="affine64"))
    with open(path, "wb") as fh:
        pickle.dump(lsh, fh, protocol=pickle.HIGHEST_PROTOCOL)
