"""An LLM judge for the semantic tier's undecided candidates (`--semantic-judge URL`).

The semantic tier proposes benchmark items by embedding cosine and lets a rule-based pair check decide
(`decontam/semantic.py`). On hand-written rephrasings the embeddings are not what fails: a perfect judge over the
candidates would reach 0.92 recall from cosine 0.80 and 0.96 from 0.70 (`bench/semantic/oracle.py`), where the
rules reach 0.80. What the rules cannot read is a heavy rewording whose numbers are said otherwise or whose
formula is written out in words. This module asks an LLM served behind an OpenAI-compatible chat endpoint
(vLLM, SGLang, llama.cpp's server, a hosted API) the one question the rules cannot answer: "is this the same
problem in other words?" (the LLM-decontaminator recipe: embedding top-k + a judge).

What goes to the judge (decided in `decontam/semantic.py`): the top-k neighbours with cosine >= the judge's
bound that the rules reject only for reasons a rewording explains (`few_numbers`, `math_changed`, or a cosine
below the rules' bound); a pair whose numbers disagree (`number_changed`) never does, so the judge cannot flag a
number-changed look-alike. The model's first word decides: "yes" flags the row, anything else keeps it.

Answers are cached on disk (cotforge cache folder, one file per model and prompt version, keyed by both texts),
so a rerun asks nothing and writes the same shards; the report keeps the model and its answer with each match.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cotforge.curate.text.unitables import cache_dir

log = logging.getLogger(__name__)

PROMPT_VERSION = "1"
PROMPT = (
    "You compare two math problems. Problem B may be Problem A rewritten in other words: reordered sentences, "
    "numbers written as words, formulas written out in prose. It is a different problem if any number, condition, "
    "object or the quantity asked for differs.\n\nProblem A:\n{item}\n\nProblem B:\n{row}\n\n"
    "Is Problem B the same problem as Problem A? Answer with one word: Yes or No.")


class JudgeError(ValueError):
    """The judge endpoint cannot be used (the message names the URL and what failed; a ValueError: the CLI
    prints it as a usage error)."""


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
            r = httpx.get(f"{self.url}/models", timeout=min(self.timeout_s, 30.0))
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
        for _ in range(3):
            try:
                r = httpx.post(f"{self.url}/chat/completions", json=body, timeout=self.timeout_s)
                r.raise_for_status()
                return str(r.json()["choices"][0]["message"]["content"] or "").strip()
            except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as e:
                last = e
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


def says_yes(answer: str) -> bool:
    """Whether an answer's first word is "yes" (case and punctuation aside)."""
    words = answer.strip().split()
    return bool(words) and words[0].strip(".,:;!*\"'").lower() == "yes"
