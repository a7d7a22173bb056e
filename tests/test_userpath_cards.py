"""Cards and summaries that tell the truth: `cotforge curate mix` run stage by stage finds its run's history
(or refuses folders of different runs), the card prints counts as integers and its settings collapsed with
no absolute paths, the summary shows planted vs caught, and curves with few points are not drawn as lines."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from cotforge.pipelines.cli.main import main
from cotforge.pipelines.demo_data import generate_demo_data


def _ok(*args: str) -> str:
    res = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


@pytest.fixture(scope="module")
def stage_by_stage(tmp_path_factory) -> Path:
    """The demo data curated with one `cotforge curate` command per stage, in a run-like layout."""
    run = tmp_path_factory.mktemp("sbs")
    generate_demo_data(run / "data")
    d = run / "data"
    _ok("curate", "ingest", str(d / "longcot_math.jsonl"), str(d / "shortcot_math.jsonl"), str(d / "code_tests.jsonl"),
        "-o", str(run / "ingest"))
    _ok("curate", "decontaminate", str(run / "ingest"), "-o", str(run / "decontaminate"), "--benchmarks",
        "demo_olympiad,humaneval", "--benchmarks-dir", str(d / "benchmarks"), "--workers", "1")
    _ok("curate", "dedup", str(run / "decontaminate"), "-o", str(run / "dedup"), "--workers", "1")
    _ok("curate", "mix", str(run / "dedup"), "-o", str(run / "mix"))
    return run


def test_mix_finds_the_history_of_its_run(stage_by_stage):
    card = (stage_by_stage / "mix" / "README.md").read_text()
    assert "## Contamination" in card and "| demo_olympiad |" in card  # without --history
    assert "kept after ingest | kept after decontaminate | kept after dedup" in card
    runs = {json.loads((stage_by_stage / s / "lineage.json").read_text())["run"]
            for s in ("ingest", "decontaminate", "dedup", "mix")}
    assert len(runs) == 1


def test_mix_refuses_folders_of_different_runs(stage_by_stage, tmp_path):
    other = tmp_path / "other"
    _ok("curate", "ingest", str(stage_by_stage / "data" / "longcot_math.jsonl"), "-o", str(other))
    res = CliRunner().invoke(main, ["curate", "mix", str(stage_by_stage / "dedup"), str(other), "-o",
                                    str(tmp_path / "mix")])
    assert res.exit_code == 2 and "different runs" in res.output, res.output
    res = CliRunner().invoke(main, ["curate", "mix", str(stage_by_stage / "dedup"), "-o", str(tmp_path / "mix2"),
                                    "--history", str(other)])
    assert res.exit_code == 2 and "different runs" in res.output, res.output


def test_card_counts_are_integers_and_settings_portable(stage_by_stage):
    card = (stage_by_stage / "mix" / "README.md").read_text()
    assert not re.search(r"\|\s*\d+\.0\s*\|", card)  # no 57.0
    settings = card[card.index("## Pipeline config"):]
    assert "<details>" in settings and "</details>" in settings
    assert str(stage_by_stage) not in card and not re.search(r"(^|\s|')/(tmp|home|root|work)/", card)
    assert "\n  - dedup\n" in settings  # the history, relative to the run folder


def test_summary_shows_planted_vs_caught(stage_by_stage):
    from cotforge.pipelines.summary import planted_lines

    lines = "\n".join(planted_lines(stage_by_stage))
    truth = json.loads((stage_by_stage / "data" / "truth.json").read_text())
    n_leaks = len(truth["bench_leaks"])
    assert f"| benchmark problems leaked into training rows | {n_leaks} | {n_leaks} | 0 |" in lines
    assert f"| exact duplicates | {len(truth['exact_dups'])} | {len(truth['exact_dups'])} | 0 |" in lines
    assert f"| malformed records | {truth['malformed']} | {truth['malformed']} | 0 |" in lines


def test_few_points_are_not_drawn_as_a_line(tmp_path, monkeypatch):
    import matplotlib.axes

    from cotforge.pipelines.summary import plot_curve

    calls: list[dict] = []
    real = matplotlib.axes.Axes.plot
    monkeypatch.setattr(matplotlib.axes.Axes, "plot", lambda self, *a, **k: calls.append(k) or real(self, *a, **k))
    plot_curve([{"step": 1, "reward": 0.0}, {"step": 2, "reward": 0.0}], ("reward",), tmp_path / "a.png", "RL")
    plot_curve([{"step": i, "reward": i / 10} for i in range(10)], ("reward",), tmp_path / "b.png", "RL")
    assert calls[0]["linestyle"] == "none" and calls[1]["linestyle"] == "-"
