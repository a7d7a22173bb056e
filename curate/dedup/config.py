"""`DedupConfig`: the knobs of problem-level dedup, validated on construction."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from datatrove.pipeline.dedup.minhash import MinhashConfig
from datatrove.utils.hashing import HashConfig
from datatrove.utils.text import TextNormConfig

from cotforge.curate.text.normalize import DEFAULT_NORM, NormConfig


@dataclass
class DedupConfig:
    """Knobs of problem-level dedup; defaults were chosen on the labelled set (bench/labelled_sets.py,
    2100 pairs; sweep of n-gram 2-5, bands x rows 14x8/20x5/16x4/25x4/32x3/50x4/10x10, threshold 0-0.8,
    guards on/off).

    Measured (bench/dedup.py): word 3-grams, 20 bands x 5 rows (LSH midpoint (1/20)^(1/5) = 0.55), exact
    n-gram Jaccard >= 0.6 on candidates, number and edit guards on -> precision 0.9992, recall 0.9975 (near
    copies alone: 297/300; before question openers were treated as synonyms, "Find" -> "Compute" swaps made
    it 279/300 whatever the banding: 25x4 ... 50x4 missed the same 21). Without the edit guard no setting reached precision 0.98 (real look-alikes such
    as "arrange the letters of TEPEE" vs "... of PROOF" share most shingles); without the number guard
    precision was <= 0.89."""

    ngram: int = field(default=3, metadata={"help": "Word n-gram shingle size of the normalised prompt."})
    bands: int = field(default=20, metadata={"help": "LSH bands (datatrove num_buckets)."})
    rows_per_band: int = field(default=5, metadata={"help": "MinHash values per band (datatrove hashes_per_bucket)."})
    threshold: float = field(default=0.6, metadata={
        "help": "Min exact word n-gram Jaccard for an LSH candidate pair to count (0 = every candidate)."})
    number_guard: bool = field(default=True, metadata={
        "help": "Candidates whose prompts hold different numbers are different problems."})
    edit_guard: bool = field(default=True, metadata={
        "help": "Near-duplicates may only add words (instructions, articles); replaced or moved words differ."})
    seed: int = field(default=1, metadata={"help": "Seed of the MinHash permutations."})
    streaming_buckets: bool = field(default=False, metadata={
        "help": "Use datatrove's constant-memory heap merge of band files (slower) instead of the numpy sort."})
    source_priority: list[str] = field(default_factory=list, metadata={
        "help": "Source names (globs ok), best first: the first source of a cluster keeps the problem.",
        "sep": ",", "metavar": "A,B,..."})
    norm: NormConfig = field(default=DEFAULT_NORM, metadata={"help": "Text normalisation switches.", "cli": False})

    def __post_init__(self) -> None:
        self.validate()

    @property
    def lsh_threshold(self) -> float:
        """The S-curve midpoint (1/b)^(1/r): Jaccard at which a pair becomes a candidate w.p. ~1/2."""
        return (1 / self.bands) ** (1 / self.rows_per_band)

    @property
    def num_perm(self) -> int:
        return self.bands * self.rows_per_band

    def minhash_config(self) -> MinhashConfig:
        """datatrove MinhashConfig describing our band files (64-bit values, bands x rows); its own text
        normalisation and hashing are not used (signatures come from `minhash_signatures`)."""
        off = TextNormConfig(lowercase=False, norm_whitespace=False, remove_punctuation=False,
                             norm_unicode_diacritics=False, norm_numbers=False)
        return MinhashConfig(n_grams=self.ngram, num_buckets=self.bands, hashes_per_bucket=self.rows_per_band,
                             seed=self.seed, norm_config=off, hash_config=HashConfig(precision=64, hash_fc="xxhash"))

    def validate(self) -> None:
        """Reject settings that cannot work, with a message naming the option (runs on construction)."""
        for name in ("ngram", "bands", "rows_per_band"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1 (got {getattr(self, name)})")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold: must be in [0, 1] (got {self.threshold})")

    def describe(self) -> dict[str, Any]:
        """The config as stamped into stats.json (with the implied LSH threshold)."""
        d = asdict(self)
        d["norm"] = asdict(self.norm)
        d["lsh_threshold"] = round(self.lsh_threshold, 4)
        d["num_perm"] = self.num_perm
        d["minhash"] = (f"{self.ngram}-gram word shingles (curate.hashing), {self.bands} bands x "
                        f"{self.rows_per_band} rows, affine64 permutations seed {self.seed}, values >> 3 "
                        "(datatrove 64-bit band files)")
        return d
