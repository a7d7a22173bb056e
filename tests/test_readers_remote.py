"""Where data lives: a real S3 endpoint (moto's server on 127.0.0.1) for inputs and outputs end to end
(ingest -> decontaminate -> dedup, compared with a local run), credentials kept out of logs and stats, other
fsspec filesystems, and Hub datasets streamed from a local folder in the Hub's layout (peak memory measured)."""

from __future__ import annotations

import gzip
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cotforge.curate.io import fs
from cotforge.curate.io.readers import InputSpec, Quarantined, read_rows

FIXTURES = Path(__file__).parent / "fixtures" / "presets"
SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYzz-SECRET"


@pytest.fixture(scope="module")
def s3_server():
    moto_server = pytest.importorskip("moto.server")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(s3_server, monkeypatch):
    """Credentials and endpoint from the usual AWS environment variables only; a fresh bucket."""
    pytest.importorskip("s3fs")
    for k, v in {"AWS_ACCESS_KEY_ID": "AKIATESTKEY", "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1",
                 "AWS_ENDPOINT_URL": s3_server}.items():
        monkeypatch.setenv(k, v)
    import fsspec

    fsspec.filesystem("s3").clear_instance_cache()
    s = fsspec.filesystem("s3", skip_instance_cache=True)
    bucket = f"bkt-{os.getpid()}-{len(s.ls('')) if s.ls('') else 0}"
    s.mkdir(bucket)
    return s, bucket


def _rows(name: str) -> list[dict]:
    return json.loads((FIXTURES / f"{name}.json").read_text())["rows"]


def _jsonl(recs: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in recs).encode()


def _table(folder: str, part: str) -> list[dict]:
    from cotforge.curate.io.inputs import stage_files

    out = []
    for f in stage_files(folder, part):
        with fs.open_binary(str(f)) as fh:
            out += pq.read_table(fh).to_pylist()
    for r in (r for r in out if "meta" in r):  # the file each row came from differs between s3:// and local
        meta = json.loads(r["meta"] or "{}")
        meta.pop("_origin", None)
        r["meta"] = json.dumps(meta, sort_keys=True)
    return out


def test_url_helpers_hide_secrets():
    assert fs.shown("https://user:pa55@host/x.jsonl?X-Amz-Signature=abc") == "https://host/x.jsonl"
    assert fs.shown("s3://bucket/p/*.jsonl.gz") == "s3://bucket/p/*.jsonl.gz"
    assert fs.shown("/local/path?odd") == "/local/path?odd"
    from cotforge.curate.io.writer import redact

    assert redact({"inputs": ["https://u:secret@h/a"], "n": 1}) == {"inputs": ["https://h/a"], "n": 1}


def test_memory_filesystem_glob_and_folder():
    import fsspec

    m = fsspec.filesystem("memory")
    for i in range(3):
        with m.open(f"/cf-test/part-{i}.jsonl.gz", "wb") as f:
            f.write(gzip.compress(_jsonl([{"problem": f"p{i}-{j}"} for j in range(2)])))
    got = [r["prompt"] for r in read_rows(InputSpec("memory://cf-test/part-*.jsonl.gz", "m"))]
    assert got == [f"p{i}-{j}" for i in range(3) for j in range(2)]
    assert [r["prompt"] for r in read_rows(InputSpec("memory://cf-test", "m"))] == got
    m.rm("/cf-test", recursive=True)


@pytest.mark.slow
def test_curate_from_and_to_s3_matches_a_local_run(s3, tmp_path, caplog, monkeypatch):
    """Every curation stage through the command line (`cotforge curate STAGE ... -o s3://...`, the user's
    door): ingest -> decontaminate -> dedup -> verify -> difficulty -> profile -> select -> mix with every input
    and output on S3; the published shards equal a local run's; nothing is written to a local `s3:` folder;
    the secret key appears in no log line and no stats.json."""
    from click.testing import CliRunner

    from cotforge.curate.io.inputs import read_stats
    from cotforge.pipelines.cli.curate import curate as curate_cli

    s, bucket = s3
    leaky = "Let n be the number of ordered pairs of positive integers whose product is exactly 360; find n please"
    plain = [{"id": f"p{i}", "problem": f"Compute {i} times {i + 3} and explain the steps carefully", "answer": str(i * (i + 3))}
             for i in range(12)] + [{"id": "leak", "problem": leaky, "answer": "24"},
                                    {"id": "dup", "problem": "Compute 1 times 4 and explain the steps carefully", "answer": "4"}]
    files = {"raw/openr1.jsonl.gz": gzip.compress(_jsonl(_rows("openr1_math"))),
             "raw/plain/a.jsonl": _jsonl(plain[:7]), "raw/plain/b.jsonl.zst": None}
    import zstandard

    files["raw/plain/b.jsonl.zst"] = zstandard.ZstdCompressor().compress(_jsonl(plain[7:]))
    local = tmp_path / "local"
    for rel, data in files.items():
        with s.open(f"{bucket}/{rel}", "wb") as f:
            f.write(data)
        (local / rel).parent.mkdir(parents=True, exist_ok=True)
        (local / rel).write_bytes(data)
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "synth.jsonl").write_text(json.dumps({"id": "b0", "problem": leaky, "answer": "24"}) + "\n")
    (bench / "registry.yaml").write_text("benchmarks:\n  synth:\n    domain: math\n    solution_field: null\n")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    ex = ["--workers", "1", "--rows-per-task", "8"]

    def cli(*args: str) -> None:
        res = CliRunner().invoke(curate_cli, list(args))
        assert res.exit_code == 0, (args, res.output)

    def curate(root: str, run: str) -> None:
        cli("ingest", fs.join(root, "raw/openr1.jsonl.gz"), fs.join(root, "raw/plain/*.jsonl*"),
            "--source-name", f"{fs.join(root, 'raw/openr1.jsonl.gz')}=openr1",
            "--source-name", f"{fs.join(root, 'raw/plain/*.jsonl*')}=plain", "-o", fs.join(run, "ingest"))
        cli("decontaminate", fs.join(run, "ingest"), "-o", fs.join(run, "decontaminate"), "--benchmarks", "synth",
            "--benchmarks-dir", str(bench), "--registry", str(bench / "registry.yaml"), *ex)
        cli("dedup", fs.join(run, "decontaminate"), "-o", fs.join(run, "dedup"), *ex)
        cli("verify", fs.join(run, "dedup"), "-o", fs.join(run, "verify"), "--verify-workers", "1", *ex)
        cli("difficulty", fs.join(run, "verify"), "-o", fs.join(run, "difficulty"))
        cli("profile", fs.join(run, "difficulty"), "-o", fs.join(run, "profile"))
        cli("select", fs.join(run, "difficulty"), "-o", fs.join(run, "select"))
        cli("mix", fs.join(run, "select"), "-o", fs.join(run, "mix"), "--no-card")

    with caplog.at_level(logging.DEBUG):
        curate(f"s3://{bucket}", f"s3://{bucket}/run")
    curate(str(local), str(tmp_path / "run"))
    assert sorted(p.name for p in cwd.iterdir()) == []  # no local `s3:` folder, nothing else in the working folder
    for stage in ("ingest", "decontaminate", "dedup", "verify", "difficulty", "select", "mix"):
        remote, here = f"s3://{bucket}/run/{stage}", str(tmp_path / "run" / stage)
        for part in ("kept", "removed"):
            assert _table(remote, part) == _table(here, part), (stage, part)
        assert s.exists(f"{bucket}/run/{stage}/stats.json") and not s.exists(f"{bucket}/run/{stage}/_work")
        rs, ls = read_stats(remote), read_stats(here)
        assert (rs["rows_in"], rs["kept"], rs["removed"]) == (ls["rows_in"], ls["kept"], ls["removed"])
        with fs.open_text(f"s3://{bucket}/run/{stage}/stats.json") as f:
            assert SECRET not in f.read()
    assert s.exists(f"{bucket}/run/decontaminate/contamination_report.md")
    assert s.exists(f"{bucket}/run/profile/profile.md") and s.exists(f"{bucket}/run/select/selection.md")
    for part in ("sft", "rl"):  # the mix's training shards, published like the stage folders
        rows = _table(f"s3://{bucket}/run/mix", part)
        assert rows and rows == _table(str(tmp_path / "run" / "mix"), part), part
    st = read_stats(f"s3://{bucket}/run/ingest")
    assert st["rows_in"] == 5 + 14 and st["config"]["presets"]["openr1"]["preset"] == "openr1_math"
    assert read_stats(f"s3://{bucket}/run/decontaminate")["removed"] == 1
    assert read_stats(f"s3://{bucket}/run/dedup")["removed"] >= 1
    assert SECRET not in caplog.text  # every logger at DEBUG (botocore prints the key *id* in its own debug lines)
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("cotforge"))
    assert ours and "AKIATESTKEY" not in ours and SECRET not in ours
    # a broken object on S3 is quarantined with its byte offset, like a local file
    full = gzip.compress(_jsonl(_rows("openr1_math") * 400))
    with s.open(f"{bucket}/raw/cut.jsonl.gz", "wb") as f:
        f.write(full[: len(full) // 2])
    out = list(read_rows(InputSpec(f"s3://{bucket}/raw/cut.jsonl.gz")))
    assert isinstance(out[-1], Quarantined) and out[-1].origin.index == len(full) // 2
    assert out[-1].origin.file == f"s3://{bucket}/raw/cut.jsonl.gz"


def test_exclusive_create_on_s3_for_a_run_folder_lock(s3):
    """What a run-folder lock on an object store can build on: conditional create (If-None-Match)."""
    import fsspec

    _, bucket = s3
    with fsspec.open(f"s3://{bucket}/run/.lock", "xb") as f:
        f.write(b"owner-1")
    with pytest.raises(FileExistsError):
        with fsspec.open(f"s3://{bucket}/run/.lock", "xb") as f:
            f.write(b"owner-2")


# --------------------------------------------------------------------------- Hub layout


def _hub_repo(root: Path, rows_per_file: int = 4, files: int = 3, text_bytes: int = 20, test_files: int | None = None) -> Path:
    """A local dataset repository in the Hub's layout: README.md with `configs:` and data files."""
    (root / "data").mkdir(parents=True)
    (root / "extra").mkdir()
    k = 0
    for split, n_files in (("train", files), ("test", files if test_files is None else test_files)):
        for i in range(n_files):
            recs = [{"id": f"{split}{k + j}", "problem": f"{split} problem {k + j} " + os.urandom(text_bytes // 2).hex(),
                     "answer": str(k + j)} for j in range(rows_per_file)]
            k += rows_per_file
            pq.write_table(pa.Table.from_pylist(recs), root / "data" / f"{split}-{i:05d}-of-{n_files:05d}.parquet")
    pq.write_table(pa.Table.from_pylist([{"question": "extra q", "final_answer": "1"}]), root / "extra" / "x.parquet")
    (root / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path: data/train-*.parquet\n"
        "  - split: test\n    path: data/test-*.parquet\n- config_name: extra\n  data_files:\n  - split: train\n"
        "    path: extra/*.parquet\n---\n# a local dataset\n")
    return root


def test_hub_layout_config_split_and_data_files_streamed(tmp_path, monkeypatch):
    cache = tmp_path / "hf_cache"
    monkeypatch.setenv("HF_DATASETS_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    repo = _hub_repo(tmp_path / "org" / "name")
    test_rows = list(read_rows(InputSpec(f"hf:{repo}:test", "t"), strict=True))
    assert [r["id"] for r in test_rows] == [f"test{i}" for i in range(12, 24)]
    only = list(read_rows(InputSpec(f"hf:{repo}", "t", split="train",
                                    data_files={"train": "data/train-00001-of-00003.parquet"}), strict=True))
    assert [r["id"] for r in only] == ["train4", "train5", "train6", "train7"]
    extra = list(read_rows(InputSpec(f"hf:{repo}", "t", config_name="extra"), strict=True))
    assert [(r["prompt"], r["answer"]) for r in extra] == [("extra q", "1")]
    assert not list(cache.rglob("*.arrow"))  # streamed: nothing converted into the datasets cache


PEAK_SCRIPT = r"""
import json, resource, sys
from cotforge.curate.io.readers import InputSpec, read_rows
def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
n, warm = 0, None
for row in read_rows(InputSpec(sys.argv[1], "big", streaming=sys.argv[2] == "1"), strict=True):
    n += 1
    if n == 1000:
        warm = peak()  # the reader is set up (dataset builder, first file open): growth from here scales with data
print(json.dumps({"rows": n, "peak_growth_kb": peak() - warm, "peak_kb": peak(), "warm_kb": warm}))
"""


def _peak(repo: Path, cache: Path, streamed: bool) -> dict:
    env = {**os.environ, "HF_DATASETS_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    res = subprocess.run([sys.executable, "-c", PEAK_SCRIPT, f"hf:{repo}:train", "1" if streamed else "0"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    out["cached_mb"] = sum(f.stat().st_size for f in cache.rglob("*.arrow")) / 2**20
    return out


@pytest.mark.slow
def test_streamed_hub_input_does_not_materialise_the_dataset(tmp_path):
    """Streamed `hf:` reads of 3 and 9 Parquet files (3000 rows of ~1 kB each): the peak RSS is the same for
    3x the data and nothing is converted into the datasets cache; `streaming: false` converts the whole split
    first (the contrast that shows the check can fail)."""
    text, rows = 1000, 3000
    small = _hub_repo(tmp_path / "small", rows_per_file=rows, files=3, text_bytes=text, test_files=1)
    large = _hub_repo(tmp_path / "large", rows_per_file=rows, files=9, text_bytes=text, test_files=1)
    s, big = _peak(small, tmp_path / "c_small", True), _peak(large, tmp_path / "c_large", True)
    dl = _peak(small, tmp_path / "c_dl", False)
    assert (s["rows"], big["rows"], dl["rows"]) == (3 * rows, 9 * rows, 3 * rows)
    extra_mb = 6 * rows * text / 2**20
    print(f"hf: streamed peak RSS {s['peak_kb'] / 1024:.0f} MB for {3 * rows} rows, {big['peak_kb'] / 1024:.0f} MB "
          f"for {9 * rows} rows (+{extra_mb:.0f} MB of text), nothing cached; streaming=false: peak "
          f"{dl['peak_kb'] / 1024:.0f} MB, {dl['cached_mb']:.1f} MB written to the cache")
    assert s["cached_mb"] == 0 and big["cached_mb"] == 0 and dl["cached_mb"] > 0.5 * 3 * rows * text / 2**20
    assert (big["peak_kb"] - s["peak_kb"]) / 1024 < 0.25 * extra_mb


@pytest.mark.slow
def test_run_with_an_s3_run_folder(s3, tmp_path, monkeypatch):
    """`cotforge run RECIPE --run-dir s3://...` (the command line): the stages publish to S3 what a local run
    publishes, the run folder holds the manifest and summary, and a second invocation skips every stage
    (complete stages are found on S3); nothing is written to a local `s3:` folder."""
    import yaml
    from click.testing import CliRunner
    from engine_cases import make_data

    from cotforge.pipelines.cli.main import main

    s, bucket = s3
    data = make_data(tmp_path)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": "s3run", "executor": {"workers": 1, "rows_per_task": 40},
        "sources": [{"name": "longcot_math", "path": str(data / "longcot_math.jsonl"), "domain": "math"},
                    {"name": "code_tests", "path": str(data / "code_tests.jsonl"), "domain": "code"}],
        "stages": {"ingest": {}, "dedup": {}, "verify": {"verify_workers": 1}}}))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    remote = f"s3://{bucket}/runs/r1"
    first = CliRunner().invoke(main, ["run", str(recipe), "--run-dir", remote])
    assert first.exit_code == 0, first.output
    assert "3 stage(s) ran" in first.output and f"summary: {remote}/summary.md" in first.output
    local = CliRunner().invoke(main, ["run", str(recipe), "--run-dir", str(tmp_path / "local")])
    assert local.exit_code == 0, local.output
    for stage in ("ingest", "dedup", "verify"):
        for part in ("kept", "removed"):
            assert _table(f"{remote}/{stage}", part) == _table(str(tmp_path / "local" / stage), part), (stage, part)
    assert s.exists(f"{bucket}/runs/r1/manifest.json") and s.exists(f"{bucket}/runs/r1/summary.md")
    assert not s.exists(f"{bucket}/runs/r1/dedup/_work") and not s.exists(f"{bucket}/runs/r1/.cotforge.lock")
    again = CliRunner().invoke(main, ["run", str(recipe), "--run-dir", remote])
    assert again.exit_code == 0 and "0 stage(s) ran, 3 skipped" in again.output, again.output
    dry = CliRunner().invoke(main, ["run", str(recipe), "--run-dir", remote, "--dry-run"])
    assert dry.exit_code == 0 and f"run directory: {remote}" in dry.output and "[complete: will skip]" in dry.output
    assert list(cwd.iterdir()) == []
