"""Where the final answer of a math response is: the answer part, then the answer in it, per extraction mode.

Three modes (`MODES`), chosen by the caller:

``official`` (RL rewards as Klear-Reasoner's official reward code scores them, `math_dapo.py`):
  * the answer part is the text after the last ``think_end``, as in strict mode (none without it);
  * the answer is whatever math-verify's own extraction (``parse`` with LaTeX + expression targets) reads in
    the whole answer part: boxed or not, "the answer is 5", a final ``$5$``.

``strict`` (RL rewards; Klear-Reasoner's format, paper §3.2.4):
  * the answer part is the text after the last ``think_end`` (default ``</think>``); ``think_end=None``: the
    whole response. A response without ``think_end`` has no answer (the RL format penalty is separate);
  * the answer is the last *box group* of the answer part: ``\\boxed{..}`` / ``\\fbox{..}`` with balanced,
    non-empty braces; boxes separated only by joiners (whitespace, ``, ; . : &``, ``and``/``or``, math
    delimiters, ``\\quad``-style spacing, a short ``\\text{..}``, a label like ``y_2 =``) form one group and are
    read as one answer (a list; `MathCompare` reads it as a set or a tuple, as the gold is). Identical boxes
    in a group count once;
  * nothing else counts: "the answer is 5", "Answer: 5", "#### 5", a bare ``$5$`` -> no answer.

``lenient`` (evaluation scores, SFT labels; the default):
  * the answer part is `split_after_reasoning`: after ``think_end`` when present, else after a known
    reasoning block (``<think>``, ``<|begin_of_thought|>``, ... `REASONING_MARKERS`); a block opened and never
    closed (a truncated trace) -> no answer; no markers at all -> the whole response;
  * the answer is the first of: a "final answer is X" / "Final Answer: X" phrase that comes *after* the last
    box group; the last box group; the last "the answer is X" phrase; a GSM8K ``#### X``; a final
    ``Answer: X`` / ``A: X`` line; else, when the answer part has no box at all (only empty or unclosed
    ones: no answer), whatever math-verify's own extraction reads in its last 3,000 characters (its
    ``parse`` with LaTeX + expression targets: "answer" with or without a colon, the last math span, the
    last number with currency, units or a percent sign).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cotforge.curate.core.reasoning import REASONING_MARKERS

MODES = ("strict", "lenient", "official")

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_JOINER = re.compile(
    r"(?:\s|[,;.:&]|\$|\\[()\[\]]|\\\\|\\[qQ]?quad\b|\\[,;!> ]|\\hspace\*?\{[^{}]*\}"
    r"|\\(?:text|textrm|mathrm|mbox)\s*\{[^{}]{0,40}\}|\band\b|\bor\b|&|[A-Za-z](?:_\{?\w+\}?)?\s*=)*")
_MAX_GAP = 80
FALLBACK_CHARS = 3000
_FINAL_PHRASE = re.compile(r"final answer\s*(?:is|:)\s*(?:\*\*)?\s*:?\s*(.+?)(?:\.?\s*I hope|\.\s|\.?\s*$|\n)",
                           re.IGNORECASE | re.DOTALL)
_ANSWER_IS = re.compile(r"(?:final answer|the answer)\s*(?:is|:|=)\s*:?\s*(.+?)(?:\.\s|\.?\s*$|\n)",
                        re.IGNORECASE | re.DOTALL)
_HASHES = re.compile(r"####\s*(.+?)\s*$", re.MULTILINE)
_ANSWER_LINE = re.compile(r"^\s*(?:\*\*)?(?:final answer|answer|a)(?:\*\*)?\s*:\s*(.+?)\s*$",
                          re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class Extracted:
    """The answer found in a response: its text, how it was found, and for a box group its boxes.

    kind: ``boxed`` (one box) | ``boxes`` (a group of several) | ``final`` | ``phrase`` | ``hashes`` | ``line``
    | ``math_verify`` (math-verify's own extraction over the answer part; `text` is that part)."""

    text: str
    kind: str
    boxes: tuple[str, ...] = ()


def split_after_reasoning(response: str, think_end: str | None = "</think>") -> str | None:
    """The answer part in lenient mode (rule in the module docstring); None when a reasoning block is opened
    and never closed."""
    if think_end is None:
        return response
    if think_end and think_end in response:
        return response[response.rindex(think_end) + len(think_end):]
    for opener, closer in REASONING_MARKERS:
        if closer in response:
            return response[response.rindex(closer) + len(closer):]
        if opener in response:
            return None
    return response


def strict_answer_part(response: str, think_end: str | None = "</think>") -> str | None:
    """The answer part in strict mode: after the last `think_end` (whole response when None); None without it."""
    if think_end is None:
        return response
    if not think_end or think_end not in response:
        return None
    return response[response.rindex(think_end) + len(think_end):]


def boxes(text: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of every outermost \\boxed{..}/\\fbox{..} with balanced braces, in order."""
    out: list[tuple[int, int, str]] = []
    pos = 0
    while True:
        m = _BOXED.search(text, pos)
        if m is None:
            return out
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth:  # unclosed: no more complete boxes after it
            return out
        out.append((m.start(), i, text[m.end():i - 1].strip()))
        pos = i


def last_box_group(text: str) -> tuple[int, tuple[str, ...]] | None:
    """(end offset, contents) of the last group of boxes joined only by joiners (module docstring)."""
    found = [b for b in boxes(text) if b[2]]
    if not found:
        return None
    group = [found[-1]]
    for prev in reversed(found[:-1]):
        gap = text[prev[1]:group[0][0]]
        if len(gap) > _MAX_GAP or _JOINER.fullmatch(gap) is None:
            break
        group.insert(0, prev)
    contents = tuple(dict.fromkeys(b[2] for b in group))  # identical boxes count once, order kept
    return found[-1][1], contents


def _from_group(group: tuple[int, tuple[str, ...]]) -> Extracted:
    contents = group[1]
    if len(contents) == 1:
        return Extracted(contents[0], "boxed", contents)
    return Extracted(", ".join(contents), "boxes", contents)


def extract(text: str, mode: str = "lenient") -> Extracted | None:
    """The answer in an answer part (already split off the reasoning), per `mode`; None when there is none."""
    if mode == "official":
        return Extracted(text, "math_verify") if text.strip() else None
    group = last_box_group(text)
    if mode == "strict":
        return _from_group(group) if group else None
    finals = [m for m in _FINAL_PHRASE.finditer(text) if m.group(1).strip()]
    if finals and (group is None or finals[-1].start() >= group[0]):
        content = finals[-1].group(1).strip()
        while (inner := _FINAL_PHRASE.search(content)) and inner.group(1).strip():  # "Final Answer: The final
            content = inner.group(1).strip()                                         # answer is X" -> X
        return Extracted(content, "final")
    if group:
        return _from_group(group)
    for kind, pattern in (("phrase", _ANSWER_IS), ("hashes", _HASHES), ("line", _ANSWER_LINE)):
        found = pattern.findall(text)
        if found and found[-1].strip():
            return Extracted(found[-1].strip(), kind)
    if text.strip() and not _BOXED.search(text):  # only empty/unclosed boxes: the writer boxed nothing
        return Extracted(_tail(text.strip()), "math_verify")
    return None


def _tail(text: str, limit: int = FALLBACK_CHARS) -> str:
    """The last `limit` characters of `text`, cut at whitespace (math-verify's regexes get slow on long,
    repetitive text; its extraction prefers the rightmost match anyway)."""
    if len(text) <= limit:
        return text
    cut = text[-limit:]
    space = re.search(r"\s", cut)
    return cut[space.end():] if space else cut


def answer_part(response: str, think_end: str | None, mode: str) -> str | None:
    """The part of `response` that holds the final answer in `mode`."""
    if mode in ("strict", "official"):
        return strict_answer_part(response, think_end)
    return split_after_reasoning(response, think_end)
