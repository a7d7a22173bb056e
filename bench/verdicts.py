"""Verdict maps of two checkouts compared: the shared half of `bench.decontam.equiv` and `bench.dedup.equiv`."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def diff(ref: dict[str, list], got: dict[str, list], show: int = 10, by_item: tuple[str, ...] = ()) -> list[str]:
    """Differences between two verdict maps, as readable lines; keys in `by_item` hold lists compared item by
    item (e.g. a list of file digests, each line naming the file)."""
    lines = [f"only in reference: {i} {ref[i]}" for i in sorted(set(ref) - set(got))]
    lines += [f"only now: {i} {got[i]}" for i in sorted(set(got) - set(ref))]
    lines += [f"changed: {i} {ref[i]} -> {got[i]}" for i in sorted(set(ref) & set(got))
              if ref[i] != got[i] and i not in by_item]
    lines += [f"changed: {a} -> {b}" for k in by_item for a, b in zip(ref.get(k, []), got.get(k, []), strict=False)
              if a != b]
    return lines[:show] + ([f"... {len(lines) - show} more"] if len(lines) > show else [])


def report(name: str, got: dict[str, list], ref: dict[str, dict], by_item: tuple[str, ...] = ()) -> int:
    """Print whether corpus `name`'s verdicts equal the reference's (when it has them); the number of
    differences."""
    if name not in ref:
        return 0
    d = diff(ref[name], got, by_item=by_item)
    print(f"  {'IDENTICAL to the reference' if not d else 'DIFFERS from the reference:'}")
    for line in d:
        print("  " + line)
    return len(d)


def load_reference(against: str | None) -> dict[str, dict]:
    """Verdicts saved by `--save` (empty without `--against`)."""
    return json.loads(Path(against).read_text()) if against else {}


def save_and_exit(saved: dict[str, dict], save: str | None, bad: int) -> None:
    """Write this checkout's verdicts when asked; exit 1 when any corpus differed from the reference."""
    if save:
        Path(save).write_text(json.dumps(saved))
    sys.exit(1 if bad else 0)
