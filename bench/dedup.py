"""Benchmark problem-level dedup: quality on the labelled set, and speed/memory against plain datasketch.

    python bench/dedup.py                      # labelled set + 100k and 1M generated rows
    python bench/dedup.py --sizes 20000 --quick  # quick check (smaller labelled set)

Quality: precision/recall of "same problem" per kind on both parts of bench/labelled_sets.py (tuning and
held-out; the held-out hash is checked against bench/dedup_heldout.sha256) and on the fresh held-out set of
bench/dedup_fresh.py (hash in bench/dedup_fresh.sha256), pairwise and end to end through
run_dedup (clusters add transitivity), and the multi-response groups (every distinct response kept). Speed: rows/s (wall time of the whole call in a fresh
subprocess, ingest and output included) of `run_dedup` vs a plain datasketch MinHashLSH loop doing the same
work (normalise, exact pair keys, MinHash + LSH on new problems; no guards, no clustering) on the same file.
Memory: peak RSS of each subprocess (VmHWM: ru_maxrss would include the bench process's own RSS, which Linux
carries across fork + exec) and ru_maxrss of its largest child (datatrove's executor manager, or the workers
with --workers > 1; a forked child counts the pages it shares with its parent). run_dedup streams per task,
key partition and band hash range, so its peak should stay near the 100k figure at 1M (run_dedup's docstring
lists what still grows).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = next((d / "shared" / "data" for d in (REPO.parent, REPO.parent.parent) if (d / "shared" / "data").is_dir()),
              REPO.parent / "shared" / "data")  # ../shared/data (main checkout) or ../../shared/data (worktree)
WORDS = ("apples pears coins marbles books pencils stamps cards shells tickets seeds beads bottles boxes "
         "chairs tables lamps cups plates spoons").split()
NAMES = "Ava Ben Cara Dan Eve Finn Gia Hal Ivy Jon Kai Lea Max Nia Omar Pia".split()
TEMPLATES = (
    "{n1} has {a} {w1} and buys {b} more {w1} at the market. Then {n1} gives {c} {w1} to {n2}. "
    "How many {w1} does {n1} have left at the end of the day?",
    "A box holds {a} {w1} and {b} {w2}. If {c} of the {w1} are removed and {n1} adds {d} {w2}, what fraction "
    "of the items in the box are {w2}? Express your answer as a common fraction.",
    "{n1} reads {a} pages of a book on Monday and {b} pages on Tuesday. The book has {c} pages in total. "
    "How many pages does {n1} still need to read to finish the book about {w1}?",
    "Find the sum of all positive integers n less than {a} such that n^2 + {b} n + {c} is divisible by {d}.",
)


# --------------------------------------------------------------------------- data


def generate(path: Path, n_rows: int, seed: int = 0) -> dict[str, int]:
    """n_rows generated problem rows as Parquet: ~2 responses per problem, 8% near-copies, 4% exact copies."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(seed)
    counts: collections.Counter[str] = collections.Counter()
    writer = None
    batch: list[dict] = []
    problems: list[str] = []
    for i in range(n_rows):
        r = rng.random()
        if problems and r < 0.08:
            base = rng.choice(problems[-5000:])
            prompt, kind = base + rng.choice([" Show your work.", " Explain briefly."]), "near_copy"
        elif problems and r < 0.12:
            prompt, kind = rng.choice(problems[-5000:]), "exact_prompt"
        elif problems and r < 0.55:
            prompt, kind = problems[-1], "extra_response"
        else:
            t = rng.choice(TEMPLATES)
            prompt = t.format(n1=rng.choice(NAMES), n2=rng.choice(NAMES), w1=rng.choice(WORDS), w2=rng.choice(WORDS),
                              a=rng.randint(2, 999), b=rng.randint(2, 999), c=rng.randint(2, 999),
                              d=rng.randint(2, 99))
            problems.append(prompt)
            kind = "new_problem"
        counts[kind] += 1
        resp = f"Step 1: read the numbers. Step 2: compute. The answer is {rng.randint(0, 50)}."
        batch.append({"id": f"g{i}", "problem": prompt, "solution": resp, "ground_truth": str(rng.randint(0, 50))})
        if len(batch) == 50_000:
            table = pa.Table.from_pylist(batch)
            writer = writer or pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
            batch = []
    if batch:
        table = pa.Table.from_pylist(batch)
        writer = writer or pq.ParquetWriter(path, table.schema)
        writer.write_table(table)
    writer.close()
    return dict(counts)


# --------------------------------------------------------------------------- methods (run in subprocesses)


def run_ours(path: str, out: str, workers: int) -> dict:
    from cotforge.curate.dedup.config import DedupConfig
    from cotforge.curate.engine import ExecutorConfig
    from cotforge.curate.io.readers import InputSpec
    from cotforge.pipelines.stages import run_stage

    stats = run_stage("dedup", [InputSpec(path, source_name="gen")], out, DedupConfig(),
                      ExecutorConfig(workers=workers, rows_per_task=25_000))
    return {"kept": stats["kept"], "removed": stats["removed_by_reason"], "timings": stats["dedup"]["timings"]}


def run_baseline(path: str, out: str) -> dict:
    """A plain datasketch loop with the same normalisation, shingles and exact keys (no clustering, no
    guards), writing kept/removed Parquet like the stage does. Permutations are shared across MinHash objects
    (the fast way to use datasketch; a fresh MinHash(num_perm) per row is ~5x slower)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from datasketch import MinHash, MinHashLSH

    from cotforge.curate.dedup.config import DedupConfig
    from cotforge.curate.dedup.core import row_keys

    cfg = DedupConfig()
    num_perm = cfg.bands * cfg.rows_per_band
    proto = MinHash(num_perm=num_perm, seed=cfg.seed)
    lsh = MinHashLSH(num_perm=num_perm, params=(cfg.bands, cfg.rows_per_band))
    pairs: set[int] = set()
    problems: set[int] = set()
    pf = pq.ParquetFile(path)
    writers = {k: pq.ParquetWriter(f"{out}/{k}.parquet", pf.schema_arrow) for k in ("kept", "removed")}
    n = {"kept": 0, "removed": 0}
    for batch in pf.iter_batches(batch_size=4096):
        dest = {"kept": [], "removed": []}
        for rec in batch.to_pylist():
            norm_p, pkey, pair, _ = row_keys(rec["problem"], rec["solution"])
            where = "kept"
            if pair in pairs:
                where = "removed"
            elif pkey not in problems:
                problems.add(pkey)
                toks = norm_p.split(" ")
                grams = {" ".join(toks[i:i + cfg.ngram]) for i in range(max(1, len(toks) - cfg.ngram + 1))}
                mh = MinHash(num_perm=num_perm, seed=cfg.seed, permutations=proto.permutations, scheme=proto.scheme)
                mh.update_batch([g.encode() for g in grams])
                if lsh.query(mh):
                    where = "removed"
                else:
                    lsh.insert(str(pkey), mh, check_duplication=False)
            pairs.add(pair)
            dest[where].append(rec)
        for k, recs in dest.items():
            if recs:
                writers[k].write_table(pa.Table.from_pylist(recs, schema=pf.schema_arrow))
                n[k] += len(recs)
    for w in writers.values():
        w.close()
    return n


def _peak_rss_mb() -> float:
    """This process's peak RSS. VmHWM, not ru_maxrss: Linux carries ru_maxrss across fork + exec, so a child
    started by this (large) bench process would report at least the parent's RSS."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child(method: str, path: str, workers: int) -> None:
    t = time.time()
    with tempfile.TemporaryDirectory() as d:
        res = run_ours(path, d, workers) if method == "ours" else run_baseline(path, d)
    res["wall_s"] = time.time() - t
    res["rss_self_mb"] = _peak_rss_mb()
    res["rss_children_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print("RESULT " + json.dumps(res))


def measure(method: str, path: Path, workers: int) -> dict:
    """Run one method in a fresh interpreter; returns its result dict with wall time and peak RSS."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, __file__, "--child", method, str(path), "--workers", str(workers)],
                          capture_output=True, text=True, env=env, cwd=REPO)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"{method} failed:\n{proc.stderr[-3000:]}")
    return json.loads(line[7:])


# --------------------------------------------------------------------------- quality


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
    print(f"    {'kind':32s} {'label':7s} {'pairs':>5s} {'pairwise':>15s} {'end-to-end':>15s}  wrong pairwise (why)")
    for (kind, dup), (n, pw, ee, why) in sorted(by_kind.items(), key=lambda kv: (not kv[0][1], kv[0][0])):
        what = "recall" if dup else "apart"
        print(f"    {kind:32s} {'dup' if dup else 'not-dup':7s} {n:5d} {what} {pw / n:8.3f} {what} {ee / n:8.3f}  "
              f"{dict(why.most_common(3))}")


def _prf(pairs: list, merged: list[bool]) -> str:
    tp = sum(p.duplicate and m for p, m in zip(pairs, merged, strict=True))
    fp = sum((not p.duplicate) and m for p, m in zip(pairs, merged, strict=True))
    fn = sum(p.duplicate and not m for p, m in zip(pairs, merged, strict=True))
    return f"precision {tp / max(1, tp + fp):.4f}  recall {tp / max(1, tp + fn):.4f}  (tp {tp}, fp {fp}, fn {fn})"


def _end_to_end(pairs: list, cfg, d: str) -> list[bool]:
    """Every prompt of the pairs through run_dedup once; a pair is merged when both end in one cluster."""
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
    groups run through run_dedup together."""
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


def quality(n_per_kind: int) -> None:
    """Precision/recall per kind on both parts of the labelled set (tuning, held-out), pairwise (PairJudge)
    and end to end (run_dedup: clusters add transitivity), and whether response groups keep every response."""
    from dedup_fresh import build_fresh_set
    from dedup_fresh import recorded_hash as fresh_hash
    from labelled_sets import SHARED as LAB_SHARED
    from labelled_sets import LabelledSet, build_labelled_set, recorded_hash

    from cotforge.curate.dedup.config import DedupConfig
    from cotforge.curate.dedup.stage import PairJudge

    t = time.time()
    ls = build_labelled_set(LAB_SHARED, n_per_kind=n_per_kind)
    fresh = build_fresh_set(LAB_SHARED, n_per_kind=round(0.8 * n_per_kind))
    fdigest = fresh.digest()
    ls = LabelledSet(ls.pairs + fresh.pairs, ls.groups)
    digest = ls.part("held").digest()
    cfg = DedupConfig()
    print(f"labelled set: {len(ls.pairs)} pairs + {len(ls.groups)} response groups built in {time.time() - t:.1f}s; "
          f"held-out sha256 {digest[:16]}... {'matches' if digest == recorded_hash() else 'DOES NOT MATCH'} "
          f"bench/dedup_heldout.sha256; fresh set sha256 {fdigest[:16]}... "
          f"{'matches' if fdigest == fresh_hash() else 'DOES NOT MATCH'} bench/dedup_fresh.sha256")
    print(f"config: {cfg.describe()['minhash']}, threshold {cfg.threshold}, max_reworded {cfg.max_reworded}, "
          f"guards number={cfg.number_guard} graded={cfg.edit_guard}")
    judge = PairJudge(cfg)
    for part, title in (("tune", "tuning part (rules and thresholds chosen here)"),
                        ("held", "held-out part (not tuned on in round 1; its misses were read after)"),
                        ("fresh", "fresh held-out set (bench/dedup_fresh.py; not tuned on)")):
        sub = ls.part(part)
        pairwise, e2e = measure_set(sub, cfg, judge, title)
        _pair_table(sub.pairs, pairwise, e2e)


def measure_set(ls, cfg, judge, title: str) -> tuple[list[str | None], list[bool]]:
    """One labelled (sub)set: the pairwise verdicts (None = merged; PairJudge on MinHash sketches) and the end-to-end
    merges (run_dedup over every prompt), with precision / recall of both and whether the response groups keep
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


# --------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100000,1000000", help="comma list of generated row counts")
    ap.add_argument("--workers", default="1,2", help="worker counts to measure ours with (comma list)")
    ap.add_argument("--quick", action="store_true", help="smaller labelled set (60 pairs per kind; hash differs)")
    ap.add_argument("--skip-quality", action="store_true")
    ap.add_argument("--child", nargs=2, metavar=("METHOD", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child[0], args.child[1], int(args.workers))
        return
    if not args.skip_quality and SHARED.exists():
        quality(60 if args.quick else 150)
    with tempfile.TemporaryDirectory() as d:
        for n in [int(x) for x in args.sizes.split(",") if x]:
            path = Path(d) / f"gen_{n}.parquet"
            mix = generate(path, n)
            print(f"\n{n} generated rows {mix}")
            res = {f"ours w={w}": measure("ours", path, int(w)) for w in args.workers.split(",")}
            res["baseline"] = measure("baseline", path, 1)
            for m, r in res.items():
                print(f"  {m:9s} {n / r['wall_s']:9.0f} rows/s  wall {r['wall_s']:7.1f}s  peak RSS self "
                      f"{r['rss_self_mb']:6.0f} MB, largest child {r['rss_children_mb']:6.0f} MB  "
                      f"kept {r['kept']}  removed {r['removed']}")
            for m, r in res.items():
                if m != "baseline":
                    print(f"  {m}: speed ratio vs baseline {res['baseline']['wall_s'] / r['wall_s']:.2f}x; "
                          f"steps {r['timings']}")


if __name__ == "__main__":
    main()
