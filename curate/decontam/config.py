"""`DecontamConfig`: what to decontaminate against and how strictly (the rules: `cotforge.curate.decontam.match`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from cotforge.curate.text.normalize import DEFAULT_NORM, NormConfig

DECONTAM_DEFAULTS_NOTE = """Chosen on the labelled set of curate/labelled_contamination.py (positives:
verbatim / case+whitespace / LaTeX re-spacing / instruction-wrapped / first-60% truncations / re-indented code
docstrings / light rewording / restating responses of benchmark items; negatives: training-pool problems that
are not copies plus stock-phrase hard negatives) and on the full ../shared/data run (templated MATH-train
variants of MATH test problems must not count). n=8 beat 10 and 13 on recall at equal FPR; a plain
containment threshold (0.35-0.5) flagged hundreds of templated MATH-train variants, so the copy check
(one verbatim chunk) replaced it. See bench/decontam.py --sweep and the closing note."""


@dataclass
class DecontamConfig:
    """What to match against and how strictly (see the module docstring for the rule)."""

    benchmarks: list[str] = field(default_factory=list)
    benchmarks_dir: str | None = None
    registry_yaml: str | None = None
    ngram: int = 8
    threshold: float = 0.5  # prompt side: longest verbatim chunk, as a share of the item's words
    response_threshold: float = 0.5  # the same on the response side
    min_chunk_words: int = 15  # a partial chunk (truncated copy) must be this long...
    diverge_chunk_words: int = 30  # ...or this long when row and item both go on differently after/before it
    full_fraction: float = 0.9  # chunks covering this share of the item need no minimum length
    row_fraction: float = 0.8  # ...or a copy of >= diverge_chunk_words making up this share of the row
    min_deleted_words: int = 10  # a copy may skip parts of the item this long (examples), not a short condition
    max_substitutions: int = 2  # non-numeric words a copy may change inside the chunk ("Find" -> "Determine")
    prefilter: float = 0.25  # containment of the item's n-grams needed before the chunk check
    min_ngrams: int = 3  # shared n-grams needed (capped at the item's own count)
    max_item_df: int = 8  # n-grams found in more benchmark items than this are stop n-grams
    check_response: bool = True
    response_chars: int = 4000  # response side looks at the first N characters (0 = all); restatements come first
    include_solutions: bool = False  # also index benchmark reference solutions
    short_min_words: int = 3  # items shorter than n words are matched whole on the prompt side from this length
    verify_numbers: bool = True  # reject chunks bounded by differing numbers / fuzzy matches missing numbers
    fuzzy: bool = True
    fuzzy_ngram: int = 3
    num_perm: int = 128
    lsh_threshold: float = 0.5
    fuzzy_threshold: float = 0.75  # containment of the item's shingles in the prompt
    fuzzy_min_shingles: int = 15  # shorter items are left to the exact / n-gram tiers
    batch_size: int = 512
    seed: int = 1
    norm: NormConfig = DEFAULT_NORM

    def to_dict(self) -> dict[str, Any]:
        """JSON-able config (recorded in stats.json and the report)."""
        d = asdict(self)
        d["norm"] = asdict(self.norm)
        return d
