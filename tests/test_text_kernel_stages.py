"""Issue 35 at the stage level: schema-Parquet ingest by record batch gives the row loop's rows, and the
compiled text kernel and the polars path give identical stage outputs (decontaminate, dedup)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cotforge.curate.core.schema import SCHEMA, removed_schema
from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.dedup.config import DedupConfig
from cotforge.curate.engine import ExecutorConfig
from cotforge.curate.engine.work import IngestLog
from cotforge.curate.io import ingest
from cotforge.curate.io.budget import row_bytes, table_row_bytes
from cotforge.curate.io.readers import InputSpec
from cotforge.curate.text import columns
from cotforge.pipelines.stages import run_stage

needs_numba = pytest.mark.skipif(not columns.kernel_installed(), reason="the kernel extra (numba) is not installed")

PROBLEMS = [
    r"Let $x^2 + 3x - 10 = 0$. Find the sum of the squares of the two roots, written as \frac{a}{b} in lowest terms.",
    "Find all real x with x² − 5x + 6 ≤ 0 and write the interval as [a, b], where a and b are integers here.",
    "How many positive integers n ≤ 1000 have the property that n and n + 1 are both sums of two squares?",
    "Ｆｉｎｄ the number of ordered pairs (a, b) of positive integers such that a·b = 360 and gcd(a, b) = 6.",
    "A regular hexagon ABCDEF has side length 2. Compute the area of triangle ACE, in simplest radical form.",
]


def _rows() -> list[dict]:
    """Rows of the shared schema: copies of the problems in several forms, clean rows, and rows the ingest
    must quarantine or rename (blank prompts, a repeated id, an id that already looks renamed)."""
    rows = []
    forms = [lambda p: p, lambda p: "Solve the following problem.\n" + p.upper(),
             lambda p: p.replace(" ", "  ") + " Put the answer in \\boxed{}.", lambda p: "é ﬁ " + p[:60]]
    for i, p in enumerate(PROBLEMS):
        for k, f in enumerate(forms):
            rows.append({"id": f"r{i}_{k}", "source": "s" + str(k % 2), "domain": "math", "prompt": f(p),
                         "response": f"We compute: {p[-50:]} so the answer is {i}.", "answer": str(i),
                         "tests": None, "meta": None})
    for i in range(12):
        rows.append({"id": f"c{i}", "source": "clean", "domain": "math",
                     "prompt": f"Compute {i} + {i * 7} and explain each step of the addition {'ｘ²' if i % 3 else ''}.",
                     "response": "```python\nprint(1)\n```\nDone ≥ 2 \\alpha", "answer": "1", "tests": None,
                     "meta": None})
    rows[3]["prompt"] = " \u3000\x1c\n"  # whitespace for str.strip, not for ASCII-only regexes
    rows[5]["prompt"] = None
    rows[7]["id"] = rows[6]["id"]
    rows[8]["id"] = rows[6]["id"] + "~2"
    rows[9]["id"] = rows[6]["id"]
    rows[10]["prompt"] = ""
    return rows


def _write_schema_parquet(path: Path, rows: list[dict]) -> None:
    schema = pa.schema([pa.field(f.name, f.type) for f in SCHEMA])  # nullable: the blank rows must pass through
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, row_group_size=7)


def _materialize(tmp: Path, name: str, specs: list[InputSpec], bytes_per_task: int) -> tuple[list, list, dict, list]:
    log = IngestLog(tmp / name / "ingest", removed_schema(SCHEMA))
    files = ingest.materialize(specs, tmp / name / "input", log, rows_per_task=9, schema=SCHEMA,
                               bytes_per_task=bytes_per_task, buffer_bytes=600)
    log.save()
    shards = [pq.read_table(f).to_pylist() for f in files]
    quarantined = [r for f in sorted((tmp / name / "ingest" / "quarantined").glob("*.parquet"))
                   for r in pq.read_table(f).to_pylist()]
    return [r for s in shards for r in s], quarantined, dict(log.rows_in), shards


def test_not_space_class_is_pythons_whitespace():
    want = "".join(f"\\x{{{c:x}}}" for c in range(0x110000) if chr(c).isspace())
    assert ingest.NOT_SPACE == f"[^{want}]"


def test_table_row_bytes_equal_row_bytes():
    t = pa.table({"a": ["x", "héllo", None], "b": [[1, 2], None, []], "c": [1, 2, None],
                  "d": [{"x": 1, "y": 2}, None, {"x": 3, "y": None}]})
    assert table_row_bytes(t).tolist() == [row_bytes(r) for r in t.to_pylist()]


def test_ingest_by_record_batch_equals_the_row_loop(tmp_path, monkeypatch):
    src = tmp_path / "rows.parquet"
    _write_schema_parquet(src, _rows())
    jsonl = tmp_path / "more.jsonl"
    jsonl.write_text("".join(json.dumps({"id": f"j{i}", "problem": p, "solution": "ok"}) + "\n"
                             for i, p in enumerate(PROBLEMS)))
    specs = [InputSpec(str(src)), InputSpec(str(jsonl), "j"), InputSpec(str(src), "renamed")]
    budget = 1500  # bytes per task: cuts shards by size as well as by rows_per_task
    batched = _materialize(tmp_path, "batched", specs, budget)
    monkeypatch.setattr(ingest, "is_schema_parquet", lambda path: False)  # every input through the row loop
    rows = _materialize(tmp_path, "rows", specs, budget)
    assert batched[0] == rows[0] and batched[1] == rows[1] and batched[2] == rows[2]
    kept, quarantined, rows_in, shards = batched
    assert len(quarantined) == 6 and {q["reason"] for q in quarantined} == {"malformed: field 'prompt' is empty"}
    assert len({r["id"] for r in kept}) == len(kept)  # ids made unique in input order
    assert [r["id"] for r in kept][:4] == ["r0_0", "r0_1", "r0_2", "r1_0"]
    assert "r1_2~3" in {r["id"] for r in kept} and rows_in["renamed"] == len(_rows())
    for shard, after in zip(shards, shards[1:], strict=False):  # each shard as full as rows and bytes allow
        size = sum(row_bytes(r) for r in shard)
        assert len(shard) <= 9 and (len(shard) == 1 or size <= budget)
        assert len(shard) == 9 or size + row_bytes(after[0]) > budget


def test_shard_bytes_do_not_depend_on_how_rows_arrive(tmp_path):
    """Final shards are written from whatever tables the tasks produced; the same rows must give the same bytes
    (Parquet cuts pages per Arrow chunk, so a writer that kept the chunks wrote different bytes)."""
    import random

    from cotforge.curate.io.writer import ShardWriter

    rng = random.Random(0)
    words = [f"w{i}" for i in range(5000)]
    rows = [{"id": f"r{k}", "source": "s", "domain": "math", "answer": str(k), "tests": None, "meta": None,
             "prompt": " ".join(rng.choices(words, k=rng.randint(20, 200))),
             "response": " ".join(rng.choices(words, k=rng.randint(50, 600)))} for k in range(12_000)]
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    digests = []
    for name, cuts in (("one", [len(rows)]), ("batches", [4096] * 2), ("odd", [999, 3001, 17] * 3)):
        w = ShardWriter(tmp_path / name, SCHEMA, rows_per_shard=50_000)
        start = 0
        for n in cuts:
            w.write_table(table.slice(start, n))
            start += n
        w.write_table(table.slice(start))
        w.close()
        digests.append([f.read_bytes() for f in sorted((tmp_path / name).glob("*.parquet"))])
    assert len(digests[0]) == 1 and digests[0] == digests[1] == digests[2]


def _stage_parts(out: Path) -> dict[str, bytes]:
    return {f"{part}/{f.name}": f.read_bytes() for part in ("kept", "removed")
            for f in sorted((out / part).glob("*.parquet"))}


def _bench_dir(tmp: Path) -> Path:
    d = tmp / "bench"
    d.mkdir()
    (d / "aime2024.jsonl").write_text("".join(json.dumps({"id": f"a{i}", "problem": p, "answer": str(i)}) + "\n"
                                              for i, p in enumerate(PROBLEMS)))
    return d


@pytest.mark.slow
@needs_numba
def test_decontaminate_gives_the_same_shards_with_either_text_kernel(tmp_path):
    src = tmp_path / "rows.parquet"
    _write_schema_parquet(src, _rows())
    bench = _bench_dir(tmp_path)
    outs = {}
    for kernel in ("numba", "python"):
        cfg = DecontamConfig(benchmarks=["aime2024"], benchmarks_dir=str(bench), text_kernel=kernel)
        stats = run_stage("decontaminate", [InputSpec(str(src))], tmp_path / kernel, cfg,
                          ExecutorConfig(workers=1, rows_per_task=10))
        assert stats["removed_by_reason"]["contaminated"] >= 10
        # the HTML report shows removed rows' own text (read back from removed/ in record batches)
        assert "Solve the following problem." in (tmp_path / kernel / "contamination_report.html").read_text()
        outs[kernel] = _stage_parts(tmp_path / kernel)
    assert outs["numba"] == outs["python"]


@pytest.mark.slow
@needs_numba
def test_dedup_gives_the_same_shards_with_either_text_kernel(tmp_path):
    src = tmp_path / "rows.parquet"
    _write_schema_parquet(src, _rows())
    outs = {}
    for kernel in ("numba", "python"):
        stats = run_stage("dedup", [InputSpec(str(src))], tmp_path / kernel, DedupConfig(text_kernel=kernel),
                          ExecutorConfig(workers=1, rows_per_task=10))
        assert stats["removed_by_reason"].get("near_duplicate", 0) + stats["removed_by_reason"].get(
            "exact_duplicate", 0) >= 5
        outs[kernel] = _stage_parts(tmp_path / kernel)
    assert outs["numba"] == outs["python"]


def test_text_kernel_setting_is_checked(monkeypatch):
    with pytest.raises(ValueError, match="text_kernel: must be one of auto, numba, python"):
        DecontamConfig(text_kernel="fast")
    with pytest.raises(ValueError, match="text_kernel"):
        DedupConfig(text_kernel="rust")
    monkeypatch.setattr(columns, "kernel_installed", lambda: False)
    assert not columns.use_kernel("auto") and not columns.use_kernel("python")
    with pytest.raises(RuntimeError, match=r"pip install 'cotforge\[kernel\]'"):
        columns.use_kernel("numba")


def test_python_text_kernel_never_imports_numba():
    """`text_kernel=python` (and the index build, which always takes the polars path) keep numba out of the
    process: the stage's main process stays within its memory budget."""
    code = ("import sys; from cotforge.curate.decontam.scan import HashedBatch; "
            "from cotforge.curate.decontam.config import DecontamConfig; "
            "HashedBatch(['Find x² ≤ 4.', None], DecontamConfig(text_kernel='python')); "
            "print('numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"


def test_cli_takes_the_text_kernel_option(tmp_path):
    src = tmp_path / "rows.parquet"
    _write_schema_parquet(src, _rows()[-10:])
    bench = _bench_dir(tmp_path)
    res = subprocess.run([sys.executable, "-m", "cotforge.pipelines.cli", "curate", "decontaminate", str(src), "-o",
                          str(tmp_path / "o"), "--benchmarks", "aime2024", "--benchmarks-dir", str(bench),
                          "--text-kernel", "python", "--workers", "1"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    stats = json.loads((tmp_path / "o" / "stats.json").read_text())
    assert stats["config"]["text_kernel"] == "python" and stats["rows_in"] == 10 and stats["kept"] >= 8
    bad = subprocess.run([sys.executable, "-m", "cotforge.pipelines.cli", "curate", "decontaminate", str(src), "-o",
                          str(tmp_path / "o2"), "--benchmarks", "aime2024", "--benchmarks-dir", str(bench),
                          "--text-kernel", "fast"], capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "text_kernel: must be one of" in bad.stderr + bad.stdout
    assert "Traceback" not in bad.stderr
