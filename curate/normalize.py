"""Text normalisation shared by dedup and decontamination.

One place decides what "the same problem" means at the character level: case, whitespace,
punctuation, LaTeX delimiters and spacing commands, markdown code fences and stock instruction
wrappers are ignored; **numbers are kept** (two problems that differ only in a number are
different problems), unlike datatrove's default ``norm_numbers=True``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

# Stock instructions that data sources wrap around the same problem. Matched after normalisation,
# so case, punctuation and LaTeX spacing in them do not matter.
INSTRUCTION_WRAPPERS: tuple[str, ...] = (
    "Please reason step by step, and put your final answer within \\boxed{}.",
    "Let's think step by step and output the final answer within \\boxed{}.",
    "Return your final response within \\boxed{}.",
    "Put your final answer within \\boxed{}.",
    "Put your final answer in \\boxed{}.",
    "Please put your final answer in a box.",
    "Solve the following math problem step by step.",
    "Solve the following math problem.",
    "Solve the following problem step by step.",
    "Solve the following problem.",
    "Solve the following coding problem using the programming language python:",
    "Please solve the programming task below using a self-contained code snippet in a markdown code block.",
    "You are an expert Python programmer. You will be given a question (problem specification) and will "
    "generate a correct Python program that matches the specification and passes all tests.",
    "Answer the following question.",
    "Think step by step.",
    "Let's think step by step.",
    "Problem:",
    "Question:",
)

_LATEX_DROP = re.compile(
    r"\\(?:left|right|big|Big|bigg|Bigg|displaystyle|textstyle|mathrm|mathbf|mathit|text|operatorname"
    r"|quad|qquad|,|;|:|!| )(?![A-Za-z])"
)
_LATEX_ALIASES = (("\\dfrac", "\\frac"), ("\\tfrac", "\\frac"), ("\\le ", "\\leq "), ("\\ge ", "\\geq "))
_CODE_FENCE = re.compile(r"^\s*```[\w+-]*\s*$", re.MULTILINE)
_NON_WORD = re.compile(r"[^\w]+", re.UNICODE)
_UNDERSCORE = re.compile(r"_+")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class NormConfig:
    """Switches for `normalize`; the defaults are what dedup and decontamination use."""

    lowercase: bool = True
    latex: bool = True  # drop $ \( \) \[ \] delimiters and spacing/size commands
    punctuation: bool = True  # every non-alphanumeric run becomes one space
    code_fences: bool = True
    wrappers: bool = True  # remove INSTRUCTION_WRAPPERS
    numbers: bool = True  # keep digits (False maps every digit run to 0, like datatrove)


DEFAULT_NORM = NormConfig()


def _base(text: str, cfg: NormConfig) -> str:
    text = unicodedata.normalize("NFKC", text)
    if cfg.code_fences:
        text = _CODE_FENCE.sub(" ", text)
    if cfg.latex:
        for a, b in _LATEX_ALIASES:
            text = text.replace(a, b)
        text = _LATEX_DROP.sub(" ", text)
        text = text.replace("\\(", " ").replace("\\)", " ").replace("\\[", " ").replace("\\]", " ")
        text = text.replace("$", " ")
    if cfg.lowercase:
        text = text.lower()
    if cfg.punctuation:
        text = _NON_WORD.sub(" ", text)
        text = _UNDERSCORE.sub(" ", text)
    if not cfg.numbers:
        text = re.sub(r"\d+", "0", text)
    return _SPACE.sub(" ", text).strip()


@lru_cache(maxsize=8)
def _wrappers(cfg: NormConfig) -> tuple[str, ...]:
    plain = NormConfig(**{**cfg.__dict__, "wrappers": False})
    found = {_base(w, plain) for w in INSTRUCTION_WRAPPERS}
    return tuple(sorted((w for w in found if w), key=len, reverse=True))


def normalize(text: str | None, cfg: NormConfig = DEFAULT_NORM) -> str:
    """Normalise `text` for matching; returns words joined by single spaces."""
    if not text:
        return ""
    out = _base(text, cfg)
    if cfg.wrappers and cfg.punctuation:
        padded = f" {out} "
        for w in _wrappers(cfg):
            if w in padded:
                padded = padded.replace(f" {w} ", " ")
        out = _SPACE.sub(" ", padded).strip()
    return out


def words(text: str | None, cfg: NormConfig = DEFAULT_NORM) -> list[str]:
    """Normalised word tokens of `text`."""
    norm = normalize(text, cfg)
    return norm.split(" ") if norm else []
