"""Labelled sets for the semantic tier (issue 34): rephrased benchmark items and reworded training problems.

    python -m bench.semantic.sets [--write-hash]    # build both sets, print counts per part / kind and digests

Built from real items in ../shared/data with rewording rules written here (no model, no network, seeded):

- **decontamination** (rows checked against the benchmark index): rephrasings of GSM8K test / MATH-500 /
  AIME / AMC items at three levels -- `light` (a few synonyms), `moderate` (most synonyms, unit and number
  restatement, voice change, clause reorder), `heavy` (all of that, a story re-framing around it, the question
  put first or rewritten, sentences reordered) -- all with the same numbers and the same question; look-alikes
  that are different problems: `number_changed` (one number changed, on the original wording or a light
  rewording) and `question_changed` (the question or one condition changed: a carrier word swapped, another
  quantity of the story asked, a negation); `clean` rows: training problems (GSM8K train, MATH train, AIME
  1983-2023) that are not benchmark items.
- **dedup** (pairs of training problems): reworded duplicates of GSM8K train / MATH train problems at the
  same three levels vs number-changed and question-changed look-alikes.

Split: an item (benchmark item or base training problem) and every row made from it is in the held-out part
when sha256(its text) is odd. The held-out parts' digests are recorded in bench/records/semantic_heldout.sha256 (written
before any threshold of the tier was chosen); `--part held` of bench/semantic/eval.py refuses to report a held-out
part whose digest differs.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.paths import RECORDS, SHARED

HASH_FILE = RECORDS / "semantic_heldout.sha256"
LEVELS = ("light", "moderate", "heavy")
DECON_BENCH = ("gsm8k_test.jsonl", "math500.jsonl", "aime2024.jsonl", "amc2023.jsonl")
DEDUP_POOLS = ("gsm8k_train_human.jsonl.gz", "deepscaler_math_train.jsonl.gz")
CLEAN_POOLS = ("gsm8k_train_human.jsonl.gz", "deepscaler_math_train.jsonl.gz", "deepscaler_aime_1983_2023.jsonl.gz")

# --------------------------------------------------------------------------- rewording rules (written here)

# word -> replacements with the same meaning in a word problem (ordinary words, never question carriers)
SYNONYMS: dict[str, tuple[str, ...]] = {
    "buys": ("purchases", "picks up"), "bought": ("purchased", "picked up"), "buy": ("purchase",),
    "sells": ("sells off",), "sold": ("sold off",), "has": ("owns", "possesses"), "have": ("own",),
    "gets": ("receives", "obtains"), "got": ("received", "obtained"), "gives": ("hands", "passes"),
    "gave": ("handed", "passed"), "makes": ("produces", "earns"), "made": ("produced",), "wants": ("wishes",),
    "wanted": ("wished",), "needs": ("requires",), "needed": ("required",), "uses": ("utilizes",),
    "used": ("utilized",), "starts": ("begins",), "started": ("began",), "begins": ("starts",),
    "finishes": ("completes",), "finished": ("completed",), "walks": ("strolls",), "runs": ("jogs",),
    "store": ("shop",), "shop": ("store",), "house": ("home",), "friends": ("pals", "buddies"),
    "friend": ("pal", "buddy"), "children": ("kids",), "kids": ("children",), "car": ("vehicle",),
    "money": ("cash",), "decides": ("chooses",), "decided": ("chose",), "received": ("got",),
    "earns": ("makes",), "earned": ("made",), "spends": ("pays out",), "spent": ("paid out",),
    "every": ("each",), "also": ("as well",), "then": ("after that",), "total": ("overall",),
    "altogether": ("in all",), "remaining": ("left over",), "remainder": ("rest",), "large": ("big",),
    "big": ("large",), "small": ("little",), "little": ("small",), "quickly": ("fast",), "bakes": ("makes",),
    "eats": ("consumes",), "ate": ("consumed",), "takes": ("requires",), "took": ("needed",),
    "puts": ("places",), "put": ("placed",), "collects": ("gathers",), "collected": ("gathered",),
    "find": ("determine", "compute"), "Find": ("Determine", "Compute"), "Compute": ("Calculate", "Find"),
    "compute": ("calculate",), "Calculate": ("Compute", "Work out"), "Determine": ("Find",),
    "suppose": ("assume",), "Suppose": ("Assume",), "Let": ("Take",), "value": ("number",),
    "integer": ("whole number",), "integers": ("whole numbers",), "expression": ("quantity",),
    "equal": ("the same",), "number": ("count",), "several": ("a few",), "purchase": ("buy",),
    "around": ("about",), "approximately": ("roughly",), "each": ("every",), "receive": ("get",),
    "travels": ("goes",), "traveled": ("went",), "drives": ("travels by car",), "weekly": ("every week",),
    "daily": ("every day",), "afterwards": ("later",), "initially": ("at first",), "originally": ("at first",),
}
PHRASES: tuple[tuple[str, str], ...] = (
    ("How much money", "What amount of money"), ("how much money", "what amount of money"),
    ("What is the value of", "Find the value of"), ("What is", "Find"), ("In how many ways", "How many ways are there"),
    ("how many", "what number of"), ("If ", "Given that "), ("If ", "Assuming "), (" but ", " however "),
    ("a lot of", "many"), ("is equal to", "equals"), ("in total", "all together"),
)
UNITS: tuple[tuple[str, str], ...] = (  # unit restatement: the same quantity, other words (numbers kept)
    (r"\$(\d+(?:,\d{3})*(?:\.\d+)?)", r"\1 dollars"), (r"(\d+)%", r"\1 percent"), (r"(\d+) km\b", r"\1 kilometers"),
    (r"(\d+) cm\b", r"\1 centimeters"), (r"(\d+) hours\b", r"\1 hrs"), (r"(\d+) minutes\b", r"\1 mins"),
    (r"(\d+) feet\b", r"\1 ft"), (r"(\d+) pounds\b", r"\1 lbs"),
)
SMALL_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve").split()
FRAMES = (  # story re-framings around the whole problem
    "Here is a word problem for you. {p}", "Consider the following situation. {p}", "Read carefully: {p}",
    "A teacher posed this question to the class. {p}", "Think about this scenario. {p}",
    "{p} Please work it out.", "Try this one. {p}", "The following comes from a practice worksheet. {p}",
)
QUESTION_FIRST = ("{q} Here is the information: {rest}", "{q} Use these facts: {rest}",
                  "Answer the question below. {rest} {q}", "{q} (Background: {rest})")
# question-changed look-alikes: a carrier of the question swapped for one asking something else
QUESTION_SWAPS: tuple[tuple[str, str], ...] = (
    ("more", "fewer"), ("fewer", "more"), ("less", "more"), ("largest", "smallest"), ("smallest", "largest"),
    ("greatest", "least"), ("least", "greatest"), ("maximum", "minimum"), ("minimum", "maximum"),
    ("sum", "product"), ("product", "sum"), ("area", "perimeter"), ("perimeter", "area"), ("profit", "loss"),
    ("total", "difference between the two"), ("left", "used"), ("remaining", "used"), ("positive", "negative"),
    ("even", "odd"), ("odd", "even"), ("per day", "per week"),
    ("every day", "every week"), ("per hour", "per minute"), ("older", "younger"), ("longer", "shorter"),
    ("at least", "at most"), ("at most", "at least"), ("average", "total"), ("remainder", "quotient"),
)

_NOT_THINGS = frozenset("more times will and per the each are was were for than less fewer has had have can with "
                        "from into out off but that this they who which what".split())
_SENT = re.compile(r"(?<=[.?!])\s+(?=[A-Z$\\(])")
_NUM = re.compile(r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?(?![\w])")


def sentences(text: str) -> list[str]:
    """Sentences split after . ? ! before a capital, a $ or a backslash (math-light prose)."""
    return [s.strip() for s in _SENT.split(text.strip()) if s.strip()]


def question_index(sents: list[str]) -> int:
    """The index of the question sentence: the last one ending in ? or starting with an imperative."""
    for i in range(len(sents) - 1, -1, -1):
        s = sents[i]
        if s.endswith("?") or re.match(r"(Find|Compute|Calculate|Determine|What|How|Express|Evaluate|Simplify|Give)\b", s):
            return i
    return len(sents) - 1


def _syn(text: str, rng: random.Random, share: float) -> str:
    def sub(m: re.Match) -> str:
        w = m.group(0)
        alts = SYNONYMS.get(w)
        return rng.choice(alts) if alts and rng.random() < share else w
    return re.sub(r"(?<![\\$\w])[A-Za-z]+(?![\w}])", sub, text)


def _phrases(text: str, rng: random.Random, share: float) -> str:
    for a, b in PHRASES:
        if a in text and rng.random() < share:
            text = text.replace(a, b, 1)
    return text


def _units(text: str, rng: random.Random, share: float) -> str:
    for pat, rep in UNITS:
        if rng.random() < share:
            text = re.sub(pat, rep, text)
    return text


def _number_words(text: str, rng: random.Random, share: float) -> str:
    """Small digit numbers written as words (the same value): "3 apples" -> "three apples"."""
    def sub(m: re.Match) -> str:
        v = m.group(0)
        return SMALL_WORDS[int(v)] if v.isdigit() and int(v) < len(SMALL_WORDS) and rng.random() < share else v
    return re.sub(r"(?<![\w.$^_{\\])\d+(?![\w.,%}])(?= [a-z])", sub, text)


_VOICE = re.compile(r"\b([A-Z][a-z]+) (bought|sold|made|baked|ate|read|planted|picked|found|wrote|painted) "
                    r"(\d+|an?|some) ([a-z]+)")


def _voice(text: str) -> str:
    """Active -> passive for "<Name> <verb> <count> <thing>": "Tom bought 5 pens" -> "5 pens were bought by Tom"."""
    def sub(m: re.Match) -> str:
        name, verb, count, thing = m.groups()
        be = "was" if count in ("a", "an") else "were"
        return f"{count} {thing} {be} {verb} by {name}"
    out = _VOICE.sub(sub, text, count=1)
    return out[0].upper() + out[1:] if out else out


def _reorder(sents: list[str], q: int, rng: random.Random) -> list[str]:
    """Two adjacent statement sentences swapped when the second does not lean on the first (no leading pronoun)."""
    body = list(range(q))
    cands = [i for i in body[1:] if not re.match(r"(He|She|They|It|This|That|These|Those|His|Her|Their|Then|If|So|Each|The rest)\b",
                                                  sents[i])]
    if not cands:
        return sents
    i = rng.choice(cands)
    out = list(sents)
    out[i - 1], out[i] = out[i], out[i - 1]
    return out


def rephrase(text: str, level: str, rng: random.Random) -> str:
    """A rewording of `text` at `level` with the same numbers and the same question."""
    if level == "light":
        t = _syn(text, rng, 0.35)
        return _phrases(t, rng, 0.3) if t == text else t
    sents = sentences(text)
    q = question_index(sents)
    if level == "moderate":
        sents = _reorder(sents, q, rng) if rng.random() < 0.6 else sents
        t = " ".join(sents)
        t = _voice(t) if rng.random() < 0.7 else t
        t = _units(t, rng, 0.7)
        t = _number_words(t, rng, 0.5)
        return _phrases(_syn(t, rng, 0.75), rng, 0.6)
    sents = _reorder(sents, q, rng)
    qs = sents[q] if q < len(sents) else ""
    rest = " ".join(s for k, s in enumerate(sents) if k != q)
    t = _voice(rest)
    t = _units(t, rng, 1.0)
    t = _number_words(t, rng, 0.8)
    t = _phrases(_syn(t, rng, 1.0), rng, 1.0)
    qs = _phrases(_syn(qs, rng, 1.0), rng, 1.0)
    if rest and rng.random() < 0.6:
        t = rng.choice(QUESTION_FIRST).format(q=qs, rest=t)
    else:
        t = f"{t} {qs}".strip()
    return rng.choice(FRAMES).format(p=t)


def change_number(text: str, rng: random.Random) -> str | None:
    """One number of `text` changed (a different problem); None when it has no plain number."""
    nums = [m for m in _NUM.finditer(text) if "." not in m.group(0)]
    if not nums:
        return None
    m = rng.choice(nums)
    v = int(m.group(0).replace(",", ""))
    new = v + rng.choice((1, 2, 3, 5, 10)) if v < 10 else v * rng.choice((2, 3)) if v < 1000 else v + 100 * rng.randint(1, 9)
    return text[:m.start()] + str(new) + text[m.end():]


def change_question(text: str, rng: random.Random) -> str | None:
    """The question or one condition changed (a different problem): a carrier swapped in the question sentence
    (or anywhere), else another quantity of the story asked, else "not" added to a condition; None if none fits."""
    sents = sentences(text)
    q = question_index(sents)
    qs = sents[q] if sents else text
    swaps = [(a, b) for a, b in QUESTION_SWAPS if re.search(rf"\b{re.escape(a)}\b", qs)]
    if swaps:
        a, b = rng.choice(swaps)
        sents[q] = re.sub(rf"\b{re.escape(a)}\b", b, qs, count=1)
        return " ".join(sents)
    m = re.search(r"\b[Hh]ow many ([a-z]+)", qs)
    if m:  # ask about another counted thing of the story
        things = {t for t in re.findall(r"\d+ ([a-z]{3,})", text) if t != m.group(1) and t not in _NOT_THINGS}
        if things:
            thing = rng.choice(sorted(things))
            sents[q] = qs[:m.start(1)] + thing + qs[m.end(1):]
            return " ".join(sents)
    m = re.search(r"\b(is|are) (divisible|prime|positive|real|integers?|even|odd)\b", text)
    if m:
        return text[:m.end(1)] + " not" + text[m.end(1):]
    return None


# --------------------------------------------------------------------------- sets


@dataclass(frozen=True)
class DecontamRow:
    """A training-like prompt and what it should be: `item` = the benchmark item it rephrases (kind light /
    moderate / heavy) or looks like (number_changed / question_changed), None for clean rows."""

    prompt: str
    kind: str
    contaminated: bool
    benchmark: str | None
    item_id: str | None
    part: str


@dataclass(frozen=True)
class DedupPair:
    """Two training problems; `duplicate` = the same problem."""

    a: str
    b: str
    kind: str
    duplicate: bool
    part: str


def part_of(text: str) -> str:
    """"held" when sha256(text) is odd, else "tune"."""
    return "held" if int(hashlib.sha256(text.encode("utf-8")).hexdigest(), 16) & 1 else "tune"


def _read(path: Path) -> list[dict]:
    op = gzip.open if path.name.endswith(".gz") else open
    with op(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _prose(p: str, max_words: int = 90) -> bool:
    """Items the rules can reword: mostly prose, not too long, few LaTeX commands, no figures."""
    return (len(p.split()) <= max_words and p.count("\\") <= 4 and "[asy]" not in p
            and len(re.findall(r"[A-Za-z]{3,}", p)) >= 8)


def build_decontam(shared: Path, per_bench: int = 140, clean: int = 400, seed: int = 34) -> list[DecontamRow]:
    """Rephrasings (level cycling per item), number- and question-changed look-alikes, clean rows."""
    rng = random.Random(seed)
    rows: list[DecontamRow] = []
    for name in DECON_BENCH:
        items = [r for r in _read(shared / "benchmarks" / name) if _prose(r["problem"])]
        rng.shuffle(items)
        for k, it in enumerate(items[:per_bench]):
            p, part = it["problem"], part_of(it["problem"])
            level = LEVELS[k % 3]
            rows.append(DecontamRow(rephrase(p, level, rng), level, True, it["benchmark"], it["id"], part))
            if k % 2 == 0:
                base = p if k % 4 == 0 else rephrase(p, "light", rng)
                v = change_number(base, rng)
                if v and v != base:
                    rows.append(DecontamRow(v, "number_changed", False, it["benchmark"], it["id"], part))
            else:
                v = change_question(p, rng)
                if v and v != p:
                    rows.append(DecontamRow(v, "question_changed", False, it["benchmark"], it["id"], part))
    bench_texts = {r["problem"].strip() for name in DECON_BENCH for r in _read(shared / "benchmarks" / name)}
    pool = [r["problem"] for f in CLEAN_POOLS for r in _read(shared / "sft_sources" / f)
            if r.get("problem") and r["problem"].strip() not in bench_texts and len(r["problem"]) < 2000]
    rng.shuffle(pool)
    rows += [DecontamRow(p, "clean", False, None, None, part_of(p)) for p in pool[:clean]]
    return rows


def build_dedup(shared: Path, per_pool: int = 200, seed: int = 43) -> list[DedupPair]:
    """Reworded duplicates (level cycling per base problem) and number- / question-changed look-alikes."""
    rng = random.Random(seed)
    pairs: list[DedupPair] = []
    for f in DEDUP_POOLS:
        seen: set[str] = set()
        base = []
        for r in _read(shared / "sft_sources" / f):
            p = r.get("problem") or ""
            if _prose(p) and p not in seen:
                seen.add(p)
                base.append(p)
        rng.shuffle(base)
        for k, p in enumerate(base[:per_pool]):
            part = part_of(p)
            level = LEVELS[k % 3]
            pairs.append(DedupPair(p, rephrase(p, level, rng), level, True, part))
            v = change_number(p, rng) if k % 2 == 0 else change_question(p, rng)
            if v and v != p:
                pairs.append(DedupPair(p, v, "number_changed" if k % 2 == 0 else "question_changed", False, part))
    return pairs


def digest(records: list) -> str:
    """sha256 over the records' JSON lines (sorted keys), in order."""
    h = hashlib.sha256()
    for r in records:
        h.update(json.dumps(asdict(r), sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n")
    return h.hexdigest()


def held_digests_of(decontam: list, dedup: list) -> dict[str, str]:
    """{"decontam": digest, "dedup": digest} of the held-out rows of two sets."""
    return {"decontam": digest([r for r in decontam if r.part == "held"]),
            "dedup": digest([p for p in dedup if p.part == "held"])}


def held_digests(shared: Path = SHARED) -> dict[str, str]:
    """The held-out parts' digests of this module's sets."""
    return held_digests_of(build_decontam(shared), build_dedup(shared))


def read_digests(path: Path) -> dict[str, str]:
    """The digests recorded in `path` ({} when absent)."""
    if not path.exists():
        return {}
    return {line.split()[1]: line.split()[0] for line in path.read_text().splitlines() if line.strip()}


def recorded() -> dict[str, str]:
    """The digests recorded in HASH_FILE."""
    return read_digests(HASH_FILE)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default=str(SHARED))
    ap.add_argument("--write-hash", action="store_true")
    ap.add_argument("--check", action="store_true", help="exit 1 when the held-out digests differ from the recorded")
    ap.add_argument("--show", type=int, default=0, help="print N examples per kind (tuning part only)")
    args = ap.parse_args()
    shared = Path(args.shared)
    dec, ded = build_decontam(shared), build_dedup(shared)
    from collections import Counter

    print("decontam", sorted(Counter((r.part, r.kind) for r in dec).items()))
    print("dedup", sorted(Counter((p.part, p.kind) for p in ded).items()))
    if args.show:
        shown = Counter()
        for r in dec:
            if r.part == "tune" and shown[r.kind] < args.show:
                shown[r.kind] += 1
                print(f"[{r.kind}] {r.prompt}\n")
    got = held_digests(shared)
    print("held digests", got, "recorded", recorded())
    if args.write_hash:
        HASH_FILE.write_text("".join(f"{v} {k} held-out part of bench/semantic/sets.py (sha256(item text) odd)\n"
                                     for k, v in got.items()))
    elif args.check and got != recorded():
        raise SystemExit("error: the held-out digests differ from bench/records/semantic_heldout.sha256")


if __name__ == "__main__":
    main()
