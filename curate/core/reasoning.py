"""Markers of the reasoning block in long-CoT responses, shared by the verifiers, source profiling and SFT.

`REASONING_MARKERS` lists every (open, close) pair cotforge knows. `find_reasoning` locates the block in
a response, including *closing-only* traces: DeepSeek-R1 outputs often start inside the block because the
chat template opened `<think>\\n` in the generation prompt (`Let me add ... </think>\\n\\nThe answer is 4.`).
`replace_markers` rewrites a block's markers to another pair (e.g. `<|begin_of_thought|>` -> `<think>`).
"""

from __future__ import annotations

from dataclasses import dataclass

# (open, close) pairs seen in long-CoT data (DeepSeek-R1 / Qwen, Sky-T1, Marco-o1, and common variants).
REASONING_MARKERS: tuple[tuple[str, str], ...] = (
    ("<think>", "</think>"),
    ("<|begin_of_thought|>", "<|end_of_thought|>"),
    ("<Thought>", "</Thought>"),
    ("<thinking>", "</thinking>"),
    ("<thought>", "</thought>"),
    ("<reasoning>", "</reasoning>"),
    ("◁think▷", "◁/think▷"),
)


@dataclass(frozen=True)
class Reasoning:
    """One reasoning block of a text: its marker pair, body and where the block sits.

    `start` is the opening marker's offset (0 for a closing-only trace, which has no opener), `end` the
    offset just after the closing marker; `text[start:end]` is the whole block.
    """

    opener: str
    closer: str
    body: str
    start: int
    end: int
    closing_only: bool

    @property
    def pair(self) -> tuple[str, str]:
        """The (open, close) marker pair."""
        return self.opener, self.closer


def find_reasoning(text: str, markers: tuple[tuple[str, str], ...] = REASONING_MARKERS) -> Reasoning | None:
    """The first reasoning block of `text` with any known marker pair, or None.

    A block with both markers wins over a closing-only trace (a closer with no opener before it); among
    blocks the earliest opener wins, among closing-only traces the earliest closer. The body is stripped of
    surrounding whitespace; an empty body still counts as a block (R1's `<think>\\n\\n</think>` "no thinking").
    """
    full: Reasoning | None = None
    closing: Reasoning | None = None
    for opener, closer in markers:
        ci = text.find(closer)
        if ci < 0:
            continue
        oi = text.find(opener)
        if 0 <= oi < ci:
            if full is None or oi < full.start:
                full = Reasoning(opener, closer, text[oi + len(opener):ci].strip(), oi, ci + len(closer), False)
        elif closing is None or ci < closing.end - len(closing.closer):
            closing = Reasoning(opener, closer, text[:ci].strip(), 0, ci + len(closer), True)
    return full or closing


def marker_pair(opener: str) -> tuple[str, str]:
    """The known pair whose opening marker is `opener` (ValueError naming the known ones otherwise)."""
    for pair in REASONING_MARKERS:
        if pair[0] == opener:
            return pair
    raise ValueError(f"{opener!r} is not a known reasoning marker; known: {[p[0] for p in REASONING_MARKERS]}")


def markers_in(text: str) -> list[tuple[str, str]]:
    """Known pairs with an opening or closing marker in `text`, in REASONING_MARKERS order."""
    return [pair for pair in REASONING_MARKERS if pair[0] in text or pair[1] in text]


def replace_markers(text: str, block: Reasoning, target: tuple[str, str]) -> str:
    """`text` with `block`'s markers swapped for `target`'s (the body and everything else unchanged).

    A closing-only block keeps having no opener: only its closer changes.
    """
    close_at = block.end - len(block.closer)
    out = text[:close_at] + target[1] + text[block.end:]
    if not block.closing_only:
        out = out[:block.start] + target[0] + out[block.start + len(block.opener):]
    return out
