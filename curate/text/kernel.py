"""The shared normaliser and word / n-gram hasher as compiled kernels (numba), for whole Arrow columns.

`normalize` (curate/text/normalize.py) stays the definition; this module gives the same text for every input,
faster. The per-character steps of `normalize._chars` become two lookup tables built once from Python's own
`unicodedata` / `str.lower` / `str.isalnum` and the `mathmap` tables (and cached on disk next to unitables'):

- stage A, per input code point: the pre-NFKC maps (superscripts, subscripts, vulgar fractions, combining
  accents), NFKC and lower-casing, giving a short string of intermediate code points, plus flags: the code point
  starts a superscript / subscript run (the reference inserts `^` / `_`, a word break), or NFKC may join it with
  its neighbour (combining marks, second halves of compositions, Hangul vowel / final jamo), which a
  per-character table cannot express: such a character's span goes through a compiled NFKC (canonical classes,
  decompositions, composition pairs and `str.lower` as tables from `unicodedata`, Hangul by arithmetic), from
  the last character NFKC never joins with what precedes it to the next one;
- stage B, per intermediate code point: the Unicode-math map and the LaTeX command map of what it inserts
  (`≤` -> ` \\leq ` -> `leq`), then punctuation to a space, as the UTF-8 bytes it contributes.

One compiled pass per text decodes the UTF-8, applies both tables, merges `<=` / `>=`, runs the LaTeX rules
(`\\frac12`, environments, commands) and the code-fence rule with look-ahead, splits ASCII letters from digits,
collapses spaces and strips the ends. Only a text with a surrogate, a composition span of over `SEG_CAP` code
points or over `BIG_ROW` bytes takes `normalize`; instruction wrappers are removed from the kernel's output by
the batch wrapper step of `normalize` (it reads normalised text only). So `normalize_many(texts)[i] == normalize(texts[i])`
for every text (tests/test_kernel.py fuzzes it on real corpora and adversarial Unicode).

`hash_words_ngrams` reads the normalised column once more, 8 bytes at a time, and returns the word hashes of
`hashing.hash_words_arrow` and the n-gram hashes of `hashing.ngram_hashes`, bit for bit. Large outputs are
allocated by numpy, not inside the kernels (huge pages; see `_hash_outputs`).

The kernels are compiled with `cache=True`: numba keeps the machine code on disk (in the cotforge cache folder,
or NUMBA_CACHE_DIR when set), so each worker process compiles once per installation, not once per run.

One module on purpose: the tables and the compiled pass that reads them must change together (tests/test_kernel.py
fuzzes the pair against `normalize`).
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import unicodedata
from dataclasses import replace
from functools import lru_cache

import numpy as np

from cotforge.curate.text import mathmap
from cotforge.curate.text.normalize import (
    DEFAULT_NORM,
    NormConfig,
    normalize,
    normalize_arrow,
    strip_wrappers_series,
    words,
)
from cotforge.curate.text.unitables import cache_dir

log = logging.getLogger(__name__)

N_CP = 0x110000
# stage A flags
COMPOSE = 1  # NFKC may join this code point with a neighbour: its span takes the composition path
SUP = 2
SUB = 4
HARD = 8  # no compiled path (a surrogate): the text takes `normalize`
BIG_ROW = 1 << 20  # texts over 1 MB take `normalize` (the kernel's buffers are ~20-40x a text's size at worst)
SEG_CAP = 1024  # code points of one composition span; a longer one (a letter under 1,000+ marks) -> `normalize`
TABLE_VERSION = 4  # bump when a table rule changes (part of the cache file name)
_HANGUL_S, _HANGUL_L, _HANGUL_V, _HANGUL_T = 0xAC00, 0x1100, 0x1161, 0x11A7
_HANGUL_N, _HANGUL_TN, _HANGUL_COUNT = 588, 28, 11172


def _may_compose() -> set[int]:
    """Code points NFKC may join with the character before them: second halves of canonical compositions
    (NFC quick check "Maybe") and Hangul vowel / final jamo."""
    out = set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))
    for i in range(N_CP):
        d = unicodedata.decomposition(chr(i))
        if d and not d.startswith("<"):
            parts = d.split()
            if len(parts) == 2:
                out.add(int(parts[1], 16))
    return out


def _unstable(c: str, maybe: set[int]) -> bool:
    """Whether NFKC of `c` may depend on its neighbours (so a per-character table is not enough): `c`, or the
    first character of its decomposition, is a non-starter (combining class > 0) or may compose with what
    precedes it. A precomposed letter (é, Å, ≠) only ever meets a later mark, which is flagged itself."""
    d = unicodedata.normalize("NFKD", c)
    return any(unicodedata.combining(ch) or ord(ch) in maybe for ch in (c, d[:1] or c))


def _b_output(d: str) -> str:
    """What intermediate character `d` contributes after the math map, the LaTeX command map and punctuation
    (the reference steps applied to `d` alone; the math map's values are padded with spaces, so they do not
    join their neighbours)."""
    s = mathmap.MATH.get(d)
    if s is None:
        return d if d.isalnum() else " "
    return " " + " ".join(words(s)) + " "  # the whole chain on the math map's LaTeX (no wrappers in it)


def _sparse(items: list[tuple[int, list[int]]], key_dtype=np.int32) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sorted keys, offsets, pool) of a map code point -> code points (keys sorted, binary-searched)."""
    items = sorted(items)
    keys = np.array([k for k, _ in items], dtype=key_dtype)
    off = np.cumsum([0] + [len(v) for _, v in items]).astype(np.int32)
    pool = np.array([c for _, v in items for c in v] or [0], dtype=np.int32)
    return keys, off, pool


def _composition_tables() -> dict[str, np.ndarray]:
    """What the compiled NFKC of a span needs (Python's `unicodedata` is the source of every entry):
    canonical combining classes (full table), the NFKD of every code point that has one (Hangul syllables
    aside: arithmetic), the primary composites keyed by their pair (a << 21 | b; exclusions and singletons
    left out by asking NFC itself), `str.lower` where it changes a code point, and the pre-NFKC map."""
    ccc = np.zeros(N_CP, dtype=np.uint8)
    dec: list[tuple[int, list[int]]] = []
    low: list[tuple[int, list[int]]] = []
    pairs: list[tuple[int, list[int]]] = []
    for i in range(N_CP):
        if 0xD800 <= i < 0xE000:
            continue
        c = chr(i)
        ccc[i] = unicodedata.combining(c)
        if not _HANGUL_S <= i < _HANGUL_S + _HANGUL_COUNT:
            d = unicodedata.normalize("NFKD", c)
            if d != c:
                dec.append((i, [ord(x) for x in d]))
            raw = unicodedata.decomposition(c).split()
            if len(raw) == 2 and not raw[0].startswith("<"):
                a, b = int(raw[0], 16), int(raw[1], 16)
                if unicodedata.normalize("NFC", chr(a) + chr(b)) == c:
                    pairs.append(((a << 21) | b, [i]))
        lc = c.lower()
        if lc != c:
            low.append((i, [ord(x) for x in lc]))
    dk, d_off, d_pool = _sparse(dec)
    lk, l_off, l_pool = _sparse(low)
    pk, p_off, p_pool = _sparse([(ord(k), [ord(x) for x in v]) for k, v in mathmap.PRE_NFKC.items()])
    ck, _, cv = _sparse(pairs, key_dtype=np.int64)
    return {"ccc": ccc, "dk": dk, "d_off": d_off, "d_pool": d_pool, "lk": lk, "l_off": l_off, "l_pool": l_pool,
            "pk": pk, "p_off": p_off, "p_pool": p_pool, "ck": ck, "cv": cv}


def _build_tables() -> dict[str, np.ndarray]:
    """All tables (a few seconds: one pass over every code point)."""
    maybe = _may_compose()
    pre = mathmap.PRE_NFKC
    a_off = np.zeros(N_CP + 1, dtype=np.int32)
    a_flag = np.zeros(N_CP, dtype=np.uint8)
    a_pool: list[int] = []
    slow_max = 0  # the most code points one input character can become on the composition path
    for i in range(N_CP):
        a_off[i] = len(a_pool)
        if 0xD800 <= i < 0xE000:
            a_flag[i] = COMPOSE | HARD
            continue
        c = chr(i)
        if c in mathmap.SUPERSCRIPTS:
            a_flag[i] |= SUP
        if c in mathmap.SUBSCRIPTS:
            a_flag[i] |= SUB
        s = pre.get(c, c)  # the pre-NFKC maps' outputs go through NFKC too ("ẛ" -> "ſ" -> "s")
        slow_max = max(slow_max, sum(len(x.lower()) for x in unicodedata.normalize("NFKD", s)))
        if any(not ch.isascii() and _unstable(ch, maybe) for ch in s):
            # the composition path reads such a character as itself: one the pre-NFKC map changes has none
            a_flag[i] |= COMPOSE if s == c else COMPOSE | HARD
            continue
        s = unicodedata.normalize("NFKC", s)
        s = s.lower()
        a_pool.extend(map(ord, s))
    a_off[N_CP] = len(a_pool)
    b_off = np.zeros(N_CP + 1, dtype=np.int32)
    b_pool = bytearray()
    for i in range(N_CP):  # every code point: the composition path may write any NFKC + lower output
        b_off[i] = len(b_pool)
        b_pool += b" " if 0xD800 <= i < 0xE000 else _b_output(chr(i)).encode("utf-8")
    b_off[N_CP] = len(b_pool)
    le = (" " + " ".join(words("<=")) + " ").encode()
    ge = (" " + " ".join(words(">=")) + " ").encode()
    return {"a_off": a_off, "a_pool": np.array(a_pool, dtype=np.int32), "a_flag": a_flag, "b_off": b_off,
            "b_pool": np.frombuffer(bytes(b_pool), dtype=np.uint8), "le": np.frombuffer(le, dtype=np.uint8),
            "ge": np.frombuffer(ge, dtype=np.uint8), "slow_max": np.array([slow_max], dtype=np.int64),
            **_composition_tables()}


@lru_cache(maxsize=1)
def tables() -> dict[str, np.ndarray]:
    """The kernel's tables, from the disk cache (named by Python and Unicode version) or built and cached."""
    name = (f"kernel-tables-v{TABLE_VERSION}-py{sys.version_info[0]}{sys.version_info[1]}"
            f"-ucd{unicodedata.unidata_version}-{len(mathmap.MATH)}-{len(mathmap.COMMANDS)}"
            f"-{len(mathmap.PRE_NFKC)}.npz")
    path = cache_dir() / name
    try:
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, KeyError):
        pass
    log.info("kernel: building the Unicode tables (once per Python / Unicode version)")
    t = _build_tables()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".kernel-", suffix=".npz")
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **t)
        os.replace(tmp, path)
    except OSError as e:
        log.debug("kernel: tables not cached (%s)", e)
    return t


# --------------------------------------------------------------------------- compiled kernels

try:
    import numba
    from numba import njit
except ImportError:  # pragma: no cover - numba is a dependency; without it callers use the reference
    njit = None
else:
    # machine code goes to the cotforge cache folder, never into the installed package (site-packages may be
    # read-only, and an installed package should not change as it runs); NUMBA_CACHE_DIR, when set, wins
    if not numba.config.CACHE_DIR:
        numba.config.CACHE_DIR = str(cache_dir() / "numba")


def _jit(fn):
    return njit(cache=True, nogil=True)(fn) if njit is not None else fn


def compiled(fn):
    """`fn` compiled as this module's kernels are (numba, machine code cached on disk, no GIL); `fn` itself
    when numba is missing. For other compiled passes over the same buffers (`text/literals.py`)."""
    return _jit(fn)


def _jit_inline(fn):
    """A small helper inlined into its callers at numba's IR level (a call per byte costs more than the work)."""
    return njit(cache=True, nogil=True, inline="always")(fn) if njit is not None else fn


@_jit_inline
def push_pair(a, b, n, x, y):
    """a[n], b[n] = x, y for compiled passes that collect pairs into preallocated arrays: n + 1, or -1 when
    the arrays are full (the caller returns -1 and its Python side retries with larger ones)."""
    if n >= len(a):
        return -1
    a[n] = x
    b[n] = y
    return n + 1


def _space_rule_tables() -> tuple[np.ndarray, np.ndarray]:
    """The space rules of `_put` as two tables: byte class (1 space, 2 ASCII letter, 3 digit, 4 other) and,
    per (previous state, class), 8 * (a space goes before the byte) + the next state."""
    cls = np.full(256, 4, dtype=np.uint8)
    cls[32] = 1
    cls[ord("a"):ord("z") + 1] = 2
    cls[ord("A"):ord("Z") + 1] = 2
    cls[ord("0"):ord("9") + 1] = 3
    step = np.zeros(5 * 5, dtype=np.uint8)
    for prev in range(5):
        for c in range(1, 5):
            if c == 1:  # a space is only remembered (none at a row's start)
                step[prev * 5 + c] = 0 if prev == 0 else 1
            else:
                sep = prev == 1 or (prev == 2 and c == 3) or (prev == 3 and c == 2)
                step[prev * 5 + c] = 8 * sep + c
    return cls, step


_CLS, _STEP = _space_rule_tables()  # numba freezes global arrays into the machine code as constants


@_jit_inline
def _put(out, pos, b, prev):
    """Append byte `b` with the reference's space rules: runs of spaces collapse, none at a row's start (the
    end is stripped by the caller dropping a pending space), a space between an ASCII letter and a digit.
    `prev`: 0 row start, 1 space pending, 2 letter, 3 digit, 4 other. Returns (pos, prev).
    Branch-free (tables `_CLS` / `_STEP`): a space and the byte are stored unconditionally and `pos` advances
    only over what counts, so word boundaries cost no mispredicted branch (the buffers have slack for it)."""
    c = _CLS[b]
    st = _STEP[prev * 5 + c]
    out[pos] = 32
    pos += st >> 3
    out[pos] = b
    return pos + (c != 1), st & 7


@_jit_inline
def _put_b(out, pos, d, prev, b_off, b_pool):
    for k in range(b_off[d], b_off[d + 1]):
        pos, prev = _put(out, pos, b_pool[k], prev)
    return pos, prev


@_jit_inline
def _is_letter(d):
    return (97 <= d <= 122) or (65 <= d <= 90)


@_jit
def _command(mid, j, m, out, pos, prev, cmd_hash, cmd_key_off, cmd_keys, cmd_val_off, cmd_vals):
    """The LaTeX rules at the backslash mid[j] (the reference's FRAC_SHORT, ENVIRONMENT and COMMAND passes,
    which never overlap: each starts at its own backslash). Returns (next index, pos, prev)."""
    e = j + 1
    while e < m and _is_letter(mid[e]):
        e += 1
    L = e - j - 1
    if L == 0:  # a backslash before a non-letter is punctuation
        pos, prev = _put(out, pos, 32, prev)
        return j + 1, pos, prev
    name0 = mid[j + 1] | 32
    # \begin{...} / \end{...} with no brace inside: dropped whole
    if (L == 5 and name0 == 98 and (mid[j + 2] | 32) == 101 and (mid[j + 3] | 32) == 103
            and (mid[j + 4] | 32) == 105 and (mid[j + 5] | 32) == 110) or \
            (L == 3 and name0 == 101 and (mid[j + 2] | 32) == 110 and (mid[j + 3] | 32) == 100):
        k = e
        while k < m and mid[k] == 32:
            k += 1
        if k < m and mid[k] == 123:
            k += 1
            while k < m and mid[k] != 123 and mid[k] != 125:
                k += 1
            if k < m and mid[k] == 125:
                pos, prev = _put(out, pos, 32, prev)
                return k + 1, pos, prev
    # \frac12 (also d/t/c-frac): the two digits as words
    f0 = j + 1 if L == 4 else j + 2
    if (L == 4 or (L == 5 and (name0 == 100 or name0 == 116 or name0 == 99))) and (mid[f0] | 32) == 102 \
            and (mid[f0 + 1] | 32) == 114 and (mid[f0 + 2] | 32) == 97 and (mid[f0 + 3] | 32) == 99:
        k = e
        while k < m and mid[k] == 32:
            k += 1
        if k < m and 48 <= mid[k] <= 57:
            k2 = k + 1
            while k2 < m and mid[k2] == 32:
                k2 += 1
            if k2 < m and 48 <= mid[k2] <= 57:
                pos, prev = _put(out, pos, 32, prev)
                pos, prev = _put(out, pos, mid[k], prev)
                pos, prev = _put(out, pos, 32, prev)
                pos, prev = _put(out, pos, mid[k2], prev)
                pos, prev = _put(out, pos, 32, prev)
                return k2 + 1, pos, prev
    # any other command: its replacement from mathmap.COMMANDS, or its name
    h = np.uint64(L)
    for k in range(j + 1, e):
        h = h * np.uint64(1099511628211) + np.uint64(mid[k])
    lo = np.searchsorted(cmd_hash, h)
    pos, prev = _put(out, pos, 32, prev)
    while lo < len(cmd_hash) and cmd_hash[lo] == h:
        ks = cmd_key_off[lo]
        if cmd_key_off[lo + 1] - ks == L:
            same = True
            for k in range(L):
                if cmd_keys[ks + k] != mid[j + 1 + k]:
                    same = False
                    break
            if same:
                for k in range(cmd_val_off[lo], cmd_val_off[lo + 1]):
                    pos, prev = _put(out, pos, cmd_vals[k], prev)
                pos, prev = _put(out, pos, 32, prev)
                return e, pos, prev
        lo += 1
    for k in range(j + 1, e):
        pos, prev = _put(out, pos, mid[k], prev)
    pos, prev = _put(out, pos, 32, prev)
    return e, pos, prev


@_jit
def _fence_end(mid, j, m):
    """Where the code-fence line starting with the backticks at mid[j] ends (the reference's CODE_FENCE:
    three backticks, a language tag of [A-Za-z0-9_+-], spaces / tabs, then a newline or the end), or -1."""
    if j + 2 >= m or mid[j + 1] != 96 or mid[j + 2] != 96:
        return -1
    k = j + 3
    while k < m and (_is_letter(mid[k]) or 48 <= mid[k] <= 57 or mid[k] == 95 or mid[k] == 43 or mid[k] == 45):
        k += 1
    while k < m and (mid[k] == 32 or mid[k] == 9):
        k += 1
    return k if k == m or mid[k] == 10 else -1


@_jit_inline
def _decode(data, i):
    """The code point of the UTF-8 character at data[i] and its length in bytes."""
    b0 = data[i]
    if b0 < 0x80:
        return np.int64(b0), 1
    if b0 < 0xE0:
        return (np.int64(b0 & 0x1F) << 6) | np.int64(data[i + 1] & 0x3F), 2
    if b0 < 0xF0:
        return ((np.int64(b0 & 0x0F) << 12) | (np.int64(data[i + 1] & 0x3F) << 6)
                | np.int64(data[i + 2] & 0x3F)), 3
    return ((np.int64(b0 & 0x07) << 18) | (np.int64(data[i + 1] & 0x3F) << 12)
            | (np.int64(data[i + 2] & 0x3F) << 6) | np.int64(data[i + 3] & 0x3F)), 4


@_jit_inline
def _find(keys, x):
    """Index of `x` in the sorted array `keys`, or -1."""
    k = np.searchsorted(keys, x)
    return k if k < len(keys) and keys[k] == x else -1


@_jit_inline
def _pair(a, b, ck, cv):
    """The primary composite of the pair (a, b), or -1 (Hangul by arithmetic, the rest from the pair table)."""
    if 0x1100 <= a < 0x1113 and 0x1161 <= b < 0x1176:
        return 0xAC00 + ((a - 0x1100) * 21 + (b - 0x1161)) * 28
    if 0xAC00 <= a < 0xAC00 + 11172 and (a - 0xAC00) % 28 == 0 and 0x11A8 <= b < 0x11C3:
        return a + (b - 0x11A7)
    k = _find(ck, (np.int64(a) << 21) | np.int64(b))
    return cv[k] if k >= 0 else -1


@_jit_inline
def _put_mapped(cp, keys, off, pool, out, n):
    """Write the mapping of `cp` (pool[off[k]:off[k + 1]] where keys[k] == cp, else `cp` itself) at out[n:];
    returns the new n. The decomposition and the lower-case tables share this layout."""
    k = _find(keys, cp)
    if k < 0:
        out[n] = cp
        return n + 1
    for q in range(off[k], off[k + 1]):
        out[n] = pool[q]
        n += 1
    return n


@_jit
def _nfkc_lower(seg, n, dbuf, mid, m, ccc, dk, d_off, d_pool, ck, cv, lk, l_off, l_pool):
    """Append `str.lower(NFKC(seg[:n]))` to mid[m:] (Unicode's algorithm: full compatibility decomposition,
    canonical ordering of each run of non-starters, canonical composition); returns the new m, or -1 when
    the span is too long for the buffers (the text then takes `normalize`). `seg` starts at a code point
    NFKC never joins with what precedes it, and the caller ends it before the next one, so the span's NFKC
    is independent of its neighbours."""
    nd = 0
    for s in range(n):
        cp = seg[s]
        if nd + 32 > len(dbuf):
            return -1
        if 0xAC00 <= cp < 0xAC00 + 11172:  # Hangul syllable: L V (T) by arithmetic
            x = cp - 0xAC00
            dbuf[nd] = 0x1100 + x // 588
            dbuf[nd + 1] = 0x1161 + (x % 588) // 28
            nd += 2
            if x % 28:
                dbuf[nd] = 0x11A7 + x % 28
                nd += 1
            continue
        nd = _put_mapped(cp, dk, d_off, d_pool, dbuf, nd)
    i = 0
    while i < nd:  # canonical ordering: a stable insertion sort of each run of non-starters by class
        if ccc[dbuf[i]] == 0:
            i += 1
            continue
        j = i
        while j < nd and ccc[dbuf[j]] != 0:
            j += 1
        for a in range(i + 1, j):
            x = dbuf[a]
            cx = ccc[x]
            b = a - 1
            while b >= i and ccc[dbuf[b]] > cx:
                dbuf[b + 1] = dbuf[b]
                b -= 1
            dbuf[b + 1] = x
        i = j
    if nd == 0:
        return m
    starter = 0
    last = np.int64(ccc[dbuf[0]])
    if last != 0:
        last = 256  # a span starting with a non-starter: nothing composes until a starter
    w = 1
    for r in range(1, nd):
        ch = dbuf[r]
        cc = np.int64(ccc[ch])
        if last < cc or last == 0:  # not blocked from the last starter
            comp = _pair(dbuf[starter], ch, ck, cv)
            if comp >= 0:
                dbuf[starter] = comp
                continue
        if cc == 0:
            starter = w
        last = cc
        dbuf[w] = ch
        w += 1
    if m + 2 * w > len(mid):
        return -1
    for r in range(w):
        m = _put_mapped(dbuf[r], lk, l_off, l_pool, mid, m)
    return m


@_jit
def _compose_span(data, start, i, end, mid, m, seg, dbuf, a_off, a_flag, ccc, pk, p_off, p_pool, dk, d_off,
                  d_pool, ck, cv, lk, l_off, l_pool):
    """Stage A from the character at data[i], which NFKC may join with a neighbour, to the next character it
    never joins (exclusive), through the composition path: returns (that character's byte index, m,
    run state), the index -1 when the text must take `normalize`.

    The span starts at the head, the last character before i that wrote something (a dropped combining
    accent writes nothing and is skipped, as the reference drops it before NFKC): its table-A output in
    mid is taken back and redone with the span. Each pre-NFKC code point that NFKC never joins with what
    precedes it starts a new segment; `_nfkc_lower` does each segment."""
    h = -1
    j = i
    while j > start:
        j -= 1
        while j > start and (data[j] & 0xC0) == 0x80:
            j -= 1
        cp, _ = _decode(data, j)
        if a_flag[cp] & 1:
            return -1, m, 0
        if a_off[cp + 1] > a_off[cp]:
            h = j
            break
    p = i
    if h >= 0:
        cp, _ = _decode(data, h)
        m -= a_off[cp + 1] - a_off[cp]  # its run marker, if any, stays
        p = h
    n = 0
    last_run = 0
    while p < end:
        cp, ln = _decode(data, p)
        f = a_flag[cp]
        if f & 8:
            return -1, m, 0
        if f & 1:  # joins: read as itself (the pre-NFKC map changes no such character)
            if n >= len(seg):
                return -1, m, 0
            seg[n] = cp
            n += 1
            last_run = 0
        elif a_off[cp + 1] > a_off[cp]:
            if p != h:  # the next character NFKC never joins: the span ends
                break
            k = _find(pk, cp)  # the head, as the pre-NFKC map leaves it: each code point starts a segment
            if k < 0:
                seg[0] = cp
                n = 1
            else:
                for q in range(p_off[k], p_off[k + 1]):
                    m = _nfkc_lower(seg, n, dbuf, mid, m, ccc, dk, d_off, d_pool, ck, cv, lk, l_off, l_pool)
                    if m < 0:
                        return -1, m, 0
                    seg[0] = p_pool[q]
                    n = 1
            last_run = f & 6
        else:  # a dropped combining accent
            last_run = 0
        p += ln
    m = _nfkc_lower(seg, n, dbuf, mid, m, ccc, dk, d_off, d_pool, ck, cv, lk, l_off, l_pool)
    return (p if m >= 0 else -1), m, last_run


@_jit_inline
def _put_a(mid, m, cp, f, last_run, a_off, a_pool):
    """Append code point `cp`'s table-A output (flags `f`) to mid[m:], with the reference's "^" / "_" before
    a superscript / subscript run. Returns (m, run state)."""
    run = f & 6
    if run != 0 and run != last_run:
        mid[m] = 94 if run == 2 else 95
        m += 1
    for k in range(a_off[cp], a_off[cp + 1]):
        mid[m] = a_pool[k]
        m += 1
    return m, run


@_jit
def _stage_a_composing(data, start, end, mid, seg, dbuf, a_off, a_pool, a_flag, ccc, pk, p_off, p_pool, dk, d_off,
                       d_pool, ck, cv, lk, l_off, l_pool):
    """Stage A of one text that holds a character NFKC may join with a neighbour: table A as in
    `_normalize_kernel`, each such character's span through `_compose_span`. Returns the code points written
    to `mid`, or -1 when the text must take `normalize`. Apart from the main loop, so that loop stays as
    tight as it is for the texts that need no composition (nearly all)."""
    m = 0
    last_run = 0
    i = start
    while i < end:
        cp, ln = _decode(data, i)
        f = a_flag[cp]
        if f & 1:
            i, m, last_run = _compose_span(data, start, i, end, mid, m, seg, dbuf, a_off, a_flag, ccc, pk, p_off,
                                           p_pool, dk, d_off, d_pool, ck, cv, lk, l_off, l_pool)
            if i < 0:
                return -1
            continue
        m, last_run = _put_a(mid, m, cp, f, last_run, a_off, a_pool)
        i += ln
    return m


@_jit
def _normalize_kernel(data, offs, out, a_off, a_pool, a_flag, b_off, b_pool, ascii_out, le, ge, maxper, amax,
                      big_row, cmd_hash, cmd_key_off, cmd_keys, cmd_val_off, cmd_vals, seg_cap, ccc, pk, p_off,
                      p_pool, dk, d_off, d_pool, ck, cv, lk, l_off, l_pool):
    """Normalise the UTF-8 texts data[offs[i]:offs[i+1]]: (bytes, offsets, fallback flag per text). `out`:
    the caller's first output buffer (numpy's, see `_hash_outputs`), grown here when a text needs more.

    Per text: stage A decodes the UTF-8 into intermediate code points (table A, run markers "^" / "_"; a text
    with a character NFKC may join with a neighbour redoes it in `_stage_a_composing`), stage B reads them
    with look-ahead ("<=", LaTeX) and writes the output bytes (table B, space rules)."""
    n = len(offs) - 1
    mid = np.empty(1024, dtype=np.int32)
    seg = np.empty(seg_cap, dtype=np.int32)
    dbuf = np.empty(18 * seg_cap + 64, dtype=np.int32)
    out_offs = np.zeros(n + 1, dtype=np.int64)
    fallback = np.zeros(n, dtype=np.bool_)
    pos = 0
    for r in range(n):
        if offs[r + 1] - offs[r] > big_row:  # the buffers are sized per text by worst-case expansion
            fallback[r] = True
            out_offs[r + 1] = pos
            continue
        # stage A (the buffer is sized per text: growing it inside the loop costs a reference count per byte)
        if (offs[r + 1] - offs[r]) * amax > len(mid):
            mid = np.empty((offs[r + 1] - offs[r]) * amax, dtype=np.int32)
        m = 0
        last_run = 0
        bad = False
        i = offs[r]
        end = offs[r + 1]
        while i < end:
            b0 = data[i]
            if b0 < 0x80:  # ASCII: lower-cased, never flagged, never in a run
                mid[m] = b0 + 32 if 65 <= b0 <= 90 else b0
                m += 1
                last_run = 0
                i += 1
                continue
            if b0 < 0xE0:
                cp = (np.int64(b0 & 0x1F) << 6) | np.int64(data[i + 1] & 0x3F)
                i += 2
            elif b0 < 0xF0:
                cp = (np.int64(b0 & 0x0F) << 12) | (np.int64(data[i + 1] & 0x3F) << 6) | np.int64(data[i + 2] & 0x3F)
                i += 3
            else:
                cp = ((np.int64(b0 & 0x07) << 18) | (np.int64(data[i + 1] & 0x3F) << 12)
                      | (np.int64(data[i + 2] & 0x3F) << 6) | np.int64(data[i + 3] & 0x3F))
                i += 4
            f = a_flag[cp]
            if f & 1:  # NFKC may join it with a neighbour: the row's stage A again, with composition
                bad = True
                break
            m, last_run = _put_a(mid, m, cp, f, last_run, a_off, a_pool)
        if bad:
            m = _stage_a_composing(data, offs[r], end, mid, seg, dbuf, a_off, a_pool, a_flag, ccc, pk, p_off,
                                   p_pool, dk, d_off, d_pool, ck, cv, lk, l_off, l_pool)
            if m < 0:
                fallback[r] = True
                out_offs[r + 1] = pos
                continue
        # stage B
        if pos + maxper * (m + 1) > len(out):
            grown = np.empty(2 * len(out) + maxper * (m + 1), dtype=np.uint8)
            grown[:pos] = out[:pos]
            out = grown
        prev = 0
        j = 0
        bol = True  # only spaces / tabs since the row's start or the last newline
        while j < m:
            d = mid[j]
            if d < 128 and ascii_out[d] != 0:  # plain ASCII (not one of ` < > \\ newline): its table byte
                bol = bol and (d == 32 or d == 9)
                pos, prev = _put(out, pos, ascii_out[d], prev)
                j += 1
                continue
            if d == 96 and bol:
                k = _fence_end(mid, j, m)
                if k >= 0:  # a code-fence line: one space, the newline stays
                    pos, prev = _put(out, pos, 32, prev)
                    j = k
                    continue
            if d == 10:
                bol = True
            elif d != 32 and d != 9:
                bol = False
            if (d == 60 or d == 62) and j + 1 < m and mid[j + 1] == 61:
                tab = le if d == 60 else ge
                for k in range(len(tab)):
                    pos, prev = _put(out, pos, tab[k], prev)
                j += 2
            elif d == 92:
                j, pos, prev = _command(mid, j, m, out, pos, prev, cmd_hash, cmd_key_off, cmd_keys,
                                        cmd_val_off, cmd_vals)
            elif d < 128:  # ASCII: itself when alphanumeric, else a space
                pos, prev = _put(out, pos, b_pool[b_off[d]], prev)
                j += 1
            else:
                pos, prev = _put_b(out, pos, d, prev, b_off, b_pool)
                j += 1
        out_offs[r + 1] = pos
    return out[:pos], out_offs, fallback


@_jit_inline
def _fmix(x):
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


_MASK = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [2**64 - 1], dtype=np.uint64)  # the low k bytes
_ONES = np.uint64(0x0101010101010101)
_HIGHS = np.uint64(0x8080808080808080)
_SPACES = np.uint64(0x2020202020202020)


@_jit_inline
def _load8(v, i):
    """Bytes i..i+7 of the buffer `v` (uint64 words, little-endian) as one uint64: an unaligned load built from
    the two aligned words it straddles (branch-free: the second shift is split so that it is never by 64)."""
    q = i >> 3
    r = np.uint64(8 * (i & 7))
    return (v[q] >> r) | ((v[q + 1] << np.uint64(1)) << (np.uint64(63) - r))


@_jit_inline
def _first_space(x):
    """Index (0-7) of the first space byte in the 8 bytes of `x`, or 8 when there is none (SWAR zero-byte test
    on x ^ spaces: its lowest flagged byte is exact)."""
    y = x ^ _SPACES
    z = (y - _ONES) & ~y & _HIGHS
    if z == 0:
        return 8
    low = (z & (~z + np.uint64(1))) >> np.uint64(7)  # 256^k for the first space at byte k
    return np.int64((low * np.uint64(0x0001020304050607)) >> np.uint64(56))


@_jit
def _hash_kernel(v, offs, n, wh, wrow, woff, gh, grow, gstart):
    """Word hashes (+ row, byte offset in row) and word n-gram hashes (+ row, first word) of normalised texts
    (single spaces, stripped) held in the uint64 buffer `v` (the text bytes with >= 16 zero bytes after them).

    A word's end is found 8 bytes at a time (SWAR) and its hash is `hashing.hash_spans`'s:
    h = fmix(lo ^ fmix(hi + len * K1 + tail)), lo / hi the word's first / next 8 bytes as little-endian
    integers, tail = sum_k b_k P^k over the bytes past the 16th. The n-gram hash is `hashing.ngram_hashes`'s,
    rolled: acc = sum_j wh[j] * Q^(last - j) over the window, fmix(acc). The six outputs come from the caller
    (`_hash_outputs`), each long enough for every word of the batch."""
    nrows = len(offs) - 1
    nw = 0
    ng = 0
    q = np.uint64(0x9E3779B97F4A7C15)
    qn = np.uint64(1)
    for _ in range(n):
        qn = qn * q
    k1 = np.uint64(0xD6E8FEB86659FD93)
    for r in range(nrows):
        first_word = nw
        acc = np.uint64(0)
        s = offs[r]
        end = offs[r + 1]
        i = s
        while i < end:
            x = _load8(v, i)
            k = _first_space(x)
            at = i
            while k == 8 and at + 8 < end:  # a word of 8+ bytes: the next 8
                at += 8
                k = _first_space(_load8(v, at))
            k = min(at + k, end)
            L = k - i
            lo = x & _MASK[min(L, 8)]
            hi = _load8(v, i + 8) & _MASK[min(max(L - 8, 0), 8)]
            hi = hi + np.uint64(L) * k1
            if L > 16:
                p = np.uint64(1)
                tail = np.uint64(0)
                for j in range(i + 16, k):
                    tail = tail + ((v[j >> 3] >> np.uint64(8 * (j & 7))) & np.uint64(255)) * p
                    p = p * np.uint64(0x100000001B3)
                hi = hi + tail
            h = _fmix(lo ^ _fmix(hi))
            wh[nw] = h
            wrow[nw] = r
            woff[nw] = i - s
            nw += 1
            if n > 0:
                acc = acc * q + h
                if nw - first_word > n:
                    acc = acc - wh[nw - 1 - n] * qn
                if nw - first_word >= n:
                    gh[ng] = _fmix(acc)
                    grow[ng] = r
                    gstart[ng] = nw - n
                    ng += 1
            i = k + 1
    return wh[:nw], wrow[:nw], woff[:nw], gh[:ng], grow[:ng], gstart[:ng]


# --------------------------------------------------------------------------- public functions


def _as_arrow(texts):
    """A single-chunk pyarrow LargeStringArray of `texts` (nulls -> ""), and the rows Arrow could not hold
    (lone surrogates from JSON: they take `normalize`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    bad: list[int] = []
    if isinstance(texts, (pa.Array, pa.ChunkedArray)):
        arr = texts
    elif type(texts).__module__.startswith("polars"):
        arr = texts.cast(__import__("polars").String).to_arrow()
    else:
        texts = list(texts)
        try:
            arr = pa.array(texts, pa.large_string())
        except (UnicodeEncodeError, pa.ArrowException, TypeError):
            clean = []
            for k, x in enumerate(texts):
                try:
                    (x or "").encode("utf-8")
                    clean.append(x)
                except UnicodeEncodeError:
                    bad.append(k)
                    clean.append("")
            arr = pa.array(clean, pa.large_string())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks else pa.array([], pa.large_string())
    arr = pc.fill_null(arr.cast(pa.large_string()), "")
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr, bad


def _buffers(arr) -> tuple[np.ndarray, np.ndarray]:
    n = len(arr)
    offs = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset:arr.offset + n + 1]
    data = arr.buffers()[2]
    return (np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, dtype=np.uint8)), offs


def utf8_buffers(texts) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """(UTF-8 bytes as uint8, int64 offsets per text, rows Arrow could not hold, read as "") of a list / Arrow
    / polars string column (nulls -> ""); the arrays view Arrow's buffers, no copy of the text."""
    arr, bad = _as_arrow(texts)
    data, offs = _buffers(arr)
    return data, offs, bad


@lru_cache(maxsize=1)
def _max_per_char() -> int:
    """A bound on the bytes one intermediate code point can add to the output (table B or a LaTeX rule, plus
    the spaces the space rules insert): sizes the kernel's buffer."""
    t = tables()
    longest = max(int(np.diff(t["b_off"]).max()), len(t["le"]), len(t["ge"]),
                  max(len(v) for v in mathmap.COMMANDS.values()))
    return 2 * longest + 8


@lru_cache(maxsize=1)
def _ascii_out() -> np.ndarray:
    """Stage B's byte for each ASCII code point (itself when alphanumeric, else a space), 0 for the ones with
    rules that read further (backtick: code fences, "<" / ">": "<=" / ">=", backslash: LaTeX, newline: the
    fence rule's line starts), which take the general path."""
    t = tables()
    out = t["b_pool"][t["b_off"][:128]].copy()
    if np.any(np.diff(t["b_off"][:129]) != 1):
        raise ValueError("kernel: an ASCII code point maps to more than one byte in table B")
    out[[ord("`"), ord("<"), ord(">"), ord("\\"), ord("\n")]] = 0
    return out


@lru_cache(maxsize=1)
def _max_per_byte() -> int:
    """The most intermediate code points one input character (so one byte) can become: table A plus a run
    marker, or its NFKD lower-cased on the composition path."""
    t = tables()
    return max(int(np.diff(t["a_off"]).max()) + 1, int(t["slow_max"][0]))


def _name_hash(name: bytes) -> int:
    """The kernel's hash of a command name (FNV-style, 64-bit)."""
    h = len(name)
    for c in name:
        h = (h * 1099511628211 + c) % 2**64
    return h


@lru_cache(maxsize=1)
def _command_tables() -> tuple[np.ndarray, ...]:
    """mathmap.COMMANDS for the kernel: name hashes (sorted), name bytes and replacement bytes by offsets."""
    items = sorted(((_name_hash(k.encode()), k.encode(), v.encode()) for k, v in mathmap.COMMANDS.items()))
    for _, k, v in items:
        if not (k.isalpha() and (v == b"" or v.isalnum())):
            raise ValueError(f"kernel: command {k!r} -> {v!r} is not a plain word")
    hashes = np.array([h for h, _, _ in items], dtype=np.uint64)
    key_off = np.cumsum([0] + [len(k) for _, k, _ in items]).astype(np.int64)
    val_off = np.cumsum([0] + [len(v) for _, _, v in items]).astype(np.int64)
    keys = np.frombuffer(b"".join(k for _, k, _ in items), dtype=np.uint8).astype(np.int32)
    vals = np.frombuffer(b"".join(v for _, _, v in items) or b"\0", dtype=np.uint8)
    return hashes, key_off, keys, val_off, vals


def _run_kernel(arr) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    data, offs = _buffers(arr)
    t = tables()
    out = np.empty(max(64, int((offs[-1] - offs[0]) * 1.25) + 64), dtype=np.uint8)
    return _normalize_kernel(data, offs, out, t["a_off"], t["a_pool"], t["a_flag"], t["b_off"], t["b_pool"],
                             _ascii_out(), t["le"], t["ge"], _max_per_char(), _max_per_byte(), BIG_ROW,
                             *_command_tables(), SEG_CAP, *(t[k] for k in _COMPOSE_KEYS))


_COMPOSE_KEYS = ("ccc", "pk", "p_off", "p_pool", "dk", "d_off", "d_pool", "ck", "cv", "lk", "l_off", "l_pool")


def normalize_many(texts, cfg: NormConfig = DEFAULT_NORM):
    """`normalize` of every text of a list / Arrow / polars string column, as a pyarrow LargeStringArray (one
    compiled pass per text; the texts the kernel flags take `normalize`; switches other than the defaults,
    `wrappers` aside, take the polars batch path `normalize_arrow`)."""
    import polars as pl
    import pyarrow as pa

    if replace(cfg, wrappers=True) != DEFAULT_NORM or njit is None:  # other switches: the polars batch path
        if isinstance(texts, (pa.Array, pa.ChunkedArray)):
            texts = texts.to_pylist()
        return normalize_arrow(texts if type(texts).__module__.startswith("polars") else list(texts), cfg)
    arr, bad = _as_arrow(texts)
    out, out_offs, fallback = _run_kernel(arr)
    res = pl.Series("t", pa.LargeStringArray.from_buffers(len(arr), pa.py_buffer(out_offs), pa.py_buffer(out)))
    if cfg.wrappers:
        res = strip_wrappers_series(res, cfg)
    fallback[bad] = True
    if fallback.any():
        idx = np.flatnonzero(fallback)
        src = texts if isinstance(texts, list) else arr.take(pa.array(idx)).to_pylist()
        fixed = [normalize(src[k], cfg) for k in idx] if isinstance(texts, list) else [normalize(x, cfg) for x in src]
        res = res.scatter(idx, pl.Series(fixed, dtype=pl.String))
    got = res.to_arrow()
    return got.combine_chunks() if isinstance(got, pa.ChunkedArray) else got


def hash_words_ngrams(norm, n: int) -> tuple[np.ndarray, ...]:
    """Word and word n-gram hashes of a normalised LargeStringArray (what `normalize_many` returns), in one
    compiled pass: (word hashes, word row, word byte offset in its row, n-gram hashes, n-gram row, first
    word of each n-gram), equal to `hashing.hash_words_arrow` and `hashing.ngram_hashes(..., n)`."""
    v, offs = _word_buffer(norm)
    return _hash_kernel(v, offs, n, *_hash_outputs(offs))


def _hash_outputs(offs: np.ndarray) -> list[np.ndarray]:
    """The hash kernel's six output arrays, sized for the most words the texts can hold (half their bytes,
    plus one per row). Allocated by numpy, not inside the kernel: numpy asks for transparent huge pages for
    large arrays and numba's allocator does not, and the page faults of 4 KiB pages cost the kernel more than
    its hashing (measured in bench/text/profile.py)."""
    cap = int(offs[-1] - offs[0]) // 2 + len(offs)
    return [np.empty(cap, dtype=dt) for dt in (np.uint64, np.int64, np.int64, np.uint64, np.int64, np.int64)]


def _word_buffer(norm) -> tuple[np.ndarray, np.ndarray]:
    """The text bytes of a LargeStringArray as uint64 words with >= 16 zero bytes after them (the hash
    kernel reads 8 bytes at a time), and its offsets."""
    data, offs = _buffers(norm)
    v = np.zeros(len(data) // 8 + 3, dtype=np.uint64)
    v.view(np.uint8)[:len(data)] = data
    return v, offs


def warm_up() -> None:
    """Initialise numba and load the normaliser's and the hasher's machine code from the disk cache in this
    process (a fresh process pays ~0.6-0.9 s for it on its first kernel call). Runs numba, numpy and pyarrow
    only, never polars, so a process that forks afterwards has no polars thread pool running
    (curate/engine/warm.py)."""
    import pyarrow as pa

    _run_kernel(pa.array(["A b", "\u00dcn\u0131"], pa.large_string()))
    hash_words_ngrams(pa.array(["a b c"], pa.large_string()), 2)


def fallback_share(texts) -> float:
    """The share of `texts` the kernel hands to `normalize` (surrogates, composition spans over `SEG_CAP` code
    points, texts over `BIG_ROW` bytes)."""
    arr, bad = _as_arrow(texts)
    fallback = _run_kernel(arr)[2]
    fallback[bad] = True
    return float(fallback.mean()) if len(fallback) else 0.0
