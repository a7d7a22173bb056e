"""The one generation interface: chat prompts in, n sampled completions (text, token ids, log-probs) out.

`HFGenerator` runs `transformers.generate` (CPU or GPU); `VLLMGenerator` runs vLLM (the `gpu` extra) and is the only
code in the project that imports vllm. Difficulty estimation, evaluation and RL all ask `make_generator` for one.

Log-probs are those of the *sampling* distribution before top-p/top-k truncation: log_softmax(logits / temperature)
at the chosen token (vLLM: `logprobs_mode="processed_logprobs"`), so a trainer can form the sampler/trainer
importance ratio exp(logp_train - logp_sampler) on the same footing.
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

log = logging.getLogger(__name__)


@dataclass
class SamplingConfig:
    """Sampling settings shared by every backend (top_k 0 or -1 = off; temperature 0 = greedy)."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    repetition_penalty: float = 1.0
    max_new_tokens: int = 256
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n < 1 or self.max_new_tokens < 1:
            raise ValueError(f"SamplingConfig: n and max_new_tokens must be >= 1, got n={self.n}, "
                             f"max_new_tokens={self.max_new_tokens}")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError(f"SamplingConfig: need temperature >= 0 and 0 < top_p <= 1, got {self.temperature}, "
                             f"{self.top_p}")


@dataclass
class Completion:
    """One sampled continuation; token_ids include the stop token when finish_reason == "stop", text does not."""

    text: str
    token_ids: list[int]
    logprobs: list[float] | None
    finish_reason: str  # "stop" | "length"


@runtime_checkable
class Generator(Protocol):
    """prompts are chat message lists; output[i] holds cfg.n completions of prompt i."""

    def generate(self, prompts: list[list[dict]], cfg: SamplingConfig) -> list[list[Completion]]: ...


def _check_prompts(prompts: list[list[dict]]) -> None:
    """Clear error for a prompt that is not a list of {role, content} messages."""
    for i, p in enumerate(prompts):
        if not isinstance(p, list) or not p or not all(isinstance(m, dict) and "role" in m and "content" in m
                                                       for m in p):
            raise ValueError(f"prompt {i}: expected a non-empty list of {{role, content}} messages, got {p!r:.200}")


class HFGenerator:
    """Sampling with `model.generate`, batched over prompts, deterministic for a given cfg.seed."""

    def __init__(self, model: Any, tokenizer: Any = None, batch_size: int = 8):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if isinstance(model, str):
            tokenizer = tokenizer if tokenizer is not None else model
            model = AutoModelForCausalLM.from_pretrained(model)
        if isinstance(tokenizer, str):
            tokenizer = AutoTokenizer.from_pretrained(tokenizer)
        if tokenizer is None:
            raise ValueError("HFGenerator needs a tokenizer when `model` is a loaded model")
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self._stop_ids = _stop_ids(model, tokenizer)

    def generate(self, prompts: list[list[dict]], cfg: SamplingConfig) -> list[list[Completion]]:
        """Render with the chat template (add_generation_prompt=True) and sample cfg.n completions per prompt."""
        import torch

        _check_prompts(prompts)
        texts = [self.tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]
        out: list[list[Completion]] = []
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.random.fork_rng(devices=[]), torch.no_grad():
                torch.manual_seed(cfg.seed)
                for start in range(0, len(texts), self.batch_size):
                    out.extend(self._generate_batch(texts[start:start + self.batch_size], cfg))
        finally:
            self.model.train(was_training)
        return out

    def _generate_batch(self, texts: list[str], cfg: SamplingConfig) -> list[list[Completion]]:
        """One padded `generate` call; splits the flat n*len(texts) outputs back per prompt."""
        import torch

        tok = self.tokenizer
        side = tok.padding_side
        tok.padding_side = "left"
        try:
            enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        finally:
            tok.padding_side = side
        enc = {k: v.to(self.model.device) for k, v in enc.items()}
        greedy = cfg.temperature == 0
        kwargs: dict[str, Any] = dict(max_new_tokens=cfg.max_new_tokens, do_sample=not greedy,
                                      num_return_sequences=cfg.n, repetition_penalty=cfg.repetition_penalty,
                                      return_dict_in_generate=True, output_logits=True,
                                      pad_token_id=tok.pad_token_id, eos_token_id=self._stop_ids)
        if not greedy:
            kwargs.update(temperature=cfg.temperature, top_p=cfg.top_p, top_k=max(cfg.top_k, 0))
        res = self.model.generate(**enc, **kwargs)
        new = res.sequences[:, enc["input_ids"].shape[1]:]
        logits = torch.stack(res.logits, dim=1).float()  # [B*n, new, vocab], raw (before processors)
        logits = logits / (cfg.temperature if not greedy else 1.0)
        lp = torch.log_softmax(logits, dim=-1).gather(-1, new[:, : logits.shape[1], None]).squeeze(-1)
        comps = [self._to_completion(new[j].tolist(), lp[j].tolist()) for j in range(new.shape[0])]
        return [comps[i * cfg.n:(i + 1) * cfg.n] for i in range(len(texts))]

    def _to_completion(self, ids: list[int], logprobs: list[float]) -> Completion:
        """Cut at the first stop token (kept in token_ids, dropped from text); the rest is padding."""
        for k, t in enumerate(ids):
            if t in self._stop_ids:
                kept = ids[: k + 1]
                text = self.tokenizer.decode(ids[:k], skip_special_tokens=False)
                return Completion(text, kept, logprobs[: k + 1], "stop")
        return Completion(self.tokenizer.decode(ids, skip_special_tokens=False), ids, logprobs, "length")


def _stop_ids(model: Any, tokenizer: Any) -> list[int]:
    """EOS ids from the generation config, else the tokenizer."""
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    ids = eos if isinstance(eos, list) else [eos]
    if not ids or ids[0] is None:
        raise ValueError("model/tokenizer define no eos_token_id; generation could not stop")
    return [int(i) for i in ids]


class VLLMGenerator:
    """vLLM offline engine (`vllm.LLM`); needs the `gpu` extra. Extra kwargs go to `vllm.LLM(...)`."""

    def __init__(self, model: str, **llm_kwargs: Any):
        try:
            import vllm
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("VLLMGenerator needs vLLM: pip install 'cotforge[gpu]' (CUDA machine), "
                              "or use backend='hf'") from e
        self._vllm = vllm
        llm_kwargs.setdefault("logprobs_mode", "processed_logprobs")
        self.llm = vllm.LLM(model=model, **llm_kwargs)

    def generate(self, prompts: list[list[dict]], cfg: SamplingConfig) -> list[list[Completion]]:
        """`LLM.chat` with add_generation_prompt=True; logprobs of the sampled tokens are returned."""
        _check_prompts(prompts)
        params = self._vllm.SamplingParams(
            n=cfg.n, temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k if cfg.top_k > 0 else -1,
            repetition_penalty=cfg.repetition_penalty, max_tokens=cfg.max_new_tokens, seed=cfg.seed, logprobs=0)
        outs = self.llm.chat(prompts, params, add_generation_prompt=True, use_tqdm=False)
        return [[_vllm_completion(o) for o in req.outputs] for req in outs]


def _vllm_completion(o: Any) -> Completion:
    """vLLM CompletionOutput -> Completion (logprob of each sampled token)."""
    lps = None
    if o.logprobs is not None:
        lps = [float(step[tid].logprob) for step, tid in zip(o.logprobs, o.token_ids, strict=False)]
    return Completion(o.text, list(o.token_ids), lps, "length" if o.finish_reason == "length" else "stop")


def vllm_available() -> bool:
    """True when vllm is importable and a CUDA device is visible."""
    if importlib.util.find_spec("vllm") is None:
        return False
    import torch

    return torch.cuda.is_available()


def make_generator(model: str, backend: str = "auto", **kw: Any) -> Generator:
    """`backend`: "auto" (vllm if importable and CUDA, else hf), "hf" or "vllm"; kw go to the backend."""
    if backend not in ("auto", "hf", "vllm"):
        raise ValueError(f"unknown generation backend {backend!r}; expected auto, hf or vllm")
    if backend == "vllm" or (backend == "auto" and vllm_available()):
        return VLLMGenerator(model, **kw)
    log.info("generation backend: hf (transformers.generate)")
    return HFGenerator(model, **kw)
