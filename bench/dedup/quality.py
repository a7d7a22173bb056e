"""Problem-level dedup quality on the frozen labelled sets (bench/frozen.py), pairwise and end to end.

    python -m bench.dedup.quality                          # labelled set (tune, held) + fresh set, defaults
    python -m bench.dedup.quality --quick                  # 60 pairs per kind (not the frozen sets: digests differ)
    python -m bench.dedup.quality --round fresh2           # the second fresh set
    python -m bench.dedup.quality --round fresh2 --set word_relations=synonyms --show-misses
    python -m bench.dedup.quality --round fresh2 --show-real 20     # 20 sampled real pairs (hand check)
    python -m bench.dedup.quality --round code [--show 5]  # code pairs: the TUNING half + hand-written negatives
    python -m bench.dedup.quality --round code --final     # ... and the one measurement of the held-out half

Precision / recall of "same problem" overall and per kind: pairwise (PairJudge on MinHash sketches) and end to
end (every prompt of the set through the dedup stage: clusters add transitivity), and for sets with
multi-response groups whether every distinct response is kept. The set's digest is checked against the
recorded one first (a set whose digest differs is not the frozen set; `--final` refuses to measure it).
"""

from __future__ import annotations

import argparse
import collections
import random
import tempfile
import time
from dataclasses import fields

from bench.dedup.code_set import handwritten_negatives
from bench.dedup.labelled import LabelledSet
from bench.frozen import FROZEN
from bench.paths import SHARED
from cotforge.curate.dedup.config import DedupConfig
from cotforge.curate.dedup.stage import PairJudge


def _pair_table(pairs: list, pairwise: list[str | None], e2e: list[bool]) -> None:
    """Per kind: pairs, pairwise right, end-to-end right (dup kinds: merged = right; negatives: kept apart)."""
    by_kind: dict[tuple[str, bool], list] = collections.defaultdict(lambda: [0, 0, 0, collections.Counter()])
    for p, v, m in zip(pairs, pairwise, e2e, strict=True):
        row = by_kind[(p.kind, p.duplicate)]
        row[0] += 1
        row[1] += (v is None) == p.duplicate
        row[2] += m == p.duplicate
        if (v is None) != p.duplicate:
            row[3][v or "merged"] += 1
    print(f"    {'kind':32s} {'label':7s} {'pairs':>5s} {'pairwise':>19s} {'end-to-end':>19s}  wrong pairwise (why)")
    for (kind, dup), (n, pw, ee, why) in sorted(by_kind.items(), key=lambda kv: (not kv[0][1], kv[0][0])):
        what = "recall" if dup else "apart"
        print(f"    {kind:32s} {'dup' if dup else 'not-dup':7s} {n:5d} {what} {pw / n:.3f} ({pw:4d}) {what} "
              f"{ee / n:.3f} ({ee:4d})  {dict(why.most_common(3))}")


def _prf(pairs: list, merged: list[bool]) -> str:
    tp = sum(p.duplicate and m for p, m in zip(pairs, merged, strict=True))
    fp = sum((not p.duplicate) and m for p, m in zip(pairs, merged, strict=True))
    fn = sum(p.duplicate and not m for p, m in zip(pairs, merged, strict=True))
    return f"precision {tp / max(1, tp + fp):.4f}  recall {tp / max(1, tp + fn):.4f}  (tp {tp}, fp {fp}, fn {fn})"


def _end_to_end(pairs: list, cfg, d: str) -> list[bool]:
    """Every prompt of the pairs through the dedup stage once; a pair is merged when both end in one cluster."""
    import polars as pl

    from cotforge.curate.engine import ExecutorConfig
    from cotforge.curate.io.readers import InputSpec
    from cotforge.pipelines.stages import run_stage

    texts = sorted({x for p in pairs for x in (p.a, p.b)})
    ids = {x: f"t{i}" for i, x in enumerate(texts)}
    pl.DataFrame({"id": list(ids.values()), "problem": texts}).write_parquet(f"{d}/lab.parquet")
    run_stage("dedup", [InputSpec(f"{d}/lab.parquet", source_name="lab")], f"{d}/out", cfg, ExecutorConfig(workers=1))
    rem = pl.read_parquet(f"{d}/out/removed/*.parquet")
    rep = dict(zip(rem["id"], rem["duplicate_of"], strict=True))
    return [rep.get(ids[p.a], ids[p.a]) == rep.get(ids[p.b], ids[p.b]) for p in pairs]


def _groups_kept(groups: list, cfg, d: str) -> tuple[int, int, int]:
    """(rows, rows that must be kept = distinct normalised (prompt, response), rows kept) for the response
    groups run through the dedup stage together."""
    import polars as pl

    from cotforge.curate.dedup.core import row_keys
    from cotforge.curate.engine import ExecutorConfig
    from cotforge.curate.io.readers import InputSpec
    from cotforge.pipelines.stages import run_stage

    rows = [(g.prompt, r) for g in groups for r in g.responses]
    expect = len({row_keys(p, r)[2] for p, r in rows})
    pl.DataFrame({"id": [f"g{i}" for i in range(len(rows))], "problem": [p for p, _ in rows],
                  "solution": [r for _, r in rows]}).write_parquet(f"{d}/groups.parquet")
    stats = run_stage("dedup", [InputSpec(f"{d}/groups.parquet", source_name="groups")], f"{d}/gout", cfg,
                      ExecutorConfig(workers=1))
    return len(rows), expect, stats["kept"]


def measure_set(ls: LabelledSet, cfg: DedupConfig, judge: PairJudge, title: str) -> tuple[list[str | None], list[bool]]:
    """One labelled (sub)set: the pairwise verdicts (None = merged; PairJudge on MinHash sketches) and the end-to-end
    merges (the dedup stage over every prompt), with precision / recall of both and whether the response groups keep
    every distinct response printed under `title`."""
    texts = sorted({x for p in ls.pairs for x in (p.a, p.b)})
    sk = dict(zip(texts, judge.sketches(texts), strict=True))
    t = time.time()
    pairwise = [judge.verdict_sketches(sk[p.a], sk[p.b], p.a, p.b) for p in ls.pairs]
    t_pair = time.time() - t
    with tempfile.TemporaryDirectory() as d:
        e2e = _end_to_end(ls.pairs, cfg, d)
        n_rows, expect, kept = _groups_kept(ls.groups, cfg, d) if ls.groups else (0, 0, 0)
    print(f"\n  {title}: {len(ls.pairs)} pairs ({t_pair:.1f}s pairwise)")
    print(f"    pairwise   {_prf(ls.pairs, [v is None for v in pairwise])}")
    print(f"    end-to-end {_prf(ls.pairs, e2e)}")
    if ls.groups:
        print(f"    multi-response groups: {len(ls.groups)} prompts, {n_rows} rows, {expect} distinct (prompt, "
              f"response) must be kept, kept {kept}")
    return pairwise, e2e


def typed(overrides: dict[str, str]) -> dict[str, object]:
    """--set values as the DedupConfig field types want them: true/false for booleans, numbers for numbers."""
    kinds = {f.name: f.default for f in fields(DedupConfig)}
    out: dict[str, object] = {}
    for k, v in overrides.items():
        if k not in kinds:
            raise SystemExit(f"--set {k}: not a DedupConfig field")
        d = kinds[k]
        if isinstance(d, bool):
            if v.lower() not in ("true", "false"):
                raise SystemExit(f"--set {k}: true or false (got {v!r})")
            out[k] = v.lower() == "true"
        elif isinstance(d, int | float):
            out[k] = type(d)(v)
        else:
            out[k] = v
    return out


def evaluate(ls: LabelledSet, cfg: DedupConfig, judge: PairJudge, title: str, show_misses: bool = False) -> None:
    """Measure `cfg` on one (sub)set and print the figures, the per-kind table, and with `show_misses` the
    wrongly decided pairs."""
    verdicts, e2e = measure_set(ls, cfg, judge, title)
    _pair_table(ls.pairs, verdicts, e2e)
    if show_misses:
        for p, v, ee in zip(ls.pairs, verdicts, e2e, strict=True):
            if (v is None) != p.duplicate or ee != p.duplicate:
                print(f"--- {p.kind} dup={p.duplicate} pairwise={v or 'merged'} e2e_merged={ee}\n"
                      f"A: {p.a[:400]!r}\nB: {p.b[:400]!r}")


def _checked(name: str, built: LabelledSet, n_per_kind: int | None) -> str:
    """"matches" / "DOES NOT MATCH" for the set's digest against the recorded one (resized sets never match)."""
    fs = FROZEN[name]
    digest = fs.digest(built)
    state = "matches" if digest == fs.record.read() else "DOES NOT MATCH"
    return f"{name} sha256 {digest[:16]}... {state} bench/records/{fs.record.file}" + (
        f" (resized to {n_per_kind} per kind)" if n_per_kind else "")


def labelled_and_fresh(cfg: DedupConfig, n_per_kind: int | None, show_misses: bool) -> None:
    """Both parts of the labelled set (tuning, held-out) and the fresh set (0.8x the pairs per kind)."""
    t = time.time()
    resize = {"n_per_kind": n_per_kind} if n_per_kind else {}
    ls = FROZEN["dedup_heldout"].build(SHARED, **resize)
    fresh = FROZEN["dedup_fresh"].build(SHARED, **({"n_per_kind": round(0.8 * n_per_kind)} if n_per_kind else {}))
    print(f"labelled set: {len(ls.pairs)} pairs + {len(ls.groups)} response groups, fresh set {len(fresh.pairs)} "
          f"pairs, built in {time.time() - t:.1f}s; {_checked('dedup_heldout', ls, n_per_kind)}; "
          f"{_checked('dedup_fresh', fresh, n_per_kind)}")
    print(f"config: {cfg.describe()['minhash']}, threshold {cfg.threshold}, max_reworded {cfg.max_reworded}, "
          f"guards number={cfg.number_guard} graded={cfg.edit_guard}")
    judge = PairJudge(cfg)
    both = LabelledSet(ls.pairs + fresh.pairs, ls.groups)
    for part, title in (("tune", "tuning part (rules and thresholds chosen here)"),
                        ("held", "held-out part (not tuned on in round 1; its misses were read after)"),
                        ("fresh", "fresh held-out set (not tuned on)")):
        evaluate(both.part(part), cfg, judge, title, show_misses)


def fresh2(cfg: DedupConfig, show_misses: bool, show_real: int) -> None:
    """The second fresh set, whole; with `show_real`, that many of its real pairs first (a hand check of the
    mined labels)."""
    ls = FROZEN["dedup_fresh2"].build(SHARED)
    print(_checked("dedup_fresh2", ls, None))
    real = [p for p in ls.pairs if p.kind.startswith("real_")]
    for p in random.Random(0).sample(real, min(show_real, len(real))):
        print(f"--- {p.kind} {p.duplicate}\nA: {p.a[:600]!r}\nB: {p.b[:600]!r}")
    evaluate(ls, cfg, PairJudge(cfg), f"fresh2 set, {cfg.describe()['minhash']}", show_misses)


def code(cfg: DedupConfig, show: int, show_misses: bool, final: bool) -> None:
    """The code pairs' tuning half with the hand-written negatives; with `final`, the held-out half too."""
    fs = FROZEN["dedup_code"]
    ls = fs.build(SHARED)
    print(_checked("dedup_code", ls, None))
    tune = LabelledSet(ls.part("tune").pairs + handwritten_negatives(), [])
    for p in tune.pairs[:show]:
        print(f"--- {p.kind} dup={p.duplicate}\nA: {p.a[:1500]!r}\nB: {p.b[:1500]!r}")
    judge = PairJudge(cfg)
    evaluate(tune, cfg, judge, "code pairs, tuning half + hand-written negatives", show_misses)
    if final:
        if fs.digest(ls) != fs.record.read():
            raise SystemExit("the held-out half changed since its digest was recorded: not measuring it")
        evaluate(ls.part("held"), cfg, judge, "code pairs, held-out half")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--round", choices=["labelled", "fresh2", "code"], default="labelled",
                    help="labelled: the labelled set's tune / held parts and the fresh set")
    ap.add_argument("--quick", action="store_true", help="labelled: 60 pairs per kind (not the frozen sets)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a DedupConfig field")
    ap.add_argument("--show-misses", action="store_true", help="print the wrongly decided pairs (not for held-out)")
    ap.add_argument("--show", type=int, default=0, help="code: print N tuning pairs")
    ap.add_argument("--show-real", type=int, default=0, help="fresh2: print N sampled real pairs (hand check)")
    ap.add_argument("--final", action="store_true", help="code: the one measurement of the held-out half")
    args = ap.parse_args()
    if not SHARED.is_dir():
        raise SystemExit(f"shared data folder {SHARED} not found (set COTFORGE_SHARED_DATA)")
    cfg = DedupConfig(**typed(dict(kv.split("=", 1) for kv in args.set)))
    if args.round == "labelled":
        labelled_and_fresh(cfg, 60 if args.quick else None, args.show_misses)
    elif args.round == "fresh2":
        fresh2(cfg, args.show_misses, args.show_real)
    else:
        code(cfg, args.show, args.show_misses, args.final)


if __name__ == "__main__":
    main()
