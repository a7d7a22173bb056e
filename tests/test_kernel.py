"""The compiled normaliser + hasher (curate/text/kernel.py) against the Python reference (`normalize`,
`hash_words_arrow`, `ngram_hashes`): identical output on adversarial Unicode / LaTeX / fences / wrappers and on
the real corpora of ../shared/data."""

from __future__ import annotations

import gzip
import json
import random
import sys

import numpy as np
import pyarrow as pa
import pytest

from cotforge.curate.text import kernel, mathmap
from cotforge.curate.text.hashing import hash_words_arrow, ngram_hashes
from cotforge.curate.text.normalize import INSTRUCTION_WRAPPERS, SELF_CHECK, NormConfig, normalize

# Pieces that exercise every rule and its edges: LaTeX (frac short forms, environments with and without a
# closing brace, commands mapped / kept / double backslashes), code fences (valid, indented, inline, four
# backticks, CRLF), "<=" / ">=" including ones the pre-NFKC map or NFKC make, superscript / subscript runs,
# vulgar fractions, combining accents, final sigma, dotted I, ligatures, full-width forms, Hangul jamo that
# NFKC composes, unassigned code points, wrappers at the start / end / inside, letters next to digits.
PIECES = [
    "\\frac12", "\\dfrac 3 4", "\\tfrac{1}{2}", "\\cfrac1x", "\\fracab", "\\frac 1", "\\FRAC12", "\\ddfrac12",
    "\\begin{align}", "\\end {cases}", "\\begin{a{b}", "\\begin x", "\\end", "\\BEGIN{pm}", "\\beginx{y}",
    "\\left(", "\\le", "\\Le", "\\leqslant", "\\alpha", "\\sqrt[3]{x}", "\\\\", "\\", "\\ ", "\\1", "\\$", "\\²",
    "\\α", "\\ﬁ", "\\<=", "```python\n", "  ```c++  \n", "```", "````x\n", "```py\r\n", "x ```\n", "\t```js",
    "<=", ">=", "<>=", "<==", "＜＝", "﹤=", "<²", "<₌", "≤", "≥", "≠", "x²³", "x² ³", "2²", "xⁿ", "a₁₂", "H₂O",
    "½", "¾x", "⅒", "e\u0304", "A̅B̅", "ẋ", "ā", "é", "e\u0301", "ΣΑΣ ς", "Σ.", "İstanbul", "ﬁnd", "ＡＢＣ１２",
    "ᄀ", "ᅡ", "가", "ᆨ", "Å", "Å\u0301", "≠", "=\u0338", "≠\u0338", "ö", "o\u0308", "\ufe0f", "\u0344", "ǖ",
    "\u0cd5", "\U0001ccd6", "\ua7cb", "\u0378", "😀", "﷽", "㎏", "ǆ", "٣", "x٣y", "π", "√3",
    "∛x", "°", "90°", "∠ABC", "→", "⇒", "×", "·", "…", "—", "\u00a0", "\u2028", "\x00", "\t", "\n", "\r\n", " ",
    "  ", "_", "__", "a_b", "3x", "x2", "holds420", "abc", "The", "Problem:", "Question:", "problem", "question",
    "step by step", "Find x.", "x = 1", "$", "$$", "{", "}", "[", "]", "^", "'", '"', "#", "**bold**",
    *INSTRUCTION_WRAPPERS,
]


def _random_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(0, 14)):
            r = rng.random()
            if r < 0.7:
                parts.append(rng.choice(PIECES))
            elif r < 0.85:  # any code point (no surrogates: Arrow cannot hold them; see the surrogate test)
                cp = rng.randrange(0x20000) if rng.random() < 0.8 else rng.randrange(0x110000)
                parts.append(chr(cp) if not 0xD800 <= cp < 0xE000 else "x")
            else:
                parts.append(rng.choice([" ", "", "\n", "  "]))
        out.append("".join(parts))
    return out


def _assert_same(texts: list) -> None:
    got = kernel.normalize_many(texts).to_pylist()
    ref = [normalize(t) for t in texts]
    bad = [i for i in range(len(texts)) if got[i] != ref[i]]
    assert not bad, [(texts[i], got[i], ref[i]) for i in bad[:5]]


def test_self_check_and_pieces():
    _assert_same(list(SELF_CHECK) + PIECES + [None, "", "   "])


def test_adversarial_random_texts():
    _assert_same(_random_texts(20000, seed=35))


def test_every_table_character_alone_and_in_context():
    """Each character of the math tables, between letters and digits and after a backslash."""
    chars = sorted(set(mathmap.MATH) | set(mathmap.PRE_NFKC) | {c for c in mathmap.MATH if len(c) == 1})
    texts = [f"a{c}b" for c in chars] + [f"1{c}2" for c in chars] + [f"\\{c}x" for c in chars]
    texts += [f"\\{k} x" for k in mathmap.COMMANDS] + [f"\\{k}1" for k in mathmap.COMMANDS]
    _assert_same(texts)


def test_every_bmp_code_point_between_letters_and_before_marks():
    """Each BMP code point after a letter / Hangul lead jamo, and before a combining mark / vowel jamo: the
    contexts in which NFKC joins characters."""
    cps = [chr(i) for i in range(0x10000) if not 0xD800 <= i < 0xE000]
    _assert_same([f"a{c}b" for c in cps] + [f"{c}\u0301" for c in cps[0x80::3]] + [f"\u1100{c}" for c in cps[0x80::5]]
                 + [f"{c}\u1161x" for c in cps[0xA0::7]])


def test_kernel_handles_most_texts_itself():
    """The fallback to `normalize` is for rare constructs: the pieces above that need it are few."""
    texts = ["Let $x^2 \\le \\frac12$ and y ≤ ½.", "```python\nprint(1)\n```", "ΣΑΣ x²", "İ ﬁ ＡＢＣ", "Å ≠ é 가"]
    assert kernel.fallback_share(texts) == 0.0
    assert kernel.fallback_share(["e\u0301", "가"]) == 0.0  # NFKC composes these: the compiled NFKC does it


def test_surrogates_and_inputs_of_every_kind():
    """Lone surrogates (from JSON) take the reference; Arrow and polars columns give the same as lists."""
    import polars as pl

    texts = ["a\ud800b \\frac12", "x²", None, "Find x."]
    assert kernel.normalize_many(texts).to_pylist() == [normalize(t) for t in texts]
    clean = ["x²", None, "Find  x.", "\\alpha"]
    want = [normalize(t) for t in clean]
    assert kernel.normalize_many(pa.array(clean)).to_pylist() == want
    assert kernel.normalize_many(pa.chunked_array([clean[:2], clean[2:]])).to_pylist() == want
    assert kernel.normalize_many(pl.Series(clean)).to_pylist() == want
    assert kernel.normalize_many([]).to_pylist() == []


def test_texts_over_the_size_cap_take_the_reference(monkeypatch):
    monkeypatch.setattr(kernel, "BIG_ROW", 64)
    texts = ["x² \\frac12 " * 20, "short x²"]
    assert kernel.fallback_share(texts) == 0.5
    assert kernel.normalize_many(texts).to_pylist() == [normalize(t) for t in texts]


def test_other_switches_use_the_reference():
    cfg = NormConfig(numbers=False)
    texts = ["x 12 y", "\\frac12"]
    assert kernel.normalize_many(texts, cfg).to_pylist() == [normalize(t, cfg) for t in texts]


@pytest.mark.parametrize("n", [1, 3, 8, 13])
def test_hashes_equal_numpy_hasher(n):
    texts = _random_texts(800, seed=n) + ["a " * 40, "x" * 40 + " " + "y" * 17, "", "é" * 30]
    norm = kernel.normalize_many(texts)
    wh, wrow, woff, gh, grow, gstart = kernel.hash_words_ngrams(norm, n)
    ref_wh, ref_rows, ref_off = hash_words_arrow(norm)
    assert np.array_equal(wh, ref_wh) and np.array_equal(wrow, ref_rows) and np.array_equal(woff, ref_off)
    ref_gh, ref_grow, ref_start = ngram_hashes(ref_wh, ref_rows, n)
    assert np.array_equal(gh, ref_gh) and np.array_equal(grow, ref_grow) and np.array_equal(gstart, ref_start)


def test_hashes_at_every_word_length_and_row_edge():
    """Words of 0-40 bytes (the 8-byte steps of the word scan, the 16-byte tail), multi-byte characters, rows
    that end right at an 8-byte boundary, empty rows and an array slice (offsets not starting at 0)."""
    rng = random.Random(7)
    alphabet = "abcxyz0189é√"
    texts = []
    for _ in range(600):
        ws = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(rng.randint(0, 12))]
        texts.append(" ".join(ws))
    texts += ["", "a" * 8, "a" * 16, "a" * 17, "b" * 7 + " " + "c" * 8, "x " * 20]
    norm = pa.array(texts, pa.large_string())
    for arr in (norm, norm.slice(3, 400)):
        wh, wrow, woff, gh, grow, gstart = kernel.hash_words_ngrams(arr, 8)
        ref_wh, ref_rows, ref_off = hash_words_arrow(arr)
        assert np.array_equal(wh, ref_wh) and np.array_equal(wrow, ref_rows) and np.array_equal(woff, ref_off)
        ref = ngram_hashes(ref_wh, ref_rows, 8)
        assert np.array_equal(gh, ref[0]) and np.array_equal(grow, ref[1]) and np.array_equal(gstart, ref[2])


def _corpus(shared, per_file: int | None) -> list[str]:
    texts: list[str] = []
    for p in sorted((shared / "sft_sources").glob("*")) + sorted((shared / "benchmarks").glob("*")):
        opener = gzip.open if p.suffix == ".gz" else open
        with opener(p, "rt", encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if per_file is not None and i >= per_file:
                    break
                row = json.loads(line)
                texts += [row.get("problem"), row.get("response"), row.get("solution")]
    return texts


def test_real_corpora_sample(shared_data):
    _assert_same(_corpus(shared_data, per_file=120))


@pytest.mark.slow
def test_real_corpora_whole(shared_data):
    texts = _corpus(shared_data, per_file=None)
    _assert_same(texts)
    norm = kernel.normalize_many(texts)
    wh, wrow, _, gh, _, _ = kernel.hash_words_ngrams(norm, 8)
    ref_wh, ref_rows, _ = hash_words_arrow(norm)
    assert np.array_equal(wh, ref_wh) and np.array_equal(gh, ngram_hashes(ref_wh, ref_rows, 8)[0])


def test_tables_cached_on_disk(tmp_path, monkeypatch):
    """The tables are read back from the cache folder (named by Python and Unicode version)."""
    monkeypatch.setenv("COTFORGE_CACHE_DIR", str(tmp_path))
    kernel.tables.cache_clear()
    try:
        first = kernel.tables()
        files = list(tmp_path.glob("kernel-tables-*.npz"))
        assert len(files) == 1 and f"py{sys.version_info[0]}{sys.version_info[1]}" in files[0].name
        kernel.tables.cache_clear()
        again = kernel.tables()
        assert all(np.array_equal(first[k], again[k]) for k in first)
    finally:
        kernel.tables.cache_clear()


# Composing code points: the compiled NFKC path (`_compose_span`) against `normalize`. Marks of every combining
# class the corpora hold (and a few more), dropped accents (U+0304 / U+0307: the pre-NFKC map), the overlay that
# makes "<" + U+0338 = "≮", Greek tonos / dialytika / ypogegrammeni, Hebrew / Devanagari / Tibetan marks.
MARKS = ["\u0301", "\u0300", "\u0302", "\u0308", "\u0303", "\u030a", "\u030c", "\u0323", "\u0327", "\u0328",
         "\u031b", "\u0338", "\u0345", "\u0342", "\u0313", "\u0314", "\u0304", "\u0307", "\u0332", "\u20d7",
         "\u05b4", "\u093c", "\u0f71", "\u0f72", "\u3099", "\u309a", "\u0cd5", "\u0b3e", "\u0dcf", "\u1d16d"]
BASES = ["a", "e", "o", "u", "A", "I", "J", "i", "n", "s", "x", "<", "=", ">", "θ", "α", "ω", "ι", "υ", "Ω",
         "ǭ", "ợ", "ṡ", "ﬁ", "²", "₂", "½", "ā", "ẋ", "K", "Å", "か", "ウ", "ｶ", "\u0915", "\u0cc6", "\u0b47",
         "\u0dd9", "\u1100", "가", "ㄱ", "\uffa1", "\\", "`", "9", " ", "ß", "İ", "Σ", "ᾳ", "\u0fb2", "\u05d9"]


def _compose_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 6)):
            parts.append(rng.choice(BASES))
            parts += rng.sample(MARKS, rng.randint(0, 4))  # marks in a random order
            if rng.random() < 0.3:
                parts.append(rng.choice(PIECES))
        out.append("".join(parts))
    return out


def test_composing_sequences_stay_in_the_kernel():
    """Texts NFKC composes are normalised by the compiled path: none takes `normalize`."""
    texts = ["e\u0301", "가", "\u1100\u1161\u11a8", "J\u0302 θ\u0308", "<\u0338", "=\u0338", "ㄱㅏ", "a\u0307\u0302",
             "x²\u0301", "½\u0301", "ﬁ\u0302", "ΣΑΣ\u0301", "\u0301abc", "ǭ\u0323", "I\u0307stanbul"]
    assert kernel.fallback_share(texts) == 0.0
    _assert_same(texts)


def test_combining_marks_in_every_order():
    """Each base before every ordered pair of marks (blocked and unblocked compositions, canonical reordering,
    dropped accents between a letter and its mark), then a letter."""
    texts = [f"{b}{m1}{m2}z" for b in BASES for m1 in MARKS for m2 in MARKS]
    assert kernel.fallback_share(texts) == 0.0
    _assert_same(texts)


def test_random_composing_texts():
    texts = _compose_texts(20000, seed=37)
    assert kernel.fallback_share(texts) == 0.0
    _assert_same(texts)


def test_every_composition_pair_and_hangul():
    """Every primary composite's pair alone, with a mark between (blocked or not by its class), and every
    Hangul jamo sequence L V, L V T, LV T, with a syllable or compatibility jamo before."""
    t = kernel.tables()
    pairs = [(int(k) >> 21, int(k) & 0x1FFFFF) for k in t["ck"]]
    texts = [chr(a) + chr(b) + "x" for a, b in pairs] + [chr(a) + "\u0323" + chr(b) for a, b in pairs]
    texts += [chr(a) + "\u0301" + chr(b) for a, b in pairs] + [chr(b) + chr(a) for a, b in pairs]
    L = [chr(c) for c in range(0x1100, 0x1113)]
    V = [chr(c) for c in range(0x1161, 0x1176)]
    T = [chr(c) for c in range(0x11A8, 0x11C3)]
    texts += [lead + v + tail for lead in L for v in V for tail in ("", T[0], T[-1], "\u3131", "\u314f")]
    texts += ["가" + tail for tail in T + V] + ["각" + tail for tail in T + V] + ["ㄱ" + v for v in "ㅏㅑㅘ"]
    assert kernel.fallback_share(texts) == 0.0
    _assert_same(texts)


def test_span_longer_than_the_buffer_takes_the_reference(monkeypatch):
    monkeypatch.setattr(kernel, "SEG_CAP", 4)
    texts = ["a" + "\u0301\u0323" * 3 + " b", "e\u0301 short"]
    assert kernel.fallback_share(texts) == 0.5
    _assert_same(texts)


def test_real_corpora_composing_rows(shared_data):
    """Every real text that holds a character NFKC may join: the kernel does it, with the reference's text."""
    flag = kernel.tables()["a_flag"]
    texts = [x for x in _corpus(shared_data, per_file=3000)
             if x and any(flag[ord(c)] & kernel.COMPOSE for c in x if ord(c) > 0x7F)]
    assert texts, "no composing text in the shared corpora"
    assert kernel.fallback_share(texts) == 0.0
    _assert_same(texts)
