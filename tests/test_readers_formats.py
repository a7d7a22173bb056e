"""File formats: every format gives the same rows; compressed kinds quarantine bad lines with file and line;
a truncated or corrupt stream keeps the rows before the break and records it with its byte offset (never
`Aborted!`); JSON arrays are streamed; unknown formats are a clear error at `--dry-run`."""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import lzma
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from click.testing import CliRunner

from cotforge.curate.io.formats import detect_format, iter_json_array
from cotforge.curate.io.readers import InputError, InputSpec, Quarantined, read_rows
from cotforge.pipelines.stages import run_stage

RECS = [{"id": f"r{i}", "problem": f"What is {i}+{i}?", "solution": f"It is {2 * i}.", "answer": str(2 * i)}
        for i in range(50)]
NAMES = {"gz": "gzip", "zst": "zstd", "bz2": "bz2", "xz": "xz"}
COMPRESS = {"gz": gzip.compress, "zst": lambda b: zstandard.ZstdCompressor().compress(b), "bz2": bz2.compress,
            "xz": lambda b: lzma.compress(b, preset=0)}


def jsonl_bytes(recs) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in recs).encode()


def make(tmp_path: Path, kind: str) -> Path:
    """RECS written as `kind` (a file or folder)."""
    if kind == "jsonl":
        p = tmp_path / "d.jsonl"
        p.write_bytes(jsonl_bytes(RECS))
    elif kind.startswith("jsonl."):
        p = tmp_path / f"d.{kind}"
        p.write_bytes(COMPRESS[kind.split(".")[1]](jsonl_bytes(RECS)))
    elif kind == "json_array":
        p = tmp_path / "d.json"
        p.write_text(json.dumps(RECS, indent=1))
    elif kind == "json_array.gz":
        p = tmp_path / "d.json.gz"
        p.write_bytes(gzip.compress(json.dumps(RECS).encode()))
    elif kind in ("csv", "tsv", "csv.zst"):
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(RECS[0]), delimiter="\t" if kind == "tsv" else ",")
        w.writeheader()
        w.writerows(RECS)
        p = tmp_path / f"d.{kind}"
        data = buf.getvalue().encode()
        p.write_bytes(COMPRESS["zst"](data) if kind.endswith("zst") else data)
    elif kind == "parquet":
        p = tmp_path / "d.parquet"
        pq.write_table(pa.Table.from_pylist(RECS), p, row_group_size=7)
    elif kind in ("arrow_file", "arrow_stream"):
        p = tmp_path / "d.arrow"
        t = pa.Table.from_pylist(RECS)
        with (pa.ipc.new_file if kind == "arrow_file" else pa.ipc.new_stream)(str(p), t.schema) as w:
            for b in t.to_batches(max_chunksize=9):
                w.write_batch(b)
    elif kind == "save_to_disk":
        import datasets

        p = tmp_path / "ds"
        datasets.Dataset.from_list(RECS).save_to_disk(str(p), max_shard_size="2KB")
    elif kind == "mixed_folder":  # one source split over files of different formats
        p = tmp_path / "mixed"
        (p / "b").mkdir(parents=True)
        (p / "a.jsonl.gz").write_bytes(gzip.compress(jsonl_bytes(RECS[:20])))
        pq.write_table(pa.Table.from_pylist(RECS[20:35]), p / "b" / "b.parquet")
        (p / "c.json").write_text(json.dumps(RECS[35:]))
        (p / "README.md").write_text("not data")
    elif kind == "glob":
        for i in range(5):
            (tmp_path / f"part-{i}.jsonl.xz").write_bytes(lzma.compress(jsonl_bytes(RECS[i * 10:(i + 1) * 10])))
        return tmp_path / "part-*.jsonl.xz"
    else:
        raise ValueError(kind)
    return p


KINDS = ["jsonl", "jsonl.gz", "jsonl.zst", "jsonl.bz2", "jsonl.xz", "json_array", "json_array.gz", "csv", "tsv",
         "csv.zst", "parquet", "arrow_file", "arrow_stream", "save_to_disk", "mixed_folder", "glob"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_format_gives_the_same_rows(tmp_path, kind):
    out = list(read_rows(InputSpec(str(make(tmp_path, kind)), source_name="s"), strict=True))
    assert [r["id"] for r in out] == [r["id"] for r in RECS]
    assert [(r["prompt"], r["response"], r["answer"]) for r in out] == \
        [(r["problem"], r["solution"], r["answer"]) for r in RECS]


def test_format_is_detected_by_content_when_the_name_says_nothing_or_lies(tmp_path):
    (tmp_path / "blob").write_bytes(gzip.compress(jsonl_bytes(RECS[:3])))
    assert str(detect_format(str(tmp_path / "blob"))) == "jsonl+gzip"
    (tmp_path / "plain.jsonl.gz").write_bytes(jsonl_bytes(RECS[:3]))  # not actually compressed
    assert str(detect_format(str(tmp_path / "plain.jsonl.gz"))) == "jsonl"
    assert len(list(read_rows(InputSpec(str(tmp_path / "plain.jsonl.gz"))))) == 3
    pq.write_table(pa.Table.from_pylist(RECS[:2]), tmp_path / "table.bin")
    assert str(detect_format(str(tmp_path / "table.bin"))) == "parquet"
    (tmp_path / "hostname").write_text("buildhost\n")
    with pytest.raises(InputError, match=r"hostname: unknown format .*starts with 'buildhost"):
        list(read_rows(InputSpec(str(tmp_path / "hostname"))))


@pytest.mark.parametrize("comp", sorted(COMPRESS))
def test_malformed_line_in_each_compressed_kind_is_quarantined_with_file_and_line(tmp_path, comp):
    data = jsonl_bytes(RECS[:2]) + b"{not json\n" + jsonl_bytes(RECS[2:4])
    p = tmp_path / f"bad.jsonl.{comp}"
    p.write_bytes(COMPRESS[comp](data))
    out = list(read_rows(InputSpec(str(p))))
    bad = [r for r in out if isinstance(r, Quarantined)]
    assert len(out) == 5 and len(bad) == 1
    assert bad[0].origin.file == str(p) and bad[0].origin.index == 3 and bad[0].origin.unit == "line"
    assert bad[0].reason.startswith("malformed: invalid JSON")
    with pytest.raises(InputError, match=rf"bad\.jsonl\.{comp}, line 3: malformed: invalid JSON"):
        list(read_rows(InputSpec(str(p)), strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("comp", sorted(COMPRESS))
def test_truncated_stream_keeps_rows_before_the_break(tmp_path, comp):
    rng = random.Random(0)  # incompressible text: the stream has many blocks (bz2 blocks are 900 kB)
    recs = [{"id": f"t{i}", "problem": "".join(rng.choices("abcdefghij ", k=400))} for i in range(6000)]
    full = COMPRESS[comp](jsonl_bytes(recs))
    cut = len(full) * 2 // 3
    p = tmp_path / f"cut.jsonl.{comp}"
    p.write_bytes(full[:cut])
    out = list(read_rows(InputSpec(str(p))))
    good, bad = out[:-1], out[-1]
    assert len(good) > 0 and not any(isinstance(r, Quarantined) for r in good)
    assert [r["id"] for r in good] == [r["id"] for r in recs[:len(good)]]  # the rows before the break, in order
    assert isinstance(bad, Quarantined) and bad.origin.unit == "byte" and bad.origin.index == cut
    assert f"truncated {NAMES[comp]} stream" in bad.reason and str(cut) in bad.reason
    row = bad.to_row()
    assert json.loads(row["meta"])["_origin"] == {"file": str(p), "byte": cut}
    with pytest.raises(InputError, match=rf"cut\.jsonl\.{comp}, byte {cut}: malformed: truncated"):
        list(read_rows(InputSpec(str(p)), strict=True))


def test_corrupt_gzip_block_is_a_break_with_its_offset(tmp_path):
    data = bytearray(gzip.compress(jsonl_bytes(RECS * 200), compresslevel=1))
    mid = len(data) // 2
    data[mid:mid + 64] = b"\x00" * 64
    p = tmp_path / "corrupt.jsonl.gz"
    p.write_bytes(bytes(data))
    out = list(read_rows(InputSpec(str(p))))
    assert isinstance(out[-1], Quarantined) and out[-1].origin.unit == "byte"
    assert "gzip" in out[-1].reason and 0 <= out[-1].origin.index <= mid


@pytest.mark.slow
def test_truncated_input_never_aborts_the_cli(tmp_path):

    from cotforge.pipelines.cli.main import main

    full = gzip.compress(jsonl_bytes(RECS * 40))
    p = tmp_path / "cut.jsonl.gz"
    p.write_bytes(full[: len(full) // 2])
    res = CliRunner().invoke(main, ["curate", "ingest", str(p), "-o", str(tmp_path / "o")])
    assert res.exit_code == 0 and "Aborted" not in res.output and "1 removed" in res.output
    res = CliRunner().invoke(main, ["curate", "ingest", str(p), "-o", str(tmp_path / "o2"), "--strict"])
    assert res.exit_code != 0 and "Aborted" not in res.output
    assert f"cut.jsonl.gz, byte {len(full) // 2}: malformed: truncated gzip stream" in res.output
    stats = run_stage("ingest", [InputSpec(str(p))], tmp_path / "o3")
    assert stats["rows_in"] == stats["kept"] + 1 and stats["removed_by_reason"] == {"malformed": 1}


    d = run_stage("dedup", [InputSpec(str(p))], tmp_path / "dd")  # the same break through a datatrove stage
    assert d["removed_by_reason"]["malformed"] == 1


class CountingRaw(io.RawIOBase):
    """A byte stream that records how much of it was read."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = min(len(b), len(self.data) - self.pos)
        b[:n] = self.data[self.pos:self.pos + n]
        self.pos += n
        return n


def test_json_array_is_streamed_not_loaded_whole():
    big = json.dumps([{"problem": "p" * 1000, "i": i} for i in range(3000)]).encode()  # ~3 MB
    raw = CountingRaw(big)
    it = iter_json_array(raw, None)
    first = next(it)
    assert first == (0, {"problem": "p" * 1000, "i": 0})
    assert raw.pos <= 2 * 65536  # one read chunk (plus the one a boundary may need), not the whole file
    assert sum(1 for _ in it) == 2999


def test_json_array_errors_keep_the_elements_before(tmp_path):
    p = tmp_path / "a.json"
    p.write_text('[{"problem": "a"}, 5, {"problem": "b"}, {"problem": oops}]')
    out = list(read_rows(InputSpec(str(p))))
    assert [type(r) is Quarantined for r in out] == [False, True, False, True]
    assert out[1].reason == "malformed: record is not an object" and out[3].origin.index == 3


def test_unknown_format_is_rejected_by_dry_run(tmp_path):
    from cotforge.pipelines.cli.run import run

    (tmp_path / "hostname").write_text("buildhost\n")
    (tmp_path / "r.yaml").write_text("name: t\nsources:\n  - {name: a, path: hostname}\nstages:\n  ingest: {}\n")
    res = CliRunner().invoke(run, [str(tmp_path / "r.yaml"), "--dry-run"])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert "sources[0] (a): " in res.output and "hostname: unknown format" in res.output
    (tmp_path / "d.jsonl.zst").write_bytes(COMPRESS["zst"](jsonl_bytes(RECS)))
    (tmp_path / "r2.yaml").write_text("name: t\nsources:\n  - {name: a, path: d.jsonl.zst}\nstages:\n  ingest: {}\n")
    res = CliRunner().invoke(run, [str(tmp_path / "r2.yaml"), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "read as: jsonl+zstd (1 file); no preset (field detection)" in res.output
