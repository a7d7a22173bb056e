"""The semantic tier gives the same shards for the same input: a text's vector does not depend on the texts
it is embedded with or on the thread count, cosines do not depend on the matrix kernel, and decontamination /
dedup runs with the tier on are byte-identical across reruns and worker counts (docs/semantic.md, round 6)."""

from __future__ import annotations

import copy
import gzip
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from test_semantic import ITEM, NUMBER_CHANGED, REPHRASED

from cotforge.curate.text.embed import (
    FIXED_BATCH,
    LENGTH_STEP,
    Embedder,
    exact_cosines,
    fixed_batches,
    nearest,
)
from cotforge.pipelines.cli.main import main

REAL = pytest.mark.skipif(importlib.util.find_spec("all_minilm_l6_v2") is None,
                          reason="the semantic extra is not installed")



def _problems(shared: Path, name: str, n: int) -> list[str]:
    out = []
    with gzip.open(shared / "sft_sources" / name, "rt") as f:
        for line in f:
            r = json.loads(line)
            out.append(r.get("problem") or r.get("question"))
            if len(out) == n:
                break
    return out


@REAL
@pytest.mark.slow  # ~10 s: the real model, five encodings over 11 widths
def test_a_vector_does_not_depend_on_its_batch_mates_or_threads(shared_data):
    """bf16 on this kind of CPU moved a vector by ~1e-3 with its batch's padding and shape, and with one vs two
    threads; now the bits are equal whatever the text is embedded with: alone, among others, in another order
    (so at another position of its fixed-shape batch, with other batch mates), on one or two threads, at
    widths from 32 to 256 tokens."""
    texts = _problems(shared_data, "deepscaler_math_train.jsonl.gz", 20)
    texts += [t * k for k, t in enumerate(texts[:12], 1)] + [texts[0] * 40]  # longer: widths up to the token cap
    one = Embedder(threads=1)
    ref = one.encode(texts)
    lengths = [len(x) for x in one.tokenizer(texts, truncation=True, max_length=one.max_tokens)["input_ids"]]
    widths = {w for w, _ in fixed_batches(lengths)}
    assert len(widths) >= 10 and max(widths) == 256
    assert np.array_equal(one.encode([texts[7]])[0], ref[7])
    assert np.array_equal(one.encode(texts[5:12][::-1])[::-1], ref[5:12])
    perm = np.random.default_rng(3).permutation(len(texts))
    assert np.array_equal(one.encode([texts[i] for i in perm]), ref[perm])
    two = copy.copy(one)  # the same model, embedding on two lanes
    two.threads = 2
    assert np.array_equal(two.encode(texts[::-1])[::-1], ref)
    assert np.array_equal(two.encode([texts[i] for i in perm[:31]]), ref[perm[:31]])


def test_fixed_batches_cover_every_row_once_by_width():
    """Every row in exactly one batch of at most FIXED_BATCH rows, all of one width (its token count rounded up
    to LENGTH_STEP; an empty text has the width of one step), widest first."""
    lengths = [1, 16, 17, 0, 40, 33, 3, 250, 16, 15, *range(100, 140)]
    got = fixed_batches(lengths)
    rows = [i for _, r in got for i in r]
    assert sorted(rows) == list(range(len(lengths)))
    for w, r in got:
        assert 1 <= len(r) <= FIXED_BATCH
        assert all(w == max(1, -(-lengths[i] // LENGTH_STEP)) * LENGTH_STEP for i in r)
    assert [w for w, _ in got] == sorted((w for w, _ in got), reverse=True)


def test_nearest_is_exact_whatever_the_block_and_order():
    """Neighbours and cosines of a query are the same bits when the other queries, the order of the searched
    vectors, or the block of queries change; ties go by the tie key, not by position."""
    rng = np.random.default_rng(0)
    v = rng.normal(size=(300, 384)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    v[17] = v[3]  # a tie for every query
    key = rng.permutation(300).astype(np.uint64)
    q = v[:50] + 0.01 * rng.normal(size=(50, 384)).astype(np.float32)
    top, cos = nearest(q, v, 5, tie=key)
    perm = rng.permutation(300)
    top2, cos2 = nearest(q[::-1][:20][::-1], v[perm], 5, tie=key[perm])
    assert np.array_equal(cos[30:], cos2) and np.array_equal(top[30:], perm[top2])
    assert np.array_equal(cos[:, 0], exact_cosines(q, v[top[:, 0]]))
    assert np.all(np.diff(cos, axis=1) <= 0)
    t3, _ = nearest(v[3:4], v, 2, exclude=np.array([3]))
    assert t3[0, 0] == 17  # itself left out, its copy first


def test_nearest_ranks_many_equal_vectors_by_tie_key_not_position():
    """More equal vectors than the shortlist holds (prompts equal up to the token cap embed alike): the k
    neighbours are the smallest tie keys among them, however the searched rows are ordered."""
    rng = np.random.default_rng(1)
    v = rng.normal(size=(200, 384)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    v[:30] = v[0]
    key = np.arange(200, dtype=np.uint64)
    want = None
    for _ in range(5):
        perm = rng.permutation(200)
        at0 = int(np.flatnonzero(perm == 0)[0])
        top, cos = nearest(v[0:1], v[perm], 3, tie=key[perm], exclude=np.array([at0]))
        got = sorted(int(k) for k in key[perm][top[0]])
        want = want or got
        assert got == want == [1, 2, 3] and np.allclose(cos, 1.0)


def test_nearest_bounds_the_tie_band_and_says_so(caplog):
    """Thousands of equal vectors: at most TIE_CAP extra rows are re-scored per query (bounded time and memory),
    with a warning that ties past the cap go by position."""
    from cotforge.curate.text.embed import SHORTLIST_MARGIN, TIE_CAP

    v = np.tile(np.eye(1, 384, dtype=np.float32), (TIE_CAP + 100, 1))
    with caplog.at_level("WARNING"):
        top, cos = nearest(v[:2], v, 3, exclude=np.array([0, 1]))
    assert top.shape == (2, 3) and np.allclose(cos, 1.0) and "tie" in caplog.text
    assert len(caplog.records) == 1 and str(3 + SHORTLIST_MARGIN + TIE_CAP) in caplog.text


def _bytes_of(out: Path) -> dict[str, bytes]:
    """Every shard and the report of a stage's output folder (timings and paths aside)."""
    got = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.parquet"))}
    assert got, f"no shards under {out}"
    return got


@REAL
@pytest.mark.slow
def test_decontaminate_and_dedup_with_the_tier_are_byte_identical_across_runs_and_workers(tmp_path, shared_data):
    """Real problems (GSM8K test items as the benchmark; GSM8K train rows, a rephrasing and a look-alike, each
    repeated so several tasks embed the same texts and share vectors through the run's store): two runs with
    two workers and one with one worker give the same bytes in every shard, from the CLI."""
    bench = tmp_path / "bench"
    bench.mkdir()
    items = [ITEM] + _problems(shared_data, "gsm8k_train_human.jsonl.gz", 230)[200:230]
    (bench / "mini.jsonl").write_text("".join(json.dumps({"id": f"b{i}", "problem": p, "answer": "1"}) + "\n"
                                              for i, p in enumerate(items)))
    train = _problems(shared_data, "gsm8k_train_human.jsonl.gz", 60) + [REPHRASED, NUMBER_CHANGED]
    rows = [{"id": f"r{k}-{i}", "prompt": p, "response": f"answer {k}"} for k in range(3) for i, p in enumerate(train)]
    src = tmp_path / "train.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    runs: dict[str, dict[str, dict[str, bytes]]] = {}
    for label, workers in (("a", "2"), ("b", "2"), ("c", "1")):
        for stage, extra in (("decontaminate", ["--benchmarks", "mini", "--benchmarks-dir", str(bench)]),
                             ("dedup", [])):
            out = tmp_path / label / stage
            res = CliRunner().invoke(main, ["curate", stage, str(src), "-o", str(out), "--workers", workers,
                                            "--rows-per-task", "40", "--semantic", *extra])
            assert res.exit_code == 0, res.output
            runs.setdefault(stage, {})[label] = _bytes_of(out)
    for stage, got in runs.items():
        assert got["a"] == got["b"] == got["c"], stage
    import polars as pl

    removed = pl.read_parquet(sorted((tmp_path / "a" / "decontaminate" / "removed").glob("*.parquet")))
    semantic = removed.filter(pl.col("match_kind") == "semantic")["prompt"].to_list()
    assert semantic == [REPHRASED] * 3  # the tier ran and flagged the rephrasing only
