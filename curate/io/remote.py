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

import dataclasses
import functools
import logging
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from cotforge.curate.io import fs
from cotforge.curate.io.lock import RunLock

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
    """Decorator for a stage's `run(cfg, ctx)`: a remote `ctx.out_dir` (an fsspec URL) runs into a local
    staging folder that is published to it afterwards, under a lock on the remote folder; a local folder runs
    as it is. The context is copied, never changed: the caller's `ctx.out_dir` stays the URL."""

    @functools.wraps(fn)
    def wrapper(cfg: Any, ctx: Any) -> Any:
        remote = str(ctx.out_dir)
        if not fs.is_remote(remote):
            return fn(cfg, ctx)
        root = os.environ.get("COTFORGE_STAGING_DIR") or None
        # one writer per remote stage folder: a conditional create of OUT/.cotforge.lock (If-None-Match on S3)
        with RunLock(remote, what="stage folder"), tempfile.TemporaryDirectory(prefix="cotforge-stage-", dir=root) as tmp:
            local = Path(tmp) / "out"
            local.mkdir()
            stats = fn(cfg, dataclasses.replace(ctx, out_dir=str(local)))
            publish(local, remote)
        if isinstance(stats, dict):
            stats["published_to"] = fs.shown(remote)
        return stats

    return wrapper  # type: ignore[return-value]
