"""Speed rewrites of decontamination give what the code they replace gave (issue 18, speed round)."""

from __future__ import annotations

import random
import re

from cotforge.curate.decontam.canon import _sub_names

ALPHABET = ["a", "b", "ab", "fn", "_", "1", "²", "é", "Ab", " ", "  ", "\t", "\n", "(", ")", ".", "\u3000", ",", "x"]


def _regex_sub(text: str, names: set[str], calls_only: bool) -> str:
    """The regex `rename_functions` compiled per text before (longest name first)."""
    alt = "|".join(re.escape(n) for n in sorted(names, key=lambda n: (-len(n), n)))
    return re.compile(r"\b(?:" + alt + r")\b" + (r"(?=\s*\()" if calls_only else "")).sub("fn", text)


def test_sub_names_equals_the_regex() -> None:
    rng = random.Random(0)
    pool = ["a", "ab", "ab_c", "b1", "fn", "x_y", "_a", "abab", "Ab"]
    changed = 0
    for _ in range(4000):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 30)))
        names = set(rng.sample(pool, rng.randint(1, 4)))
        for calls_only in (False, True):
            got = _sub_names(text, names, calls_only)
            assert got == _regex_sub(text, names, calls_only), (text, names, calls_only)
            changed += got != text
    assert changed > 500  # the fuzz exercises replacements, not only misses


def test_batch_runs_equal_per_pair_runs() -> None:
    import numpy as np

    from cotforge.curate.decontam.runs import batch_runs, pair_runs

    rng = np.random.default_rng(1)
    ihs, rhs, rposs = [], [], []
    for p in range(300):
        vocab = rng.integers(0, 2**63, size=rng.integers(1, 12), dtype=np.int64).astype(np.uint64)
        ih = vocab[rng.integers(0, len(vocab), size=rng.integers(0, 40))]  # repeated n-grams, empty items
        rh = vocab[rng.integers(0, len(vocab), size=rng.integers(0, 60))] if p % 7 else np.zeros(0, np.uint64)
        rpos = np.sort(rng.choice(200, size=len(rh), replace=False)).astype(np.int64)
        ihs.append(ih)
        rhs.append(rh)
        rposs.append(rpos)
    got = batch_runs(ihs, rhs, rposs, 8)
    runs = 0
    for p in range(300):
        want = pair_runs(ihs[p], rhs[p], rposs[p], 8)
        assert np.array_equal(got[p], want.reshape(-1, 3)), p
        runs += len(want)
    assert runs > 1000
    assert batch_runs([], [], [], 8) == []


def test_any_of_equals_contains_any() -> None:
    import polars as pl
    import pytest

    from cotforge.curate.text import mathmap
    from cotforge.curate.text.normalize import DEFAULT_NORM, any_of, normalized_wrappers

    for lits in ([w for w in normalized_wrappers(DEFAULT_NORM) if w.count(" ") >= 3], [k for k in mathmap.MATH if k.isascii()],
                 ["function", "code", "a.b", "x+y", "(c)", "[d]"]):
        texts = [f"x {w} y" for w in lits] + [f"x {w[:-1]}" for w in lits] + ["", "nothing", "a <= b", "ab", "c"]
        s = pl.Series(texts, dtype=pl.String)
        got = s.str.contains(any_of(lits))
        assert got.to_list() == s.str.contains_any(lits).to_list()
        assert got.sum() >= len(lits)
    with pytest.raises(ValueError):
        any_of([])


def test_find_literals_equals_extract_many() -> None:
    """The compiled Aho-Corasick pass (text/literals.py) finds, per text, the same set of literals as polars'
    overlapping `extract_many` (what matcher_norm searched with before): overlapping, nested and repeated
    literals, literals inside longer words, non-ASCII neighbours, empty texts and nulls."""
    import polars as pl
    import pytest

    pytest.importorskip("numba")
    from cotforge.curate.text.literals import find_literals

    rng = random.Random(3)
    pool = ["ab", "abab", "b", "ba(", "median(", "med", "has_close_elements", "close", "x_1", "a" * 9, "fn("]
    pieces = ALPHABET + ["median", "(", "has_close", "_elements", "éab", "abé", "def ", "aaaa"]
    hits = 0
    for _ in range(300):
        lits = tuple(sorted(set(rng.sample(pool, rng.randint(1, len(pool))))))
        texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 25))) for _ in range(rng.randint(1, 20))]
        texts += ["", None]
        rows, idx = find_literals(texts, lits)
        got = [set() for _ in texts]
        for r, k in zip(rows.tolist(), idx.tolist(), strict=True):
            assert lits[k] not in got[r], "a pair reported twice"
            got[r].add(lits[k])
        want = pl.Series(texts, dtype=pl.String).fill_null("").str.extract_many(list(lits), overlapping=True)
        assert got == [set(w) for w in want.to_list()], (lits, texts)
        assert rows.tolist() == sorted(rows.tolist())
        hits += len(rows)
    assert hits > 2000  # the fuzz finds literals, not only misses
    with pytest.raises(ValueError, match="ASCII"):
        find_literals(["x"], ("é",))


def test_find_literals_grows_its_result_arrays() -> None:
    """More distinct (text, literal) pairs than the first result arrays hold: the scan retries, nothing lost."""
    import pytest

    pytest.importorskip("numba")
    from cotforge.curate.text.literals import find_literals

    lits = tuple(f"w{i:03d}" for i in range(300))
    rows, idx = find_literals([" ".join(lits)] * 5, lits)
    assert len(rows) == 1500 and sorted(set(idx.tolist())) == list(range(300))


def test_matcher_norm_kernel_search_equals_the_polars_search(shared_data) -> None:
    """matcher_norm finds the known names with the compiled pass under the kernel and with polars' regex +
    extract_many otherwise: the same canonical text on real rows (the long-CoT responses define and call
    functions) and on texts built to hold a name only inside a longer word or only before a space."""
    import gzip
    import json as _json

    import pytest

    pytest.importorskip("numba")
    from cotforge.curate.decontam.canon import defined_names, identifier_like, matcher_norm
    from cotforge.curate.text.normalize import DEFAULT_NORM

    known = frozenset({"has_close_elements", "median", "sum_of", "maxProfit", "histogram", "x2y"})
    texts = ["def median(l):\n    return sorted(l)[len(l) // 2]\n>>> median([1, 2])",
             "xmedian(3) and median (4) and median(5)", "the median of has_close_elementsX", "histogram('a b')",
             "def\tfoo(x): pass; xmedian(1)", "maxProfit is the answer; premaxProfit", None, "", "sum_of(2, 3)"]
    rows = []
    for name in ("deepcoder_leetcode_train", "skyt1_longcot_eval_traces", "deepscaler_math_train"):
        with gzip.open(shared_data / "sft_sources" / f"{name}.jsonl.gz", "rt", encoding="utf-8") as fh:
            for k, line in enumerate(fh):
                if k >= 300:
                    break
                r = _json.loads(line)
                rows += [r.get("problem"), r.get("response")]
    # the real rows' own function names as the benchmark names (some defined in one row, called in others)
    known = known | {n for t in rows[:200] if t for n in defined_names(t) if identifier_like(n)}
    for batch in (texts, rows):
        a = matcher_norm(batch, DEFAULT_NORM, known, "numba").to_pylist()
        b = matcher_norm(batch, DEFAULT_NORM, known, "python").to_pylist()
        assert a == b
    assert any("fn" in t.split(" ") for t in matcher_norm(texts, DEFAULT_NORM, known, "numba").to_pylist())


def test_compiled_ngram_hashes_and_prefilter_equal_numpy() -> None:
    """text/lookup.py's compiled n-gram hashes and bit prefilter give numpy's bits (hashing.py): every n the
    stage uses and a few more, texts of 0-12 words (n-grams crossing a text boundary dropped), empty input."""
    import numpy as np
    import pytest

    pytest.importorskip("numba")
    from cotforge.curate.text import hashing, lookup

    rng = np.random.default_rng(7)
    lens = rng.integers(0, 13, size=2000)
    rows = np.repeat(np.arange(len(lens)), lens).astype(np.int64)
    wh = rng.integers(0, 2**63, size=len(rows), dtype=np.int64).astype(np.uint64) * np.uint64(2)
    for n in (1, 2, 3, 5, 8, 13):
        for w, r in ((wh, rows), (wh[:0], rows[:0]), (wh[:n - 1], rows[:n - 1]), (wh[5:400], rows[5:400])):
            got, want = lookup.ngram_hashes(w, r, n), hashing.ngram_hashes(w, r, n)
            assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(got, want, strict=True)), n
    keys = np.unique(wh[::3])
    for bits_per_key in (1, 8, 64):
        pf = hashing.BitPrefilter(keys, bits_per_key=bits_per_key)
        probe = np.concatenate([wh, rng.integers(0, 2**63, size=5000, dtype=np.int64).astype(np.uint64)])
        got = lookup.maybe(pf, probe)
        assert got.dtype == bool and np.array_equal(got, pf.maybe(probe))
        assert 0 < got.sum() < len(probe)
    assert lookup.maybe(pf, probe[:0]).shape == (0,)


def test_compiled_short_key_search_equals_numpy() -> None:
    """lookup.keys_at (the short-key tier's compiled search) reports the same (length, position, hash) hits in
    the same order as `ngram_hashes_at` + a membership test per length: keys at text ends, across text
    boundaries (not hits), lengths longer than the batch."""
    import numpy as np
    import pytest

    pytest.importorskip("numba")
    from cotforge.curate.text import hashing, lookup

    rng = np.random.default_rng(11)
    lens = rng.integers(0, 15, size=600)
    rows = np.repeat(np.arange(len(lens)), lens).astype(np.int64)
    wh = rng.integers(0, 50, size=len(rows)).astype(np.uint64)  # a small vocabulary: repeated n-grams
    lengths = [1, 2, 3, 5, 9, 40]
    keys = []
    for k in lengths:  # half the keys occur in the batch, half are random
        h, _, _ = hashing.ngram_hashes(wh, rows, k)
        keys.append(np.concatenate([rng.choice(h, size=min(len(h), 30)) if len(h) else h,
                                    rng.integers(0, 2**63, size=30).astype(np.uint64)]))
    cand = np.sort(rng.choice(len(wh), size=len(wh) // 2, replace=False)).astype(np.int64)
    js, ki, hs = lookup.keys_at(wh, rows, cand, lengths, keys)
    want = []
    for i, k in enumerate(lengths):
        h, inside = hashing.ngram_hashes_at(wh, rows, cand, k)
        hit = inside & np.isin(h, keys[i])
        want += [(i, int(j), int(h[j])) for j in np.flatnonzero(hit)]
    got = [(int(i), int(j), int(h)) for j, i, h in zip(js, ki, hs, strict=True)]
    assert got == want and len(want) > 100
    assert [len(x) for x in lookup.keys_at(wh, rows, cand[:0], lengths, keys)] == [0, 0, 0]
