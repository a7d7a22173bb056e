"""`DecontamConfig`: what to decontaminate against and how strictly (the rules: `cotforge.curate.decontam.match`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from cotforge.curate.text.normalize import DEFAULT_NORM, NormConfig

DECONTAM_DEFAULTS_NOTE = """Chosen on the labelled set of bench/labelled_contamination.py (positives:
verbatim / case+whitespace / LaTeX re-spacing / instruction-wrapped / first-60% truncations / re-indented code
docstrings / light rewording / restating responses of benchmark items; negatives: training-pool problems that
are not copies plus stock-phrase hard negatives) and on the full ../shared/data run (templated MATH-train
variants of MATH test problems must not count). n=8 beat 10 and 13 on recall at equal FPR; a plain
containment threshold (0.35-0.5) flagged hundreds of templated MATH-train variants, so the copy check
(one verbatim chunk) replaced it. See bench/decontam.py --sweep and the closing note."""


@dataclass
class DecontamConfig:
    """What to match against and how strictly (see the module docstring for the rule)."""

    benchmarks: list[str] = field(default_factory=list, metadata={
        "help": "Benchmark registry names, e.g. aime2024,math500,humaneval (a recipe's benchmarks.names by default).", "sep": ",", "metavar": "A,B,..."})
    benchmarks_dir: str | None = field(default=None, metadata={
        "help": "Local folder with <name>.jsonl[.gz]/.parquet benchmark files (fields id, problem, ...)."})
    registry_yaml: str | None = field(default=None, metadata={
        "help": "YAML with extra benchmark specs.", "flag": "--registry"})
    ngram: int = field(default=8, metadata={"help": "Word n-gram size of the index."})
    threshold: float = field(default=0.5, metadata={
        "help": "Prompt side: the longest verbatim chunk of a benchmark item, as a share of its words."})
    response_threshold: float = field(default=0.5, metadata={"help": "The same on the response side."})
    min_chunk_words: int = field(default=15, metadata={
        "help": "A partial (truncated) copy must be at least this many words long..."})
    diverge_chunk_words: int = field(default=30, metadata={
        "help": "...or this long when row and item both go on differently after/before it."})
    full_fraction: float = field(default=0.9, metadata={
        "help": "Chunks covering this share of the item need no minimum length."})
    row_fraction: float = field(default=0.8, metadata={
        "help": "...or a copy of >= diverge_chunk_words making up this share of the row."})
    min_deleted_words: int = field(default=10, metadata={
        "help": "A copy may skip parts of the item this long (examples), not a short condition."})
    max_substitutions: int = field(default=2, metadata={
        "help": 'Non-numeric words a copy may change inside the chunk ("Find" -> "Determine").'})
    prefilter: float = field(default=0.25, metadata={
        "help": "Containment of the item's n-grams needed before the chunk check."})
    min_ngrams: int = field(default=3, metadata={
        "help": "Shared n-grams needed (capped at the item's own count)."})
    max_item_df: int = field(default=8, metadata={
        "help": "N-grams found in more benchmark items than this are stop n-grams."})
    check_response: bool = field(default=True, metadata={
        "help": "Also match the response side (reported separately).", "flag": "--response/--no-response"})
    response_chars: int = field(default=4000, metadata={
        "help": "The response side looks at the first N characters (0 = all); restatements come first."})
    include_solutions: bool = field(default=False, metadata={
        "help": "Also index benchmark reference solutions.", "flag": "--solutions/--no-solutions"})
    short_min_words: int = field(default=3, metadata={
        "help": "Items shorter than n words are matched whole on the prompt side from this length."})
    verify_numbers: bool = field(default=True, metadata={
        "help": "Reject chunks bounded by differing numbers and fuzzy matches missing the item's numbers."})
    fuzzy: bool = field(default=True, metadata={
        "help": "MinHash-LSH tier for reformatted copies.", "flag": "--fuzzy/--no-fuzzy"})
    fuzzy_ngram: int = field(default=3, metadata={"help": "Word shingle size of the fuzzy tier."})
    num_perm: int = field(default=128, metadata={"help": "MinHash permutations of the fuzzy tier."})
    lsh_threshold: float = field(default=0.5, metadata={
        "help": "datasketch LSH threshold of the fuzzy tier."})
    fuzzy_threshold: float = field(default=0.75, metadata={
        "help": "Fuzzy tier: containment of the item's shingles in the prompt."})
    fuzzy_min_shingles: int = field(default=15, metadata={
        "help": "Shorter items are left to the exact / n-gram tiers."})
    batch_size: int = field(default=512, metadata={
        "help": "Rows per matching batch in the datatrove filter."})
    seed: int = field(default=1, metadata={"help": "Seed of the MinHash permutations."})
    norm: NormConfig = field(default=DEFAULT_NORM, metadata={
        "help": "Text normalisation switches.", "cli": False})

    def __post_init__(self) -> None:
        for name in ("ngram", "fuzzy_ngram", "num_perm", "batch_size", "min_ngrams", "short_min_words"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1 (got {getattr(self, name)})")
        for name in ("min_chunk_words", "diverge_chunk_words", "min_deleted_words", "max_substitutions",
                     "max_item_df", "response_chars", "fuzzy_min_shingles"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0 (got {getattr(self, name)})")
        for name in ("threshold", "response_threshold", "full_fraction", "row_fraction", "prefilter",
                     "lsh_threshold", "fuzzy_threshold"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}: must be in [0, 1] (got {getattr(self, name)})")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able config (recorded in stats.json and the report)."""
        d = asdict(self)
        d["norm"] = asdict(self.norm)
        return d
