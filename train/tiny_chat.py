"""Tiny offline tokenizers that carry real chat templates and the special tokens those templates use.

Tests and benches check SFT rendering against the templates models really ship without hub access: the
templates TRL 1.16 ships in `trl/chat_templates/` (read from the installed package), plus the *original*
DeepSeek-R1-Distill template. TRL's `deepseek_r1_distill.jinja` is the current one, whose generation prompt
is `<｜Assistant｜><think>\\n`. DeepSeek added the `<think>\\n` in February 2025 (hub commits 6602cade on
DeepSeek-R1-Distill-Qwen-7B and 3865e12a on -32B, discussed in deepseek-ai/DeepSeek-R1#352 and
browser-use/browser-use#693). The template the checkpoints were released with ends with `<｜Assistant｜>` and
is otherwise byte-identical: checked against a vendored copy of DeepSeek-R1-Distill-Qwen-1.5B's
tokenizer_config.json (the Esperanto/DeepSeek-R1-Distill-Qwen-1.5B-kvc-fp16-onnx conversion, found with the
code search). So `deepseek_r1_distill_original` is TRL's file with that one generation prompt swapped back.

Each family's vocabulary is a small byte-level BPE (`train.tiny.build_tokenizer`), so ids differ from the
real models but every control token, eos/bos/pad choice and template is the family's own. `*_base` families
are Qwen base / Qwen2.5-Math style: eos `<|endoftext|>` while the template ends turns with `<|im_end|>`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

R1_CURRENT_GENERATION_PROMPT = "{{'<｜Assistant｜><think>\\n'}}"
R1_ORIGINAL_GENERATION_PROMPT = "{{'<｜Assistant｜>'}}"
QWEN_CONTROL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
LLAMA3_CONTROL = ("<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                  "<|eot_id|>", "<|eom_id|>", "<|python_tag|>", "<|finetune_right_pad_id|>")
R1_CONTROL = ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>")


@dataclass(frozen=True)
class Family:
    """A tokenizer family: which template, which control tokens, and its eos/bos/pad choice."""

    template: str  # a file name in trl/chat_templates/ (without .jinja), or "deepseek_r1_distill_original"
    control: tuple[str, ...]
    eos: str
    pad: str
    bos: str | None = None
    added: tuple[str, ...] = ()  # non-special added tokens (Qwen3's <think>, R1's <｜User｜>)


FAMILIES: dict[str, Family] = {
    "qwen2_5": Family("qwen2_5", QWEN_CONTROL, eos="<|im_end|>", pad="<|endoftext|>"),
    "qwen2_5_training": Family("qwen2_5_training", QWEN_CONTROL, eos="<|im_end|>", pad="<|endoftext|>"),
    "qwen2_5_base": Family("qwen2_5", QWEN_CONTROL, eos="<|endoftext|>", pad="<|endoftext|>"),
    "qwen3": Family("qwen3", QWEN_CONTROL, eos="<|im_end|>", pad="<|endoftext|>", added=("<think>", "</think>")),
    "qwen3_training": Family("qwen3_training", QWEN_CONTROL, eos="<|im_end|>", pad="<|endoftext|>",
                             added=("<think>", "</think>")),
    "qwen3_base": Family("qwen3", QWEN_CONTROL, eos="<|endoftext|>", pad="<|endoftext|>",
                         added=("<think>", "</think>")),
    "llama3_1": Family("llama3_1", LLAMA3_CONTROL, eos="<|eot_id|>", pad="<|finetune_right_pad_id|>",
                       bos="<|begin_of_text|>"),
    "deepseek_r1_distill": Family("deepseek_r1_distill", R1_CONTROL, eos="<｜end▁of▁sentence｜>",
                                  pad="<｜end▁of▁sentence｜>", bos="<｜begin▁of▁sentence｜>",
                                  added=("<｜User｜>", "<｜Assistant｜>", "<think>", "</think>")),
    "deepseek_r1_distill_training": Family("deepseek_r1_distill_training", R1_CONTROL, eos="<｜end▁of▁sentence｜>",
                                           pad="<｜end▁of▁sentence｜>", bos="<｜begin▁of▁sentence｜>",
                                           added=("<｜User｜>", "<｜Assistant｜>", "<think>", "</think>")),
    "deepseek_r1_distill_original": Family("deepseek_r1_distill_original", R1_CONTROL, eos="<｜end▁of▁sentence｜>",
                                           pad="<｜end▁of▁sentence｜>", bos="<｜begin▁of▁sentence｜>",
                                           added=("<｜User｜>", "<｜Assistant｜>", "<think>", "</think>")),
}


def trl_template(name: str) -> str:
    """A chat template TRL ships (`trl/chat_templates/<name>.jinja`), or the original R1-Distill one."""
    import trl

    if name == "deepseek_r1_distill_original":
        current = trl_template("deepseek_r1_distill")
        if current.count(R1_CURRENT_GENERATION_PROMPT) != 1:
            raise ValueError("TRL's deepseek_r1_distill.jinja changed: its generation prompt is not "
                             f"{R1_CURRENT_GENERATION_PROMPT} any more")
        return current.replace(R1_CURRENT_GENERATION_PROMPT, R1_ORIGINAL_GENERATION_PROMPT)
    path = Path(trl.__file__).parent / "chat_templates" / f"{name}.jinja"
    if not path.is_file():
        raise ValueError(f"{path}: TRL {trl.__version__} ships no chat template {name!r}")
    return path.read_text(encoding="utf-8")


def chat_tokenizer(family: str, vocab_size: int = 512):
    """A tiny tokenizer of `family` (see FAMILIES) with the family's template and control tokens."""
    from cotforge.train.tiny import build_tokenizer

    if family not in FAMILIES:
        raise ValueError(f"unknown tokenizer family {family!r}; known: {sorted(FAMILIES)}")
    f = FAMILIES[family]
    return build_tokenizer(vocab_size=vocab_size, special_tokens=f.control, eos_token=f.eos, pad_token=f.pad,
                           bos_token=f.bos, added_tokens=f.added, chat_template=trl_template(f.template))


# --------------------------------------------------------------------------- probe cases and their oracle

REASONING = "Let me add 2 and 2: that makes 4, and 4 - 2 = 2 checks it."
ANSWER = "The final answer is \\boxed{4}."
FULL = f"<think>\n{REASONING}\n</think>\n\n{ANSWER}"
OTHER = f"<|begin_of_thought|>\n{REASONING}\n<|end_of_thought|>\n\n{ANSWER}"
CLOSING_ONLY = f"{REASONING}\n</think>\n\n{ANSWER}"  # DeepSeek-R1 style: the prompt had opened <think>
HISTORY = "<think>\nFirst, 1 + 1 = 2.\n</think>\n\nThe answer is 2."

CASES: dict[str, list[dict[str, str]]] = {
    "single turn": [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": FULL}],
    "system turn": [{"role": "system", "content": "Reason step by step."},
                    {"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": FULL}],
    "two turns": [{"role": "user", "content": "What is 1 + 1?"}, {"role": "assistant", "content": HISTORY},
                  {"role": "user", "content": "And 2 + 2?"}, {"role": "assistant", "content": FULL}],
    "other markers": [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": OTHER}],
    "closing-only trace": [{"role": "user", "content": "What is 2 + 2?"},
                           {"role": "assistant", "content": CLOSING_ONLY}],
}


def end_of_turn(family: str) -> str:
    """The token each family's template closes an assistant turn with (read off the template files)."""
    f = FAMILIES[family]
    if f.template.startswith("llama"):
        return "<|eot_id|>"
    return "<｜end▁of▁sentence｜>" if f.template.startswith("deepseek") else "<|im_end|>"


def expected_completion(family: str, content: str, reasoning_markers: str = "keep") -> str | None:
    """What the model must generate after the inference prompt for an assistant `content`; None = drop.

    Written from reading each template, independently of cotforge's renderer. Qwen2.5 and Llama-3.1 print the
    content as is (Llama trims it). Qwen3 prints `<think>\\n{reasoning}\\n</think>\\n\\n{answer}` and so does
    our normalisation of FULL. The R1-Distill prompts end with `<think>\\n` (current and _training), so the
    model continues inside the block. The original R1 prompt ends with `<｜Assistant｜>` and the response is
    generated whole. A closing-only trace is opened with `<think>\\n` unless the prompt already did that.
    Other markers are rewritten to `<think>` with `auto`. With `keep` they are dropped wherever the template
    renders or opens `<think>` itself (Qwen3, R1 current).
    """
    tpl, eot = FAMILIES[family].template, end_of_turn(family)
    if content == OTHER and reasoning_markers == "auto" and not tpl.startswith(("qwen2_5", "llama")):
        content = FULL
    if content == OTHER and (tpl.startswith("qwen3") or tpl in ("deepseek_r1_distill", "deepseek_r1_distill_training")):
        return None
    prompt_opens = tpl in ("deepseek_r1_distill", "deepseek_r1_distill_training")
    if content == CLOSING_ONLY and not prompt_opens:
        content = "<think>\n" + content
    if prompt_opens:
        content = content.removeprefix("<think>\n")
    return (content.strip() if tpl.startswith("llama") else content) + eot


def history_is_trained(family: str) -> bool:
    """Whether the earlier assistant turn of "two turns" renders the same in context as alone (read off templates).

    Qwen3's stock template drops reasoning before the last user turn, and both stock R1 templates cut up to
    `</think>`, so their history turn is context only. TRL's Qwen3/R1 `_training` variants, Qwen2.5 and
    Llama-3.1 render it unchanged.
    """
    return FAMILIES[family].template not in ("qwen3", "deepseek_r1_distill", "deepseek_r1_distill_original")
