"""The frozen labelled sets: every round's set as one row of data, rebuilt and checked against its recorded digest.

    python -m bench.frozen --check                    # rebuild every set, compare digests (exit 1 on a difference)
    python -m bench.frozen --only dedup_fresh2        # one set: counts per part and kind, and the digest check
    python -m bench.frozen --check-exclusions         # the fresh2 exclusion list rebuilt from the earlier sets
    python -m bench.frozen --write NAME               # record a NEW set's digest (once, before anyone measures it)

A frozen set is a labelled set whose (held-out part's) SHA-256 was recorded before any rule was tuned on it, so
a measurement on it is a measurement on data the rules never saw, for as long as the digest still matches.
Each row of FROZEN_SETS names the builder, the round's arguments (seed, sizes, word pool, generated kinds,
templates), the part whose digest is recorded, the earlier sets the round leaves out, and where its digest is
recorded (bench/records/*.sha256, or a key of bench/records/decontam_heldout.json). A new round is a new row
(and, when it needs them, new pools or templates as data), never a copy of a builder.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.paths import RECORDS, SHARED

log = logging.getLogger("bench.frozen")

# Generated kinds of the first variant family (bench/dedup/variants.py `make_variant`): the labelled set's
# tune / held parts and the fresh set.
EDIT_POSITIVE = ("synonym_verb", "synonym_noun", "synonym_quantifier", "synonym_adjective", "wrapper_unseen_before",
                 "wrapper_unseen_after", "reformat", "combo_reformat_synonym", "combo_wrapper_synonym",
                 "combo_wrapper_reformat_synonym", "wrapper_builtin", "near_copy_small")
EDIT_NEGATIVE = ("number_changed", "numbers_swapped", "question_changed", "object_changed", "name_changed",
                 "variable_changed")
# Generated kinds of the second family (`reworded_variants`): the fresh2 set. Number edits and name swaps use
# math bases only (a changed constraint or example in a code statement is not clearly another problem).
REWORDED_POSITIVE = ("synonym_verb", "synonym_noun", "synonym_quantifier", "synonym_adjective", "wrapper_before",
                     "wrapper_after", "reformat", "combo_reformat_synonym", "combo_wrapper_synonym",
                     "combo_two_synonyms")
REWORDED_NEGATIVE = ("number_changed", "numbers_swapped", "object_changed", "question_changed", "name_changed",
                     "combo_question_synonym", "combo_object_wrapper", "combo_number_reformat")
REWORDED_MATH_ONLY = ("number_changed", "numbers_swapped", "combo_number_reformat", "name_changed")


@dataclass(frozen=True)
class Record:
    """Where a set's digest is recorded: the first word of a bench/records/*.sha256 file, or the `sha256` of
    `key` in a bench/records/*.json file."""

    file: str
    key: str | None = None

    @property
    def path(self) -> Path:
        return RECORDS / self.file

    def read(self) -> str | None:
        """The recorded digest (None when nothing is recorded yet)."""
        if not self.path.exists():
            return None
        if self.key is None:
            return self.path.read_text().split()[0]
        return json.loads(self.path.read_text()).get(self.key, {}).get("sha256")

    def write(self, digest: str, note: str) -> None:
        """Record `digest` once; a recorded digest is never overwritten (the set would no longer be held out)."""
        if self.read() is not None:
            raise SystemExit(f"{self.path} already records {self.key or 'a digest'}: a frozen set is recorded once")
        if self.key is None:
            self.path.write_text(f"{digest}  {note}\n")
            return
        data = json.loads(self.path.read_text()) if self.path.exists() else {}
        data[self.key] = {"sha256": digest, "role": note}
        self.path.write_text(json.dumps(data, indent=1, ensure_ascii=True) + "\n")


@dataclass(frozen=True)
class FrozenSet:
    """One round's labelled set: `builder` ("module:function") called with the shared data folder and `args`
    (and, for rounds that leave earlier sets' items out, `earlier=` the built sets named in `after`).

    Dedup sets build a `LabelledSet` (digest of the part `part`, or of the whole set); decontamination sets
    build `(benchmarks, examples)` (digest of the examples whose split is `heldout`)."""

    name: str
    area: str
    builder: str
    args: Mapping[str, Any]
    record: Record
    role: str
    part: str | None = None
    after: tuple[str, ...] = ()

    def build(self, shared: str | Path = SHARED, cache: dict[str, Any] | None = None, **overrides: Any) -> Any:
        """The set, built from `shared` with the round's arguments (`overrides` replace some: such a set is
        not the frozen one, and is never cached)."""
        cache = {} if cache is None else cache
        if not overrides and self.name in cache:
            return cache[self.name]
        module, func = self.builder.split(":")
        kwargs: dict[str, Any] = {**self.args, **overrides}
        if self.after:
            kwargs["earlier"] = [FROZEN[n].build(shared, cache) for n in self.after]
        built = getattr(importlib.import_module(module), func)(Path(shared), **kwargs)
        if not overrides:
            cache[self.name] = built
        return built

    def digest(self, built: Any) -> str:
        """The digest that is recorded for this set."""
        if self.area == "dedup":
            return (built.part(self.part) if self.part else built).digest()
        from bench.decontam.forms import heldout_digest

        return heldout_digest(built[1])

    def counts(self, built: Any) -> dict[str, dict[str, int]]:
        """Examples per part (or split) and kind: what a round's set holds, without printing any example."""
        if self.area == "dedup":
            from bench.dedup.labelled import summary

            return {p: dict(sorted(k.items())) for p, k in sorted(summary(built).items())}
        out: dict[str, Counter] = {}
        for e in built[1]:
            out.setdefault(getattr(e, "split", "all"), Counter())[f"{e.kind}:{e.label}"] += 1
        return {s: dict(sorted(c.items())) for s, c in sorted(out.items())}


_DECONTAM_JSON = "decontam_heldout.json"
FROZEN_SETS: tuple[FrozenSet, ...] = (
    FrozenSet("dedup_heldout", "dedup", "bench.dedup.labelled:build_labelled_set",
              {"n_per_kind": 150, "seed": 0, "positive": EDIT_POSITIVE, "negative": EDIT_NEGATIVE},
              Record("dedup_heldout.sha256"), part="held",
              role="the labelled set's held-out part (round 1; its misses were read after round 1)"),
    FrozenSet("dedup_fresh", "dedup", "bench.dedup.fresh:build_fresh_set",
              {"n_per_kind": 120, "seed": 0, "pool": "fresh", "positive": EDIT_POSITIVE, "negative": EDIT_NEGATIVE},
              Record("dedup_fresh.sha256"), role="fresh held-out set (recorded before round 2 of tuning)"),
    FrozenSet("dedup_fresh2", "dedup", "bench.dedup.fresh:build_fresh2_set",
              {"n_per_kind": 120, "seed": 2, "pool": "fresh2", "positive": REWORDED_POSITIVE,
               "negative": REWORDED_NEGATIVE, "math_only": REWORDED_MATH_ONLY},
              Record("dedup_fresh2.sha256"), role="second fresh held-out set (pools written without the rules)"),
    FrozenSet("dedup_code", "dedup", "bench.dedup.code_set:build_code_set", {},
              Record("dedup_code_heldout.sha256"), part="held",
              role="real code pairs' held-out half (recorded before any code rule)"),
    FrozenSet("decontam_first", "decontam", "bench.decontam.forms:build_first_set",
              {"per_benchmark": 40, "per_pool": 600, "seed": 0}, Record(_DECONTAM_JSON, "first_set"),
              role="tuning (held-out half read in round 1)"),
    FrozenSet("decontam_forms", "decontam", "bench.decontam.forms:build_forms_set",
              {"per_benchmark": 40, "per_pool": 150, "seed": 7, "templates": "round1"},
              Record(_DECONTAM_JSON, "forms_set"), role="tuning (held-out half read in round 1)"),
    FrozenSet("decontam_forms2", "decontam", "bench.decontam.forms:build_heldout_forms_set",
              {"per_benchmark": 40, "per_pool": 150, "seed": 2026, "templates": "round2"},
              Record(_DECONTAM_JSON, "forms2_set"), after=("decontam_first", "decontam_forms"),
              role="tuning (round 2's held-out set, measured once and then read)"),
    FrozenSet("decontam_forms3", "decontam", "bench.decontam.forms:build_heldout_forms_set",
              {"per_benchmark": 40, "per_pool": 150, "seed": 3031, "templates": "round2"},
              Record(_DECONTAM_JSON, "forms3_set"), after=("decontam_first", "decontam_forms", "decontam_forms2"),
              role="held-out (all of it)"),
)
FROZEN: dict[str, FrozenSet] = {s.name: s for s in FROZEN_SETS}


def check(names: list[str], shared: Path, show_counts: bool) -> list[str]:
    """Rebuild the named sets; log each digest against the recorded one; the names whose digest differs."""
    cache: dict[str, Any] = {}
    differ = []
    for name in names:
        fs = FROZEN[name]
        t = time.time()
        built = fs.build(shared, cache)
        digest, recorded = fs.digest(built), fs.record.read()
        ok = digest == recorded
        log.info("%-16s %s %s (recorded in %s%s) [%.0fs] %s", name, digest, "MATCHES" if ok else "DIFFERS",
                 fs.record.file, f" {fs.record.key}" if fs.record.key else "", time.time() - t, fs.role)
        if show_counts:
            for part, kinds in fs.counts(built).items():
                log.info("    %s %s", part, kinds)
        if not ok:
            differ.append(name)
    return differ


def check_exclusions(shared: Path) -> bool:
    """The fresh2 exclusion list rebuilt the way it was written: every text of the labelled set at 150 and 60
    pairs per kind and of the fresh set at 120 and 48, then their near-copies among the math candidates."""
    from bench.dedup.fresh import excluded_digests, recorded_exclusions

    used: set[str] = set()
    for name, sizes in (("dedup_heldout", (150, 60)), ("dedup_fresh", (120, 48))):
        for n in sizes:
            ls = FROZEN[name].build(shared, n_per_kind=n)
            used |= {x for p in ls.pairs for x in (p.a, p.b)} | {g.prompt for g in ls.groups}
    got, want = excluded_digests(shared, used), recorded_exclusions()
    log.info("fresh2 exclusions rebuilt: %d digests, recorded %d: %s", len(got), len(want),
             "SAME" if got == want else f"DIFFER ({len(got - want)} new, {len(want - got)} missing)")
    return got == want


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=Path, default=SHARED, help="the shared real data folder")
    ap.add_argument("--only", action="append", choices=sorted(FROZEN), help="these sets only (repeatable)")
    ap.add_argument("--check", action="store_true", help="digests only (no counts); exit 1 when one differs")
    ap.add_argument("--check-exclusions", action="store_true", help="rebuild the fresh2 exclusion list too")
    ap.add_argument("--write", choices=sorted(FROZEN), help="record this set's digest (refused when recorded)")
    args = ap.parse_args()
    if not args.shared.is_dir():
        sys.exit(f"shared data folder {args.shared} not found (set COTFORGE_SHARED_DATA)")
    if args.write:
        fs = FROZEN[args.write]
        built = fs.build(args.shared)
        fs.record.write(fs.digest(built), f"{fs.name}: {fs.role}")
        log.info("recorded %s in %s", fs.digest(built), fs.record.path)
        return
    differ = check(args.only or list(FROZEN), args.shared, show_counts=not args.check)
    same_exclusions = check_exclusions(args.shared) if args.check_exclusions else True
    if differ or not same_exclusions:
        sys.exit(f"digests differ from the recorded ones: {differ or ''}{'' if same_exclusions else ' exclusions'}")


if __name__ == "__main__":
    main()
