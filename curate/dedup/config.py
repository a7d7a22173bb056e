"""`DedupConfig`: the knobs of problem-level dedup, validated on construction."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from datatrove.pipeline.dedup.minhash import MinhashConfig
from datatrove.utils.hashing import HashConfig
from datatrove.utils.text import TextNormConfig

from cotforge.curate.text.columns import KERNEL_HELP, check_text_kernel
from cotforge.curate.text.embed import ENCODER_HELP, check_semantic_settings
from cotforge.curate.text.judge import JUDGE_HELP, check_judge_settings
from cotforge.curate.text.normalize import DEFAULT_NORM, NormConfig

WORD_RELATIONS = ("synonyms", "wordnet", "flip")


@dataclass
class DedupConfig:
    """Knobs of problem-level dedup. Defaults were chosen on the tuning part of the labelled sets
    (bench/dedup/labelled.py) and are reported on held-out sets whose hashes were recorded before tuning;
    the measured figures are in docs/results.md, the rules in docs/curation.md.

    Why today's defaults: 25 bands x 4 rows (LSH midpoint (1/25)^(1/4) = 0.45) finds more reworded
    candidates than 20 x 5 at the same 100 permutations without losing precision; threshold 0.5 is the n-gram
    Jaccard of the prompts without their edge (wrapper) text; `max_reworded` 0.2 barely matters between 0.1
    and 0.3. The number guard stays on (without it precision fell to <= 0.89 on the tuning part: prompts
    that differ only in their numbers are different problems). The graded pair check (curate/dedup/pairs/text.py) lets wrappers and
    ordinary-word rewording merge, keeps changed numbers, variables, names and question words apart.

    `reword_content` is off because letting any content word be replaced merges look-alikes such as
    "numerator" vs "denominator". `word_relations` is `wordnet`: a replaced content word merges when WordNet
    relates the two words and nothing says the replacement changes the problem (antonyms, technical or
    competition-math words, two members of one category, unknown words: curate/dedup/pairs/words.py). `flip`
    (merge any two known words without such evidence) recalls more rewordings but, on a held-out set built by
    someone who had not read the rules, merged about a third of the object-changed pairs (precision 0.910 vs
    0.989), so it is an option, not the default.

    `code_sections` is on: a code problem scraped twice (once with examples and constraints, once with a
    starter stub) has different numbers in those blocks, which salt the LSH bands, so without sections such
    pairs are never candidates. Code problems are compared by their statement section (curate/dedup/
    pairs/sections.py, pairs/code.py), and differing constraints, examples or stub names keep an "I" and a "II"
    version apart; no math prompt of the labelled pools parses as code."""

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
        "Graded pair check: let a content word replaced by an unrelated one count as rewording (more "
        "synonyms merge, and so do look-alikes such as numerator vs denominator). Off: such a "
        "replacement keeps the prompts apart (content_changed) unless lexicon.REWORD_SYNONYMS groups the words.")})
    word_relations: str = field(default="wordnet", metadata={"help": (
        "Graded pair check: which replaced content words count as the same word. synonyms: inflection, spelling, "
        "the small synonym list and WordNet's synonym table; wordnet: also words WordNet relates (any "
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
    semantic: bool = field(default=False, metadata={
        "help": "Semantic tier: embedding neighbours of every problem (across the corpus) as candidate pairs beside "
                "MinHash, decided by the graded check and the numbers- and question-aware semantic check "
                "(dedup/semantic.py). Needs the semantic extra or a local model folder.",
        "flag": "--semantic/--no-semantic"})
    semantic_model: str = field(default="minilm", metadata={
        "help": "Semantic tier: 'minilm' (the semantic extra's wheel) or a local sentence-transformers folder."})
    semantic_device: str = field(default="cpu", metadata={"help": "Semantic tier: cpu, cuda or auto."})
    semantic_precision: str = field(default="auto", metadata={"help": ENCODER_HELP["precision"]})
    semantic_max_tokens: int = field(default=256, metadata={"help": ENCODER_HELP["max_tokens"]})
    semantic_threads: int = field(default=0, metadata={"help": ENCODER_HELP["threads"]})
    semantic_cosine: float = field(default=0.85, metadata={"help": "Semantic tier: least cosine of a pair."})
    semantic_question_cosine: float = field(default=0.80, metadata={
        "help": "Semantic tier: least cosine of the two question sentences."})
    semantic_top_k: int = field(default=5, metadata={"help": "Semantic tier: nearest problems checked per problem."})
    semantic_encoder: str = field(default="transformer", metadata={
        "help": "Semantic tier: 'transformer' (every problem through the model) or 'static+rerank' (a static token "
                "table distilled from the model finds the neighbours; only problems in a candidate pair go "
                "through the model, whose cosine re-ranks them)."})
    semantic_static_cosine: float = field(default=0.85, metadata={
        "help": "Semantic tier, static+rerank: least static cosine of a candidate pair (recall-oriented: every "
                "reworded pair of the tuning set is at >= 0.86)."})
    semantic_judge: str = field(default="", metadata={
        "help": JUDGE_HELP["url"] + " Dedup sends every candidate pair the graded check does not merge outright; "
                "the judge's Yes merges it, in place of the semantic pair check."})
    semantic_judge_model: str = field(default="", metadata={"help": JUDGE_HELP["model"]})
    semantic_judge_cosine: float = field(default=0.80, metadata={
        "help": "Semantic judge: least cosine of a candidate pair sent to the judge."})
    semantic_judge_timeout_s: float = field(default=60.0, metadata={"help": JUDGE_HELP["timeout_s"]})
    semantic_judge_workers: int = field(default=8, metadata={"help": JUDGE_HELP["workers"]})
    text_kernel: str = field(default="auto", metadata={"help": KERNEL_HELP})
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
        if self.semantic_top_k < 1:
            raise ValueError(f"semantic_top_k: must be >= 1 (got {self.semantic_top_k})")
        if not 0.0 <= self.semantic_question_cosine <= 1.0 or not -1.0 <= self.semantic_cosine <= 1.0:
            raise ValueError("semantic_cosine / semantic_question_cosine: must be in [-1, 1] / [0, 1] (got "
                             f"{self.semantic_cosine} / {self.semantic_question_cosine})")
        check_semantic_settings(self)
        check_judge_settings(self)
        if not -1.0 <= self.semantic_static_cosine <= 1.0:
            raise ValueError(f"semantic_static_cosine: must be in [-1, 1] (got {self.semantic_static_cosine})")
        check_text_kernel(self.text_kernel)
        for name in ("number_guard", "edit_guard", "reword_content", "code_sections", "streaming_buckets", "semantic"):
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
