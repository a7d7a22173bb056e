"""The graded pair check (curate/dedup/pairs/text.py): rewordings merge, changed problems stay apart."""

from __future__ import annotations

import pytest

from cotforge.curate.dedup.config import DedupConfig
from cotforge.curate.dedup.pairs.text import dedup_tokens, prompt_view
from cotforge.curate.dedup.pairs.verdict import candidate_verdict
from cotforge.curate.dedup.stage import PairJudge
from cotforge.curate.text.normalize import normalize

GSM = ("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
       "How many clips did Natalia sell altogether in April and May?")
DIV = "{} the sum of all the positive integer divisors of 360, including 1 and 360 itself."
TEPEE = "Determine the number of ways to arrange the letters of the word TEPEE in a row."


@pytest.mark.parametrize("b", [
    GSM.replace("friends", "pals"),  # noun synonym (WordNet: pal < friend)
    GSM.replace("friends", "acquaintances"),  # noun synonym (one WordNet synset)
    GSM.replace("altogether", "in all"),  # quantifier, one word -> two
    GSM.replace("sold clips", "vended clips"),  # verb synonym
    "Can you work out the following?\n" + GSM,  # unseen wrapper before
    GSM + " Double-check before answering.",  # unseen wrapper after
    "A student asks: " + GSM.replace("friends", "pals").lower() + "  Be concise.",  # combination
    GSM.replace(", and then", ". Then").replace("May.", "May"),  # punctuation
])
def test_graded_check_merges_rewordings(b):
    assert PairJudge(DedupConfig()).verdict(GSM, b) is None


@pytest.mark.parametrize(("b", "why"), [
    (GSM.replace("Natalia", "Sofia"), "name_changed"),
    (GSM.replace("half as many", "twice as many"), "number_changed"),
    (GSM.replace("sold half", "bought half"), "question_changed"),
    (GSM.replace("April", "June"), "name_changed"),
    (GSM + " Then find the sum of the digits of the result.", "question_changed"),
    (TEPEE, "name_changed"),
    (GSM.replace("How many clips did", "How many friends did"), "question_changed"),  # friends: in both prompts  # a different problem altogether: caught before any rewording budget
])
def test_graded_check_keeps_changed_problems_apart(b, why):
    a = GSM if b != TEPEE else TEPEE.replace("TEPEE", "PROOF")
    assert candidate_verdict(normalize(a), normalize(b), DedupConfig(), a, b) == why


SHAPES = "In the figure, the {} of the triangle $ABC$ with $AB = 13$, $BC = 14$ and $CA = 15$ is drawn. Find its length."


@pytest.mark.parametrize(("x", "y", "want"), [
    ("median", "altitude", "content_changed"),  # a content noun for an unrelated one: a different problem
    ("numerator", "denominator", "content_changed"),
    ("perpendicular bisector", "angle bisector", "content_changed"),
    ("median", "medians", None),  # inflection
    ("picture", "diagram", None),  # REWORD_SYNONYMS
])
def test_content_words_change_the_problem_unless_synonyms(x, y, want):
    a, b = SHAPES.format(x), SHAPES.format(y)
    assert candidate_verdict(normalize(a), normalize(b), DedupConfig(), a, b) == want
    # the first round's rule (content words reword freely) is still available, and merges the look-alike
    assert candidate_verdict(normalize(a), normalize(b), DedupConfig(reword_content=True), a, b) is None


def test_real_look_alikes_and_wordnet_synonyms():
    judge = PairJudge()
    z = "Let $z = 3 + 4i$ be a complex number. Compute the {} of $z$ and give the answer as a decimal number."
    assert judge.verdict(z.format("real part"), z.format("magnitude")) == "content_changed"
    tree = "Given the root of a binary tree, return the {} traversal of its nodes' values as a list of integers."
    assert judge.verdict(tree.format("preorder"), tree.format("inorder")) == "content_changed"
    walk = "A robot starts at the origin and moves 3 steps to the {} and then 4 steps up. How far is it from the start?"
    assert judge.verdict(walk.format("left"), walk.format("right")) == "content_changed"  # "left" here is no \left
    shop = "Maria {} 12 pencils at the {} near her school and gives 5 of them away. How many pencils does she keep?"
    assert judge.verdict(shop.format("buys", "store"), shop.format("purchases", "shop")) is None


def test_dropped_clauses_and_qualifiers_change_the_problem():
    judge = PairJudge()
    cone = ("Robin bought a four-scoop ice cream cone having a scoop each of vanilla, chocolate, strawberry and "
            "cherry. In how many orders can the four scoops be stacked on the cone if they are stacked one on top "
            "of the other")
    assert judge.verdict(cone + "?", cone + " and chocolate cannot be on the bottom?") == "content_changed"
    assert judge.verdict(cone + "?", cone + "? Show all of your steps.") is None  # a wrapper after it
    coin = "A fair coin is flipped $7$ times. What is the probability that at least $5$ {} flips come up heads?"
    assert judge.verdict(coin.format("consecutive"), coin.format("of the")) == "content_changed"


def test_typos_merge_but_near_spellings_of_other_words_do_not():
    judge = PairJudge()
    seq = "The last term of the sequence is the first negative term {}. What positive integer $x$ gives the most terms?"
    assert judge.verdict(seq.format("encountered"), seq.format("encounted")) is None  # a typo
    poly = "Find the least positive integer $b$ for which $x^2+bx+2008$ factors into a product of two {} here."
    assert judge.verdict(poly.format("polynomials"), poly.format("binomials")) == "content_changed"  # both words


def test_latex_operators_dropped_by_normalisation_still_count():
    judge = PairJudge()
    a, b = "Find $1+2\\cdot3-4+5.$", "Express the value of the following expression as a fraction. $$1+\\cfrac{2}{3+\\cfrac{4}{5}}$$"
    assert judge.verdict(a, b) == "math_changed"  # both normalise to "... 1 2 3 4 5"
    c = "Find the least positive integer such that deleting its leftmost digit leaves {} of the original integer."
    assert judge.verdict(c.format("1/29"), c.format("$\\frac{1}{29}$")) is None  # \\frac is layout


def test_reword_content_must_be_a_bool():
    with pytest.raises(ValueError, match="reword_content"):
        DedupConfig(reword_content="yes")


def test_synonym_table_lookups():
    from cotforge.curate.dedup.pairs.synonyms import lemmas, synonyms

    assert synonyms("bought", "purchased") and synonyms("tiny", "small") and synonyms("store", "shop")
    assert not synonyms("numerator", "denominator") and not synonyms("height", "width")
    assert "mouse" in lemmas("mice") and "buy" in lemmas("bought")


def test_moved_words_and_numbers():
    judge = PairJudge(DedupConfig())
    balls = "How many ways are there to put 5 balls in 3 boxes if the balls are {} but the boxes are {}?"
    assert judge.verdict(balls.format("distinguishable", "not"), balls.format("not distinguishable", "")) \
        == "question_changed"
    cube = "What is the smallest positive integer $n$ such that ${}n$ is a perfect square and ${}n$ is a perfect cube?"
    assert judge.verdict(cube.format(3, 2), cube.format(2, 3)) == "number_changed"
    lit = "How many ways are there to put 4 balls in 2 boxes if the balls are {} and the boxes are too?"
    assert judge.verdict(lit.format("distinguishable"), lit.format("indistinguishable")) == "question_changed"


def test_question_words_and_openers():
    judge, cfg = PairJudge(DedupConfig()), DedupConfig()
    assert judge.is_duplicate(DIV.format("Find"), DIV.format("Compute"))
    assert judge.is_duplicate(DIV.format("What is"), DIV.format("Determine"))
    assert judge.verdict(DIV.format("Find"), DIV.format("Find").replace("360", "240")) == "number_guard"
    roots = "the product of the nonreal roots of $x^4-4x^3+6x^2-4x=2005.$"
    assert not judge.is_duplicate(f"Find {roots}", f"Let $P$ be {roots} Find $\\lfloor P\\rfloor.$")
    for a, b, want in (("sum", "product", "question_changed"), ("positive", "negative", "question_changed"),
                       ("sum", "total", None)):
        got = candidate_verdict(normalize(DIV.format("Find")), normalize(DIV.format("Find").replace(a, b)), cfg)
        assert got == want, (a, b)
    odd = "How many of the first 50 positive integers are {} and also leave a remainder of 2 on division by 7?"
    assert judge.verdict(odd.format("even"), odd.format("odd")) == "question_changed"
    big = "What is the {} prime factor of 1001, the product of three primes that the problem mentions here?"
    assert judge.verdict(big.format("largest"), big.format("smallest")) == "question_changed"
    assert judge.verdict(big.format("largest"), big.format("greatest")) is None


def test_tokens_views_and_ambiguous_letters():
    assert dedup_tokens("they don t know non negative") == ["they", "do", "not", "know", "nonnegative"]
    v = prompt_view(normalize(GSM), GSM)
    assert {"natalia", "april", "may"} <= v.names and "how" not in v.names
    m = prompt_view("x", "Let $a+b=c$. Then \\sqrt{a} is fine, and he paid $5 for apples and $6 for pears")
    assert {"a", "b", "c", "sqrt"} <= m.math and "apples" not in m.math
    t = "Let $a$ and $b$ be positive reals with a sum of 10. Find the maximum of $ab$ here, please, for me."
    judge = PairJudge()
    assert judge.verdict(t, t.replace("with a sum", "with the sum")) is None  # "a" the article
    assert judge.verdict(t, t.replace("maximum of $ab$", "maximum of $bb$")) == "math_changed"
    assert judge.verdict(t, t.replace("Let $a$ and $b$", "Let $a$ and $c$")) == "math_changed"


def test_math_and_prose_shortcut_equals_the_scan_on_real_and_marked_prompts() -> None:
    import gzip
    import json
    import os
    from pathlib import Path

    from cotforge.curate.dedup.pairs.text import _math_and_prose, _math_and_prose_scan
    from cotforge.curate.text.normalize import NormConfig

    prompts = ["Ava has 3 apples. How many?", "", "Costs $5 and $6 for pears", "Let \\(x\\) be 2", "a [asy]draw;[/asy] b",
               "Use \\cdot here", "Plain [brackets] and \\ alone", "Price: 5$", "ÅNGSTRÖM “Quoted” Words"]
    shared = Path(os.environ.get("COTFORGE_SHARED_DATA", "/nonexistent")) / "sft_sources"
    for f in sorted(shared.glob("*.jsonl.gz"))[:4]:
        with gzip.open(f, "rt") as fh:
            for _, line in zip(range(300), fh, strict=False):
                row = json.loads(line)
                prompts += [str(v) for k, v in row.items() if k in ("prompt", "problem", "question") and v]
    norm = NormConfig()
    plain = 0
    for p in prompts:
        assert _math_and_prose(p, norm) == _math_and_prose_scan(p, norm), p[:80]
        plain += "$" not in p and "\\" not in p and "[asy]" not in p
    assert plain >= 3 and len(prompts) - plain >= 4  # both paths taken


def _names_as_first_written(prose: str) -> tuple[set[str], set[str]]:
    """`_names` as it was first written: case decided by counting every letter, then every token visited."""
    from cotforge.curate.dedup.pairs.text import _QUOTES, _names_scan

    letters = "".join(filter(str.isalpha, prose))
    by_case = bool(letters) and sum(map(str.isupper, letters)) <= 0.5 * len(letters)
    if not by_case and not _QUOTES.intersection(prose):
        return set(), set()
    return _names_scan(prose, by_case)


def test_names_from_capitalised_tokens_equal_the_token_scan_on_fuzzed_and_real_prose() -> None:
    import gzip
    import json
    import os
    import random
    import re
    from pathlib import Path

    from cotforge.curate.dedup.pairs.text import _names, prose_words

    rng = random.Random(7)
    pieces = ["Ava", "ava", "AVA", "I", "i", "Find", "Sarah", "McDonald", "mcDonald", "x", "X", "É", "ë", "İ", "ß",
              "Σ", "σ", "Zoë", "NASA's", "3", " ", "  ", "\n", "\u00a0", "\u2003", "\x1c", ".", "?", "!", ":", ";",
              ",", "'", "-", '"', "“", "”", "$", "\\", "(", "Ünal", "ÉCOLE"]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 30))) for _ in range(4000)]
    texts = [t for t in texts if '"' not in t or rng.random() < 0.2]  # most without quotes: the fast path
    shared = Path(os.environ.get("COTFORGE_SHARED_DATA", "/nonexistent")) / "sft_sources"
    for f in sorted(shared.glob("*.jsonl.gz"))[:6]:
        with gzip.open(f, "rt") as fh:
            texts += [json.loads(line).get("problem") or "" for _, line in zip(range(300), fh, strict=False)]
    ascii_pieces = [p for p in pieces if p.isascii()]
    texts += ["".join(rng.choice(ascii_pieces) for _ in range(rng.randint(0, 30))) for _ in range(2000)]
    fast = 0
    for t in texts:
        assert _names(t) == _names_as_first_written(t), repr(t[:120])
        assert prose_words(t) == frozenset(w.lower() for w in re.findall(r"(?<!\\)\b[A-Za-z]{2,}\b", t)), repr(t[:120])
        fast += not any(q in t for q in '"“”')
    assert fast > 1000


def test_dedup_tokens_shortcut_equals_the_rules_applied_token_by_token() -> None:
    import random

    from cotforge.curate.dedup.pairs.lexicon import PRONOUN_ONE
    from cotforge.curate.dedup.pairs.text import _rewrite_tokens

    rng = random.Random(3)
    words = ["one", "t", "non", "negative", "every", "no", "each", "don", "can", "won", "box", "3", "", "x", "nonzero"]
    for _ in range(3000):
        norm = " ".join(rng.choice(words) for _ in range(rng.randint(0, 12)))
        assert dedup_tokens(norm) == _rewrite_tokens(norm.split(" ") if norm else []), norm
    assert dedup_tokens("don t count every one non negative") == ["do", "not", "count", "every", PRONOUN_ONE,
                                                                  "nonnegative"]
    assert dedup_tokens("a b c") == ["a", "b", "c"] and dedup_tokens("") == []
