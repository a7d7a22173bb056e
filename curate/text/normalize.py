"""Text normalisation shared by dedup and decontamination.

One place decides what "the same problem" means at the character level: case, whitespace,
punctuation, LaTeX delimiters and spacing commands, markdown code fences and stock instruction
wrappers are ignored; **numbers are kept** (two problems that differ only in a number are
different problems), unlike datatrove's default ``norm_numbers=True``.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

log = logging.getLogger(__name__)

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
    "Please complete the following python code precisely:",
    "Please complete the code below to solve above prblem:",  # sic: DeepSeek-Coder's LeetCode prompts
    "You are an expert Python programmer. You will be given a question (problem specification) and will "
    "generate a correct Python program that matches the specification and passes all tests.",
    "Answer the following question.",
    "Think step by step.",
    "Let's think step by step.",
    "Problem:",
    "Question:",
)

# LaTeX commands whose name is dropped (spacing, sizing, font); symbol commands (\, \; \: \! "\ ") too
_LATEX_WORD_CMDS = ("left", "right", "big", "Big", "bigg", "Bigg", "displaystyle", "textstyle", "mathrm", "mathbf",
                    "mathit", "text", "operatorname", "quad", "qquad")
_LATEX_DROP = re.compile(r"\\(?:" + "|".join(_LATEX_WORD_CMDS) + r"|,|;|:|!| )(?![A-Za-z])")
_LATEX_ALIASES = (("\\dfrac", "\\frac"), ("\\tfrac", "\\frac"))
# \le / \ge are \leq / \geq whatever follows them (space, newline, digit, brace), but not \left, \geqslant
_LATEX_LE_GE = re.compile(r"\\(le|ge)(?![A-Za-z])")
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
        text = _LATEX_LE_GE.sub(r"\\\1q", text)
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
        out = _strip_wrappers(out, _wrappers(cfg))
    return out


@lru_cache(maxsize=8)
def _wrapper_patterns(wrappers: tuple[str, ...]) -> tuple[re.Pattern, re.Pattern, re.Pattern | None, int,
                                                           tuple[str, ...]]:
    alt = "|".join(re.escape(w) for w in wrappers)  # longest first, so the longest wrapper wins
    long_ws = tuple(w for w in wrappers if w.count(" ") >= 3)
    long_alt = "|".join(re.escape(w) for w in long_ws)
    return (re.compile(rf"(?:(?:{alt})(?: |$))+"), re.compile(rf"(?:(?:^| )(?:{alt}))+$"),
            re.compile(rf" (?:{long_alt})(?= )") if long_alt else None, 4 * max(map(len, wrappers), default=0),
            long_ws)


def _strip_wrappers(out: str, wrappers: tuple[str, ...]) -> str:
    """Drop instruction wrappers: any wrapper at the start or end (repeatedly), and long ones (>= 4 words)
    anywhere; short ones like "problem" / "question" inside a sentence are real words and stay.
    `out` is normalised text (single spaces); each regex runs only where its wrapper can be."""
    head, tail, middle, window, long_ws = _wrapper_patterns(wrappers)
    orig = out
    m = head.match(out)
    if m:
        out = out[m.end():]
    if out.endswith(_wrapper_ends(wrappers)[2]):  # only then can a wrapper end the text
        cut = out.find(" ", len(out) - window) if len(out) > window else 0  # tail wrappers live in the last chars
        if cut >= 0:
            end = out[cut:]
            stripped = tail.sub("", end)
            if stripped != end:
                out = out[:cut] + stripped
    if middle is not None and out and any(w in out for w in long_ws):
        out = middle.sub("", f" {out} ")
    return out if out is orig else _SPACE.sub(" ", out).strip()


def words(text: str | None, cfg: NormConfig = DEFAULT_NORM) -> list[str]:
    """Normalised word tokens of `text`."""
    norm = normalize(text, cfg)
    return norm.split(" ") if norm else []


# --------------------------------------------------------------------------- batch path

BATCH_SEP = " \x00 "  # row separator inside a batch; \x00 survives normalisation, spaces keep wrappers matchable
_BYTE_TABLE = bytes(c if (chr(c).isalnum() or c == 0 or c >= 128) else 32 for c in range(256))
_NON_ASCII_NON_WORD = re.compile(r"[^\w\x00-\x7f]+")


def _pre(text: str | None) -> str:
    """Per-text steps of `normalize` that must see the text alone: code fences, and for non-ASCII
    texts NFKC, Unicode lower-casing and dropping non-ASCII non-word characters (ASCII texts get
    those from bytes.lower/translate over the whole batch). Non-ASCII texts with LaTeX commands take
    `normalize` itself (its commands must be rewritten before Unicode lower-casing), whose output the
    batch steps leave as it is."""
    if not text:
        return ""
    ascii_ = text.isascii()
    if not ascii_:
        if "\\" in text:
            return normalize(text, _NO_WRAPPERS)
        text = unicodedata.normalize("NFKC", text)
    if "```" in text:
        text = _CODE_FENCE.sub(" ", text)
    if "\x00" in text:
        text = text.replace("\x00", " ")
    if not ascii_:
        text = _NON_ASCII_NON_WORD.sub(" ", text.lower())
    return text


_NO_WRAPPERS = NormConfig(wrappers=False)


# The LaTeX step on bytes, in one pass. Delimiters ($ \( \) \[ \]) and symbol commands (\, \; ...) are
# punctuation, which the byte table turns into spaces anyway; only word commands change words.
_LATEX_BYTES = re.compile(rb"\\(?:([dt]frac)|(le|ge|" + "|".join(_LATEX_WORD_CMDS).encode() + rb")(?![A-Za-z]))")
_LATEX_SUB = {b"le": b" leq", b"ge": b" geq"}


def _latex_word(m: re.Match) -> bytes:
    """Replacement for one LaTeX command: \\dfrac/\\tfrac -> frac, \\le/\\ge -> leq/geq, others dropped."""
    if m.group(1):
        return b" frac"
    return _LATEX_SUB.get(m.group(2), b" ")


def normalize_batch(texts: list[str | None], cfg: NormConfig = DEFAULT_NORM) -> tuple[bytes, list[str]]:
    """Normalise many texts at once; same result per text as `curate.normalize.normalize`.

    Returns the batch as one byte string (texts joined by " \\x00 ", single spaces) for the hasher,
    and the normalised texts. LaTeX commands are rewritten by one bytes regex and ASCII case and
    punctuation by bytes.lower/translate over the whole batch, which is what makes this many times
    faster than per-text regex substitution."""
    if cfg not in (DEFAULT_NORM, NormConfig(wrappers=False)) or not _fast_path_ok():  # + dedup responses
        norms = [normalize(t, cfg) for t in texts]
        return BATCH_SEP.join(norms).encode("utf-8"), norms
    if not texts:
        return b"", []
    joined = "\n\x00\n".join([_pre(t) if t and (not t.isascii() or "```" in t or "\x00" in t) else (t or "")
                               for t in texts])  # per-text steps only where they can change something
    raw = joined.encode("utf-8")
    if b"\\" in raw:
        raw = _LATEX_BYTES.sub(_latex_word, raw)
    arr = np.frombuffer(raw.lower().translate(_BYTE_TABLE), dtype=np.uint8)
    space = arr == 32
    keep = ~(space & np.concatenate(([True], space[:-1])))  # collapse runs of spaces (and a leading one)
    y = arr[keep].tobytes()
    norms = y.decode("utf-8").split("\x00")
    norms = [t.strip(" ") for t in norms]
    if cfg.wrappers:  # per text, exactly as `normalize` does (start/end wrappers, long ones anywhere)
        wrappers = _wrappers(cfg)
        firsts, lasts, _ = _wrapper_ends(wrappers)
        inner = [w for w in wrappers if w.count(" ") >= 3 and w.encode() in y]
        todo = [i for i, t in enumerate(norms) if t and (t.partition(" ")[0] in firsts or t.rpartition(" ")[2] in lasts
                                                          or (inner and any(w in t for w in inner)))]
        for i in todo:
            norms[i] = _strip_wrappers(norms[i], wrappers)
        if todo:
            y = BATCH_SEP.join(norms).encode("utf-8")
    return y, norms


@lru_cache(maxsize=4)
def _wrapper_ends(wrappers: tuple[str, ...]) -> tuple[frozenset[str], frozenset[str], tuple[str, ...]]:
    """First and last words of the instruction wrappers (a text can only start/end with a wrapper
    if its own first/last word is one of these), and the wrappers' last words as suffixes."""
    lasts = frozenset(w.split(" ")[-1] for w in wrappers)
    return frozenset(w.split(" ")[0] for w in wrappers), lasts, tuple(sorted(lasts))


_SELF_CHECK = (
    "Let \\(b\\ge 2\\) be an integer; $x \\le 1$, \\left( \\dfrac{1}{2} \\right) \\, \\quad x_1 = y__2",
    "Problem: Solve the following problem. What is İstanbul ÀB_c—d… 3²?\n```python\ndef f():\n    pass\n```",
    "Please reason step by step, and put your final answer within \\boxed{}. Find x. Question:",
    "  \t\n ", "a\x00b", "The answer is $\\boxed{5}$.\nLet's think step by step.",
)
_FAST: list[bool] = []


def _fast_path_ok() -> bool:
    """Whether the batch normaliser still agrees with `curate.normalize.normalize` (checked once on
    tricky strings; if normalize changed in a way the fast path does not mirror, fall back to it)."""
    if not _FAST:
        _FAST.append(True)
        got = normalize_batch(list(_SELF_CHECK))[1]
        ok = got == [normalize(t) for t in _SELF_CHECK]
        _FAST[0] = ok
        if not ok:
            log.warning("normalize: fast batch normalisation differs from curate.normalize; using the slow path")
    return _FAST[0]


def fast_normalize(text: str | None, cfg: NormConfig = DEFAULT_NORM) -> str:
    """`normalize` for one text through the batch path (same output)."""
    return normalize_batch([text], cfg)[1][0]
