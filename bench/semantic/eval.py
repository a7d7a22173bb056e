"""Score the semantic tier on bench/semantic/sets.py's labelled sets (one part at a time).

    python -m bench.semantic.eval --part tune [--set decontam|dedup|both] [--off] [--diag] [--misses] [--set-opt k=v ...]
        [--judge URL MODEL]   # the LLM judge of both stages at an OpenAI-compatible endpoint

decontamination: the sets' rows through `Matcher.match_batch` (every tier; `--off`: without the semantic tier)
against an index of gsm8k_test, math500, aime2024, amc2023, minerva_math and olympiadbench; per kind the share
of rows flagged (rephrasings: recall, and how many of them name the right item; look-alikes and clean rows:
false positives). dedup: all texts of the part pooled, the tier's merged pairs (`dedup/semantic.py`); recall
per reworded kind, look-alike pairs merged, precision over every merged pair (a merge of two texts from
different labelled pairs counts as wrong unless the texts are equal). `--diag`: per kind, the signals of the
true pair (cosine, question cosine, the pair check's verdict) to choose thresholds on the tuning part.
The held-out part is refused unless its digest equals the recorded one.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import fields, replace

import numpy as np

from bench.semantic.lookalikes import CLASSES, build_lookalikes
from bench.semantic.real import encode_cached
from bench.semantic.sets import SHARED, build_decontam, build_dedup, held_digests, recorded
from bench.semantic.written import build_written_decontam, build_written_dedup
from bench.semantic.written import held_digests as written_held
from bench.semantic.written import recorded as written_recorded
from cotforge.curate.core.benchmarks import load_benchmarks
from cotforge.curate.decontam.config import DecontamConfig
from cotforge.curate.decontam.index import DecontamIndex, build_index
from cotforge.curate.decontam.match import Matcher
from cotforge.curate.dedup.pairs.semantic import (
    PairThresholds,
    math_of,
    numbers_of,
    pair_verdict,
    question_of,
)
from cotforge.curate.dedup.semantic import RECHECK, check_pairs, neighbour_pairs, semantic_pairs
from cotforge.curate.text.embed import StaticEmbedder, embedder_for
from cotforge.curate.text.judge import make_judge

BENCHMARKS = ("gsm8k_test", "math500", "aime2024", "amc2023", "minerva_math", "olympiadbench")
DEDUP_DEFAULT = PairThresholds(min_cosine=0.85, min_question_cosine=0.80, max_extra_numbers=0)


def _overrides(cfg, opts: list[str]):
    types = {f.name: f.type for f in fields(cfg)}
    kw = {}
    for o in opts:
        k, v = o.split("=", 1)
        t = str(types[k])
        kw[k] = float(v) if "float" in t else int(v) if "int" in t else v.lower() in ("1", "true") if "bool" in t else v
    return replace(cfg, **kw)


def _decontam_rows(source: str, part: str) -> list:
    """The part's rows: the generated set, or the hand-written set plus the generated set's clean rows (real
    training problems) of the same part."""
    gen = [r for r in build_decontam(SHARED) if r.part == part]
    if source == "generated":
        return gen
    return [r for r in build_written_decontam(SHARED) if r.part == part] + [r for r in gen if r.kind == "clean"]


def _dedup_pairs(source: str, part: str) -> list:
    """The part's labelled pairs; the tuning part of the generated set adds the hand-written look-alike classes."""
    if source == "written":
        return [p for p in build_written_dedup(SHARED) if p.part == part]
    pairs = [p for p in build_dedup(SHARED) if p.part == part]
    return pairs + build_lookalikes(SHARED) if part == "tune" else pairs


def eval_decontam(part: str, semantic: bool, opts: list[str], diag: bool, misses: bool = False,
                  source: str = "generated") -> None:
    rows = _decontam_rows(source, part)
    cfg = _overrides(DecontamConfig(benchmarks=list(BENCHMARKS), semantic=semantic), opts)
    t0 = time.time()
    d = tempfile.mkdtemp(prefix="semantic_eval_")
    build_index(load_benchmarks(BENCHMARKS, SHARED / "benchmarks"), cfg, d)
    idx = DecontamIndex(d)
    matcher = Matcher(idx)
    t1 = time.time()
    found = matcher.match_batch([r.prompt for r in rows], None, cfg)
    t2 = time.time()
    by: dict[str, Counter] = defaultdict(Counter)
    for r, ms in zip(rows, found, strict=True):
        c = by[r.kind]
        c["n"] += 1
        if ms:
            c["flagged"] += 1
            c["kind_" + ms[0].match_kind] += 1
            if any(m.benchmark_id == r.item_id for m in ms):
                c["right_item"] += 1
    print(f"decontam part={part} semantic={semantic} encoder={cfg.semantic_encoder} index {t1 - t0:.1f}s match "
          f"{t2 - t1:.1f}s ({len(rows) / max(t2 - t1, 1e-9):.1f} rows/s); rows kept from the transformer by the "
          f"static encoder: {getattr(matcher._semantic, 'skipped', 0)}")
    for kind in ("light", "moderate", "heavy", "number_changed", "question_changed", "condition_changed", "clean"):
        c = by[kind]
        if not c["n"]:
            continue
        print(f"  {kind:17s} {c['flagged']:4d}/{c['n']:4d} = {c['flagged'] / max(c['n'], 1):.3f}  "
              f"right item {c['right_item']}  " + " ".join(f"{k}={v}" for k, v in sorted(c.items()) if k.startswith("kind_")))
    pos = [by[k] for k in ("light", "moderate", "heavy")]
    print(f"  rephrasings recall {sum(c['flagged'] for c in pos) / max(sum(c['n'] for c in pos), 1):.3f}")
    if diag and semantic:
        _diag_decontam(rows, idx, cfg, matcher)
    if misses and semantic:
        _print_misses(rows, found, idx, matcher)
    if semantic and part == "tune":  # the held-out part is reported as counts only
        for r, ms in zip(rows, found, strict=True):
            if ms and ms[0].match_kind == "semantic" and not r.contaminated:
                print(f"  FP [{r.kind}] cos={ms[0].score:.3f} {ms[0].detail}\n")


def _item_entry(idx, r) -> int | None:
    """The index entry of a row's benchmark item (the sets name GSM8K's benchmark "gsm8k", the index "gsm8k_test")."""
    for i, e in enumerate(idx.entries):
        if e.item_id == r.item_id and e.part == "problem" and (e.benchmark.startswith(r.benchmark)
                                                                or r.benchmark.startswith(e.benchmark)):
            return i
    return None


def _print_misses(rows, found, idx, matcher) -> None:
    """Each rephrasing no tier flagged, with the rule of the pair check that rejects it against its own item, the
    numbers and formula tokens only one side has, and both question sentences (tuning part only)."""
    tier = matcher._semantic
    why: Counter = Counter()
    for r, ms in zip(rows, found, strict=True):
        if r.kind not in ("light", "moderate", "heavy") or ms or (e := _item_entry(idx, r)) is None:
            continue
        item = idx.entries[e].text
        v = tier.emb.encode([r.prompt, question_of(r.prompt)])
        c, q = float(v[0] @ tier.vecs[e]), float(v[1] @ tier.qvecs[e])
        verdict = pair_verdict(item, r.prompt, c, q, tier.th) or "not_a_top_k_neighbour"
        why[(r.kind, verdict)] += 1
        na, nb, ma, mb = numbers_of(item), numbers_of(r.prompt), math_of(item), math_of(r.prompt)
        print(f"  MISS [{r.kind}] {verdict} cos={c:.3f} qcos={q:.3f} {r.benchmark}/{r.item_id}\n"
              f"    numbers item-only {dict(na - nb)} row-only {dict(nb - na)}; "
              f"math item-only {dict(ma - mb)} row-only {dict(mb - ma)}\n"
              f"    Q item: {question_of(item)[:160]!r}\n    Q row : {question_of(r.prompt)[:160]!r}\n"
              f"    ITEM: {item[:300]!r}\n    ROW : {r.prompt[:300]!r}")
    print("  misses by rule:", dict(why))


def _diag_decontam(rows, idx, cfg, matcher) -> None:
    tier = matcher._semantic
    texts = [e.text for e in idx.entries]
    where = {(e.benchmark, e.item_id): i for i, e in enumerate(idx.entries)}
    emb = tier.emb
    sel = [r for r in rows if r.item_id is not None and (r.benchmark, r.item_id) in where]
    v = emb.encode([r.prompt for r in sel])
    qv = emb.encode([question_of(r.prompt) for r in sel])
    for kind in ("light", "moderate", "heavy", "number_changed", "question_changed", "condition_changed"):
        cs, qs, why = [], [], Counter()
        for r, a, qa in zip(sel, v, qv, strict=True):
            if r.kind != kind:
                continue
            e = where[(r.benchmark, r.item_id)]
            c, q = float(a @ tier.vecs[e]), float(qa @ tier.qvecs[e])
            cs.append(c)
            qs.append(q)
            why[pair_verdict(texts[e], r.prompt, c, q, tier.th) or "match"] += 1
            if kind in ("light", "moderate", "heavy") and why.get("number_changed") and len(cs) < 400 and \
                    pair_verdict(texts[e], r.prompt, c, q, tier.th) == "number_changed":
                print("   NUM-MISS", texts[e][:200], "||", r.prompt[:200])
        if cs:
            print(f"  diag {kind:17s} cos p5/p50 {np.percentile(cs, 5):.3f}/{np.median(cs):.3f} "
                  f"qcos p5/p50/p95 {np.percentile(qs, 5):.3f}/{np.median(qs):.3f}/{np.percentile(qs, 95):.3f} {dict(why)}")
    clean = [r.prompt for r in rows if r.kind == "clean"]
    best = (emb.encode(clean) @ tier.vecs.T).max(axis=1)
    print(f"  diag clean best-item cos p50/p95/p99/max {np.median(best):.3f}/{np.percentile(best, 95):.3f}/"
          f"{np.percentile(best, 99):.3f}/{best.max():.3f}")


def eval_dedup(part: str, opts: list[str], diag: bool, model: str, graded_off: bool = False,
               recheck: tuple[str, ...] = (), misses: bool = False, static: float | None = None,
               precision: str = "auto", max_tokens: int = 256, source: str = "generated",
               judge: tuple[str, str] | None = None) -> None:
    pairs = _dedup_pairs(source, part)
    th = DEDUP_DEFAULT
    for o in opts:
        k, v = o.split("=", 1)
        th = replace(th, **{k: type(getattr(th, k))(v)})
    texts: list[str] = []
    at: dict[str, int] = {}
    for p in pairs:
        for t in (p.a, p.b):
            if t not in at:
                at[t] = len(texts)
                texts.append(t)
    from cotforge.curate.dedup.config import DedupConfig

    emb = embedder_for(DedupConfig(semantic_model=model, semantic_precision=precision, semantic_max_tokens=max_tokens))
    t0 = time.time()
    vecs = encode_cached(emb, texts, f"dedup-{part}")

    if judge is not None:  # the stage's judge gating (curate/text/judge.py) with a real endpoint
        jcfg = DedupConfig(semantic=True, semantic_judge=judge[0], semantic_judge_model=judge[1])
        cands = neighbour_pairs(vecs, jcfg.semantic_top_k, min(th.min_cosine, jcfg.semantic_judge_cosine))
        merged, stats = check_pairs(cands, texts, emb, th, jcfg, frozenset(recheck), judge=make_judge(jcfg))
    elif static is None:
        merged, stats = semantic_pairs(texts, emb, th, vecs=vecs, cfg=None if graded_off else DedupConfig(),
                                       recheck=frozenset(recheck))
    else:  # the static+rerank path: static neighbours, the transformer's cosine on those pairs only
        cands = neighbour_pairs(StaticEmbedder(emb).encode(texts), 5, static)
        rows = {x for i, j, _ in cands for x in (i, j)}
        print(f"  static+rerank at {static}: {len(cands)} static candidate pairs, {len(rows)}/{len(texts)} texts "
              f"would reach the transformer")
        cands = [(i, j, float(vecs[i] @ vecs[j])) for i, j, _ in cands if float(vecs[i] @ vecs[j]) >= th.min_cosine]
        merged, stats = check_pairs(cands, texts, emb, th, None if graded_off else DedupConfig(), frozenset(recheck))
    dt = time.time() - t0
    label = {tuple(sorted((at[p.a], at[p.b]))): p for p in pairs}
    got = {(i, j) for i, j, _ in merged}
    same = sum(p.a == p.b for p in pairs)  # a light rewording that changed nothing: the exact tier merges it
    got |= {(at[p.a], at[p.b]) for p in pairs if p.a == p.b}
    print(f"  {same} labelled pairs are identical texts (merged by exact dedup)")
    by: dict[str, Counter] = defaultdict(Counter)
    for key, p in label.items():
        by[p.kind]["n"] += 1
        by[p.kind]["merged"] += key in got
    wrong = [(i, j) for i, j in got if not (label.get((i, j)) and label[(i, j)].duplicate)]
    right = len(got) - len(wrong)
    print(f"dedup part={part} {len(texts)} texts, {dt:.1f}s ({len(texts) / dt:.1f} texts/s) thresholds {th} {stats}")
    for kind in ("light", "moderate", "heavy", "number_changed", "question_changed", "condition_changed", *CLASSES):
        c = by[kind]
        if not c["n"]:
            continue
        print(f"  {kind:17s} merged {c['merged']:4d}/{c['n']:4d} = {c['merged'] / max(c['n'], 1):.3f}")
    pos = [by[k] for k in ("light", "moderate", "heavy")]
    print(f"  reworded recall {sum(c['merged'] for c in pos) / max(sum(c['n'] for c in pos), 1):.3f}  "
          f"precision {right / max(len(got), 1):.4f} ({right} right, {len(wrong)} wrong merges)")
    for i, j in wrong[:20] if part == "tune" else ():  # the held-out part: counts only
        k = next((n for n, (x, y) in enumerate(zip(texts[i], texts[j], strict=False)) if x != y), 0)
        at = max(0, k - 60)  # where the two texts start to differ (LeetCode problems share long openings)
        print("  WRONG", label.get((i, j)).kind if (i, j) in label else "unlabelled", "|", texts[i][at:at + 160], "||",
              texts[j][at:at + 160])
    if misses:
        _print_dedup_misses(texts, vecs, emb, label, got, th, DedupConfig())
    if diag:
        q = emb.encode([question_of(t) for t in texts])
        for kind in ("light", "moderate", "heavy", "number_changed", "question_changed", "condition_changed"):
            cs, qs, why = [], [], Counter()
            for (i, j), p in label.items():
                if p.kind == kind:
                    c, qc = float(vecs[i] @ vecs[j]), float(q[i] @ q[j])
                    cs.append(c)
                    qs.append(qc)
                    why[pair_verdict(texts[i], texts[j], c, qc, th, symmetric=True) or "match"] += 1
            if not cs:
                continue
            print(f"  diag {kind:17s} cos p5/p50 {np.percentile(cs, 5):.3f}/{np.median(cs):.3f} "
                  f"qcos p5/p50 {np.percentile(qs, 5):.3f}/{np.median(qs):.3f} {dict(why)}")


def _print_dedup_misses(texts, vecs, emb, label, got, th, cfg) -> None:
    """Each reworded pair not merged, with the graded check's reason and the semantic check's (tuning part only)."""
    from cotforge.curate.dedup.pairs.verdict import candidate_verdict
    from cotforge.curate.text.normalize import normalize

    why: Counter = Counter()
    for (i, j), p in label.items():
        if not p.duplicate or p.a == p.b or (i, j) in got:
            continue
        graded = candidate_verdict(normalize(texts[i], cfg.norm), normalize(texts[j], cfg.norm), cfg, texts[i], texts[j])
        q = emb.encode([question_of(texts[i]), question_of(texts[j])])
        c, qc = float(vecs[i] @ vecs[j]), float(q[0] @ q[1])
        sem = pair_verdict(texts[i], texts[j], c, qc, th, symmetric=True) or "semantic_ok"
        why[(p.kind, graded, sem)] += 1
        print(f"  MISS [{p.kind}] graded={graded} semantic={sem} cos={c:.3f} qcos={qc:.3f}\n"
              f"    A: {texts[i][:300]!r}\n    B: {texts[j][:300]!r}")
    for k, v in sorted(why.items(), key=lambda kv: -kv[1]):
        print(f"  misses {v:3d} {k}")


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=("tune", "held"), default="tune")
    ap.add_argument("--source", choices=("generated", "written"), default="generated",
                    help="the rule-generated sets (bench/semantic/sets.py) or the hand-written ones (bench/semantic/written.py)")
    ap.add_argument("--set", dest="which", choices=("decontam", "dedup", "both"), default="both")
    ap.add_argument("--off", action="store_true", help="decontamination without the semantic tier")
    ap.add_argument("--diag", action="store_true")
    ap.add_argument("--misses", action="store_true", help="print each missed rephrasing with the rule that rejects it "
                    "(tuning part only)")
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--precision", default="auto", help="the encoder's arithmetic (semantic_precision, as the stages), both sets")
    ap.add_argument("--max-tokens", type=int, default=256, help="the encoder's token cap (semantic_max_tokens), both sets")
    ap.add_argument("--recheck", default="", help="dedup: graded reasons the semantic check may overrule (a,b; default: the stage's RECHECK; "
                    "'none': only the rewording reasons)")
    ap.add_argument("--no-graded", action="store_true", help="dedup: the semantic check alone, without the graded check")
    ap.add_argument("--set-opt", action="append", default=[], help="config override key=value")
    ap.add_argument("--judge", nargs=2, metavar=("URL", "MODEL"), default=None, help="both sets: the LLM judge "
                    "at this OpenAI-compatible endpoint (--semantic-judge URL --semantic-judge-model MODEL); "
                    "decontamination's other judge settings by --set-opt semantic_judge_numbers=true etc.")
    ap.add_argument("--dedup-static", type=float, default=None, help="dedup: the static+rerank path with this "
                    "least static cosine (decontamination: --set-opt semantic_encoder=static+rerank)")
    args = ap.parse_args()
    if args.part == "held":
        rec, got = (written_recorded(), written_held()) if args.source == "written" else (recorded(), held_digests())
        if got != rec:
            sys.exit(f"held-out digests {got} differ from the recorded {rec}")
    if args.which in ("decontam", "both"):
        enc = [f"semantic_precision={args.precision}", f"semantic_max_tokens={args.max_tokens}"]
        judge = [f"semantic_judge={args.judge[0]}", f"semantic_judge_model={args.judge[1]}"] if args.judge else []
        eval_decontam(args.part, not args.off, enc + judge + args.set_opt, args.diag,
                      args.misses and args.part == "tune", args.source)
    if args.which in ("dedup", "both"):
        recheck = tuple(RECHECK) if args.recheck == "" else tuple(x for x in args.recheck.split(",") if x != "none")
        eval_dedup(args.part, args.set_opt, args.diag, args.model, args.no_graded, recheck,
                   args.misses and args.part == "tune", args.dedup_static, args.precision, args.max_tokens,
                   args.source, tuple(args.judge) if args.judge else None)


if __name__ == "__main__":
    main()
