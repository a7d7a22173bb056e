"""The semantic tier of dedup: candidate pairs from embedding neighbours, beside MinHash.

MinHash finds near-copies; a problem scraped twice with edited wording shares too few shingles. This tier
embeds every distinct prompt (`curate/text/embed.py`), takes each prompt's `semantic_top_k` nearest prompts
by cosine (exact search: blocks of a matrix product, `semantic_block` rows at a time), and keeps a pair only
when the numbers- and question-aware pair check says it is one problem in other words
(`curate/dedup/pairs/semantic.py`, both ways: the same numbers, the same question). The graded check of the
MinHash pairs (`curate/dedup/pairs.py`) decides first: a pair it merges merges unless `veto_verdict` finds
another formula, alternative or condition in it (the graded check merged such look-alikes of real
problems once the tier proposed them; MinHash pairs outside the tier are not re-judged); a pair it keeps apart for a
changed variable or code section stays apart; a pair it rejects for rewording alone (`REWORDING_REASONS`: too
many words replaced, too few shared n-grams, content words replaced) or for a changed number, name, question or
formula found by its sentence-aligned checks (`RECHECK`) goes to the semantic pair check, but only when the two
texts keep what those checks align up to moving whole sentences (`order_kept`: each sentence's numbers in
order, each formula's tokens in order, each negation with its word; no figure code), since real look-alikes
swap two numbers or two formulas. An edited copy (`edited_meaning`: one or two short runs of words changed,
where a clause was added or dropped or a comparison carrier or quantifier replaced: "3 fewer" -> "3 more")
keeps the graded check's reason, and vetoes a graded merge: hand-written look-alikes are such edits (docs/semantic.md,
round 7). Precision first: the bounds are stricter than those of decontamination (a wrong merge loses a
training row).

`semantic_encoder: static+rerank` (the fast path): the embed step writes static vectors (`StaticEmbedder`,
thousands of texts/s), the neighbour search keeps pairs at a static cosine >= `semantic_static_cosine`
(recall-oriented), and only the problems in such a pair go through the transformer, whose cosine replaces the
static one before the checks above (pairs below `semantic_cosine` drop out): where the candidates are the same,
the verdicts are those of the transformer path.
"""

from __future__ import annotations

import difflib
import logging
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from datatrove.data import DocumentsPipeline
from datatrove.pipeline.base import PipelineStep

from cotforge.curate.dedup.config import DedupConfig
from cotforge.curate.dedup.pairs.lexicon import CARRIERS, FUNCTION_WORDS, INSTRUCTION_WORDS
from cotforge.curate.dedup.pairs.semantic import (
    PairThresholds,
    order_kept,
    pair_verdict,
    question_of,
    veto_verdict,
)
from cotforge.curate.dedup.pairs.verdict import candidate_verdict
from cotforge.curate.dedup.workdir import input_file
from cotforge.curate.text.embed import Embedder, StaticEmbedder, embedder_for, exact_cosine, nearest
from cotforge.curate.text.judge import Judge, make_judge, says_yes
from cotforge.curate.text.normalize import normalize

log = logging.getLogger(__name__)

REWORDING_REASONS = frozenset({"reworded_too_much", "below_threshold", "content_changed"})
# graded reasons the semantic check may overrule: the graded number, question, name and formula checks align the
# two texts sentence by sentence, which a heavy rewording breaks, while the semantic check compares numbers,
# formulas and strict carriers over the whole texts and the question sentences by meaning (chosen on
# bench/semantic/sets.py's tuning part: recall 0.759 -> 0.933 at precision 0.980 -> 0.987)
RECHECK: frozenset[str] = frozenset({"number_changed", "question_changed", "name_changed", "math_changed"})


EDIT_BLOCKS = 2  # two texts that differ in at most this many runs of words may be an edited copy
_EDIT_TOKEN = re.compile(r"\w+|[^\w\s]")
# words whose replacement changes what is counted: quantifiers and the sides of a stock
_QUANTIFIERS = {w: g for g, ws in {"each": "each every per", "both": "both", "either": "either neither",
                                     "only": "only just", "all": "all", "none": "none", "one": "one",
                                     "left": "left remaining"}.items() for w in ws.split()}
_FRAMING = frozenset("word try use facts fact background information info following consider note here".split())
EDIT_TOKENS = 10  # at most this many tokens changed in all: more is a rewording, not an edit


def edited_meaning(a: str, b: str) -> bool:
    """Whether `b` is `a` edited in one or two places (`EDIT_BLOCKS` runs of differing words, at most
    `EDIT_TOKENS` tokens changed in all) where an edit changes meaning: a run of three or more words holding a
    content word added or dropped (a clause: "but one of them dies"; not a framing line such as "please work it
    out"), or a run whose comparison / operation carriers (`lexicon.CARRIERS`: "fewer" -> "more") or
    quantifiers ("$5 each" -> "$5 altogether", "both parents" -> "one parent") differ from those of the run it
    replaces. Such look-alikes keep every number and the question, so the semantic check, which reads whole
    texts, would not see them; on them the graded check's reason stands. A replaced plain word (a synonym) is
    no such edit."""
    ta, tb = _EDIT_TOKEN.findall(a.lower()), _EDIT_TOKEN.findall(b.lower())
    ops = [op for op in difflib.SequenceMatcher(None, ta, tb, autojunk=False).get_opcodes() if op[0] != "equal"]
    if len(ops) > EDIT_BLOCKS:
        return False
    if sum(i2 - i1 + j2 - j1 for _, i1, i2, j1, j2 in ops) > EDIT_TOKENS:
        return False
    for tag, i1, i2, j1, j2 in ops:
        words = ta[i1:i2] + tb[j1:j2]
        content = [w for w in words if len(w) > 2 and w.isalpha() and w not in FUNCTION_WORDS
                   and w not in INSTRUCTION_WORDS and w not in _FRAMING]
        if tag != "replace" and len(words) >= 3 and content:
            return True
        if _marks(ta[i1:i2]) != _marks(tb[j1:j2]):
            return True
    return False


def _marks(words: list[str]) -> set:
    """The carrier groups and quantifiers among `words` (what an edit may not change)."""
    return {CARRIERS[w] for w in words if w in CARRIERS} | {_QUANTIFIERS[w] for w in words if w in _QUANTIFIERS}


def neighbour_pairs(vecs: np.ndarray, top_k: int, min_cosine: float, block: int = 1024,
                    tie: np.ndarray | None = None) -> list[tuple[int, int, float]]:
    """(i, j, cosine) with i < j for each row's `top_k` + 1 nearest other rows at cosine >= `min_cosine`, each
    pair once. Cosines are exact (`embed.nearest`) and ties are broken by `tie` (dedup passes the problem keys),
    so the pairs do not depend on how the rows were split into tasks or blocks."""
    n = len(vecs)
    out: dict[tuple[int, int], float] = {}
    if n < 2:
        return []
    for lo in range(0, n, block):
        idx = np.arange(lo, min(lo + block, n))
        top, cos = nearest(vecs[idx], vecs, top_k + 1, tie=tie, exclude=idx)
        for r, i in enumerate(idx.tolist()):
            for j, c in zip(top[r].tolist(), cos[r].tolist(), strict=True):
                if c >= min_cosine:
                    out[(min(i, j), max(i, j))] = c
    return [(i, j, c) for (i, j), c in sorted(out.items())]


def semantic_pairs(texts: list[str], embedder: Embedder, th: PairThresholds, top_k: int = 5,
                   vecs: np.ndarray | None = None, cfg: DedupConfig | None = None,
                   recheck: frozenset[str] = frozenset()) -> tuple[list[tuple[int, int, float]], dict[str, int]]:
    """The pairs of `texts` the semantic tier merges, and counts per verdict (`merged`, `graded_merged`,
    `graded_<reason>`, `below_cosine`, `number_changed`, `question_changed`). `vecs`: the texts' embeddings when
    the caller has them. `cfg`: the dedup config whose graded check decides first (None: the semantic check only).
    `recheck`: graded reasons besides the rewording ones that the semantic check may overrule."""
    vecs = embedder.encode(texts) if vecs is None else vecs
    return check_pairs(neighbour_pairs(vecs, top_k, th.min_cosine), texts, embedder, th, cfg, recheck)


def _graded(i: int, j: int, texts, norms: dict[int, str], cfg: DedupConfig) -> tuple[str | None, str | None]:
    """(the graded check's verdict on texts i and j, the veto of a graded merge: `veto_verdict`'s reason or
    "edited", None when the merge stands). `norms` caches each text's normal form across pairs."""
    for x in (i, j):
        if x not in norms:
            norms[x] = normalize(texts[x], cfg.norm)
    graded = candidate_verdict(norms[i], norms[j], cfg, texts[i], texts[j])
    if graded is not None:
        return graded, None
    return None, veto_verdict(texts[i], texts[j]) or ("edited" if edited_meaning(texts[i], texts[j]) else None)


def judge_pairs(cands: list[tuple[int, int, float]], texts, judge: Judge, cfg: DedupConfig | None
                ) -> tuple[list[tuple[int, int, float]], dict[str, int]]:
    """With an LLM judge (curate/text/judge.py): the pairs the graded check merges outright (a near-copy no veto
    stops) merge; every other candidate at cosine >= `semantic_judge_cosine` merges when the judge says yes."""
    stats: dict[str, int] = {"candidates": len(cands)}
    merged: list[tuple[int, int, float]] = []
    asks: list[tuple[int, int, float]] = []
    norms: dict[int, str] = {}
    floor = cfg.semantic_judge_cosine if cfg is not None else -1.0
    for i, j, c in cands:
        if cfg is not None and _graded(i, j, texts, norms, cfg) == (None, None):
            merged.append((i, j, c))
            stats["graded_merged"] = stats.get("graded_merged", 0) + 1
            continue
        if c < floor:
            stats["below_judge_cosine"] = stats.get("below_judge_cosine", 0) + 1
        else:
            asks.append((i, j, c))
    answers = judge.answers([(texts[i], texts[j]) for i, j, _ in asks]) if asks else []
    for (i, j, c), answer in zip(asks, answers, strict=True):
        key = "judge_merged" if says_yes(answer) else "judge_kept"
        stats[key] = stats.get(key, 0) + 1
        if key == "judge_merged":
            merged.append((i, j, c))
    stats["merged"] = len(merged)
    return sorted(merged), stats


def check_pairs(cands: list[tuple[int, int, float]], texts, embedder: Embedder, th: PairThresholds,
                cfg: DedupConfig | None = None, recheck: frozenset[str] = frozenset(), graded_only: bool = False,
                judge: Judge | None = None) -> tuple[list[tuple[int, int, float]], dict[str, int]]:
    """The candidate pairs (i, j, cosine) of `texts` (a list or a dict index -> text) that merge, and counts per
    verdict (see `semantic_pairs`). `graded_only`: the pairs the graded check alone merges (a baseline). `judge`:
    an LLM judge decides in place of the semantic pair check (`judge_pairs`)."""
    if judge is not None and not graded_only:
        return judge_pairs(cands, texts, judge, cfg)
    stats: dict[str, int] = {"candidates": len(cands)}
    first: list[tuple[int, int, float]] = []
    merged: list[tuple[int, int, float]] = []
    norms: dict[int, str] = {}
    for i, j, c in cands:
        if cfg is not None:
            graded, veto = _graded(i, j, texts, norms, cfg)
            if veto is not None:
                stats[f"vetoed_{veto}"] = stats.get(f"vetoed_{veto}", 0) + 1
                continue
            if graded is None:
                merged.append((i, j, c))
                stats["graded_merged"] = stats.get("graded_merged", 0) + 1
                continue
            if graded != "below_threshold" and edited_meaning(texts[i], texts[j]):
                stats[f"edited_{graded}"] = stats.get(f"edited_{graded}", 0) + 1
                continue
            if graded_only or (graded not in REWORDING_REASONS and graded not in recheck):
                stats[f"graded_{graded}"] = stats.get(f"graded_{graded}", 0) + 1
                continue
            if graded not in REWORDING_REASONS and not order_kept(texts[i], texts[j]):
                stats["order_changed"] = stats.get("order_changed", 0) + 1
                continue
        why = pair_verdict(texts[i], texts[j], c, None, th, symmetric=True)
        if why is None:
            first.append((i, j, c))
        else:
            stats[why] = stats.get(why, 0) + 1
    rows = sorted({x for i, j, _ in first for x in (i, j)})
    qv = dict(zip(rows, embedder.encode([question_of(texts[r]) for r in rows]), strict=True)) if rows else {}
    for i, j, c in first:
        why = pair_verdict(texts[i], texts[j], c, exact_cosine(qv[i], qv[j]), th, symmetric=True)
        if why is None:
            merged.append((i, j, c))
        else:
            stats[why] = stats.get(why, 0) + 1
    stats["merged"] = len(merged)
    return sorted(merged), stats


class SemanticEmbed(PipelineStep):
    """Dedup step (with `semantic`): embed the task's problem heads (first row of each problem key, from
    heads/RRRRR.npy) that this task embeds for all (`owned_heads`) into semantic/RRRRR.npy (float16; static vectors
    with `static+rerank`), their positions in heads/RRRRR.npy in semantic/RRRRR.heads.npy; the cluster step
    searches them."""

    name = "cotforge semantic embeddings"
    type = "🫂 - DEDUP"

    def __init__(self, work: str, cfg: DedupConfig):
        super().__init__()
        self.work, self.cfg = work, cfg

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        work = Path(self.work)
        with self.track_time():
            head = np.load(work / "heads" / f"{rank:05d}.npy")
            own = owned_heads(work, rank, head["pkey"], world_size)
            col = pq.read_table(work / "input" / input_file(rank), columns=["prompt"])["prompt"]
            prompts = col.take(pa.array(head["idx"][own].astype(np.int64))).to_pylist() if len(own) else []
            vecs = encode_heads([p or "" for p in prompts], self.cfg)
            (work / "semantic").mkdir(exist_ok=True)
            np.save(work / "semantic" / f"{rank:05d}.npy", vecs.astype(np.float16))
            np.save(work / "semantic" / f"{rank:05d}.heads.npy", own)
        self.stat_update("embedded", value=len(prompts))
        self.stat_update("left_to_other_tasks", value=len(head) - len(own))
        return
        yield


def owned_heads(work: Path, rank: int, pkeys: np.ndarray, tasks: int) -> np.ndarray:
    """Positions of the task's heads whose problem this task embeds: of the tasks holding a problem key, the one
    with the least `_rank_score` (rendezvous hashing: each problem is embedded once across the tasks, the work
    spread evenly), so the neighbour search neither repeats work nor spends its `top_k` on copies of one
    problem from several tasks (equal problem keys never pair)."""
    keys = pkeys.astype(np.uint64)
    mine = _rank_score(keys, rank)
    keep = np.ones(len(keys), dtype=bool)
    for r in range(tasks):
        if r != rank:
            other = np.isin(keys, np.load(work / "heads" / f"{r:05d}.npy")["pkey"].astype(np.uint64))
            keep &= ~other | (mine < _rank_score(keys, r)) | ((mine == _rank_score(keys, r)) & (rank < r))
    return np.flatnonzero(keep).astype(np.int64)


def _rank_score(keys: np.ndarray, rank: int) -> np.ndarray:
    """A pseudo-random uint64 per (problem key, rank) (splitmix64 of key ^ a rank constant)."""
    with np.errstate(over="ignore"):
        x = keys ^ np.uint64((rank + 1) * 0x9E3779B97F4A7C15 % 2**64)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def make_embedder(cfg: DedupConfig) -> Embedder:
    """The configured encoder."""
    return embedder_for(cfg)


def encode_heads(texts: list[str], cfg: DedupConfig) -> np.ndarray:
    """The vectors the cluster step searches: the transformer's, or with `static+rerank` the static embedding
    distilled from it (uniform token weights, so vectors of different tasks compare)."""
    emb = make_embedder(cfg)
    return StaticEmbedder(emb).encode(texts) if cfg.semantic_encoder == "static+rerank" else emb.encode(texts)


def rerank(cands: list[tuple[int, int, float]], texts, embedder: Embedder, min_cosine: float
           ) -> list[tuple[int, int, float]]:
    """Static candidate pairs re-scored by the transformer: (i, j, transformer cosine) for those at >= `min_cosine`
    (only the texts in a candidate pair are embedded), so the pair check sees the cosine it sees without the
    static path."""
    rows = sorted({x for i, j, _ in cands for x in (i, j)})
    if not rows:
        return []
    v = dict(zip(rows, embedder.encode([texts[r] for r in rows]), strict=True))
    out = [(i, j, exact_cosine(v[i], v[j])) for i, j, _ in cands]
    return [(i, j, c) for i, j, c in out if c >= min_cosine]


def thresholds(cfg: DedupConfig) -> PairThresholds:
    """The pair-check bounds of a dedup config (the same numbers both ways: `max_extra_numbers` 0)."""
    return PairThresholds(cfg.semantic_cosine, cfg.semantic_question_cosine, 0)


def semantic_edges(work: Path, tasks: int, cfg: DedupConfig, stats) -> tuple[np.ndarray, np.ndarray]:
    """Problem-key pairs (lo, hi) the semantic tier merges: every problem's `semantic_top_k` nearest problems
    across the corpus (exact cosine search over one head per problem key, see `owned_heads`), checked by `check_pairs` (graded check first). Counts go to `stats` as
    semantic_<verdict>."""
    heads = [np.load(work / "heads" / f"{r:05d}.npy")[np.load(work / "semantic" / f"{r:05d}.heads.npy")]
             for r in range(tasks)]
    vecs = np.concatenate([np.load(work / "semantic" / f"{r:05d}.npy") for r in range(tasks)]).astype(np.float32)
    rank = np.concatenate([np.full(len(h), r, dtype=np.int64) for r, h in enumerate(heads)])
    idx = np.concatenate([h["idx"].astype(np.int64) for h in heads])
    pkey = np.concatenate([h["pkey"] for h in heads])
    static = cfg.semantic_encoder == "static+rerank"
    judge = make_judge(cfg)
    floor = cfg.semantic_static_cosine if static else cfg.semantic_cosine
    if judge is not None:
        floor = min(floor, cfg.semantic_judge_cosine)
    cands = [(i, j, c) for i, j, c in neighbour_pairs(vecs, cfg.semantic_top_k, floor, tie=pkey)
             if pkey[i] != pkey[j]]
    need = sorted({x for i, j, _ in cands for x in (i, j)})
    texts: dict[int, str] = {}
    for r in sorted({int(rank[x]) for x in need}):
        sel = [x for x in need if rank[x] == r]
        col = pq.read_table(work / "input" / input_file(r), columns=["prompt"])["prompt"]
        texts.update(zip(sel, (p or "" for p in col.take(pa.array(idx[sel])).to_pylist()), strict=True))
    emb = make_embedder(cfg)
    if static:
        stats["semantic_static_candidates"] += len(cands)
        cands = rerank(cands, texts, emb, min(cfg.semantic_cosine, cfg.semantic_judge_cosine) if judge
                       else cfg.semantic_cosine)
    merged, got = check_pairs(cands, texts, emb, thresholds(cfg), cfg, RECHECK, judge=judge)
    for k, v in got.items():
        stats[f"semantic_{k}"] += v
    lo = np.array([min(pkey[i], pkey[j]) for i, j, _ in merged], dtype=np.uint64)
    hi = np.array([max(pkey[i], pkey[j]) for i, j, _ in merged], dtype=np.uint64)
    return lo, hi
