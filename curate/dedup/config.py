"""`DedupConfig`: the knobs of problem-level dedup, validated on construction."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from datatrove.pipeline.dedup.minhash import MinhashConfig
from datatrove.utils.hashing import HashConfig
from datatrove.utils.text import TextNormConfig

from cotforge.curate.text.normalize import DEFAULT_NORM, NormConfig

WORD_RELATIONS = ("synonyms", "wordnet", "flip")


@dataclass
class DedupConfig:
    """Knobs of problem-level dedup; defaults chosen on the *tuning* part of bench/labelled_sets.py only
    (pairwise sweep of bands x rows 20x5/20x4/25x4/16x4/32x3, word 2/3-grams, threshold 0-0.6, max_reworded
    0.1-0.3, the graded check's rules); the held-out part (hash in bench/dedup_heldout.sha256, recorded before
    tuning) reports them: see the README's dedup section and `python bench/dedup.py`.

    Tuning part, pairwise: 25 bands x 4 rows (LSH midpoint (1/25)^(1/4) = 0.45) took recall from 0.974 (20x5)
    to 0.984 at the same 100 permutations and precision 0.997; threshold 0.5 (Jaccard of the prompts without
    their edge text) 0.988; max_reworded 0.1-0.3 changed one pair. The graded check (curate/dedup/pairs/text.py)
    replaces the old all-or-nothing edit guard ("one prompt is the other plus words"), which rejected every
    synonym and every unseen wrapper swap; the number guard stays (without it precision was <= 0.89).

    Round 2 (`reword_content`, off): the first round let any ordinary word be replaced, so content look-alikes
    merged ("numerator" vs "denominator": 114 of 120 question-changed pairs of the fresh set of
    bench/dedup_fresh.py). Now a replaced content word must be a synonym (WordNet, curate/dedup/pairs/synonyms.py);
    the WordNet table (5 senses, one hypernym level for verbs and everyday nouns) was chosen on the tuning part:
    recall there 0.913 with synonyms only (3 senses) -> 0.960, precision unchanged.

    Round 3 (`word_relations`): every earlier part (tune, held, fresh) is now tuning data. A
    content word replaced by another merges unless there is evidence that the replacement changes the problem
    (curate/dedup/pairs/words.py `_changes`: antonyms, technical or competition-math words, two members of one
    category, words WordNet does not know); WordNet's relations over all senses (curate/dedup/pairs/relations.py)
    and its phrases ("used up", "in all") find the counterparts. Pairwise on the three parts, round 2 ->
    round 3: see the README's dedup section.

    Default `wordnet`, not `flip`: on the independent held-out set bench/dedup_fresh2.py (new pools, hash
    recorded before any evaluation) flip merged 42 of 120 object-changed and 47 of 120 object+wrapper pairs
    (precision 0.910, recall 0.710); wordnet kept precision 0.989 at recall 0.668 (round 2's rule: 0.987 /
    0.589). That choice was made after measuring all three modes on fresh2 once each.

    `code_sections` (on): fresh2's real LeetCode problems scraped twice were 0 of 108, all lost at the candidate
    stage (the examples' and constraints' numbers change the number key, so the pairs were never LSH
    candidates). Code problems are now compared by their statement section (curate/dedup/pairs/sections.py,
    code_pairs.py); the rule was written on the tuning half of bench/dedup_code.py (sha256 parity of the
    first text; the held-out half's hash in bench/dedup_code_heldout.sha256 was committed first) and on
    hand-written II-version / same-template / signature negatives; no math prompt of the pools parses as code."""

    ngram: int = field(default=3, metadata={"help": "Word n-gram shingle size of the normalised prompt."})
    bands: int = field(default=25, metadata={"help": "LSH bands (datatrove num_buckets)."})
    rows_per_band: int = field(default=4, metadata={"help": "MinHash values per band (datatrove hashes_per_bucket)."})
    threshold: float = field(default=0.5, metadata={
        "help": "Min word n-gram Jaccard of an LSH candidate pair without its edge text (0 = every candidate)."})
    number_guard: bool = field(default=True, metadata={
        "help": "Candidates whose prompts hold different numbers are different problems."})
    edit_guard: bool = field(default=True, metadata={
        "help": "Graded pair check (curate/dedup/pairs/text.py) on candidates; off = n-gram Jaccard only."})
    max_reworded: float = field(default=0.2, metadata={"help": (
        "Graded pair check: most ordinary words that may change inside the common problem, as a share of its "
        "tokens (at least 2 always may); numbers, variables, names and question words never may.")})
    reword_content: bool = field(default=False, metadata={"help": (
        "Graded pair check: let a content word replaced by an unrelated one count as rewording (the first "
        "round's rule: more synonyms merge, and so do look-alikes such as numerator vs denominator). Off: such a "
        "replacement keeps the prompts apart (content_changed) unless lexicon.REWORD_SYNONYMS groups the words.")})
    word_relations: str = field(default="wordnet", metadata={"help": (
        "Graded pair check: which replaced content words count as the same word. synonyms: inflection, spelling, "
        "the small synonym list and WordNet's synonym table (round 2); wordnet: also words WordNet relates (any "
        "sense, direct hypernym, similar-to / also-see / verb-group / derivation links, known phrases such as "
        "'use up') unless they are antonyms, technical (units, numbers, shapes, time, measured attributes) or "
        "two members of one category; flip: also any two known words without such evidence.")})
    code_sections: bool = field(default=True, metadata={"help": (
        "Code problems (a starter stub, 'Example N: Input/Output' blocks, 'Constraints:' or Codeforces "
        "'-----Input-----' headings; curate/dedup/pairs/sections.py) are compared by their statement section: its "
        "numbers make the number key, its shingles the MinHash, and the graded check runs on it; constraints "
        "and examples must agree where both prompts have them, and stub function names must share one. Off: "
        "whole prompts, as for math.")})
    seed: int = field(default=1, metadata={"help": "Seed of the MinHash permutations."})
    streaming_buckets: bool = field(default=False, metadata={
        "help": "Use datatrove's constant-memory heap merge of band files (slower) instead of the numpy sort."})
    source_priority: list[str] = field(default_factory=list, metadata={
        "help": "Source names (globs ok), best first: the first source of a cluster keeps the problem.",
        "sep": ",", "metavar": "A,B,..."})
    norm: NormConfig = field(default=DEFAULT_NORM, metadata={"help": "Text normalisation switches.", "cli": False})
    document_steps: bool = field(default=False, metadata={
        "help": "Run the signature and filter steps on datatrove Documents (slower; the same output)."})

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
        if not 0.0 <= self.max_reworded <= 1.0:
            raise ValueError(f"max_reworded: must be in [0, 1] (got {self.max_reworded})")
        if self.word_relations not in WORD_RELATIONS:
            raise ValueError(f"word_relations: must be one of {', '.join(WORD_RELATIONS)} (got {self.word_relations!r})")
        for name in ("number_guard", "edit_guard", "reword_content", "code_sections", "streaming_buckets"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}: must be true or false (got {getattr(self, name)!r})")

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
