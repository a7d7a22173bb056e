"""One bench measurement in a fresh interpreter: run a bench module's child mode and read its `RESULT {json}`
line (fresh processes keep import, JIT and cache state of one measurement out of the next)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bench.paths import REPO


def child_result(args: list[str], label: str, timeout: float | None = None) -> dict:
    """`python -m *args` from the repository root, offline for the Hub; the JSON of its RESULT line. A child
    that prints none is a RuntimeError with `label` and the end of its stderr."""
    proc = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=REPO, timeout=timeout,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"{label} failed:\n{proc.stderr[-3000:]}")
    return json.loads(line[7:])
