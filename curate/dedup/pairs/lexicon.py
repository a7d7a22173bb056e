"""Word lists of the graded pair check (curate/dedup/pairs/text.py): which normalised tokens carry the problem.

These are closed word classes, not paraphrase lists: number words, LaTeX layout commands, and the ordinary
words that decide *what is asked* ("carriers": comparisons, operations, parity, sign, negation, bounds,
direction, objects such as shapes, units and coins). Two prompts that differ in an ordinary word merge;
a carrier replaced by a carrier of another group (sum -> product, largest -> smallest, even -> odd,
minutes -> hours) keeps them apart, and so does adding, dropping or replacing a word of a *strict*
category (negation, parity, sign, primality, comparison, exactness): "how many are divisible" vs "how many
are not divisible". A carrier replaced by a word this module does not know counts as a synonym for the
loose categories (operation, direction, object): "spends" -> "uses up", "dollars" -> "bucks".
"""

from __future__ import annotations

NUMBER_WORDS: dict[str, str] = {
    **{w: str(i) for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split())},
    **{w: str(10 * i) for i, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), 3)},
    "hundred": "100", "thousand": "1000", "million": "10^6", "billion": "10^9", "dozen": "12", "both": "2",
    "half": "1/2", "halves": "1/2", "thirds": "1/3", "twice": "x2", "double": "x2", "thrice": "x3", "triple": "x3",
    "once": "x1", "first": "1st", "second": "2nd", "third": "3rd", "fourth": "4th", "fifth": "5th", "sixth": "6th",
    "seventh": "7th", "eighth": "8th", "ninth": "9th", "tenth": "10th", "hundredth": "100th", "thousandth": "1000th",
}

# "one" after these determiners is a pronoun ("every one of the boxes", "no one", "any one of them"), not a count:
# pairs.dedup_tokens turns it into PRONOUN_ONE, a closed-class word.
PRONOUN_DETERMINERS: frozenset[str] = frozenset("every each any no some which".split())
PRONOUN_ONE = "one_pronoun"

# LaTeX layout and font commands (their names survive normalisation as words); adding or dropping one only
# changes presentation (\frac{1}{2} vs 1/2, \text{cm} vs cm).
FORMAT_WORDS: frozenset[str] = frozenset(
    "frac dfrac tfrac cfrac left right displaystyle textstyle scriptstyle mathrm mathbf mathit mathsf mathtt mathcal "
    "text textbf textit textrm mbox hbox boxed quad qquad big bigg limits nolimits phantom hspace vspace ldots cdots "
    "dots dotsc dotsb vdots ddots begin end align aligned array cases gathered tabular hline cal".split())

# Contractions split by punctuation removal ("don't" -> "don t"): the first token's meaning, with "not".
CONTRACTION_NOT: dict[str, str] = {
    "don": "do", "doesn": "does", "didn": "did", "isn": "is", "aren": "are", "wasn": "was", "weren": "were",
    "can": "can", "couldn": "could", "wouldn": "would", "shouldn": "should", "won": "will", "haven": "have",
    "hasn": "has", "hadn": "had", "mustn": "must", "needn": "need", "ain": "is",
}

# category -> groups of words that mean the same for the question asked. Word forms are listed, not stemmed.
_CARRIERS: dict[str, tuple[str, ...]] = {
    "comparison": (
        "largest greatest biggest maximum max maximal maximum highest most maximize maximized maximizes maximise "
        "maximum maximizing",
        "smallest least fewest minimum min minimal lowest minimize minimized minimizes minimise minimizing",
        "more greater larger bigger higher exceeds exceed exceeding above",
        "less fewer smaller lower below",
        "longest", "shortest", "longer", "shorter", "tallest", "taller", "oldest", "older", "youngest", "younger",
        "fastest", "faster", "slowest", "slower", "heaviest", "heavier", "lightest", "lighter", "farthest furthest",
        "nearest closest",
    ),
    "parity": ("even", "odd"),
    "sign": ("positive", "negative", "nonnegative", "nonpositive", "nonzero"),
    "primality": ("prime primes", "composite"),
    "negation": ("not no never none neither nor without cannot nothing nobody",),
    "exactness": ("exactly precisely",),
    "sameness": ("same identical equal equals", "different distinct unequal"),
    "operation": (
        "sum total add adds added adding plus combined altogether overall", "product multiply multiplied multiplying",
        "difference subtract subtracted subtracting minus", "quotient divide divided dividing",
        "mean average", "median", "mode", "remainder", "area", "perimeter circumference", "volume",
        "probability chance likelihood", "ratio", "factorial",
        "remove removes removed removing",
    ),
    "direction": (
        "buy buys bought buying purchase purchases purchased", "sell sells sold selling",
        "increase increases increased increasing rise rises rose grows grew", "decrease decreases decreased decreasing "
        "drops dropped falls fell shrinks",
        "gain gains gained", "lose loses lost losing",
        "give gives gave giving", "receive receives received receiving get gets got",
        "earn earns earned earning", "spend spends spent spending", "save saves saved saving",
        "deposit deposits deposited depositing", "withdraw withdraws withdrew withdrawn withdrawing",
        "lend lends lent lending", "borrow borrows borrowed borrowing", "win wins won winning",
        "before", "after", "inside within", "outside", "clockwise", "counterclockwise",
    ),
    "object": (
        "triangle triangles", "square squares", "rectangle rectangles", "circle circles", "pentagon pentagons",
        "hexagon hexagons", "heptagon", "octagon octagons", "nonagon", "decagon decagons", "dodecagon", "rhombus",
        "trapezoid", "parallelogram", "quadrilateral", "cube cubes", "sphere spheres", "cylinder cylinders",
        "cone cones", "prism", "pyramid", "tetrahedron", "octahedron", "ellipse", "parabola", "hyperbola",
        "semicircle", "radius radii", "diameter", "seconds sec", "minute minutes", "hour hours", "day days",
        "week weeks", "month months", "year years", "inch inches", "foot feet", "yard yards", "mile miles",
        "meter meters metre metres", "centimeter centimeters cm", "millimeter millimeters mm",
        "kilometer kilometers km", "gram grams", "kilogram kilograms kg", "pound pounds", "ounce ounces",
        "liter liters litre litres", "gallon gallons", "quart quarts", "pint pints", "cup cups",
        "dollar dollars", "cent cents", "penny pennies", "nickel nickels", "dime dimes", "quarter quarters",
        "die dice", "coin coins", "card cards",
    ),
}
STRICT_CATEGORIES: frozenset[str] = frozenset({"comparison", "parity", "sign", "primality", "negation", "exactness",
                                               "sameness"})

CARRIERS: dict[str, tuple[str, str]] = {
    w: (cat, group.split()[0]) for cat, groups in _CARRIERS.items() for group in groups for w in group.split()
}

# Closed-class words that may be reworded freely (articles, determiners, pronouns, prepositions, conjunctions,
# auxiliaries, quantity phrases and the instruction verbs that open a question). Every other ordinary word is a
# *content* word: replacing one by a different content word changes the problem ("numerator" -> "denominator",
# "real part" -> "magnitude", "preorder" -> "inorder") unless the two are spelling or inflection variants or
# share a group of REWORD_SYNONYMS. Dropping or adding a content word still counts as rewording.
FUNCTION_WORDS: frozenset[str] = frozenset(
    "a an the this that these those such some any each every all both either neither another other others own "
    "several few many much more most lots lot plenty bunch couple number numerous various whole entire complete "
    "overall altogether combined majority total totally "
    "i me my mine we us our ours you your yours he him his she her hers it its they them their theirs one ones "
    "who whom whose which what whatever whichever where when why how there here "
    "of in on at by for from to into onto with within without about above below over under between among through "
    "across along around up down out off upon per via than as like "
    "and or but so yet nor also too then thus hence therefore still just only even ever very quite rather really "
    "is are was were be been being am do does did done have has had having will would shall should can could may "
    "might must need needs let lets please kindly "
    "find determine compute calculate evaluate work figure obtain state give write express tell say show "
    "what whats if whether given suppose assume consider".split()) | {PRONOUN_ONE}

# Nouns of instructions ("Show all of your steps", "Express your answer in lowest terms"): an added edge text
# that shares any other content word with the problem is part of the problem, not a wrapper.
INSTRUCTION_WORDS: frozenset[str] = frozenset(
    "answer answers result results solution solutions step steps work working reasoning reason form terms "
    "problem problems question questions exercise task final line box boxed end carefully".split())

# Groups of content words that mean the same in a problem statement (kept small and general on purpose: the
# graded check errs towards keeping two problems apart).
REWORD_SYNONYMS: tuple[str, ...] = (
    "answer result", "value number", "problem question exercise", "equation equality", "shown pictured depicted",
    "figure diagram picture", "entirely completely",
)

# Words that often start a sentence capitalised without being names (for the "capitalised twice" name rule).
STARTERS: frozenset[str] = frozenset(
    "the a an if in on at for of to by from with what how which who whose where when why find let given suppose "
    "assume then there this that these those each every all some any after before while she he they it we you i "
    "his her their its our my compute determine calculate evaluate express show prove simplify solve write give "
    "round enter is are was were do does did can could will would since because so but and or also as one note "
    "here consider now again first second next finally thus hence therefore".split())


REWORD_GROUP: dict[str, int] = {w: i for i, g in enumerate(REWORD_SYNONYMS) for w in g.split()}

__all__ = ["FUNCTION_WORDS", "INSTRUCTION_WORDS", "REWORD_GROUP", "NUMBER_WORDS", "FORMAT_WORDS", "CONTRACTION_NOT", "CARRIERS", "PRONOUN_DETERMINERS", "PRONOUN_ONE", "STRICT_CATEGORIES", "STARTERS"]
