"""The labelled near-duplicate problem set (frozen set `dedup_heldout`, bench/frozen.py): the shared types and
builder pieces of every dedup labelled set, and the builder of its tuning and held-out parts.

Every base problem (MATH test, MATH train, AIME 1983-2023, GSM8K train) belongs to one part by a hash of its
text, so the two parts share no problem; the generated variants of each part use that part's word pools
(bench/dedup/pools.py: disjoint synonym tables, instruction wrappers, antonym and object swaps), so the
held-out part measures rules on rewordings they were not tuned on. The held-out part's sha256 is recorded in
bench/records/dedup_heldout.sha256 (written before the rules were tuned); `python -m bench.frozen --check`
and bench/dedup/quality.py check it.

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

import gzip
import hashlib
import json
import random
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.dedup.pools import LETTER_WORDS
from bench.dedup.variants import make_variant

PARTS = ("tune", "held")
_TOK = re.compile(r"[a-z0-9]+")


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


def read_jsonl(path: Path) -> Iterator[dict]:
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
    for r in read_jsonl(shared / "benchmarks" / "math_test5000.jsonl.gz"):
        out.append({"problem": r["problem"], "answer": r.get("answer"), "solution": r.get("solution"),
                    "origin": "math_test5000"})
    for name in ("deepscaler_math_train", "deepscaler_aime_1983_2023", "gsm8k_train_human"):
        for r in read_jsonl(shared / "sft_sources" / f"{name}.jsonl.gz"):
            out.append({"problem": r["problem"], "answer": r.get("ground_truth"), "solution": None, "origin": name})
    return [p for p in out if p["problem"] and p["answer"]]


def tokens(text: str) -> list[str]:
    """The builder's own tokens: lower-case alphanumeric runs (\\dfrac = \\frac)."""
    return _TOK.findall(text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").lower())


def answer_key(ans: object) -> str:
    """Answer for equality tests: tokens without frac/boxed/text/dollar words, integers without leading zeros."""
    toks = [t for t in tokens(str(ans)) if t not in ("frac", "boxed", "text", "mbox", "dollars", "left", "right")]
    return " ".join(t.lstrip("0") or "0" if t.isdigit() else t for t in toks)


# --------------------------------------------------------------------------- real pairs


def ngrams(toks: list[str], n: int) -> set[str]:
    return {" ".join(toks[i:i + n]) for i in range(max(1, len(toks) - n + 1))}


def mine_cross_source(left: list[dict], right: list[dict], min_containment: float = 0.5) -> list[tuple[dict, dict]]:
    """Pairs (l, r) whose 13-gram sets overlap on >= min_containment of the smaller set, or whose tokens are
    equal (the MANIFEST's method); the best r per l."""
    index: dict[str, list[int]] = defaultdict(list)
    rgrams = [ngrams(tokens(r["problem"]), 13) for r in right]
    for j, g in enumerate(rgrams):
        for s in g:
            index[s].append(j)
    out = []
    for item in left:
        g = ngrams(tokens(item["problem"]), 13)
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
    for r in read_jsonl(shared / "benchmarks" / "math500.jsonl"):
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
    same_numbers = sorted(NUMS_RE.findall(a["problem"])) == sorted(NUMS_RE.findall(b["problem"]))
    if same_answer:
        return True if same_numbers else None
    return False if tokens(a["problem"]) != tokens(b["problem"]) else None


NUMS_RE = re.compile(r"\d+")


def mine_same_template(problems: list[dict], min_jaccard: float = 0.4) -> list[LabelledPair]:
    """Real pairs of different problems (different answers, different text) whose word-3-gram Jaccard >= 0.4;
    pairs where one problem holds the other's whole text are left out (a problem and its extension)."""
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=min_jaccard, num_perm=64)
    grams: list[set[str]] = []
    out: list[LabelledPair] = []
    for i, p in enumerate(problems):
        g = ngrams(tokens(p["problem"]), 3)
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


LETTERS_RE = re.compile(r"(letters of the word\s*\$?\\?(?:text\{)?)([A-Z]+)")


def letter_pairs(problems: list[dict]) -> list[LabelledPair]:
    """"Arrange the letters of the word X" problems: real pairs of two different words, and each problem with
    its word swapped for one of the part's pool words."""
    real = sorted({p["problem"] for p in problems if LETTERS_RE.search(p["problem"])})
    out = []
    for i, a in enumerate(real):
        for b in real[i + 1:]:
            out.append(LabelledPair(a, b, False, "letters_real", part_of(a)))
        part = part_of(a)
        for w in LETTER_WORDS[part]:
            out.append(LabelledPair(a, LETTERS_RE.sub(lambda m, w=w: m.group(1) + w, a, count=1), False,
                                    "letters_changed", part))
    return out


def response_groups(shared: Path, max_per_part: int) -> list[ResponseGroup]:
    """Real prompts with several distinct responses (sampled solutions of one problem)."""
    by_prompt: dict[str, list[str]] = defaultdict(list)
    for name in ("qwen25_math_rm_example", "qwen25_32b_instruct_aime24", "gsm8k_gpt3_model_solutions",
                 "skyt1_longcot_eval_traces"):
        for r in read_jsonl(shared / "sft_sources" / f"{name}.jsonl.gz"):
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


def build_labelled_set(shared: str | Path, *, n_per_kind: int, seed: int, positive: tuple[str, ...],
                       negative: tuple[str, ...]) -> LabelledSet:
    """Both parts: `n_per_kind` pairs of each generated kind (`positive` then `negative`, bench/dedup/variants.py
    `make_variant` with the part's pools) per part, the real pairs (capped at 4x that per kind and part) and up
    to `n_per_kind` response groups per part. Each base problem is used by one kind."""
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
        pairs += generated_pairs(positive, negative, lambda kind, part=part: make_variant(kind, part),
                                 lambda _kind, base=base: base, n_per_kind, seed, part, reuse=False)
    return LabelledSet(pairs, response_groups(shared, n_per_kind))


def generated_pairs(positive: tuple[str, ...], negative: tuple[str, ...], make_for: Callable[[str], Callable],
                    base_for: Callable[[str], list[str]], n_per_kind: int, seed: int, part: str,
                    reuse: bool = True) -> list[LabelledPair]:
    """Up to `n_per_kind` generated pairs per kind (positive kinds first, then negative), each from a base text
    of `base_for(kind)` and `make_for(kind)(text, rng)` (None or an unchanged text: no pair); a base text is used
    by one kind while unused ones remain, and, with `reuse`, again in a second pass when they run out. Every kind
    draws from its own seeded rng, so adding a kind does not change the others."""
    pairs: list[LabelledPair] = []
    taken: set[str] = set()
    for kind in positive + negative:
        make, made = make_for(kind), 0
        krng = random.Random(f"{seed}-{part}-{kind}")
        for second in (False, True) if reuse else (False,):
            for text in base_for(kind):
                if made >= n_per_kind:
                    break
                if (text in taken) != second:
                    continue
                v = make(text, krng)
                if v and v.strip() != text.strip():
                    pairs.append(LabelledPair(text, v, kind in positive, kind, part))
                    taken.add(text)
                    made += 1
    return pairs


def summary(ls: LabelledSet) -> dict[str, dict[str, int]]:
    """Pairs per (part, kind), and response groups / rows per part."""
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for p in ls.pairs:
        out[p.part][p.kind] = out[p.part].get(p.kind, 0) + 1
    for g in ls.groups:
        out[g.part]["multi_response_groups"] = out[g.part].get("multi_response_groups", 0) + 1
        out[g.part]["multi_response_rows"] = out[g.part].get("multi_response_rows", 0) + len(g.responses)
    return dict(out)
