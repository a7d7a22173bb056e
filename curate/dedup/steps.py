"""The datatrove steps of problem-level dedup (each one executor run; see curate/dedup.py for the flow).

Work-folder layout (every file is per task or per partition, so no step holds all rows in memory):

    input/part-RRRRR.parquet        ordered work shards (curate/ingest.py), one per task
    sigs/bucket_BBB/RRRRR.minhash.sig   datatrove stage-1 band files of the problem heads (sorted records)
    heads/RRRRR.npy                 HEAD_DTYPE per problem head of the task (index, problem key, number key)
    keys/PPPP/RRRRR.bin             KEY_DTYPE per row, partitioned by problem key (pkey % partitions)
    buckets/BBBBB_00.dups           candidate pairs (datatrove `.dups` format: rank, idx, rank, idx)
    decisions/RRRRR.bin             DECISION_DTYPE per removed row of the task
    kept/RRRRR.parquet, removed/RRRRR.parquet   per-task outputs, collected in rank order
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from datatrove.data import DocumentsPipeline
from datatrove.io import get_datafolder
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.dedup.minhash import MinhashDedupBuckets, MinhashDedupSignature
from datatrove.pipeline.filters.base_filter import BaseFilter
from datatrove.utils.batching import batched

from cotforge.curate.dedup.config import DedupConfig
from cotforge.curate.dedup.core import (
    band_signatures,
    batch_keys,
    candidate_verdict,
    normalize_many,
    number_keys,
    pack_order,
    priority_of,
    release_arrow_memory,
    unpack_order,
)
from cotforge.curate.engine import NormTokenizer, quiet_datatrove
from cotforge.curate.executors.budget import MemoryBudget, batch_rows_of
from cotforge.curate.text.hashing import sorted_lookup

log = logging.getLogger(__name__)

KEY_DTYPE = np.dtype([("pkey", "<u8"), ("pair", "<u8"), ("order", "<u8")])
HEAD_DTYPE = np.dtype([("idx", "<u4"), ("pkey", "<u8"), ("num", "<u8")])
DECISION_DTYPE = np.dtype([("idx", "<u4"), ("near", "u1"), ("target", "<u8")])
BATCH_ROWS = 4096  # rows per batch in the signature step (fewer for long rows: `batch_bytes`)
DEFAULT_BATCH_BYTES = MemoryBudget().batch_bytes
PARTITION_ROWS = 1 << 17  # rows per key partition in the cluster step (bounds its memory)
BUCKET_CHUNK = 1 << 18  # band records per hash-range chunk in the bucket step
ALL_PAIRS_RUN = 32  # runs of equal band hashes up to this long give all their pairs, longer ones neighbours


def partitions_for(rows: int) -> int:
    """Number of key partitions for `rows` input rows (each partition holds ~PARTITION_ROWS rows)."""
    return max(1, -(-rows // PARTITION_ROWS))


def input_file(rank: int) -> str:
    """Work shard of task `rank` (ingest names them part-RRRRR.parquet; datatrove readers sort them)."""
    return f"part-{rank:05d}.parquet"


# --------------------------------------------------------------------------- step 1: keys + signatures


class ProblemSignature(MinhashDedupSignature):
    """datatrove MinHash stage 1 on problem heads, plus per-row exact keys, in batches of BATCH_ROWS rows.

    For each row: problem key = hash(normalize(prompt)), pair key = hash(norm prompt + norm response),
    number key = hash(sorted numbers of the prompt), preference order (source priority, task, index). Only
    the first row of each problem key within the task gets a MinHash signature (later rows are the same
    problem; the cluster step merges keys across tasks). Rows come from the task's work shard, read by
    column (`input_folder` set: no per-row Document), or from a datatrove reader's Documents (`data`)."""

    name = "cotforge problem keys + MinHash signatures"

    def __init__(self, sig_folder: str, work: str, cfg: DedupConfig, partitions: int = 1,
                 input_folder: str | None = None):
        super().__init__(sig_folder, config=cfg.minhash_config(), language=NormTokenizer(cfg.norm))
        self.work, self.cfg, self.partitions, self.input_folder = work, cfg, partitions, input_folder

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        with self.track_time():
            batches = self._shard_batches(rank) if self.input_folder else self._doc_batches(data)
            self._sign_task(batches, rank)
            release_arrow_memory()
        return
        yield  # a generator, like every datatrove step

    def _shard_batches(self, rank: int) -> Iterator[tuple[list, list, list]]:
        """(prompts, responses, sources) of the task's work shard, BATCH_ROWS at a time, by column."""
        folder = get_datafolder(self.input_folder)
        with folder.open(input_file(rank), "rb") as f:
            pf = pq.ParquetFile(f)  # batches of BATCH_ROWS rows, fewer when rows are long (memory budget)
            rows = batch_rows_of(pf.metadata, getattr(self, "batch_bytes", DEFAULT_BATCH_BYTES), BATCH_ROWS)
            for b in pf.iter_batches(batch_size=rows, columns=["prompt", "response", "source"]):
                yield b.column(0).to_pylist(), b.column(1).to_pylist(), b.column(2).to_pylist()

    @staticmethod
    def _doc_batches(data: DocumentsPipeline) -> Iterator[tuple[list, list, list]]:
        """The same batches from datatrove Documents (text = prompt, metadata = the other columns)."""
        for docs in batched(data or [], BATCH_ROWS):
            yield ([d.text for d in docs], [d.metadata.get("response") for d in docs],
                   [str(d.metadata.get("source", "")) for d in docs])

    def _sign_task(self, batches: Iterator[tuple[list, list, list]], rank: int) -> None:
        """Keys for every row, signatures for new problems; writes the task's key, head and band files."""
        seen: set[int] = set()
        prio_of: dict[str, int] = {}
        keys, heads, sigs = [], [], []
        start = 0
        for prompts, responses, sources in batches:
            kb = batch_keys(prompts, responses, self.cfg.norm, with_numbers=False)
            idx = np.arange(start, start + len(prompts), dtype=np.int64)
            start += len(prompts)
            prio = np.fromiter((prio_of.setdefault(s, priority_of(s or "", self.cfg.source_priority))
                                for s in sources), dtype=np.uint64, count=len(sources))
            rec = np.empty(len(idx), dtype=KEY_DTYPE)
            rec["pkey"], rec["pair"], rec["order"] = kb.pkey, kb.pair, pack_order(prio, rank, idx)
            keys.append(rec)
            new = [i for i, k in enumerate(kb.pkey.tolist()) if not (k in seen or seen.add(k))]
            texts = [kb.norm_prompts[i] for i in new]
            num = number_keys(texts)
            sig, has = band_signatures(texts, num, self.cfg)
            new_arr = np.asarray(new, dtype=np.int64)[has]
            head = np.empty(len(new_arr), dtype=HEAD_DTYPE)
            head["idx"], head["pkey"], head["num"] = idx[new_arr], kb.pkey[new_arr], num[has]
            heads.append(head)
            sigs.append(sig[has])
        self.stat_update("rows", value=start)
        self._write_keys(np.concatenate(keys) if keys else np.zeros(0, KEY_DTYPE), rank)
        head = np.concatenate(heads) if heads else np.zeros(0, HEAD_DTYPE)
        with get_datafolder(self.work).open(f"heads/{rank:05d}.npy", "wb") as f:
            np.save(f, head)
        self._write_bands(np.concatenate(sigs) if sigs else np.zeros((0, self.cfg.num_perm), np.uint64),
                          head["idx"], rank)

    def _write_keys(self, keys: np.ndarray, rank: int) -> None:
        """The task's key records, one file per key partition (pkey % partitions)."""
        part = (keys["pkey"] % np.uint64(self.partitions)).astype(np.int64)
        order = np.argsort(part, kind="stable")
        bounds = np.searchsorted(part[order], np.arange(self.partitions + 1))
        folder = get_datafolder(self.work)
        for p in range(self.partitions):
            with folder.open(f"keys/{p:04d}/{rank:05d}.bin", "wb") as f:
                f.write(keys[order[bounds[p]:bounds[p + 1]]].tobytes())

    def _write_bands(self, sig: np.ndarray, doc_idx: np.ndarray, rank: int) -> None:
        """datatrove's stage-1 files: per band, records (rows_per_band uint64, doc index uint32) sorted."""
        r = self.cfg.rows_per_band
        dtype = np.dtype([(f"field{i + 1}", "<u8") for i in range(r)] + [(f"field{r + 1}", "<u4")])
        for band in range(self.cfg.bands):
            rec = np.empty(len(doc_idx), dtype=dtype)
            for i in range(r):
                rec[f"field{i + 1}"] = sig[:, band * r + i]
            rec[f"field{r + 1}"] = doc_idx
            rec = rec[np.lexsort([rec[n] for n in reversed(dtype.names)])]
            with self.output_folder.open(f"bucket_{band:03d}/{rank:05d}.minhash.sig", "wb") as f:
                f.write(rec.tobytes())


# --------------------------------------------------------------------------- step 2: buckets


class QuietBuckets(MinhashDedupBuckets):
    """datatrove MinHash stage 2 (streaming heap merge of sorted band files), with tidy logging.
    Constant memory but pure Python per record; used with `DedupConfig(streaming_buckets=True)`."""

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1):
        quiet_datatrove()
        return super().run(data, rank, world_size)


class ArrayBuckets(PipelineStep):
    """MinHash stage 2 with numpy: per band, the sorted band files of all tasks are read one hash range
    at a time (ranges of ~BUCKET_CHUNK records, cut by searchsorted on each file's first hash), sorted, and
    each run of equal band hashes gives candidate pairs (`_run_pairs`), in datatrove's `.dups` format (<4I)."""

    name = "cotforge MinHash buckets (numpy)"
    type = "🫂 - DEDUP"

    def __init__(self, sig_folder: str, out_folder: str, cfg: DedupConfig):
        super().__init__()
        self.sig_folder, self.out_folder, self.cfg = sig_folder, out_folder, cfg

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        with self.track_time():
            for band in range(rank, self.cfg.bands, world_size):  # fewer tasks than bands: each takes several
                self._band(band)
        return
        yield

    def _band(self, band: int) -> None:
        r = self.cfg.rows_per_band
        dtype = np.dtype([(f"h{i}", "<u8") for i in range(r)] + [("doc", "<u4")])
        files = sorted(Path(self.sig_folder, f"bucket_{band:03d}").glob("*.minhash.sig"))
        maps = [np.memmap(f, dtype=dtype, mode="r") if f.stat().st_size else np.zeros(0, dtype) for f in files]
        ranks = [int(f.name.split(".")[0]) for f in files]
        total = sum(len(m) for m in maps)
        n_chunks = max(1, -(-total // BUCKET_CHUNK))
        edges = [int(x) for x in np.linspace(0, 1 << 61, n_chunks + 1)]
        out = Path(self.out_folder)
        out.mkdir(parents=True, exist_ok=True)
        n_pairs = 0
        with open(out / f"{band:05d}_00.dups", "wb") as fo:
            for lo, hi in zip(edges[:-1], edges[1:], strict=True):
                parts, fids = [], []
                for m, rk in zip(maps, ranks, strict=True):
                    h0 = m["h0"]
                    a, b = np.searchsorted(h0, np.array([lo, hi], dtype=np.uint64)) if len(m) else (0, 0)
                    if b > a:
                        parts.append(np.array(m[a:b]))
                        fids.append(np.full(b - a, rk, dtype=np.uint32))
                if not parts:
                    continue
                rec, fid = np.concatenate(parts), np.concatenate(fids)
                order = np.lexsort([rec[f"h{i}"] for i in reversed(range(r))])
                rec, fid = rec[order], fid[order]
                same = np.ones(len(rec) - 1, dtype=bool)
                for i in range(r):
                    col = rec[f"h{i}"]
                    same &= col[1:] == col[:-1]
                a, b = _run_pairs(same)
                pairs = np.stack([fid[a], rec["doc"][a], fid[b], rec["doc"][b]], axis=1).astype("<u4")
                fo.write(pairs.tobytes())
                n_pairs += len(pairs)
        del maps
        self.stat_update("total_matches", value=n_pairs)


def _run_pairs(same: np.ndarray, all_pairs_upto: int = ALL_PAIRS_RUN) -> tuple[np.ndarray, np.ndarray]:
    """Candidate pairs (record a, record b) in sorted records, where same[k] says record k+1 has record k's
    band hash. Runs of up to `all_pairs_upto` equal records give all their pairs, so which problem pairs
    get checked does not depend on how many head records each problem has or their order (that is, on the
    task split): a pair rejected by a guard cannot hide another. Longer runs give neighbour pairs only."""
    n = len(same) + 1
    start = np.r_[True, ~same]
    run_id = np.cumsum(start) - 1
    run_len = np.bincount(run_id)[run_id]
    small = run_len <= all_pairs_upto
    a_parts, b_parts = [np.flatnonzero(same & ~small[:-1])], []
    b_parts.append(a_parts[0] + 1)
    for d in range(1, min(int(run_len[small].max(initial=1)), all_pairs_upto)):
        k = np.flatnonzero(small[: n - d] & (run_id[: n - d] == run_id[d:]))
        a_parts.append(k)
        b_parts.append(k + d)
    return np.concatenate(a_parts), np.concatenate(b_parts)


# --------------------------------------------------------------------------- step 3: clusters


def _groups(keys: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(key, positions of that key in `keys`) for each distinct key in increasing order, from one stable
    sort (a scan per key would cost O(len(keys) x keys))."""
    if not len(keys):
        return
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    cuts = np.flatnonzero(np.r_[True, sk[1:] != sk[:-1], True])
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        yield int(sk[a]), order[a:b]


def _read_pairs(folder: Path) -> np.ndarray:
    """All (rank1, idx1, rank2, idx2) candidate pairs from datatrove's `.dups` files, deduplicated."""
    parts = [np.fromfile(f, dtype="<u4").reshape(-1, 4) for f in sorted(folder.glob("*.dups")) if f.stat().st_size]
    if not parts:
        return np.zeros((0, 4), dtype=np.uint32)
    pairs = np.concatenate(parts).astype(np.uint64)
    a, b = (pairs[:, 0] << np.uint64(32)) | pairs[:, 1], (pairs[:, 2] << np.uint64(32)) | pairs[:, 3]
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    first = np.concatenate(([True], (a[1:] != a[:-1]) | (b[1:] != b[:-1])))
    mask = np.uint64(0xFFFFFFFF)
    return np.stack([a[first] >> np.uint64(32), a[first] & mask, b[first] >> np.uint64(32), b[first] & mask],
                    axis=1).astype(np.uint32)


def _components(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Connected-component label of each of n nodes given undirected edges a-b (scipy csgraph)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    m = coo_matrix((np.ones(len(a), dtype=np.int8), (a, b)), shape=(n, n))
    return connected_components(m, directed=False)[1]


class ProblemCluster(PipelineStep):
    """One task: check LSH candidates, cluster problems, pick representatives, decide every row.

    Candidate pairs (O(candidates) memory) are mapped to problem keys through the tasks' head files, checked
    (number guard, edit guard, exact n-gram Jaccard) once per distinct problem pair and joined into
    connected components. The per-row work then streams over the key partitions (all rows of a problem key
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
            release_arrow_memory()
        for k, v in stats.items():
            self.stat_update(k, value=v)
        return
        yield

    def _cluster(self, work: Path) -> dict[str, int]:
        stats: Counter[str] = Counter()
        lo, hi = self._checked_edges(work, stats)
        merged, target = self._representatives(work, lo, hi, stats)
        self._decide(work, merged, target, stats)
        out = {k: int(stats[k]) for k in ("rows", "problems", "candidate_pairs", "pairs_rejected_number_guard",
                                          "pairs_rejected_edit_guard", "pairs_below_threshold", "pairs_accepted",
                                          "clusters", "problems_merged", "exact_duplicate", "near_duplicate")}
        out["partitions"] = self.partitions
        (work / "cluster_stats.json").write_text(json.dumps(out, indent=2, sort_keys=True))
        return out

    def _checked_edges(self, work: Path, stats: Counter) -> tuple[np.ndarray, np.ndarray]:
        """Problem-key pairs (lo, hi) of the LSH candidates that pass the guards (one check per problem pair)."""
        pairs = _read_pairs(work / "buckets").astype(np.int64)
        ends = np.concatenate([pairs[:, :2], pairs[:, 2:]])
        pkey, num = np.zeros(len(ends), np.uint64), np.zeros(len(ends), np.uint64)
        for r, sel in _groups(ends[:, 0]):
            head = np.load(work / "heads" / f"{r:05d}.npy")
            pos = np.searchsorted(head["idx"], ends[sel, 1])
            pkey[sel], num[sel] = head["pkey"][pos], head["num"][pos]
        n = len(pairs)
        ka, kb = pkey[:n], pkey[n:]
        diff = np.flatnonzero(ka != kb)
        swap = ka[diff] > kb[diff]
        a = np.where(swap, n + diff, diff)  # endpoint (row into `ends`) with the smaller problem key
        b = np.where(swap, diff, n + diff)
        _, first = np.unique(np.stack([pkey[a], pkey[b]], axis=1), axis=0, return_index=True)
        a, b = a[first], b[first]
        stats["candidate_pairs"] = len(a)
        ok = num[a] == num[b] if self.cfg.number_guard else np.ones(len(a), dtype=bool)
        stats["pairs_rejected_number_guard"] = int((~ok).sum())
        if ok.any() and (self.cfg.edit_guard or self.cfg.threshold > 0):
            idx = np.flatnonzero(ok)
            texts = self._norm_prompts(work, ends, np.concatenate([a[idx], b[idx]]))
            for i in idx:
                why = candidate_verdict(texts[int(a[i])], texts[int(b[i])], self.cfg)
                if why:
                    ok[i] = False
                    stats[f"pairs_{'rejected_edit_guard' if why == 'edit_guard' else why}"] += 1
        stats["pairs_accepted"] = int(ok.sum())
        return pkey[a[ok]], pkey[b[ok]]

    def _norm_prompts(self, work: Path, ends: np.ndarray, which: np.ndarray) -> dict[int, str]:
        """Normalised prompts of the given endpoints, read task by task (only the `prompt` column)."""
        which = np.unique(which)
        out: dict[int, str] = {}
        for r, at in _groups(ends[which, 0]):
            sel = which[at]
            col = pq.read_table(work / "input" / input_file(int(r)), columns=["prompt"])["prompt"]
            prompts = col.take(pa.array(ends[sel, 1])).to_pylist()
            out.update(zip(sel.tolist(), normalize_many(prompts, self.cfg.norm), strict=True))
        return out

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


# --------------------------------------------------------------------------- step 4: filter


def _row_group_starts(pf: pq.ParquetFile) -> np.ndarray:
    sizes = [pf.metadata.row_group(i).num_rows for i in range(pf.metadata.num_row_groups)]
    return np.concatenate(([0], np.cumsum(sizes)))


def lookup_ids(input_folder: str, targets: np.ndarray) -> list[str]:
    """Row ids of preference-order keys, reading only the row groups that hold them."""
    rank, idx = unpack_order(targets)
    out = np.empty(len(targets), dtype=object)
    folder = get_datafolder(input_folder)
    for r, sel in _groups(rank):
        with folder.open(input_file(int(r)), "rb") as f:
            pf = pq.ParquetFile(f)
            starts = _row_group_starts(pf)
            group = np.searchsorted(starts, idx[sel], side="right") - 1
            groups = np.unique(group)
            offset = np.concatenate(([0], np.cumsum(starts[groups + 1] - starts[groups])[:-1]))
            local = offset[np.searchsorted(groups, group)] + idx[sel] - starts[group]
            ids = pf.read_row_groups(groups.tolist(), columns=["id"]).column(0)
            out[sel] = ids.take(pa.array(local)).to_pylist()
    return out.tolist()


def load_decisions(work: str, rank: int) -> tuple[np.ndarray, list[str], list[str]]:
    """(row indices, reasons, duplicate_of ids) of the task's removed rows, by row index."""
    dec = np.fromfile(Path(work) / "decisions" / f"{rank:05d}.bin", dtype=DECISION_DTYPE)
    dec = dec[np.argsort(dec["idx"], kind="stable")]
    reasons = np.where(dec["near"] == 1, "near_duplicate", "exact_duplicate").tolist()
    return dec["idx"].astype(np.int64), reasons, lookup_ids(str(Path(work) / "input"), dec["target"])


class DedupSplit(PipelineStep):
    """Per task: split the work shard into kept and removed rows (with `reason`, `duplicate_of`) by column,
    with pyarrow (no per-row Python); writes `kept/RRRRR.parquet` and `removed/RRRRR.parquet`."""

    name = "cotforge dedup split"
    type = "🔻 - FILTER"

    def __init__(self, work: str, schema: pa.Schema, removed_schema: pa.Schema):
        super().__init__()
        self.work, self.schema, self.removed_schema = work, schema, removed_schema

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        with self.track_time():
            idx, reasons, dups = load_decisions(self.work, rank)
            table = pq.read_table(Path(self.work) / "input" / input_file(rank))
            if len(idx) and idx[-1] >= table.num_rows:
                raise RuntimeError(f"dedup split, task {rank}: {table.num_rows} rows but decisions reach row "
                                   f"{idx[-1] + 1}")
            drop = np.zeros(table.num_rows, dtype=bool)
            drop[idx] = True
            kept = table.filter(pa.array(~drop))
            removed = table.take(pa.array(idx))
            removed = removed.append_column("reason", pa.array(reasons, pa.string()))
            removed = removed.append_column("duplicate_of", pa.array(dups, pa.string()))
            self._write(kept, "kept", self.schema, rank)
            self._write(removed, "removed", self.removed_schema, rank)
            del table, kept, removed
            release_arrow_memory()
            self.stat_update("kept", value=len(drop) - len(idx))
            self.stat_update("removed", value=len(idx))
        return
        yield

    def _write(self, table: pa.Table, part: str, schema: pa.Schema, rank: int) -> None:
        cols = [table.column(f.name) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
                for f in schema]
        out = Path(self.work) / part
        out.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_arrays(cols, schema=schema), out / f"{rank:05d}.parquet", compression="zstd")


class DedupFilter(BaseFilter):
    """The same decisions as a datatrove filter on Documents (per row), for pipelines built from datatrove
    readers/writers: drops marked rows with `reason` and `duplicate_of`; keeps the rest."""

    name = "cotforge dedup filter"

    def __init__(self, work: str, exclusion_writer=None):
        super().__init__(exclusion_writer)
        self.work = work
        self._removed: dict[int, tuple[str, str]] = {}
        self._i = 0

    def filter(self, doc) -> bool | tuple[bool, str]:
        i = self._i
        self._i += 1
        hit = self._removed.get(i)
        if hit is None:
            return True
        doc.metadata["duplicate_of"] = hit[1]
        return False, hit[0]

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        quiet_datatrove()
        idx, reasons, dups = load_decisions(self.work, rank)
        self._removed = dict(zip(idx.tolist(), zip(reasons, dups, strict=True), strict=True))
        self._i = 0
        yield from super().run(data, rank, world_size)
        expected = max(self._removed, default=-1) + 1
        if self._i < expected:
            raise RuntimeError(f"dedup filter, task {rank}: saw {self._i} rows but decisions reach row {expected}")


__all__ = ["ProblemSignature", "QuietBuckets", "ArrayBuckets", "ProblemCluster", "DedupSplit", "DedupFilter",
           "load_decisions", "lookup_ids", "partitions_for", "KEY_DTYPE", "HEAD_DTYPE", "DECISION_DTYPE"]
