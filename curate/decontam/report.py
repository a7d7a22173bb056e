"""Contamination report: OUT/contamination_report.md, .json, a PNG heat map (source x benchmark) and
OUT/contamination_matches.parquet (every match of every removed row).

Built from a finished decontamination stage (its `removed/` rows with `reason = contaminated`, their
`matches` JSON and the primary match's span in the original text, plus `stats.json` for per-source row
counts). A row is attributed to **every** benchmark it matches (benchmarks overlap: math500 is inside
math_test5000, amc2023 inside amc2022_2023), so per-benchmark counts can add up to more than the number of
removed rows. What a reviewer needs to judge a match -- the overlapping span of the training row's
original text, the benchmark item beside it, and where in the row it sits (character offset and share of
the side's text) -- is in the Markdown table and in the Parquet (all); the JSON keeps counts and a short
sample only, so it stays small on large runs. OUT/contamination_report.html (one self-contained file) shows
the sampled rows beside their benchmark items with the copied span marked, filterable by benchmark and source.

The sample (`sample_rows`) covers every benchmark x source pair that has matches, lowest score first (the
borderline matches a reviewer must judge), about MAX_TABLE_ROWS rows in the Markdown and HTML_ROWS in the
HTML. A match whose copy could not be placed in the row's original text (the matcher works on normalised
words: e.g. code whose identifiers or layout differ) has no offsets; the report says so and shows the
normalised words instead.

The report is built from `ReportParts`: counts, per-benchmark tables, the first JSON_SAMPLE rows and a bounded
candidate sample per (benchmark, source) pair, with the HTML excerpt of each sampled row. Each matcher task
fills one for its removed rows and writes its share of contamination_matches.parquet; the main process merges
the parts instead of reading the removed rows back. `ReportParts.from_rows` builds the same from removed
rows (a finished folder; tests compare both ways).
"""

from __future__ import annotations

import bisect
import json
import logging
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MAX_TABLE_ROWS = 200
HTML_ROWS = 1000  # rows shown in the HTML report (sampled per benchmark x source like the Markdown)
NO_OFFSET = ("no offset: the copy's normalised words could not be anchored in the row's original text; "
             "the normalised words are shown")
JSON_SAMPLE = 100  # primary matches shown in the JSON (snippets of SNIPPET characters)
SNIPPET = 300
ITEM_CHARS = 2000  # benchmark item text kept per match in the Parquet
JSON_FIELDS = ("id", "source", "benchmark", "benchmark_id", "match_kind", "side", "score", "match_start",
               "match_share", "matched_text", "item_text")
SAMPLE_FIELDS = ("id", "source", "benchmark", "benchmark_id", "match_kind", "side", "score", "matched_text",
                 "match_start", "match_end", "match_share")
MATCH_COLUMNS = ("id", "source", "rank", "benchmark", "benchmark_id", "part", "match_kind", "side", "score",
                 "match_start", "match_end", "match_share", "matched_text")  # + item_text, added when written
ROW_COLUMNS = ("id", "source", "reason", *SAMPLE_FIELDS[2:], "matches")  # what the report reads of a removed row


def _match_schema():
    import pyarrow as pa

    return pa.schema([("id", pa.string()), ("source", pa.string()), ("rank", pa.int32()),
                      ("benchmark", pa.string()), ("benchmark_id", pa.string()), ("part", pa.string()),
                      ("match_kind", pa.string()), ("side", pa.string()), ("score", pa.float64()),
                      ("match_start", pa.int64()), ("match_end", pa.int64()), ("match_share", pa.float64()),
                      ("matched_text", pa.string()), ("item_text", pa.string())])


def _md_escape(text: str, limit: int = 120) -> str:
    t = " ".join(str(text or "").split())
    if len(t) > limit:
        t = t[: limit - 1] + "…"
    return t.replace("|", "\\|").replace("`", "'")


def _contaminated_rows(out_dir: Path) -> list[dict[str, Any]]:
    """Removed rows with reason `contaminated` (only the columns the report needs)."""
    import pyarrow.parquet as pq

    cols = ROW_COLUMNS
    rows: list[dict[str, Any]] = []
    for f in sorted((out_dir / "removed").glob("*.parquet")):
        names = set(pq.read_schema(f).names)
        t = pq.read_table(f, columns=[c for c in cols if c in names])
        rows.extend(r for r in t.to_pylist() if r.get("reason") == "contaminated")
    return rows


def sample_rows(rows: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """About `limit` rows covering every (benchmark, source) pair of primary matches: an equal share per pair
    (at least one), lowest score first within a pair; ordered by benchmark, source, score."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["benchmark"], r["source"])].append(r)
    share = max(1, limit // max(len(groups), 1))
    out: list[dict[str, Any]] = []
    for key in sorted(groups):
        out += sorted(groups[key], key=lambda r: (float(r.get("score") or 0.0), str(r["id"])))[:share]
    return out


def _texts(out_dir: Path, ids: set[str]) -> dict[str, dict[str, str | None]]:
    """prompt and response of the removed rows `ids` (read only for the sampled rows), in record batches of
    ~16 MB: a removed shard of long-CoT rows holds up to ~256 MB of text, which the main process should not
    hold at once."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from cotforge.curate.io.budget import open_streaming, rows_within_bytes

    if not ids:
        return {}
    found: dict[str, dict[str, str | None]] = {}
    wanted = pa.array(list(ids), type=pa.string())
    for f in sorted((out_dir / "removed").glob("*.parquet")):
        pf = open_streaming(f)
        for batch in pf.iter_batches(batch_size=rows_within_bytes(pf, 16 << 20), columns=["id", "prompt", "response"]):
            t = pa.Table.from_batches([batch])
            for r in t.filter(pc.is_in(t.column("id"), value_set=wanted)).to_pylist():
                found[r["id"]] = {"prompt": r["prompt"], "response": r["response"]}
    return found


def _matches(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The row's `matches` JSON, parsed once (summarize and write_matches both read it; 77k rows on the short
    speed corpus)."""
    got = row.get("_matches")
    if got is None:
        got = row["_matches"] = json.loads(row.get("matches") or "[]")
    return got


def _group_key(r: dict[str, Any]) -> tuple[float, str]:
    return float(r.get("score") or 0.0), str(r["id"])


class ReportParts:
    """What the report needs from contaminated rows, mergeable across tasks: counts per benchmark / source /
    (source, benchmark) / match kind, the items hit, the first JSON_SAMPLE rows, and per (benchmark, source)
    pair the candidates of `sample_rows` (lowest score first, at most HTML_ROWS while filling, cut to what any
    merge can still show in `to_json`), each with `view`, its HTML excerpt (`side_view`). Merging parts in
    output order and sampling gives exactly what sampling all rows gives."""

    def __init__(self) -> None:
        self.rows = 0
        self.no_offset = 0
        self.rows_by_bench: Counter[str] = Counter()
        self.primary_by_bench: Counter[str] = Counter()
        self.items_hit: dict[str, set[str]] = defaultdict(set)
        self.cell: Counter[tuple[str, str]] = Counter()
        self.by_source: dict[str, Counter[str]] = defaultdict(Counter)
        self.kinds: Counter[str] = Counter()
        self.first: list[dict[str, Any]] = []
        self.groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        self.records: dict[str, list[Any]] = {k: [] for k in MATCH_COLUMNS}

    def add(self, rows: list[dict[str, Any]], side_texts: list[str | None] | None = None) -> None:
        """Count contaminated `rows` (removed-row dicts, output order); `side_texts[i]`: the text of the side
        row i matched on (None: the view is filled later from the removed shards, `fill_views`)."""
        seen: dict[int, tuple[list[str], str]] = {}  # per matches list (rows of one prompt share it): its facts
        for i, r in enumerate(rows):
            ms = _matches(r)
            facts = seen.get(id(ms))
            if facts is None:
                for m in ms:
                    self.items_hit[m["benchmark"]].add(m["benchmark_id"])
                facts = seen[id(ms)] = (sorted({m["benchmark"] for m in ms}),
                                        "prompt" if any(m["side"] == "prompt" for m in ms) else "response_only")
            for b in facts[0]:
                self.rows_by_bench[b] += 1
                self.cell[(r["source"], b)] += 1
            self.primary_by_bench[r["benchmark"]] += 1
            self.kinds[r.get("match_kind") or "?"] += 1
            s = self.by_source[r["source"]]
            s["contaminated"] += 1
            s[facts[1]] += 1
            self.rows += 1
            self.no_offset += r.get("match_start") is None
            self._records(r, ms)
            if len(self.first) < JSON_SAMPLE:
                self.first.append({k: r.get(k) for k in JSON_FIELDS if k != "item_text"})
            group = self.groups[(r["benchmark"], r["source"])]
            key = _group_key(r)
            if len(group) < HTML_ROWS or key < _group_key(group[-1]):
                kept = {k: r.get(k) for k in SAMPLE_FIELDS}
                if side_texts is not None:
                    kept["view"] = side_view(side_texts[i] or "", r.get("match_start"), r.get("match_end"))
                bisect.insort_right(group, kept, key=_group_key)  # ties stay in output order
                del group[HTML_ROWS:]

    def _records(self, r: dict[str, Any], ms: list[dict[str, Any]]) -> None:
        """contamination_matches.parquet's records of one row (item_text is added when the file is written)."""
        rec = self.records
        n = len(ms)
        if not n:
            return
        rec["id"].extend([r["id"]] * n)
        rec["source"].extend([r["source"]] * n)
        rec["rank"].extend(range(n))
        for k in ("benchmark", "benchmark_id", "match_kind", "side"):
            rec[k].extend([m[k] for m in ms])
        rec["part"].extend([m.get("part") for m in ms])
        rec["score"].extend([float(m["score"]) for m in ms])
        for k in ("match_start", "match_end", "match_share", "matched_text"):  # the primary match's (rank 0) only
            rec[k].append(r.get(k))
            rec[k].extend([None] * (n - 1))

    def matches_table(self):
        """This part's contamination_matches records as an Arrow table (without item_text)."""
        import pyarrow as pa

        schema = _match_schema()
        return pa.Table.from_pydict(self.records, schema=schema.remove(schema.get_field_index("item_text")))

    def to_json(self) -> dict[str, Any]:
        """A JSON-able part; the sample cut to max(1, HTML_ROWS // groups here) per group: a merge has at least
        as many groups, so sample_rows never shows more of a group than that."""
        share = max(1, HTML_ROWS // max(len(self.groups), 1))
        return {"rows": self.rows, "no_offset": self.no_offset, "rows_by_bench": dict(self.rows_by_bench),
                "primary_by_bench": dict(self.primary_by_bench),
                "items_hit": {b: sorted(v) for b, v in self.items_hit.items()},
                "cell": [[s, b, n] for (s, b), n in self.cell.items()],
                "by_source": {s: dict(c) for s, c in self.by_source.items()}, "kinds": dict(self.kinds),
                "first": self.first, "groups": [[b, s, g[:share]] for (b, s), g in self.groups.items()]}

    @classmethod
    def merge(cls, parts: list[dict[str, Any]]) -> ReportParts:
        """The parts of tasks 0, 1, ... (in output order) as one (records stay in the tasks' files)."""
        out = cls()
        for p in parts:
            out.rows += p["rows"]
            out.no_offset += p["no_offset"]
            out.rows_by_bench.update(p["rows_by_bench"])
            out.primary_by_bench.update(p["primary_by_bench"])
            for b, ids in p["items_hit"].items():
                out.items_hit[b].update(ids)
            out.cell.update({(s, b): n for s, b, n in p["cell"]})
            for s, c in p["by_source"].items():
                out.by_source[s].update(c)
            out.kinds.update(p["kinds"])
            out.first.extend(p["first"][:JSON_SAMPLE - len(out.first)])
            for b, s, g in p["groups"]:
                out.groups[(b, s)].extend(g)
        return out

    @classmethod
    def from_rows(cls, rows: list[dict[str, Any]], side_texts: list[str | None] | None = None) -> ReportParts:
        out = cls()
        out.add(rows, side_texts)
        return out

    def candidates(self) -> list[dict[str, Any]]:
        """Every kept sample candidate, grouped, in output order within a group (what sample_rows reads)."""
        return [r for g in self.groups.values() for r in sorted(g, key=_group_key)]

    def summary(self, rows_in: dict[str, int], bench_items: dict[str, int]) -> dict[str, Any]:
        """Per-benchmark, per-source and per (source, benchmark) counts."""
        per_benchmark = {b: {"items": bench_items.get(b, 0), "items_hit": len(self.items_hit.get(b, ())),
                             "rows_removed": self.rows_by_bench.get(b, 0),
                             "rows_primary": self.primary_by_bench.get(b, 0)} for b in bench_items}
        per_source = {}
        for src in sorted(set(rows_in) | set(self.by_source)):
            n = rows_in.get(src, 0)
            c = self.by_source.get(src, Counter())
            per_source[src] = {"rows": n, "contaminated": c["contaminated"], "prompt_side": c["prompt"],
                               "response_only": c["response_only"],
                               "rate": round(c["contaminated"] / n, 6) if n else 0.0,
                               "by_benchmark": {b: self.cell[(src, b)] for b in bench_items if self.cell.get((src, b))}}
        totals = {"rows_in": sum(rows_in.values()), "contaminated_rows": self.rows,
                  "prompt_side_rows": sum(v["prompt_side"] for v in per_source.values()),
                  "response_only_rows": sum(v["response_only"] for v in per_source.values()),
                  "by_match_kind": dict(sorted(self.kinds.items()))}
        return {"totals": totals, "per_benchmark": per_benchmark, "per_source": per_source}


def side_view(text: str, start: int | None, end: int | None) -> dict[str, Any]:
    """What the HTML card shows of a row's matched side: the window around the copy (`html.window`), or the
    first 4000 characters when the copy has no offset, and the side's length."""
    from cotforge.curate.io import html

    if start is not None and end is not None:
        return {"len": len(text), "window": list(html.window(text, start, end))}
    return {"len": len(text), "window": [text[:4001], 0, False, False]}


def summarize(rows: list[dict[str, Any]], rows_in: dict[str, int], bench_items: dict[str, int]) -> dict[str, Any]:
    """Per-benchmark, per-source and per (source, benchmark) counts from contaminated rows."""
    return ReportParts.from_rows(rows).summary(rows_in, bench_items)


def _pct(x: float) -> str:
    """A rate as a short percentage that never rounds a non-zero rate to 0."""
    return f"{x:.0%}" if x >= 0.01 else f"{x:.1%}" if x >= 0.001 else f"{x:.2%}"


def plot_heatmap(summary: dict[str, Any], path: Path) -> None:
    """PNG heat map: contamination rate (share of the source's rows) per source x benchmark."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    sources = list(summary["per_source"])
    benches = list(summary["per_benchmark"])
    if not sources or not benches:
        return
    grid = np.zeros((len(sources), len(benches)))
    for i, s in enumerate(sources):
        n = summary["per_source"][s]["rows"] or 1
        for j, b in enumerate(benches):
            grid[i, j] = summary["per_source"][s]["by_benchmark"].get(b, 0) / n
    fig, ax = plt.subplots(figsize=(max(5.0, 2.6 + 0.8 * len(benches)), 2.4 + 0.45 * len(sources)))
    im = ax.imshow(grid, cmap="Reds", vmin=0, vmax=max(grid.max(), 1e-9), aspect="auto")
    ax.set_xticks(range(len(benches)), benches, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(sources)), sources, fontsize=8)
    for i, s in enumerate(sources):
        for j, b in enumerate(benches):
            count = summary["per_source"][s]["by_benchmark"].get(b, 0)
            if count:
                ax.text(j, i, f"{count}\n{_pct(grid[i, j])}", ha="center", va="center", fontsize=8,
                        color="black" if grid[i, j] < 0.6 * grid.max() else "white")
    ax.set_xlabel("benchmark", fontsize=8)
    ax.set_ylabel("training source", fontsize=8)
    ax.set_title("Contaminated rows per source and benchmark\n(count, and share of the source's rows)", fontsize=9)
    bar = fig.colorbar(im, ax=ax, fraction=0.03)
    bar.set_label("share of source rows", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def render_markdown(summary: dict[str, Any], rows: list[dict[str, Any]], config: dict[str, Any],
                    bench_meta: dict[str, Any], parts: ReportParts | None = None) -> str:
    """The report as GitHub/Hub-readable Markdown. `rows`: the contaminated rows, or with `parts` (their
    merged counts) only its sample candidates."""
    t = summary["totals"]
    lines = ["# Contamination report", "",
             f"{t['rows_in']} training rows checked against {len(summary['per_benchmark'])} benchmarks: "
             f"**{t['contaminated_rows']} contaminated rows removed** ({t['prompt_side_rows']} matched on the prompt, "
             f"{t['response_only_rows']} only on the response). Match kinds of the primary match: "
             f"{', '.join(f'{k} {v}' for k, v in t['by_match_kind'].items()) or 'none'}.", "",
             "A row counts for every benchmark it matches (benchmarks overlap, e.g. math500 is a subset of "
             "math_test5000), so the per-benchmark rows can add up to more than the total.", "",
             "![contamination heat map](contamination_heatmap.png)", "",
             "## Per benchmark", "", "| benchmark | items | items hit | training rows removed | fingerprint |",
             "|---|---:|---:|---:|---|"]
    for b, v in summary["per_benchmark"].items():
        fp = bench_meta.get(b, {}).get("fingerprint", "")
        lines.append(f"| {b} | {v['items']} | {v['items_hit']} | {v['rows_removed']} | `{fp}` |")
    lines += ["", "## Per source", "", "| source | rows | contaminated | prompt side | response only | rate |",
              "|---|---:|---:|---:|---:|---:|"]
    for s, v in summary["per_source"].items():
        lines.append(f"| {_md_escape(s, 60)} | {v['rows']} | {v['contaminated']} | {v['prompt_side']} | "
                     f"{v['response_only']} | {v['rate']:.2%} |")
    benches = list(summary["per_benchmark"])
    sources = [src for src, v in summary["per_source"].items() if v["contaminated"]]
    lines += ["", "## Contaminated rows per benchmark x source", "",
              "Rows of each source matching each benchmark (any match of the row, so a row can count in several "
              "columns).", "", "| benchmark | " + " | ".join(_md_escape(x, 40) for x in sources) + " | total |",
              "|---|" + "---:|" * (len(sources) + 1)]
    for b in benches:
        vals = [summary["per_source"][src]["by_benchmark"].get(b, 0) for src in sources]
        lines.append(f"| {b} | " + " | ".join(str(v) for v in vals) + f" | {sum(vals)} |")
    shown = sample_rows(rows, MAX_TABLE_ROWS)
    pairs = len({(r["benchmark"], r["source"]) for r in rows})
    no_offset = parts.no_offset if parts else sum(r.get("match_start") is None for r in rows)
    total = parts.rows if parts else len(rows)
    lines += ["", f"## Matches ({len(shown)} of {total} shown: every one of the {pairs} benchmark x source "
              "pairs, lowest score first; all in contamination_matches.parquet and contamination_report.html)", "",
              "The overlapping text is the training row's original text; *where* is the character span "
              "[start, end) of the copy in that side of the row and its share of the way into that side. "
              f"{no_offset} of {total} matches have no offset: {NO_OFFSET} (marked *normalised*).", "",
              "| training row | source | benchmark / item | kind | side | where | score | overlapping text (training row) "
              "| benchmark item |", "|---|---|---|---|---|---|---:|---|---|"]
    for r in shown:
        if r.get("match_start") is not None:
            where, text = f"{r['match_start']:,}-{r['match_end']:,} ({r['match_share']:.0%})", r.get("matched_text")
        else:
            where, text = "no offset", "*normalised:* " + _md_escape(r.get("matched_text") or "", 130)
        text = text if r.get("match_start") is None else _md_escape(text or "", 140)
        lines.append(f"| {_md_escape(r['id'], 400)} | {_md_escape(r['source'], 60)} | {r['benchmark']} / "
                     f"{_md_escape(r['benchmark_id'], 400)} | {r['match_kind']} | {r['side']} | {where} | "
                     f"{r['score']:.2f} | {text} | {_md_escape(r.get('item_text') or '', 140)} |")
    lines += ["", "## Configuration", "", "<details><summary>decontamination settings</summary>", "", "```json",
              json.dumps(config, indent=2, sort_keys=True, default=str), "```", "", "</details>", ""]
    return "\n".join(lines)


def render_html(summary: dict[str, Any], rows: list[dict[str, Any]], total: int,
                item_full: dict[tuple[str, str], str], heatmap: Path | None) -> str:
    """The self-contained HTML report: counts, the heat map (inline), and one card per sampled row (`rows`:
    sample candidates carrying their `view`, of `total` contaminated rows) with the row's side beside the
    benchmark item, the copied span marked; filters by benchmark, source and side."""
    import base64
    from html import escape

    from cotforge.curate.io import html

    t = summary["totals"]
    benches = list(summary["per_benchmark"])
    sources = [src for src, v in summary["per_source"].items() if v["contaminated"]]
    cell = {(b, src): summary["per_source"][src]["by_benchmark"].get(b, 0) for b in benches for src in sources}
    body = [f"<h1>Contamination report</h1><p>{t['rows_in']} training rows checked against {len(benches)} "
            f"benchmarks: <b>{t['contaminated_rows']} contaminated rows removed</b> ({t['prompt_side_rows']} on the "
            f"prompt, {t['response_only_rows']} only on the response).</p>",
            "<h2>Contaminated rows per benchmark x source</h2>", html.counts_table(benches, sources, cell, "benchmark")]
    if heatmap is not None and heatmap.exists():
        data = base64.b64encode(heatmap.read_bytes()).decode()
        body.append(f'<p><img alt="contamination heat map" src="data:image/png;base64,{data}" style="max-width:100%">'
                    "</p>")
    sample = sample_rows(rows, HTML_ROWS)
    body += [f"<h2>Matches ({len(sample)} of {total}: every benchmark x source pair, lowest score first)</h2>",
             "<p>Left: the training row's side that matched (original text), the copy marked. Right: the benchmark "
             "item.</p>",
             html.filters({"benchmark": sorted({r["benchmark"] for r in sample}),
                           "source": sorted({r["source"] for r in sample}),
                           "side": sorted({r["side"] for r in sample})})]
    for r in sample:
        view = r["view"]
        start, end = r.get("match_start"), r.get("match_end")
        if start is not None and end is not None:
            excerpt, offset, cut_front, cut_back = view["window"]
            left = (("…" if cut_front else "") + html.marked(excerpt, [(start - offset, end - offset)])
                    + ("…" if cut_back else ""))
            note = ""
        else:
            side_text = view["window"][0]
            left = escape(side_text[:4000]) + ("…" if len(side_text) > 4000 else "")
            note = f"{NO_OFFSET}: {' '.join(str(r.get('matched_text') or '').split())[:300]}"
        item = item_full.get((r["benchmark"], r["benchmark_id"])) or r.get("item_text") or ""
        where = f"{start:,}-{end:,} of {view['len']:,} chars" if start is not None else "no offset"
        head = (f"<b>{escape(str(r['id']))}</b> ({escape(r['source'])}, {escape(r['side'])}) matches "
                f"<b>{escape(r['benchmark'])} / {escape(str(r['benchmark_id']))}</b> &middot; {escape(r['match_kind'])}"
                f" &middot; score {float(r['score']):.3f} &middot; {where}")
        body.append(html.card({"benchmark": r["benchmark"], "source": r["source"], "side": r["side"]}, head,
                              f"training row ({r['side']})", left, f"benchmark item {r['benchmark_id']}",
                              escape(item), note))
    return html.page("Contamination report", "".join(body))


def write_matches(out: Path, tables: list, item_text: dict[tuple[str, str], str]) -> Path:
    """OUT/contamination_matches.parquet: one record per (removed row, match), the primary one (rank 0) with
    its span in the original text and the benchmark item's text. `tables`: the parts' records (Arrow tables
    or Parquet files of `ReportParts.matches_table`) in output order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _match_schema()
    base = schema.remove(schema.get_field_index("item_text"))
    got = [t if isinstance(t, pa.Table) else pq.read_table(t) for t in tables]
    merged = pa.concat_tables([t.cast(base) for t in got]) if got else base.empty_table()
    keys = zip(merged.column("benchmark").to_pylist(), merged.column("benchmark_id").to_pylist(), strict=True)
    merged = merged.append_column(schema.field("item_text"), pa.array([item_text.get(k) for k in keys], pa.string()))
    path = out / "contamination_matches.parquet"
    pq.write_table(merged.combine_chunks(), path, compression="zstd")
    return path


def fill_views(out_dir: Path, rows: list[dict[str, Any]]) -> None:
    """`view` of sampled rows that have none (parts built from removed rows without their texts)."""
    todo = [r for r in rows if "view" not in r]
    texts = _texts(out_dir, {r["id"] for r in todo})
    for r in todo:
        r["view"] = side_view(texts.get(r["id"], {}).get(r["side"]) or "", r.get("match_start"), r.get("match_end"))


def write_contamination_report(out_dir: str | Path, stats: dict[str, Any], benchmarks: dict[str, list],
                               cfg: Any, bench_specs: dict[str, Any] | None = None,
                               parts: ReportParts | None = None, match_tables: list | None = None) -> dict[str, Any]:
    """Write OUT/contamination_report.{md,json,html}, OUT/contamination_matches.parquet and
    OUT/contamination_heatmap.png; returns the summary. `parts` (the tasks' merged `ReportParts`) and
    `match_tables` (their records) come from the matcher tasks; without them both are built from the
    folder's removed rows."""
    from cotforge.curate.core.benchmarks import items_fingerprint

    out = Path(out_dir)
    if parts is None:
        parts = ReportParts.from_rows(_contaminated_rows(out))
        match_tables = [parts.matches_table()]
    item_text = {(b, it.id): it.problem[:ITEM_CHARS] for b, items in benchmarks.items() for it in items}
    rows = parts.candidates()
    for r in rows + parts.first:
        r["item_text"] = item_text.get((r["benchmark"], r["benchmark_id"]))
    rows_in = {s: v["rows_in"] for s, v in stats.get("per_source", {}).items()}
    bench_items = {b: len(items) for b, items in benchmarks.items()}
    bench_meta = {b: {"items": len(items), "fingerprint": items_fingerprint(items),
                      **({"spec": bench_specs[b]} if bench_specs and b in bench_specs else {})}
                  for b, items in benchmarks.items()}
    summary = parts.summary(rows_in, bench_items)
    config = cfg.to_dict() if hasattr(cfg, "to_dict") else dict(cfg)
    matches_path = write_matches(out, match_tables or [], item_text)
    payload = {**summary, "config": config, "benchmarks": bench_meta, "matches_file": matches_path.name,
               "sample": [{k: (r.get(k) or "")[:SNIPPET] if k in ("matched_text", "item_text") else r.get(k)
                           for k in JSON_FIELDS} for r in parts.first]}
    (out / "contamination_report.json").write_text(json.dumps(payload, indent=2, ensure_ascii=False, default=str)
                                                   + "\n")
    (out / "contamination_report.md").write_text(render_markdown(summary, rows, config, bench_meta, parts))
    plot_heatmap(summary, out / "contamination_heatmap.png")
    shown = sample_rows(rows, HTML_ROWS)
    fill_views(out, shown)
    item_full = {(b, it.id): it.problem for b, items in benchmarks.items() for it in items}
    (out / "contamination_report.html").write_text(
        render_html(summary, shown, parts.rows, item_full, out / "contamination_heatmap.png"), encoding="utf-8")
    log.info("contamination report: %d contaminated rows -> %s", parts.rows, out / "contamination_report.md")
    return summary
