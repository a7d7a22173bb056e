"""Unicode tables the batch normaliser (`normalize.normalize_arrow`) hands to the Rust regex engine, computed
once per Python / Unicode version and cached on disk.

Each table is a scan of all 1.1M code points through Python's own `unicodedata` / `str.isalnum` (so the
batch path agrees with `normalize`): about 6 s of CPU per process, paid by the stage's main process and by
every worker (bench/decontam/measure.py: a sixth of a 200k-row run). The JSON cache file is named by the Python
version, `unicodedata.unidata_version` and a digest of the computing function's code, so a new interpreter,
Unicode version or table rule computes it afresh; it is written atomically (temporary file + rename) and an
unreadable or unwritable cache folder only means computing it again. Folder: $COTFORGE_CACHE_DIR, else
$XDG_CACHE_HOME/cotforge, else ~/.cache/cotforge.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
import unicodedata
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def cache_dir() -> Path:
    """The cotforge cache folder (these tables, the kernel's tables and machine code, models unpacked from wheels,
    cached embeddings)."""
    if os.environ.get("COTFORGE_CACHE_DIR"):
        return Path(os.environ["COTFORGE_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cotforge"


def _disk_cached(fn: Callable[..., Any], *args: int) -> Any:
    """fn(*args), read from / written to the cache folder (JSON; tuples come back as lists)."""
    code = fn.__code__
    digest = hashlib.sha256(code.co_code + repr(code.co_consts).encode()).hexdigest()[:12]
    name = (f"unitables-{fn.__name__}{'-' + '-'.join(map(str, args)) if args else ''}-py{sys.version_info[0]}"
            f"{sys.version_info[1]}-ucd{unicodedata.unidata_version}-{digest}.json")
    path = cache_dir() / name
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    value = fn(*args)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".unitables-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(value, fh, ensure_ascii=True)
        os.replace(tmp, path)
    except OSError as e:
        log.debug("unitables: cache not written (%s)", e)
    return value


def _ranges_class(ranges: list[list[int]]) -> str:
    return "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges)


def _compute_alnum_class(first: int) -> str:
    ranges: list[list[int]] = []
    for i in range(first, 0x110000):
        if chr(i).isalnum():
            if ranges and ranges[-1][1] == i - 1:
                ranges[-1][1] = i
            else:
                ranges.append([i, i])
    return _ranges_class(ranges)


def _compute_unknown_class() -> str:
    ranges: list[list[int]] = []
    for i in range(0x110000):
        if not 0xD800 <= i < 0xE000 and unicodedata.category(chr(i)) == "Cn":
            if ranges and ranges[-1][1] == i - 1:
                ranges[-1][1] = i
            else:
                ranges.append([i, i])
    return "[" + _ranges_class(ranges) + "]"


def _compute_nfkc_tables() -> list:
    ascii_map: dict[str, str] = {}
    ranges: list[list[int]] = []
    for i in range(0x80, 0x110000):
        if 0xD800 <= i < 0xE000:
            continue
        c = chr(i)
        if unicodedata.is_normalized("NFKC", c) and not unicodedata.combining(c) and \
                not unicodedata.category(c).startswith("M"):
            continue
        n = unicodedata.normalize("NFKC", c)
        if n.isascii() and not unicodedata.combining(c) and not unicodedata.category(c).startswith("M"):
            ascii_map[c] = n
        elif ranges and ranges[-1][1] == i - 1:
            ranges[-1][1] = i
        else:
            ranges.append([i, i])
    return [ascii_map, "[" + _ranges_class(ranges) + "]"]


@lru_cache(maxsize=2)
def alnum_class(first: int = 0) -> str:
    """A regex class body of every character from `first` on that Python's `str.isalnum` accepts (ranges),
    for the Rust regex."""
    return _disk_cached(_compute_alnum_class, first)


@lru_cache(maxsize=1)
def unknown_class() -> str:
    """Characters Python's Unicode tables leave unassigned (newer than its Unicode version), surrogates aside."""
    return _disk_cached(_compute_unknown_class)


@lru_cache(maxsize=1)
def nfkc_tables() -> tuple[dict[str, str], str]:
    """Characters whose NFKC is ASCII whatever surrounds them (not combining: "…" -> "...", no-break space,
    "ﬁ", full-width forms), and a class of every other character NFKC may change or compose (quick check not
    Yes, or combining). A text holding none of the latter is NFKC once the former are replaced."""
    ascii_map, cls = _disk_cached(_compute_nfkc_tables)
    return dict(ascii_map), cls
