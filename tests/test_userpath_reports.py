"""Reports a reviewer can defend: the contamination report samples every benchmark x source pair (lowest score
first), shows full ids, offsets or why there are none, a count table and a titled heat map; the HTML reports
(contamination, dedup) are single files that a real browser (Debian's chromium, headless) renders with the
expected cards, no console errors and working filters. Screenshots of the demo's two reports are written to
$COTFORGE_TEST_ARTEFACTS when set (the copies in tests/artefacts/ come from such a run)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from cotforge.curate.decontam.report import render_markdown, sample_rows, summarize
from cotforge.curate.dedup.report import differing_spans, sample_pairs
from cotforge.curate.io import html
from cotforge.pipelines.cli.main import main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _row(i: int, bench: str, source: str, score: float, start: int | None = 0) -> dict:
    m = {"benchmark": bench, "benchmark_id": f"{bench}-test/intermediate_algebra/{1000 + i}.json", "part": None,
         "match_kind": "ngram", "side": "prompt", "score": score}
    return {"id": f"{source}-row-{i:04d}-with-a-long-identifier-that-must-not-be-cut", "source": source,
            "reason": "contaminated", "benchmark": bench, "benchmark_id": m["benchmark_id"], "match_kind": "ngram",
            "side": "prompt", "score": score, "matched_text": "class solution def fn self n int k" if start is None
            else "the copied words", "match_start": start, "match_end": None if start is None else 16,
            "match_share": None if start is None else 0.0, "matches": json.dumps([m]), "item_text": "item"}


def test_sample_covers_every_benchmark_source_pair_lowest_score_first():
    rows = [_row(i, "math500", "big_source", 0.5 + i / 1000) for i in range(300)]
    rows += [_row(300 + i, "leetcode", "code_source", 0.9 - i / 100) for i in range(5)]
    rows += [_row(400, "aime2024", "big_source", 0.99)]
    shown = sample_rows(rows, 200)
    pairs = {(r["benchmark"], r["source"]) for r in shown}
    assert pairs == {("math500", "big_source"), ("leetcode", "code_source"), ("aime2024", "big_source")}
    leet = [r["score"] for r in shown if r["benchmark"] == "leetcode"]
    assert leet == sorted(leet) and len(leet) == 5  # all 5 of the small pair, lowest first
    math = [r["score"] for r in shown if r["benchmark"] == "math500"]
    assert math == sorted(math) and math[0] == 0.5


def test_markdown_has_counts_full_ids_and_says_why_no_offset():
    rows = [_row(0, "math500", "a", 0.6), _row(1, "math500", "b", 0.7, start=None), _row(2, "leetcode", "b", 0.8)]
    summary = summarize(rows, {"a": 10, "b": 20}, {"math500": 500, "leetcode": 100})
    text = render_markdown(summary, rows, {"threshold": 0.5, "benchmarks_dir": "/abs/path"}, {})
    assert "## Contaminated rows per benchmark x source" in text
    assert "| math500 | 1 | 1 | 2 |" in text and "| leetcode | 0 | 1 | 1 |" in text
    for r in rows:  # ids and item ids in full
        assert r["id"] in text and r["benchmark_id"] in text
    assert "no offset" in text and "could not be anchored" in text and "*normalised:*" in text
    assert "0-16 (0%)" in text  # a span with offsets shows start-end and share
    assert "<details>" in text  # the configuration is collapsed


def test_dedup_diff_marks_the_words_that_differ():
    a = "Return the maximum sum you can collect from either side of the array."
    b = "Return the maximum sum you can collect only from left to right of the array."
    sa, sb = differing_spans(a, b)
    assert [a[s:e] for s, e in sa] == ["either side"]
    assert [b[s:e] for s, e in sb] == ["only", "left to right"]
    pairs = [{"reason": r, "source": s, "score": sc, "id": f"{r}{s}{sc}"}
             for r, s, sc in [("near_duplicate", "x", 0.9), ("near_duplicate", "x", 0.4), ("exact_duplicate", "y", 1.0)]]
    shown = sample_pairs(pairs, 2)
    assert {(p["reason"], p["source"]) for p in shown} == {("near_duplicate", "x"), ("exact_duplicate", "y")}
    assert [p["score"] for p in shown if p["reason"] == "near_duplicate"] == [0.4]


def test_html_page_is_self_contained():
    page = html.page("t", html.filters({"benchmark": ["a"]}) + html.card({"benchmark": "a"}, "h", "l",
                                                                          html.marked("x<y>z", [(1, 4)]), "r", "r"))
    assert "<mark>&lt;y&gt;</mark>" in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing fetched from the network


# ---------------------------------------------------------------------------------------------- browser


def _chromium(args: list[str], url: str, timeout: int = 90) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--enable-logging=stderr", "--v=0", "--virtual-time-budget=3000", *args, url],
                          capture_output=True, text=True, timeout=timeout)


def _console_errors(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if "CONSOLE" in ln and ("Uncaught" in ln or "Error" in ln)]


def _check_in_browser(report: Path, shots: Path, name: str, cards: int, filter_key: str, filter_value: str,
                      filtered: int) -> None:
    """Load the report in headless chromium: screenshot it, read the DOM after the page's script ran, and
    check the cards, the live count, a preset filter and the console."""
    png = shots / f"{name}.png"
    res = _chromium([f"--screenshot={png}", "--window-size=1400,1800"], report.as_uri())
    assert png.exists() and png.stat().st_size > 20_000, res.stderr[-2000:]
    assert not _console_errors(res.stderr), _console_errors(res.stderr)
    dom = _chromium(["--dump-dom"], report.as_uri())
    assert not _console_errors(dom.stderr), _console_errors(dom.stderr)
    assert dom.stdout.count('class="card"') == cards
    assert f'<span id="shown">{cards} shown</span>' in dom.stdout  # the filter script ran
    one = _chromium(["--dump-dom"], report.as_uri() + f"#{filter_key}={filter_value}")
    assert f'<span id="shown">{filtered} shown</span>' in one.stdout
    assert one.stdout.count('class="card hidden"') == cards - filtered


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (.ci/run installs Debian's chromium)")
def test_demo_reports_in_a_real_browser(tmp_path):
    run = tmp_path / "run"
    res = CliRunner().invoke(main, ["run", "demo", "--profile", "small", "--until", "dedup", "--run-dir", str(run)])
    assert res.exit_code == 0, res.output
    shots = Path(os.environ.get("COTFORGE_TEST_ARTEFACTS") or tmp_path / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    matches = json.loads((run / "decontaminate" / "contamination_report.json").read_text())["sample"]
    contaminated = json.loads((run / "decontaminate" / "stats.json").read_text())["removed_by_reason"]["contaminated"]
    assert len(matches) == contaminated >= 2
    humaneval = sum(m["benchmark"] == "humaneval" for m in matches)
    _check_in_browser(run / "decontaminate" / "contamination_report.html", shots, "contamination_report",
                      contaminated, "benchmark", "humaneval", humaneval)
    html_text = (run / "decontaminate" / "contamination_report.html").read_text()
    assert html_text.count("<mark>") >= contaminated  # every row with an offset has its copy marked
    dedup = json.loads((run / "dedup" / "stats.json").read_text())["removed_by_reason"]
    merged = dedup.get("exact_duplicate", 0) + dedup.get("near_duplicate", 0)
    _check_in_browser(run / "dedup" / "dedup_report.html", shots, "dedup_report", merged, "reason",
                      "near_duplicate", dedup.get("near_duplicate", 0))
    md = (run / "dedup" / "dedup_report.md").read_text()
    assert md.count("| near_duplicate | ") == dedup.get("near_duplicate", 0) + 1  # count row + each pair


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (.ci/run installs Debian's chromium)")
def test_browser_check_sees_console_errors(tmp_path):
    """The console check can fail: a page whose script throws is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>undefinedFunction()</script></body></html>")
    assert _console_errors(_chromium(["--dump-dom"], bad.as_uri()).stderr)
