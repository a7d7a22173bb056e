"""The fuzzy tier's numpy LSH (`decontam/lsh.py`) returns datasketch MinHashLSH's candidates and parameters."""

from __future__ import annotations

import numpy as np
import pytest

from cotforge.curate.decontam.lsh import BandIndex, optimal_params
from cotforge.curate.text.hashing import affine_perms

datasketch = pytest.importorskip("datasketch")


@pytest.mark.parametrize("threshold", [0.2, 0.5, 0.75, 0.9])
@pytest.mark.parametrize("num_perm", [16, 64, 128, 200])
def test_optimal_params_equal_datasketch(threshold: float, num_perm: int) -> None:
    from datasketch.lsh import _optimal_param

    assert optimal_params(threshold, num_perm) == _optimal_param(threshold, num_perm, 0.5, 0.5)


def _signatures(rng: np.random.Generator, n: int, num_perm: int) -> np.ndarray:
    """Signatures drawn from a small value pool, so that bands are often shared (and hashes sometimes equal)."""
    return rng.integers(0, 3, size=(n, num_perm)).astype(np.uint64) * np.uint64(2**61 + 7)


def test_query_equals_datasketch() -> None:
    from datasketch import MinHash, MinHashLSH

    rng = np.random.default_rng(0)
    num_perm = 32
    b, r = optimal_params(0.5, num_perm)
    sigs = _signatures(rng, 300, num_perm)
    members = np.flatnonzero(rng.random(300) < 0.7)
    a, bb = affine_perms(num_perm, 1)
    perms = np.stack([a, bb])
    lsh = MinHashLSH(threshold=0.5, num_perm=num_perm)
    for i in members.tolist():
        lsh.insert(i, MinHash(hashvalues=sigs[i], permutations=perms, scheme="affine64"))
    queries = np.concatenate([_signatures(rng, 200, num_perm), sigs[:50]])
    qi, qe = BandIndex(sigs, members, b, r).query(queries)
    got: dict[int, list[int]] = {}
    for q, e in zip(qi.tolist(), qe.tolist(), strict=True):
        got.setdefault(q, []).append(e)
    want = {q: sorted(lsh.query(MinHash(hashvalues=s, permutations=perms, scheme="affine64")))
            for q, s in enumerate(queries)}
    assert got == {q: v for q, v in want.items() if v}
    assert sum(len(v) for v in got.values()) > 100  # the test exercises shared bands


def test_query_verifies_bands_not_only_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    from cotforge.curate.decontam import lsh

    sigs = np.arange(40, dtype=np.uint64).reshape(4, 10)
    monkeypatch.setattr(lsh, "band_hashes", lambda s, b, r: np.zeros((len(s), b), dtype=np.uint64))
    index = BandIndex(sigs, np.arange(4), 5, 2)  # every band hash collides: only the band values tell entries apart
    qi, qe = index.query(sigs[[2]])
    assert qi.tolist() == [0] and qe.tolist() == [2]
    assert len(BandIndex(sigs, np.zeros(0, dtype=np.int64), 5, 2).query(sigs)[0]) == 0


def test_an_index_of_an_older_version_says_rebuild(tmp_path):
    """A keep_index folder written before the numpy LSH bands (lsh.pkl, no lsh_params) fails naming the folder."""
    import json

    import pytest

    from cotforge.curate.decontam.index import DecontamIndex

    (tmp_path / "entries.json").write_text(json.dumps({"config": {}, "entries": []}))
    with pytest.raises(ValueError, match=r"older cotforge.*rebuild"):
        DecontamIndex(tmp_path)
