"""`python bench/dedup_fresh2.py --eval`: cotforge's current problem-dedup decision on the fresh2 set, the
way bench/dedup.py measures its sets (same code path: PairJudge pairwise on MinHash sketches, and every
prompt through run_dedup end to end; response groups through run_dedup), with the default DedupConfig.
Prints precision / recall overall and per kind and the negatives merged per kind; individual pairs only
with --show-misses."""

from __future__ import annotations

import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dedup import measure_set  # noqa: E402
from labelled_sets import LabelledSet  # noqa: E402


def _table(pairs: list, pairwise: list[bool], e2e: list[bool]) -> None:
    """Per kind: pairs, then for duplicates the recall, for negatives how many were merged (pairwise, e2e)."""
    rows: dict[tuple[bool, str], list[int]] = collections.defaultdict(lambda: [0, 0, 0])
    for p, pw, ee in zip(pairs, pairwise, e2e, strict=True):
        r = rows[(not p.duplicate, p.kind)]
        r[0] += 1
        r[1] += pw
        r[2] += ee
    print(f"    {'kind':28s} {'label':7s} {'pairs':>5s}  {'pairwise':>22s}  {'end-to-end':>22s}")
    for (neg, kind), (n, pw, ee) in sorted(rows.items()):
        if neg:
            print(
                f"    {kind:28s} not-dup {n:5d}  merged {pw:4d} (apart {1 - pw / n:.3f})  "
                f"merged {ee:4d} (apart {1 - ee / n:.3f})"
            )
        else:
            print(
                f"    {kind:28s} dup     {n:5d}  recall {pw / n:.3f} ({pw:4d})     recall {ee / n:.3f} ({ee:4d})"
            )


def _typed(overrides: dict[str, str]) -> dict[str, object]:
    """--set values as the DedupConfig field types want them: true/false for booleans, numbers for numbers."""
    from dataclasses import fields

    from cotforge.curate.dedup.config import DedupConfig

    kinds = {f.name: f.default for f in fields(DedupConfig)}
    out: dict[str, object] = {}
    for k, v in overrides.items():
        d = kinds.get(k)
        if isinstance(d, bool):
            if v.lower() not in ("true", "false"):
                raise ValueError(f"--set {k}: true or false (got {v!r})")
            out[k] = v.lower() == "true"
        elif isinstance(d, int | float):
            out[k] = type(d)(v)
        else:
            out[k] = v
    return out


def evaluate(ls: LabelledSet, show_misses: bool = False, overrides: dict[str, str] | None = None) -> None:
    """Measure DedupConfig (defaults, or with `overrides` such as word_relations=synonyms) on the set (pairwise
    and end to end) and print the figures."""
    from cotforge.curate.dedup.config import DedupConfig
    from cotforge.curate.dedup.stage import PairJudge

    cfg = DedupConfig(**_typed(overrides or {}))
    judge = PairJudge(cfg)
    verdicts, e2e = measure_set(ls, cfg, judge, f"fresh2 set, DedupConfig({overrides or 'defaults'})")
    pairwise = [v is None for v in verdicts]
    _table(ls.pairs, pairwise, e2e)
    if show_misses:
        for p, v, ee in zip(ls.pairs, verdicts, e2e, strict=True):
            if (v is None) != p.duplicate or ee != p.duplicate:
                print(
                    f"--- {p.kind} dup={p.duplicate} pairwise={v or 'merged'} e2e_merged={ee}\n"
                    f"A: {p.a[:400]!r}\nB: {p.b[:400]!r}"
                )
