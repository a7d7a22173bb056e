"""Dedup's fast paths equal their plain forms: the compiled MinHash loop, the tie-only record sort, the streamed
report; and the stage gives the same verdicts with the kernel on and off."""

from __future__ import annotations

import numpy as np
import pytest

from cotforge.curate.dedup.buckets import record_order
from cotforge.curate.dedup.config import DedupConfig
from cotforge.curate.dedup.core import band_signatures
from cotforge.curate.dedup.minhash import minhash_rows
from cotforge.curate.text.columns import kernel_installed
from cotforge.curate.text.hashing import affine_perms, minhash_matrix

needs_numba = pytest.mark.skipif(not kernel_installed(), reason="numba (the kernel extra) is not installed")


@needs_numba
@pytest.mark.parametrize("n_rows,per_row", [(0, 0), (1, 1), (7, 3), (500, 40)])
def test_compiled_minhash_equals_the_numpy_form(n_rows: int, per_row: int) -> None:
    rng = np.random.default_rng(n_rows)
    sh = rng.integers(0, 2**64 - 1, size=n_rows * per_row, dtype=np.uint64)
    rows = rng.integers(0, max(n_rows, 1), size=len(sh)).astype(np.int64)  # unsorted, some rows empty
    a, b = affine_perms(100, 7)
    got = minhash_rows(sh, rows, n_rows + 2, a, b, kernel="numba")
    want = minhash_matrix(sh, rows, n_rows + 2, a, b)
    assert got.dtype == want.dtype and np.array_equal(got, want)
    assert (got[n_rows:] == np.iinfo(np.uint64).max).all()  # rows without shingles stay at the maximum


@needs_numba
def test_band_signatures_equal_with_and_without_the_kernel() -> None:
    texts = ["a farmer has 12 cows and buys 5 more how many cows", "x", "", "find x if 2x 10",
             "the sum of all positive integers n less than 40 such that n 2 3 n 7 is divisible by 5"] * 30
    num = np.arange(len(texts), dtype=np.uint64)
    sig_k, has_k = band_signatures(texts, num, DedupConfig(text_kernel="numba"))
    sig_p, has_p = band_signatures(texts, num, DedupConfig(text_kernel="python"))
    assert np.array_equal(has_k, has_p) and np.array_equal(sig_k, sig_p)
    assert not has_k[2] and has_k[1]


def test_record_order_equals_lexsort_with_and_without_ties() -> None:
    rng = np.random.default_rng(3)
    for trial in range(300):
        n = int(rng.integers(0, 200))
        spread = int(rng.integers(1, 6)) if trial % 3 else 2**62  # many ties / almost none
        keys = [rng.integers(0, spread, size=n).astype(np.uint64) for _ in range(3)]
        keys.append(rng.permutation(n).astype(np.uint32))  # the doc index makes every tuple distinct
        assert np.array_equal(record_order(keys), np.lexsort(keys[::-1])), trial


def _corpus(path) -> None:
    """Rows with exact and near duplicates of a few templated problems, as a JSONL input."""
    import json
    import random

    rng = random.Random(0)
    rows = []
    for i in range(400):
        a, b = rng.randint(2, 60), rng.randint(2, 60)
        base = f"Mia has {a} apples and buys {b} more apples at the market. How many apples does Mia have now?"
        kind = rng.random()
        prompt = base + (" Show your work." if kind < 0.3 else "")
        rows.append({"id": f"r{i}", "problem": prompt, "response": f"The answer is {a + b}." if kind < 0.8 else "x"})
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def test_streamed_report_equals_one_join_and_counts_every_removed_row(tmp_path, monkeypatch) -> None:
    import pyarrow.parquet as pq

    from cotforge.curate.dedup import report
    from cotforge.curate.engine import ExecutorConfig
    from cotforge.curate.io.readers import InputSpec
    from cotforge.pipelines.stages import run_stage

    _corpus(tmp_path / "in.jsonl")
    out = tmp_path / "out"
    stats = run_stage("dedup", [InputSpec(str(tmp_path / "in.jsonl"))], out, DedupConfig(), ExecutorConfig(workers=1))
    removed = pq.read_table(out / "removed").num_rows
    assert removed > 10
    cell, pairs = report.merged_pairs(out)
    assert sum(cell.values()) == removed
    md, html = report.render_markdown(pairs, stats, cell), report.render_html(pairs, stats, cell)
    assert report.render_markdown(pairs, stats) == md  # every pair kept here: counting them gives the same
    monkeypatch.setattr(report, "JOIN_ROWS", 3)  # many hash partitions: the same report
    cell2, pairs2 = report.merged_pairs(out)
    assert cell2 == cell
    assert report.render_markdown(pairs2, stats, cell2) == md and report.render_html(pairs2, stats, cell2) == html
    assert all(p["response"] for p in pairs2)  # responses fetched for the sampled pairs
    assert len(report.merged_pairs(out, keep=2)[1]) <= 2 * len(cell)  # memory bound: `keep` per (reason, source)


def _dedup_outcome(inp, out, rows_per_task: int) -> tuple[list, dict]:
    """(removed rows as (id, reason, duplicate_of), the stage's pair counts) of a 1-worker dedup run."""
    import json

    import pyarrow.parquet as pq

    from cotforge.curate.engine import ExecutorConfig
    from cotforge.curate.io.readers import InputSpec
    from cotforge.pipelines.stages import run_stage

    run_stage("dedup", [InputSpec(str(inp))], out, DedupConfig(), ExecutorConfig(workers=1, rows_per_task=rows_per_task))
    rows = sorted(tuple(r.values()) for r in
                  pq.read_table(out / "removed", columns=["id", "reason", "duplicate_of"]).to_pylist())
    stats = json.loads((out / "stats.json").read_text())["dedup"]
    return rows, {k: v for k, v in stats.items() if k.startswith("pairs_") or k == "candidate_pairs"}


def test_cluster_checks_in_small_chunks_give_the_same_verdicts(tmp_path, monkeypatch) -> None:
    from cotforge.curate.dedup import cluster

    _corpus(tmp_path / "in.jsonl")
    whole = _dedup_outcome(tmp_path / "in.jsonl", tmp_path / "whole", 90)
    monkeypatch.setattr(cluster, "CHECK_PAIRS", 2)
    assert _dedup_outcome(tmp_path / "in.jsonl", tmp_path / "chunks", 90) == whole
    assert whole[1]["candidate_pairs"] > 4 and whole[0]


def test_candidate_pairs_merged_band_by_band_equal_one_unique_of_all(tmp_path) -> None:
    from cotforge.curate.dedup.cluster import _read_pairs

    rng = np.random.default_rng(5)
    parts = []
    for band in range(6):
        rows = rng.integers(0, 3, size=(int(rng.integers(0, 40)), 4)).astype("<u4")  # many repeats across bands
        rows.tofile(tmp_path / f"{band:05d}_00.dups")
        parts.append(rows)
    (tmp_path / "00009_00.dups").write_bytes(b"")
    want = np.unique(np.concatenate(parts), axis=0)
    got = _read_pairs(tmp_path)
    assert got.dtype == np.uint32 and np.array_equal(got, want)
    assert _read_pairs(tmp_path / "none").shape == (0, 4)


def test_band_file_cuts_from_one_read_equal_a_bisect_of_the_file(tmp_path) -> None:
    from bisect import bisect_left

    from cotforge.curate.dedup.buckets import band_dtype, file_cuts

    rng = np.random.default_rng(11)
    dtype = band_dtype(3)
    for trial, n in enumerate([0, 1, 5, 700]):
        rec = np.zeros(n, dtype)
        for i in range(3):
            rec[f"h{i}"] = rng.integers(0, 1 << 61, size=n, dtype=np.uint64)
        rec["h0"][: n // 3] = 12345  # a run of equal first hashes
        rec.sort(order=["h0", "h1", "h2", "doc"])
        path = tmp_path / f"{trial:05d}.minhash.sig"
        rec.tofile(path)
        edges = np.array([0, 12345, 12346, *sorted(rng.integers(0, 1 << 61, size=6).tolist()), 1 << 61],
                         dtype=np.uint64)
        want = [bisect_left(rec["h0"].tolist(), int(e)) for e in edges]
        assert file_cuts(path, dtype, edges).tolist() == want, trial


def _report_by_one_dict_join(out) -> tuple[dict, list[dict]]:
    """The report's pairs as the first version built them: every removed row joined in one dict of kept rows."""
    from collections import defaultdict

    import pyarrow.parquet as pq

    from cotforge.curate.dedup.report import REASONS, similarity

    kept = {r["id"]: r for r in pq.read_table(out / "kept").to_pylist()}
    counts: dict = defaultdict(int)
    pairs = []
    for r in pq.read_table(out / "removed").to_pylist():
        if r["reason"] not in REASONS or not r["duplicate_of"]:
            continue
        k = kept.get(r["duplicate_of"], {})
        counts[(r["reason"], r["source"])] += 1
        pairs.append({"reason": r["reason"], "id": r["id"], "source": r["source"], "prompt": r["prompt"] or "",
                      "kept_id": r["duplicate_of"], "kept_source": k.get("source", ""),
                      "kept_prompt": k.get("prompt") or "", "response": r["response"] or "",
                      "kept_response": k.get("response") or "",
                      "score": round(similarity(r["prompt"], k.get("prompt") or ""), 4)})
    return dict(counts), pairs


def test_report_by_arrow_join_equals_one_dict_join_with_a_missing_kept_row(tmp_path, monkeypatch) -> None:
    import heapq

    import pyarrow as pa
    import pyarrow.parquet as pq

    from cotforge.curate.dedup import report
    from cotforge.curate.engine import ExecutorConfig
    from cotforge.curate.io.readers import InputSpec
    from cotforge.pipelines.stages import run_stage

    _corpus(tmp_path / "in.jsonl")
    out = tmp_path / "out"
    stats = run_stage("dedup", [InputSpec(str(tmp_path / "in.jsonl"))], out, DedupConfig(), ExecutorConfig(workers=1))
    shard = sorted((out / "removed").glob("*.parquet"))[0]
    t = pq.read_table(shard)
    dup = t.column("duplicate_of").to_pylist()
    dup[0] = "no-such-kept-row"  # a removed row naming a row that is not kept: joined with nothing
    pq.write_table(t.set_column(t.schema.get_field_index("duplicate_of"), "duplicate_of",
                                pa.array(dup, t.schema.field("duplicate_of").type)), shard)
    want_cell, want_pairs = _report_by_one_dict_join(out)
    for join_rows, batch in ((report.JOIN_ROWS, report.JOIN_BATCH), (3, 2)):
        monkeypatch.setattr(report, "JOIN_ROWS", join_rows)
        monkeypatch.setattr(report, "JOIN_BATCH", batch)
        cell, pairs = report.merged_pairs(out)
        assert cell == want_cell
        assert report.render_markdown(pairs, stats, cell) == report.render_markdown(want_pairs, stats, want_cell)
        assert report.render_html(pairs, stats, cell) == report.render_html(want_pairs, stats, want_cell)
        assert any(p["kept_prompt"] == "" and p["kept_id"] == "no-such-kept-row" for p in pairs)
        _, two = report.merged_pairs(out, keep=2)  # each (reason, source) bounded: its 2 lowest (score, id)
        for key in want_cell:
            group = [p for p in want_pairs if (p["reason"], p["source"]) == key]
            lowest = heapq.nsmallest(2, group, key=lambda p: (p["score"], p["id"]))
            assert [p for p in two if (p["reason"], p["source"]) == key] == lowest, key


def test_cluster_checks_in_a_pool_give_the_same_verdicts(tmp_path, monkeypatch) -> None:
    """The candidate checks spread over a pool of the task's CPUs (fork server) give the same removed rows, reasons
    and pair counts as in the task's own process, with accepted and rejected pairs in every chunk."""
    import json
    import random

    from cotforge.curate.dedup import cluster

    rng, rows = random.Random(1), []
    for i in range(300):
        a, b = rng.randint(2, 40), rng.randint(2, 40)
        name = rng.choice(["Mia", "Leo"])  # another name with the same numbers: a rejected candidate
        base = f"{name} has {a} apples and buys {b} more apples at the market. How many apples does {name} have now?"
        rows.append({"id": f"r{i}", "problem": base + (" Show your work." if rng.random() < 0.4 else ""),
                     "response": f"The answer is {a + b}."})
    (tmp_path / "in.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")

    monkeypatch.setattr(cluster, "CHECK_PAIRS", 7)
    monkeypatch.setattr(cluster, "POOL_PAIRS", 1)
    monkeypatch.setattr(cluster, "task_threads", lambda: 1)
    one = _dedup_outcome(tmp_path / "in.jsonl", tmp_path / "one", 70)
    assert one[1]["pairs_rejected_name_changed"] > 0 and one[1]["pairs_accepted"] > 0 and one[0]
    monkeypatch.setattr(cluster, "task_threads", lambda: 2)
    assert _dedup_outcome(tmp_path / "in.jsonl", tmp_path / "pool", 70) == one
    assert len(cluster._chunks(np.arange(30), 2)) == 5 and len(cluster._chunks(np.arange(8), 2)) == 2


def test_report_similarity_equals_the_sliced_ngram_jaccard() -> None:
    """`similarity` (zip-built n-grams, equal texts short-cut) equals the Jaccard of sliced word n-gram sets on
    random texts of 0-12 words with repeats, case and white-space variants, for n = 1..4."""
    import random

    from cotforge.curate.dedup.report import similarity

    def sliced(a: str, b: str, n: int) -> float:
        wa, wb = a.lower().split(), b.lower().split()
        ga = {tuple(wa[i:i + n]) for i in range(max(len(wa) - n + 1, 1))}
        gb = {tuple(wb[i:i + n]) for i in range(max(len(wb) - n + 1, 1))}
        return len(ga & gb) / len(ga | gb) if ga | gb else 1.0

    rng = random.Random(3)
    vocab = ["a", "B", "cat", "Cat", "dog", "x1", "\u00e9t\u00e9", "7", "s\u00df"]
    for _ in range(3000):
        a = rng.choice([" ", "  ", "\t", "\n"]).join(rng.choice(vocab) for _ in range(rng.randint(0, 12)))
        b = a if rng.random() < 0.2 else " ".join(rng.choice(vocab) for _ in range(rng.randint(0, 12)))
        for n in (1, 2, 3, 4):
            assert similarity(a, b, n) == sliced(a, b, n), (a, b, n)
    assert similarity(None, "", 3) == 1.0 and similarity("", None, 3) == 1.0


def test_first_new_equals_the_row_loop_with_a_set() -> None:
    """The signature step's first row of each new problem key (numpy unique + one set lookup per distinct key)
    equals the row-by-row set loop, batch after batch, keys repeating within and across batches."""
    from cotforge.curate.dedup.signature import first_new

    rng = np.random.default_rng(0)
    for _ in range(300):
        seen_ref: set[int] = set()
        seen: set[int] = set()
        for _ in range(4):
            keys = rng.integers(0, rng.integers(1, 50), size=rng.integers(0, 60)).astype(np.uint64)
            ref = [i for i, k in enumerate(keys.tolist()) if not (k in seen_ref or seen_ref.add(k))]
            assert first_new(keys, seen).tolist() == ref
            assert seen == seen_ref
