"""Hand-written labelled sets for the semantic tier (issue 34): rephrasings and look-alikes written by hand
(not by bench/semantic/sets.py's rules), the kind of text an LLM rewriting a problem produces.

    python -m bench.semantic.written [--check] [--write-hash]   # load every file, print counts per part / kind

Files: bench/semantic/written/decontam_*.jsonl and dedup_*.jsonl, one JSON object a line. Only the written
text is stored: the base problem is read from ../shared/data by its id, so no benchmark or training text is
copied into the repository (look-alikes on the original wording are stored as replacements).

- decontamination rows: {"benchmark": "gsm8k_test", "id": "gsm8k-12", "kind": K, "text": "..."} or, for a
  look-alike on the item's own wording, {"benchmark": ..., "id": ..., "kind": K, "edits": [["old", "new"], ...]}
  (each `old` must occur in the item; its first occurrence is replaced). K: `light` / `moderate` / `heavy`
  (the same problem in other words: same numbers, same question), `number_changed`, `question_changed`,
  `condition_changed` (a different problem), `clean` (a new problem of the item's type: another story,
  other numbers, another question).
- dedup rows: {"source": "gsm8k_train_human", "id": "gsm8k_train_human-7", "kind": K, "text" | "edits": ...}:
  a pair (the training problem, this text); kinds as above except `clean`.

Split: every row made from one base problem is in the held-out part when sha256("benchmark/id" or
"source/id") is odd. The held-out digests are recorded in bench/records/semantic_written_heldout.sha256 once
the files are written, before the tier is run on them; `bench.semantic.eval --source written --part held`
refuses a held-out part whose digest differs.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
from collections import Counter
from functools import cache
from pathlib import Path

from bench.paths import RECORDS, SHARED
from bench.semantic.sets import DecontamRow, DedupPair, held_digests_of, read_digests

WRITTEN = Path(__file__).parent / "written"
HASH_FILE = RECORDS / "semantic_written_heldout.sha256"
DECON_KINDS = ("light", "moderate", "heavy", "number_changed", "question_changed", "condition_changed", "clean")
DEDUP_KINDS = ("light", "moderate", "heavy", "number_changed", "question_changed", "condition_changed")
POSITIVE = ("light", "moderate", "heavy")


class WrittenSetError(ValueError):
    """A row of a written set that cannot be resolved (file, line and field named)."""


def part_of_ref(ref: str) -> str:
    """"held" when sha256(ref) is odd, else "tune"."""
    return "held" if int(hashlib.sha256(ref.encode("utf-8")).hexdigest(), 16) & 1 else "tune"


@cache
def _problems(folder: str, stem: str, shared: Path) -> dict[str, str]:
    """{id: problem} of ../shared/data/<folder>/<stem>.jsonl[.gz]."""
    for name in (f"{stem}.jsonl", f"{stem}.jsonl.gz"):
        path = shared / folder / name
        if path.exists():
            op = gzip.open if name.endswith(".gz") else open
            with op(path, "rt", encoding="utf-8") as fh:
                return {r["id"]: r["problem"] for r in map(json.loads, filter(str.strip, fh)) if r.get("problem")}
    raise FileNotFoundError(shared / folder / stem)


def _text(row: dict, base: str, where: str) -> str:
    """The row's written text, or the base problem with its replacements applied."""
    if "text" in row:
        if not isinstance(row["text"], str) or not row["text"].strip():
            raise WrittenSetError(f"{where}: field 'text' is empty")
        return row["text"]
    out = base
    for k, edit in enumerate(row.get("edits") or ()):
        old, new = edit
        if old not in out:
            raise WrittenSetError(f"{where}: edits[{k}] {old!r} does not occur in the base problem")
        out = out.replace(old, new, 1)
    if out == base:
        raise WrittenSetError(f"{where}: neither 'text' nor an edit that changes the base problem")
    return out


def _rows(prefix: str, kinds: tuple[str, ...], key: str, folder: str, shared: Path, files: Path):
    """(base text, written text, kind, ref) for every row of the files `files`/`prefix`_*.jsonl, checked."""
    for path in sorted(files.glob(f"{prefix}_*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            where = f"{path.name}:{n}"
            row = json.loads(line)
            if row.get("kind") not in kinds:
                raise WrittenSetError(f"{where}: field 'kind' {row.get('kind')!r} is not one of {kinds}")
            base = _problems(folder, row[key], shared).get(row["id"])
            if base is None:
                raise WrittenSetError(f"{where}: field 'id' {row['id']!r} is not in {folder}/{row[key]}")
            yield base, _text(row, base, where), row["kind"], f"{row[key]}/{row['id']}", row[key], row["id"]


def build_written_decontam(shared: Path = SHARED, files: Path = WRITTEN) -> list[DecontamRow]:
    """Rows to check against the benchmark index; `item_id` is the benchmark item rephrased or imitated."""
    out = []
    for _base, text, kind, ref, bench, item in _rows("decontam", DECON_KINDS, "benchmark", "benchmarks", shared,
                                                     files):
        out.append(DecontamRow(text, kind, kind in POSITIVE, bench, item, part_of_ref(ref)))
    return out


def build_written_dedup(shared: Path = SHARED, files: Path = WRITTEN) -> list[DedupPair]:
    """Pairs (training problem, written text); `duplicate` for the rewordings."""
    return [DedupPair(base, text, kind, kind in POSITIVE, part_of_ref(ref))
            for base, text, kind, ref, _s, _i in _rows("dedup", DEDUP_KINDS, "source", "sft_sources", shared, files)]


def held_digests(shared: Path = SHARED, files: Path = WRITTEN) -> dict[str, str]:
    """The held-out parts' digests of the written sets."""
    return held_digests_of(build_written_decontam(shared, files), build_written_dedup(shared, files))


def recorded() -> dict[str, str]:
    """The digests recorded in HASH_FILE."""
    return read_digests(HASH_FILE)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=str(WRITTEN), help="folder of the decontam_*.jsonl / dedup_*.jsonl files")
    ap.add_argument("--check", action="store_true", help="exit 1 when the held-out digests differ from the recorded")
    ap.add_argument("--write-hash", action="store_true", help="record the held-out digests (once, before any run)")
    args = ap.parse_args()
    files = Path(args.dir)
    try:
        dec, ded = build_written_decontam(SHARED, files), build_written_dedup(SHARED, files)
    except WrittenSetError as e:
        sys.exit(f"error: {e}")
    print("decontam", sorted(Counter((r.part, r.kind) for r in dec).items()))
    print("dedup", sorted(Counter((p.part, p.kind) for p in ded).items()))
    got = held_digests_of(dec, ded)
    print("held digests", got, "recorded", recorded())
    if args.write_hash:
        HASH_FILE.write_text("".join(f"{v} {k} held-out part of bench/semantic/written (sha256(ref) odd)\n"
                                     for k, v in got.items()))
    elif args.check and got != recorded():
        sys.exit("error: the held-out digests differ from bench/records/semantic_written_heldout.sha256")


if __name__ == "__main__":
    main()
