"""Where the bench finds the repository and the shared real data (../shared/data beside the checkout)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECORDS = Path(__file__).resolve().parent / "records"


def shared_data_dir() -> Path:
    """../shared/data beside the checkout (main checkout) or two levels up (a worktree), else
    $COTFORGE_SHARED_DATA, else ../shared/data (which may not exist: callers say what they need)."""
    for p in (REPO.parent / "shared" / "data", REPO.parent.parent / "shared" / "data",
              Path(os.environ.get("COTFORGE_SHARED_DATA", "") or "/nonexistent")):
        if p.is_dir():
            return p
    return REPO.parent / "shared" / "data"


SHARED = shared_data_dir()
