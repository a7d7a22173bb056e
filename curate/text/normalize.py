"""Text normalisation shared by dedup and decontamination.

One place decides what "the same problem" means at the character level: case, whitespace, punctuation,
LaTeX delimiters, spacing and font commands, markdown code fences and stock instruction wrappers are
ignored, and Unicode math reads as the LaTeX it stands for (`x²` = `x^2`, `√3` = `\\sqrt{3}`, `≤` = `\\le`,
`π` = `\\pi`, `½` = `1/2` = `\\frac{1}{2}`: tables in `cotforge.curate.text.mathmap`); **numbers are kept**
(two problems that differ only in a number are different problems), unlike datatrove's `norm_numbers=True`.

`normalize` (one text, plain Python) is the definition. `normalize_arrow` / `normalize_batch` do the same
for a whole batch with polars string kernels (Rust: Aho-Corasick and regex over the Arrow buffers) and give
the same text for every input: each step is written once as data (a table or a pattern) that both paths
use, the punctuation class is built from Python's own `str.isalnum`, and texts holding characters Python's
Unicode tables do not know (where NFKC / lower-casing of the two could differ) take the per-text path.
`_fast_path_ok` re-checks the equality on tricky strings at first use, and tests fuzz it.

Steps, in order: superscript/subscript runs and vulgar fractions (before NFKC, which would flatten them);
NFKC; lower case; Unicode math symbols and `<=`/`>=` to LaTeX commands; code-fence lines; LaTeX
(`\\frac12`, environments, every `\\command` mapped, aliased or dropped); punctuation; ASCII letters and
digits split apart (`3x` = `3 x`, `x2` = `x_2` = `x²`, `holds420` = `holds 420` from a dropped `$`); numbers
(optional); instruction wrappers (at the start or end, and long ones anywhere).

One module on purpose: the plain-Python definition and the batched polars path of each step sit side by
side, so a step cannot change in one path without the other (tests/test_normalize.py compares them).
"""

from __future__ import annotations

import logging
import re
import unicodedata
from dataclasses import dataclass, replace
from functools import lru_cache

from cotforge.curate.text import mathmap
from cotforge.curate.text.unitables import alnum_class as _alnum_class
from cotforge.curate.text.unitables import nfkc_tables as _nfkc_tables
from cotforge.curate.text.unitables import unknown_class as _unknown_class

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

# Patterns shared by both paths (Python `re` and Rust `regex` read them alike: no look-around, explicit classes).
SUP_RUN = "[" + mathmap.SUP_CHARS + "]+"
SUB_RUN = "[" + mathmap.SUB_CHARS + "]+"
CODE_FENCE = r"(?m)^[ \t]*```[A-Za-z0-9_+-]*[ \t]*$"
FRAC_SHORT = r"(?i)\\[dtc]?frac[ ]*([0-9])[ ]*([0-9])"  # \frac12 = \frac{1}{2}
ENVIRONMENT = r"(?i)\\(?:begin|end)[ ]*\{[^{}]*\}"
COMMAND = r"\\([A-Za-z]+)"
SPACES = r"[ \t\n\r\f\v]+"
DIGITS = r"[0-9]+"


@dataclass(frozen=True)
class NormConfig:
    """Switches for `normalize`; the defaults are what dedup and decontamination use."""

    lowercase: bool = True
    latex: bool = True  # LaTeX commands: presentation ones dropped, aliases collapsed, \frac12, environments
    math: bool = True  # Unicode math (x², √, ≤, π, ½) and <= / >= read as the LaTeX they stand for
    punctuation: bool = True  # every non-alphanumeric run becomes one space
    code_fences: bool = True
    wrappers: bool = True  # remove INSTRUCTION_WRAPPERS
    numbers: bool = True  # keep digits (False maps every digit run to 0, like datatrove)
    split_digits: bool = True  # ASCII letters and digits written together are two words (3x = 3 x, x2 = x_2)


DEFAULT_NORM = NormConfig()


_RE = {k: re.compile(v) for k, v in {"sup": SUP_RUN, "sub": SUB_RUN, "fence": CODE_FENCE, "frac": FRAC_SHORT,
                                      "env": ENVIRONMENT, "cmd": COMMAND, "space": SPACES, "digits": DIGITS}.items()}
_NON_ALNUM = re.compile(r"[\W_]+")  # Python's \w is isalnum() plus "_"
_LETTER_DIGIT = re.compile(r"([A-Za-z])([0-9])")
_DIGIT_LETTER = re.compile(r"([0-9])([A-Za-z])")
_PRE = str.maketrans(mathmap.PRE_NFKC)
_MATH_CHARS = str.maketrans({k: v for k, v in mathmap.MATH.items() if len(k) == 1})
_MATH_PAIRS = tuple((k, v) for k, v in mathmap.MATH.items() if len(k) > 1)  # "<=", ">=": prefix-free


def _command(m: re.Match) -> str:
    name = m.group(1)
    return " " + mathmap.COMMANDS.get(name, name) + " "


def _chars(text: str, cfg: NormConfig) -> str:
    """Every step before the wrappers: the text as single-space-separated words."""
    if cfg.math:
        text = _RE["sup"].sub(r"^\g<0>", text)
        text = _RE["sub"].sub(r"_\g<0>", text).translate(_PRE)
    text = unicodedata.normalize("NFKC", text)
    if cfg.lowercase:
        text = text.lower()
    if cfg.math:
        for k, v in _MATH_PAIRS:
            text = text.replace(k, v)
        text = text.translate(_MATH_CHARS)
    if cfg.code_fences:
        text = _RE["fence"].sub(" ", text)
    if cfg.latex:
        text = _RE["frac"].sub(r" \1 \2 ", text)
        text = _RE["env"].sub(" ", text)
        text = _RE["cmd"].sub(_command, text)
    text = _NON_ALNUM.sub(" ", text) if cfg.punctuation else _RE["space"].sub(" ", text)
    if cfg.split_digits:
        text = _DIGIT_LETTER.sub(r"\1 \2", _LETTER_DIGIT.sub(r"\1 \2", text))
    if not cfg.numbers:
        text = _RE["digits"].sub("0", text)
    return text.strip(" ")


@lru_cache(maxsize=8)
def normalized_wrappers(cfg: NormConfig) -> tuple[str, ...]:
    plain = replace(cfg, wrappers=False)
    found = {_chars(w, plain) for w in INSTRUCTION_WRAPPERS}
    return tuple(sorted((w for w in found if w), key=len, reverse=True))


@lru_cache(maxsize=8)
def _wrapper_patterns(wrappers: tuple[str, ...]) -> tuple[str, str, str | None]:
    """Head (wrappers at the start), tail (at the end) and middle (wrappers of >= 4 words anywhere, applied
    to the text padded with spaces) patterns; longest wrapper first so the longest wins."""
    alt = "|".join(re.escape(w) for w in wrappers)
    long_alt = "|".join(re.escape(w) for w in wrappers if w.count(" ") >= 3)
    return (rf"^(?:(?:{alt})(?: |$))+", rf"(?:(?:^| )(?:{alt}))+$", rf"(?: (?:{long_alt}))+ " if long_alt else None)


@lru_cache(maxsize=8)
def _compiled_wrappers(cfg: NormConfig) -> tuple[re.Pattern, re.Pattern, re.Pattern | None, tuple[str, ...]]:
    head, tail, middle = _wrapper_patterns(normalized_wrappers(cfg))
    long_ws = tuple(w for w in normalized_wrappers(cfg) if w.count(" ") >= 3)
    return re.compile(head), re.compile(tail), re.compile(middle) if middle else None, long_ws


def _strip_wrappers(out: str, cfg: NormConfig) -> str:
    """Drop instruction wrappers: any wrapper at the start or end (repeatedly), and long ones (>= 4 words)
    anywhere; short ones like "problem" / "question" inside a sentence are real words and stay."""
    head, tail, middle, long_ws = _compiled_wrappers(cfg)
    new = tail.sub("", head.sub("", out))
    if middle is not None and any(w in new for w in long_ws):
        new = middle.sub(" ", f" {new} ")
    return new if new == out else _RE["space"].sub(" ", new).strip(" ")


def normalize(text: str | None, cfg: NormConfig = DEFAULT_NORM) -> str:
    """Normalise `text` for matching; returns words joined by single spaces."""
    if not text:
        return ""
    out = _chars(text, cfg)
    if cfg.wrappers and cfg.punctuation and out:
        out = _strip_wrappers(out, cfg)
    return out


def words(text: str | None, cfg: NormConfig = DEFAULT_NORM) -> list[str]:
    """Normalised word tokens of `text`."""
    norm = normalize(text, cfg)
    return norm.split(" ") if norm else []


# --------------------------------------------------------------------------- batch path (polars)

BATCH_SEP = " \x00 "  # row separator of `normalize_batch`'s byte string (the word hasher splits rows on \x00)
_CMD_END = "\x01"  # marks where a command name ends, so the literal table can match whole names


def _subset(s, mask, fn):
    """`fn` applied to the rows of polars Series `s` where `mask` holds (the others are left as they are)."""
    if not mask.any():
        return s
    if mask.all():
        return fn(s)
    idx = mask.arg_true()
    return s.scatter(idx, fn(s.gather(idx)))


def _polars_chars(s, cfg: NormConfig, non_ascii=None):
    """The steps of `_chars` up to punctuation, on a polars Series: Unicode-only steps on non-ASCII rows,
    code fences and LaTeX only on rows holding ``` or a backslash; non-ASCII punctuation becomes spaces
    here, ASCII punctuation later on bytes (`_ascii_punctuation`)."""
    non_ascii = s.str.contains(r"[^\x00-\x7F]") if non_ascii is None else non_ascii

    def unicode_pre(x):
        if cfg.math:
            x = x.str.replace_all(SUP_RUN, "^$0").str.replace_all(SUB_RUN, "_$0")
            x = x.str.replace_many(list(mathmap.PRE_NFKC), list(mathmap.PRE_NFKC.values()), leftmost=True)
        ascii_map, unstable = _nfkc_tables()  # NFKC only where it can change more than those characters
        x = x.str.replace_many(list(ascii_map), list(ascii_map.values()), leftmost=True)
        return _subset(x, x.str.contains(unstable), lambda y: y.str.normalize("NFKC"))

    s = _subset(s, non_ascii, unicode_pre)
    if cfg.lowercase:  # ASCII rows are lower-cased on bytes later (`_ascii_table`); the steps between ignore case
        s = _subset(s, non_ascii, lambda x: x.str.to_lowercase())
    if cfg.math:  # rows still ASCII here can only hold the ASCII keys ("<=", ">="): the others are skipped
        s = _subset(s, non_ascii | s.str.contains(any_of([k for k in mathmap.MATH if k.isascii()])),
                    lambda x: x.str.replace_many(list(mathmap.MATH), list(mathmap.MATH.values()), leftmost=True))
    if cfg.code_fences:
        s = _subset(s, s.str.contains("```", literal=True), lambda x: x.str.replace_all(CODE_FENCE, " "))
    if cfg.latex:
        keys = [f"\\{k}{_CMD_END}" for k in mathmap.COMMANDS]
        vals = [f" {v} " for v in mathmap.COMMANDS.values()]
        s = _subset(s, s.str.contains("\\", literal=True), lambda x: (
            x.str.replace_all(FRAC_SHORT, " ${1} ${2} ").str.replace_all(ENVIRONMENT, " ")
            .str.replace_all(COMMAND, "\\${1}" + _CMD_END)
            .str.replace_many(keys, vals, leftmost=True, ascii_case_insensitive=cfg.lowercase)))
    return _subset(s, non_ascii, lambda x: x.str.replace_all(f"[^\\x00-\\x7F{_alnum_class(0x80)}]+", " "))


@lru_cache(maxsize=2)
def _ascii_table(lowercase: bool) -> bytes:
    """bytes.translate table: ASCII characters `[\\W_]` -> space, upper case -> lower case when lower-casing,
    the rest kept."""
    return bytes((c + 32 if lowercase and 65 <= c <= 90 else c) if c >= 128 or chr(c).isalnum() else 32
                 for c in range(256))


def _ascii_punctuation(arr, lowercase: bool):
    """ASCII punctuation -> spaces, runs of spaces collapsed and rows stripped, on the Arrow buffers of a
    LargeStringArray (bytes.translate + numpy; no Python object per row). Non-ASCII bytes are kept: they
    are alphanumeric characters by now."""
    import numpy as np
    import pyarrow as pa

    n = len(arr)
    offs = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset:arr.offset + n + 1]
    lo, hi = int(offs[0]), int(offs[-1])
    if hi == lo:
        return arr
    raw = memoryview(arr.buffers()[2])[lo:hi].tobytes().translate(_ascii_table(lowercase))
    t = np.frombuffer(raw, dtype=np.uint8)
    o = offs - lo
    sp = t == 32
    prev = np.empty_like(sp)
    prev[0] = True
    prev[1:] = sp[:-1]
    prev[o[:-1][o[:-1] < len(sp)]] = True  # a row's first character follows a row boundary: leading spaces go
    drop = np.flatnonzero(sp & prev)
    vals = np.delete(t, drop) if len(drop) else t
    no = o - np.searchsorted(drop, o)  # offsets after the drops
    ends = no[1:]
    full = ends > no[:-1]
    last = ends[full] - 1
    trail = last[vals[last] == 32]  # at most one trailing space is left per row
    if len(trail):
        vals = np.delete(vals, trail)
        no = no - np.searchsorted(trail, no, side="left")
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(no.astype(np.int64)), pa.py_buffer(vals.tobytes()))


def _split_letter_digit(arr):
    """A space between an ASCII letter and a digit next to each other (either order) inside a row, on the
    Arrow buffers (numpy)."""
    import numpy as np
    import pyarrow as pa

    n = len(arr)
    offs = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset:arr.offset + n + 1]
    lo, hi = int(offs[0]), int(offs[-1])
    if hi - lo < 2:
        return arr
    t = np.frombuffer(arr.buffers()[2], dtype=np.uint8)[lo:hi]
    digit = (t >= 48) & (t <= 57)
    letter = ((t >= 97) & (t <= 122)) | ((t >= 65) & (t <= 90))
    at = np.flatnonzero((letter[:-1] & digit[1:]) | (digit[:-1] & letter[1:])) + 1
    o = offs - lo
    at = at[~np.isin(at, o)]  # never across a row boundary
    if not len(at):
        return arr
    vals = np.insert(t, at, 32)
    no = o + np.searchsorted(at, o, side="left")
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(no.astype(np.int64)), pa.py_buffer(vals.tobytes()))


def any_of(literals: list[str]) -> str:
    """A regex matching any of `literals` (non-empty): `str.contains` with it says what `str.contains_any` says,
    and the regex crate's literal search runs ~15x faster than polars' contains_any on long texts."""
    if not literals:
        raise ValueError("any_of: no literals")
    return "|".join(re.escape(w) for w in literals)


def _polars_wrappers(s, cfg: NormConfig):
    """`_strip_wrappers` on the rows where a wrapper can be (first/last word of a wrapper, a long one inside)."""
    head, tail, middle = _wrapper_patterns(normalized_wrappers(cfg))
    long_ws = [w for w in normalized_wrappers(cfg) if w.count(" ") >= 3]
    firsts, lasts = _wrapper_ends(cfg)
    cand = s.str.extract(r"^([^ ]*)").is_in(firsts) | s.str.extract(r"([^ ]*)$").is_in(lasts)
    if long_ws:
        cand |= s.str.contains(any_of(long_ws))

    def strip(x):
        x = x.str.replace(head, "").str.replace(tail, "")
        if middle is not None:
            x = (" " + x + " ").str.replace_all(middle, " ")
        return x.str.replace_all("  +", " ").str.strip_chars(" ")  # runs of 2+: a lone space is left as it is

    return _subset(s, cand.fill_null(False), strip)


def strip_wrappers_series(s, cfg: NormConfig = DEFAULT_NORM):
    """`_strip_wrappers` on a polars Series of texts already through `_chars` (the other batch normalisers)."""
    return _polars_wrappers(s, cfg)


@lru_cache(maxsize=8)
def _wrapper_ends(cfg: NormConfig) -> tuple[list[str], list[str]]:
    """First and last words of the wrappers: a text can start/end with a wrapper only if its own first/last
    word is one of them."""
    ws = normalized_wrappers(cfg)
    return sorted({w.split(" ")[0] for w in ws}), sorted({w.split(" ")[-1] for w in ws})


def normalize_arrow(texts, cfg: NormConfig = DEFAULT_NORM):
    """Normalise a whole Arrow / polars / list string column at once (nulls -> ""); returns a single-chunk
    pyarrow LargeStringArray of the normalised texts, equal text by text to `normalize`. No Python object
    is made per text, except for the rare texts with characters newer than Python's Unicode tables (they
    take `normalize`)."""
    import polars as pl
    import pyarrow as pa

    raw = texts if isinstance(texts, pl.Series) else pl.Series("t", texts, dtype=pl.String)
    s = raw.cast(pl.String).fill_null("")
    if not cfg.punctuation:  # the batch steps rely on punctuation becoming spaces
        return pa.array([normalize(t, cfg) for t in s.to_list()], pa.large_string())
    non_ascii = s.str.contains(r"[^\x00-\x7F]")  # the ASCII rows stay ASCII through every step
    unknown = _subset(pl.repeat(False, len(s), eager=True), non_ascii,
                      lambda _: s.filter(non_ascii).str.contains(_unknown_class()))
    arr = _polars_chars(s, cfg, non_ascii).rechunk().to_arrow()
    arr = _ascii_punctuation(arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr, cfg.lowercase)
    if cfg.split_digits:
        arr = _split_letter_digit(arr)
    res = pl.Series("t", arr)
    if not cfg.numbers:
        res = res.str.replace_all(DIGITS, "0")
    if cfg.wrappers:
        res = _polars_wrappers(res, cfg)
    if unknown.any():
        idx = unknown.arg_true()
        fixed = [normalize(t, cfg) for t in raw.cast(pl.String).fill_null("").gather(idx).to_list()]
        res = res.scatter(idx, pl.Series(fixed, dtype=pl.String))
    out = res.to_arrow()
    return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out


def normalize_batch(texts: list[str | None], cfg: NormConfig = DEFAULT_NORM) -> tuple[bytes, list[str]]:
    """Normalise many texts at once; same result per text as `normalize`.

    Returns the batch as one byte string (texts joined by BATCH_SEP, single spaces) for the hasher, and the
    normalised texts. Texts Arrow cannot hold (lone surrogates from JSON) and a failed self-check take the
    per-text path."""
    if not texts:
        return b"", []
    if not _fast_path_ok():
        norms = [normalize(t, cfg) for t in texts]
    else:
        try:
            norms = normalize_arrow(texts, cfg).to_pylist()
        except (UnicodeEncodeError, ValueError, TypeError):
            norms = [normalize(t, cfg) for t in texts]
    return BATCH_SEP.join(norms).encode("utf-8", "surrogatepass"), norms


SELF_CHECK = (
    "Let \\(b\\ge 2\\) be an integer; $x \\le 1$, \\left( \\dfrac{1}{2} \\right) \\, \\quad x_1 = y__2",
    "Problem: Solve the following problem. What is İstanbul ÀB_c—d… 3²?\n```python\ndef f():\n    pass\n```",
    "Please reason step by step, and put your final answer within \\boxed{}. Find x. Question:",
    "  \t\n ", "a\x00b", "The answer is $\\boxed{5}$.\nLet's think step by step.",
    "x²³ + y₁ ≤ ½ · √(3) × π, ∠ABC = 90°, 1 <= n >= 2, \\frac12, \\begin{align} a \\end{align} ΣΑΣ ς",
    "\U0001ccd6 new char, \ua7cb, ＡＢＣ ﬁnd \\LEFT( \\Rightarrow ⇒",
)
_FAST: list[bool] = []


def _fast_path_ok() -> bool:
    """Whether the batch normaliser agrees with `normalize` on tricky strings (checked once; if a change to
    one path is not mirrored in the other, everything falls back to the per-text path, with a warning)."""
    if not _FAST:
        _FAST.append(True)
        try:
            got = normalize_arrow(list(SELF_CHECK)).to_pylist()
            ok = got == [normalize(t) for t in SELF_CHECK]
        except Exception as e:  # a polars without these kernels
            log.warning("normalize: batch path unavailable (%s)", e)
            ok = False
        _FAST[0] = ok
        if not ok:
            log.warning("normalize: the batch normaliser differs from normalize(); using the per-text path")
    return _FAST[0]


def fast_normalize(text: str | None, cfg: NormConfig = DEFAULT_NORM) -> str:
    """`normalize` for one text through the batch path (same output)."""
    return normalize_batch([text], cfg)[1][0]
