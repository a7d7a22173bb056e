"""The built decontamination index, cached on disk: a second run over the same benchmarks and config copies
it instead of normalising and hashing every benchmark item again.

Key: a hash of the benchmark items (name, id, problem, solution), the whole `DecontamConfig`, and the source of
the code that builds an index (curate/decontam's index, canon, coarse, config, lsh, semantic modules and all of
curate/text/), so a changed normaliser or rule never reuses an old index. Entries live under
`<cotforge cache folder>/decontam_index/<key>/` (`unitables.cache_dir`: $COTFORGE_CACHE_DIR wins), are
written to a temporary folder and renamed into place (complete or absent), and the newest KEEP entries are
kept. A cache folder that cannot be written only means building every time.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from pathlib import Path

from cotforge.curate.core.benchmarks import BenchmarkItem
from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.decontam.index import DecontamIndex, build_index

log = logging.getLogger(__name__)

KEEP = 16  # cached indexes kept (the newest used)
CODE = ("decontam/index.py", "decontam/canon.py", "decontam/coarse.py", "decontam/config.py", "decontam/lsh.py",
        "decontam/semantic.py", "text")


def _code_digest() -> bytes:
    """sha256 over the source files that decide an index's content."""
    root = Path(__file__).resolve().parents[1]  # curate/
    h = hashlib.sha256()
    for name in CODE:
        p = root / name
        for f in sorted(p.glob("*.py")) if p.is_dir() else [p]:
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.digest()


def index_key(benchmarks: dict[str, list[BenchmarkItem]], cfg: DecontamConfig) -> str:
    """The cache key of the index `build_index(benchmarks, cfg)` would build."""
    h = hashlib.sha256(_code_digest())
    h.update(json.dumps(cfg.to_dict(), sort_keys=True, default=str).encode())
    for name, items in benchmarks.items():
        h.update(b"\1" + name.encode())
        for it in items:
            for text in (it.id, it.problem, it.solution or ""):
                h.update(b"\0" + text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:32]


def _place(src: Path, dst: Path) -> None:
    """Copy the folder `src` to `dst` (copies, not links: a file changed in place on either side must not
    change the other)."""
    shutil.copytree(src, dst)


def _prune(root: Path, keep: int = KEEP) -> None:
    """Drop all but the `keep` most recently used entries (and temporary folders over an hour old)."""
    now = time.time()
    entries = []
    for d in root.iterdir():
        if ".tmp-" in d.name:
            if now - d.stat().st_mtime > 3600:
                shutil.rmtree(d, ignore_errors=True)
        elif d.is_dir():
            entries.append((d.stat().st_mtime, d))
    for _, d in sorted(entries, reverse=True)[keep:]:
        shutil.rmtree(d, ignore_errors=True)


def cached_build(benchmarks: dict[str, list[BenchmarkItem]], cfg: DecontamConfig, out_dir: Path,
                 root: Path | None = None) -> tuple[dict, bool]:
    """Put the index of `benchmarks` + `cfg` into `out_dir` (absent before): copied from the cache when it was
    built before, else built and stored. Returns (the index's meta, whether it came from the cache)."""
    from cotforge.curate.text.unitables import cache_dir

    root = root or cache_dir() / "decontam_index"
    key = index_key(benchmarks, cfg)
    entry = root / key
    if all((entry / f).is_file() for f in ("entries.json", *(f"{a}.npy" for a in DecontamIndex.ARRAYS))):
        try:
            _place(entry, out_dir)
            os.utime(entry)
            log.info("decontam index: reused the cached build %s", entry)
            return json.loads((out_dir / "entries.json").read_text()), True
        except (OSError, ValueError) as e:  # a damaged entry: build again (and replace it below)
            log.warning("decontam index: cached build %s unusable (%s); building", entry, e)
            shutil.rmtree(out_dir, ignore_errors=True)
            shutil.rmtree(entry, ignore_errors=True)
    meta = build_index(benchmarks, cfg, out_dir)
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = root / f"{key}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        _place(out_dir, tmp)
        try:
            tmp.rename(entry)
        except OSError:  # another process stored the same key meanwhile
            shutil.rmtree(tmp, ignore_errors=True)
        _prune(root)
    except OSError as e:
        log.info("decontam index: not cached (%s)", e)
    return meta, False
