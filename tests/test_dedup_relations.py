"""Round 3 of the graded pair check: WordNet relations (curate/dedup/pairs/relations.py) and the evidence that a
replaced word changes the problem (curate/dedup/pairs/words.py), under each `word_relations` mode."""

from __future__ import annotations

import pytest

from cotforge.curate.dedup.config import DedupConfig
from cotforge.curate.dedup.pairs import relations
from cotforge.curate.dedup.pairs.text import dedup_tokens
from cotforge.curate.dedup.pairs.verdict import candidate_verdict
from cotforge.curate.dedup.pairs.words import idioms, units
from cotforge.curate.text.normalize import normalize

SHOP = ("Maya has 40 dollars of {money}. She {buys} 3 notebooks at the {store} for 4 dollars each and "
        "{gives} 6 dollars to her brother. How many dollars does she have left?")
BASE = dict(money="money", buys="buys", store="store", gives="gives")


def verdict(a: str, b: str, mode: str = "flip") -> str | None:
    return candidate_verdict(normalize(a), normalize(b), DedupConfig(word_relations=mode), a, b)


def shop(**kw: str) -> str:
    return SHOP.format(**{**BASE, **kw})


def test_relations_table_answers():
    assert relations.known("purchases") and not relations.known("inorder")
    assert relations.synonym("integer", "whole_number")  # a WordNet phrase
    assert relations.related("contains", "holds")  # shared synset beyond the 5 most frequent senses
    assert relations.related("money", "cash")  # gloss genus: "cash: money in the form of bills or coins"
    assert relations.opposed("adults", "children")  # adult ! juvenile, child < juvenile
    assert relations.opposed("huge", "tiny")  # through the heads large / small
    assert relations.technical("minutes") and relations.technical("height")
    assert not relations.technical("box") and not relations.technical("constant")  # quantity sense 2nd / mainly adj
    assert relations.math_word("diagonal") and relations.math_word("vertices") and not relations.math_word("pizza")
    assert relations.siblings("city", "town") and relations.cousins("apples", "oranges")
    assert not relations.cousins("money", "cash")  # related, so not cousins
    assert relations.idiom("one_and_only") and not relations.idiom("ice_cream")


@pytest.mark.parametrize("kw", [
    dict(money="cash"),  # gloss genus
    dict(buys="purchases"),  # synonym table
    dict(gives="hands"),  # WordNet synonyms beyond the 5 most frequent senses
    dict(store="shop"),
    dict(gives="hands over"),  # a WordNet phrase as the counterpart
])
def test_related_rewordings_merge(kw):
    assert verdict(SHOP.format(**BASE), shop(**kw), "wordnet") is None
    assert verdict(SHOP.format(**BASE), shop(**kw), "flip") is None


def test_round_two_mode_keeps_what_only_wordnet_relations_merge():
    assert verdict(shop(), shop(gives="hands"), "synonyms") == "content_changed"


def test_flip_merges_unrelated_everyday_words_only():
    a = "The 12 people at the party share 3 pizzas equally. How many pizzas does each of the people get?"
    b = a.replace("people at", "persons at")  # WordNet does not relate people / persons
    assert verdict(a, b, "wordnet") == "content_changed"
    assert verdict(a, b, "flip") is None


def test_default_mode_is_wordnet_not_flip():
    """The default keeps apart what only `flip` merges (flip merged changed objects on the held-out fresh2 set)."""
    a = "The 12 people at the party share 3 pizzas equally. How many pizzas does each of the people get?"
    b = a.replace("people at", "persons at")
    assert candidate_verdict(normalize(a), normalize(b), DedupConfig(), a, b) == "content_changed"
    assert verdict(shop(), shop(money="cash"), DedupConfig().word_relations) is None


@pytest.mark.parametrize(("x", "y"), [
    ("men", "women"),  # antonyms
    ("adults", "children"),  # antonyms through a hypernym
    ("cats", "dogs"),  # cousins (carnivore)
    ("cars", "trucks"),  # siblings
    ("girls", "boys"),  # antonyms, although the synonym table groups them (both under "scout")
])
def test_flip_keeps_category_members_and_antonyms_apart(x, y):
    a = f"A club has 30 {x}. Each of the {x} pays 5 dollars. How much money do the {x} pay in all?"
    assert verdict(a, a.replace(x, y, 1), "flip") == "content_changed"


@pytest.mark.parametrize(("a", "b"), [
    ("Find the length of the diagonal of a square with area 50.", "Find the length of the side of a square with area 50."),
    ("A circle is inscribed in a square of side 6. Find its area.", "A circle is circumscribed about a square of side 6. Find its area."),
    ("What is the sum of the numerator and the denominator of 6/8?", "What is the sum of the numerator and the exponent of 6/8?"),
    ("A cube has surface area 54. Find its volume.", "A cube has side length 54. Find its volume."),  # one unit vs two words
    ("Print the inorder traversal of the binary tree given below.", "Print the preorder traversal of the binary tree given below."),
    ("Find the real part of the complex number 3+4i.", "Find the magnitude of the complex number 3+4i."),
])
def test_technical_and_unknown_words_keep_problems_apart(a, b):
    assert verdict(a, b, "flip") is not None


def test_colours_are_siblings_not_synonyms():
    a = "A bag holds 7 red marbles and 5 green cubes. How many red marbles must be drawn to be sure of 3?"
    assert relations.related("red", "blue")  # satellites of one adjective head, like huge / enormous
    assert verdict(a, a.replace("red", "blue")) == "content_changed"


def test_direction_verbs_are_carriers():
    a = "Tom earned 50 dollars on Monday and 30 dollars on Tuesday. How much did he earn?"
    assert verdict(a, a.replace("earned", "spent"), "flip") == "question_changed"


def test_pronoun_one_and_idioms_are_not_counts():
    assert "one" not in dedup_tokens("every one of the boxes")
    assert "one" in dedup_tokens("one of the boxes")
    side = [("the", "word"), ("one", "num"), ("and", "word"), ("only", "word")]
    assert ("one", "word") in idioms(side)
    a = "Each of the 5 boxes holds 12 pens. How many pens are there?"
    assert verdict(a, a.replace("Each", "Every one")) is None
    assert verdict(a, a.replace("Each of the", "One of the")) is not None  # a count


def test_units_join_wordnet_phrases():
    side = [(t, "word") for t in "the surface area of".split()]
    assert "surface_area" in units(side)


def test_edge_operation_said_by_the_replacement_merges():
    a = "Sam has 4 red and 6 blue marbles. How many marbles does he have altogether?"
    assert verdict(a, a.replace("altogether", "in all")) is None
    assert verdict(a, a.replace("How many marbles does he have altogether?",
                                "What is the product of the numbers of marbles?")) is not None


def test_word_relations_is_validated():
    with pytest.raises(ValueError, match="word_relations"):
        DedupConfig(word_relations="all")


def test_math_word_evidence_does_not_undo_a_wordnet_relation():
    a = "A car drives at a constant speed of 40 miles per hour for 3 hours. How far does it go?"
    assert relations.math_word("constant") and relations.related("constant", "steady")
    assert verdict(a, a.replace("constant", "steady")) is None
    b = "Find the length of the diagonal of a rectangle with sides 6 and 8."
    assert verdict(b, b.replace("diagonal", "side")) == "content_changed"  # unrelated: the math word counts


def test_instruction_nouns_at_the_edge_are_wrapper_text():
    a = "Find the remainder when 2^{100} is divided by 7."
    assert verdict(a, "Task: Determine the remainder when 2^{100} is divided by 7.") is None


def test_release_word_tables_drops_the_tables_and_verdicts_stay():
    from cotforge.curate.dedup.pairs import synonyms
    from cotforge.curate.dedup.pairs.verdict import release_word_tables

    pairs = [(shop(), shop(gives="hands")), (shop(), shop(store="shop")), (shop(), shop(money="cash"))]
    before = [verdict(a, b, "wordnet") for a, b in pairs]
    assert relations._table.cache_info().currsize == 1 and synonyms._table.cache_info().currsize == 1
    release_word_tables()
    assert relations._table.cache_info().currsize == 0 and synonyms._table.cache_info().currsize == 0
    assert relations.senses.cache_info().currsize == 0
    assert [verdict(a, b, "wordnet") for a, b in pairs] == before  # loaded again on the next check
    assert relations._table.cache_info().currsize == 1
