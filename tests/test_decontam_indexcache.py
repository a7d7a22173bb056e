"""The on-disk cache of built decontamination indexes: a hit gives the same files as a build, any change of
benchmark text, config or index code misses, a damaged or unwritable cache only means building."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from engine_cases import make_data

from cotforge.curate.core.benchmarks import BenchmarkItem
from cotforge.curate.decontam import indexcache
from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.decontam.index import build_index
from cotforge.curate.engine import ExecutorConfig
from cotforge.curate.io.readers import InputSpec
from cotforge.pipelines.stages import run_stage

PROBLEMS = ["Find the number of ordered pairs of integers a and b such that a squared plus b squared is 25.",
            "A bag holds 5 red and 7 blue marbles; two are drawn without replacement. Find the probability both "
            "are red.", "Simplify the square root of 242."]


def _bench(problems=PROBLEMS) -> dict[str, list[BenchmarkItem]]:
    return {"synth": [BenchmarkItem(f"s{i}", p, str(i), None, None, {}, "synth") for i, p in enumerate(problems)]}


def _files(d: Path) -> dict[str, bytes]:
    return {str(f.relative_to(d)): f.read_bytes() for f in sorted(d.rglob("*")) if f.is_file()}


def test_a_hit_copies_what_a_build_writes(tmp_path):
    cfg = DecontamConfig(benchmarks=["synth"])
    root = tmp_path / "cache"
    m1, hit1 = indexcache.cached_build(_bench(), cfg, tmp_path / "a", root)
    m2, hit2 = indexcache.cached_build(_bench(), cfg, tmp_path / "b", root)
    build_index(_bench(), cfg, tmp_path / "plain")
    assert (hit1, hit2) == (False, True)
    assert _files(tmp_path / "a") == _files(tmp_path / "b") == _files(tmp_path / "plain")
    assert m2 == json.loads(json.dumps(m1)) and m2["keys"] > 0
    # the cache holds copies: a file changed in place in an output does not reach the cache
    (tmp_path / "b" / "keys.npy").write_bytes(b"changed")
    indexcache.cached_build(_bench(), cfg, tmp_path / "c", root)
    assert _files(tmp_path / "c") == _files(tmp_path / "plain")


@pytest.mark.parametrize("change", ["text", "solution", "config", "code"])
def test_any_change_misses(tmp_path, monkeypatch, change):
    cfg = DecontamConfig(benchmarks=["synth"])
    root = tmp_path / "cache"
    indexcache.cached_build(_bench(), cfg, tmp_path / "a", root)
    bench = _bench()
    if change == "text":
        bench = _bench([PROBLEMS[0].replace("25", "26"), *PROBLEMS[1:]])
    elif change == "solution":
        bench["synth"][0].solution = "a worked solution"
    elif change == "config":
        cfg = replace(cfg, ngram=7)
    else:
        real = indexcache._code_digest()
        monkeypatch.setattr(indexcache, "_code_digest", lambda: real + b"edited normaliser")
    _, hit = indexcache.cached_build(bench, cfg, tmp_path / "b", root)
    assert not hit
    assert len(list(root.iterdir())) == 2


def test_damaged_or_unwritable_cache_builds(tmp_path):
    cfg = DecontamConfig(benchmarks=["synth"])
    root = tmp_path / "cache"
    indexcache.cached_build(_bench(), cfg, tmp_path / "a", root)
    (next(root.iterdir()) / "keys.npy").unlink()  # an entry someone damaged
    _, hit = indexcache.cached_build(_bench(), cfg, tmp_path / "b", root)
    assert not hit and _files(tmp_path / "b") == _files(tmp_path / "a")
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    _, hit = indexcache.cached_build(_bench(), cfg, tmp_path / "c", blocker / "sub")
    assert not hit and _files(tmp_path / "c") == _files(tmp_path / "a")


def test_prune_keeps_the_newest(tmp_path):
    root = tmp_path / "cache"
    for i in range(5):
        (root / f"k{i}").mkdir(parents=True)
        os.utime(root / f"k{i}", (1000 + i, 1000 + i))
    indexcache._prune(root, keep=2)
    assert sorted(p.name for p in root.iterdir()) == ["k3", "k4"]


def test_second_stage_run_uses_the_cache_and_publishes_the_same(tmp_path, monkeypatch):
    monkeypatch.setenv("COTFORGE_CACHE_DIR", str(tmp_path / "cotforge_cache"))
    data = make_data(tmp_path)
    cfg = DecontamConfig(benchmarks=["demo_olympiad"], benchmarks_dir=str(data / "benchmarks"),
                         registry_yaml=str(data / "benchmarks" / "registry.yaml"))
    specs = [InputSpec(str(data / "longcot_math.jsonl"), "longcot_math")]
    s1 = run_stage("decontaminate", specs, tmp_path / "a", cfg, ExecutorConfig(workers=1))
    s2 = run_stage("decontaminate", specs, tmp_path / "b", cfg, ExecutorConfig(workers=1))
    assert (s1["timings"]["index_cached"], s2["timings"]["index_cached"]) == (False, True)
    assert s1["removed"] == s2["removed"] > 0
    for part in ("kept", "removed"):
        assert _files(tmp_path / "a" / part) == _files(tmp_path / "b" / part)


def test_load_index_once_per_process_and_afresh_when_the_folder_changes(tmp_path):
    """Ranks of one worker process share the loaded index; another index written to the same folder is
    loaded again (the key is the content of entries.json, not the path)."""
    from cotforge.curate.decontam.index import load_index

    cfg = DecontamConfig(benchmarks=["synth"])
    build_index(_bench(), cfg, tmp_path / "i")
    a = load_index(tmp_path / "i")
    assert load_index(tmp_path / "i") is a
    import shutil

    shutil.rmtree(tmp_path / "i")
    build_index(_bench(PROBLEMS[:2]), cfg, tmp_path / "i")
    b = load_index(tmp_path / "i")
    assert b is not a and len(b.entries) == 2 and len(a.entries) == 3
