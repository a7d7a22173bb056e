"""A labelled near-duplicate problem set built from ../shared/data, split into a tuning and a held-out part.

    python bench/labelled_sets.py [--write-hash]    # build, print counts per part and kind, and the hash

Every base problem (MATH test, MATH train, AIME 1983-2023, GSM8K train) belongs to one part by a hash of its
text, so the two parts share no problem; the generated variants of each part use that part's word pools
(bench/dedup_pools.py: disjoint synonym tables, instruction wrappers, antonym and object swaps), so the
held-out part measures rules on rewordings they were not tuned on. The held-out part's sha256 is recorded in
bench/dedup_heldout.sha256 (written before the rules were tuned); bench/dedup.py checks it.

Positives (same problem): real cross-source copies (MATH-500 vs MATH test by identical solution; the
DeepScaleR AIME pool and the MATH train pool vs MATH test, mined by 13-gram containment, same answer) and
generated variants: one-word synonyms anywhere in the prose (verbs, nouns, quantifiers, adjectives),
instruction wrappers before / after, reformatting (LaTeX delimiters and spacing, whitespace, case,
punctuation), combinations, the built-in wrappers and the old small edits.
Negatives (different problems): one number changed, two numbers swapped, a word swap that changes the question
asked (sum/product, largest/smallest, even/odd, at least/at most, "not" ...), a changed object (shape, unit,
coin), a changed name, a changed variable, "arrange the letters of X" look-alikes (real and generated),
mined real look-alikes with different answers (same template), and real cross-source look-alikes with
different answers. Multi-response groups (one prompt, several real responses) must keep every response.

The builder uses its own tokeniser, not curate.text.normalize, so a change to the shared normalisation does
not change the set (or its hash). Everything is seeded.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dedup_pools import (  # noqa: E402
    BUILTIN_WRAPPERS_AT_BUILD,
    LETTER_WORDS,
    NAMES,
    OBJECT_SWAPS,
    QUESTION_SWAPS,
    SYNONYMS,
    WRAPPERS,
)

PARTS = ("tune", "held")
_REPO = Path(__file__).resolve().parents[1]
SHARED = next((d / "shared" / "data" for d in (_REPO.parent, _REPO.parent.parent) if (d / "shared" / "data").is_dir()),
              _REPO.parent / "shared" / "data")  # ../shared/data (main checkout) or ../../shared/data (worktree)
HASH_FILE = Path(__file__).resolve().parent / "dedup_heldout.sha256"
SYNONYM_KINDS = tuple(f"synonym_{c}" for c in ("verb", "noun", "quantifier", "adjective"))
POSITIVE_GENERATED = (*SYNONYM_KINDS, "wrapper_unseen_before", "wrapper_unseen_after", "reformat",
                      "combo_reformat_synonym", "combo_wrapper_synonym", "combo_wrapper_reformat_synonym",
                      "wrapper_builtin", "near_copy_small")
NEGATIVE_GENERATED = ("number_changed", "numbers_swapped", "question_changed", "object_changed", "name_changed",
                      "variable_changed")
REAL_POSITIVE = ("real_math500_vs_math_test", "real_aime_vs_math_test", "real_math_train_vs_math_test")
REAL_NEGATIVE = ("real_cross_source_different", "same_template_real", "letters_real", "letters_changed")

_MATH = re.compile(r"\$\$.+?\$\$|\$.+?\$|\\\(.+?\\\)|\\\[.+?\\\]|\\begin\{.+?\\end\{[a-z*]+\}", re.DOTALL)
_NUM = re.compile(r"(?<![\w.])\d+(?![\w.])")
_TOK = re.compile(r"[a-z0-9]+")
_FIXED = re.compile(r"\b(how|so|as|too|in) $", re.IGNORECASE)  # "how many", "in total": fixed phrases, not swapped
_ARTICLE = re.compile(r"\b(the|a|an) ", re.IGNORECASE)
_TAILS = (" Show your work.", " Give your answer in simplest form.", " Explain your reasoning.", " Justify your answer.")
_COMMON_NAMES = frozenset("""James John Robert Michael William David Richard Joseph Thomas Charles Mary Patricia Jennifer
Linda Elizabeth Barbara Susan Jessica Sarah Karen Nancy Lisa Betty Margaret Sandra Ashley Emily Donna Michelle Carol
Amanda Melissa Deborah Stephanie Rebecca Laura Sharon Cynthia Kathleen Amy Angela Anna Brenda Emma Pamela Nicole
Samantha Katherine Christine Rachel Janet Catherine Maria Heather Diane Julie Joyce Victoria Kelly Christina Lauren
Joan Evelyn Olivia Judith Megan Cheryl Martha Andrea Frances Hannah Jacqueline Ann Gloria Jean Kathryn Alice Teresa
Sara Janice Doris Madison Julia Grace Judy Abigail Marie Denise Beverly Amber Theresa Marilyn Danielle Diana Brittany
Natalie Sophia Rose Isabella Alexis Kayla Charlotte Tom Tim Jim Bob Bill Joe Sam Ben Dan Max Jack Mark Paul Steven
Kevin Brian George Edward Ronald Anthony Jason Matthew Gary Timothy Jose Larry Jeffrey Frank Scott Eric Stephen Andrew
Raymond Gregory Joshua Jerry Dennis Walter Patrick Peter Harold Douglas Henry Carl Arthur Ryan Roger Juan Jacob Albert
Nathan Tyler Aaron Adam Zachary Kyle Ethan Noah Liam Mason Logan Lucas Oliver Leo Carlos Luis Mike Alex Chris Tony
Greg Jane Kate Lily Mia Ella Chloe Zoe Lucy Ruby Ivy Nina Tina Jenny Penny Molly Holly Sally Jill Jen Beth Amy
Natalia Weng Betty Julie James Albert Tobias Randy Mrs Mr""".split())


@dataclass(frozen=True)
class LabelledPair:
    """Two problem statements, whether they are the same problem, how the pair was made, and its part."""

    a: str
    b: str
    duplicate: bool
    kind: str
    part: str


@dataclass(frozen=True)
class ResponseGroup:
    """One real prompt with several real responses (every distinct response must be kept)."""

    prompt: str
    responses: tuple[str, ...]
    kind: str
    part: str


@dataclass
class LabelledSet:
    """Pairs and response groups of both parts."""

    pairs: list[LabelledPair] = field(default_factory=list)
    groups: list[ResponseGroup] = field(default_factory=list)

    def part(self, name: str) -> LabelledSet:
        return LabelledSet([p for p in self.pairs if p.part == name], [g for g in self.groups if g.part == name])

    def digest(self) -> str:
        """sha256 of the set's canonical JSON lines (pairs then groups, each sorted)."""
        lines = sorted(json.dumps(asdict(p), sort_keys=True) for p in self.pairs)
        lines += sorted(json.dumps({**asdict(g), "responses": list(g.responses)}, sort_keys=True) for g in self.groups)
        return hashlib.sha256("\n".join(lines).encode()).hexdigest()


# --------------------------------------------------------------------------- loading


def _jsonl(path: Path) -> Iterator[dict]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def part_of(text: str) -> str:
    """The part a problem belongs to (a hash of its stripped text: the same problem always lands the same)."""
    return PARTS[hashlib.sha1(" ".join(_TOK.findall(text.lower())).encode()).digest()[0] & 1]


def load_problems(shared: Path) -> list[dict]:
    """Real problems with answers: MATH test (5000), MATH train pool, AIME 1983-2023, GSM8K train."""
    out = []
    for r in _jsonl(shared / "benchmarks" / "math_test5000.jsonl.gz"):
        out.append({"problem": r["problem"], "answer": r.get("answer"), "solution": r.get("solution"),
                    "origin": "math_test5000"})
    for name in ("deepscaler_math_train", "deepscaler_aime_1983_2023", "gsm8k_train_human"):
        for r in _jsonl(shared / "sft_sources" / f"{name}.jsonl.gz"):
            out.append({"problem": r["problem"], "answer": r.get("ground_truth"), "solution": None, "origin": name})
    return [p for p in out if p["problem"] and p["answer"]]


def tokens(text: str) -> list[str]:
    """The builder's own tokens: lower-case alphanumeric runs (\\dfrac = \\frac)."""
    return _TOK.findall(text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").lower())


def answer_key(ans: object) -> str:
    """Answer for equality tests: tokens without frac/boxed/text/dollar words, integers without leading zeros."""
    toks = [t for t in tokens(str(ans)) if t not in ("frac", "boxed", "text", "mbox", "dollars", "left", "right")]
    return " ".join(t.lstrip("0") or "0" if t.isdigit() else t for t in toks)


# --------------------------------------------------------------------------- text edits


def _prose_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of the text outside LaTeX math regions."""
    spans, pos = [], 0
    for m in _MATH.finditer(text):
        spans.append((pos, m.start()))
        pos = m.end()
    spans.append((pos, len(text)))
    return [(a, b) for a, b in spans if b > a]


def substitute(text: str, pairs: tuple[tuple[str, str], ...], rng: random.Random,
               both_ways: bool = False) -> str | None:
    """Replace one whole-word occurrence (outside math) of a pair's first word by its second, chosen at random."""
    pairs = pairs + tuple((b, a) for a, b in pairs) if both_ways else pairs
    found: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for a, b in pairs:
        pat = re.compile(rf"(?<![\w\\-]){re.escape(a)}(?![\w-])")
        for s, e in _prose_spans(text):
            found.setdefault((a, b), []).extend((m.start(), m.end()) for m in pat.finditer(text, s, e)
                                                if not _FIXED.search(text[max(0, m.start() - 6):m.start()]))
    present = sorted(k for k, v in found.items() if v)
    if not present:
        return None
    a, b = rng.choice(present)  # a random pair first (not a random spot: frequent words would dominate)
    s, e = rng.choice(found[(a, b)])
    return text[:s] + b + text[e:]


def synonym_variant(text: str, rng: random.Random, part: str, category: str) -> str | None:
    return substitute(text, SYNONYMS[part][category], rng)


def any_synonym(text: str, rng: random.Random, part: str) -> str | None:
    cats = list(SYNONYMS[part])
    rng.shuffle(cats)
    return next((v for c in cats if (v := synonym_variant(text, rng, part, c))), None)


def wrap(text: str, rng: random.Random, part: str, side: str) -> str:
    """Put one of the part's instructions before or after the problem (random separator and case)."""
    w = rng.choice(WRAPPERS[part][side])
    w = w.lower() if rng.random() < 0.15 else w
    sep = rng.choice(["\n\n", "\n", " "])
    return f"{w}{sep}{text}" if side == "before" else f"{text.rstrip()}{sep}{w}"


def reformat(text: str, rng: random.Random) -> str:
    """Change presentation only: LaTeX delimiters / \\dfrac / \\left( / spacing, whitespace, case, punctuation."""
    t = re.sub(r"(?<!\\)\(", r"\\left(", text).replace(")", "\\right)") if rng.random() < 0.25 else text
    t = t.replace("\\right\\right)", "\\right)").replace("\\\\right)", "\\)")
    t = re.sub(r"\$([^$\d][^$]*)\$", lambda m: rf"\({m.group(1)}\)", t) if rng.random() < 0.4 else t  # not $5 ... $6
    t = t.replace("\\frac", "\\dfrac") if rng.random() < 0.4 else t
    t = re.sub(r"([=+<>])", r" \1 ", t) if rng.random() < 0.4 else t
    t = t.replace(", ", " , ") if rng.random() < 0.3 else t
    t = t.rstrip(".") if rng.random() < 0.3 else t
    t = re.sub(r" ", lambda m: rng.choice([" ", " ", "  ", "\n", " \t"]), t)
    t = t.lower() if rng.random() < 0.25 else t
    return t if t != text else text + "  \n"


def number_changed(text: str, rng: random.Random) -> str | None:
    nums = list(_NUM.finditer(text))
    if not nums:
        return None
    m = rng.choice(nums)
    old = int(m.group())
    return text[:m.start()] + str(old + rng.choice([1, 2, 3, 5, 10]) if old < 10_000 else old + 1) + text[m.end():]


def numbers_swapped(text: str, rng: random.Random) -> str | None:
    nums = list(_NUM.finditer(text))
    pairs = [(a, b) for i, a in enumerate(nums) for b in nums[i + 1:] if a.group() != b.group()]
    if not pairs:
        return None
    a, b = rng.choice(pairs)
    return text[:a.start()] + b.group() + text[a.end():b.start()] + a.group() + text[b.end():]


def name_changed(text: str, rng: random.Random, part: str) -> str | None:
    """Every occurrence of one common first name replaced by a name from the part's pool."""
    found = sorted({w for w in re.findall(r"\b[A-Z][a-z]+\b", text) if w in _COMMON_NAMES})
    if not found:
        return None
    old = rng.choice(found)
    new = rng.choice([n for n in NAMES[part] if n not in text])
    return re.sub(rf"\b{old}\b", new, text)


def variable_changed(text: str, rng: random.Random) -> str | None:
    """In one math region, one variable replaced by another variable the problem already uses."""
    asy = [(m.start(), m.end()) for m in re.finditer(r"\[asy\].*?\[/asy\]", text, re.DOTALL)]
    regions = [r for r in _MATH.finditer(text) if not any(a <= r.start() < b for a, b in asy)]  # not figure labels
    var = re.compile(r"(?<![\\A-Za-z])([a-zA-Z])(?![A-Za-z])")
    letters = {m.group(1) for r in regions for m in var.finditer(r.group())}
    cands = [(r, v) for r in regions for v in sorted({m.group(1) for m in var.finditer(r.group())})]
    cands = [(r, v) for r, v in cands if len(letters - {v}) >= 1]
    if len(letters) < 2 or not cands:
        return None
    r, v = rng.choice(cands)
    w = rng.choice(sorted(letters - {v}))
    body = var.sub(lambda m: w if m.group(1) == v else m.group(1), r.group())
    return text[:r.start()] + body + text[r.end():]


def near_copy_small(text: str, rng: random.Random) -> str:
    """The old small edits: drop an article or add a short tail."""
    spots = list(_ARTICLE.finditer(text))
    if spots and rng.random() < 0.5:
        m = rng.choice(spots)
        return text[:m.start()] + text[m.end():]
    return text.rstrip() + rng.choice(_TAILS)


def _maker(kind: str, part: str) -> Callable[[str, random.Random], str | None]:
    """The variant function of a generated kind for one part."""
    if kind.startswith("synonym_"):
        return lambda t, r: synonym_variant(t, r, part, kind.removeprefix("synonym_"))
    side_of = {"wrapper_unseen_before": "before", "wrapper_unseen_after": "after"}
    if kind in side_of:
        return lambda t, r: wrap(t, r, part, side_of[kind])

    def wrapped_syn(t: str, r: random.Random, fmt: bool) -> str | None:
        v = any_synonym(t, r, part)
        v = reformat(v, r) if v and fmt else v
        return wrap(v, r, part, r.choice(["before", "after"])) if v else None

    return {
        "reformat": reformat,
        "combo_reformat_synonym": lambda t, r: (reformat(v, r) if (v := any_synonym(t, r, part)) else None),
        "combo_wrapper_synonym": lambda t, r: wrapped_syn(t, r, False),
        "combo_wrapper_reformat_synonym": lambda t, r: wrapped_syn(t, r, True),
        "wrapper_builtin": lambda t, r: (f"{r.choice(BUILTIN_WRAPPERS_AT_BUILD)}\n\n{t}" if r.random() < 0.5
                                         else f"{t}\n{r.choice(BUILTIN_WRAPPERS_AT_BUILD)}"),
        "near_copy_small": near_copy_small,
        "number_changed": number_changed,
        "numbers_swapped": numbers_swapped,
        "question_changed": lambda t, r: substitute(t, QUESTION_SWAPS[part], r, both_ways=True),
        "object_changed": lambda t, r: substitute(t, OBJECT_SWAPS[part], r, both_ways=True),
        "name_changed": lambda t, r: name_changed(t, r, part),
        "variable_changed": variable_changed,
    }[kind]


# --------------------------------------------------------------------------- real pairs


def _grams(toks: list[str], n: int) -> set[str]:
    return {" ".join(toks[i:i + n]) for i in range(max(1, len(toks) - n + 1))}


def mine_cross_source(left: list[dict], right: list[dict], min_containment: float = 0.5) -> list[tuple[dict, dict]]:
    """Pairs (l, r) whose 13-gram sets overlap on >= min_containment of the smaller set, or whose tokens are
    equal (the MANIFEST's method); the best r per l."""
    index: dict[str, list[int]] = defaultdict(list)
    rgrams = [_grams(tokens(r["problem"]), 13) for r in right]
    for j, g in enumerate(rgrams):
        for s in g:
            index[s].append(j)
    out = []
    for item in left:
        g = _grams(tokens(item["problem"]), 13)
        hits: dict[int, int] = defaultdict(int)
        for s in g:
            for j in index.get(s, ()):
                hits[j] += 1
        best = max(hits.items(), key=lambda kv: (kv[1] / max(1, min(len(g), len(rgrams[kv[0]]))), -kv[0]), default=None)
        if best and best[1] / max(1, min(len(g), len(rgrams[best[0]]))) >= min_containment:
            out.append((item, right[best[0]]))
    return out


def real_pairs(shared: Path, problems: list[dict]) -> list[LabelledPair]:
    """MATH-500 vs MATH test (identical solution); AIME pool and MATH train pool vs MATH test (mined): same
    answer = same problem, a different answer = a real look-alike."""
    test = [p for p in problems if p["origin"] == "math_test5000"]
    by_sol = {p["solution"].strip(): p for p in test}
    out = []
    for r in _jsonl(shared / "benchmarks" / "math500.jsonl"):
        twin = by_sol.get((r.get("solution") or "").strip())
        if twin is not None:
            out.append(LabelledPair(r["problem"], twin["problem"], True, "real_math500_vs_math_test", part_of(twin["problem"])))
    for origin, kind in (("deepscaler_aime_1983_2023", "real_aime_vs_math_test"),
                         ("deepscaler_math_train", "real_math_train_vs_math_test")):
        for a, b in mine_cross_source([p for p in problems if p["origin"] == origin], test):
            label = cross_source_label(a, b)
            if label is not None:
                out.append(LabelledPair(a["problem"], b["problem"], label, kind if label else "real_cross_source_different",
                                        part_of(b["problem"])))
    return out


def cross_source_label(a: dict, b: dict) -> bool | None:
    """Label of a mined cross-source pair: the same problem when the answers and the numbers agree; different
    when the answers differ and the texts do too; None (left out) otherwise: the same answer with different
    numbers (by hand, these were different problems that share an answer, e.g. two graph-transformation
    multiple-choice items answered "B") and the same text with different answers (answer-format noise)."""
    same_answer = answer_key(a["answer"]) == answer_key(b["answer"])
    same_numbers = sorted(_NUMS.findall(a["problem"])) == sorted(_NUMS.findall(b["problem"]))
    if same_answer:
        return True if same_numbers else None
    return False if tokens(a["problem"]) != tokens(b["problem"]) else None


_NUMS = re.compile(r"\d+")


def mine_same_template(problems: list[dict], min_jaccard: float = 0.4) -> list[LabelledPair]:
    """Real pairs of different problems (different answers, different text) whose word-3-gram Jaccard >= 0.4;
    pairs where one problem holds the other's whole text are left out (a problem and its extension)."""
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=min_jaccard, num_perm=64)
    grams: list[set[str]] = []
    out: list[LabelledPair] = []
    for i, p in enumerate(problems):
        g = _grams(tokens(p["problem"]), 3)
        grams.append(g)
        mh = MinHash(num_perm=64, seed=7)
        mh.update_batch([s.encode() for s in g])
        for j in sorted(lsh.query(mh)):
            a = problems[j]
            ta, tb = " ".join(tokens(a["problem"])), " ".join(tokens(p["problem"]))
            if ta in tb or tb in ta or answer_key(a["answer"]) == answer_key(p["answer"]):
                continue
            if len(grams[j] & g) >= min_jaccard * len(grams[j] | g):
                out.append(LabelledPair(a["problem"], p["problem"], False, "same_template_real", part_of(a["problem"])))
        lsh.insert(i, mh)
    return out


_LETTERS = re.compile(r"(letters of the word\s*\$?\\?(?:text\{)?)([A-Z]+)")


def letter_pairs(problems: list[dict]) -> list[LabelledPair]:
    """"Arrange the letters of the word X" problems: real pairs of two different words, and each problem with
    its word swapped for one of the part's pool words."""
    real = sorted({p["problem"] for p in problems if _LETTERS.search(p["problem"])})
    out = []
    for i, a in enumerate(real):
        for b in real[i + 1:]:
            out.append(LabelledPair(a, b, False, "letters_real", part_of(a)))
        part = part_of(a)
        for w in LETTER_WORDS[part]:
            out.append(LabelledPair(a, _LETTERS.sub(lambda m, w=w: m.group(1) + w, a, count=1), False,
                                    "letters_changed", part))
    return out


def response_groups(shared: Path, max_per_part: int) -> list[ResponseGroup]:
    """Real prompts with several distinct responses (sampled solutions of one problem)."""
    by_prompt: dict[str, list[str]] = defaultdict(list)
    for name in ("qwen25_math_rm_example", "qwen25_32b_instruct_aime24", "gsm8k_gpt3_model_solutions",
                 "skyt1_longcot_eval_traces"):
        for r in _jsonl(shared / "sft_sources" / f"{name}.jsonl.gz"):
            if r.get("problem") and r.get("response") and r["response"] not in by_prompt[r["problem"]]:
                by_prompt[r["problem"]].append(r["response"])
    groups = [ResponseGroup(p, tuple(rs), "multi_response", part_of(p)) for p, rs in sorted(by_prompt.items())
              if len(rs) >= 2]
    rng = random.Random(1)
    out = []
    for part in PARTS:
        mine = [g for g in groups if g.part == part]
        out += rng.sample(mine, min(max_per_part, len(mine)))
    return out


# --------------------------------------------------------------------------- the set


def build_labelled_set(shared: str | Path, n_per_kind: int = 150, seed: int = 0) -> LabelledSet:
    """Both parts: `n_per_kind` pairs of each generated kind per part, the real pairs (capped at 4x that per
    kind and part) and up to `n_per_kind` response groups per part. Each base problem is used by one kind."""
    shared = Path(shared)
    problems = load_problems(shared)
    real = real_pairs(shared, problems) + mine_same_template(problems) + letter_pairs(problems)
    pairs: list[LabelledPair] = []
    rng = random.Random(seed)
    for part in PARTS:
        for kind in sorted({p.kind for p in real}):
            mine = sorted((p for p in real if p.kind == kind and p.part == part), key=lambda p: (p.a, p.b))
            pairs += rng.sample(mine, min(len(mine), 4 * n_per_kind))
    used = {x for p in pairs for x in (p.a, p.b)}
    for part in PARTS:
        base = sorted({p["problem"] for p in problems if part_of(p["problem"]) == part
                       and 8 <= len(p["problem"].split()) <= 300 and p["problem"] not in used})
        rng.shuffle(base)
        taken: set[str] = set()
        for kind in POSITIVE_GENERATED + NEGATIVE_GENERATED:
            make, made = _maker(kind, part), 0
            krng = random.Random(f"{seed}-{part}-{kind}")
            for text in base:
                if made >= n_per_kind:
                    break
                if text in taken:
                    continue
                v = make(text, krng)
                if v and v.strip() != text.strip():
                    pairs.append(LabelledPair(text, v, kind in POSITIVE_GENERATED, kind, part))
                    taken.add(text)
                    made += 1
    return LabelledSet(pairs, response_groups(shared, n_per_kind))


def summary(ls: LabelledSet) -> dict[str, dict[str, int]]:
    """Pairs per (part, kind), and response groups / rows per part."""
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for p in ls.pairs:
        out[p.part][p.kind] = out[p.part].get(p.kind, 0) + 1
    for g in ls.groups:
        out[g.part]["multi_response_groups"] = out[g.part].get("multi_response_groups", 0) + 1
        out[g.part]["multi_response_rows"] = out[g.part].get("multi_response_rows", 0) + len(g.responses)
    return dict(out)


def recorded_hash() -> str | None:
    """The held-out hash recorded in bench/dedup_heldout.sha256 (None if the file is missing)."""
    return HASH_FILE.read_text().split()[0] if HASH_FILE.exists() else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", default=str(SHARED))
    ap.add_argument("--write-hash", action="store_true", help="record the held-out part's hash (before tuning!)")
    args = ap.parse_args()
    ls = build_labelled_set(args.shared)
    for part, kinds in summary(ls).items():
        print(part, json.dumps(kinds, sort_keys=True))
    held = ls.part("held")
    digest = held.digest()
    print(f"held-out sha256 {digest} ({len(held.pairs)} pairs, {len(held.groups)} groups); recorded {recorded_hash()}")
    if args.write_hash:
        HASH_FILE.write_text(f"{digest}  held-out part of bench/labelled_sets.py (build_labelled_set defaults): "
                             f"{len(held.pairs)} pairs, {len(held.groups)} response groups\n")


if __name__ == "__main__":
    main()
