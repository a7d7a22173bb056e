"""Coarse candidate tier of the response side: which rows are worth the full normalisation and matching.

Run on every response; only the rows it passes are normalised and matched (`match.Matcher`), so it must
never drop a row the full path would flag. It reads the raw text's Arrow bytes through a 256-entry table
(ASCII letters lower-cased, every other byte, UTF-8 included, a separator) and keeps letter tokens, each
reduced by one function `keep` of the token alone: trailing `e`/`s` stripped (the request canon's verb
stem), then dropped when shorter than 2 letters, in `U` (every word the normaliser makes, drops or changes:
LaTeX command names and what they map to, Unicode math words, instruction wrappers, request-template words,
`fn`) or starting like a request verb. Digits and non-ASCII bytes are separators. So for the ASCII and
harmless non-ASCII text it accepts, the kept tokens of a raw text equal the kept tokens of its normalised
words, in order (`verify_tables` checks this on the normaliser's own tables at index build):
- case, punctuation, letters/digits split, Unicode math (`√` -> `sqrt`, in U), LaTeX commands (`\\sqrt`,
  `\\dfrac`, `\\le`: names and their images in U), `a/b` vs `\\frac{a}{b}`, wrappers and request templates
  (all their words in U, the verb stemmed on both sides) change nothing that `keep` leaves;
- code-fence lines, `\\begin{..}`/`\\end{..}` and defined / known function names are handled on the raw
  text first by the normaliser's own patterns (`CODE_FENCE`, `ENVIRONMENT`, `canon.rename_functions`);
- rows holding a *risky* character (one whose NFKC or lower case makes ASCII letters or LaTeX / fence
  syntax, combining marks, characters unknown to Python's tables) always pass.
The index holds the coarse n-grams (bag hashes of `n` consecutive kept tokens) of every entry's raw and
normalised text, and the kept-token keys of short keys with fewer than `n` kept tokens. A row the full path
flags on the response side shares a normalised run with an entry (>= `min(3, ...)` distinct 8-grams, or a
short key): its kept tokens are then a run of the row's, so it shares a coarse n-gram, unless the entry is
*weak* (so few kept tokens that the 8-grams the full tier needs can all have fewer than `n`) -- rows are
then matched in full whenever the index has a weak entry for them (`weak` below: all rows pass).
`DecontamConfig.coarse_tier: coarse` turns it on (the flagged rows are the same; tests/test_decontam_coarse.py).
Off by default: measured on the shared data (bench/decontam/probe.py, `coarse` step) it costs 80-95% of the
full normalisation of the same rows (the whole-text steps of `prepare` and the byte passes) and passes 100% of
long-CoT responses and 78% (n=4) to 100% (n=2) of 4k-character ones, since 9.5k benchmark items share some
4-token phrase with almost any long text; and the 17 shared benchmarks have 15 weak entries at n=2 (1,328
at n=4), so it would vouch for no row there anyway.

One module on purpose: the byte table, the token rule `keep` and `verify_tables` (which proves the rule safe
against the normaliser's own tables) must change together.
"""

from __future__ import annotations

import logging
import math
from functools import lru_cache

import numpy as np

from cotforge.curate.text.hashing import U64, BitPrefilter, hash_spans, sorted_lookup

log = logging.getLogger(__name__)

N = 2  # coarse n-gram size (kept tokens): 3 and 4 leave hundreds of weak math entries (bench/decontam/probe.py)
_LUT = np.zeros(256, dtype=np.uint8)
_LUT[97:123] = np.arange(97, 123)
_LUT[65:91] = np.arange(97, 123)
_LUT[48:58] = np.arange(48, 58)
_KIND = np.zeros(256, dtype=np.int8)  # 1 letter, 2 digit: a token is a run of one kind
_KIND[97:123] = 1
_KIND[65:91] = 1
_KIND[48:58] = 2
REQUEST_VERBS = ("write", "create", "implement", "define", "develop", "give", "make", "build", "need", "provide")
REQUEST_WORDS = "me a an the python python3 function small simple code program script method lambda in to that which " \
                "for of will can should zzreq fn"
STRUCTURAL = set("\\{}`$^_")  # characters the LaTeX / fence / script steps react to


def stem(word: str) -> str:
    """The token form `keep` tests: trailing e/s stripped (request canon: "finds"/"find", "uses"/"use")."""
    return word.rstrip("es")


def _prefix_codes(words) -> tuple[np.ndarray, np.ndarray]:
    """Little-endian codes of the first 3 / 4 letters of the stemmed request verbs (`keep` drops tokens
    starting so)."""
    p3, p4 = set(), set()
    for w in words:
        s = stem(w)[:4]
        code = int.from_bytes(s.encode(), "little")
        (p3 if len(s) == 3 else p4).add(code)
    return np.array(sorted(p3), dtype=np.uint32), np.array(sorted(p4), dtype=np.uint32)


class Tokens:
    """Kept coarse tokens of a batch of texts: hashes and the text each belongs to (in text order)."""

    def __init__(self, h: np.ndarray, rows: np.ndarray):
        self.h, self.rows = h, rows

    def grams(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Bag hashes of every k consecutive kept tokens inside one text (sum mod 2^64), and their text."""
        m = len(self.h) - k + 1
        if m <= 0:
            return np.zeros(0, dtype=U64), np.zeros(0, dtype=np.int64)
        with np.errstate(over="ignore"):
            s = np.concatenate((np.zeros(1, dtype=U64), np.cumsum(self.h, dtype=U64)))
            g = s[k:] - s[:m]
        ok = self.rows[:m] == self.rows[k - 1:]
        return g[ok], self.rows[:m][ok]


class Vocabulary:
    """`keep`'s dropped words (hashes, a direct-mapped table) and request-verb prefixes."""

    def __init__(self, words):
        self.words = sorted({stem(w) for w in words if stem(w)})
        self.p3, self.p4 = _prefix_codes(REQUEST_VERBS)
        h = tokenize_plain([" ".join(self.words)], vocab=None).h if self.words else np.zeros(0, dtype=U64)
        bits = 12
        while True:  # a table without collisions among U's hashes
            slot = (h & U64((1 << bits) - 1)).astype(np.int64)
            if len(np.unique(slot)) == len(slot):
                break
            bits += 1
        self.mask = U64((1 << bits) - 1)
        self.table = np.full(1 << bits, U64(0), dtype=U64)
        self.table[slot] = h
        if len(h) and (h == 0).any():
            raise ValueError("coarse vocabulary: a zero hash")

    def drop(self, h: np.ndarray, code4: np.ndarray, lens: np.ndarray) -> np.ndarray:
        """Bool mask of tokens `keep` drops (given their hash, first-4-letter code and stemmed length)."""
        out = self.table[(h & self.mask).astype(np.int64)] == h
        out |= np.isin(code4 & np.uint32(0xFFFFFF), self.p3) & (lens >= 3)
        out |= np.isin(code4, self.p4) & (lens >= 4)
        return out


def _tokens_of(t: np.ndarray, o: np.ndarray, vocab: Vocabulary | None) -> Tokens:
    """Kept tokens of the bytes `t` (rows at offsets `o`)."""
    n = len(o) - 1
    if len(t) == 0:
        return Tokens(np.zeros(0, dtype=U64), np.zeros(0, dtype=np.int64))
    low = _LUT[t]
    kind = _KIND[t]
    inner = o[1:-1][(o[1:-1] > 0) & (o[1:-1] < len(t))]
    change = np.empty(len(t), dtype=bool)
    change[0] = True
    change[1:] = kind[1:] != kind[:-1]
    change[inner] = True
    edge = np.flatnonzero(change)  # starts of runs of one kind (and of rows)
    run_end = np.append(edge[1:], len(t))
    tok = kind[edge] != 0
    starts, ends = edge[tok], run_end[tok]
    is_digit = kind[starts] == 2
    lens = ends - starts
    run = np.zeros(len(starts), dtype=np.int64)  # trailing e/s letters
    active = np.ones(len(starts), dtype=bool)
    for k in range(64):
        c = low[np.maximum(ends - 1 - k, 0)]
        active &= (k < lens) & ((c == 101) | (c == 115)) & ~is_digit
        if not active.any():
            break
        run += active
    lens = lens - run
    ok = lens >= 1  # every number, letters left after the stem
    starts, lens = starts[ok], lens[ok]
    h = hash_spans(low, starts, lens)
    if vocab is not None and len(h):
        buf = np.zeros(len(low) + 4, dtype=np.uint8)
        buf[:len(low)] = low
        v4 = np.ndarray((len(low) + 1,), dtype="<u4", buffer=buf, strides=(1,))
        code4 = v4[starts]
        keep = ~vocab.drop(h, code4, lens)
        starts, h = starts[keep], h[keep]
    rows = np.searchsorted(o, starts, side="right") - 1 if n > 1 else np.zeros(len(starts), dtype=np.int64)
    return Tokens(h, rows)


def _arrow_bytes(arr) -> tuple[np.ndarray, np.ndarray]:
    """(bytes, offsets from 0) of a pyarrow (Large)StringArray."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not pa.types.is_large_string(arr.type):
        arr = arr.cast(pa.large_string())
    n = len(arr)
    offs = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset:arr.offset + n + 1]
    lo, hi = int(offs[0]), int(offs[-1])
    data = arr.buffers()[2]
    t = np.frombuffer(data, dtype=np.uint8)[lo:hi] if data is not None and hi > lo else np.zeros(0, dtype=np.uint8)
    return t, offs - lo


def tokenize_plain(texts, vocab: Vocabulary | None) -> Tokens:
    """Kept tokens of texts as they are (normalised texts at index build; raw texts after `prepare`)."""
    import pyarrow as pa

    arr = texts if isinstance(texts, (pa.Array, pa.ChunkedArray)) else pa.array(list(texts), pa.large_string())
    t, o = _arrow_bytes(arr.fill_null(""))
    return _tokens_of(t, o, vocab)


# --------------------------------------------------------------------------- tables (index build)


def _command_words(norm_cfg) -> set[str]:
    """Command names the normaliser maps to something else, and the words they map to; the words Unicode
    math maps to; wrapper and request-template words; `fn`/`zzreq`."""
    from cotforge.curate.text import mathmap
    from cotforge.curate.text.normalize import normalized_wrappers

    out: set[str] = set(REQUEST_WORDS.split()) | set(REQUEST_VERBS)
    for name, val in mathmap.COMMANDS.items():
        name = name.lower() if norm_cfg.lowercase else name
        if val != name:
            out.add(name)
            out.update(val.split())
    for v in mathmap.MATH.values():
        for w in v.replace("\\", " ").replace("^", " ").replace("[", " ").replace("]", " ").split():
            w = w.lower()
            out.add(w)
            out.update(mathmap.COMMANDS.get(w, w).split())
    for w in normalized_wrappers(norm_cfg):
        out.update(w.split())
    return {"".join(c for c in w if c.isascii() and c.isalpha()).lower() for w in out} - {""}


@lru_cache(maxsize=1)
def _lower_makes_ascii() -> str:
    """Non-ASCII characters whose lower case holds an ASCII letter (İ, the Kelvin sign)."""
    return "".join(c for c in map(chr, range(0x80, 0x110000)) if not 0xD800 <= ord(c) < 0xE000
                   and any(x.isascii() and x.isalpha() for x in c.lower()))


def risky_class(norm_cfg) -> str:
    """A regex class body of the characters whose rows always go to the full path (module docstring)."""
    from cotforge.curate.text import mathmap
    from cotforge.curate.text.unitables import nfkc_tables, unknown_class

    ascii_map, unstable = nfkc_tables()
    chars = set(_lower_makes_ascii())
    for k, v in list(ascii_map.items()) + list(mathmap.PRE_NFKC.items()):
        if any(c.isalnum() or c in STRUCTURAL for c in v):
            chars.add(k)
    chars |= set(_misread([k for k in mathmap.MATH if len(k) == 1 and not k.isascii()], norm_cfg, _vocab_for(norm_cfg)))
    esc = "".join(sorted(f"\\x{{{ord(c):x}}}" for c in chars if not c.isascii()))
    un = _body(unstable)
    body = esc + (un or "") + (_body(unknown_class()) or "")
    if un is None:
        log.warning("coarse tier: unexpected NFKC class %r, combining marks only", unstable[:40])
        body += "\\p{M}"
    return body


def _body(cls: str) -> str | None:
    """The body of a regex class `[...]`, None for anything else."""
    return cls[1:-1] if cls.startswith("[") and cls.endswith("]") else None


def _math_safe(ch: str, norm_cfg) -> bool:
    """Whether `ch` between letters normalises to words `keep` drops (π -> pi, √ -> sqrt)."""
    return not _misread([ch], norm_cfg, _vocab_for(norm_cfg))


@lru_cache(maxsize=4)
def _vocab_for(norm_cfg) -> Vocabulary:
    return Vocabulary(_command_words(norm_cfg))


CONTEXTS = ("qqq{}qqq", "qqq {} qqq", "{}qqq", "qqq{}", "kkk.{}.kkk")


def _misread(chars: list[str], norm_cfg, vocab: Vocabulary) -> list[str]:
    """Those of `chars` whose kept tokens in one of CONTEXTS differ from their normalisation's (one batch)."""
    from cotforge.curate.text.normalize import normalize

    texts = [ctx.format(c) for c in chars for ctx in CONTEXTS]
    a, b = tokenize_plain(texts, vocab), tokenize_plain([normalize(t, norm_cfg) for t in texts], vocab)
    bad = set()
    for r in set(np.unique(a.rows).tolist()) | set(np.unique(b.rows).tolist()):
        if not np.array_equal(a.h[a.rows == r], b.h[b.rows == r]):
            bad.add(chars[r // len(CONTEXTS)])
    return sorted(bad)


def verify_tables(norm_cfg, vocab: Vocabulary, risky: str) -> list[str]:
    """Characters of the normaliser's tables whose rows the tier would read wrong (should be empty)."""
    import polars as pl

    from cotforge.curate.text import mathmap
    from cotforge.curate.text.unitables import nfkc_tables

    cand = sorted(c for c in set(mathmap.MATH) | set(mathmap.PRE_NFKC) | set(nfkc_tables()[0])
                  if len(c) == 1 and not c.isascii())
    flagged = pl.Series(cand, dtype=pl.String).str.contains(f"[{risky}]").to_list()
    return _misread([c for c, f in zip(cand, flagged, strict=True) if not f], norm_cfg, vocab)


# --------------------------------------------------------------------------- the index part


def coarse_supported(cfg) -> bool:
    """The tier's argument holds for the default normalisation switches and the n-gram sizes it was made for."""
    from cotforge.curate.text.normalize import DEFAULT_NORM

    return cfg.norm == DEFAULT_NORM and cfg.ngram >= N


def build_coarse(raw: list[str], norm_texts: list[str], entry_ngrams: list[np.ndarray], keys: np.ndarray,
                 short: np.ndarray, norm_cfg, cfg) -> tuple[dict[str, np.ndarray], dict]:
    """Coarse arrays of the index: `coarse` (sorted n-gram bag hashes of every entry's raw and normalised
    text), `coarse_short` (k, hash) rows of short keys with 1..N-1 kept tokens; and meta (vocabulary, risky
    class, weak entries). `entry_ngrams[e]`: entry e's 8-gram hashes in text order, `keys`: the non-stop ones."""
    vocab = _vocab_for(norm_cfg)
    risky = risky_class(norm_cfg)
    prepared = prepare(raw, frozenset(), risky_pattern=None)
    grams = [tokenize_plain(prepared, vocab).grams(N)[0], tokenize_plain(norm_texts, vocab).grams(N)[0]]
    coarse = np.unique(np.concatenate(grams))
    weak, short_rows, weak_short = weak_parts(norm_texts, entry_ngrams, keys, short, vocab, cfg, N)
    cs = np.array(sorted(set(short_rows)), dtype=U64).reshape(-1, 2)
    bad = verify_tables(norm_cfg, vocab, risky)
    meta = {"n": N, "vocabulary": vocab.words, "risky": risky, "weak_entries": weak, "weak_short": weak_short,
            "unverified_chars": bad}
    if bad:
        log.warning("coarse tier: %d table characters read differently (rows with them pass): %s", len(bad), bad[:20])
    return {"coarse": coarse, "coarse_short": cs}, meta


def weak_parts(norm_texts: list[str], entry_ngrams: list[np.ndarray], keys: np.ndarray, short: np.ndarray,
               vocab: Vocabulary, cfg, n_coarse: int) -> tuple[list[int], list[tuple[int, int]], list[int]]:
    """Entries whose flagging 8-grams may all hold fewer than `n_coarse` kept tokens (weak), the (k, hash)
    keys of response-side short keys with 1..n_coarse-1 kept tokens, and the entries of short keys with none."""
    weak: list[int] = []
    n = cfg.ngram
    words = [t.split(" ") if t else [] for t in norm_texts]
    first = np.concatenate(([0], np.cumsum([len(w) for w in words])))
    tok = tokenize_plain([x for w in words for x in w], vocab)  # one batch: row = global word index
    c = np.concatenate(([0], np.cumsum(np.bincount(tok.rows, minlength=int(first[-1])))))
    for e, ws in enumerate(words):
        if len(ws) < n:
            continue
        lo = int(first[e])
        win = c[lo + n:lo + len(ws) + 1] - c[lo:lo + len(ws) - n + 1]  # kept tokens of each 8-gram
        h = entry_ngrams[e]
        nonstop = sorted_lookup(keys, h)[1]
        tot = len(np.unique(h[nonstop]))
        need = max(1, min(max(math.ceil(cfg.prefilter * tot), min(cfg.min_ngrams, tot)),
                          cfg.diverge_chunk_words - n + 1))
        if len(np.unique(h[nonstop & (win[:len(h)] < n_coarse)])) >= need:
            weak.append(e)
    short_rows, weak_short = [], []
    for k, e, s, _kind in short.tolist():
        if k < cfg.response_short_words:
            continue  # the response side only matches keys of >= response_short_words words
        tok = tokenize_plain([" ".join(norm_texts[e].split(" ")[s:s + k])], vocab)
        if len(tok.h) == 0:
            weak_short.append(e)
        elif len(tok.h) < n_coarse:
            short_rows.append((len(tok.h), int(tok.grams(len(tok.h))[0][0])))
    return weak, short_rows, weak_short


# --------------------------------------------------------------------------- rows (each task)


def prepare(texts, known: frozenset[str], risky_pattern: str | None):
    """The raw texts with the normaliser's whole-text steps applied (defined / known function names
    renamed as `canon.matcher_norm` does, code-fence lines and LaTeX environments removed), and a bool mask
    of rows holding a risky character. Returns (pyarrow LargeStringArray, numpy mask) or, without
    `risky_pattern`, the array only."""
    import polars as pl

    from cotforge.curate.decontam.canon import LONG, rename_functions
    from cotforge.curate.text.normalize import CODE_FENCE, ENVIRONMENT

    s = texts if isinstance(texts, pl.Series) else pl.Series("t", texts, dtype=pl.String)
    s = s.cast(pl.String).fill_null("")
    has_def = s.str.contains("def ", literal=True)
    found = None
    if known:
        found = s.str.extract_many(sorted(known), overlapping=True)
        has_def |= found.list.len() > 0
    if has_def.any():
        idx = has_def.arg_true()
        names = found.gather(idx).to_list() if found is not None else [[]] * len(idx)
        sub = s.gather(idx).to_list()
        s = s.scatter(idx, pl.Series([rename_functions(t, tuple(k)) if len(t) <= LONG or k else t
                                      for t, k in zip(sub, names, strict=True)], dtype=pl.String))
    fence = s.str.contains("```", literal=True)
    if fence.any():
        idx = fence.arg_true()
        s = s.scatter(idx, s.gather(idx).str.replace_all(CODE_FENCE, " "))
    env = s.str.contains("\\", literal=True)
    if env.any():
        idx = env.arg_true()
        s = s.scatter(idx, s.gather(idx).str.replace_all(ENVIRONMENT, " "))
    arr = s.to_arrow()
    if risky_pattern is None:
        return arr
    risky = s.str.contains(f"[{risky_pattern}]").fill_null(True).to_numpy()
    return arr, risky


class CoarseTier:
    """The loaded coarse part of an index; `candidates` says which texts of a batch need the full path."""

    def __init__(self, coarse: np.ndarray, coarse_short: np.ndarray, meta: dict, known: frozenset[str]):
        self.n = int(meta["n"])
        self.vocab = Vocabulary(meta["vocabulary"])
        self.risky = meta["risky"]
        self.weak = bool(meta["weak_entries"] or meta["weak_short"])
        self.known = known
        self.coarse = coarse
        self.prefilter = BitPrefilter(coarse)
        self.short = {int(k): np.unique(coarse_short[coarse_short[:, 0] == k, 1]) for k in np.unique(coarse_short[:, 0])}

    def candidates(self, texts) -> np.ndarray:
        """Bool mask: which texts may hold a benchmark item on the response side (all when the index has
        weak entries)."""
        n = len(texts)
        if self.weak:
            return np.ones(n, dtype=bool)
        arr, out = prepare(texts, self.known, self.risky)
        tok = _tokens_of(*_arrow_bytes(arr), self.vocab)
        g, gr = tok.grams(self.n)
        m = self.prefilter.maybe(g)
        hit = gr[m][sorted_lookup(self.coarse, g[m])[1]]
        out = out.copy()
        out[hit] = True
        for k, keys in self.short.items():
            g, gr = tok.grams(k)
            out[gr[sorted_lookup(keys, g)[1]]] = True
        return out
