"""Problem-level dedup as datatrove steps: exact (prompt, response) pairs, then MinHash problem clusters.

Flow (each arrow is one datatrove executor run; `executor: slurm|ray` swaps the executor):

    ingest (ordered work shards, one per task; inputs sorted by --source-priority)
      -> ProblemSignature   per task: problem key, pair key and number key per row; MinHash bands for
                            the first row of each normalised prompt in the task (datatrove stage-1 files)
      -> ArrayBuckets       candidate pairs of problem heads per band (numpy sort of datatrove's band files;
                            `streaming_buckets=True` uses datatrove's MinhashDedupBuckets heap merge instead)
      -> ProblemCluster     one task: exact keys across tasks, candidate check (number guard, edit guard,
                            exact n-gram Jaccard >= threshold), connected components, representative =
                            first row by (source priority, input order); per-task decision files
      -> DedupFilter        per task: keep rows of representative problems (all distinct responses);
                            remove `exact_duplicate` / `near_duplicate` rows with `duplicate_of` = kept id.

Normalisation is `curate.normalize` (numbers kept), never datatrove's digit-to-0 default.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import math
import re
import shutil
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import click
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from datatrove.data import DocumentsPipeline
from datatrove.io import get_datafolder
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.dedup.minhash import (
    MinhashConfig,
    MinhashDedupBuckets,
    MinhashDedupSignature,
)
from datatrove.pipeline.filters.base_filter import BaseFilter
from datatrove.utils.hashing import HashConfig
from datatrove.utils.text import TextNormConfig

from curate.cli_common import input_options, specs_from_cli
from curate.dt import (
    ExecutorConfig,
    NormTokenizer,
    collect,
    make_executor,
    quiet_datatrove,
    schema_reader,
    schema_writer,
)
from curate.ingest import DEFAULT_ROWS_PER_TASK, materialize
from curate.normalize import DEFAULT_NORM, NormConfig, normalize
from curate.readers import InputError, InputSpec
from curate.stage import StageWriter, input_schema

log = logging.getLogger(__name__)

STAGE = "dedup"
_MERSENNE = np.uint64((1 << 61) - 1)
KEY_DTYPE = np.dtype([("pkey", "<u8"), ("pair", "<u8"), ("num", "<u8"), ("prio", "<u2")])
_NUMBER = re.compile(r"\d+")
_SEED_SALT = b"cotforge-dedup"


# --------------------------------------------------------------------------- config


@dataclass
class DedupConfig:
    """Knobs of problem-level dedup; defaults were chosen on the labelled set (curate/labelled_sets.py,
    2100 pairs; sweep of n-gram 2-5, bands x rows 14x8/20x5/16x4/25x4/32x3/50x4/10x10, threshold 0-0.8,
    guards on/off).

    Measured (bench/dedup.py): word 3-grams, 20 bands x 5 rows (LSH midpoint (1/20)^(1/5) = 0.55), exact
    n-gram Jaccard >= 0.6 on candidates, number and edit guards on -> precision 0.998, recall 0.992 (near
    copies alone: 290/300). Without the edit guard no setting reached precision 0.98 (real look-alikes such
    as "arrange the letters of TEPEE" vs "... of PROOF" share most shingles); without the number guard
    precision was <= 0.89."""

    ngram: int = 3  # word n-gram shingles of the normalised prompt
    bands: int = 20  # LSH bands (datatrove num_buckets)
    rows_per_band: int = 5  # hashes per band (datatrove hashes_per_bucket)
    threshold: float = 0.6  # min exact n-gram Jaccard of a candidate pair (0 = accept every LSH candidate)
    number_guard: bool = True  # candidates whose prompts hold different numbers are different problems
    edit_guard: bool = True  # near-duplicates only add words (instructions, articles); replaced/moved words differ
    seed: int = 1
    streaming_buckets: bool = False  # datatrove's constant-memory heap merge instead of the numpy sort
    source_priority: list[str] = field(default_factory=list)  # source names / globs, first = preferred
    norm: NormConfig = DEFAULT_NORM

    @property
    def lsh_threshold(self) -> float:
        """The S-curve midpoint (1/b)^(1/r): Jaccard at which a pair becomes a candidate w.p. ~1/2."""
        return (1 / self.bands) ** (1 / self.rows_per_band)

    def minhash_config(self) -> MinhashConfig:
        """datatrove MinhashConfig; its own text normalisation is off (we feed normalised text)."""
        off = TextNormConfig(lowercase=False, norm_whitespace=False, remove_punctuation=False,
                             norm_unicode_diacritics=False, norm_numbers=False)
        return MinhashConfig(n_grams=self.ngram, num_buckets=self.bands, hashes_per_bucket=self.rows_per_band,
                             seed=self.seed, norm_config=off, hash_config=HashConfig(precision=64, hash_fc="xxhash"))

    def validate(self) -> None:
        """Reject settings that cannot work, with a message naming the option."""
        for name in ("ngram", "bands", "rows_per_band"):
            if getattr(self, name) < 1:
                raise ValueError(f"dedup: {name} must be >= 1 (got {getattr(self, name)})")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"dedup: threshold must be in [0, 1] (got {self.threshold})")

    def describe(self) -> dict[str, Any]:
        """The config as stamped into stats.json (with the implied LSH threshold)."""
        d = asdict(self)
        d["norm"] = asdict(self.norm)
        d["lsh_threshold"] = round(self.lsh_threshold, 4)
        d["num_perm"] = self.bands * self.rows_per_band
        d["minhash"] = str(self.minhash_config())
        return d


def priority_of(source: str, priority: list[str]) -> int:
    """Rank of `source` in the user's priority list (exact name or glob); unlisted sources come last."""
    for i, pat in enumerate(priority):
        if source == pat or fnmatch.fnmatchcase(source, pat):
            return i
    return len(priority)


def sort_specs(specs: list[InputSpec], priority: list[str]) -> list[InputSpec]:
    """Inputs ordered by source priority (stable), so work-shard order is priority then input order."""
    if not priority:
        return list(specs)

    def rank(spec: InputSpec) -> int:
        names = [spec.default_source, spec.path, Path(spec.path).name]
        return min(priority_of(n, priority) for n in names)

    return sorted(specs, key=rank)


# --------------------------------------------------------------------------- keys and shingles


def hash64(text: str) -> int:
    """64-bit xxhash of a string (the exact-match keys)."""
    import xxhash

    return xxhash.xxh64_intdigest(text.encode("utf-8", "surrogatepass"))


@lru_cache(maxsize=8)
def _response_norm(norm: NormConfig) -> NormConfig:
    return replace(norm, wrappers=False)


def row_keys(prompt: str, response: str | None, norm: NormConfig = DEFAULT_NORM) -> tuple[str, int, int, int]:
    """(normalised prompt, problem key, pair key, number key) of one row."""
    p = normalize(prompt, norm)
    r = normalize(response, _response_norm(norm)) if response else ""  # wrappers only matter in prompts
    nums = " ".join(sorted(_NUMBER.findall(p)))
    return p, hash64(p), hash64(p + "\x00" + r), hash64(nums)


def shingle_hashes(norm_text: str, n: int) -> np.ndarray:
    """uint64 hashes of the word n-grams of normalised text; a text shorter than n is one shingle."""
    toks = norm_text.split(" ") if norm_text else []
    if not toks:
        return np.zeros((0, 1), dtype=np.uint64)
    import xxhash

    h = xxhash.xxh64_intdigest
    grams = {" ".join(toks[i:i + n]) for i in range(max(1, len(toks) - n + 1))}
    return np.fromiter((h(g.encode("utf-8", "surrogatepass")) for g in grams), dtype=np.uint64,
                       count=len(grams)).reshape((-1, 1))


def candidate_verdict(norm_a: str, norm_b: str, cfg: DedupConfig) -> str | None:
    """Check an LSH candidate pair of normalised prompts: None = near-duplicates, else the reason it is not
    (`edit_guard`: neither prompt is the other with words added - a word was replaced or moved, which in
    math changes the problem, e.g. "exactly one" -> "at most one", "3n is a square and 2n a cube" ->
    "2n is a square and 3n a cube"; `below_threshold`: word n-gram Jaccard < cfg.threshold)."""
    ta, tb = norm_a.split(" "), norm_b.split(" ")
    if cfg.edit_guard and not _is_subsequence(*sorted((ta, tb), key=len)):
        return "edit_guard"
    if cfg.threshold > 0:
        sa, sb = _shingle_set(ta, cfg.ngram), _shingle_set(tb, cfg.ngram)
        if len(sa & sb) < cfg.threshold * len(sa | sb):
            return "below_threshold"
    return None


def _is_subsequence(short: list[str], long: list[str]) -> bool:
    """True when `short` is `long` with some words removed (order kept): only insertions on one side."""
    it = iter(long)
    return all(tok in it for tok in short)


def _shingle_set(toks: list[str], n: int) -> set[str]:
    return {" ".join(toks[i:i + n]) for i in range(max(1, len(toks) - n + 1))}


# --------------------------------------------------------------------------- step 1: keys + signatures


class ProblemSignature(MinhashDedupSignature):
    """datatrove MinHash stage 1 on problem heads, plus per-row exact keys.

    For each row: problem key = hash(normalize(prompt)), pair key = hash(norm prompt + norm response),
    number key = hash(sorted numbers of the prompt), source priority. Only the first row of each problem key
    within the task gets MinHash band files (later rows are the same problem; the cluster step merges keys
    across tasks). Writes `keys_folder/RRRRR.npy` (KEY_DTYPE per row, in task order)."""

    name = "cotforge problem keys + MinHash signatures"

    def __init__(self, sig_folder: str, keys_folder: str, cfg: DedupConfig):
        super().__init__(sig_folder, config=cfg.minhash_config(), language=NormTokenizer(cfg.norm))
        self.keys_folder = keys_folder
        self.cfg = cfg

    # datatrove calls get_shingles(doc.text) for each doc it sees; our docs carry normalised prompts.
    def get_shingles(self, text: str) -> np.ndarray:
        return shingle_hashes(text, self.config.n_grams)

    def get_signature(self, shingles: np.ndarray) -> list[list[int]]:
        """datatrove's signature (min over (a*x+b) mod 2^61-1 per permutation, split into bands) without
        its per-doc np.split overhead; identical values (64-bit hashes)."""
        if self.config.hash_config.precision != 64:
            return super().get_signature(shingles)
        a, b = self.parameters
        sig = ((shingles * a + b) % _MERSENNE).min(axis=0)
        return sig.reshape(self.config.num_buckets, self.config.hashes_per_bucket).tolist()

    def _marked(self, data: DocumentsPipeline, keys: list[tuple]) -> DocumentsPipeline:
        """Feed datatrove's signature loop: heads carry their normalised prompt, other rows empty text
        (no signature, but the positional doc index still advances)."""
        seen: set[int] = set()
        for doc in data:
            md = doc.metadata
            norm_p, pkey, pair, num = row_keys(doc.text, md.get("response"), self.cfg.norm)
            prio = min(priority_of(str(md.get("source", "")), self.cfg.source_priority), 65535)
            head = pkey not in seen
            seen.add(pkey)
            keys.append((pkey, pair, num, prio))
            yield type(doc)(text=norm_p if head else "", id=doc.id)

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        quiet_datatrove()
        keys: list[tuple] = []
        super().run(self._marked(data, keys), rank, world_size)
        self.stat_update("rows", value=len(keys))
        with get_datafolder(self.keys_folder).open(f"{rank:05d}.npy", "wb") as f:
            np.save(f, np.array(keys, dtype=KEY_DTYPE))
        return
        yield  # a generator, like every datatrove step


class QuietBuckets(MinhashDedupBuckets):
    """datatrove MinHash stage 2 (streaming heap merge of sorted band files), with tidy logging.
    Constant memory but pure Python per record; used with `DedupConfig(streaming_buckets=True)`."""

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1):
        quiet_datatrove()
        return super().run(data, rank, world_size)


class ArrayBuckets(PipelineStep):
    """MinHash stage 2 with numpy: one task per band loads every task's band file (datatrove's stage-1
    format), sorts the records by band hash and writes a pair for each run of equal hashes, in datatrove's
    `.dups` format (file, doc, file, doc as <4I). Memory: (rows_per_band * 8 + 8) bytes per problem head."""

    name = "cotforge MinHash buckets (numpy)"
    type = "🫂 - DEDUP"

    def __init__(self, sig_folder: str, out_folder: str, cfg: DedupConfig):
        super().__init__()
        self.sig_folder, self.out_folder, self.cfg = sig_folder, out_folder, cfg

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        quiet_datatrove()
        with self.track_time():
            for band in range(rank, self.cfg.bands, world_size):  # fewer tasks than bands: each takes several
                self._band(band)
        return
        yield

    def _band(self, band: int) -> None:
        """Candidate pairs of one band: sort all tasks' records by band hash, pair equal neighbours."""
        r = self.cfg.rows_per_band
        dtype = np.dtype([(f"h{i}", "<u8") for i in range(r)] + [("doc", "<u4")])
        parts, files = [], []
        for f in sorted(Path(self.sig_folder, f"bucket_{band:03d}").glob("*.minhash.sig")):
            rec = np.fromfile(f, dtype=dtype)
            parts.append(rec)
            files.append(np.full(len(rec), int(f.name.split(".")[0]), dtype=np.uint32))
        out = Path(self.out_folder)
        out.mkdir(parents=True, exist_ok=True)
        pairs = np.zeros((0, 4), dtype="<u4")
        if parts:
            rec, fid = np.concatenate(parts), np.concatenate(files)
            order = np.lexsort([rec[f"h{i}"] for i in reversed(range(r))])
            rec, fid = rec[order], fid[order]
            hashes = np.stack([rec[f"h{i}"] for i in range(r)], axis=1)
            k = np.flatnonzero((hashes[1:] == hashes[:-1]).all(axis=1))  # record k+1 equals record k
            pairs = np.stack([fid[k], rec["doc"][k], fid[k + 1], rec["doc"][k + 1]], axis=1).astype("<u4")
        pairs.tofile(out / f"{band:05d}_00.dups")
        self.stat_update("total_matches", value=len(pairs))


# --------------------------------------------------------------------------- step 3: clusters


def _read_pairs(folder: Path) -> np.ndarray:
    """All (rank1, idx1, rank2, idx2) candidate pairs from datatrove's `.dups` files, deduplicated."""
    parts = [np.fromfile(f, dtype="<u4").reshape(-1, 4) for f in sorted(folder.glob("*.dups")) if f.stat().st_size]
    if not parts:
        return np.zeros((0, 4), dtype=np.uint32)
    pairs = np.concatenate(parts)
    return np.unique(pairs, axis=0)


def _first_by_order(keys: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row: the group index of its key and, per group, the first row in `order`."""
    uniq, first_pos, inverse = np.unique(keys[order], return_index=True, return_inverse=True)
    group_of = np.empty(len(keys), dtype=np.int64)
    group_of[order] = inverse.reshape(-1)
    return group_of, order[first_pos]


def _components(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Connected-component label of each of n nodes given undirected edges a-b (union-find via scipy)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    m = coo_matrix((np.ones(len(a), dtype=np.int8), (a, b)), shape=(n, n))
    return connected_components(m, directed=False)[1]


class ProblemCluster(PipelineStep):
    """One task: merge exact keys across tasks, check LSH candidates, cluster, pick representatives, and
    write per-task decisions (`decisions/RRRRR.parquet`: idx, reason, duplicate_of) and `cluster_stats.json`.

    Order of every "first" = (source priority, task, index in task) = priority then input order. A row is
    `near_duplicate` when its problem is in a cluster whose representative problem is another one;
    `exact_duplicate` when an earlier row of the same problem has the same normalised response."""

    name = "cotforge problem clusters"
    type = "🫂 - DEDUP"

    def __init__(self, work: str, tasks: int, cfg: DedupConfig):
        super().__init__()
        self.work, self.tasks, self.cfg = work, tasks, cfg

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        quiet_datatrove()
        assert world_size == 1, "ProblemCluster runs as a single task"
        with self.track_time():
            stats = self._cluster(Path(self.work))
        for k, v in stats.items():
            if isinstance(v, int):
                self.stat_update(k, value=v)
        return
        yield

    def _cluster(self, work: Path) -> dict[str, int]:
        keys = [np.load(work / "keys" / f"{r:05d}.npy") for r in range(self.tasks)]
        counts = np.array([len(k) for k in keys], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(counts)])
        allk = np.concatenate(keys) if keys else np.zeros(0, dtype=KEY_DTYPE)
        n = len(allk)
        order = np.lexsort((np.arange(n), allk["prio"]))  # priority, then global input position
        rank_pos = np.empty(n, dtype=np.int64)
        rank_pos[order] = np.arange(n)  # position of each row in the preference order
        group_of, group_head = _first_by_order(allk["pkey"], order)
        pair_group, pair_first = _first_by_order(allk["pair"], order)
        first_pair = pair_first[pair_group]

        # candidate pairs between different problems, checked and clustered at problem-group level
        pairs = _read_pairs(work / "buckets")
        ga = offsets[pairs[:, 0].astype(np.int64)] + pairs[:, 1]
        gb = offsets[pairs[:, 2].astype(np.int64)] + pairs[:, 3]
        cand = group_of[ga] != group_of[gb]
        ga, gb = ga[cand], gb[cand]
        n_candidates = int(len(ga))
        ok = np.ones(len(ga), dtype=bool)
        if self.cfg.number_guard:
            ok &= allk["num"][ga] == allk["num"][gb]
        n_guarded = int((~ok).sum())
        rejected: Counter[str] = Counter()
        if ok.any() and (self.cfg.edit_guard or self.cfg.threshold > 0):
            idx = np.flatnonzero(ok)
            texts = self._norm_prompts(work, offsets, np.concatenate([ga[idx], gb[idx]]))
            for i in idx:
                why = candidate_verdict(texts[int(ga[i])], texts[int(gb[i])], self.cfg)
                if why:
                    ok[i] = False
                    rejected[why] += 1
        ga, gb = group_of[ga[ok]], group_of[gb[ok]]

        n_groups = len(group_head)
        rep_group = np.arange(n_groups)
        n_clusters = 0
        if len(ga):
            nodes, inv = np.unique(np.concatenate([ga, gb]), return_inverse=True)
            comp = _components(len(nodes), inv[: len(ga)], inv[len(ga):])
            # representative of a component = the group whose head comes first in preference order
            head_pos = rank_pos[group_head[nodes]]
            best = np.full(comp.max() + 1, np.iinfo(np.int64).max)
            np.minimum.at(best, comp, head_pos)
            rep_group[nodes] = group_of[order[best[comp]]]
            n_clusters = int(comp.max() + 1)

        rows = np.arange(n)
        rep_of_row = rep_group[group_of]
        near = rep_of_row != group_of
        exact = ~near & (first_pair != rows)
        target = np.where(near, group_head[rep_of_row], first_pair)
        self._write_decisions(work, offsets, near, exact, target)
        stats = {"rows": n, "problems": int(n_groups), "candidate_pairs": n_candidates,
                 "pairs_rejected_number_guard": n_guarded,
                 "pairs_rejected_edit_guard": rejected["edit_guard"],
                 "pairs_below_threshold": rejected["below_threshold"],
                 "pairs_accepted": int(len(ga)), "clusters": n_clusters,
                 "problems_merged": int((rep_group != np.arange(n_groups)).sum()),
                 "exact_duplicate": int(exact.sum()), "near_duplicate": int(near.sum()),
                 "key_bytes": int(allk.nbytes)}
        (work / "cluster_stats.json").write_text(json.dumps(stats, indent=2, sort_keys=True))
        return stats

    def _norm_prompts(self, work: Path, offsets: np.ndarray, rows: np.ndarray) -> dict[int, str]:
        """Normalised prompts of the given global rows, read task by task (only the `prompt` column)."""
        rows = np.unique(rows)
        task_of = np.searchsorted(offsets, rows, side="right") - 1
        out: dict[int, str] = {}
        for r in np.unique(task_of):
            col = pq.read_table(work / "input" / f"part-{r:05d}.parquet", columns=["prompt"])["prompt"]
            for g in rows[task_of == r]:
                out[int(g)] = normalize(col[int(g - offsets[r])].as_py(), self.cfg.norm)
        return out

    def _write_decisions(self, work: Path, offsets: np.ndarray, near: np.ndarray, exact: np.ndarray,
                         target: np.ndarray) -> None:
        """Per task: (idx, reason, duplicate_of id) of its removed rows; ids are looked up task by task."""
        removed = np.flatnonzero(near | exact)
        tgt = target[removed]
        tgt_task = np.searchsorted(offsets, tgt, side="right") - 1
        tgt_ids = np.empty(len(removed), dtype=object)
        for r in np.unique(tgt_task):
            ids = pq.read_table(work / "input" / f"part-{r:05d}.parquet", columns=["id"])["id"].to_numpy(
                zero_copy_only=False)
            sel = tgt_task == r
            tgt_ids[sel] = ids[tgt[sel] - offsets[r]]
        task = np.searchsorted(offsets, removed, side="right") - 1
        out = work / "decisions"
        out.mkdir(parents=True, exist_ok=True)
        for r in range(self.tasks):
            sel = task == r
            table = pa.table({
                "idx": pa.array((removed[sel] - offsets[r]).astype(np.int64)),
                "reason": pa.array(np.where(near[removed[sel]], "near_duplicate", "exact_duplicate").tolist(),
                                   pa.string()),
                "duplicate_of": pa.array(tgt_ids[sel].tolist(), pa.string()),
            })
            pq.write_table(table, out / f"{r:05d}.parquet")


# --------------------------------------------------------------------------- step 4: filter


class DedupFilter(BaseFilter):
    """Per task: drop the rows the cluster step marked, with `reason` and `duplicate_of`; keep the rest."""

    name = "cotforge dedup filter"

    def __init__(self, decisions_folder: str, exclusion_writer=None):
        super().__init__(exclusion_writer)
        self.decisions_folder = decisions_folder
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
        t = pq.read_table(Path(self.decisions_folder) / f"{rank:05d}.parquet").to_pydict()
        self._removed = {i: (r, d) for i, r, d in zip(t["idx"], t["reason"], t["duplicate_of"], strict=True)}
        self._i = 0
        yield from super().run(data, rank, world_size)
        expected = max(self._removed, default=-1) + 1
        if self._i < expected:
            raise RuntimeError(f"dedup filter, task {rank}: saw {self._i} rows but decisions reach row {expected}")


# --------------------------------------------------------------------------- pairwise view


class PairJudge:
    """The pipeline's decision for one pair of prompts, without running it: same problem key, or an LSH
    candidate (some band equal) that passes the number guard and the Jaccard threshold. Used to choose
    defaults on the labelled set (clusters add transitivity on top of this)."""

    def __init__(self, cfg: DedupConfig | None = None):
        self.cfg = cfg or DedupConfig()
        self.signer = MinhashDedupSignature("memory://cotforge-pair-judge", config=self.cfg.minhash_config(),
                                            language=NormTokenizer(self.cfg.norm))

    def sketch(self, prompt: str) -> tuple[str, int, int, np.ndarray | None]:
        """(normalised prompt, problem key, number key, MinHash signature or None when it has no words)."""
        norm_p, pkey, _, num = row_keys(prompt, None, self.cfg.norm)
        sh = shingle_hashes(norm_p, self.cfg.ngram)
        sig = np.asarray(self.signer.get_signature(sh), dtype=np.uint64).reshape(-1) if sh.size else None
        return norm_p, pkey, num, sig

    def is_duplicate(self, a: str, b: str) -> bool:
        """True when the pipeline would put prompts `a` and `b` in one problem cluster (pairwise)."""
        return self.judge_sketches(self.sketch(a), self.sketch(b))

    def judge_sketches(self, ka: tuple, kb: tuple) -> bool:
        """`is_duplicate` on precomputed sketches (for sweeps over many pairs)."""
        (ta, pa_, na, sa), (tb, pb, nb, sb) = ka, kb
        if pa_ == pb:
            return True
        if sa is None or sb is None or (self.cfg.number_guard and na != nb):
            return False
        r = self.cfg.rows_per_band
        if not (sa.reshape(-1, r) == sb.reshape(-1, r)).all(axis=1).any():
            return False
        return candidate_verdict(ta, tb, self.cfg) is None


# --------------------------------------------------------------------------- runner


def _count_rows(specs: list[InputSpec]) -> int:
    """Cheap row count for --tasks: Parquet metadata, JSONL line counts (other inputs are read)."""
    import gzip

    from curate.stage import iter_input_rows

    total = 0
    for spec in specs:
        p = Path(spec.path)
        if p.is_file() and p.name.endswith(".parquet"):
            total += pq.ParquetFile(p).metadata.num_rows
        elif p.is_file() and p.name.endswith((".jsonl", ".jsonl.gz")):
            opener = gzip.open if p.name.endswith(".gz") else open
            with opener(p, "rb") as fh:
                total += sum(1 for line in fh if line.strip())
        else:
            total += sum(1 for _ in iter_input_rows([spec]))
    return total


def run_dedup(specs: list[InputSpec], out_dir: str | Path, cfg: DedupConfig | None = None,
              exec_cfg: ExecutorConfig | None = None, *, strict: bool = False, rows_per_shard: int = 50_000,
              tasks: int | None = None, keep_work: bool = False) -> dict[str, Any]:
    """Dedup `specs` into OUT/kept, OUT/removed (reason, duplicate_of) and OUT/stats.json; returns the stats.

    `tasks` (if given) overrides `exec_cfg.rows_per_task` so that the input is split into ~`tasks` tasks."""
    cfg = cfg or DedupConfig()
    cfg.validate()
    exec_cfg = exec_cfg or ExecutorConfig()
    t0 = time.time()
    quiet_datatrove()
    specs = sort_specs(specs, cfg.source_priority)
    if tasks:
        exec_cfg = ExecutorConfig(exec_cfg.executor, exec_cfg.workers,
                                  max(1, math.ceil(_count_rows(specs) / tasks)), dict(exec_cfg.options))
    out = Path(out_dir)
    work = out / "_work" / STAGE
    if work.exists():
        shutil.rmtree(work)
    schema = input_schema(specs)
    writer = StageWriter(out, STAGE, schema=schema, rows_per_shard=rows_per_shard,
                         config={"dedup": cfg.describe(), "inputs": [s.path for s in specs],
                                 "executor": exec_cfg.executor, "workers": exec_cfg.workers,
                                 "rows_per_task": exec_cfg.rows_per_task})
    shards = materialize(specs, work / "input", writer, strict=strict, rows_per_task=exec_cfg.rows_per_task,
                         schema=schema)
    n_tasks = len(shards)
    cluster_stats: dict[str, Any] = {}
    timings: dict[str, float] = {"ingest_s": round(time.time() - t0, 3)}
    if n_tasks:
        t1 = time.time()
        timings.update(_run_steps(work, n_tasks, cfg, exec_cfg, schema, writer.removed.schema))
        timings["datatrove_s"] = round(time.time() - t1, 3)
        cluster_stats = json.loads((work / "cluster_stats.json").read_text())
        t2 = time.time()
        collect(writer, work / "kept", work / "removed", n_tasks)
        timings["collect_s"] = round(time.time() - t2, 3)
    timings["total_s"] = round(time.time() - t0, 3)
    stats = writer.close({"dedup": {**cluster_stats, "tasks": n_tasks, "timings": timings}})
    if not keep_work:
        shutil.rmtree(work, ignore_errors=True)
        if (out / "_work").exists() and not any((out / "_work").iterdir()):
            (out / "_work").rmdir()
    return stats


def _run_steps(work: Path, n_tasks: int, cfg: DedupConfig, exec_cfg: ExecutorConfig, schema: pa.Schema,
               rschema: pa.Schema) -> dict[str, float]:
    """The four datatrove executor runs. Local: one after the other, logging progress and timing each;
    Slurm/Ray: chained with `depends=` and launched together. Returns seconds per step."""
    steps = [
        ("signatures", [schema_reader(work / "input"), ProblemSignature(str(work / "sigs"), str(work / "keys"), cfg)],
         n_tasks),
        ("buckets", [QuietBuckets(str(work / "sigs"), str(work / "buckets"), config=cfg.minhash_config())
                     if cfg.streaming_buckets else ArrayBuckets(str(work / "sigs"), str(work / "buckets"), cfg)],
         cfg.bands if cfg.streaming_buckets or exec_cfg.executor != "local" else min(cfg.bands, exec_cfg.workers)),
        ("clusters", [ProblemCluster(str(work), n_tasks, cfg)], 1),
        ("filter", [schema_reader(work / "input"),
                    DedupFilter(str(work / "decisions"), exclusion_writer=schema_writer(work / "removed", rschema)),
                    schema_writer(work / "kept", schema)], n_tasks),
    ]
    timings: dict[str, float] = {}
    prev = None
    for i, (name, pipeline, tasks) in enumerate(steps, 1):
        ex = make_executor(pipeline, tasks, work / "logs" / f"{i}_{name}", exec_cfg,
                           depends=None if exec_cfg.executor == "local" else prev, name=f"dedup-{name}")
        if exec_cfg.executor == "local":
            t = time.time()
            log.info("dedup: step %d/4 %s (%d tasks, %d workers)", i, name, tasks, min(exec_cfg.workers, tasks))
            ex.run()
            timings[f"{name}_s"] = round(time.time() - t, 3)
        prev = ex
    if exec_cfg.executor != "local":
        prev.run()
    if not (work / "cluster_stats.json").exists() or not (work / "decisions").is_dir():
        raise RuntimeError(f"dedup: datatrove steps did not finish (see {work / 'logs'}); "
                           "with slurm/ray wait for the jobs, then rerun with --keep-work")
    return timings


# --------------------------------------------------------------------------- CLI


def _split_list(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


@click.command("dedup")
@input_options
@click.option("--source-priority", default="", metavar="A,B,...",
              help="Comma list of source names (globs ok): the first source of a cluster keeps the problem.")
@click.option("--tasks", type=int, default=None, help="Split the input into about this many datatrove tasks.")
@click.option("--rows-per-task", type=int, default=DEFAULT_ROWS_PER_TASK, show_default=True,
              help="Rows per datatrove task (ignored when --tasks is given).")
@click.option("--workers", type=int, default=2, show_default=True, help="Parallel local workers.")
@click.option("--executor", type=click.Choice(["local", "slurm", "ray"]), default="local", show_default=True)
@click.option("--ngram", type=int, default=DedupConfig.ngram, show_default=True, help="Word n-gram shingle size.")
@click.option("--bands", type=int, default=DedupConfig.bands, show_default=True, help="LSH bands.")
@click.option("--rows-per-band", type=int, default=DedupConfig.rows_per_band, show_default=True,
              help="MinHash values per band.")
@click.option("--threshold", type=float, default=DedupConfig.threshold, show_default=True,
              help="Min word n-gram Jaccard for an LSH candidate pair to count (0 = every candidate).")
@click.option("--no-number-guard", is_flag=True, help="Let near-duplicates differ in their numbers.")
@click.option("--no-edit-guard", is_flag=True,
              help="Let near-duplicates replace or move words (default: one prompt must be the other plus words).")
@click.option("--streaming-buckets", is_flag=True,
              help="Use datatrove's constant-memory bucket merge (slower) instead of the numpy sort.")
@click.option("--keep-work", is_flag=True, help="Keep OUT/_work (shards, signatures, datatrove logs).")
def dedup_command(inputs, out, maps, source_names, domain, strict, rows_per_shard, source_priority, tasks,
                  rows_per_task, workers, executor, ngram, bands, rows_per_band, threshold, no_number_guard,
                  no_edit_guard, streaming_buckets, keep_work) -> None:
    """Remove exact (prompt, response) duplicates and near-duplicate problems from INPUTS.

    Each cluster of near-duplicate prompts keeps one problem (first by --source-priority, then input
    order) with all its distinct responses; other rows go to OUT/removed with `duplicate_of`."""
    specs = specs_from_cli(inputs, maps, source_names, domain)
    cfg = DedupConfig(ngram=ngram, bands=bands, rows_per_band=rows_per_band, threshold=threshold,
                      number_guard=not no_number_guard, edit_guard=not no_edit_guard,
                      streaming_buckets=streaming_buckets, source_priority=_split_list(source_priority))
    exec_cfg = ExecutorConfig(executor=executor, workers=workers, rows_per_task=rows_per_task)
    try:
        stats = run_dedup(specs, out, cfg, exec_cfg, strict=strict, rows_per_shard=rows_per_shard, tasks=tasks,
                          keep_work=keep_work)
    except (InputError, ValueError) as e:
        raise click.ClickException(str(e)) from e
    by = ", ".join(f"{k} {v}" for k, v in stats["removed_by_reason"].items()) or "none"
    click.echo(f"{stats['rows_in']} rows in, {stats['kept']} kept, {stats['removed']} removed ({by}) -> {out}")


__all__ = ["DedupConfig", "ProblemSignature", "ProblemCluster", "DedupFilter", "run_dedup", "dedup_command",
           "row_keys", "shingle_hashes", "priority_of", "sort_specs", "PairJudge", "candidate_verdict"]
