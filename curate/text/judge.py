"""An LLM judge for the semantic tiers' candidates (`--semantic-judge URL`, decontamination and dedup).

The semantic tiers propose pairs by embedding cosine and let rule-based pair checks decide
(`curate/decontam/semantic.py`, `curate/dedup/semantic.py`). On hand-written rewordings the embeddings are not
what fails: the true item is the nearest one for 99 of 100 held-out rephrasings (`bench/semantic/oracle.py`); the
rules lose heavy rewordings whose numbers are said otherwise or whose formulas are written out in words. This
module asks an LLM served behind an OpenAI-compatible chat endpoint (vLLM, SGLang, llama.cpp's server, a hosted
API) the question the rules cannot answer, "is B the same problem as A in other words?" (the LLM-decontaminator
recipe: embedding top-k + a judge; NeMo Curator's semantic dedup has the same shape). Which pairs reach it is
each stage's business. The model's first word decides: "yes" is the same problem, anything else is not.

Answers are cached on disk (cotforge cache folder, one file per model and prompt version, keyed by both texts),
so a rerun asks nothing and writes the same shards.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cotforge.curate.text.unitables import cache_dir

log = logging.getLogger(__name__)

PROMPT_VERSION = "2"
PROMPT = (
    "You compare two problems. Problem B may be Problem A rewritten in other words: reordered sentences, numbers "
    "written as words, formulas or code written out in prose. It is a different problem if any number, condition, "
    "object or the quantity asked for differs.\n\nProblem A:\n{item}\n\nProblem B:\n{row}\n\n"
    "Is Problem B the same problem as Problem A? Answer with one word: Yes or No.")
JUDGE_HELP = {
    "url": "Semantic judge: an OpenAI-compatible endpoint (e.g. http://localhost:8000/v1 from `vllm serve MODEL`) "
           "whose instruct model decides candidate pairs (curate/text/judge.py; a bearer token from "
           "$COTFORGE_JUDGE_API_KEY or $OPENAI_API_KEY); answers cached on disk. Empty: none.",
    "model": "Semantic judge: the model name sent to the endpoint (an instruct model answering Yes/No).",
    "timeout_s": "Semantic judge: seconds per request (3 tries).",
    "workers": "Semantic judge: requests in flight per task.",
}


class JudgeError(ValueError):
    """The judge endpoint cannot be used (the message names the URL and what failed; a ValueError: the CLI
    prints it as a usage error)."""


def _headers() -> dict[str, str]:
    """The bearer token of a hosted endpoint, from $COTFORGE_JUDGE_API_KEY or $OPENAI_API_KEY (none: no header)."""
    key = os.environ.get("COTFORGE_JUDGE_API_KEY") or os.environ.get("OPENAI_API_KEY")
    return {"Authorization": f"Bearer {key}"} if key else {}


def _key(item: str, row: str) -> str:
    return hashlib.sha256(f"{item}\0{row}".encode("utf-8", "replace")).hexdigest()[:32]


class Judge:
    """Yes/no verdicts of the model `model` at the OpenAI-compatible endpoint `url` (".../v1"), cached on disk."""

    def __init__(self, url: str, model: str, timeout_s: float = 60.0, workers: int = 8,
                 cache: Path | None = None):
        self.url = url.rstrip("/")
        self.model = model
        self.timeout_s = timeout_s
        self.workers = workers
        tag = hashlib.sha256(f"{model}\0{PROMPT_VERSION}".encode()).hexdigest()[:16]
        self.cache_path = cache or cache_dir() / "judge" / f"{tag}.jsonl"
        self._answers: dict[str, str] = {}
        self._lock = threading.Lock()
        self.asked = 0
        self._load()

    def _load(self) -> None:
        if not self.cache_path.is_file():
            return
        for line in self.cache_path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
                self._answers[rec["key"]] = rec["answer"]
            except (ValueError, KeyError, TypeError):
                continue  # a line cut by a killed run: asked again

    def _remember(self, key: str, answer: str) -> None:
        line = json.dumps({"key": key, "answer": answer}) + "\n"
        with self._lock:
            self._answers[key] = answer
            try:
                self.cache_path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.cache_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                try:
                    os.write(fd, line.encode())  # one short append per answer: tasks share the file
                finally:
                    os.close(fd)
            except OSError as e:
                log.warning("judge: cannot write the cache %s (%s): answers are not kept", self.cache_path, e)

    def check(self) -> None:
        """Fail early, in the process that starts the stage, when the endpoint does not answer or lacks the model."""
        import httpx

        try:
            r = httpx.get(f"{self.url}/models", timeout=min(self.timeout_s, 30.0), headers=_headers())
            r.raise_for_status()
            names = [m.get("id") for m in r.json().get("data", [])]
        except (httpx.HTTPError, ValueError, AttributeError) as e:
            raise JudgeError(f"semantic_judge: {self.url}/models did not answer as an OpenAI-compatible endpoint "
                             f"({type(e).__name__}: {e}); start the server (e.g. `vllm serve MODEL`) or fix the URL"
                             ) from None
        if self.model and names and self.model not in names:
            raise JudgeError(f"semantic_judge_model: {self.model!r} is not served at {self.url} "
                             f"(it serves {', '.join(map(str, names[:5]))})")

    def _ask(self, item: str, row: str) -> str:
        import httpx

        body = {"model": self.model, "temperature": 0, "max_tokens": 3,
                "messages": [{"role": "user", "content": PROMPT.format(item=item, row=row)}]}
        last: Exception | None = None
        for attempt in range(3):
            try:
                r = httpx.post(f"{self.url}/chat/completions", json=body, timeout=self.timeout_s, headers=_headers())
                r.raise_for_status()
                return str(r.json()["choices"][0]["message"]["content"] or "").strip()
            except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as e:
                last = e
                time.sleep(2.0 * attempt)  # a busy server: 0, 2 s before the second and third try
        raise JudgeError(f"semantic_judge: {self.url}/chat/completions failed 3 times ({type(last).__name__}: {last})")

    def answers(self, pairs: list[tuple[str, str]]) -> list[str]:
        """The model's answer for each (item, row) pair: from the cache, the rest asked concurrently."""
        keys = [_key(a, b) for a, b in pairs]
        todo = {k: p for k, p in zip(keys, pairs, strict=True) if k not in self._answers}
        if todo:
            with ThreadPoolExecutor(max_workers=max(1, self.workers)) as pool:
                for k, ans in zip(todo, pool.map(lambda p: self._ask(*p), todo.values()), strict=True):
                    self._remember(k, ans)
            self.asked += len(todo)
            log.info("semantic judge: %d pairs asked, %d from the cache", len(todo), len(pairs) - len(todo))
        return [self._answers[k] for k in keys]


def check_judge_settings(cfg) -> None:
    """A stage config's judge fields (semantic_judge*), ValueErrors naming the field."""
    if not -1.0 <= cfg.semantic_judge_cosine <= 1.0:
        raise ValueError(f"semantic_judge_cosine: must be in [-1, 1] (got {cfg.semantic_judge_cosine})")
    if cfg.semantic_judge and not cfg.semantic:
        raise ValueError("semantic_judge: the judge decides semantic candidates; turn on --semantic")
    if cfg.semantic_judge and not cfg.semantic_judge.startswith(("http://", "https://")):
        raise ValueError(f"semantic_judge: must be an http(s) URL of an OpenAI-compatible endpoint "
                         f"(got {cfg.semantic_judge!r})")
    if cfg.semantic_judge and not cfg.semantic_judge_model:
        raise ValueError("semantic_judge_model: name the model the endpoint serves (its /models list)")
    if cfg.semantic_judge_timeout_s <= 0 or cfg.semantic_judge_workers < 1:
        raise ValueError("semantic_judge_timeout_s must be > 0 and semantic_judge_workers >= 1")


def make_judge(cfg) -> Judge | None:
    """The judge a stage config names (its semantic_judge* fields), None without `semantic_judge`."""
    if not cfg.semantic_judge:
        return None
    return Judge(cfg.semantic_judge, cfg.semantic_judge_model, cfg.semantic_judge_timeout_s,
                 cfg.semantic_judge_workers)


def says_yes(answer: str) -> bool:
    """Whether an answer's first word is "yes" (case and punctuation aside)."""
    words = answer.strip().split()
    return bool(words) and words[0].strip(".,:;!*\"'").lower() == "yes"
