"""The graded check of an LSH candidate pair: align the two normalised prompts, classify what changed, decide.

Runs only on candidate pairs (the cluster step, `PairJudge`), never per row; `verdict.py` picks this check or
the code check (`code.py`) for a pair. Steps:

1. Tokens: the normalised prompt split on spaces, with contractions put back together ("don t" -> "do not")
   and "non X" joined ("non negative" -> "nonnegative"). From the raw prompt (when given): the tokens that
   occur in LaTeX math regions, commands or [asy] figures (`math`), and the names: capitalised words in the
   middle of a sentence or capitalised twice, ALL-CAPS words (TEPEE, PROOF) and quoted words (`names`).
2. Alignment: difflib's SequenceMatcher opcodes. The first and last equal runs of >= 2 tokens bound the
   common problem; what lies before / after them is *edge* text (an instruction wrapper by its role), what
   lies between is *interior* change.
3. Each change is classified by the tokens it touches: numbers (digits, number words: compared by value),
   variables and math expressions, names, ordinary words, and among ordinary words the carriers of the
   question (curate/dedup/pairs/lexicon.py). Verdicts, first match wins:
   - `number_changed`: the numbers in a changed span differ (the number guard already rejects pairs whose
     digit multisets differ; this adds number words and moved numbers: "3n square, 2n cube" vs "2n ..., 3n");
   - `math_changed`: a variable / expression token changed (at the edges: one the common problem lacks);
   - `name_changed`: a name, ALL-CAPS word or quoted word changed (interior or replaced edge text);
   - `question_changed`: a carrier replaced by one of another group, or a strict one (negation, parity, sign,
     comparison ...) added, dropped or replaced; at the edges, an added operation word the problem lacks
     ("... Then find the sum of its digits.");
   - `reworded_too_much`: more interior ordinary words changed than `max(2, max_reworded * common tokens)`;
   - `below_threshold`: word n-gram Jaccard of the two prompts without their edge text < `threshold`.
   Everything else (synonyms, articles, instruction text added or swapped around the problem) merges.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from difflib import SequenceMatcher
from functools import cached_property, lru_cache

from cotforge.curate.dedup.config import DedupConfig
from cotforge.curate.dedup.pairs.lexicon import (
    CARRIERS,
    CONTRACTION_NOT,
    FORMAT_WORDS,
    INSTRUCTION_WORDS,
    NUMBER_WORDS,
    PRONOUN_DETERMINERS,
    PRONOUN_ONE,
    STARTERS,
    STRICT_CATEGORIES,
)
from cotforge.curate.dedup.pairs.words import content_replaced, content_words, idioms, negated, said_by
from cotforge.curate.text.normalize import NormConfig, normalize

_MATH = re.compile(r"\$\$.+?\$\$|\$.+?\$|\\\(.+?\\\)|\\\[.+?\\\]|\\begin\{.+?\\end\{[a-z*]+\}", re.DOTALL)
_ASY = re.compile(r"\[asy\].*?\[/asy\]", re.DOTALL)
_TEXT_CMD = re.compile(r"\\(?:text|textbf|textit|textrm|mbox)\s*\{([^{}]*)\}")
_CMD = re.compile(r"\\([A-Za-z]+)")
_TEXT_CMDS = frozenset("text textbf textit textrm mbox emph it bf rm tt sf em hbox qquad quad".split())
_PROSE_RUN = re.compile(r"(?<![\\{A-Za-z])[A-Za-z]{3,}\s+[A-Za-z]{3,}\s+[A-Za-z]{2,}(?![A-Za-z}])")  # 3 words in a row
_RAW_TOK = re.compile(r"[A-Za-z]+|\n|[^\sA-Za-z]")
_CAP_TOK = re.compile(r"(?<![A-Za-z])[A-Z][A-Za-z]*|[^\sA-Za-z\x00-\x7f]")  # tokens that may be capitalised
_REWRITTEN = frozenset({"one", "t", "non"})  # the tokens `dedup_tokens` rewrites or joins
_PROSE_WORD = re.compile(r"(?<!\\)\b[A-Za-z]{2,}\b")
_ASCII_NON_LETTERS = str.maketrans("", "", "".join(chr(i) for i in range(128) if not chr(i).isalpha()))
_ASCII_UPPER = str.maketrans("", "", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_QUOTES = frozenset('"“”')
_SENTENCE_END = frozenset(".?!:;\n")
_PROSE_LETTERS = frozenset("aistdm")  # single letters that are words or contraction pieces unless seen in math
_AMBIGUOUS = frozenset("ai")  # "a" / "i": a variable only when the other side of the change has one too
ANCHOR = 2  # tokens in an equal run that bounds the common problem
MIN_REWORDED = 2  # interior ordinary words that may always change


class PromptView:
    """What the graded check knows about one prompt: its tokens, and (computed from the raw prompt on first
    use, so a pair decided by its tokens alone never pays for them) its math tokens and names."""

    def __init__(self, tokens: tuple[str, ...], raw: str | None = None, norm: NormConfig | None = None):
        self.tokens, self._raw, self._norm = tokens, raw, norm or NormConfig()

    @cached_property
    def _raw_info(self) -> tuple[frozenset[str], frozenset[str], frozenset[str], frozenset[str]]:
        if not self._raw:
            return frozenset(), frozenset(), frozenset(), frozenset()
        math, prose = _math_and_prose(self._raw, self._norm)
        names, openers = _names(prose)
        words = prose_words(prose)
        return frozenset(math), frozenset(names), frozenset(openers), words

    @property
    def math(self) -> frozenset[str]:
        return self._raw_info[0]

    @property
    def names(self) -> frozenset[str]:
        return self._raw_info[1]

    @property
    def openers(self) -> frozenset[str]:
        """Capitalised sentence-initial words that are not common starters (maybe names)."""
        return self._raw_info[2]

    @property
    def prose(self) -> frozenset[str]:
        """Words of the prose outside math (a layout command name used as a word there is a word: "left")."""
        return self._raw_info[3]

    @cached_property
    def commands(self) -> frozenset[str]:
        """LaTeX commands of the raw prompt that are not layout (\\cdot, \\sqrt, \\sin; not \\frac, \\left):
        the normalised tokens drop them with the operators, so "1+2\\cdot3" and "1+\\cfrac{2}{3}" look alike."""
        if not self._raw:
            return frozenset()
        return frozenset(c.lower() for c in _CMD.findall(self._raw)) - FORMAT_WORDS - _TEXT_CMDS


def dedup_tokens(norm: str) -> list[str]:
    """Tokens of a normalised prompt with contractions restored, "non X" joined, and the pronoun "one" after a
    determiner ("every one of", "no one", "each one") made PRONOUN_ONE: it counts nothing, unlike "one box"."""
    tokens = norm.split(" ") if norm else []
    if _REWRITTEN.isdisjoint(tokens):
        return tokens  # no token any rule rewrites or joins (most prompts)
    return _rewrite_tokens(tokens)


def _rewrite_tokens(tokens: list[str]) -> list[str]:
    """`dedup_tokens`' rules applied token by token."""
    out: list[str] = []
    for t in tokens:
        if t == "one" and out and out[-1] in PRONOUN_DETERMINERS:
            out.append(PRONOUN_ONE)
        elif t == "t" and out and out[-1] in CONTRACTION_NOT:
            out[-1] = CONTRACTION_NOT[out[-1]]
            out.append("not")
        elif out and out[-1] == "non" and t.isalpha():
            out[-1] = "non" + t
        else:
            out.append(t)
    return out


@lru_cache(maxsize=8)
def plain_norm(norm: NormConfig) -> NormConfig:
    return replace(norm, wrappers=False)


def _math_and_prose(raw: str, norm: NormConfig) -> tuple[set[str], str]:
    """Tokens of the math regions, commands and figures of `raw`, and its prose (with \\text{} contents)."""
    if "$" not in raw and "\\" not in raw and "[asy]" not in raw:
        return set(), raw  # no math region, command or figure can start: all prose (most word problems)
    return _math_and_prose_scan(raw, norm)


def _math_and_prose_scan(raw: str, norm: NormConfig) -> tuple[set[str], str]:
    """`_math_and_prose` by scanning `raw` for math regions and figures."""
    math: set[str] = set()
    prose: list[str] = []
    pos = 0
    plain = plain_norm(norm)
    spans = sorted([(m.start(), m.end(), True) for m in _ASY.finditer(raw)]
                   + [(m.start(), m.end(), False) for m in _MATH.finditer(raw)])
    for start, end, asy in spans:
        if start < pos or (not asy and _PROSE_RUN.search(raw, start, end)):
            continue  # overlapping, or "$5 for apples and $6": dollar signs around prose, not math
        prose.append(raw[pos:start])
        region = raw[start:end]
        if not asy:
            prose.extend(_TEXT_CMD.findall(region))
            region = _TEXT_CMD.sub(" ", region)
        math.update(t for t in normalize(region, plain).split(" ") if t.isalpha())
        pos = end
    prose.append(raw[pos:])
    text = "\n".join(prose)  # a word right after a formula may start a sentence ("\\]Compute ...")
    math.update(c.lower() for c in _CMD.findall(text))
    in_prose = {w.lower() for w in re.findall(r"(?<!\\)\b[A-Za-z]{2,}\b", text)}
    return {t for t in math if len(t) == 1 or t not in in_prose}, text  # "sum" in prose and in \sum: a word


def _names(prose: str) -> tuple[set[str], set[str]]:
    """(names, capitalised sentence openers) of the prose, lower-cased. Names: capitalised words mid-sentence
    or capitalised twice (not sentence starters), ALL-CAPS words and quoted words. Openers: capitalised
    sentence-initial words that are not known starters ("Sarah", not "Find"). A mostly upper-case text says
    nothing by its case. Without quotes only capitalised tokens can count, so only they are visited (each
    with the token before it); with quotes every token is (`_names_scan`)."""
    by_case = _by_case(prose)
    quotes = bool(_QUOTES.intersection(prose))
    if not by_case and not quotes:
        return set(), set()  # only quotes or case can make a name
    if quotes:
        return _names_scan(prose, by_case)
    names: set[str] = set()
    starts: Counter[str] = Counter()
    for m in _CAP_TOK.finditer(prose):
        tok = m.group()
        if not tok.isascii() and not (tok.isalpha() and tok.isupper()):
            continue  # a non-ASCII symbol or lower-case letter: one token that makes no name
        low = tok.lower()
        if len(tok) >= 2 and tok.isupper():
            names.add(low)
        elif low != "i":
            prev = _token_before(prose, m.start())
            if prev is None or prev in _SENTENCE_END:
                starts[low] += 1
            else:
                names.add(low)
    names.update(w for w, n in starts.items() if n >= 2 and w not in STARTERS)
    return names, {w for w in starts if w not in STARTERS}


def prose_words(prose: str) -> frozenset[str]:
    """The lower-cased words (>= 2 ASCII letters, not a LaTeX command) of the prose. ASCII prose is
    lower-cased first (the same words: lower-casing ASCII moves no word boundary)."""
    if prose.isascii():
        return frozenset(_PROSE_WORD.findall(prose.lower()))
    return frozenset(w.lower() for w in _PROSE_WORD.findall(prose))


def _by_case(prose: str) -> bool:
    """Case says something: the prose has letters and at most half of them are upper-case."""
    letters = (prose.translate(_ASCII_NON_LETTERS) if prose.isascii()  # C-level passes: once per candidate prompt
               else "".join(filter(str.isalpha, prose)))
    if not letters:
        return False
    upper = (len(letters) - len(letters.translate(_ASCII_UPPER)) if letters.isascii()
             else sum(map(str.isupper, letters)))
    return upper <= 0.5 * len(letters)


def _token_before(prose: str, at: int) -> str | None:
    """The `_RAW_TOK` token before position `at` as far as `_names` needs it: None at the start, the
    character of a one-character token (newline, punctuation, a non-ASCII character), "a" for a word."""
    j = at - 1
    while j >= 0 and prose[j] != "\n" and prose[j].isspace():
        j -= 1
    if j < 0:
        return None
    return "a" if prose[j].isascii() and prose[j].isalpha() else prose[j]


def _names_scan(prose: str, by_case: bool) -> tuple[set[str], set[str]]:
    """`_names` by visiting every token (quotes toggle a quoted run whose words are all names)."""
    names: set[str] = set()
    starts: Counter[str] = Counter()
    prev, quoted = None, False
    for tok in _RAW_TOK.findall(prose):
        if tok in _QUOTES:
            quoted = not quoted if tok == '"' else tok == "“"
        elif tok[0].isalpha():
            low = tok.lower()
            if quoted:
                names.add(low)
            elif by_case and len(tok) >= 2 and tok.isupper():
                names.add(low)
            elif by_case and tok[0].isupper() and low != "i":
                if prev is None or prev in _SENTENCE_END:
                    starts[low] += 1
                else:
                    names.add(low)
        prev = tok
    names.update(w for w, n in starts.items() if n >= 2 and w not in STARTERS)
    return names, {w for w in starts if w not in STARTERS}


def prompt_view(norm_prompt: str, raw: str | None = None, norm: NormConfig | None = None) -> PromptView:
    """The graded check's view of a prompt: tokens, and (from the raw text) math tokens and names."""
    return PromptView(tuple(dedup_tokens(norm_prompt)), raw, norm)


# --------------------------------------------------------------------------- classifying a change


def _kind(t: str, v: PromptView) -> str:
    if t in FORMAT_WORDS and t not in v.prose:
        return "format"
    if t in NUMBER_WORDS or any(c.isdigit() for c in t):
        return "num"
    if t in v.math or (len(t) == 1 and t not in _PROSE_LETTERS):
        return "math"
    if t in v.names:
        return "name"
    return "word"


def _change(a: list[str], b: list[str], va: PromptView, vb: PromptView, edge: bool = False,
            core: frozenset[str] = frozenset(), strict_content: bool = True,
            relations: str = "wordnet") -> tuple[str | None, int]:
    """(verdict, ordinary words changed) of one change: tokens `a` of prompt A became tokens `b` of prompt B.
    `edge`: text before / after the common problem (wrapper-like); there names and number words may change,
    math tokens only if the common problem has them, and an added text may not add an operation to ask.
    `strict_content`: a content word replaced by an unrelated content word is `content_changed`."""
    ka = idioms([(t, _kind(t, va)) for t in a])
    kb = idioms([(t, _kind(t, vb)) for t in b])
    ka, kb = [x for x in ka if x[1] != "format"], [x for x in kb if x[1] != "format"]
    if not ka and not kb:
        return None, 0
    mathy = any(k == "math" and t not in _AMBIGUOUS for t, k in ka + kb) or (
        bool(ka) and bool(kb) and all(len(t) == 1 for t, _ in ka + kb))  # "a_i" -> "a_a": letters for letters
    ka = [(t, "word" if k == "math" and t in _AMBIGUOUS and not mathy else k) for t, k in ka]
    kb = [(t, "word" if k == "math" and t in _AMBIGUOUS and not mathy else k) for t, k in kb]
    one_sided = not ka or not kb
    if not (edge and one_sided):
        # in a long edge span (a wrapper swapped for another) only digits count: "help me with this one: ..."
        wrapper = edge and max(len(ka), len(kb)) >= 4
        na = [NUMBER_WORDS.get(t, t) for t, k in ka if k == "num" and not (wrapper and t in NUMBER_WORDS)]
        nb = [NUMBER_WORDS.get(t, t) for t, k in kb if k == "num" and not (wrapper and t in NUMBER_WORDS)]
        if na != nb:  # in order: "4 * 7" -> "7 * 4" is a change
            return "number_changed", 0
    if any(k == "math" and not (edge and one_sided and t in core) for t, k in ka + kb):
        return "math_changed", 0
    if not (edge and one_sided) and (any(k == "name" for _, k in ka + kb) or (
            any(t in va.openers for t, _ in ka) and any(t in vb.openers for t, _ in kb))):
        return "name_changed", 0  # a name, or one unknown capitalised opener for another ("Sarah" -> "Marcus")
    ga = [CARRIERS[t] for t, k in ka if k == "word" and t in CARRIERS]
    gb = [CARRIERS[t] for t, k in kb if k == "word" and t in CARRIERS]
    # an operation word on one side only, the other side without content words ("Find" -> "What is the sum of");
    # against content words ("in total" -> "altogether") the content check below decides
    ops = [(t, g, kb) for t, g in zip([t for t, k in ka if k == "word" and t in CARRIERS], ga, strict=True)
           if not gb and not content_words(kb)]
    ops += [(t, g, ka) for t, g in zip([t for t, k in kb if k == "word" and t in CARRIERS], gb, strict=True)
            if not ga and not content_words(ka)]
    if edge and any(cat == "operation" and grp not in core and not said_by(t, other) for t, (cat, grp), other in ops):
        return "question_changed", 0  # "Find all x ..." -> "What is the sum of all x ...", "... Then find the sum."
    if edge and one_sided:
        added = {t for t in content_words(ka or kb) if len(t) >= 4 and t not in INSTRUCTION_WORDS}
        if added & core:  # "... each other and chocolate cannot be on the bottom?": a clause about the problem
            return "content_changed", 0
        return None, 0
    if len(ka) == 1 and len(kb) == 1 and negated(ka[0][0], kb[0][0]):
        return "question_changed", 0
    for cat in {c for c, _ in ga + gb}:
        sa = {g for c, g in ga if c == cat}
        sb = {g for c, g in gb if c == cat}
        if (sa and sb and sa != sb) or ((not sa or not sb) and cat in STRICT_CATEGORIES):
            return "question_changed", 0
        if cat == "negation" and sum(c == cat for c, _ in ga) != sum(c == cat for c, _ in gb):
            return "question_changed", 0
    if ka and kb and _swapped(kb, va) and _swapped(ka, vb):
        return "question_changed", 0  # "how many girls" -> "how many boys" when the problem has both
    if strict_content and ka and kb and (not edge or max(len(ka), len(kb)) <= 2) and content_replaced(*_drop_instructions(ka, kb, edge), relations):
        return "content_changed", 0  # "numerator" -> "denominator", "real part" -> "magnitude"
    words = max(sum(k == "word" for _, k in ka), sum(k == "word" for _, k in kb))
    return None, 0 if edge else words


def _drop_instructions(ka: list[tuple[str, str]], kb: list[tuple[str, str]], edge: bool):
    """At the edges, instruction nouns ("Task: Determine ..." for "Find ...") are wrapper text, not content."""
    if not edge:
        return ka, kb
    return [x for x in ka if x[0] not in INSTRUCTION_WORDS], [x for x in kb if x[0] not in INSTRUCTION_WORDS]


def _swapped(side: list[tuple[str, str]], other: PromptView) -> bool:
    """A content word (>= 4 letters) of one side of a change that the other prompt uses too. When both sides
    pass, the words were swapped for ones the problem already talks about (how many girls -> how many boys,
    with girls and boys in both prompts), not for synonyms."""
    return any(k == "word" and len(t) >= 4 and t not in STARTERS and t in other.tokens for t, k in side)


def _shingles(toks: list[str] | tuple[str, ...], n: int) -> set[tuple[str, ...]]:
    return {tuple(toks[i:i + n]) for i in range(max(1, len(toks) - n + 1))}


def jaccard_ok(ta, tb, cfg: DedupConfig) -> bool:
    if cfg.threshold <= 0:
        return True
    sa, sb = _shingles(ta, cfg.ngram), _shingles(tb, cfg.ngram)
    return len(sa & sb) >= cfg.threshold * len(sa | sb)


def graded_verdict(va: PromptView, vb: PromptView, cfg: DedupConfig, edges: bool = True) -> str | None:
    """None when the two prompts are the same problem, else the reason they are not (module docstring).
    `edges=False`: text before / after the common problem is judged like interior text (a code statement
    whose wrappers curate/dedup/pairs/sections.py already cut: a trailing "You must write an algorithm that runs in
    logarithmic time." there is part of the problem, not an instruction wrapper)."""
    if va.commands != vb.commands:
        return "math_changed"
    ta, tb = list(va.tokens), list(vb.tokens)
    contained = _containment(ta, tb) if edges else None
    if contained is not None:  # fast path: one prompt is the other with text added before / after it
        lead, trail, longer = contained
        core = frozenset(tb if longer == "a" else ta)
        va_, vb_ = (va, vb) if longer == "a" else (vb, va)
        for extra in (lead, trail):
            if extra:
                why, _ = _change(extra, [], va_, vb_, edge=True, core=core)
                if why:
                    return why
        return None
    ops = SequenceMatcher(None, ta, tb, autojunk=False).get_opcodes()
    anchor = min(ANCHOR, len(ta), len(tb))
    anchors = [k for k, op in enumerate(ops) if op[0] == "equal" and op[2] - op[1] >= anchor]
    if not anchors:
        return "below_threshold"
    first, last = anchors[0], anchors[-1]
    core = frozenset(t for op in ops[first:last + 1] if op[0] == "equal" for t in ta[op[1]:op[2]])
    core_len = sum(op[2] - op[1] for op in ops[first:last + 1] if op[0] == "equal")
    reworded = 0
    for k, (tag, i1, i2, j1, j2) in enumerate(ops):
        if tag == "equal":
            continue
        # before the first / after the last anchor; added or dropped text is lenient (a wrapper) only as the
        # very first or last change: "... find $b$." -> "... find $a b$." inserts inside the ending
        edge = edges and not first <= k <= last and (k in (0, len(ops) - 1) or tag == "replace")
        why, n = _change(ta[i1:i2], tb[j1:j2], va, vb, edge=edge, core=core,
                         strict_content=not cfg.reword_content, relations=cfg.word_relations)
        if why:
            return why
        # a short replaced span at an edge is a reworded opening / closing ("Find" -> "Compute"): it counts
        reworded += n if not edge else (min(i2 - i1, j2 - j1) if 0 < min(i2 - i1, j2 - j1) <= 2 else 0)
    if reworded > max(MIN_REWORDED, cfg.max_reworded * core_len):
        return "reworded_too_much"
    if not jaccard_ok(ta[ops[first][1]:ops[last][2]], tb[ops[first][3]:ops[last][4]], cfg):
        return "below_threshold"
    return None


def _containment(ta: list[str], tb: list[str]) -> tuple[list[str], list[str], str] | None:
    """(text before, text after, "a" or "b": the longer prompt) when the shorter token list occurs in the
    longer one as a contiguous run; else None."""
    short, long_, which = (ta, tb, "b") if len(ta) <= len(tb) else (tb, ta, "a")
    if not short:
        return None
    s, lo = " ".join(short), " ".join(long_)
    at = f" {lo} ".find(f" {s} ")
    if at < 0:
        return None
    k = lo[:at].count(" ")
    return long_[:k], long_[k + len(short):], which


__all__ = ["PromptView", "dedup_tokens", "graded_verdict", "jaccard_ok", "plain_norm", "prompt_view"]
