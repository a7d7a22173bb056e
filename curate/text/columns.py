"""Which implementation normalises and hashes a stage's text columns: the compiled kernel or the polars path.

Both give `normalize`'s text for every input and the same word / n-gram hashes (tests/test_kernel.py fuzzes
the kernel against `normalize`; tests/test_text_kernel_stages.py runs the stages both ways), so the choice
only moves speed and memory:

- `numba`: `curate/text/kernel.py`, one compiled pass per text (the `kernel` extra installs numba);
- `python`: `normalize.normalize_arrow` (~15 polars string passes) and `hashing`'s numpy hashers;
- `auto` (the default): `numba` when numba is importable, else `python`.

The kernel module is imported only when it is used: importing numba costs ~1 s and ~100-200 MB per process,
which a process that never normalises a large batch (the stage's main process) should not pay.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache

import numpy as np

from cotforge.curate.text.normalize import NormConfig, normalize_arrow, normalize_batch

TEXT_KERNELS = ("auto", "numba", "python")
KERNEL_HELP = ("Text normaliser: 'numba' (the compiled kernel of the kernel extra), 'python' (the polars path) or "
               "'auto' (numba when installed). Same text and verdicts either way; only speed and memory differ.")


@lru_cache(maxsize=1)
def kernel_installed() -> bool:
    """True when numba can be imported (the `kernel` extra)."""
    return importlib.util.find_spec("numba") is not None


def check_text_kernel(choice: str) -> None:
    """A ValueError naming the setting for an unknown value."""
    if choice not in TEXT_KERNELS:
        raise ValueError(f"text_kernel: must be one of {', '.join(TEXT_KERNELS)} (got {choice!r})")


def use_kernel(choice: str) -> bool:
    """Whether `choice` (a TEXT_KERNELS value) runs the compiled kernel here; `numba` without numba is an
    error that says what to install."""
    check_text_kernel(choice)
    if choice == "python":
        return False
    if choice == "numba" and not kernel_installed():
        raise RuntimeError("text_kernel=numba needs numba: pip install 'cotforge[kernel]' (or use text_kernel=auto)")
    return kernel_installed()


def normalize_column(texts, cfg: NormConfig, kernel: str = "auto"):
    """`normalize` of every text of a list / Arrow / polars column (nulls -> ""), as a single-chunk pyarrow
    LargeStringArray."""
    if use_kernel(kernel):
        from cotforge.curate.text.kernel import normalize_many

        return normalize_many(texts, cfg)
    return normalize_arrow(texts, cfg)


def normalize_list(texts: list[str | None], cfg: NormConfig, kernel: str = "auto") -> list[str]:
    """`normalize` of each text as a Python list (the per-text path for text the batch path cannot encode,
    e.g. lone surrogates from JSON)."""
    if not texts:
        return []
    if use_kernel(kernel):
        from cotforge.curate.text.kernel import normalize_many

        return normalize_many(texts, cfg).to_pylist()
    try:
        return normalize_batch(texts, cfg)[1]
    except UnicodeEncodeError:
        from cotforge.curate.text.normalize import normalize

        return [normalize(t, cfg) for t in texts]


def word_and_ngram_hashes(norm, n: int, kernel: str = "auto") -> tuple[np.ndarray, ...]:
    """(word hashes, word row, n-gram hashes, n-gram row, first word of each n-gram) of a normalised
    LargeStringArray, as `hashing.hash_words_arrow` + `hashing.ngram_hashes(..., n)` give them."""
    if use_kernel(kernel):
        from cotforge.curate.text.kernel import hash_words_ngrams

        wh, rows, _, h, hr, hs = hash_words_ngrams(norm, n)
        return wh, rows, h, hr, hs
    from cotforge.curate.text.hashing import hash_words_arrow, ngram_hashes

    wh, rows, _ = hash_words_arrow(norm)
    return (wh, rows, *ngram_hashes(wh, rows, n))


def ngram_hashes(wh: np.ndarray, rows: np.ndarray, n: int, kernel: str = "auto") -> tuple[np.ndarray, ...]:
    """`hashing.ngram_hashes` (hashes, text index, start word of each word n-gram inside one text), compiled
    when `kernel` runs (text/lookup.py; the same bits)."""
    if use_kernel(kernel):
        from cotforge.curate.text import lookup

        return lookup.ngram_hashes(wh, rows, n)
    from cotforge.curate.text.hashing import ngram_hashes as numpy_ngram_hashes

    return numpy_ngram_hashes(wh, rows, n)


def prefilter_maybe(prefilter, h: np.ndarray, kernel: str = "auto") -> np.ndarray:
    """`prefilter.maybe(h)` (a `hashing.BitPrefilter`), compiled when `kernel` runs (text/lookup.py)."""
    if use_kernel(kernel):
        from cotforge.curate.text import lookup

        return lookup.maybe(prefilter, h)
    return prefilter.maybe(h)
