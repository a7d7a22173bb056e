"""Build a tiny causal LM (Qwen2 architecture) with a locally trained tokenizer, fully offline.

Tests, the demo and CPU benches use it; it is saved with `save_pretrained` and loaded back with
the same `from_pretrained` calls a real run uses with a hub id, so no code path is test-only.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<pad>", "<think>", "</think>"]

# ChatML with `{% generation %}` markers so `return_assistant_tokens_mask` / TRL's
# assistant-only loss know which tokens the assistant wrote.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\n' }}"
    "{%- if message['role'] == 'assistant' %}"
    "{% generation %}{{- message['content'] + '<|im_end|>' }}{% endgeneration %}{{- '\n' }}"
    "{%- else %}{{- message['content'] + '<|im_end|>\n' }}{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}"
)


def default_corpus(n: int = 2000, seed: int = 0) -> list[str]:
    """Short math/code/prose strings so the BPE vocabulary covers what tests and the demo write."""
    rng = random.Random(seed)
    words = ("the answer is what find compute let solve problem number sum product remainder divided by "
             "def return print import for in range if else while class self list int str python code "
             "step first then so therefore we have thus check total each").split()
    out = []
    for _ in range(n):
        a, b = rng.randint(0, 999), rng.randint(0, 999)
        out.append(f"What is {a} + {b}? <think>{a} plus {b} is {a + b}.</think> The answer is \\boxed{{{a + b}}}.")
        out.append(" ".join(rng.choice(words) for _ in range(12)))
        out.append(f"def f(x):\n    return x * {a} + {b}\n\nprint(f({b}))")
    return out


def build_tokenizer(corpus: Iterable[str] | None = None, vocab_size: int = 512, *,
                    special_tokens: Sequence[str] = SPECIAL_TOKENS, eos_token: str = "<|im_end|>",
                    pad_token: str = "<pad>", bos_token: str | None = None, added_tokens: Sequence[str] = (),
                    chat_template: str = CHAT_TEMPLATE):
    """Train a byte-level BPE tokenizer and wrap it as a transformers fast tokenizer.

    `special_tokens` become special added tokens, `added_tokens` non-special ones (like Qwen3's `<think>`).
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(special_tokens),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(list(corpus or default_corpus()), trainer=trainer)
    named = {eos_token, pad_token, bos_token}
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=eos_token, pad_token=pad_token,
                                   bos_token=bos_token, unk_token=None,
                                   additional_special_tokens=[t for t in special_tokens if t not in named])
    if added_tokens:
        fast.add_tokens([AddedToken(t, special=False, normalized=False) for t in added_tokens])
    fast.chat_template = chat_template
    return fast


def build_tiny_model(out_dir: str | Path, *, corpus: Iterable[str] | None = None, vocab_size: int = 512,
                     hidden_size: int = 64, layers: int = 2, heads: int = 4, kv_heads: int = 2,
                     max_positions: int = 4096, seed: int = 0, tokenizer=None) -> Path:
    """Create, save and return the folder of a tiny random Qwen2 model plus its tokenizer (default: `build_tokenizer`)."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = tokenizer if tokenizer is not None else build_tokenizer(corpus, vocab_size)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=hidden_size, intermediate_size=hidden_size * 2,
                      num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                      max_position_embeddings=max_positions, tie_word_embeddings=True,
                      bos_token_id=None, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(out)
    tok.save_pretrained(out)
    log.info("tiny model (%d params, vocab %d) saved to %s", sum(p.numel() for p in model.parameters()),
             len(tok), out)
    return out
