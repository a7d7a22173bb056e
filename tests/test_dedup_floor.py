"""bench.dedup.floor (run as a command, as every bench module is): its levels run with 1 and 2 processes, and the
work it times is the stage's (signatures and band pairs equal to the signature and bucket steps' on the same rows)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_floor_levels_run_and_sign_as_the_stage() -> None:
    run = subprocess.run([sys.executable, "-m", "bench.dedup.floor", "--check", "400"], cwd=REPO, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.stdout.startswith("OK: 400 rows"), run.stdout
