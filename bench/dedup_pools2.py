"""Word pools of the second fresh held-out dedup set (bench/dedup_fresh2.py).

Written by hand on 2026-12-01 (16:50-17:05 UTC) from how scraped datasets reword one problem (regional and
register variants, code-statement phrasing, connectives), without reading the dedup rules or their word
tables and without looking at which pairs the rules miss. Disjoint from every pool of bench/dedup_pools.py:
no synonym source word (case-insensitive) is a synonym source word there, no wrapper is shared (nor one of
the built-in wrappers), no question / object swap pair is shared and no letter word is shared;
`check_disjoint()` asserts it and bench/dedup_fresh2.py calls it before building.

Synonym pairs are (word or phrase, replacement): the replacement keeps the problem (same answer). Question
swaps change what is asked; object swaps change a measured quantity, unit or math object: both make a
different problem. Each swap is tried both ways.
"""

from __future__ import annotations

SYNONYMS2: dict[str, tuple[tuple[str, str], ...]] = {
    "verb": (("Return", "Output"), ("return", "output"), ("returns", "outputs"), ("bakes", "makes"), ("baked", "made"),
             ("borrows", "takes out"), ("borrowed", "took out"), ("invites", "asks"), ("invited", "asked"),
             ("delivers", "brings"), ("delivered", "brought"), ("prints", "outputs"), ("counts", "tallies"), ("counted", "tallied"),
             ("donates", "gives away"), ("donated", "gave away"),
             ("charges", "bills"), ("charged", "billed"), ("weighs", "has a mass of"), ("stays", "remains"),
             ("drank", "had"), ("Solve for", "Find"), ("Consider", "Look at"),
             ("obtain", "get"), ("practices", "rehearses"), ("studies", "reviews"), ("attends", "goes to"),
             ("sells for", "goes for"), ("doubles", "increases twofold"),
             ("consists of", "is made up of"), ("satisfies", "fulfils"), ("satisfy", "fulfil"),
             ("denote", "represent"), ("denotes", "represents")),
    "noun": (("grocery store", "supermarket"), ("phone", "cellphone"), ("TV", "television"), ("soda", "pop"),
             ("sweater", "jumper"), ("pants", "trousers"), ("trash", "garbage"), ("apartment", "flat"),
             ("elevator", "lift"), ("sidewalk", "pavement"), ("fries", "chips"), ("grandmother", "grandma"),
             ("grandfather", "grandpa"), ("husband", "spouse"), ("wife", "spouse"), ("coworker", "colleague"),
             ("boss", "manager"), ("dinner", "supper"), ("groceries", "food items"), ("gas", "fuel"),
             ("gasoline", "fuel"), ("bucket", "pail"), ("hike", "trek"), ("shelf", "rack"),
             ("sneakers", "trainers"), ("classmates", "schoolmates"), ("exam", "test"), ("homework", "assignments"),
             ("chores", "tasks"), ("game", "match"), ("games", "matches"), ("an array", "a list"), ("arrays", "lists"),
             ("elements", "entries"), ("indices", "positions"),
             ("probability", "chance"), ("answer", "result"), ("pounds of", "lbs of"), ("mom", "mother"),
             ("photographs", "photos"), ("automobiles", "cars"), ("vehicle", "car"), ("dog", "doggy"),
             ("kitten", "kitty"), ("soccer", "football"), ("candy bars", "chocolate bars")),
    "quantifier": (("per", "for each"), ("apiece", "each"), ("among", "amongst"),
                   ("no more than", "not more than"),
                   ("no fewer than", "not fewer than"), ("half of the", "one half of the"),
                   ("the rest of the", "the remaining"), ("none of the", "not one of the"),
                   ("one another", "each other"), ("a great many", "lots of"), ("at once", "simultaneously"),
                   ("everyone", "everybody"), ("anyone", "anybody"), ("someone", "somebody"),
                   ("nobody", "no one"), ("every single", "each"),
                   ("a majority of", "most of"), ("a set of", "a collection of")),
    "adjective": (("smart", "clever"), ("tired", "exhausted"), ("delicious", "tasty"), ("sick", "ill"),
                  ("scared", "afraid"), ("famous", "well-known"), ("strong", "powerful"), ("weekly", "each week"),
                  ("monthly", "every month"), ("annually", "every year"), ("finally", "in the end"),
                  ("approximately", "about"), ("roughly", "approximately"), ("immediately", "right away"),
                  ("afterward", "later"), ("additional", "extra"), ("extra", "additional"),
                  ("entirely", "completely"), ("completely", "fully"), ("separately", "individually"),
                  ("simultaneously", "at the same time"), ("consecutive", "successive"),
                  ("adjacent", "neighboring"), ("nonnegative", "non-negative"), ("lowercase", "lower-case"),
                  ("uppercase", "upper-case"), ("sorted", "ordered"), ("initial", "starting"),
                  ("circular", "round"), ("respective", "corresponding"),
                  ("evenly", "equally"), ("such that", "so that"), ("therefore", "hence"), ("calm", "quiet"), ("wealthy", "well-off"), ("brand new", "new"),
                  ("closest", "nearest"), ("valid", "legal")),
}

WRAPPERS2: dict[str, tuple[str, ...]] = {
    "before": ("Solve this math question for me:", "Here is a practice problem.", "Below is a question; work it out.",
               "Hey, can you solve this?", "From a homework sheet:", "Quick question for you.",
               "Question from a practice test:", "Read the following and solve it.", "You are an expert problem solver.",
               "Let's work on a problem together.", "I'm stuck on this one:", "Here's a task for you:",
               "Practice item.", "Assignment:"),
    "after": ("Please explain your approach.", "Give just the final answer.", "Try to be efficient.",
              "Include a brief explanation.", "Provide a complete answer.", "Check your answer before submitting.",
              "Respond in English.", "Keep it short.", "Walk me through it.", "Your answer should be exact.",
              "Good luck!", "Any help is appreciated.", "Reply with your reasoning first."),
}

QUESTION_SWAPS2: tuple[tuple[str, str], ...] = (
    ("multiplied by", "divided by"), ("increasing", "decreasing"), ("ascending", "descending"), ("prefix", "suffix"),
    ("leftmost", "rightmost"), ("clockwise", "counterclockwise"), ("acute", "obtuse"), ("rational", "irrational"),
    ("sine", "cosine"), ("x-coordinate", "y-coordinate"), ("x-intercept", "y-intercept"), ("factors", "multiples"),
    ("greatest common divisor", "least common multiple"), ("hundreds digit", "thousands digit"),
    ("deposit", "withdraw"), ("cheaper", "costlier"), ("warmer", "colder"), ("closer", "farther"),
    ("wider", "narrower"), ("minimize", "maximize"), ("minimal", "maximal"),
    ("subarray", "subsequence"), ("top", "bottom"), ("upper", "lower"), ("east", "west"), ("inner", "outer"),
    ("beginning", "end"), ("less than", "greater than"), ("vowels", "consonants"),
    ("circumference", "radius"), ("lose", "win"), ("minutes late", "minutes early"), ("tallest", "shortest"),
    ("more likely", "less likely"), ("discount", "markup"), ("decreasing order", "increasing order"),
    ("lower bound", "upper bound"), ("full", "empty"), ("open", "closed"),
)

OBJECT_SWAPS2: tuple[tuple[str, str], ...] = (
    ("gallons", "quarts"), ("tablespoons", "teaspoons"), ("acres", "hectares"), ("mph", "km/h"),
    ("apples", "oranges"), ("heptagon", "nonagon"), ("dodecagon", "icosagon"), ("isosceles", "equilateral"),
    ("octahedron", "dodecahedron"), ("hexagonal", "octagonal"), ("semicircle", "quarter circle"),
    ("tangent", "secant"), ("altitude", "angle bisector"), ("milliseconds", "microseconds"), ("bytes", "bits"),
    ("kilobytes", "megabytes"), ("binary", "ternary"), ("degrees", "radians"), ("Celsius", "Fahrenheit"),
    ("marbles", "beads"), ("pencils", "pens"), ("eggs", "muffins"), ("quadrilateral", "pentagon"),
    ("cuboid", "cylinder"), ("characters", "words"), ("nodes", "edges"), ("binary search tree", "binary tree"),
    ("matrix", "vector"), ("euros", "yen"), ("students", "teachers"), ("hours", "weeks"), ("cookies", "cakes"),
    ("pages", "chapters"), ("meters", "kilometers"), ("seconds", "hours"),
)

LETTER_WORDS2: tuple[str, ...] = ("SUCCESS", "MAMMAL", "LOLLIPOP", "ACCESSORY", "BUBBLE", "DAZZLE", "RECORDER",
                                  "NOODLE")
NAMES2: tuple[str, ...] = ("Oluwaseun", "Ingeborg", "Tomasz", "Marisol", "Keoni", "Farida", "Lorcan", "Anjali",
                           "Thabo", "Giulia", "Rasmus", "Noor")


def check_disjoint() -> None:
    """Raise AssertionError when a pool here shares an entry with a pool of bench/dedup_pools.py (or a wrapper
    with the built-in list): what makes this set a test of generalisation."""
    from dedup_pools import (
        BUILTIN_WRAPPERS_AT_BUILD,
        LETTER_WORDS,
        NAMES,
        OBJECT_SWAPS,
        QUESTION_SWAPS,
        SYNONYMS,
        WRAPPERS,
    )

    old_src = {a.lower() for part in SYNONYMS.values() for cat in part.values() for a, _ in cat}
    new_src = {a.lower() for cat in SYNONYMS2.values() for a, _ in cat}
    assert not old_src & new_src, f"synonym sources shared: {sorted(old_src & new_src)}"
    old_w = {w.lower() for part in WRAPPERS.values() for side in part.values() for w in side}
    old_w |= {w.lower() for w in BUILTIN_WRAPPERS_AT_BUILD}
    new_w = {w.lower() for side in WRAPPERS2.values() for w in side}
    assert not old_w & new_w, f"wrappers shared: {sorted(old_w & new_w)}"
    for old, new in ((QUESTION_SWAPS, QUESTION_SWAPS2), (OBJECT_SWAPS, OBJECT_SWAPS2)):
        old_p = {frozenset((a.lower(), b.lower())) for part in old.values() for a, b in part}
        shared = old_p & {frozenset((a.lower(), b.lower())) for a, b in new}
        assert not shared, f"swap pairs shared: {sorted(map(sorted, shared))}"
    old_l = {w for part in LETTER_WORDS.values() for w in part} | {n for part in NAMES.values() for n in part}
    assert not old_l & (set(LETTER_WORDS2) | set(NAMES2)), "letter words / names shared"
