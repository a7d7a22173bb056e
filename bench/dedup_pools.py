"""Word pools for the generated dedup variants (bench/labelled_sets.py), one pool per part of the set.

The tuning pools and the held-out pools are disjoint (no source word of a held-out synonym pair is a source
word of a tuning pair, and no wrapper is shared), and neither contains a wrapper of the built-in list
(`curate.text.normalize.INSTRUCTION_WRAPPERS`), so the held-out part measures how the rules generalise
to rewordings and instructions they were never tuned on. Written by hand before any rule was tuned.

Synonym pairs are (word, replacement); the replacement may be several words. Every pair keeps the
problem the same (same answer); antonym and object pairs change it (different problem, often a different
answer).
"""

from __future__ import annotations

SYNONYMS: dict[str, dict[str, tuple[tuple[str, str], ...]]] = {
    "tune": {
        "verb": (("buys", "purchases"), ("bought", "purchased"), ("makes", "produces"), ("wants", "wishes"),
                 ("uses", "utilizes"), ("used", "utilized"), ("needs", "requires"), ("starts", "begins"),
                 ("started", "began"), ("gets", "receives"), ("got", "received"), ("walks", "strolls"),
                 ("picks", "selects"), ("chosen", "selected"), ("shows", "displays"), ("Find", "Determine"),
                 ("find", "determine"), ("Compute", "Evaluate"), ("works", "labors"), ("sold", "vended"),
                 ("made", "produced"), ("decides", "chooses"), ("leaves", "departs"), ("arrives", "gets there"),
                 ("wrote", "penned"), ("gave", "handed"), ("gives", "hands"), ("wants to", "would like to")),
        "noun": (("store", "shop"), ("car", "automobile"), ("money", "cash"), ("house", "home"),
                 ("friends", "pals"), ("kids", "children"), ("box", "carton"), ("bag", "sack"), ("road", "street"),
                 ("trip", "journey"), ("gift", "present"), ("photos", "pictures"), ("students", "pupils"),
                 ("price", "cost"), ("amount", "quantity"), ("figure", "diagram"), ("job", "occupation"),
                 ("party", "celebration"), ("bakery", "bakeshop"), ("sum", "total"), ("integer", "whole number"),
                 ("problem", "question"), ("garden", "yard"), ("truck", "lorry")),
        "quantifier": (("each", "every"), ("several", "a few"), ("many", "numerous"), ("altogether", "in all"),
                       ("entire", "whole"), ("all of the", "all the"), ("a total of", "in total"),
                       ("Each", "Every"), ("some", "a number of"), ("exactly", "precisely")),
        "adjective": (("large", "big"), ("small", "little"), ("quickly", "rapidly"), ("new", "fresh"),
                      ("favorite", "preferred"), ("happy", "glad"), ("full", "filled"), ("real", "actual"),
                      ("different", "distinct"), ("certain", "particular"), ("only", "just"),
                      ("nonzero", "non-zero"), ("equal", "identical")),
    },
    "held": {
        "verb": (("spends", "uses up"), ("spent", "used up"), ("collects", "gathers"), ("collected", "gathered"),
                 ("cuts", "slices"), ("drives", "travels"), ("drove", "traveled"), ("reads", "goes through"),
                 ("writes", "composes"), ("builds", "constructs"), ("built", "constructed"), ("eats", "consumes"),
                 ("ate", "consumed"), ("fills", "loads"), ("filled", "loaded"), ("Calculate", "Work out"),
                 ("placed", "put"), ("puts", "places"), ("keeps", "retains"), ("kept", "retained"),
                 ("receives", "obtains"), ("received", "obtained"), ("travels", "journeys"), ("Determine", "Find"),
                 ("determine", "find"), ("Evaluate", "Compute"), ("paid", "handed over"), ("pays", "hands over"),
                 ("plans", "intends"), ("divided", "split"), ("shared", "split"), ("earns", "makes"),
                 ("rides", "cycles"), ("Suppose", "Assume")),
        "noun": (("farmer", "grower"), ("school", "academy"), ("teacher", "instructor"), ("cookies", "biscuits"),
                 ("candies", "sweets"), ("toys", "playthings"), ("boy", "lad"), ("mother", "mom"), ("father", "dad"),
                 ("shirt", "top"), ("movie", "film"), ("movies", "films"), ("worker", "employee"),
                 ("workers", "employees"), ("company", "firm"), ("books", "volumes"), ("pizza", "pie"),
                 ("shop", "store"), ("cash", "money"), ("children", "kids"), ("city", "town"), ("vacation", "holiday"),
                 ("neighbor", "neighbour"), ("expression", "quantity"), ("coordinate plane", "xy-plane"),
                 ("digits", "numerals"), ("dollars", "bucks")),
        "quantifier": (("every", "each"), ("both", "the two"), ("a lot of", "lots of"), ("total", "combined"),
                       ("whole", "complete"), ("numerous", "many"), ("various", "different"), ("Every", "Each"),
                       ("all the", "all of the")),
        "adjective": (("big", "large"), ("little", "small"), ("quick", "fast"), ("old", "aged"), ("glad", "pleased"),
                      ("favourite", "best-loved"), ("simple", "easy"), ("nice", "pleasant"), ("distinct", "different"),
                      ("entire", "complete"), ("possible", "feasible"), ("ordered", "arranged"), ("correct", "right")),
    },
    # The fresh part (bench/dedup_fresh.py): written at 14:45 UTC on 2026-12-01, before the second round of
    # tuning; no source word is a source word of the tune or held pools.
    "fresh": {
        "verb": (("owns", "possesses"), ("owned", "possessed"), ("watches", "views"), ("sees", "notices"),
                 ("saw", "noticed"), ("helps", "assists"), ("helped", "assisted"), ("tries", "attempts"),
                 ("finishes", "completes"), ("finished", "completed"), ("saves", "puts aside"),
                 ("saved", "set aside"), ("lives", "resides"), ("carries", "brings"), ("begins", "commences"),
                 ("chooses", "picks"), ("chose", "picked"), ("earned", "made"), ("takes", "needs"),
                 ("wishes", "wants"), ("hires", "employs"), ("hired", "employed"), ("fixes", "repairs"),
                 ("throws", "tosses"), ("rolled", "tossed"), ("joins", "links"), ("contains", "holds"),
                 ("Show", "Prove"), ("Express", "Write"), ("Given", "Suppose")),
        "noun": (("market", "bazaar"), ("farm", "ranch"), ("tickets", "passes"), ("class", "course"),
                 ("salary", "wage"), ("restaurant", "diner"), ("jar", "container"), ("bottle", "flask"),
                 ("student", "pupil"), ("building", "structure"), ("room", "chamber"), ("child", "kid"),
                 ("baby", "infant"), ("woman", "lady"), ("boat", "vessel"), ("bike", "bicycle"),
                 ("fee", "charge"), ("profit", "earnings"), ("shoes", "footwear"), ("clothes", "garments"),
                 ("puzzle", "riddle"), ("contest", "competition"), ("friend", "buddy"), ("number", "value"),
                 ("sequence", "progression"), ("people", "persons"), ("team", "squad"), ("backyard", "yard")),
        "quantifier": (("plenty of", "lots of"), ("a few", "several"), ("most of the", "the majority of the"),
                       ("overall", "altogether"), ("each of the", "every one of the"), ("In total", "Altogether"),
                       ("in total", "altogether"), ("a number of", "several"), ("any", "any given"),
                       ("all", "all of the")),
        "adjective": (("huge", "enormous"), ("tiny", "very small"), ("fast", "speedy"), ("beautiful", "lovely"),
                      ("cheap", "inexpensive"), ("expensive", "costly"), ("empty", "vacant"), ("rich", "wealthy"),
                      ("constant", "steady"), ("fair", "unbiased"), ("randomly", "at random"),
                      ("initially", "at first"), ("originally", "at first"), ("daily", "each day"),
                      ("usually", "normally"), ("currently", "now"), ("respectively", "in that order"),
                      ("unique", "one and only"), ("true", "correct"), ("same", "identical")),
    },
}

# Instructions put before / after a problem (none of them is in the built-in list).
WRAPPERS: dict[str, dict[str, tuple[str, ...]]] = {
    "tune": {
        "before": ("Here is a math problem for you to solve:", "Work through the following exercise carefully.",
                   "Try to answer this question:", "Consider the problem below.", "Read the problem and answer it.",
                   "Task:", "Exercise:", "You are a helpful math tutor. Solve this:",
                   "Answer the question below as accurately as you can.", "Please help me with this one:",
                   "Solve the next exercise, showing your reasoning."),
        "after": ("Show all of your steps.", "Explain each step of your solution.", "Write the final result at the end.",
                  "Be concise.", "Make sure to check your work.", "Provide the answer only.",
                  "Express your answer in lowest terms.", "Reason carefully before you answer.",
                  "End with the final answer on its own line."),
    },
    "held": {
        "before": ("Below is a question from a math contest. Answer it.", "I need help with this homework question.",
                   "Can you work out the following?", "Instruction: answer the question that follows.",
                   "The following is a word problem.", "Attempt this problem:", "Your job is to solve the question below.",
                   "Respond to the following prompt with a complete solution.", "A student asks:",
                   "Here's something to think about.", "Read carefully, then solve."),
        "after": ("Please give a short justification.", "Remember to simplify your result.",
                  "State your answer clearly at the end.", "Write your answer in a box.", "Double-check before answering.",
                  "Give your answer in simplest form.", "Think it through and then respond.",
                  "No need to show intermediate steps.", "Your final line should contain only the answer."),
    },
    "fresh": {
        "before": ("Math question:", "Help me figure this out, please.", "Here's a puzzle from my textbook.",
                   "Give a careful solution to the following.", "The problem reads as follows.",
                   "My teacher assigned this question:", "Treat this as a competition problem.",
                   "Please answer the following:", "Take your time with this one.", "New exercise.",
                   "Solve it and explain how you got there."),
        "after": ("Put the result on the last line.", "Keep the explanation brief.",
                  "I will check your answer against the key.", "Use exact values, not decimals.",
                  "Thanks in advance!", "Show the key steps only.", "Label your final answer.",
                  "Answer in one sentence if you can.", "Do not skip any steps."),
    },
}

# Word swaps that change the question asked (antonyms / different operations); each is tried both ways.
QUESTION_SWAPS: dict[str, tuple[tuple[str, str], ...]] = {
    "tune": (("sum", "product"), ("largest", "smallest"), ("even", "odd"), ("maximum", "minimum"),
             ("more", "fewer"), ("increases", "decreases"), ("increased", "decreased"), ("positive", "negative"),
             ("before", "after"), ("first", "last"), ("at least", "at most"), ("is divisible", "is not divisible"),
             ("buys", "sells"), ("taller", "shorter")),
    "held": (("greatest", "least"), ("difference", "sum"), ("longest", "shortest"), ("highest", "lowest"),
             ("larger", "smaller"), ("older", "younger"), ("faster", "slower"), ("above", "below"),
             ("inside", "outside"), ("gains", "loses"), ("perimeter", "area"), ("remainder", "quotient"),
             ("minimum", "maximum"), ("are not", "are"), ("prime", "composite"), ("mean", "median"),
             ("exactly", "at least"), ("bought", "sold"), ("add", "subtract")),
    "fresh": (("numerator", "denominator"), ("horizontal", "vertical"), ("rows", "columns"), ("vertices", "edges"),
              ("height", "width"), ("inscribed", "circumscribed"), ("tens digit", "units digit"),
              ("earliest", "latest"), ("left", "right"), ("north", "south"), ("upstream", "downstream"),
              ("always", "never"), ("with replacement", "without replacement"), ("profit", "loss"),
              ("earned", "spent"), ("arrives", "leaves"), ("wins", "loses"), ("men", "women"),
              ("adults", "children"), ("real part", "imaginary part"), ("surface area", "volume"),
              ("diagonal", "side"), ("interior", "exterior"), ("heavier", "lighter"), ("cheapest", "most expensive"),
              ("integers", "real numbers"), ("digits", "letters")),
}

# Objects whose swap changes the problem (shapes, units, coins, measured quantities).
OBJECT_SWAPS: dict[str, tuple[tuple[str, str], ...]] = {
    "tune": (("square", "circle"), ("minutes", "hours"), ("dimes", "nickels"), ("cube", "sphere"),
             ("centimeters", "millimeters"), ("miles", "kilometers"), ("weeks", "months"), ("pentagon", "hexagon"),
             ("dice", "coins"), ("cups", "pints")),
    "held": (("triangle", "hexagon"), ("days", "weeks"), ("quarters", "pennies"), ("cylinder", "cone"),
             ("inches", "feet"), ("radius", "diameter"), ("seconds", "minutes"), ("rectangle", "rhombus"),
             ("octagon", "decagon"), ("meters", "yards"), ("cards", "dice")),
    "fresh": (("ounces", "pounds"), ("liters", "milliliters"), ("grams", "kilograms"), ("sphere", "hemisphere"),
              ("prism", "pyramid"), ("feet", "yards"), ("centimeters", "meters"), ("tetrahedron", "cube"),
              ("parallelogram", "trapezoid"), ("ellipse", "parabola"), ("chord", "diameter"), ("dollars", "cents"),
              ("percent", "fraction"), ("hours", "days"), ("years", "decades")),
}

# Words to put in "arrange the letters of the word X" look-alikes, and first names for name swaps.
LETTER_WORDS: dict[str, tuple[str, ...]] = {
    "tune": ("LEVEL", "COOKIE", "BALLOON", "PEPPER", "STATISTICS", "COFFEE", "LETTER", "GAMMA", "ERROR"),
    "held": ("PUPPY", "REFERENCE", "BOOKKEEPER", "ADDRESS", "TOMORROW", "CALCULUS", "SEESAW", "COMMITTEE"),
    "fresh": ("CANNON", "ASSESS", "HAPPINESS", "PARALLEL", "GIGGLE", "BOOKSHELF", "TENNESSEE"),
}
NAMES: dict[str, tuple[str, ...]] = {
    "tune": ("Olivia", "Marcus", "Priya", "Diego", "Hannah", "Kenji", "Fatima", "Lucas", "Zoe", "Tariq"),
    "held": ("Beatrice", "Rafael", "Ingrid", "Kwame", "Sofia", "Dmitri", "Aisha", "Connor", "Mei", "Santiago"),
    "fresh": ("Yusuf", "Leilani", "Bjorn", "Chidi", "Anouk", "Mateo", "Svetlana", "Haruto", "Nkechi", "Ezra"),
}

# The built-in wrapper list as it was when the set was built (a copy, so that a change to the shared list in
# curate/text/normalize.py does not change the labelled set or its hash); used by the `wrapper_builtin` kind.
BUILTIN_WRAPPERS_AT_BUILD: tuple[str, ...] = (
    'Please reason step by step, and put your final answer within \\boxed{}.',
    "Let's think step by step and output the final answer within \\boxed{}.",
    'Return your final response within \\boxed{}.',
    'Put your final answer within \\boxed{}.',
    'Put your final answer in \\boxed{}.',
    'Please put your final answer in a box.',
    'Solve the following math problem step by step.',
    'Solve the following math problem.',
    'Solve the following problem step by step.',
    'Solve the following problem.',
    'Solve the following coding problem using the programming language python:',
    'Please solve the programming task below using a self-contained code snippet in a markdown code block.',
    'Please complete the following python code precisely:',
    'Please complete the code below to solve above prblem:',
    'You are an expert Python programmer. You will be given a question (problem specification) and will generate a correct Python program that matches the specification and passes all tests.',
    'Answer the following question.',
    'Think step by step.',
    "Let's think step by step.",
    'Problem:',
    'Question:',
)
