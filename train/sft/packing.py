"""Collation as SFTTrainer does it, padding share, and the probe that packed samples stay isolated.

On CUDA with FlashAttention, TRL's padding-free collator passes `cu_seq_lens` to the varlen kernels. With
`sdpa`/`eager`/`flex_attention`, transformers >= 5 derives a block-diagonal causal mask from the restarting
`position_ids`, but only when no attention mask and no KV cache are passed. With `use_cache=True`, packed
samples silently attend to each other. `packing_probe` measures this on the real model, on its device and
dtype, so the trainer can refuse or fall back explicitly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


def collate(examples: list[dict[str, Any]], pad_token_id: int, padding_free: bool) -> dict[str, Any]:
    """Collate tokenised rows exactly as SFTTrainer does (TRL's DataCollatorForLanguageModeling)."""
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    return DataCollatorForLanguageModeling(pad_token_id=pad_token_id, padding_free=padding_free)(examples)


def padding_share(batch: dict[str, Any]) -> tuple[int, int]:
    """(real tokens, computed positions) of one collated batch; padding share = 1 - real/computed."""
    total = int(batch["input_ids"].numel())
    if "attention_mask" in batch:
        return int(batch["attention_mask"].sum()), total
    return int(batch["cu_seq_lens_q"][-1]), total


@dataclass
class PackingProbe:
    """What the isolation probe measured, all as max |logit difference| on the last packed sample.

    `leak`: the last sample's logits with the earlier samples' tokens replaced by other random tokens of the
    same lengths. Same shapes, same kernel, so with isolated samples the difference is exactly or nearly 0
    whatever the dtype. `vs_alone`: packed against the sample run alone. This also catches wrong positions,
    but includes kernel/dtype noise. `scale`: max |logit| of that sample, the yardstick for both.
    """

    leak: float
    vs_alone: float
    scale: float
    dtype: str
    device: str
    attn_implementation: str

    def isolated(self) -> bool:
        """Packed samples neither see each other nor lose their positions (tolerances relative to `scale`)."""
        rel_alone = 1e-3 if self.dtype == "torch.float32" else 5e-2
        return self.leak <= 1e-4 * self.scale + 1e-6 and self.vs_alone <= rel_alone * self.scale + 1e-5

    def as_dict(self) -> dict[str, Any]:
        """Plain dict (+ the verdict) for JSON."""
        return {**asdict(self), "isolated": self.isolated()}


def _logits(model, batch: dict[str, Any], use_cache: bool):
    """Logits of one packed padding-free batch (labels dropped, tensors moved to the model's device)."""
    device = next(model.parameters()).device
    batch = {k: v.to(device) if hasattr(v, "to") else v for k, v in batch.items() if k != "labels"}
    return model(**batch, use_cache=use_cache).logits[0].float()


def packing_probe(model, lengths: Sequence[int] = (9, 6), use_cache: bool = False, seed: int = 0,
                  autocast_dtype=None) -> PackingProbe:
    """Run the isolation probe (see `PackingProbe`) with random samples packed by TRL's padding-free collator.

    `autocast_dtype` (e.g. torch.bfloat16) runs it under autocast on the model's device, as bf16 training
    does, so the attention kernel probed is the one training will use.
    """
    import contextlib

    import torch

    gen = torch.Generator().manual_seed(seed)
    vocab = int(model.get_input_embeddings().weight.shape[0])
    samples = [torch.randint(0, vocab, (n,), generator=gen).tolist() for n in lengths]
    others = [torch.randint(0, vocab, (n,), generator=gen).tolist() for n in lengths[:-1]] + [samples[-1]]
    device = next(model.parameters()).device
    n_last = lengths[-1]
    was_training = model.training
    model.eval()
    amp = (torch.autocast(device.type, dtype=autocast_dtype) if autocast_dtype is not None
           else contextlib.nullcontext())
    try:
        with torch.no_grad(), amp:
            alone = model(input_ids=torch.tensor([samples[-1]], device=device), use_cache=False).logits[0].float()
            packed = _logits(model, collate([{"input_ids": s} for s in samples], 0, True), use_cache)[-n_last:]
            swapped = _logits(model, collate([{"input_ids": s} for s in others], 0, True), use_cache)[-n_last:]
    finally:
        model.train(was_training)
    impl = str(getattr(model.config, "_attn_implementation", None) or "")
    dtype = str(autocast_dtype) if autocast_dtype is not None else str(model.dtype)
    return PackingProbe(leak=float((packed - swapped).abs().max()), vs_alone=float((packed - alone).abs().max()),
                        scale=float(alone.abs().max()), dtype=dtype, device=str(device),
                        attn_implementation=impl)


def packing_leak(model, lengths: Sequence[int] = (9, 6), use_cache: bool = False, seed: int = 0) -> float:
    """Max |logit difference| between samples run alone and the same samples packed into one row.

    ~0 means the attention backend isolates packed samples; a large value means they attend to each other
    (`use_cache=True` reproduces the leak a KV cache causes on sdpa/eager).
    """
    import torch

    gen = torch.Generator().manual_seed(seed)
    vocab = int(model.get_input_embeddings().weight.shape[0])
    samples = [torch.randint(0, vocab, (n,), generator=gen).tolist() for n in lengths]
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            alone = [model(input_ids=torch.tensor([s], device=device), use_cache=False).logits[0].float()
                     for s in samples]
            packed = _logits(model, collate([{"input_ids": s} for s in samples], 0, True), use_cache)
    finally:
        model.train(was_training)
    return float((packed - torch.cat(alone)).abs().max())
