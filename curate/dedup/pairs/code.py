"""The pair check of code problems by sections (curate/dedup/pairs/sections.py), on top of the graded check.

Two scrapes of one problem agree on their statements (graded check of curate/dedup/pairs/text.py) and on every
section both carry (constraints, examples, stub names); a section only one carries is what the other scrape
left out, no evidence either way. Such a merge is *partial*: `ProblemCluster` undoes it when it would join two
prompts whose sections disagree (`CONFLICT_REASONS`).
"""

from __future__ import annotations

from cotforge.curate.dedup.config import DedupConfig
from cotforge.curate.dedup.pairs.sections import CodeSections, code_sections, join_superscripts
from cotforge.curate.dedup.pairs.text import graded_verdict, jaccard_ok, plain_norm, prompt_view
from cotforge.curate.text.normalize import normalize

# a rejected pair whose sections disagree where both have them: two different problems, never one cluster
CONFLICT_REASONS = frozenset({"signature_changed", "constraints_changed", "examples_changed"})


def _statement(sec: CodeSections | None, whole: tuple[str, str], cfg: DedupConfig) -> tuple[str, str]:
    """(normalised, raw) statement of a code problem; a prompt without sections is all statement."""
    if sec is None:
        return whole
    raw = join_superscripts(sec.statement)
    return normalize(raw, cfg.norm) or whole[0], raw


def _constraints_differ(sa: CodeSections, sb: CodeSections, cfg: DedupConfig) -> bool:
    """Constraints / input-format sections differ: other numbers (superscripts joined), or the graded check
    finds a change in their words ("n integers" -> "n strings")."""
    if sa.constraint_numbers() != sb.constraint_numbers():
        return True
    ra, rb = join_superscripts(sa.constraints), join_superscripts(sb.constraints)
    na, nb = normalize(ra, cfg.norm), normalize(rb, cfg.norm)
    return na != nb and graded_verdict(prompt_view(na, ra, cfg.norm), prompt_view(nb, rb, cfg.norm), cfg) is not None


def code_verdict(sa: CodeSections | None, sb: CodeSections | None, whole_a: tuple[str, str],
                 whole_b: tuple[str, str], cfg: DedupConfig) -> str | None:
    """Two code problems (at least one with sections; `whole_*` = (normalised, raw) prompt): different when
    both have starter stubs and no function name in common (`signature_changed`), both have constraints and
    they differ in numbers or words (`constraints_changed`: the "II" version with n <= 10^5 for n <= 10^3), or an example
    both have differs in its input / output (`examples_changed`); else the graded check on the statements.
    Examples, constraints and stubs only one prompt has are what the other scrape left out: no evidence."""
    if sa is not None and sb is not None:
        if sa.functions and sb.functions and not sa.functions & sb.functions:
            return "signature_changed"
        if sa.constraints.strip() and sb.constraints.strip() and _constraints_differ(sa, sb, cfg):
            return "constraints_changed"
        plain = plain_norm(cfg.norm)
        both = zip(sa.examples, sb.examples, strict=False)  # the examples both scrapes have
        if any(normalize(ea, plain) != normalize(eb, plain) for ea, eb in both):
            return "examples_changed"
    (ta, ra), (tb, rb) = _statement(sa, whole_a, cfg), _statement(sb, whole_b, cfg)
    if not cfg.edit_guard:
        return None if jaccard_ok(ta.split(" "), tb.split(" "), cfg) else "below_threshold"
    return graded_verdict(prompt_view(ta, ra, cfg.norm), prompt_view(tb, rb, cfg.norm), cfg, edges=sa is None or sb is None)


def partial_agreement(raw_a: str | None, raw_b: str | None, cfg: DedupConfig) -> bool:
    """For an accepted pair: at least one is a code problem and a section (constraints, examples, stub) is on
    one side only, so the merge rests on what one scrape left out (`CodeSections.partial_to`)."""
    if not (cfg.code_sections and raw_a and raw_b):
        return False
    sa, sb = code_sections(raw_a), code_sections(raw_b)
    if sa is None and sb is None:
        return False
    return sa.partial_to(sb) if sa is not None else sb.partial_to(sa)


__all__ = ["code_verdict", "partial_agreement", "CONFLICT_REASONS"]
