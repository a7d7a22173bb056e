"""Problem-level dedup, the part without datatrove: exact keys, MinHash signatures, pair checks.

Everything here works on a whole batch of rows at once (`batch_keys`, `minhash_signatures`): the
normalisation is `curate.text.columns.normalize_list` (kernel or polars path) and the shingle / MinHash arithmetic is
`curate.hashing`, so the per-row Python cost is a few hash calls. `row_keys` and `shingle_hashes` are the
one-row forms of the same functions (tests and `PairJudge` use them; they give identical values).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import xxhash

from cotforge.curate.dedup.config import DedupConfig
from cotforge.curate.dedup.minhash import minhash_rows
from cotforge.curate.dedup.pairs.sections import code_sections, join_superscripts, maybe_code
from cotforge.curate.dedup.pairs.verdict import candidate_verdict
from cotforge.curate.io.readers import InputSpec
from cotforge.curate.text.columns import normalize_list
from cotforge.curate.text.hashing import affine_perms, hash_words_bytes, ngram_hashes
from cotforge.curate.text.normalize import BATCH_SEP, DEFAULT_NORM, NormConfig, normalize

_MERSENNE = np.uint64((1 << 61) - 1)
_NUMBER = re.compile(r"\d+")

# A row's place in the preference order, packed in one uint64: source priority, task (rank), index in task.
# Sorting by it = sorting by (priority, input order), the order every "first" of the dedup uses.
IDX_BITS = 24
RANK_BITS = 24
PRIO_MAX = (1 << (64 - IDX_BITS - RANK_BITS)) - 1


# --------------------------------------------------------------------------- memory




def priority_of(source: str, priority: list[str]) -> int:
    """Rank of `source` in the user's priority list (exact name or glob); unlisted sources come last."""
    for i, pat in enumerate(priority):
        if source == pat or fnmatch.fnmatchcase(source, pat):
            return i
    return len(priority)


def sort_specs(specs: list[InputSpec], priority: list[str]) -> list[InputSpec]:
    """Inputs ordered by source priority (stable), so work-shard order is priority then input order."""
    if not priority:
        return list(specs)

    def rank(spec: InputSpec) -> int:
        names = [spec.default_source, spec.path, Path(spec.path).name]
        return min(priority_of(n, priority) for n in names)

    return sorted(specs, key=rank)


def pack_order(prio: np.ndarray, rank: int, idx: np.ndarray) -> np.ndarray:
    """Preference-order keys (uint64) of rows `idx` of task `rank` with source priorities `prio`."""
    if rank >= 1 << RANK_BITS or (len(idx) and int(idx.max()) >= 1 << IDX_BITS):
        raise ValueError(f"dedup: at most {1 << RANK_BITS} tasks of {1 << IDX_BITS} rows each")
    prio = np.minimum(np.asarray(prio, dtype=np.uint64), np.uint64(PRIO_MAX))
    return ((prio << np.uint64(IDX_BITS + RANK_BITS)) | np.uint64(rank << IDX_BITS)
            | np.asarray(idx, dtype=np.uint64))


def unpack_order(order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rank, index in task) of preference-order keys."""
    order = np.asarray(order, dtype=np.uint64)
    mask = np.uint64((1 << IDX_BITS) - 1)
    rank = (order >> np.uint64(IDX_BITS)) & np.uint64((1 << RANK_BITS) - 1)
    return rank.astype(np.int64), (order & mask).astype(np.int64)


# --------------------------------------------------------------------------- exact keys


def hash64(text: str) -> int:
    """64-bit xxhash of a string (the exact-match keys)."""
    return xxhash.xxh64_intdigest(text.encode("utf-8", "surrogatepass"))


@lru_cache(maxsize=8)
def _response_norm(norm: NormConfig) -> NormConfig:
    return replace(norm, wrappers=False)


def _number_text(norm_prompt: str) -> str:
    return " ".join(sorted(_NUMBER.findall(norm_prompt)))


def row_keys(prompt: str, response: str | None, norm: NormConfig = DEFAULT_NORM) -> tuple[str, int, int, int]:
    """(normalised prompt, problem key, pair key, number key) of one row."""
    p = normalize(prompt, norm)
    r = normalize(response, _response_norm(norm)) if response else ""  # wrappers only matter in prompts
    return p, hash64(p), hash64(p + "\x00" + r), hash64(_number_text(p))


@dataclass
class KeyBatch:
    """Exact keys of a batch of rows: normalised prompts and uint64 problem / pair / number keys."""

    norm_prompts: list[str]
    pkey: np.ndarray
    pair: np.ndarray
    num: np.ndarray


def batch_keys(prompts: list[str], responses: list[str | None], norm: NormConfig = DEFAULT_NORM,
               with_numbers: bool = True, kernel: str = "auto") -> KeyBatch:
    """`row_keys` for a batch of rows (same values), with batch normalisation (`kernel`: text/columns.py) of
    each distinct prompt once.
    `with_numbers=False` leaves `num` empty (the signature step needs number keys only for new problems)."""
    first: dict[str | None, int] = {}
    inv = np.fromiter((first.setdefault(p, len(first)) for p in prompts), dtype=np.int64, count=len(prompts))
    distinct = normalize_list(list(first), norm, kernel)  # a prompt with many responses is normalised once
    ps = [distinct[i] for i in inv.tolist()]
    rs = normalize_list(responses, _response_norm(norm), kernel)
    h = xxhash.xxh64_intdigest
    n = len(ps)
    pkey = np.fromiter((h(p.encode("utf-8", "surrogatepass")) for p in distinct), dtype=np.uint64,
                       count=len(distinct))[inv]
    pair = np.fromiter((h(f"{p}\x00{r}".encode("utf-8", "surrogatepass")) for p, r in zip(ps, rs, strict=True)),
                       dtype=np.uint64, count=n)
    return KeyBatch(ps, pkey, pair, number_keys(ps) if with_numbers else np.zeros(0, dtype=np.uint64))


def number_keys(norm_prompts: list[str]) -> np.ndarray:
    """Number keys (hash of the sorted numbers) of normalised prompts, as in `row_keys`."""
    h = xxhash.xxh64_intdigest
    return np.fromiter((h(_number_text(p).encode()) for p in norm_prompts), dtype=np.uint64, count=len(norm_prompts))


def dedup_texts(prompts: list[str | None], norm_prompts: list[str], cfg: DedupConfig) -> list[str]:
    """The normalised text each prompt's number key and MinHash come from: for a code problem (`code_sections`
    on, curate/dedup/pairs/sections.py) its statement section with superscripts joined, so two scrapes that wrap one
    statement in different examples, constraints, stubs and instructions get one number key and close
    signatures; for every other prompt (and a code problem whose statement normalises to nothing) the
    normalised prompt. A substring pre-check keeps the per-row cost of non-code prompts to a few `in` tests."""
    if not cfg.code_sections:
        return norm_prompts
    out = list(norm_prompts)
    for i, raw in enumerate(prompts):
        if raw and maybe_code(raw):
            sec = code_sections(raw)
            if sec is not None:
                out[i] = normalize(join_superscripts(sec.statement), cfg.norm) or out[i]
    return out


# --------------------------------------------------------------------------- shingles and signatures


def batch_shingles(norm_texts: list[str], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Word n-gram hashes of normalised texts and each one's text index; a text of 1..n-1 words is one
    shingle (all its words), an empty text has none."""
    if not norm_texts:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
    wh, rows = hash_words_bytes(BATCH_SEP.join(norm_texts).encode("utf-8", "surrogatepass"))
    sh, srows, _ = ngram_hashes(wh, rows, n)
    counts = np.bincount(rows, minlength=len(norm_texts))
    short = np.flatnonzero((counts > 0) & (counts < n))
    if len(short):
        starts = np.concatenate(([0], np.cumsum(counts)))
        extra = [ngram_hashes(wh[starts[i]:starts[i + 1]], rows[starts[i]:starts[i + 1]], int(counts[i]))[0]
                 for i in short]
        sh = np.concatenate([sh, *extra])
        srows = np.concatenate([srows, short.astype(np.int64)])
    return sh, srows


def shingle_hashes(norm_text: str, n: int) -> np.ndarray:
    """Shingle hashes of one normalised text (`batch_shingles` of a batch of one)."""
    return batch_shingles([norm_text], n)[0]


@lru_cache(maxsize=8)
def _perms(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    return affine_perms(num_perm, seed)


def minhash_signatures(norm_texts: list[str], cfg: DedupConfig) -> tuple[np.ndarray, np.ndarray]:
    """(signatures, has_words): one row of bands*rows_per_band MinHash values per text, below 2^61-1 (the
    range datatrove's band readers accept), and whether the text has any words (no words = no signature).
    The minima come from the compiled loop when `cfg.text_kernel` runs the kernel (same values: minhash.py)."""
    sh, rows = batch_shingles(norm_texts, cfg.ngram)
    a, b = _perms(cfg.num_perm, cfg.seed)
    sig = minhash_rows(sh, rows, len(norm_texts), a, b, cfg.text_kernel)
    has = np.zeros(len(norm_texts), dtype=bool)
    has[rows] = True
    return (sig >> np.uint64(3)) % _MERSENNE, has


def band_signatures(norm_texts: list[str], num: np.ndarray, cfg: DedupConfig) -> tuple[np.ndarray, np.ndarray]:
    """`minhash_signatures` with the number guard folded in: the first value of every band is XOR-ed with
    the number key, so prompts with different numbers (which the guard rejects anyway) are not LSH
    candidates at all. Templated problems that differ only in their numbers share most shingles; without
    this they flood the bucket and cluster steps with pairs the guard then drops (the guard itself still
    checks every candidate in the cluster step)."""
    sig, has = minhash_signatures(norm_texts, cfg)
    if cfg.number_guard and len(sig):
        salt = (np.asarray(num, dtype=np.uint64) >> np.uint64(3))[:, None]
        sig[:, ::cfg.rows_per_band] = (sig[:, ::cfg.rows_per_band] ^ salt) % _MERSENNE
    return sig, has


__all__ = ["priority_of", "sort_specs", "pack_order", "unpack_order", "hash64", "row_keys",
           "batch_keys", "number_keys", "KeyBatch", "batch_shingles", "shingle_hashes", "minhash_signatures",
           "band_signatures", "candidate_verdict", "dedup_texts"]
