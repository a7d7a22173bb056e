"""Dedup report: what was merged and why, for a reviewer. OUT/dedup_report.md and OUT/dedup_report.html.

Every removed row of a dedup stage names the kept row it duplicates (`duplicate_of`) and why (`reason`:
exact_duplicate = the same (prompt, response) after normalisation; near_duplicate = its problem is in a
cluster of near-duplicate prompts represented by another problem). The report puts each sampled removed
row beside the row it was merged into, with the words that differ marked, the reason and a similarity
score. The score is the word 3-gram Jaccard similarity of the two prompts as written (lowercased words):
a reviewer's yardstick that does not depend on the dedup settings, so near duplicates with a low score are
the ones to check first. The sample covers every reason x source pair, lowest score first.
"""

from __future__ import annotations

import difflib
import heapq
import logging
import re
from collections import defaultdict
from collections.abc import Iterator
from html import escape
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

REASONS = ("exact_duplicate", "near_duplicate")
MD_ROWS = 100
HTML_ROWS = 600
JOIN_ROWS = 100_000  # removed rows joined with their kept rows at a time (the report's memory bound)
JOIN_BATCH = 8192  # joined rows turned into Python rows at a time
_WORD = re.compile(r"\S+")


def _tables(folder: Path, columns: list[str], where=None):
    """The shards of `folder` one table at a time (only `columns` the shard has), filtered by `where(table)`.
    The unfiltered read is handed back to the OS at once (Arrow's allocator would keep it: ~3x the rows
    kept, measured on the 1M-row report)."""
    import pyarrow.parquet as pq

    from cotforge.curate.io.budget import release_arrow_memory

    for f in sorted(folder.glob("*.parquet")):
        names = set(pq.read_schema(f).names)
        t = pq.read_table(f, columns=[c for c in columns if c in names])
        if where is not None and t.num_rows:
            t = t.filter(where(t))
            release_arrow_memory()
        yield t


def _in(column: str, values: set[str]):
    """A table filter: rows whose `column` is one of `values`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    vs = pa.array(sorted(values), type=pa.string())
    return lambda t: pc.is_in(t.column(column), value_set=vs)


def _in_array(column: str, values):
    """A table filter: rows whose `column` is in the Arrow array `values`."""
    import pyarrow.compute as pc

    return lambda t: pc.is_in(t.column(column), value_set=values)


def similarity(a: str, b: str, n: int = 3) -> float:
    """Word n-gram Jaccard similarity of two texts (lowercased words as written; a text of fewer than n words is
    one n-gram of all its words). Equal texts score 1.0 without being split (exact duplicates: most pairs)."""
    if a == b:
        return 1.0
    ga, gb = _word_grams(str(a or ""), n), _word_grams(str(b or ""), n)
    return len(ga & gb) / len(ga | gb)


def _word_grams(text: str, n: int) -> set[tuple[str, ...]]:
    """The word n-grams of `text` (lower-cased, split at white space) as tuples, built by zipping shifted word
    lists (C-level; the same tuples as slicing each window)."""
    words = text.lower().split()
    if len(words) < n:
        return {tuple(words)}
    return set(zip(*(words[i:] for i in range(n)), strict=False))


def differing_spans(a: str, b: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Character spans of the words that differ between `a` and `b` (difflib on words), for each text."""
    ma, mb = list(_WORD.finditer(a or "")), list(_WORD.finditer(b or ""))
    sm = difflib.SequenceMatcher(a=[m.group().lower() for m in ma], b=[m.group().lower() for m in mb],
                                 autojunk=False)
    sa: list[tuple[int, int]] = []
    sb: list[tuple[int, int]] = []
    for op, i0, i1, j0, j1 in sm.get_opcodes():
        if op == "equal":
            continue
        if i1 > i0:
            sa.append((ma[i0].start(), ma[i1 - 1].end()))
        if j1 > j0:
            sb.append((mb[j0].start(), mb[j1 - 1].end()))
    return sa, sb


def _removed_filter(parts: int, part: int):
    """Removed duplicates that name a kept row, in hash partition `part` of `parts` (by `duplicate_of`)."""
    import polars as pl
    import pyarrow.compute as pc

    def where(t):
        ok = pc.and_(pc.is_in(t.column("reason"), value_set=_strings(REASONS)),
                     pc.fill_null(pc.greater(pc.utf8_length(t.column("duplicate_of")), 0), False))
        if parts > 1:
            h = pl.from_arrow(t.column("duplicate_of")).hash(seed=0) % parts
            ok = pc.and_(ok, (h == part).fill_null(False).to_arrow())
        return ok

    return where


def _strings(values) -> Any:
    import pyarrow as pa

    return pa.array(list(values), type=pa.string())


def merged_pairs(out_dir: str | Path, keep: int = HTML_ROWS) -> tuple[dict[tuple[str, str], int], list[dict[str, Any]]]:
    """(removed duplicates per (reason, source), the `keep` lowest-scoring pairs of each (reason, source) with
    the kept row each was merged into: prompt, response, source of both, and the score).

    Streamed in bounded memory: the removed rows are joined with the kept rows they name one hash partition
    of `duplicate_of` at a time (~JOIN_ROWS removed rows each, prompts only, held as Arrow tables and turned
    into Python rows JOIN_BATCH at a time), and each (reason, source) holds at most 2 x `keep` candidates for
    its sample, so a 10M-row output holds no more than a 1M-row one; responses are read only for the pairs
    kept for the sample. `keep` >= any sample's share of a (reason, source), so `sample_pairs` of the result
    equals `sample_pairs` of all pairs. Pairs come sorted by (reason, source, score, id)."""
    out = Path(out_dir)
    import pyarrow.parquet as pq

    from cotforge.curate.io.budget import release_arrow_memory

    n_removed = sum(pq.ParquetFile(f).metadata.num_rows for f in (out / "removed").glob("*.parquet"))
    parts = max(1, -(-n_removed // JOIN_ROWS))
    counts: dict[tuple[str, str], int] = defaultdict(int)
    low: dict[tuple[str, str], list[tuple[float, str, dict[str, Any]]]] = defaultdict(list)
    for part in range(parts):
        for r in _joined_rows(out, parts, part):
            key = (r["reason"], r["source"])
            counts[key] += 1
            score = round(similarity(r["prompt"], r["kept_prompt"] or ""), 4)
            items = low[key]
            items.append((score, r["id"], {
                "reason": r["reason"], "id": r["id"], "source": r["source"], "prompt": r["prompt"] or "",
                "kept_id": r["duplicate_of"], "kept_source": r["kept_source"] or "",
                "kept_prompt": r["kept_prompt"] or "", "score": score}))
            if len(items) >= 2 * keep:
                low[key] = heapq.nsmallest(keep, items, key=lambda x: (x[0], x[1]))
        release_arrow_memory()  # the partition's Arrow buffers back to the OS before the next one is read
    pairs = [p for key in sorted(low) for _, _, p in heapq.nsmallest(keep, low[key], key=lambda x: (x[0], x[1]))]
    del low
    resp_removed = {r["id"]: r["response"] for t in _tables(out / "removed", ["id", "response"],
                                                             _in("id", {p["id"] for p in pairs})) for r in t.to_pylist()}
    resp_kept = {r["id"]: r["response"] for t in _tables(out / "kept", ["id", "response"],
                                                          _in("id", {p["kept_id"] for p in pairs})) for r in t.to_pylist()}
    for p in pairs:
        p["response"], p["kept_response"] = resp_removed.get(p["id"]) or "", resp_kept.get(p["kept_id"]) or ""
    return dict(counts), pairs


def _joined_rows(out: Path, parts: int, part: int) -> Iterator[dict[str, Any]]:
    """The removed duplicates of hash partition `part` (of `parts`), each with `kept_source` and `kept_prompt`
    of the kept row it names (None when that row is not among the kept rows), JOIN_BATCH rows at a time: the
    partition's removed rows and the kept rows they name are held as Arrow tables, the kept ids in one dict."""
    import pyarrow as pa
    import pyarrow.compute as pc

    tables = list(_tables(out / "removed", ["id", "source", "prompt", "reason", "duplicate_of"],
                          _removed_filter(parts, part)))
    removed = pa.concat_tables(tables) if tables else None
    del tables
    if removed is None or not removed.num_rows:
        return
    want = pc.unique(removed.column("duplicate_of"))
    kept = pa.concat_tables([t for t in _tables(out / "kept", ["id", "source", "prompt"], _in_array("id", want))]
                            or [pa.table({c: pa.array([], pa.string()) for c in ("id", "source", "prompt")})])
    del want
    at = {k: i for i, k in enumerate(kept.column("id").to_pylist())}  # an id twice: the last, as a dict join
    for batch in removed.to_batches(max_chunksize=JOIN_BATCH):
        rows = batch.to_pylist()
        idx = pa.array([at.get(r["duplicate_of"]) for r in rows], pa.int64())
        sources = kept.column("source").take(idx).to_pylist()
        prompts = kept.column("prompt").take(idx).to_pylist()
        for r, s, p in zip(rows, sources, prompts, strict=True):
            r["kept_source"], r["kept_prompt"] = s, p
            yield r


def sample_pairs(pairs: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """About `limit` pairs covering every (reason, source) pair, lowest score first within each."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for p in pairs:
        groups[(p["reason"], p["source"])].append(p)
    share = max(1, limit // max(len(groups), 1))
    out: list[dict[str, Any]] = []
    for key in sorted(groups):
        out += sorted(groups[key], key=lambda p: (p["score"], p["id"]))[:share]
    return out


def _cell(text: str, limit: int = 160) -> str:
    t = " ".join(str(text or "").split())
    return (t[:limit - 1] + "…" if len(t) > limit else t).replace("|", "\\|").replace("`", "'")


def _counts(pairs: list[dict[str, Any]]) -> dict[tuple[str, str], int]:
    cell: dict[tuple[str, str], int] = defaultdict(int)
    for p in pairs:
        cell[(p["reason"], p["source"])] += 1
    return cell


def render_markdown(pairs: list[dict[str, Any]], stats: dict[str, Any],
                    counts: dict[tuple[str, str], int] | None = None) -> str:
    """The report as Markdown: counts per reason x source (`counts`, else counted from `pairs`), then sampled
    pairs side by side."""
    cell = defaultdict(int, counts if counts is not None else _counts(pairs))
    total = sum(cell.values())
    sources = sorted({s for _, s in cell})
    lines = ["# Dedup report", "",
             f"{stats.get('rows_in', '?')} rows in, {stats.get('kept', '?')} kept, {total} removed as duplicates "
             "(each names the kept row it was merged into). Score: word 3-gram Jaccard similarity of the two "
             "prompts as written (1.0 = the same words); low-scoring near duplicates are the ones to check.", "",
             "## Removed duplicates per reason x source", "",
             "| reason | " + " | ".join(_cell(s, 40) for s in sources) + " | total |",
             "|---|" + "---:|" * (len(sources) + 1)]
    for reason in REASONS:
        vals = [cell.get((reason, s), 0) for s in sources]
        lines.append(f"| {reason} | " + " | ".join(str(v) for v in vals) + f" | {sum(vals)} |")
    shown = sample_pairs(pairs, MD_ROWS)
    lines += ["", f"## Merged pairs ({len(shown)} of {total}: every reason x source, lowest score first; "
              "all of them in dedup_report.html and removed/)", "",
              "| reason | score | removed row | its prompt | kept row | kept prompt |", "|---|---:|---|---|---|---|"]
    for p in shown:
        lines.append(f"| {p['reason']} | {p['score']:.2f} | {_cell(p['id'], 200)} ({_cell(p['source'], 40)}) | "
                     f"{_cell(p['prompt'])} | {_cell(p['kept_id'], 200)} ({_cell(p['kept_source'], 40)}) | "
                     f"{_cell(p['kept_prompt'])} |")
    return "\n".join(lines) + "\n"


def render_html(pairs: list[dict[str, Any]], stats: dict[str, Any],
                counts: dict[tuple[str, str], int] | None = None) -> str:
    """The self-contained HTML report: counts (`counts`, else counted from `pairs`), then one card per
    sampled pair with differing words marked, filterable by reason and source."""
    from cotforge.curate.io import html

    cell = defaultdict(int, counts if counts is not None else _counts(pairs))
    total = sum(cell.values())
    sources = sorted({s for _, s in cell})
    shown = sample_pairs(pairs, HTML_ROWS)
    body = [f"<h1>Dedup report</h1><p>{stats.get('rows_in', '?')} rows in, {stats.get('kept', '?')} kept, "
            f"<b>{total} removed as duplicates</b>. Score: word 3-gram Jaccard similarity of the two prompts "
            "(1.0 = the same words). Words that differ between the two prompts are marked.</p>",
            "<h2>Removed duplicates per reason x source</h2>",
            html.counts_table(list(REASONS), sources, cell, "reason"),
            f"<h2>Merged pairs ({len(shown)} of {total}: every reason x source, lowest score first)</h2>",
            html.filters({"reason": sorted({p["reason"] for p in shown}),
                          "source": sorted({p["source"] for p in shown})})]
    for p in shown:
        da, db = differing_spans(p["prompt"], p["kept_prompt"])
        left = html.marked(p["prompt"], da, "diff")
        right = html.marked(p["kept_prompt"], db, "diff")
        if p["response"] or p["kept_response"]:
            left += "\n\n── response ──\n" + escape(p["response"][:1500])
            right += "\n\n── response ──\n" + escape(p["kept_response"][:1500])
        head = (f"<b>{escape(p['reason'])}</b> &middot; score {p['score']:.3f} &middot; removed "
                f"<b>{escape(str(p['id']))}</b> ({escape(p['source'])}) &rarr; kept <b>{escape(str(p['kept_id']))}</b>"
                f" ({escape(p['kept_source'])})")
        body.append(html.card({"reason": p["reason"], "source": p["source"]}, head, "removed row", left,
                              "kept row (merged into)", right))
    return html.page("Dedup report", "".join(body))


def write_dedup_report(out_dir: str | Path, stats: dict[str, Any]) -> dict[str, int]:
    """Write OUT/dedup_report.md and OUT/dedup_report.html; returns the merged pairs per reason."""
    out = Path(out_dir)
    cell, pairs = merged_pairs(out)
    (out / "dedup_report.md").write_text(render_markdown(pairs, stats, cell), encoding="utf-8")
    (out / "dedup_report.html").write_text(render_html(pairs, stats, cell), encoding="utf-8")
    counts = {r: sum(n for (reason, _), n in cell.items() if reason == r) for r in REASONS}
    log.info("dedup report: %s -> %s", counts, out / "dedup_report.html")
    return counts
