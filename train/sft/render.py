"""Render one SFT conversation exactly as inference will see it, with assistant-only labels.

The trained turn is the last assistant turn. Its training text is split where inference splits it:

    prompt     = render(history, add_generation_prompt=True)    -> labels -100
    completion = what the model must generate after that prompt, up to and including the template's
                 end-of-turn token                               -> labels = the token ids

`prompt` and `completion` are tokenised separately (`add_special_tokens=False`), because inference
tokenises the prompt alone and appends generated tokens, so the training ids are exactly
`apply_chat_template(history, add_generation_prompt=True) + completion ids`. The completion is the template's own
rendering of the turn (`render(history + [turn])` minus the prompt) when that rendering extends the
prompt and keeps the turn's reasoning. Otherwise the completion is rebuilt from the response plus the text the
template closes a turn with (`rebuilt_completion`). Without `repair` the row is dropped instead. Two cases need
this:

* templates that re-render assistant turns without their reasoning (DeepSeek-R1-Distill cuts everything up to
  `</think>`);
* templates whose generation prompt already holds part of the turn (R1-Distill's current `<｜Assistant｜><think>\\n`).

The end-of-turn token is read from the template (the first control token after an assistant's content in a
probe conversation), not from `tokenizer.eos_token`: Qwen base tokenizers have eos `<|endoftext|>` while
their template ends turns with `<|im_end|>`.

Reasoning: `curate.core.reasoning.find_reasoning` knows every marker pair cotforge knows and closing-only
traces (`... </think>\\n\\nanswer`, R1's output when the prompt opened the block). Such a trace is kept as it is
when the generation prompt opens the block. Otherwise its opener is prepended (`opened_closing_only`).
`reasoning_markers` can rewrite a response's markers to the target model's (`auto`: the pair the template
uses), e.g. `<|begin_of_thought|>` -> `<think>`.

History: an earlier assistant turn is trained only if the template renders it the same inside the
conversation as when it is the last turn (same text, same tokens, reasoning kept). Otherwise it is context
only. The stock Qwen3 and R1 templates drop history reasoning, so their earlier turns are context. TRL's
`_training` templates keep it, so there they are trained, on a context the stock template never shows at
inference.

A row that cannot be rendered faithfully gets a `drop` reason (`DROP_REASONS`); nothing raises per row.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from cotforge.curate.core.reasoning import (
    REASONING_MARKERS,
    find_reasoning,
    marker_pair,
    markers_in,
    replace_markers,
)

log = logging.getLogger(__name__)

MASK_MODES = ("auto", "generation", "diff", "none")
REASONING_MODES = ("keep", "auto", *(p[0] for p in REASONING_MARKERS))
PROBE_USER = "cotforge probe question"
PROBE_ANSWER = "cotforge probe answer"

DROP_REASONS = {
    "invalid_row": "the row's prompt/response/messages are missing or malformed",
    "no_prompt": "the trained assistant turn has no turn before it",
    "template_error": "the chat template raised while rendering the row",
    "end_of_turn_in_response": "the response contains the template's end-of-turn marker as text",
    "marker_mismatch": "the response's reasoning markers differ from those the template renders or opens",
    "prompt_opens_reasoning": "the generation prompt opens a reasoning block but the response has none",
    "prompt_closes_reasoning": "the generation prompt closes an empty reasoning block but the response reasons",
    "closing_only_trace": "closing-only reasoning trace under a template that does not open the block (repair off)",
    "reasoning_lost": "the template drops the trained turn's reasoning (repair off)",
    "prompt_mismatch": "the rendered conversation does not extend the generation prompt (repair off)",
    "no_end_of_turn": "the completion does not end with the end-of-turn token",
    "no_assistant_tokens": "no token is marked as assistant output",
}


class SFTDataError(ValueError):
    """Bad SFT input: the message names the file, row and field at fault."""


@dataclass(frozen=True)
class ChatFormat:
    """What a tokenizer's chat template does around an assistant turn, probed once per tokenizer."""

    end_of_turn: str
    end_of_turn_id: int
    closing: str  # the template's text after an assistant's content, up to and including end_of_turn
    target_markers: tuple[str, str] | None  # the reasoning markers the template (or vocabulary) uses
    template_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class Rendered:
    """One rendered row: ids + labels, or a drop reason; plus what was repaired or normalised."""

    input_ids: list[int] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    drop: str = ""
    detail: str = ""
    repairs: list[str] = field(default_factory=list)
    normalised: str = ""
    history_trained: int = 0
    history_untrained: int = 0


def render_text(tokenizer, messages: list[dict[str, str]], generation_prompt: bool,
                template_kwargs: dict[str, Any] | None = None) -> str:
    """The template's text for `messages` (what `apply_chat_template(tokenize=False)` returns)."""
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt,
                                         **(template_kwargs or {}))


def encode(tokenizer, text: str) -> list[int]:
    """Token ids of rendered text, the way `apply_chat_template(tokenize=True)` encodes it (no added BOS)."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _control_tokens(tokenizer) -> set[str]:
    """Special and added tokens (the template's control tokens are among them)."""
    added = {t.content for t in tokenizer.added_tokens_decoder.values()}
    return {t for t in added | set(tokenizer.all_special_tokens) if t}


def chat_format(tokenizer, template_kwargs: dict[str, Any] | None = None) -> ChatFormat:
    """Probe the template: render [user, assistant] and take the first control token after the content.

    Raises SFTDataError when the tokenizer has no template, or the template closes no assistant turn with a
    control token (the model could never learn to stop).
    """
    if not tokenizer.chat_template:
        raise SFTDataError("the tokenizer has no chat template; set `chat_template_path` to a .jinja file")
    kwargs = dict(template_kwargs or {})
    text = render_text(tokenizer, [{"role": "user", "content": PROBE_USER},
                                   {"role": "assistant", "content": PROBE_ANSWER}], False, kwargs)
    at = text.rfind(PROBE_ANSWER)
    if at < 0:
        raise SFTDataError("the chat template does not render an assistant turn's content")
    suffix = text[at + len(PROBE_ANSWER):]
    found = sorted((suffix.find(t), -len(t), t) for t in _control_tokens(tokenizer) if t in suffix)
    if not found:
        raise SFTDataError(f"the chat template closes an assistant turn with {suffix!r}: no special token, so "
                           "the model could not learn to stop")
    pos, _, eot = found[0]
    return ChatFormat(end_of_turn=eot, end_of_turn_id=int(tokenizer.convert_tokens_to_ids(eot)),
                      closing=suffix[:pos + len(eot)], target_markers=target_markers(tokenizer),
                      template_kwargs=kwargs)


def target_markers(tokenizer) -> tuple[str, str] | None:
    """The reasoning marker pair of the target model: the first known pair in its template, else its vocab."""
    template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else ""
    for pair in REASONING_MARKERS:
        if pair[0] in template or pair[1] in template:
            return pair
    added = {t.content for t in tokenizer.added_tokens_decoder.values()}
    for pair in REASONING_MARKERS:
        if pair[0] in added:
            return pair
    return None


def resolve_mask_mode(tokenizer, mask_mode: str) -> str:
    """`auto` -> `diff` (the inference split); `generation` needs `{% generation %}` markers in the template.

    `auto` does not prefer the markers: TRL's `_training` templates mark the header's `\\n` (Qwen2.5), the
    `<｜Assistant｜>` header (R1-Distill) or the separator after `<|im_end|>` (Qwen3), none of which inference
    asks the model to generate.
    """
    from trl.chat_template_utils import has_generation_markers

    if mask_mode not in MASK_MODES:
        raise SFTDataError(f"mask_mode {mask_mode!r} is not one of {MASK_MODES}")
    if tokenizer.chat_template is None:
        raise SFTDataError("the tokenizer has no chat template; set `chat_template_path` to a .jinja file")
    if mask_mode == "generation" and not has_generation_markers(tokenizer.chat_template):
        raise SFTDataError("mask_mode 'generation' needs {% generation %} markers in the chat template; "
                           "use mask_mode 'diff' (or 'auto')")
    return "diff" if mask_mode == "auto" else mask_mode


def _squash(text: str) -> str:
    """Text without whitespace: templates strip and re-join whitespace around reasoning, not the words."""
    return re.sub(r"\s+", "", text)


def _keeps(rendered: str, body: str) -> bool:
    """True when the reasoning body survives in the rendered text (whitespace-insensitive)."""
    return _squash(body) in _squash(rendered)


def _normalise(messages: list[dict[str, str]], fmt: ChatFormat, mode: str, out: Rendered) -> None:
    """Rewrite each assistant turn's reasoning markers to the target pair (`auto` or an explicit opener)."""
    if mode == "keep":
        return
    target = fmt.target_markers if mode == "auto" else marker_pair(mode)
    if target is None:
        return
    for m in messages:
        block = find_reasoning(m["content"]) if m["role"] == "assistant" else None
        if block is not None and block.pair != target:
            m["content"] = replace_markers(m["content"], block, target)
            out.normalised = out.normalised or block.opener


def _prompt_state(tail: str) -> tuple[tuple[str, str] | None, tuple[str, str] | None]:
    """(pair the generation prompt leaves open, pair it opens and closes) from the prompt's own text."""
    opened = closed = None
    for pair in markers_in(tail):
        at = tail.rfind(pair[0])
        if at >= 0 and pair[1] in tail[at:]:
            closed = closed or pair
        elif at >= 0:
            opened = opened or pair
    return opened, closed


def _completion(full: str, prompt: str, fmt: ChatFormat) -> str | None:
    """The rendered turn after the generation prompt, cut after its end-of-turn token (None if it does not fit)."""
    if not full.startswith(prompt):
        return None
    rest = full[len(prompt):]
    k = rest.rfind(fmt.end_of_turn)
    return rest[:k + len(fmt.end_of_turn)] if k >= 0 else None


def _after_prompt(content: str, tail: str, opened: tuple[str, str] | None) -> str:
    """The response minus what the generation prompt already holds (its opener and the text after it)."""
    if opened is None:
        return content
    stripped = content.lstrip()
    if not stripped.startswith(opened[0]):
        return content  # a closing-only trace: it starts inside the block the prompt opened
    rest = stripped[len(opened[0]):]
    after = tail[tail.rfind(opened[0]) + len(opened[0]):]
    return rest[len(after):] if after and rest.startswith(after) else rest


def _drop(out: Rendered, reason: str, detail: str) -> Rendered:
    out.drop, out.detail = reason, detail
    out.input_ids, out.labels = [], []
    return out


def render_conversation(tokenizer, fmt: ChatFormat, messages: list[dict[str, str]], *,
                        reasoning_markers: str = "keep", repair: bool = True) -> Rendered:
    """Render `messages` for training the last assistant turn (see the module docstring); never raises per row."""
    out = Rendered()
    last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    if last == 0:
        return _drop(out, "no_prompt", "the first message is the assistant turn")
    msgs = [dict(m) for m in messages[:last + 1]]
    _normalise(msgs, fmt, reasoning_markers, out)
    content, kw = msgs[last]["content"], fmt.template_kwargs
    if fmt.end_of_turn in content:
        return _drop(out, "end_of_turn_in_response", f"the response contains {fmt.end_of_turn!r}")
    try:
        base, prompt = render_text(tokenizer, msgs[:last], False, kw), render_text(tokenizer, msgs[:last], True, kw)
    except Exception as e:  # jinja raise_exception or a template bug: the row cannot be rendered
        return _drop(out, "template_error", f"{type(e).__name__}: {e}")
    tail = prompt[len(base):] if prompt.startswith(base) else prompt
    opened, closed = _prompt_state(tail)
    block = find_reasoning(content)
    if closed and block is not None and block.body:
        return _drop(out, "prompt_closes_reasoning", f"the generation prompt ends with {tail!r}")
    if opened and block is None:
        return _drop(out, "prompt_opens_reasoning", f"the generation prompt ends with {tail!r}")
    if opened and block.pair != opened:
        return _drop(out, "marker_mismatch", f"the prompt opens {opened[0]!r}, the response uses {block.opener!r}")
    if block is not None and block.closing_only and not opened:
        if not repair:
            return _drop(out, "closing_only_trace", f"the response has {block.closer!r} but no {block.opener!r}")
        msgs[last]["content"] = content = f"{block.opener}\n{content}"
        block = find_reasoning(content)
        out.repairs.append("opened_closing_only")
    try:
        completion = _completion(render_text(tokenizer, msgs, False, kw), prompt, fmt)
    except Exception as e:
        return _drop(out, "template_error", f"{type(e).__name__}: {e}")
    reason = "prompt_mismatch" if completion is None else ""
    if completion is not None and block is not None and block.body and not _keeps(completion, block.body):
        completion, reason = None, "reasoning_lost"
    if completion is not None and block is not None:
        foreign = [p[0] for p in markers_in(completion) if p != block.pair and p[0] not in content
                   and p[1] not in content]
        if foreign:
            return _drop(out, "marker_mismatch", f"the template renders {foreign[0]!r}, the response uses "
                         f"{block.opener!r}; set reasoning_markers: auto")
    if completion is None:
        if not repair:
            return _drop(out, reason, DROP_REASONS[reason])
        completion = _after_prompt(content, tail, opened) + fmt.closing
        out.repairs.append("rebuilt_completion")
    prompt_ids, completion_ids = encode(tokenizer, prompt), encode(tokenizer, completion)
    if not completion_ids or completion_ids[-1] != fmt.end_of_turn_id:
        return _drop(out, "no_end_of_turn", f"the completion ends with {completion[-40:]!r}")
    out.input_ids = prompt_ids + completion_ids
    out.labels = [-100] * len(prompt_ids) + completion_ids
    _train_history(tokenizer, fmt, msgs, last, prompt, out)
    return out


def _train_history(tokenizer, fmt: ChatFormat, msgs: list[dict[str, str]], last: int, prompt: str,
                   out: Rendered) -> None:
    """Label earlier assistant turns that render inside the conversation exactly as they do alone."""
    kw = fmt.template_kwargs
    for i in range(last):
        if msgs[i]["role"] != "assistant":
            continue
        ok = i > 0
        if ok:
            try:
                p_i = render_text(tokenizer, msgs[:i], True, kw)
                c_i = _completion(render_text(tokenizer, msgs[:i + 1], False, kw), p_i, fmt)
            except Exception:
                c_i = None
            ok = c_i is not None and prompt.startswith(p_i + c_i)
        block = find_reasoning(msgs[i]["content"])
        if ok and block is not None and block.body:
            ok = _keeps(c_i, block.body)
        if ok:
            start, span = len(encode(tokenizer, p_i)), encode(tokenizer, c_i)
            ok = out.input_ids[start:start + len(span)] == span and span[-1] == fmt.end_of_turn_id
        if ok:
            out.labels[start:start + len(span)] = span
            out.history_trained += 1
        else:
            out.history_untrained += 1


def render_with_markers(tokenizer, fmt: ChatFormat, messages: list[dict[str, str]], *,
                        reasoning_markers: str = "keep") -> Rendered:
    """mask_mode `generation`: the whole conversation, labels where the template's `{% generation %}` marks.

    Trains exactly what the markers cover (which, in TRL's `_training` templates, is not the inference split);
    the row is dropped when the trained text loses the last turn's reasoning.
    """
    out = Rendered()
    msgs = [dict(m) for m in messages]
    _normalise(msgs, fmt, reasoning_markers, out)
    try:
        enc = tokenizer.apply_chat_template(msgs, tokenize=True, return_dict=True, return_assistant_tokens_mask=True,
                                            **fmt.template_kwargs)
    except Exception as e:
        return _drop(out, "template_error", f"{type(e).__name__}: {e}")
    ids, mask = list(enc["input_ids"]), list(enc["assistant_masks"])
    if not any(mask):
        return _drop(out, "no_assistant_tokens", "the template's generation markers cover no token")
    last = max(i for i, m in enumerate(msgs) if m["role"] == "assistant")
    block = find_reasoning(msgs[last]["content"])
    trained = tokenizer.decode([t for t, k in zip(ids, mask, strict=True) if k])
    if block is not None and block.body and not _keeps(trained, block.body):
        return _drop(out, "reasoning_lost", "the template's marked text lacks the last turn's reasoning")
    out.input_ids, out.labels = ids, [t if k else -100 for t, k in zip(ids, mask, strict=True)]
    return out
