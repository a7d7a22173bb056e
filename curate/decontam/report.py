"""Contamination report: OUT/contamination_report.md, .json, a PNG heat map (source x benchmark) and
OUT/contamination_matches.parquet (every match of every removed row).

Built from a finished decontamination stage (its `removed/` rows with `reason = contaminated`, their
`matches` JSON and the primary match's span in the original text, plus `stats.json` for per-source row
counts). A row is attributed to **every** benchmark it matches (benchmarks overlap: math500 is inside
math_test5000, amc2023 inside amc2022_2023), so per-benchmark counts can add up to more than the number of
removed rows. What a reviewer needs to judge a match -- the overlapping span of the training row's
original text, the benchmark item beside it, and where in the row it sits (character offset and share of
the side's text) -- is in the Markdown table (first MAX_TABLE_ROWS) and in the Parquet (all); the JSON
keeps counts and a short sample only, so it stays small on large runs.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MAX_TABLE_ROWS = 200
JSON_SAMPLE = 100  # primary matches shown in the JSON (snippets of SNIPPET characters)
SNIPPET = 300
ITEM_CHARS = 2000  # benchmark item text kept per match in the Parquet


def _md_escape(text: str, limit: int = 120) -> str:
    t = " ".join(str(text or "").split())
    if len(t) > limit:
        t = t[: limit - 1] + "…"
    return t.replace("|", "\\|").replace("`", "'")


def _contaminated_rows(out_dir: Path) -> list[dict[str, Any]]:
    """Removed rows with reason `contaminated` (only the columns the report needs)."""
    import pyarrow.parquet as pq

    cols = ["id", "source", "reason", "benchmark", "benchmark_id", "match_kind", "side", "score",
            "matched_text", "match_start", "match_end", "match_share", "matches"]
    rows: list[dict[str, Any]] = []
    for f in sorted((out_dir / "removed").glob("*.parquet")):
        names = set(pq.read_schema(f).names)
        t = pq.read_table(f, columns=[c for c in cols if c in names])
        rows.extend(r for r in t.to_pylist() if r.get("reason") == "contaminated")
    return rows


def _matches(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The row's `matches` JSON, parsed once (summarize and write_matches both read it; 77k rows on the short
    speed corpus)."""
    got = row.get("_matches")
    if got is None:
        got = row["_matches"] = json.loads(row.get("matches") or "[]")
    return got


def summarize(rows: list[dict[str, Any]], rows_in: dict[str, int], bench_items: dict[str, int]) -> dict[str, Any]:
    """Per-benchmark, per-source and per (source, benchmark) counts from contaminated rows."""
    items_hit: dict[str, set[str]] = defaultdict(set)
    rows_by_bench: dict[str, int] = defaultdict(int)
    primary_by_bench: dict[str, int] = defaultdict(int)
    cell: dict[tuple[str, str], int] = defaultdict(int)
    by_source: dict[str, dict[str, int]] = defaultdict(lambda: {"contaminated": 0, "prompt": 0, "response_only": 0})
    kinds: dict[str, int] = defaultdict(int)
    for r in rows:
        ms = _matches(r)
        benches = sorted({m["benchmark"] for m in ms})
        for b in benches:
            rows_by_bench[b] += 1
            cell[(r["source"], b)] += 1
        for m in ms:
            items_hit[m["benchmark"]].add(m["benchmark_id"])
        primary_by_bench[r["benchmark"]] += 1
        kinds[r.get("match_kind") or "?"] += 1
        s = by_source[r["source"]]
        s["contaminated"] += 1
        if any(m["side"] == "prompt" for m in ms):
            s["prompt"] += 1
        else:
            s["response_only"] += 1
    per_benchmark = {b: {"items": bench_items.get(b, 0), "items_hit": len(items_hit.get(b, ())),
                         "rows_removed": rows_by_bench.get(b, 0), "rows_primary": primary_by_bench.get(b, 0)}
                     for b in bench_items}
    per_source = {}
    for src in sorted(set(rows_in) | set(by_source)):
        n = rows_in.get(src, 0)
        c = by_source.get(src, {"contaminated": 0, "prompt": 0, "response_only": 0})
        per_source[src] = {"rows": n, "contaminated": c["contaminated"], "prompt_side": c["prompt"],
                           "response_only": c["response_only"], "rate": round(c["contaminated"] / n, 6) if n else 0.0,
                           "by_benchmark": {b: cell[(src, b)] for b in bench_items if cell.get((src, b))}}
    totals = {"rows_in": sum(rows_in.values()), "contaminated_rows": len(rows),
              "prompt_side_rows": sum(v["prompt_side"] for v in per_source.values()),
              "response_only_rows": sum(v["response_only"] for v in per_source.values()),
              "by_match_kind": dict(sorted(kinds.items()))}
    return {"totals": totals, "per_benchmark": per_benchmark, "per_source": per_source}


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
    fig, ax = plt.subplots(figsize=(max(4.5, 2.0 + 0.7 * len(benches)), 1.6 + 0.4 * len(sources)))
    im = ax.imshow(grid, cmap="Reds", vmin=0, vmax=max(grid.max(), 1e-9), aspect="auto")
    ax.set_xticks(range(len(benches)), benches, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(sources)), sources, fontsize=8)
    for i in range(len(sources)):
        for j in range(len(benches)):
            if grid[i, j] > 0:
                ax.text(j, i, _pct(grid[i, j]), ha="center",
                        va="center", fontsize=6, color="black" if grid[i, j] < 0.6 * grid.max() else "white")
    ax.set_title("Contamination rate\n(share of source rows matching each benchmark)", fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.03)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def render_markdown(summary: dict[str, Any], rows: list[dict[str, Any]], config: dict[str, Any],
                    bench_meta: dict[str, Any]) -> str:
    """The report as GitHub/Hub-readable Markdown."""
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
    shown = rows[:MAX_TABLE_ROWS]
    lines += ["", f"## Matches ({len(shown)} of {len(rows)} shown; all in contamination_matches.parquet)", "",
              "The overlapping text is the training row's original text; *where* is the character offset of the "
              "copy in that side of the row and its share of that side's length.", "",
              "| training row | source | benchmark / item | kind | side | where | score | overlapping text (training row) "
              "| benchmark item |", "|---|---|---|---|---|---|---:|---|---|"]
    for r in shown:
        where = (f"{r['match_start']:,} ({r['match_share']:.0%})" if r.get("match_start") is not None else "?")
        lines.append(f"| {_md_escape(r['id'], 50)} | {_md_escape(r['source'], 40)} | {r['benchmark']} / "
                     f"{_md_escape(r['benchmark_id'], 40)} | {r['match_kind']} | {r['side']} | {where} | "
                     f"{r['score']:.2f} | {_md_escape(r.get('matched_text') or '', 140)} | "
                     f"{_md_escape(r.get('item_text') or '', 140)} |")
    lines += ["", "## Configuration", "", "```json", json.dumps(config, indent=2, sort_keys=True, default=str), "```",
              ""]
    return "\n".join(lines)


def write_matches(out: Path, rows: list[dict[str, Any]], item_text: dict[tuple[str, str], str]) -> Path:
    """OUT/contamination_matches.parquet: one record per (removed row, match), the primary one (rank 0) with
    its span in the original text and the benchmark item's text."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    recs = []
    for r in rows:
        for rank, m in enumerate(_matches(r)):
            primary = rank == 0
            recs.append({"id": r["id"], "source": r["source"], "rank": rank, "benchmark": m["benchmark"],
                         "benchmark_id": m["benchmark_id"], "part": m.get("part"), "match_kind": m["match_kind"],
                         "side": m["side"], "score": float(m["score"]),
                         "match_start": r.get("match_start") if primary else None,
                         "match_end": r.get("match_end") if primary else None,
                         "match_share": r.get("match_share") if primary else None,
                         "matched_text": r.get("matched_text") if primary else None,
                         "item_text": item_text.get((m["benchmark"], m["benchmark_id"]))})
    schema = pa.schema([("id", pa.string()), ("source", pa.string()), ("rank", pa.int32()),
                        ("benchmark", pa.string()), ("benchmark_id", pa.string()), ("part", pa.string()),
                        ("match_kind", pa.string()), ("side", pa.string()), ("score", pa.float64()),
                        ("match_start", pa.int64()), ("match_end", pa.int64()), ("match_share", pa.float64()),
                        ("matched_text", pa.string()), ("item_text", pa.string())])
    path = out / "contamination_matches.parquet"
    pq.write_table(pa.Table.from_pylist(recs, schema=schema), path, compression="zstd")
    return path


def write_contamination_report(out_dir: str | Path, stats: dict[str, Any], benchmarks: dict[str, list],
                               cfg: Any, bench_specs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write OUT/contamination_report.{md,json}, OUT/contamination_matches.parquet and
    OUT/contamination_heatmap.png; returns the summary."""
    from cotforge.curate.core.benchmarks import items_fingerprint

    out = Path(out_dir)
    rows = _contaminated_rows(out)
    item_text = {(b, it.id): it.problem[:ITEM_CHARS] for b, items in benchmarks.items() for it in items}
    for r in rows:
        r["item_text"] = item_text.get((r["benchmark"], r["benchmark_id"]))
    rows_in = {s: v["rows_in"] for s, v in stats.get("per_source", {}).items()}
    bench_items = {b: len(items) for b, items in benchmarks.items()}
    bench_meta = {b: {"items": len(items), "fingerprint": items_fingerprint(items),
                      **({"spec": bench_specs[b]} if bench_specs and b in bench_specs else {})}
                  for b, items in benchmarks.items()}
    summary = summarize(rows, rows_in, bench_items)
    config = cfg.to_dict() if hasattr(cfg, "to_dict") else dict(cfg)
    matches_path = write_matches(out, rows, item_text)
    payload = {**summary, "config": config, "benchmarks": bench_meta, "matches_file": matches_path.name,
               "sample": [{k: (r.get(k) or "")[:SNIPPET] if k in ("matched_text", "item_text") else r.get(k)
                           for k in ("id", "source", "benchmark", "benchmark_id", "match_kind", "side", "score",
                                     "match_start", "match_share", "matched_text", "item_text")}
                          for r in rows[:JSON_SAMPLE]]}
    (out / "contamination_report.json").write_text(json.dumps(payload, indent=2, ensure_ascii=False, default=str)
                                                   + "\n")
    (out / "contamination_report.md").write_text(render_markdown(summary, rows, config, bench_meta))
    plot_heatmap(summary, out / "contamination_heatmap.png")
    log.info("contamination report: %d contaminated rows -> %s", len(rows), out / "contamination_report.md")
    return summary
