"""Stage outputs on remote folders (`-o s3://bucket/run/dedup`): run the stage into a local staging folder,
then publish it.

Stages build their work folders (datatrove task shards, signatures, indexes) next to their output, which
wants a local disk; so a stage whose `out_dir` is an fsspec URL runs into a temporary folder
(`COTFORGE_STAGING_DIR`, default the system temp dir) and `publish` uploads its outputs (`kept/`, `removed/`,
reports, cards) with `stats.json` last: a reader that waits for stats.json never sees a half-published stage.
An older output at the URL is replaced. Work folders (`_work/`, `.partial-*`) are not uploaded.

Limits: publishing is not atomic across files on object stores (stats.json last is the completion signal);
resuming inside a stage is not supported anywhere (a stage re-runs whole, as locally).
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from cotforge.curate.io import fs

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])
SKIP = ("_work", ".partial-", ".cotforge.lock", "_STARTED.json")
LAST = ("stats.json",)


def publish(local: Path, remote: str) -> list[str]:
    """Replace the stage folder at `remote` with the contents of `local` (minus work folders and the lock),
    stats.json last."""
    t0 = time.time()
    for part in ("kept", "removed", "stats.json"):
        target = fs.join(remote, part)
        if fs.exists(target):
            fs.remove_tree(target)
    out = fs.upload_dir(local, remote, last=LAST, skip=SKIP)
    log.info("published %d files to %s in %.1fs", len(out), fs.shown(remote), time.time() - t0)
    return out


def remote_output(fn: F) -> F:
    """Decorator for `run_X(specs, out_dir, ...)` stage functions: a remote `out_dir` runs into a local
    staging folder that is published to it afterwards; local folders run as before."""
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = sig.bind_partial(*args, **kwargs)
        out = bound.arguments.get("out_dir")
        if out is None or not fs.is_remote(str(out)):
            return fn(*args, **kwargs)
        remote = str(out)
        root = os.environ.get("COTFORGE_STAGING_DIR") or None
        from cotforge.curate.executors.lock import RunLock

        # one writer per remote stage folder: a conditional create of OUT/.cotforge.lock (If-None-Match on S3)
        with RunLock(remote, what="stage folder"), tempfile.TemporaryDirectory(prefix="cotforge-stage-", dir=root) as tmp:
            local = Path(tmp) / "out"
            local.mkdir()
            bound.arguments["out_dir"] = local
            stats = fn(*bound.args, **bound.kwargs)
            publish(local, remote)
        if isinstance(stats, dict):
            stats["published_to"] = fs.shown(remote)
        return stats

    return wrapper  # type: ignore[return-value]
