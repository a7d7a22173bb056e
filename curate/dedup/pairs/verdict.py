"""The verdict on an LSH candidate pair: the code check (`code.py`: statement, stub, constraints, examples)
for code problems, else the graded text check (`text.py`); None means near-duplicates, else the reason not."""

from __future__ import annotations

from cotforge.curate.dedup.config import DedupConfig
from cotforge.curate.dedup.pairs import relations, synonyms
from cotforge.curate.dedup.pairs.code import code_verdict
from cotforge.curate.dedup.pairs.sections import code_sections
from cotforge.curate.dedup.pairs.text import PromptView, graded_verdict, jaccard_ok, prompt_view


def candidate_verdict(norm_a: str, norm_b: str, cfg: DedupConfig, raw_a: str | None = None,
                      raw_b: str | None = None, views: tuple[PromptView, PromptView] | None = None) -> str | None:
    """Check an LSH candidate pair of normalised prompts (raw prompts optional: they give names and math
    tokens): None = near-duplicates, else the reason they are not. `edit_guard=False` keeps only the
    n-gram Jaccard test on the whole prompts. `views` (from `prompt_view`) saves rebuilding them when one
    prompt is in many pairs. Code problems (`code_sections`, both raw prompts given) go by `code_verdict`."""
    if cfg.code_sections and raw_a and raw_b:
        sa, sb = code_sections(raw_a), code_sections(raw_b)
        if sa is not None or sb is not None:
            return code_verdict(sa, sb, (norm_a, raw_a), (norm_b, raw_b), cfg)
    if not cfg.edit_guard:
        return None if jaccard_ok(norm_a.split(" "), norm_b.split(" "), cfg) else "below_threshold"
    if views is None:
        views = prompt_view(norm_a, raw_a, cfg.norm), prompt_view(norm_b, raw_b, cfg.norm)
    return graded_verdict(*views, cfg)


def release_word_tables() -> None:
    """Drop the WordNet tables and the per-word caches built on them (~55 MB once a content-word check has
    loaded them); the next check loads them again. For a process whose checks are done."""
    for mod in (relations, synonyms):
        for f in vars(mod).values():
            if callable(getattr(f, "cache_clear", None)):
                f.cache_clear()


REJECT_REASONS = ("number_changed", "math_changed", "name_changed", "question_changed", "content_changed",
                  "signature_changed", "constraints_changed", "examples_changed", "reworded_too_much",
                  "below_threshold")
