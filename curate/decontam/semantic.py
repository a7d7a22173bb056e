"""The semantic tier of decontamination: benchmark items rewritten in other words.

The lexical tiers (`decontam/match.py`) find copies, reformattings and edits; a rephrased item shares too few
n-grams with the original for them. This tier embeds every benchmark problem once at index time
(`build_semantic_index`: vectors of the items and of their question sentences, saved in the index folder
under semantic/ and cached on disk by model and texts), then, for each row no other tier flagged, embeds its
prompt (the first `semantic_response_chars` characters of the response when the prompt is empty), takes the
`semantic_top_k` nearest items by cosine (the row vectors shared by the run's tasks through INDEX/semantic/rows/,
`VectorStore`: a problem repeated across tasks is embedded about once) and lets the pair check decide
(`curate/dedup/pairs/semantic.py`). By default (`semantic_rules: numbers`) that is the cosine, the numbers
and the formulas: every value of the item in the row, read from digits and words alike ("one third" = 1/3),
one small count the rewording spells out in words allowed; below `semantic_number_cosine` the pair must also
share `semantic_number_count` values; the formula tokens agree up to restatement in words. An item's story
and numbers with another question asked count as the item, as for the lexical tiers; a changed number never
does. `semantic_rules: full` adds dedup's term, condition and question rules (fewer rephrasings caught;
docs/semantic.md, round 7). A flagged row gets the match kind `semantic`, score = the
cosine, and in `matches` the aligned numbers and both texts.

Off by default (`--semantic` turns it on): it costs a transformer forward pass per distinct prompt (see
docs/semantic.md for rows/s on 2 cores). `semantic_encoder: static+rerank` puts a static embedding distilled
from the same model (`StaticEmbedder`) in front: a row whose nearest item by the static cosine is below
`semantic_static_cosine` never reaches the transformer; the others are embedded, searched and checked as above
(the same verdicts for the rows that pass).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cotforge.curate.dedup.pairs.semantic import PairThresholds, number_verdict, pair_verdict, question_of
from cotforge.curate.text.embed import (
    Embedder,
    StaticEmbedder,
    cache_dir,
    cached_array,
    embedder_for,
    exact_cosine,
    nearest,
)
from cotforge.curate.text.judge import make_judge, says_yes

if TYPE_CHECKING:
    from cotforge.curate.decontam.config import DecontamConfig

log = logging.getLogger(__name__)

SUBDIR = "semantic"
SHOWN_CHARS = 600  # texts kept in a semantic match's detail


def thresholds(cfg: DecontamConfig) -> PairThresholds:
    """The pair-check bounds of a decontamination config."""
    return PairThresholds(cfg.semantic_cosine, cfg.semantic_question_cosine, cfg.semantic_extra_numbers,
                          cfg.semantic_rules, cfg.semantic_number_cosine, cfg.semantic_number_count)


JUDGED = (None, "few_numbers", "math_changed")  # the rules' verdicts a judge may overrule


def make_embedder(cfg: DecontamConfig) -> Embedder:
    """The configured encoder (`semantic_model`, `semantic_device`)."""
    return embedder_for(cfg)


def _cached_encode(emb: Embedder, texts: list[str], tag: str) -> np.ndarray:
    """emb.encode(texts), read from / written to the cotforge cache folder under a key of the model and the texts
    (benchmark items are embedded once per machine, not once per run)."""
    h = hashlib.sha256(f"{emb.cache_tag}\0{tag}".encode())
    for t in texts:
        h.update(t.encode("utf-8", "replace") + b"\0")
    path = cache_dir() / "semantic" / f"{h.hexdigest()[:32]}.npy"
    return cached_array(path, (len(texts), emb.dim), lambda: emb.encode(texts))


def build_semantic_index(texts: list[str], cfg: DecontamConfig, index_dir: str | Path) -> dict:
    """Embed the indexed texts (benchmark problems) and their question sentences into INDEX/semantic/."""
    emb = make_embedder(cfg)
    out = Path(index_dir) / SUBDIR
    out.mkdir(parents=True, exist_ok=True)
    vecs = _cached_encode(emb, texts, "item")
    qvecs = _cached_encode(emb, [question_of(t) for t in texts], "question")
    np.save(out / "vectors.npy", vecs)
    np.save(out / "questions.npy", qvecs)
    meta = {"model": emb.name, "dim": emb.dim, "items": len(texts)}
    (out / "meta.json").write_text(json.dumps(meta, sort_keys=True) + "\n")
    return meta


@dataclass
class SemanticHit:
    """A row judged to be entry `entry` in other words."""

    entry: int
    cosine: float
    question_cosine: float
    numbers: list[str]
    judge: str = ""  # the judge's answer when the judge decided (curate/text/judge.py), else ""


class VectorStore:
    """Vectors of texts shared by the tasks of one run: each task appends the vectors it computes as a file pair
    (keys, then vectors; the keys file, renamed into place last, marks a complete pair) and reads the pairs of
    the other tasks before embedding, so a text is embedded about once per run instead of once per task (SFT
    data repeats each problem across tasks). Files are memory-mapped; only a key -> (file, row) map is held.
    Which task writes a text's vector first depends on timing, but not the vector: `Embedder.encode` gives the
    same bits for a text whatever it is embedded with and on however many threads."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.where: dict[bytes, tuple[int, int]] = {}
        self.files: list[np.ndarray] = []
        self._names: set[str] = set()

    @staticmethod
    def key(text: str) -> bytes:
        """16 bytes of the text's SHA-256."""
        return hashlib.sha256(text.encode("utf-8", "replace")).digest()[:16]

    def refresh(self) -> None:
        """Map the pairs written since the last call (by any task)."""
        if not self.folder.is_dir():
            return
        for f in sorted(self.folder.glob("*.keys.npy")):
            if f.name in self._names:
                continue
            try:
                keys = np.load(f)
                vecs = np.load(f.with_name(f.name.replace(".keys.npy", ".vecs.npy")), mmap_mode="r")
            except (OSError, ValueError):
                continue
            self._names.add(f.name)
            self.files.append(vecs)
            fid = len(self.files) - 1
            for row, k in enumerate(keys):
                self.where.setdefault(k.tobytes(), (fid, row))

    def get(self, keys: list[bytes]) -> np.ndarray:
        """The stored vectors of `keys` (all must be present)."""
        return np.stack([self.files[f][r] for f, r in (self.where[k] for k in keys)]).astype(np.float32)

    def add(self, keys: list[bytes], vecs: np.ndarray) -> None:
        """Write a pair for `keys` / `vecs` and map it (an unwritable folder only means no sharing)."""
        stem = f"{os.getpid()}-{uuid.uuid4().hex}"  # unique: a worker process runs several tasks in turn
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            vpath, kpath = self.folder / f"{stem}.vecs.npy", self.folder / f"{stem}.keys.npy"
            np.save(vpath, vecs.astype(np.float32))
            tmp = self.folder / f"{stem}.tmp.npy"
            np.save(tmp, np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(-1, 16))
            tmp.rename(kpath)
        except OSError:
            return
        self.refresh()


class SemanticTier:
    """Nearest benchmark items of texts by cosine, decided by the pair check (module docstring)."""

    def __init__(self, index_dir: str | Path, item_texts: list[str], cfg: DecontamConfig,
                 embedder: Embedder | None = None):
        d = Path(index_dir) / SUBDIR
        if not (d / "vectors.npy").is_file():
            raise FileNotFoundError(f"{d}: no semantic vectors in the index (built without --semantic: rebuild it)")
        self.vecs = np.load(d / "vectors.npy")
        self.qvecs = np.load(d / "questions.npy")
        self.items = item_texts
        self.cfg = cfg
        self.th = thresholds(cfg)
        self.emb = embedder or make_embedder(cfg)
        tag = hashlib.sha256(self.emb.cache_tag.encode()).hexdigest()[:16]
        self.store = VectorStore(d / "rows" / tag)  # the run's row vectors, shared by its tasks
        self.checked_pairs = 0
        self.judged_pairs = 0  # candidates sent to the judge (curate/text/judge.py), cached answers included
        self.skipped = 0  # rows the static encoder kept away from the transformer (static+rerank)
        self.reused = 0  # texts whose vectors another task of the run had computed
        self._cache: dict[str, list[SemanticHit]] = {}
        self.judge = make_judge(cfg)
        self.static: StaticEmbedder | None = None
        if cfg.semantic_encoder == "static+rerank":
            self.static = StaticEmbedder(self.emb)
            self.static.fit_weights(item_texts)
            self.static_vecs = self.static.encode(item_texts)

    CACHE_SIZE = 100_000

    def match(self, texts: list[str]) -> list[list[SemanticHit]]:
        """Per text: the entries it rephrases (best cosine first). Verdicts of up to CACHE_SIZE distinct texts
        are remembered (SFT data repeats each problem once per sampled response, across batches)."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        for t, hits in zip(todo, self._match(todo), strict=True):
            self._cache[t] = hits
        out = [self._cache[t] for t in texts]
        if len(self._cache) > self.CACHE_SIZE:
            self._cache = {}
        return out

    def _match(self, texts: list[str]) -> list[list[SemanticHit]]:
        out: list[list[SemanticHit]] = [[] for _ in texts]
        if not texts or not len(self.vecs):
            return out
        if self.static is not None:  # the fast path: only rows whose nearest item is close enough statically
            best = (self.static.encode(texts) @ self.static_vecs.T).max(axis=1)
            keep = np.flatnonzero(best >= self.cfg.semantic_static_cosine).tolist()
            self.skipped += len(texts) - len(keep)
            for i, hits in zip(keep, self._match_dense([texts[i] for i in keep]), strict=True):
                out[i] = hits
            return out
        return self._match_dense(texts)

    def _match_dense(self, texts: list[str]) -> list[list[SemanticHit]]:
        out: list[list[SemanticHit]] = [[] for _ in texts]
        if not texts:
            return out
        top, cos = nearest(self._row_vectors(texts), self.vecs, self.cfg.semantic_top_k)
        floor = min(self.th.min_cosine, self.cfg.semantic_judge_cosine) if self.judge else self.th.min_cosine
        cands: list[tuple[int, int, float]] = []
        asks: list[tuple[int, int, float]] = []
        for i in range(len(texts)):
            for e, c in zip(top[i].tolist(), cos[i].tolist(), strict=True):
                if c < floor:
                    continue
                # numbers and carriers first (cheap); the question cosine only for what passes them. Below the
                # rules' cosine bound, the verdict at the bound is what the judge may overrule.
                verdict = pair_verdict(self.items[e], texts[i], max(c, self.th.min_cosine), None, self.th)
                if c >= self.th.min_cosine and verdict is None:
                    cands.append((i, e, c))
                elif self.judge and c >= self.cfg.semantic_judge_cosine and self._judge_may_decide(verdict):
                    asks.append((i, e, c))
        self.checked_pairs += len(cands)
        judged = [(i, e, c, a) for (i, e, c), a in zip(asks, self._ask(asks, texts), strict=True) if says_yes(a)]
        if not cands and not judged:
            return out
        rows = sorted({i for i, _, _ in cands} | {i for i, _, _, _ in judged})
        qv = dict(zip(rows, self.emb.encode([question_of(texts[i]) for i in rows]), strict=True))
        lenient = self.th.rules == "numbers"
        for i, e, c in cands:
            qc = exact_cosine(qv[i], self.qvecs[e])
            if pair_verdict(self.items[e], texts[i], c, qc, self.th) is None:
                nums = number_verdict(self.items[e], texts[i], self.th.max_extra_numbers, lenient=lenient)[1]
                out[i].append(SemanticHit(e, c, qc, nums))
        for i, e, c, answer in judged:
            nums = number_verdict(self.items[e], texts[i], self.th.max_extra_numbers, lenient=lenient)[1]
            out[i].append(SemanticHit(e, c, exact_cosine(qv[i], self.qvecs[e]), nums, judge=answer))
        for hits in out:
            hits.sort(key=lambda h: -h.cosine)
        return out

    def _judge_may_decide(self, verdict: str | None) -> bool:
        """Whether the pair check rejects a pair only for a reason a rewording explains: its verdict (at the
        rules' cosine bound or above) is a pass, `few_numbers` or `math_changed`; `number_changed` only with
        `semantic_judge_numbers`; never the full rules' condition, term or question changes."""
        return verdict in JUDGED or (self.cfg.semantic_judge_numbers and verdict == "number_changed")

    def _ask(self, asks: list[tuple[int, int, float]], texts: list[str]) -> list[str]:
        if not asks or self.judge is None:
            return []
        self.judged_pairs += len(asks)
        return self.judge.answers([(self.items[e], texts[i]) for i, e, _ in asks])


    def _row_vectors(self, texts: list[str]) -> np.ndarray:
        """The vectors of distinct `texts`: from the run's store where another task (or an earlier batch)
        embedded them, the rest embedded here and added to it."""
        keys = [VectorStore.key(t) for t in texts]
        self.store.refresh()
        todo = [i for i, k in enumerate(keys) if k not in self.store.where]
        if todo:
            self.store.add([keys[i] for i in todo], self.emb.encode([texts[i] for i in todo]))
        if any(k not in self.store.where for k in keys):  # the store could not be written: embed here
            return self.emb.encode(texts)
        self.reused += len(texts) - len(todo)
        log.info("semantic tier: %d texts, %d embedded here, %d read from the run's store", len(texts), len(todo),
                 len(texts) - len(todo))
        return self.store.get(keys)


def semantic_text(prompt: str | None, response: str | None, cfg: DecontamConfig) -> tuple[str, str] | None:
    """(side, text) the tier embeds for a row: the prompt, else the response's opening; None when both are empty."""
    if prompt and prompt.strip():
        return "prompt", prompt
    if response and response.strip():
        return "response", response[:cfg.semantic_response_chars]
    return None


def semantic_hits(tier: SemanticTier, prompts, responses, flagged: list[bool], cfg: DecontamConfig
                  ) -> list[tuple[int, str, str, SemanticHit]]:
    """(row, side, embedded text, hit) for the rows not `flagged` by another tier that rephrase an item. Each
    distinct text is embedded once."""
    plist = prompts.to_pylist() if hasattr(prompts, "to_pylist") else list(prompts)
    rlist = (responses.to_pylist() if hasattr(responses, "to_pylist") else list(responses)) if responses is not None \
        else [None] * len(plist)
    todo: dict[str, list[tuple[int, str]]] = {}
    for i, done in enumerate(flagged):
        if done:
            continue
        got = semantic_text(plist[i], rlist[i] if cfg.check_response else None, cfg)
        if got:
            todo.setdefault(got[1], []).append((i, got[0]))
    texts = list(todo)
    return [(i, side, text, h) for text, hits in zip(texts, tier.match(texts), strict=True) if hits
            for i, side in todo[text] for h in hits]


def hit_detail(tier: SemanticTier, text: str, h: SemanticHit) -> dict:
    """What the report shows of a semantic match: cosines, the aligned numbers, both texts."""
    d = {"cosine": round(h.cosine, 4), "question_cosine": round(h.question_cosine, 4), "numbers": h.numbers,
         "item_text": tier.items[h.entry][:SHOWN_CHARS], "row_text": text[:SHOWN_CHARS]}
    if h.judge and tier.judge is not None:
        d["judge"] = {"model": tier.judge.model, "answer": h.judge}
    return d
