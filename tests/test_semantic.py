"""The semantic tier: the local embedding model, the numbers- and question-aware pair check, and the tier in
decontamination and dedup from the CLI (a tiny BERT encoder built from a config; one test with the real wheel)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from cotforge.curate.dedup.pairs.semantic import (
    PairThresholds,
    alternatives_swapped,
    asks_other_quantity,
    carriers_differ,
    formula_added,
    math_changed,
    math_of,
    number_verdict,
    numbers_of,
    order_kept,
    pair_verdict,
    question_of,
)
from cotforge.curate.text.embed import Embedder, EmbedModelError, build_tiny_encoder, resolve_model_dir
from cotforge.pipelines.cli.main import main

ITEM = ("Janet has 3 apples and buys 5 more at the market. Each apple costs $2. "
        "How many dollars did she spend?")
REPHRASED = ("At the market, Janet, who already owns three apples, purchases five more. Every apple is priced at "
             "2 dollars. What amount of money, in dollars, did she pay?")
NUMBER_CHANGED = ("Janet has 3 apples and buys 7 more at the market. Each apple costs $2. "
                  "How many dollars did she spend?")
QUESTION_CHANGED = ("Janet has 3 apples and buys 5 more at the market. Each apple costs $2. "
                    "How many apples did she have at the market?")
DEDUP_REPHRASED = ("Janet owns 3 apples and purchases 5 more at the market. Every apple is priced at $2. "
                   "What amount of money did she pay, in dollars?")
CLEAN = "A train travels 60 miles in 1.5 hours. What is its average speed in miles per hour?"


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory) -> Path:
    return build_tiny_encoder(tmp_path_factory.mktemp("enc"), corpus=[ITEM, REPHRASED, CLEAN] * 5)


def test_numbers_words_and_digits():
    assert numbers_of("three apples, $1,200 and 20% of 2.50") == numbers_of("3 apples, 1200 dollars, 20 percent of 2.5")
    ok, shared = number_verdict(ITEM, REPHRASED, 0)
    assert ok and shared == ["2", "3", "5"]
    assert not number_verdict(ITEM, NUMBER_CHANGED, 0)[0]
    assert number_verdict("It takes 1 hour.", "It takes one hour.", 0)[0]  # "one" may stand for a digit 1
    assert not number_verdict("It takes 2 hours.", "It takes one hour.", 0)[0]
    # symmetric (dedup): one text may not hold a number the other lacks
    assert not number_verdict("Add 2 and 3.", "Add 2 and 3 and 4.", 0, symmetric=True)[0]


def test_numbers_said_in_words():
    """Fractions, multipliers, compounds and scales said in words are the values their digits would be; an
    ordinal is its value ("the third day" = "the 3rd day"); "one" and "per second" are no values."""
    pairs = [("Thirty-three people", "33 people"), ("one third of the calories", "1/3rd of the calories"),
             ("three quarters of them and one quarter", "3/4 of them and 1/4"), ("four fifths", "4/5"),
             ("twice as long", "2 times as long"), ("double the time", "two times the time"),
             ("on the third day", "on the 3rd day"), ("a dozen eggs", "12 eggs"), ("5 thousand", "5,000"),
             ("half as long", "1/2 as long"), ("the second day", "day 2"), ("one hundred twenty", "120"),
             ("two thousand five hundred", "2,500"), ("three hundred and twenty-five", "325")]
    for words, digits in pairs:
        assert numbers_of(words) == numbers_of(digits), (words, digits)
    assert not numbers_of("one of them waits a second per second")
    assert numbers_of("two hundred") == numbers_of("200") != numbers_of("two and a hundred")


def test_lenient_numbers_and_the_numbers_rules():
    """The lenient reading (decontamination's `rules="numbers"`): a 2 said as "squared", one small count spelled
    out by a rewording pass; a replaced value never does, nor a digit added ("9/2" vs "7/9"), nor a 2 excused by
    "square root". Below `number_cosine` a pair must share `number_count` values."""
    item = "Find the distance between the foci of the hyperbola $y^2 - x^2 = 18$ through $(4, 7)$."
    reworded = "How far apart are the two foci of the hyperbola y squared minus x squared equals 18 through (4, 7)?"
    assert not number_verdict(item, reworded, 0)[0]
    assert number_verdict(item, reworded, 0, lenient=True)[0]
    assert not number_verdict(item, reworded.replace("18", "19"), 0, lenient=True)[0]
    assert not number_verdict("What is $\\frac{9}{2}$ as a decimal?", "What is $\\frac{7}{9}$ rounded to 2 places?",
                              0, lenient=True)[0]
    senate = "A committee has 5 Democrats, 5 Republicans and 1 Independent. Two seatings are equal if one is a rotation."
    assert not number_verdict(senate, senate.replace(" and 1 Independent", ""), 0, lenient=True)[0]  # a pronoun
    assert number_verdict("It takes 1 hour.", "It takes one hour.", 0, lenient=True)[0]
    root = "The square root of $t$ is greater than $2$ and less than $3.5$."
    assert not number_verdict(root, root.replace("$2$", "$5$"), 0, lenient=True)[0]
    th = PairThresholds(0.80, 0.75, 0, rules="numbers", number_cosine=0.88, number_count=3)
    assert pair_verdict(ITEM, QUESTION_CHANGED, 0.9, 0.2, th) is None  # another question: still the item
    assert pair_verdict(ITEM, NUMBER_CHANGED, 0.99, 1.0, th) == "number_changed"
    assert pair_verdict(ITEM, REPHRASED, 0.85, None, th) is None  # three values shared
    two = "Three plus the reciprocal of a number equals 7 divided by that number. What is the number?"
    assert pair_verdict(two, "One more than the reciprocal of a number is 7/3. What is it?", 0.85, None, th) == \
        "few_numbers"
    assert pair_verdict(two, two, 0.95, None, th) is None
    assert pair_verdict("Evaluate $f(2)$ for $f(x) = 5x^2 + 3$.", "Evaluate $g(2)$ for $g(x) = 5x^2 + 3$.", 0.95,
                        None, th) == "math_changed"


def test_an_edited_copy_is_told_from_a_rewording():
    """Dedup: a look-alike made by one edit that keeps every number and the question ("3 fewer" -> "3 more", a
    clause added, "$5 each" -> "$5 altogether", "both parents" -> "one parent") is an edited copy whose graded
    verdict stands; a synonym swap, a framing line or a moved sentence is not."""
    from cotforge.curate.dedup.semantic import edited_meaning

    base = ("On a quiz, Nicole answered 3 fewer questions correctly than Kim, and Kim answered 8 more questions "
            "correctly than Cherry. If Nicole answered 22 correctly, how many did Cherry answer correctly?")
    assert edited_meaning(base, base.replace("3 fewer", "3 more"))
    tony = "Tony has two fish. Every year, his parents buy him two more. How many fish will he have in five years?"
    assert edited_meaning(tony, tony.replace("two more.", "two more, but one of them dies."))
    pizza = "You get the next 3 medium pizzas for $5 each. What are your total savings?"
    assert edited_meaning(pizza, pizza.replace("$5 each", "$5 altogether"))
    play = "There are 6 girls and 8 boys. If both parents of each kid attend, how many parents attend?"
    assert edited_meaning(play, play.replace("both parents", "one parent"))
    assert not edited_meaning(base, base.replace("answered", "got").replace("quiz", "test"))  # synonyms
    assert not edited_meaning(tony, tony + " Please work it out.")  # a framing line
    assert not edited_meaning(tony, "How many fish will he have in five years? Tony has two fish. Every year, "
                                    "his parents buy him two more.")  # the question put first
    assert not edited_meaning(base, "Cherry got some answers right. " + base.replace("On a quiz", "In a test")
                              .replace("answered", "got").replace("correctly", "right"))  # many changes: reworded


def test_question_checks():
    assert question_of(ITEM) == "How many dollars did she spend?"
    assert question_of("Let $x = 2$. Find $x^2$. It is small.") == "Find $x^2$."  # no "?": the last instruction
    assert question_of("Is it 10? No. Compute the product.") == "Is it 10?"  # a "?" sentence comes first
    area = "What is the area of the region defined by\n$|x| + |y| \\le 1$?"
    assert question_of(area).startswith("What is the area")  # display math on its own line ends no sentence
    assert carriers_differ(question_of(area), question_of(area.replace("area", "perimeter")))
    assert carriers_differ("What is the sum of the roots?", "What is the product of the roots?")
    assert carriers_differ("Which is largest?", "Which is smallest?")
    assert carriers_differ("How many are divisible by 3?", "How many are not divisible by 3?")
    assert not carriers_differ("How many in total?", "How many altogether?")
    assert asks_other_quantity(ITEM, question_of(ITEM), QUESTION_CHANGED, question_of(QUESTION_CHANGED))
    assert not asks_other_quantity(ITEM, question_of(ITEM), REPHRASED, question_of(REPHRASED))


def test_decontamination_formulas_one_way():
    """Decontamination's formula check (item -> row): a rewording may write a formula out in words, drop brackets,
    an environment or an "=", and name a variable more or less often; a look-alike that drops a variable or a
    command the row's words do not say, or adds a token, is a change."""
    item = r"Let $\triangle ABC$ have $\overline{IA}\perp\overline{OI}$, circumradius $13$. Find $AB\cdot AC$."
    assert not formula_added(item, r"In triangle $ABC$ segment $\overline{IA}$ is perpendicular to segment "
                                   r"$\overline{OI}$ and the circumradius is $13$. Compute the product $AB\cdot AC$.")
    pairs = r"How many ordered pairs $(a,b)$ satisfy the equation \[(1+2a)(2+2b)(2a+b) = 32ab?\]"
    assert not formula_added(pairs, r"Count the pairs $(a,b)$, with $a$ and $b$ positive, for which the product of "
                                    r"$1+2a$, $2+2b$ and $2a+b$ is $32ab$.")
    triples = "Triples with \\begin{equation*}\na^2b + b^2a = 6\n\\end{equation*}"
    assert not formula_added(triples, "Triples where a squared times b plus b squared times a add up to 6.")
    assert not formula_added("What is the sum of the digits of $x?$", "Find the sum of the digits of $x$.")
    odd = r"Let $f(x)$ be odd and $g(x)$ even. Is $f(f(g(f(x))))$ even, odd, or neither?"
    assert formula_added(odd, r"Let $f(x)$ be odd. Is $f(f(f(x)))$ even, odd, or neither?")
    assert formula_added(r"Let $xyz(x + y + z) = 1.$ Find the minimum of \[(x + y)(y + z).\]",
                         r"Let $x + y + z = 1.$ Find the minimum of \[\frac{x + y}{xyz}.\]")
    assert formula_added("Find the maximum of $x - y$.", "Find the maximum of $x + y$.")
    assert formula_added(r"Find $\sqrt{x}$ when $x = 4$.", r"Find $x$ when $x = 4$.")
    assert not formula_added(r"Find $\sqrt{x}$ when $x = 4$.", r"Find the square root of $x$ when $x = 4$.")


def test_ordinals_read_as_ordinals():
    """"its second go" is the second (2); "a third with 8 sandwiches" is an ordinal, not one third, so its 1 is
    not required of a rewording that says "the third"; "a third of the cake" stays a fraction."""
    assert numbers_of("on its second go") == numbers_of("on the 2nd go")
    item = "the second with 4 sandwiches for $6, and a third with 8 sandwiches"
    assert number_verdict(item, "the second has 4 sandwiches for $6, and the third has 8 sandwiches", 0,
                          lenient=True)[0]
    assert not number_verdict("She ate a third of the 9 cakes.", "She ate the third of the 9 cakes.", 0,
                              lenient=True)[0]


def test_math_regions_must_match():
    th = PairThresholds()
    odd = 'Let $f(x)$ be an odd function. Is $f(f(x))$ even, odd, or neither?'
    assert pair_verdict(odd, 'Suppose $f(x)$ is an odd function. Then is $f(f(x))$ even or odd, or neither?', 0.95, 0.9,
                        th) is None
    assert pair_verdict(odd, odd.replace("f(f(x))", "f(f(f(x)))"), 0.95, 0.9, th) == "math_changed"
    assert pair_verdict("Compute $\\arcsin(-\\frac{1}{2}).$", "Compute $\\arcsin \\frac{1}{\\sqrt{2}}$.", 0.93, 0.93,
                        th) == "math_changed"  # the same numbers 1 and 2, another expression
    # "$" as currency: the prose between two of them is no formula
    assert math_of("Eggs cost $2 each and she sells the rest for $3 a dozen.") == math_of("Eggs cost 2 dollars each.")


def test_currency_signs_are_no_formulas():
    """GSM8K-style prices: each "$" opens no formula when the span to the next "$" is prose, so a rewording that
    writes "12 dollars" keeps the (empty) math of the item."""
    item = ("Isabelle spent $12 on ingredients for the cake, $43 on presents, $15 on decorations, $4 on invitations "
            "and $22 on goodie bags. She split the cost evenly three ways. How many dollars did each person pay?")
    row = ("Isabelle paid out 12 dollars on ingredients for the cake, 43 dollars on presents, 15 dollars on "
           "decorations, 4 dollars on invitations and 22 dollars on goodie bags. She split the cost evenly three "
           "ways. How many dollars did every person pay?")
    assert math_of(item) == math_of(row) == {}
    assert pair_verdict(item, row, 0.95, 0.95, PairThresholds()) is None
    assert math_of(r"They sell $54$ cookies at $\$1$ each.") == {}  # numbers only (an escaped \$ is a price)


def test_formulas_restated_in_words():
    """A token one text has in its formulas is explained by the other's words ("by", a bare variable); digits are
    the number rule's, so "$2$" and "2" agree. A changed formula with the same numbers is still a change."""
    th = PairThresholds()
    grid = r"Consider the paths of length $16$ on an $8\times 8$ grid. Find the number of such paths."
    assert pair_verdict(grid, "Consider the paths of length 16 on an 8 by 8 grid. Compute the count of such paths.",
                        0.95, 0.95, th) is None
    sq = "The square root of $t$ is greater than $2$ and less than $3.5$. How many integer values of $t$ work?"
    assert pair_verdict(sq, "The square root of t is greater than 2 and less than 3.5. How many integer values of t "
                            "work?", 0.95, 0.95, th) is None
    assert pair_verdict(grid, grid.replace(r"8\times 8", "8+8"), 0.95, 0.95, th) == "math_changed"
    cyl = r"In cylindrical coordinates $(r,\theta,z),$ find the shape described by $z = c.$"
    sph = r"In spherical coordinates $(\rho,\theta,\phi),$ find the shape described by $\phi = c.$"
    assert pair_verdict(cyl, sph, 0.95, 0.95, th) == "math_changed"
    assert math_changed(r"Let $x y z (x + y + z) = 1$. Find $x$.", r"Let $x + y + z = 1$. Find $x$.")
    assert math_changed(r"In $\triangle ABC$, find $\angle YZX$.", r"In $\triangle ABC$, find $\angle AYX$.")
    assert math_of("Let $abc = 1$.") == {"a": 1, "b": 1, "c": 1, "=": 1}  # letters in a row are no prose


def test_order_kept_for_overruling_dedup():
    """Dedup overrules its sentence-aligned checks only when sentences moved whole: swapped numbers, swapped
    formulas or a moved negation are other problems."""
    assert not order_kept("If $x - y = 12$ and $x + y = 6$, what is $y$?", "If $x - y = 6$ and $x + y = 12$, what is $y$?")
    assert not order_kept("Is $2n$ a square and $3n$ a cube?", "Is $3n$ a square and $2n$ a cube?")
    assert not order_kept("The balls are not red but the boxes are.", "The balls are red but the boxes are not.")
    assert order_kept("Tom has 3 cats. He buys 5 dogs. How many pets?", "How many pets? He buys 5 dogs. Tom has 3 cats.")


def test_question_survives_moved_sentences():
    """Sentences cut after a closing bracket; a word that only moved into the question sentence, and a carrier
    dropped for a word outside the lexicon, change no question; a swapped carrier still does."""
    item = ("How many zeroes are at the end of $42!$? (Reminder: the number $n!$ is the product of the integers "
            "from 1 to $n$. For example, $5!=120$.)")
    row = ("(Reminder: the number $n!$ is the product of the integers from 1 to $n$. For example, $5!=120$.) "
           "How many zeroes are at the end of $42!$?")
    assert question_of(row) == question_of(item) == "How many zeroes are at the end of $42!$?"
    a = ("Flora jumps on the number line. What is the probability that Flora lands at 10? Write the answer as a "
         "simplified fraction $\\frac{m}{n}$, find $m+n$")
    b = ("Flora jumps on the number line. Write the answer as a simplified fraction $\\frac{m}{n}$, compute $m+n$ "
         "Find the probability that Flora lands at 10?")
    assert not asks_other_quantity(a, question_of(a), b, question_of(b))
    assert not carriers_differ("If Zaid earns 6000 dollars a month, how much will he have after it all?",
                               "Given that Zaid makes 6000 dollars a month, how much will he own after it all?")
    assert carriers_differ("What is the sum of the roots?", "What is the product of the roots?")


def test_changes_outside_the_question_sentence():
    """A negation, sign or parity word added anywhere (not only in the question), and a question that names a
    thing of the story once more, are other problems; a factorial "!" ends no sentence."""
    th = PairThresholds()
    trap = ("Its radius is $\\frac{-k+m\\sqrt{n}}p,$ where $k, m, n,$ and $p$ are positive integers. Find "
            "$k+m+n+p.$")
    assert pair_verdict(trap, trap.replace("are positive", "are not positive"), 0.98, 0.99, th) == "question_changed"
    assert pair_verdict(trap, trap.replace("positive integers", "positive whole numbers"), 0.97, 0.99, th) is None
    assert question_of("If $x$ is a positive integer, what is $x$ for $(x!-(x-3)!) \\div 23 = 1$?").startswith("If")
    ralph = ("Ralph loads the machine with 175 tennis balls. He hits 2/5 of the first 100 balls and 1/3 of the "
             "next 75 tennis balls. Out of all the tennis balls, how many did Ralph not hit?")
    assert pair_verdict(ralph, ralph.replace("how many did", "how many tennis"), 0.99, 0.99, th) == "question_changed"
    assert pair_verdict("Sam can't swim 3 laps. How many laps can he swim?",
                        "Sam cannot swim 3 laps. How many laps is he able to swim?", 0.95, 0.95, th) is None


def test_technical_word_dropped():
    """The value given to another quantity (the same numbers and question) is another problem; a technical word
    said by a synonym is not dropped."""
    th = PairThresholds()
    alt = "In an isosceles right triangle, the altitude to the hypotenuse has length $4\\sqrt{2}$. What is its area?"
    hyp = "The hypotenuse of an isosceles right triangle is $4\\sqrt{2}$ units. What is its area?"
    assert pair_verdict(alt, hyp, 0.9, 0.95, th) == "term_changed"
    assert pair_verdict("How many positive integers below 50 are odd?",
                        "How many positive whole numbers below 50 are odd?", 0.95, 0.95, th) is None



def test_an_alternative_swapped_anywhere_is_another_problem(tiny_encoder):
    """Look-alikes the tier merged on real problems (largest vs smallest with the question sentence unchanged,
    LeetCode's inorder/postorder vs preorder/inorder, up vs down quarks): one text uses an alternative where the
    other uses another of the same kind. The semantic check says `term_changed`, and in dedup it also vetoes a
    merge the graded check would make; a synonym ("greatest" for "largest") or a word one text adds ("at least")
    swaps nothing."""
    from cotforge.curate.dedup.config import DedupConfig
    from cotforge.curate.dedup.semantic import RECHECK, check_pairs

    th = PairThresholds()
    big = "The integer $n$ is the largest positive multiple of $15$ such that every digit of $n$ is $8$ or $0$. Compute $n/15$."
    trees = ("Given two integer arrays inorder and postorder where inorder is the inorder traversal of a binary tree "
             "and postorder is the postorder traversal of the same tree, construct and return the binary tree.")
    swapped = trees.replace("inorder and postorder", "preorder and inorder").replace(
        "inorder is the inorder traversal", "preorder is the preorder traversal").replace(
        "postorder is the postorder traversal", "inorder is the inorder traversal")
    assert alternatives_swapped(big, big.replace("largest", "smallest"))
    assert pair_verdict(big, big.replace("largest", "smallest"), 0.95, 1.0, th) == "term_changed"
    assert pair_verdict(trees, swapped, 0.98, 0.99, th) == "term_changed"
    assert not alternatives_swapped(big, big.replace("largest", "greatest"))
    assert not alternatives_swapped("Find the largest $n$ with at least $3$ digits.",
                                    "Find the biggest $n$ that has no fewer than $3$ digits.")
    up = "How many up quarks does a tritium ($H^3$) nucleus contain?"
    texts = [up, up.replace("up", "down")]
    emb = Embedder(str(tiny_encoder))
    merged, stats = check_pairs([(0, 1, 0.98)], texts, emb, th, DedupConfig(), RECHECK)
    assert merged == [] and stats["vetoed_term_changed"] == 1


def test_a_condition_or_count_or_term_added_is_another_problem(tiny_encoder):
    """Classes the tier merged on real problems (round 5) and the veto of graded merges among its candidates:
    a condition stated in one text only (an order, distinctness, a multiplier, an ordinal), a count asked in one
    question only, a formula with a term added. A condition said in other words of its group, "the number of
    $k$" (a rewording of "the value of $k$") and a near-copy with a few replaced words stay one problem."""
    from cotforge.curate.dedup.config import DedupConfig
    from cotforge.curate.dedup.pairs.semantic import asks_count, condition_changed, veto_verdict
    from cotforge.curate.dedup.semantic import RECHECK, check_pairs

    seq = "Given a list of numbers values, return the length of the longest run of equal values."
    assert condition_changed(seq, seq.replace("numbers values,", "numbers values sorted in descending order,"))
    assert condition_changed("Pick 3 cards from a deck.", "Pick 3 different cards from a deck.")
    assert condition_changed("Tom ate 4 pies. How many pies are left?", "Tom ate 4 pies on the third day. How many pies are left?")
    assert not condition_changed("Pick 3 distinct cards.", "Pick 3 different cards.")
    assert not condition_changed("Sort it in increasing order.", "Sort it in ascending order.")
    assert asks_count("How many triangles have area 6?") and asks_count("Find the number of triangles with area 6.")
    assert not asks_count("What is the largest area of a triangle with perimeter 6?")
    assert not asks_count("Find the number of $k$.") and not asks_count("It has a maximum number of 54.")
    th = PairThresholds()
    tri = "A triangle has sides 5, 12 and 13. What is the length of its longest altitude?"
    count = tri.replace("What is the length of its longest altitude?", "How many of its altitudes are longest?")
    assert pair_verdict(tri, count, 0.95, 0.95, th, symmetric=True) == "question_changed"
    formula = "What is $\\left(\\frac{3}{5}\\right)^2 \\cdot \\left(\\frac{3}{5}\\right)^{-2}$?"
    longer = formula.replace("$?", " + \\left(\\frac{3}{5}\\right)^2$?")
    assert veto_verdict(formula, longer) == "math_changed"
    assert veto_verdict(formula, formula + "\n ~ pi_is_3.14") is None  # a credit line, the same problem
    assert veto_verdict("A circle $C$ of radius 1.", "A circle $C^{}_{}$ of radius 1.") is None
    assert not asks_count("How many degrees are in each interior angle of a regular hexagon?")
    assert not asks_count("How many more dollars does she need?")
    assert veto_verdict(tri, tri.replace("has sides", "has side lengths")) is None
    assert pair_verdict(seq, seq.replace("values,", "values sorted in descending order,"), 0.97, 0.99, th,
                        symmetric=True) == "condition_changed"
    emb = Embedder(str(tiny_encoder))
    texts = [formula, longer, tri, tri.replace("has sides", "has side lengths")]
    merged, stats = check_pairs([(0, 1, 0.97), (2, 3, 0.99)], texts, emb, th, DedupConfig(), RECHECK)
    assert merged == [(2, 3, 0.99)] and stats["vetoed_math_changed"] == 1

def test_pair_verdict_reasons():
    th = PairThresholds(min_cosine=0.8, min_question_cosine=0.7)
    assert pair_verdict(ITEM, REPHRASED, 0.9, 0.9, th) is None
    assert pair_verdict(ITEM, REPHRASED, 0.7, 0.9, th) == "below_cosine"
    assert pair_verdict(ITEM, NUMBER_CHANGED, 0.99, 1.0, th) == "number_changed"
    assert pair_verdict(ITEM, QUESTION_CHANGED, 0.95, 0.9, th) == "question_changed"
    assert pair_verdict(ITEM, REPHRASED, 0.9, 0.5, th) == "question_changed"


def test_embedder_from_a_local_folder(tiny_encoder):
    emb = Embedder(str(tiny_encoder), threads=2)
    v = emb.encode([ITEM, "", CLEAN, ITEM])
    assert v.shape == (4, emb.dim) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert np.allclose(v[0], v[3], atol=1e-6)  # batch order (sorted by length) does not change a vector
    assert emb.encode([]).shape == (0, emb.dim)


def test_static_embedder_distilled_from_the_model(tiny_encoder, tmp_path, monkeypatch):
    from cotforge.curate.text.embed import StaticEmbedder

    monkeypatch.setenv("COTFORGE_CACHE_DIR", str(tmp_path))
    emb = Embedder(str(tiny_encoder))
    st = StaticEmbedder(emb)
    assert st.table.shape == (len(emb.tokenizer), emb.dim)
    assert list((tmp_path / "semantic").glob("static-*.npy"))  # the token table is cached
    st.fit_weights([ITEM, CLEAN])
    v = st.encode([ITEM, REPHRASED, ""])
    assert np.allclose(np.linalg.norm(v[:2], axis=1), 1.0, atol=1e-5) and not v[2].any()
    assert np.allclose(StaticEmbedder(emb).table, st.table)  # read back from the cache


def test_model_errors_name_the_path(tmp_path):
    with pytest.raises(EmbedModelError, match="no such folder"):
        resolve_model_dir(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(EmbedModelError, match="no config.json"):
        resolve_model_dir(str(tmp_path / "empty"))


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_decontaminate_semantic_from_the_cli(tmp_path, tiny_encoder):
    """A random tiny encoder gives arbitrary cosines, so the cosine bounds are opened and the pair check alone
    decides: the rephrasing is flagged `semantic` with its numbers and both texts; the look-alikes are kept."""
    bench = tmp_path / "bench"
    bench.mkdir()
    _jsonl(bench / "mybench.jsonl", [{"id": "b1", "problem": ITEM, "answer": "10"}])
    rows = [{"id": "r", "prompt": REPHRASED, "response": "10"}, {"id": "n", "prompt": NUMBER_CHANGED, "response": "x"},
            {"id": "q", "prompt": QUESTION_CHANGED, "response": "x"}, {"id": "c", "prompt": CLEAN, "response": "40"}]
    src = _jsonl(tmp_path / "train.jsonl", rows)
    out = tmp_path / "out"
    args = [str(src), "-o", str(out), "--benchmarks", "mybench", "--benchmarks-dir", str(bench), "--workers", "1",
            "--semantic", "--semantic-model", str(tiny_encoder), "--semantic-cosine", "-1",
            "--semantic-question-cosine", "0"]
    res = CliRunner().invoke(main, ["curate", "decontaminate", *args])
    assert res.exit_code == 0, res.output
    import polars as pl

    removed = pl.read_parquet(sorted((out / "removed").glob("*.parquet")))
    got = {r["id"]: r for r in removed.iter_rows(named=True)}
    assert got["r"]["match_kind"] == "semantic" and got["r"]["side"] == "prompt"
    # the look-alikes and the clean row are not semantic matches (the question-changed one shares most of the
    # item's words: the lexical fuzzy tier flags it, as before)
    assert "n" not in got and "c" not in got and got.get("q", {}).get("match_kind") != "semantic"
    m = json.loads(got["r"]["matches"])[0]
    assert m["numbers"] == ["2", "3", "5"] and m["item_text"] == ITEM and m["row_text"] == REPHRASED
    # off (the default): the lexical tiers alone do not catch the rephrasing
    res = CliRunner().invoke(main, ["curate", "decontaminate", str(src), "-o", str(tmp_path / "off"), "--benchmarks",
                                    "mybench", "--benchmarks-dir", str(bench), "--workers", "1"])
    assert res.exit_code == 0, res.output
    off = pl.read_parquet(sorted((tmp_path / "off" / "removed").glob("*.parquet")))
    assert "r" not in off["id"].to_list()


def test_matcher_embeds_the_response_opening_when_the_prompt_is_empty(tmp_path, tiny_encoder):
    from cotforge.curate.core.benchmarks import BenchmarkItem
    from cotforge.curate.decontam.config import DecontamConfig
    from cotforge.curate.decontam.index import DecontamIndex, build_index
    from cotforge.curate.decontam.match import Matcher

    cfg = DecontamConfig(semantic=True, semantic_model=str(tiny_encoder), semantic_cosine=-1.0,
                         semantic_question_cosine=0.0, semantic_response_chars=len(REPHRASED))
    build_index({"mybench": [BenchmarkItem(id="b1", problem=ITEM, answer="10", benchmark="mybench")]}, cfg, tmp_path / "idx")
    assert (tmp_path / "idx" / "semantic" / "vectors.npy").is_file()
    found = Matcher(DecontamIndex(tmp_path / "idx")).match_batch(
        ["", "", CLEAN], [REPHRASED + " So the answer is 10.", NUMBER_CHANGED, REPHRASED], cfg)
    assert [[(m.match_kind, m.side) for m in ms] for ms in found] == [[("semantic", "response")], [], []]
    # the static fast path: a bound no row reaches keeps every row away from the transformer
    strict = DecontamConfig(**{**cfg.__dict__, "semantic_encoder": "static+rerank", "semantic_static_cosine": 1.0})
    m = Matcher(DecontamIndex(tmp_path / "idx"))
    assert m.match_batch(["", CLEAN], [REPHRASED + " So the answer is 10.", None], strict) == [[], []]
    assert m._semantic.skipped == 2
    # a bound every row reaches: the same candidates as the transformer path, so the same verdicts
    loose = DecontamConfig(**{**cfg.__dict__, "semantic_encoder": "static+rerank", "semantic_static_cosine": -1.0})
    m = Matcher(DecontamIndex(tmp_path / "idx"))
    again = m.match_batch(["", "", CLEAN], [REPHRASED + " So the answer is 10.", NUMBER_CHANGED, REPHRASED], loose)
    assert [[(x.match_kind, x.side, x.benchmark_id, x.score) for x in ms] for ms in again] == \
        [[(x.match_kind, x.side, x.benchmark_id, x.score) for x in ms] for ms in found]
    assert m._semantic.skipped == 0


def test_semantic_encoder_setting_is_checked():
    from cotforge.curate.decontam.config import DecontamConfig
    from cotforge.curate.dedup.config import DedupConfig

    for make in (DecontamConfig, DedupConfig):
        with pytest.raises(ValueError, match="semantic_encoder"):
            make(semantic_encoder="static")
        with pytest.raises(ValueError, match="semantic_static_cosine"):
            make(semantic_static_cosine=1.5)


def test_static_rerank_gives_the_transformer_verdicts_on_the_same_candidates(tiny_encoder):
    """dedup's fast path: static neighbours re-scored by the transformer go through the same checks; with every
    pair a candidate either way, the merged pairs and counts are those of the transformer path."""
    from cotforge.curate.dedup.config import DedupConfig
    from cotforge.curate.dedup.semantic import RECHECK, check_pairs, neighbour_pairs, rerank
    from cotforge.curate.text.embed import StaticEmbedder

    texts = [ITEM, DEDUP_REPHRASED, NUMBER_CHANGED, QUESTION_CHANGED, CLEAN]
    emb = Embedder(str(tiny_encoder))
    th = PairThresholds(-1.0, 0.0, 0)
    cfg = DedupConfig()
    dense = check_pairs(neighbour_pairs(emb.encode(texts), 4, -1.0), texts, emb, th, cfg, RECHECK)
    static = StaticEmbedder(emb).encode(texts)
    cands = neighbour_pairs(static, 4, -1.0)
    assert {(i, j) for i, j, _ in cands} == {(i, j) for i, j, _ in neighbour_pairs(emb.encode(texts), 4, -1.0)}
    got = check_pairs(rerank(cands, texts, emb, -1.0), texts, emb, th, cfg, RECHECK)
    assert got[1] == dense[1] and [(i, j) for i, j, _ in got[0]] == [(i, j) for i, j, _ in dense[0]]
    assert np.allclose([c for *_, c in got[0]], [c for *_, c in dense[0]], atol=1e-5)  # batching changes ulps only
    assert any(i == 0 and j == 1 for i, j, _ in got[0])
    # the re-ranked cosine is the transformer's: a floor above every transformer cosine leaves no pair
    assert rerank(cands, texts, emb, 1.01) == []


def test_decontaminate_semantic_missing_model_is_a_clear_error(tmp_path):
    bench = tmp_path / "bench"
    bench.mkdir()
    _jsonl(bench / "mybench.jsonl", [{"id": "b1", "problem": ITEM, "answer": "10"}])
    src = _jsonl(tmp_path / "train.jsonl", [{"id": "r", "prompt": REPHRASED, "response": "10"}])
    res = CliRunner().invoke(main, ["curate", "decontaminate", str(src), "-o", str(tmp_path / "o"), "--benchmarks",
                                    "mybench", "--benchmarks-dir", str(bench), "--semantic", "--semantic-model",
                                    str(tmp_path / "no_model")])
    assert res.exit_code != 0
    assert "no_model" in res.output and "no such folder" in res.output and "Traceback" not in res.output


def test_dedup_semantic_from_the_cli(tmp_path, tiny_encoder):
    """Dedup with the tier: the reworded problem merges into the original (kept: the first); the number- and
    question-changed look-alikes stay. (REPHRASED, with its sentences moved and numbers in words, is one the
    graded check keeps apart as `number_changed`: the stage does not let the semantic check overrule that.)"""
    rows = [{"id": "a", "prompt": ITEM, "response": "10"}, {"id": "r", "prompt": DEDUP_REPHRASED, "response": "10"},
            {"id": "n", "prompt": NUMBER_CHANGED, "response": "14"}, {"id": "q", "prompt": QUESTION_CHANGED,
                                                                         "response": "8"},
            {"id": "c", "prompt": CLEAN, "response": "40"}]
    src = _jsonl(tmp_path / "train.jsonl", rows)
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["curate", "dedup", str(src), "-o", str(out), "--workers", "1", "--semantic",
                                    "--semantic-model", str(tiny_encoder), "--semantic-cosine", "-1",
                                    "--semantic-question-cosine", "0"])
    assert res.exit_code == 0, res.output
    import polars as pl

    removed = pl.read_parquet(sorted((out / "removed").glob("*.parquet")))
    assert removed["id"].to_list() == ["r"]
    assert removed["duplicate_of"].to_list()[0] is not None
    stats = json.loads((out / "stats.json").read_text())
    assert stats["dedup"]["semantic_merged"] == 1
    # the fast path (static neighbours, transformer re-rank) removes the same row
    fast = tmp_path / "fast"
    res = CliRunner().invoke(main, ["curate", "dedup", str(src), "-o", str(fast), "--workers", "1", "--semantic",
                                    "--semantic-model", str(tiny_encoder), "--semantic-cosine", "-1",
                                    "--semantic-question-cosine", "0", "--semantic-encoder", "static+rerank",
                                    "--semantic-static-cosine", "-1"])
    assert res.exit_code == 0, res.output
    assert pl.read_parquet(sorted((fast / "removed").glob("*.parquet")))["id"].to_list() == ["r"]
    fstats = json.loads((fast / "stats.json").read_text())["dedup"]
    assert fstats["semantic_merged"] == 1 and fstats["semantic_static_candidates"] >= 1


@pytest.mark.skipif(importlib.util.find_spec("all_minilm_l6_v2") is None, reason="the semantic extra is not installed")
def test_real_shipped_model_separates_rephrasing_from_look_alikes():
    """all-MiniLM-L6-v2 from the wheel: the rephrasing is close to the item, and the pair check (not the cosine)
    rejects the number-changed look-alike, which is as close."""
    emb = Embedder()
    v = emb.encode([ITEM, REPHRASED, NUMBER_CHANGED, QUESTION_CHANGED, CLEAN])
    cos = v @ v[0]
    q = emb.encode([question_of(t) for t in (ITEM, REPHRASED, QUESTION_CHANGED)])
    th = PairThresholds()
    assert cos[1] > 0.8 and cos[4] < 0.5 and cos[2] > 0.9  # the look-alike is as close as the rephrasing
    assert pair_verdict(ITEM, REPHRASED, float(cos[1]), float(q[1] @ q[0]), th) is None
    assert pair_verdict(ITEM, NUMBER_CHANGED, float(cos[2]), 1.0, th) == "number_changed"
    assert pair_verdict(ITEM, QUESTION_CHANGED, float(cos[3]), float(q[2] @ q[0]), th) == "question_changed"
    assert pair_verdict(ITEM, CLEAN, float(cos[4]), 0.0, th) == "below_cosine"


def test_owned_heads_embed_each_problem_once(tmp_path):
    """Problems held by several dedup tasks are embedded by exactly one of them (one that holds it), and the
    shared ones are spread over the tasks rather than all given to one."""
    from cotforge.curate.dedup.semantic import owned_heads
    from cotforge.curate.dedup.workdir import HEAD_DTYPE

    rng = np.random.default_rng(0)
    pool = rng.integers(1, 2**63, size=600, dtype=np.uint64)
    held = [rng.choice(pool, size=400, replace=False) for _ in range(3)]
    (tmp_path / "heads").mkdir()
    for r, keys in enumerate(held):
        head = np.zeros(len(keys), dtype=HEAD_DTYPE)
        head["idx"], head["pkey"] = np.arange(len(keys)), keys
        np.save(tmp_path / "heads" / f"{r:05d}.npy", head)
    owned = [held[r][owned_heads(tmp_path, r, held[r], 3)] for r in range(3)]
    every = np.concatenate(owned)
    assert len(every) == len(set(every.tolist())) == len(set(np.concatenate(held).tolist()))
    shared = set(held[0].tolist()) & set(held[1].tolist()) & set(held[2].tolist())
    per_rank = [len(shared & set(o.tolist())) for o in owned]
    assert sum(per_rank) == len(shared) and min(per_rank) > len(shared) / 6


@pytest.mark.slow
def test_dedup_semantic_same_merges_over_several_tasks(tmp_path, tiny_encoder):
    """Problems repeated in both tasks (several sampled responses each) merge as in one task: each problem is
    embedded once, so copies from the other task do not take the nearest-neighbour slots."""
    base = [(ITEM, "a"), (DEDUP_REPHRASED, "r"), (NUMBER_CHANGED, "n"), (QUESTION_CHANGED, "q"), (CLEAN, "c")]
    rows = [{"id": f"{k}{i}", "prompt": p, "response": f"answer {i}"} for i in range(2) for p, k in base]
    src = _jsonl(tmp_path / "train.jsonl", rows)
    removed = {}
    import polars as pl

    for label, extra in (("one", ["--workers", "1"]), ("two", ["--workers", "2", "--rows-per-task", "5"])):
        out = tmp_path / label
        res = CliRunner().invoke(main, ["curate", "dedup", str(src), "-o", str(out), *extra, "--semantic",
                                        "--semantic-model", str(tiny_encoder), "--semantic-cosine", "-1",
                                        "--semantic-question-cosine", "0", "--semantic-top-k", "1"])
        assert res.exit_code == 0, res.output
        removed[label] = sorted(pl.read_parquet(sorted((out / "removed").glob("*.parquet")))["id"].to_list())
        assert json.loads((out / "stats.json").read_text())["dedup"]["semantic_merged"] == 1
    assert removed["one"] == removed["two"] == ["r0", "r1"]


def test_encoder_settings(tiny_encoder, monkeypatch):
    """device auto is the CPU without a GPU; precision auto is bf16 only where the device has it natively; bf16
    and int8 vectors stay close to fp32's; bad settings name the config field."""
    import torch

    from cotforge.curate.decontam.config import DecontamConfig
    from cotforge.curate.dedup.config import DedupConfig
    from cotforge.curate.text.embed import embedder_for, native_bf16

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cfg = DedupConfig(semantic=True, semantic_model=str(tiny_encoder), semantic_device="auto", semantic_threads=1)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        emb = embedder_for(cfg)
        assert emb.device == "cpu" and emb.precision == ("bf16" if native_bf16("cpu") else "fp32")
        emb.encode([ITEM])
        assert torch.get_num_threads() == 2  # one torch thread while encoding only: the process keeps its count
        texts = [ITEM, REPHRASED, CLEAN]
        ref = Embedder(str(tiny_encoder), precision="fp32").encode(texts)
        for precision in ("bf16", "int8"):
            v = Embedder(str(tiny_encoder), precision=precision).encode(texts)
            assert (v * ref).sum(axis=1).min() > 0.97, precision
        assert Embedder(str(tiny_encoder), max_tokens=8).encode([ITEM]).shape == (1, emb.dim)
    finally:
        torch.set_num_threads(threads)
    for field, value in (("semantic_precision", "fp16"), ("semantic_max_tokens", 2), ("semantic_threads", -1),
                         ("semantic_device", "tpu")):
        for config in (DecontamConfig, DedupConfig):
            with pytest.raises(ValueError, match=field):
                config(**{field: value})


def test_local_tasks_are_told_their_share_of_the_cores(monkeypatch, tmp_path):
    """The local executor sets DATATROVE_CPUS_PER_TASK to cores / workers (as Slurm and Ray set cpus_per_task);
    the encoder takes its torch threads from it."""
    from cotforge.curate.engine.executor import SharedCoresExecutor, usable_cores
    from cotforge.curate.text.embed import task_threads

    ex = SharedCoresExecutor(pipeline=[], tasks=4, workers=2, logging_dir=str(tmp_path))
    assert ex.get_distributed_env()["datatrove_cpus_per_task"] == str(max(1, usable_cores() // 2))
    monkeypatch.setenv("DATATROVE_CPUS_PER_TASK", "3")
    assert task_threads() == 3
    for unset in ("-1", "x"):
        monkeypatch.setenv("DATATROVE_CPUS_PER_TASK", unset)
        assert task_threads() is None


def test_decontam_tasks_share_row_vectors(tmp_path, tiny_encoder, monkeypatch):
    """Two tasks of one run (two tiers on one index folder): the second reads the first one's row vectors instead
    of embedding the same texts again, and reaches the same verdicts."""
    from cotforge.curate.decontam.config import DecontamConfig
    from cotforge.curate.decontam.semantic import SemanticTier, build_semantic_index

    monkeypatch.setenv("COTFORGE_CACHE_DIR", str(tmp_path / "cache"))
    cfg = DecontamConfig(semantic=True, semantic_model=str(tiny_encoder), semantic_cosine=-1,
                         semantic_question_cosine=0)
    items = [ITEM, CLEAN]
    build_semantic_index(items, cfg, tmp_path / "index")
    first, second = SemanticTier(tmp_path / "index", items, cfg), SemanticTier(tmp_path / "index", items, cfg)
    texts = [REPHRASED, NUMBER_CHANGED, QUESTION_CHANGED, "A different problem about 7 trains."]
    got = [[(h.entry, round(h.cosine, 5)) for h in hits] for hits in first.match(texts)]
    assert first.reused == 0 and any(got)
    before = second.emb.stats.texts
    assert [[(h.entry, round(h.cosine, 5)) for h in hits] for hits in second.match(texts)] == got
    assert second.reused == len(texts)
    assert second.emb.stats.texts - before < len(texts)  # only question sentences of candidates were embedded
