"""Markers of the reasoning block in long-CoT responses, shared by the verifiers and source profiling."""

from __future__ import annotations

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
