"""Where data lives: local paths and fsspec URLs (`s3://`, `gs://`, `hf://`, `file://`, `memory://`), with globs.

Every reader and writer goes through here, so a path and a URL behave the same. Filesystems are fsspec's own
(datatrove's `DataFolder` for listing folders); credentials come from the usual environment of each
filesystem (AWS_* variables / ~/.aws for s3fs, GOOGLE_APPLICATION_CREDENTIALS for gcsfs, HF_TOKEN for the
Hub) and never from configs. `shown()` strips anything secret-looking from a URL before it is logged or
written into stats (user:password@ parts and signed-URL query strings).
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import IO

import fsspec
from fsspec.core import url_to_fs

log = logging.getLogger(__name__)

_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
_USERINFO = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@]*@")
GLOB_CHARS = ("*", "?", "[")
# filesystems fsspec ships without an extra package; the others name the package to install
_NEEDS = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "abfs": "adlfs", "az": "adlfs"}


class StorageError(Exception):
    """A path or URL that cannot be used (unknown protocol, missing filesystem package, no access)."""


def is_url(path: str) -> bool:
    """True for `proto://...` (including file://); `hf:org/name` dataset ids are not URLs."""
    return bool(_URL.match(path))


def is_remote(path: str) -> bool:
    """True for a URL whose filesystem is not the local one (file:// and plain paths are local)."""
    return is_url(path) and not path.startswith(("file://", "local://"))


def has_glob(path: str) -> bool:
    return any(c in path for c in GLOB_CHARS)


def shown(path: str) -> str:
    """`path` safe to log: no `user:secret@` part, no query string (signed URLs carry keys there)."""
    out = _USERINFO.sub(r"\1", path)
    return out.split("?", 1)[0] if is_url(out) else out


def filesystem(path: str):
    """(fsspec filesystem, path inside it) for a path or URL; a missing filesystem package is a clear error."""
    try:
        return url_to_fs(path)
    except ImportError as e:
        proto = path.split("://", 1)[0]
        pkg = _NEEDS.get(proto, "the fsspec implementation for it")
        raise StorageError(f"{shown(path)}: the {proto}:// filesystem needs {pkg} (pip install {pkg})") from e
    except ValueError as e:  # fsspec: "Protocol not known"
        raise StorageError(f"{shown(path)}: {e}") from e


def local_path(path: str) -> str | None:
    """The local filesystem path of `path` (plain or file://), else None."""
    if not is_url(path):
        return path
    if path.startswith("file://"):
        return path[len("file://"):]
    return None


def exists(path: str) -> bool:
    lp = local_path(path)
    if lp is not None:
        return os.path.exists(lp)
    fs, p = filesystem(path)
    return fs.exists(p)


def isdir(path: str) -> bool:
    lp = local_path(path)
    if lp is not None:
        return os.path.isdir(lp)
    fs, p = filesystem(path)
    return fs.isdir(p)


def join(base: str, *parts: str) -> str:
    """`base/part/...` for paths and URLs alike."""
    if local_path(base) is not None and not base.startswith("file://"):
        return str(Path(base, *parts))
    return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts)])


def _unstrip(template: str, fs, p: str) -> str:
    """A path returned by `fs` as a URL in the form the user gave (keep the protocol)."""
    if local_path(template) is not None and not template.startswith("file://"):
        return p
    return fs.unstrip_protocol(p)


def expand(path: str) -> list[str]:
    """Files a glob matches (sorted), as paths/URLs in the caller's form; no glob: [path]."""
    if not has_glob(path):
        return [path]
    lp = local_path(path)
    if lp is not None and not path.startswith("file://"):
        import glob

        return sorted(p for p in glob.glob(lp, recursive=True) if os.path.isfile(p))
    fs, p = filesystem(path)
    return sorted(_unstrip(path, fs, f) for f in fs.glob(p) if not fs.isdir(f))


def list_files(folder: str, suffixes: tuple[str, ...] | None = None) -> list[str]:
    """Every file under `folder` (recursive, sorted), optionally only those ending in `suffixes`.

    Listing goes through datatrove's DataFolder, the same object its readers shard files with."""
    from datatrove.io import get_datafolder

    lp = local_path(folder)
    if lp is not None and not folder.startswith("file://"):
        files = sorted(str(f) for f in Path(lp).rglob("*") if f.is_file())
    else:
        df = get_datafolder(folder)
        files = [join(folder, f) for f in df.list_files(recursive=True)]
    files = [f for f in files if not Path(f).name.startswith((".", "_"))]
    if suffixes:
        files = [f for f in files if f.lower().endswith(suffixes)]
    return sorted(files)


def open_binary(path: str) -> IO[bytes]:
    """A binary read handle (no decompression: the readers own that, to report break offsets)."""
    lp = local_path(path)
    if lp is not None:
        return open(lp, "rb")
    fs, p = filesystem(path)
    return fs.open(p, "rb")


def size(path: str) -> int | None:
    try:
        lp = local_path(path)
        if lp is not None:
            return os.path.getsize(lp)
        fs, p = filesystem(path)
        return fs.size(p)
    except (OSError, StorageError):
        return None


def _skipped(rel: tuple[str, ...], skip: tuple[str, ...], depth: int | None) -> bool:
    """Whether a relative path has a part (the first `depth` parts; all when None) starting with one of `skip`."""
    return any(part.startswith(skip) for part in rel[:depth]) if skip else False


def upload_dir(local: str | Path, remote: str, *, last: tuple[str, ...] = (), skip: tuple[str, ...] = (),
               skip_depth: int | None = 1) -> list[str]:
    """Copy every file under `local` to the folder `remote` (keeping relative paths), except entries whose name
    starts with one of `skip` (top-level ones by default; at any depth with `skip_depth=None`); files whose
    relative path or name is in `last` go after all others, so a reader that waits for them sees a complete
    folder. Returns the remote paths."""
    local = Path(local)
    fs, base = filesystem(remote)
    files = sorted(f for f in local.rglob("*")
                   if f.is_file() and not _skipped(f.relative_to(local).parts, skip, skip_depth))
    files.sort(key=lambda f: f.relative_to(local).as_posix() in last or f.name in last)
    out = []
    for f in files:
        rel = f.relative_to(local).as_posix()
        dst = f"{base.rstrip('/')}/{rel}"
        fs.put_file(str(f), dst)
        out.append(_unstrip(remote, fs, dst))
    return out


def download_dir(remote: str, local: str | Path, *, skip: tuple[str, ...] = ()) -> list[Path]:
    """Copy every file under the folder `remote` into `local` (keeping relative paths), except those with a
    path part starting with one of `skip`. Returns the local paths."""
    fs, base = filesystem(remote)
    base = base.rstrip("/")
    out = []
    for p in sorted(fs.find(base)):
        rel = p[len(base):].lstrip("/")
        if not rel or _skipped(tuple(rel.split("/")), skip, None):
            continue
        dst = Path(local) / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        fs.get_file(p, str(dst))
        out.append(dst)
    return out


def remove_tree(remote: str) -> None:
    """Delete a remote folder if it exists (an earlier, outdated stage output)."""
    fs, p = filesystem(remote)
    if fs.exists(p):
        fs.rm(p, recursive=True)


def open_text(path: str, mode: str = "rt") -> IO[str]:
    """Text handle for small files (stats.json, reports) on any filesystem."""
    return fsspec.open(path, mode, encoding="utf-8").open()
