"""What decontamination adds to the shared normaliser (index and rows alike): two code-request forms.

- **Defined function names**: every name a text defines (`def NAME(`), and every name a benchmark item
  defines (the index's `defined_names`, so a copy of an item's docstring examples without the signature is
  covered too), is written `fn`: a HumanEval prompt whose function was renamed (in the signature and in every
  docstring example) is the same text. Identifier-like names (`has_close_elements`, `maxProfit`) are renamed
  wherever they occur, and so are the plain-word names a text defines itself when it has up to SHORT characters
  or the name is an item's too (a HumanEval prompt and its copy with the function renamed read the same, prose
  included); other plain-word names
  (`median`, `histogram`, `sum`) only where they are called (`histogram(`, the `def` line included), so the
  docstring examples of a copy without the signature (HumanEval's last lines:
  `>>> histogram('a b')`) read as the item's while the word in prose stays a word ("find the sum of" in a
  response that defines `def sum(...)`). Applied before normalisation, per text, to texts holding
  "def ", an identifier-like name or a plain name followed by "(".
- **Request templates**: "write a (python) function to", "implement a python function which", "create a
  function that", "i need a function to", "can you write python code to" ... followed by a verb all read as
  `zzreq <verb stem>` (the verb's trailing s/es/e dropped: "finds"/"find", "merges"/"merge"), so a short
  code statement behind another request template ("Implement a Python function which finds the shared
  elements ..." for MBPP's "Write a function to find the shared elements ...") is the same text. Applied
  after normalisation to texts holding one of REQUEST_NOUNS.
Both only rename or drop words that carry no meaning of the problem; a statement without a request phrase
("Your task: merge two dictionaries") still matches by its words when they are enough for the n-gram tier.
"""

from __future__ import annotations

import re

from cotforge.curate.text.columns import normalize_column, use_kernel
from cotforge.curate.text.normalize import NormConfig, any_of

_DEF = re.compile(r"\bdef\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(")
REQUEST_NOUNS = ["function", "code", "program", "script", "method", "lambda"]
REQUEST = (r"(?:^| )(?:(?:write|create|implement|define|develop|give|make|build|need|provide)[a-z]* )?(?:me )?"
           r"(?:a |an |the )?(?:python3? |python function |small |simple )?(?:function|code|program|script|method|"
           r"lambda function|lambda)(?: in python)? (?:to|that|which|for|of)(?: will| can| should)? "
           r"([a-z]+?)(?:es|e|s)?(?: |$)")
MARK = "zzreq"
LONG = 20_000  # texts longer than this (long responses) rename only the benchmark items' own names
SHORT = 4_000  # texts up to this long (prompts, items) rename their own plain-word names everywhere


def defined_names(text: str) -> set[str]:
    """Names `text` defines with `def NAME(`."""
    return set(_DEF.findall(text))


def _everywhere(name: str) -> bool:
    """snake_case, camelCase or with a digit, >= 4 characters: renamed wherever it occurs."""
    return len(name) >= 4 and ("_" in name.strip("_") or any(c.isdigit() for c in name)
                               or any(c.isupper() for c in name[1:]))


def identifier_like(name: str) -> bool:
    """Names of benchmark items worth renaming in texts that do not define them (the index's `defined_names`):
    identifier-like ones (`_everywhere`) wherever they occur, plain words of >= 2 letters (`median`, `bf`) only
    where they are called (`median(`). One-letter names (`f`) and dunders (`__init__`) are left alone: `f(x)` is
    math."""
    return _everywhere(name) or (len(name) >= 2 and name.isidentifier() and not name.startswith("__"))


def _pattern(name: str) -> str:
    """What `matcher_norm` looks for in a batch: the name, or for a plain word the call `name(`."""
    return name if _everywhere(name) else name + "("


def rename_functions(text: str, known: tuple[str, ...] = ()) -> str:
    """Every name `text` defines with `def NAME(` (texts up to LONG characters) and every name of `known` ->
    `fn`: identifier-like names wherever they occur, and so are the text's own names when it is short (a
    HumanEval prompt and its renamed copy read the same, prose included) or when they are items' names (a long
    response quoting `def median(l)` reads like the item); plain words otherwise only where called (`name(`, the
    `def` line included), so a long response defining `def sum(...)` still says "the sum of" in its prose."""
    kn = set(known)
    # a long text is not scanned for its own definitions, but an item's name it defines counts as its own
    own = defined_names(text) if len(text) <= LONG else {n for n in kn if f"def {n}(" in text}
    names = {n for n in own | kn if _everywhere(n) or (n in own and (len(text) <= SHORT or n in kn))}
    called = (own | kn) - names
    if names:
        text = _sub_names(text, names, calls_only=False)
    if called:
        text = _sub_names(text, called, calls_only=True)
    return text


def _word_char(c: str) -> bool:
    """What `\\w` matches in a Python `re` str pattern (alphanumeric in Unicode's sense, or "_")."""
    return c.isalnum() or c == "_"


def _sub_names(text: str, names: set[str], calls_only: bool) -> str:
    """`re.sub(r"\\b(?:NAME|...)\\b" + (r"(?=\\s*\\()" if calls_only else ""), "fn", text)` for identifier names
    (word characters only, so every match is a whole word and matches never overlap), with str.find instead of
    compiling a pattern per text (the name sets differ from text to text: that compile was half of the renaming's
    cost; tests/test_decontam_speed.py checks the equality against the regex)."""
    hits: list[tuple[int, int]] = []
    n_text = len(text)
    for name in names:
        k, at = len(name), text.find(name)
        while at >= 0:
            end = at + k
            ok = (at == 0 or not _word_char(text[at - 1])) and (end == n_text or not _word_char(text[end]))
            if ok and calls_only:
                j = end
                while j < n_text and text[j].isspace():
                    j += 1
                ok = j < n_text and text[j] == "("
            if ok:
                hits.append((at, end))
            at = text.find(name, end if ok else at + 1)
    if not hits:
        return text
    hits.sort()
    parts, last = [], 0
    for a, b in hits:
        parts += (text[last:a], "fn")
        last = b
    parts.append(text[last:])
    return "".join(parts)


def _known_in(texts, pats: list[str], kernel: str) -> list[list[str]]:
    """The names of `pats` (names, or `name(` for plain words) each text holds anywhere (overlapping): one
    compiled Aho-Corasick pass under the kernel (text/literals.py, ~2x polars' `extract_many` on long
    responses), else `extract_many`; the same sets either way."""
    if not use_kernel(kernel):
        return [[k.rstrip("(") for k in ks] for ks in texts.str.extract_many(pats, overlapping=True).to_list()]
    from cotforge.curate.text.literals import find_literals

    rows, lits = find_literals(texts, tuple(pats))
    out: list[list[str]] = [[] for _ in range(len(texts))]
    for r, k in zip(rows.tolist(), lits.tolist(), strict=True):
        out[r].append(pats[k].rstrip("("))
    return out


def matcher_norm(texts, norm: NormConfig, known: frozenset[str] = frozenset(), kernel: str = "auto"):
    """The normalised texts decontamination hashes: `normalize` (by `kernel`: text/columns.py), with defined
    function names and request templates canonicalised (module docstring). Returns a pyarrow LargeStringArray."""
    import polars as pl
    import pyarrow as pa

    s = texts if isinstance(texts, pl.Series) else pl.Series("t", texts, dtype=pl.String)
    s = s.cast(pl.String).fill_null("")
    has_def = s.str.contains("def ", literal=True)
    pats = sorted({_pattern(n) for n in known})
    if pats:  # texts holding a known name (plain ones: the call "name("): one regex literal search over the batch
        has_def |= s.str.contains(any_of(pats))
    if has_def.any():
        idx = has_def.arg_true()
        sub = s.gather(idx)
        # which known names each of those texts holds (Aho-Corasick, overlapping; only these rows: 5x the search)
        found = _known_in(sub, pats, kernel) if pats else [[]] * len(idx)
        texts = sub.to_list()
        s = s.scatter(idx, pl.Series([rename_functions(t, tuple(k)) if len(t) <= LONG or k else t
                                      for t, k in zip(texts, found, strict=True)], dtype=pl.String))
    out = pl.Series("t", normalize_column(s, norm, kernel))
    req = out.str.contains("|".join(REQUEST_NOUNS))  # plain words; the regex crate's literal search beats contains_any
    if req.any():
        idx = req.arg_true()
        # runs of 2+ spaces only (replacing every lone space by itself cost more than the request canon itself)
        fixed = out.gather(idx).str.replace_all(REQUEST, f" {MARK} ${{1}} ").str.replace_all("  +", " ").str.strip_chars(" ")
        out = out.scatter(idx, fixed)
    arr = out.to_arrow()
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
