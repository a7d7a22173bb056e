"""Template x case table for SFT rendering: kept/dropped, reasoning kept, label span exact. Measured, not typed.

For every tokenizer family of `train.tiny_chat` (TRL 1.16's shipped chat templates plus the original
DeepSeek-R1-Distill one, on tiny local tokenizers with each family's control tokens) and every probe case
(single turn, system turn, two turns, other markers, closing-only trace) the row goes through cotforge's
own path (`prepare_sft_dataset`, default options) and the cell reports:

* kept, or dropped with the reason recorded in the data stats;
* R: the reasoning text is inside the trained (labelled) tokens;
* exact: ids == `apply_chat_template(history, add_generation_prompt=True)` + the oracle's completion
  (`tiny_chat.expected_completion`, written from the templates), and the labels are exactly that completion
  (plus, for "two turns", the history turn where `tiny_chat.history_is_trained` says the template renders it
  unchanged; `+h` marks a trained history turn, `h ctx` one kept as context only).

`--real DIR` also prepares the first `--rows` rows of each `DIR/*.jsonl.gz` SFT source per family and
prints rows kept, dropped by reason, repairs and marker rewrites (`--markers auto` to normalise).

    python -m bench.train.sft_templates [--markdown] [--real ../shared/data/sft_sources --rows 200]
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")


def _dataset(rows: list[dict]):
    import datasets

    keys = sorted({k for r in rows for k in r})
    return datasets.Dataset.from_list([{k: r.get(k) for k in keys} for r in rows])


def cell(tok, family: str, case: str, markers: str = "keep") -> dict:
    """Run one case through prepare_sft_dataset and compare with the oracle."""
    from cotforge.train.sft.data import chat_format, prepare_sft_dataset, render_row
    from cotforge.train.tiny_chat import CASES, HISTORY, REASONING, expected_completion, history_is_trained

    msgs = CASES[case]
    # a second, always-kept row (single turn) so that preparation never ends empty; row 0 is the case
    rows = [{"messages": msgs}, {"messages": CASES["single turn"]}]
    ds, stats = prepare_sft_dataset(_dataset(rows), tok, max_length=None, reasoning_markers=markers)
    if len(ds) != 2:
        return {"kept": False, "reason": next(iter(stats.dropped)), "oracle_drop": expected_completion(
            family, msgs[-1]["content"], markers) is None}
    ids, labels = ds[0]["input_ids"], ds[0]["labels"]
    prompt = list(tok.apply_chat_template(msgs[:-1], add_generation_prompt=True, tokenize=True,
                                          return_dict=True)["input_ids"])
    expected = expected_completion(family, msgs[-1]["content"], markers)
    completion = tok(expected, add_special_tokens=False)["input_ids"] if expected is not None else None
    want = [-100] * len(prompt)
    hist = None
    if case == "two turns":
        hist = history_is_trained(family)
        if hist:
            start = len(tok.apply_chat_template(msgs[:1], add_generation_prompt=True, tokenize=True,
                                                return_dict=True)["input_ids"])
            span = tok(expected_completion(family, HISTORY), add_special_tokens=False)["input_ids"]
            want[start:start + len(span)] = span
    exact = completion is not None and ids == prompt + completion and labels == want + completion
    trained = tok.decode([t for t in labels if t != -100])
    alone = render_row(tok, chat_format(tok), msgs, "diff", reasoning_markers=markers)  # this row's repairs only
    return {"kept": True, "reasoning": REASONING in trained, "exact": exact,
            "history": stats.history_turns_trained if case == "two turns" else None,  # the filler has none
            "repairs": alone.repairs, "normalised": alone.normalised, "oracle_history": hist}


def markers_cell(tok, family: str) -> str:
    """mask_mode generation on the single-turn case: does the template's own marking give the exact span?"""
    from trl.chat_template_utils import has_generation_markers

    from cotforge.train.sft.data import tokenize_conversation
    from cotforge.train.tiny_chat import CASES, expected_completion

    if not has_generation_markers(tok.chat_template):
        return "no markers"
    msgs = CASES["single turn"]
    out = tokenize_conversation(tok, msgs, "generation")
    marked = tok.decode([t for t in out["labels"] if t != -100])
    want = expected_completion(family, msgs[-1]["content"])
    return "exact" if marked == want else f"NOT exact: labels {marked[:14]!r}...{marked[-14:]!r}"


def fmt_cell(c: dict) -> str:
    """Compact text of one cell."""
    if not c["kept"]:
        return f"dropped: {c['reason']}" + ("" if c["oracle_drop"] else " (oracle: keep!)")
    text = f"kept, {'R' if c['reasoning'] else 'R LOST'}, {'exact' if c['exact'] else 'NOT exact'}"
    if c["history"] is not None:
        text += ", +h" if c["history"] else ", h ctx"
    if c["repairs"]:
        text += " [" + "+".join(sorted(c["repairs"])) + "]"
    return text


def template_table(markdown: bool) -> list[dict]:
    """Print the family x case table; return the raw cells."""
    from cotforge.train.tiny_chat import CASES, FAMILIES, chat_tokenizer

    cols = [*CASES, "other markers (auto)"]
    heads = [*cols, "generation markers (single turn)"]
    cells = []
    lines = ["| template | " + " | ".join(heads) + " |", "|---" * (len(heads) + 1) + "|"]
    for family in FAMILIES:
        tok = chat_tokenizer(family)
        row = []
        for col in cols:
            case, markers = ("other markers", "auto") if col.endswith("(auto)") else (col, "keep")
            c = cell(tok, family, case, markers)
            cells.append({"family": family, "case": col, **c})
            row.append(fmt_cell(c))
        row.append(markers_cell(tok, family))
        if not markdown:
            print(f"{family:<30} {'generation markers':<22} {row[-1]}")
        lines.append(f"| {family} (eos {tok.eos_token}) | " + " | ".join(row) + " |")
    if markdown:
        print("\n".join(lines))
    else:
        for c in cells:
            print(f"{c['family']:<30} {c['case']:<22} {fmt_cell(c)}")
    return cells


def real_sources(folder: Path, rows: int, markers: str) -> None:
    """prepare_sft_dataset on the first `rows` rows of each real SFT source, per family."""
    from cotforge.train.sft.data import SFTDataError, prepare_sft_dataset
    from cotforge.train.tiny_chat import FAMILIES, chat_tokenizer

    toks = {f: chat_tokenizer(f) for f in FAMILIES if not f.endswith("_training")}
    for path in sorted(folder.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            recs = [json.loads(line) for _, line in zip(range(rows), f, strict=False)]
        data = _dataset([{"id": r.get("id"), "prompt": r.get("problem"), "response": r.get("response")} for r in recs])
        for family, tok in toks.items():
            try:
                _, s = prepare_sft_dataset(data, tok, max_length=None, reasoning_markers=markers)
            except SFTDataError as e:  # every row dropped: report the counts
                s = e.stats
            print(f"{path.name:<42} {family:<30} in {s.rows_in:>4} kept {s.rows_kept:>4} dropped {s.dropped} "
                  f"repaired {s.repaired} normalised {s.markers_normalised}")


def main() -> None:
    """Print the table (and the real-source pass when asked)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown")
    ap.add_argument("--real", type=Path, default=None, help="a folder of *.jsonl.gz SFT sources (problem/response)")
    ap.add_argument("--rows", type=int, default=200, help="rows per real source")
    ap.add_argument("--markers", default="keep", help="reasoning_markers for the real-source pass")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    import datasets

    datasets.disable_progress_bars()
    cells = template_table(args.markdown)
    bad = [c for c in cells if (c["kept"] and not (c["reasoning"] and c["exact"]))
           or (not c["kept"] and not c["oracle_drop"])]
    print(f"{len(cells)} cells, {len(bad)} disagree with the oracle")
    if args.real:
        real_sources(args.real, args.rows, args.markers)


if __name__ == "__main__":
    main()
