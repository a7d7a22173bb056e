"""Dedup step 3 (one task): check LSH candidates, cluster problems, decide every row."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from datatrove.data import DocumentsPipeline
from datatrove.pipeline.base import PipelineStep

from cotforge.curate.dedup.config import DedupConfig
from cotforge.curate.dedup.core import unpack_order
from cotforge.curate.dedup.pairs.code import CONFLICT_REASONS, partial_agreement
from cotforge.curate.dedup.pairs.verdict import REJECT_REASONS, candidate_verdict, release_word_tables
from cotforge.curate.dedup.workdir import DECISION_DTYPE, KEY_DTYPE, input_file, key_groups
from cotforge.curate.io.budget import release_arrow_memory, trim_process_memory
from cotforge.curate.text.columns import normalize_list
from cotforge.curate.text.embed import task_threads
from cotforge.curate.text.hashing import sorted_lookup

CHECK_PAIRS = 25_000  # candidate pairs whose prompts are held at once in the cluster step (~30 MB)
POOL_PAIRS = 10_000  # fewer candidate pairs are checked in the task's own process (a pool costs ~0.5 s to start)


def read_pair_ends(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """The distinct candidate pairs of datatrove's `.dups` files (rank1, idx1, rank2, idx2) as two arrays of
    packed ends (rank << 32 | idx), sorted by (end 1, end 2). Merged one band file at a time: a pair found in
    many bands is held once, so memory follows the distinct pairs (16 B each), not the raw ones (one per band
    that matched: ~15x more on near copies)."""
    a_all, b_all = np.zeros(0, np.uint64), np.zeros(0, np.uint64)
    for f in sorted(folder.glob("*.dups")):
        if not f.stat().st_size:
            continue
        p = np.fromfile(f, dtype="<u4").reshape(-1, 4)
        a = np.concatenate([a_all, _pack(p[:, 0], p[:, 1])])
        b = np.concatenate([b_all, _pack(p[:, 2], p[:, 3])])
        del p, a_all, b_all
        order = np.lexsort((b, a))
        a, b = a[order], b[order]
        del order
        first = np.ones(len(a), dtype=bool)
        first[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
        a_all, b_all = a[first], b[first]
        del a, b, first
    return a_all, b_all


def _pack(rank: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """One uint64 per (rank, idx) end: rank << 32 | idx (the order of (rank, idx) tuples)."""
    return (rank.astype(np.uint64) << np.uint64(32)) | idx.astype(np.uint64)


def _read_pairs(folder: Path) -> np.ndarray:
    """`read_pair_ends` as (rank1, idx1, rank2, idx2) rows (uint32)."""
    a, b = read_pair_ends(folder)
    mask = np.uint64(0xFFFFFFFF)
    return np.stack([a >> np.uint64(32), a & mask, b >> np.uint64(32), b & mask], axis=1).astype(np.uint32)


def _head_keys(work: Path, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(problem key, number key) of each packed end (rank << 32 | idx), from the head records of one task at a
    time (heads/RRRRR.npy, sorted by idx)."""
    pkey, num = np.zeros(len(ends), np.uint64), np.zeros(len(ends), np.uint64)
    for r, sel in key_groups(ends >> np.uint64(32)):
        head = np.load(work / "heads" / f"{r:05d}.npy")
        pos = np.searchsorted(head["idx"], (ends[sel] & np.uint64(0xFFFFFFFF)).astype(np.uint32))
        pkey[sel], num[sel] = head["pkey"][pos], head["num"][pos]
    return pkey, num


def cut_bridges(lo: np.ndarray, hi: np.ndarray, partial: np.ndarray, clo: np.ndarray,
                chi: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Accepted edges (lo, hi) without the `partial` ones of every component that holds both ends of a conflict
    pair (clo, chi): a scrape without constraints / examples matches both the problem and its "II" version, and
    would join the two in one cluster. Rounds until no component holds a conflict (removing edges only splits
    components). Returns the edges left and how many were cut."""
    cut = 0
    while len(clo) and partial.any():
        nodes, inv = np.unique(np.concatenate([lo, hi, clo, chi]), return_inverse=True)
        n, m = len(lo), len(clo)
        comp = _components(len(nodes), inv[:n], inv[n:2 * n])
        ca, cb = comp[inv[2 * n:2 * n + m]], comp[inv[2 * n + m:]]
        drop = partial & np.isin(comp[inv[:n]], ca[ca == cb])
        if not drop.any():
            break
        cut += int(drop.sum())
        lo, hi, partial = lo[~drop], hi[~drop], partial[~drop]
    return lo, hi, cut


def _components(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Connected-component label of each of n nodes given undirected edges a-b (scipy csgraph)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    m = coo_matrix((np.ones(len(a), dtype=np.int8), (a, b)), shape=(n, n))
    return connected_components(m, directed=False)[1]


def read_prompts(work: Path, ends: np.ndarray, cfg: DedupConfig) -> dict[int, tuple[str, str]]:
    """(normalised, raw) prompts of the given packed ends, read task by task (only the `prompt` column)."""
    ends = np.unique(ends)
    out: dict[int, tuple[str, str]] = {}
    for r, at in key_groups(ends >> np.uint64(32)):
        sel = ends[at]
        col = pq.read_table(work / "input" / input_file(int(r)), columns=["prompt"])["prompt"]
        prompts = col.take(pa.array(sel & np.uint64(0xFFFFFFFF))).to_pylist()
        norm = normalize_list(prompts, cfg.norm, cfg.text_kernel)
        out.update(zip(sel.tolist(), zip(norm, prompts, strict=True), strict=True))
    return out


def check_pairs(work: Path, cfg: DedupConfig, a: np.ndarray, b: np.ndarray) -> tuple[list[str | None], np.ndarray]:
    """The graded check of candidate pairs (packed ends a[i], b[i]), with their prompts read once: each pair's
    reason (None: same problem) and, for the accepted ones, whether they agree only partly (code sections)."""
    texts = read_prompts(work, np.concatenate([a, b]), cfg)
    whys: list[str | None] = []
    partial = np.zeros(len(a), dtype=bool)
    for i, (x, y) in enumerate(zip(a.tolist(), b.tolist(), strict=True)):
        ta, tb = texts[x], texts[y]  # views are built per pair, not kept: their tokens would hold O(pairs) memory
        why = candidate_verdict(ta[0], tb[0], cfg, ta[1], tb[1])
        whys.append(why)
        if not why:
            partial[i] = partial_agreement(ta[1], tb[1], cfg)
    return whys, partial


def _chunks(idx: np.ndarray, cpus: int) -> list[np.ndarray]:
    """Candidate pairs `idx` in chunks of at most CHECK_PAIRS, and at least `cpus` chunks of about equal size
    when there are POOL_PAIRS or more, so every CPU of the task gets a share."""
    per = CHECK_PAIRS if cpus < 2 or len(idx) < POOL_PAIRS else min(CHECK_PAIRS, -(-len(idx) // cpus))
    return [idx[c:c + per] for c in range(0, len(idx), per)]


def _map_checks(work: Path, cfg: DedupConfig, ea: np.ndarray, eb: np.ndarray,
                chunks: list[np.ndarray]) -> Iterator[tuple[list[str | None], np.ndarray]]:
    """`check_pairs` of every chunk, in order. With several CPUs for this task (datatrove's cpus per task) and
    several chunks, a pool of that many processes checks them. The pool's processes come from a fork server
    that preloads the text kernel: this process has run polars, whose thread pool a forked copy would inherit
    half-alive. The verdicts are pure functions of the two prompts, so they are the same as in one process."""
    cpus = min(task_threads() or 1, len(chunks))
    if cpus < 2:
        for c in chunks:
            yield check_pairs(work, cfg, ea[c], eb[c])
        return
    import multiprocess

    from cotforge.curate.engine.executor import FORKSERVER_PRELOAD

    ctx = multiprocess.get_context("forkserver")
    ctx.set_forkserver_preload(list(FORKSERVER_PRELOAD))
    with ctx.Pool(cpus) as pool:
        yield from pool.imap(_check_args, [(work, cfg, ea[c], eb[c]) for c in chunks])


def _check_args(args: tuple) -> tuple[list[str | None], np.ndarray]:
    """`check_pairs` of one pool job."""
    return check_pairs(*args)


def _apply(chunk: np.ndarray, whys: list[str | None], part: np.ndarray, ok: np.ndarray, conflict: np.ndarray,
           partial: np.ndarray, stats: Counter) -> None:
    """Mark the checked pairs of `chunk` ok / conflict / partial in place and count the reasons."""
    for i, why, p in zip(chunk.tolist(), whys, part.tolist(), strict=True):
        if why:
            ok[i] = False
            conflict[i] = why in CONFLICT_REASONS
            stats["pairs_below_threshold" if why == "below_threshold" else f"pairs_rejected_{why}"] += 1
            stats["pairs_rejected_edit_guard"] += why != "below_threshold"
        else:
            partial[i] = p


class ProblemCluster(PipelineStep):
    """One task: check LSH candidates, cluster problems, pick representatives, decide every row.

    Candidate pairs (O(candidates) memory, as numbers) are mapped to problem keys through the tasks' head files,
    checked (number guard, graded pair check of curate/dedup/pairs/text.py) once per distinct problem pair, in
    chunks of CHECK_PAIRS pairs ordered by task whose prompts are read per chunk (in a pool of the task's CPUs
    when there are POOL_PAIRS pairs or more: `_map_checks`), and joined into connected
    components. The per-row work then streams over the key partitions (all rows of a problem key
    are in one partition, ~PARTITION_ROWS rows each): pass 1 finds the first row (preference order) of each
    clustered problem, pass 2 marks rows `near_duplicate` (their problem's cluster is represented by another
    problem) or `exact_duplicate` (an earlier row has the same normalised prompt and response) and appends
    them to per-task decision files. Writes `cluster_stats.json`."""

    name = "cotforge problem clusters"
    type = "🫂 - DEDUP"

    def __init__(self, work: str, tasks: int, cfg: DedupConfig, partitions: int = 1):
        super().__init__()
        self.work, self.tasks, self.cfg, self.partitions = work, tasks, cfg, partitions

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        assert world_size == 1, "ProblemCluster runs as a single task"
        with self.track_time():
            stats = self._cluster(Path(self.work))
            release_word_tables()  # the step runs once: the filter step after it (same process) needs none
            trim_process_memory()
        for k, v in stats.items():
            self.stat_update(k, value=v)
        return
        yield

    def _cluster(self, work: Path) -> dict[str, int]:
        stats: Counter[str] = Counter()
        lo, hi = self._checked_edges(work, stats)
        merged, target = self._representatives(work, lo, hi, stats)
        self._decide(work, merged, target, stats)
        keys = ("rows", "problems", "candidate_pairs", "pairs_rejected_number_guard", "pairs_rejected_edit_guard",
                *(f"pairs_rejected_{r}" for r in REJECT_REASONS if r != "below_threshold"), "pairs_below_threshold",
                "pairs_accepted", "pairs_cut_as_bridges", "clusters", "problems_merged", "exact_duplicate", "near_duplicate")
        out = {k: int(stats[k]) for k in keys}
        out["partitions"] = self.partitions
        if self.cfg.semantic:
            out.update({k: int(v) for k, v in sorted(stats.items()) if k.startswith("semantic_")})
        (work / "cluster_stats.json").write_text(json.dumps(out, indent=2, sort_keys=True))
        return out

    def _checked_edges(self, work: Path, stats: Counter) -> tuple[np.ndarray, np.ndarray]:
        """Problem-key pairs (lo, hi) of the LSH candidates that pass the guards (one check per problem pair).

        Held per distinct candidate pair: its packed ends and problem keys and three flags (~36 B); the head
        records of one task at a time map ends to keys; prompts are read CHECK_PAIRS pairs at a time."""
        ea, eb = read_pair_ends(work / "buckets")
        ka, num_a = _head_keys(work, ea)
        kb, num_b = _head_keys(work, eb)
        same_num = num_a == num_b
        del num_a, num_b
        diff = ka != kb  # two heads of one problem (an exact copy in another task) are no candidate
        ea, eb, ka, kb, same_num = ea[diff], eb[diff], ka[diff], kb[diff], same_num[diff]
        del diff
        swap = ka > kb  # end a: the one with the smaller problem key
        ea, eb = np.where(swap, eb, ea), np.where(swap, ea, eb)
        ka, kb = np.where(swap, kb, ka), np.where(swap, ka, kb)
        del swap
        order = np.lexsort((kb, ka))  # stable: the first head pair (in end order) of each problem pair
        first = np.ones(len(order), dtype=bool)
        first[1:] = (ka[order][1:] != ka[order][:-1]) | (kb[order][1:] != kb[order][:-1])
        keep = order[first]
        del order, first
        ea, eb, ka, kb, same_num = ea[keep], eb[keep], ka[keep], kb[keep], same_num[keep]
        del keep
        stats["candidate_pairs"] = len(ea)
        ok = same_num if self.cfg.number_guard else np.ones(len(ea), dtype=bool)
        stats["pairs_rejected_number_guard"] = int((~ok).sum())
        partial, conflict = np.zeros(len(ea), dtype=bool), np.zeros(len(ea), dtype=bool)
        if ok.any() and (self.cfg.edit_guard or self.cfg.threshold > 0):
            idx = np.flatnonzero(ok)
            idx = idx[np.lexsort((eb[idx] >> np.uint64(32), ea[idx] >> np.uint64(32)))]  # by task: few shards
            chunks = _chunks(idx, task_threads() or 1)  # prompts of one chunk at a time: bounded memory
            for chunk, (whys, part) in zip(chunks, _map_checks(work, self.cfg, ea, eb, chunks), strict=True):
                _apply(chunk, whys, part, ok, conflict, partial, stats)
                release_arrow_memory()  # the chunk's prompt columns
        lo, hi, part = ka[ok], kb[ok], partial[ok]
        if self.cfg.semantic:  # embedding-neighbour pairs beside the LSH ones (dedup/semantic.py)
            from cotforge.curate.dedup.semantic import semantic_edges

            slo, shi = semantic_edges(work, self.tasks, self.cfg, stats)
            lo, hi = np.concatenate([lo, slo]), np.concatenate([hi, shi])
            part = np.concatenate([part, np.zeros(len(slo), dtype=bool)])
        lo, hi, cut = cut_bridges(lo, hi, part, ka[conflict], kb[conflict])
        stats["pairs_accepted"] = len(lo)
        stats["pairs_cut_as_bridges"] = cut
        return lo, hi

    def _partition(self, work: Path, p: int) -> np.ndarray:
        files = sorted((work / "keys" / f"{p:04d}").glob("*.bin"))
        parts = [np.fromfile(f, dtype=KEY_DTYPE) for f in files]
        return np.concatenate(parts) if parts else np.zeros(0, KEY_DTYPE)

    def _representatives(self, work: Path, lo: np.ndarray, hi: np.ndarray,
                         stats: Counter) -> tuple[np.ndarray, np.ndarray]:
        """(sorted problem keys merged into another problem, the kept row's order key for each)."""
        if not len(lo):
            return np.zeros(0, np.uint64), np.zeros(0, np.uint64)
        nodes, inv = np.unique(np.concatenate([lo, hi]), return_inverse=True)
        comp = _components(len(nodes), inv[: len(lo)], inv[len(lo):])
        head = np.full(len(nodes), np.iinfo(np.uint64).max, dtype=np.uint64)
        part_of = nodes % np.uint64(self.partitions)
        for p in np.unique(part_of):  # pass 1: first row (preference order) of each clustered problem
            keys = self._partition(work, int(p))
            pos, hit = sorted_lookup(nodes, keys["pkey"])
            np.minimum.at(head, pos[hit], keys["order"][hit])
        best = np.full(comp.max() + 1, np.iinfo(np.uint64).max, dtype=np.uint64)
        np.minimum.at(best, comp, head)
        merged = head != best[comp]
        stats["clusters"] = int(comp.max() + 1)
        stats["problems_merged"] = int(merged.sum())
        return nodes[merged], best[comp][merged]

    def _decide(self, work: Path, merged: np.ndarray, target: np.ndarray, stats: Counter) -> None:
        """Pass 2 over the key partitions: the removed rows, appended to per-task decision files."""
        out = work / "decisions"
        out.mkdir(parents=True, exist_ok=True)
        for r in range(self.tasks):
            (out / f"{r:05d}.bin").write_bytes(b"")
        for p in range(self.partitions):
            keys = self._partition(work, p)
            stats["rows"] += len(keys)
            stats["problems"] += len(np.unique(keys["pkey"]))
            pos, near = sorted_lookup(merged, keys["pkey"])
            tgt = np.where(near, target[pos] if len(target) else 0, 0).astype(np.uint64)
            rest = np.flatnonzero(~near)
            srt = rest[np.lexsort((keys["order"][rest], keys["pair"][rest]))]
            pair = keys["pair"][srt]
            later = np.zeros(len(srt), dtype=bool)  # not the first row (preference order) of its pair key
            later[1:] = pair[1:] == pair[:-1]
            group_start = np.maximum.accumulate(np.where(~later, np.arange(len(srt)), 0))
            exact = srt[later]
            tgt[exact] = keys["order"][srt[group_start[later]]]
            removed = np.concatenate([np.flatnonzero(near), exact])
            stats["near_duplicate"] += int(near.sum())
            stats["exact_duplicate"] += len(exact)
            self._append(out, keys["order"][removed], near[removed], tgt[removed])

    @staticmethod
    def _append(out: Path, order: np.ndarray, near: np.ndarray, target: np.ndarray) -> None:
        """Append decision records to the files of the tasks the rows belong to."""
        if not len(order):
            return
        rank, idx = unpack_order(order)
        dec = np.empty(len(order), dtype=DECISION_DTYPE)
        dec["idx"], dec["near"], dec["target"] = idx, near, target
        srt = np.argsort(rank, kind="stable")
        ranks, starts = np.unique(rank[srt], return_index=True)
        for r, s, e in zip(ranks, starts, [*starts[1:], len(srt)], strict=True):
            with open(out / f"{int(r):05d}.bin", "ab") as f:
                f.write(dec[srt[s:e]].tobytes())


__all__ = ["ProblemCluster"]
