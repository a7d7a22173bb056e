"""Batch paths of dedup: keys, shingles and signatures match their one-row forms; id registry; table writes."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cotforge.curate.core.schema import SCHEMA
from cotforge.curate.dedup.config import DedupConfig
from cotforge.curate.dedup.core import (
    band_signatures,
    batch_keys,
    batch_shingles,
    pack_order,
    row_keys,
    unpack_order,
)
from cotforge.curate.io.ingest import IdRegistry
from cotforge.curate.io.writer import ShardWriter
from cotforge.curate.text.normalize import normalize
from cotforge.pipelines.stages import run_stage

TEXTS = [
    "Please reason step by step, and put your final answer within \\boxed{}. Find $x$ if $2x = 10$.",
    "A farmer has 12 cows and buys 5 more. How many cows?",
    "  A FARMER has 12 cows, and buys 5 more!! How many cows?  ",
    "İstanbul has 3² districts — how many?\n```python\nprint(1)\n```",
    "Let \\(b \\ge 2\\); \\left( \\dfrac{1}{2} \\right) \\quad x_1 = y__2",
    "???",
    "two words",
    "word",
]
RESPONSES = ["The answer is 5. Let's think step by step.", None, "", "Problem: 7", "x", "y", None, "z"]


def test_batch_keys_equal_row_keys():
    kb = batch_keys(TEXTS, RESPONSES)
    for i, (p, r) in enumerate(zip(TEXTS, RESPONSES, strict=True)):
        norm_p, pkey, pair, num = row_keys(p, r)
        assert kb.norm_prompts[i] == norm_p == normalize(p)
        assert (int(kb.pkey[i]), int(kb.pair[i]), int(kb.num[i])) == (pkey, pair, num)


def test_batch_keys_of_repeated_prompts_equal_row_keys():
    rng = random.Random(4)
    prompts = [rng.choice(TEXTS) for _ in range(60)]  # each prompt many times, with other responses
    responses = [rng.choice(RESPONSES) for _ in prompts]
    kb = batch_keys(prompts, responses)
    for i, (p, r) in enumerate(zip(prompts, responses, strict=True)):
        norm_p, pkey, pair, num = row_keys(p, r)
        assert kb.norm_prompts[i] == norm_p
        assert (int(kb.pkey[i]), int(kb.pair[i]), int(kb.num[i])) == (pkey, pair, num)


def test_shingles_short_and_empty_texts():
    norms = [normalize(t) for t in TEXTS]
    sh, rows = batch_shingles(norms, 3)
    counts = np.bincount(rows, minlength=len(norms))
    for i, t in enumerate(norms):
        n_words = len(t.split()) if t else 0
        assert counts[i] == (0 if n_words == 0 else max(1, n_words - 2))
    # the shingles of one text do not depend on the other texts in its batch
    for i, t in enumerate(norms):
        alone = batch_shingles([t], 3)[0]
        assert sorted(alone.tolist()) == sorted(sh[rows == i].tolist())


def test_band_signatures_number_guard_separates_numbers():
    cfg = DedupConfig()
    a = "a farmer has 12 cows and buys 5 more cows at the market how many cows does the farmer have now"
    b = a.replace("12", "13")
    c = a + " show your work"
    kb = batch_keys([a, b, c], [None] * 3)
    sig, has = band_signatures(kb.norm_prompts, kb.num, cfg)
    assert has.all() and sig.max() < (1 << 61) - 1
    bands = sig.reshape(3, cfg.bands, cfg.rows_per_band)
    same = lambda i, j: (bands[i] == bands[j]).all(axis=1).any()  # noqa: E731
    assert not same(0, 1)  # different numbers: never LSH candidates
    assert same(0, 2)  # near copy with the same numbers stays a candidate
    plain, _ = band_signatures(kb.norm_prompts, kb.num, DedupConfig(number_guard=False))
    assert (plain.reshape(3, cfg.bands, -1)[0] == plain.reshape(3, cfg.bands, -1)[1]).all(axis=1).any()


def test_order_keys_sort_by_priority_then_input_order():
    a = pack_order(np.array([1, 0, 0]), 2, np.array([5, 6, 7]))
    b = pack_order(np.array([0]), 3, np.array([0]))
    assert sorted([*a.tolist(), *b.tolist()]) == [a[1], a[2], b[0], a[0]]
    rank, idx = unpack_order(a)
    assert rank.tolist() == [2, 2, 2] and idx.tolist() == [5, 6, 7]


def test_id_registry_matches_reference():
    rng = random.Random(0)
    ids = [f"id{rng.randint(0, 300)}" for _ in range(2000)]
    reg = IdRegistry()
    reg.MERGE_EVERY = 50  # exercise the sorted-array merge
    seen: dict[str, int] = {}
    for i in ids:
        seen[i] = seen.get(i, 0) + 1
        assert reg.unique(i) == (i if seen[i] == 1 else f"{i}~{seen[i]}")
    assert reg.unique("id7~2") != "id7~2" or seen.get("id7", 0) < 2  # a generated id is taken


def test_id_registry_never_repeats_an_id_that_already_has_a_suffix():
    for ids in (["a~2", "a", "a"], ["a~3", "a", "a", "a"], ["a", "a", "a~2", "a"]):
        reg = IdRegistry()
        out = [reg.unique(i) for i in ids]
        assert len(set(out)) == len(out), (ids, out)
        assert out[0] == ids[0]


def _rows(n: int, start: int = 0) -> list[dict]:
    return [{"id": f"r{i}", "source": "s", "domain": "math", "prompt": f"p{i}", "response": None, "answer": None,
             "tests": None, "meta": "{}"} for i in range(start, start + n)]


def _shard_bytes(folder) -> list[bytes]:
    return [f.read_bytes() for f in sorted(folder.glob("*.parquet"))]


def test_shard_writer_tables_same_bytes_whatever_the_split(tmp_path):
    rows = _rows(300)
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    outs = []
    for k, cuts in enumerate(([300], [1, 99, 200], [7] * 42 + [6])):
        w = ShardWriter(tmp_path / f"w{k}", SCHEMA, rows_per_shard=128)
        w.write(_rows(1, 1000)[0])  # a row written one by one goes first
        start = 0
        for c in cuts:
            w.write_table(table.slice(start, c))
            start += c
        w.close()
        assert w.rows == 301 and w.shards == 3
        outs.append(_shard_bytes(tmp_path / f"w{k}"))
    assert outs[0] == outs[1] == outs[2]
    got = pa.concat_tables([pq.read_table(f) for f in sorted((tmp_path / "w0").glob("*.parquet"))])
    assert got["id"].to_pylist() == ["r1000"] + [r["id"] for r in rows]


def test_too_many_rows_per_task_is_a_clear_error(tmp_path):
    from cotforge.curate.dedup.core import IDX_BITS
    from cotforge.curate.engine import ExecutorConfig
    from cotforge.curate.io.readers import InputSpec

    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "a", "problem": "p"}\n')
    with pytest.raises(ValueError, match="rows per task .* above"):
        run_stage("dedup", [InputSpec(str(src))], tmp_path / "out", executor=ExecutorConfig(rows_per_task=(1 << IDX_BITS) + 1))
