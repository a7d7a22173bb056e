"""Run summary: RUN/summary.md with the stage table, the curation funnel, PNG curves (SFT loss, RL
reward) and links to every artefact; and publishing the dataset card + contamination report.

Everything is read back from the run folder (manifest.json, stats.json, training logs), so the summary
can be rebuilt for any finished or partial run with `write_summary(run_dir)`.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MIN_CURVE_POINTS = 4  # fewer logged points are drawn as markers only
METRIC_FILE = "log.jsonl"  # what SFT and RL both write (train/callbacks.py CsvJsonLogger)
CARD_FILES = (("mix", "README.md", "README.md"),
              ("decontaminate", "contamination_report.md", "contamination_report.md"),
              ("decontaminate", "contamination_report.json", "contamination_report.json"),
              ("decontaminate", "contamination_heatmap.png", "contamination_heatmap.png"))
# (stage, path inside its folder, label) of the artefacts the summary links when present.
ARTEFACTS = (
    ("data", "truth.json", "generated demo sources and planted duplicates/contamination"),
    ("ingest", "stats.json", "ingestion stats (quarantined rows in removed/)"),
    ("decontaminate", "contamination_report.md", "contamination report"),
    ("decontaminate", "contamination_report.html", "contamination report (HTML: rows beside benchmark items)"),
    ("dedup", "dedup_report.html", "dedup report (HTML: merged pairs side by side)"),
    ("decontaminate", "removed", "contaminated rows"),
    ("dedup", "removed", "duplicate rows (with duplicate_of)"),
    ("verify", "stats.json", "verification stats"),
    ("difficulty", "stats.json", "difficulty bins"),
    ("profile", "profile.md", "source profile"),
    ("select", "selection.md", "source selection"),
    ("mix", "README.md", "dataset card"),
    ("mix", "sft", "SFT shards (messages)"),
    ("mix", "rl", "RL rows (verl layout)"),
    ("model", "model", "base model"),
    ("eval_base", "report.md", "evaluation of the base model"),
    ("sft", "log.csv", "SFT training log"),
    ("sft", "config.json", "SFT model"),
    ("rl_data", "rl_math", "RL math prompts (verl layout, RL data branch)"),
    ("rl_data", "rl_code", "RL code prompts (verl layout, RL data branch)"),
    ("rl", "log.csv", "RL training log"),
    ("rl", "final", "RL model"),
    ("rl_code", "log.csv", "code RL training log"),
    ("rl_code", "final", "code RL model"),
    ("evaluate", "report.md", "evaluation of the final model"),
)


def read_metrics(stage_dir: str | Path) -> list[dict[str, Any]]:
    """The JSON-lines training log of a train stage (log.jsonl), [] if none."""
    p = Path(stage_dir) / METRIC_FILE
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]


def plot_curve(rows: list[dict[str, Any]], keys: tuple[str, ...], path: Path, title: str) -> Path | None:
    """One PNG line plot of the first key in `keys` the rows have, against `step`; None without data."""
    key = next((k for k in keys if any(isinstance(r.get(k), (int, float)) for r in rows)), None)
    if key is None:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    pts = [(r.get("step", i), r[key]) for i, r in enumerate(rows) if isinstance(r.get(key), (int, float))]
    fig, ax = plt.subplots(figsize=(4.5, 3))
    few = len(pts) < MIN_CURVE_POINTS  # a line through two or three points would read as a trend
    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=4 if few else 3,
            linestyle="none" if few else "-")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(key)
    ax.set_title(title + (f"\n({len(pts)} logged steps: points, not a trend)" if few else ""), fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def stage_table(manifest: dict[str, Any]) -> list[str]:
    """Markdown rows: stage, status, wall time, rows in / kept / removed, top removal reasons."""
    lines = ["| stage | status | wall (s) | rows in | kept / out | removed | removed by reason |",
             "|---|---|---:|---:|---:|---:|---|"]
    for name, e in manifest.get("stages", {}).items():
        rows = e.get("rows", {})
        reasons = ", ".join(f"{k}: {v}" for k, v in (rows.get("removed_by_reason") or {}).items())
        kept = rows.get("kept", rows.get("rows_out", rows.get("steps")))
        if "steps" in rows and "kept" not in rows:  # a training stage
            kept = f"{rows['steps']} steps"
        lines.append(f"| {name} | {e.get('status', '')} | {_fmt(e.get('wall_s'))} | {_fmt(rows.get('rows_in'))} "
                     f"| {_fmt(kept)} | {_fmt(rows.get('removed'))} | {reasons} |")
    return lines


def _eval_lines(run: Path, manifest: dict[str, Any]) -> list[str]:
    """Before/after evaluation numbers when eval stages ran."""
    lines: list[str] = []
    for name, label in (("eval_base", "base model"), ("evaluate", "final model")):
        p = run / name / "results.json"
        if not p.exists():
            continue
        res = json.loads(p.read_text())
        for bench, r in (res.get("benchmarks") or {}).items():
            nums = {k: v for k, v in r.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            shown = ", ".join(f"{k} {_fmt(v)}" for k, v in list(nums.items())[:6])
            lines.append(f"- {label}, {bench}: {shown}")
    return lines


def _removed(stage_dir: Path, columns: list[str]) -> list[dict[str, Any]]:
    """Removed rows of a stage folder (only `columns`), [] when it has none."""
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = []
    for f in sorted((stage_dir / "removed").glob("*.parquet")):
        names = set(pq.read_schema(f).names)
        rows += pq.read_table(f, columns=[c for c in columns if c in names]).to_pylist()
    return rows


def planted_lines(run: Path) -> list[str]:
    """Planted vs caught, when the run's data says what was planted (the demo's data/truth.json): leaked
    benchmark problems vs rows removed as contaminated, duplicates vs rows removed naming their original,
    malformed records vs rows quarantined at ingest."""
    truth_path = run / "data" / "truth.json"
    if not truth_path.exists():
        return []
    truth = json.loads(truth_path.read_text())
    contaminated = {r["id"] for r in _removed(run / "decontaminate", ["id", "reason"]) if r.get("reason") == "contaminated"}
    dup_of = {r["id"]: r.get("duplicate_of") for r in _removed(run / "dedup", ["id", "duplicate_of"])}
    lines = ["| planted | rows | caught | missed | caught by |", "|---|---:|---:|---:|---|"]

    def row(label: str, planted: int, caught: int | None, by: str) -> None:
        shown = "not run" if caught is None else str(caught)
        missed = "" if caught is None else str(planted - caught)
        lines.append(f"| {label} | {planted} | {shown} | {missed} | {by} |")

    ran_decontam, ran_dedup = (run / "decontaminate" / "stats.json").exists(), (run / "dedup" / "stats.json").exists()
    for key, label in (("bench_leaks", "benchmark problems leaked into training rows"),
                       ("humaneval_leaks", "HumanEval problems leaked into code rows")):
        ids = truth.get(key) or []
        if ids:
            row(label, len(ids), sum(i in contaminated for i in ids) if ran_decontam else None,
                "decontaminate (reason contaminated)")
    for key, label in (("exact_dups", "exact duplicates"), ("near_dups", "near duplicates (reworded)")):
        pairs = truth.get(key) or []
        if pairs:
            row(label, len(pairs), sum(dup_of.get(d) == o for d, o in pairs) if ran_dedup else None,
                "dedup (removed, duplicate_of = the original)")
    if isinstance(truth.get("malformed"), int) and truth["malformed"]:
        ingest = run / "ingest" / "stats.json"
        caught = json.loads(ingest.read_text()).get("removed_by_reason", {}).get("malformed", 0) \
            if ingest.exists() else None
        row("malformed records", truth["malformed"], caught, "ingest (quarantined, reason malformed)")
    return lines if len(lines) > 2 else []


def write_summary(run_dir: str | Path, manifest: dict[str, Any] | None = None) -> Path:
    """Write RUN/summary.md (+ RUN/plots/*.png) from the run folder; returns the summary path."""
    run = Path(run_dir)
    if manifest is None:
        manifest = json.loads((run / "manifest.json").read_text())
    plots = run / "plots"
    curves = []
    sft_png = plot_curve(read_metrics(run / "sft"), ("loss", "train_loss"), plots / "sft_loss.png", "SFT loss")
    rl_png = plot_curve(read_metrics(run / "rl"), ("reward", "rewards/mean", "train/reward"), plots / "rl_reward.png",
                        "RL mean reward")
    code_png = plot_curve(read_metrics(run / "rl_code"), ("reward", "rewards/mean", "train/reward"),
                          plots / "rl_code_reward.png", "code RL mean reward")
    for png, label in ((sft_png, "SFT loss"), (rl_png, "RL reward"), (code_png, "code RL reward")):
        if png is not None:
            curves.append(f"![{label}]({png.relative_to(run).as_posix()})")
    v = manifest.get("versions", {})
    lines = [f"# Run summary: {manifest.get('recipe', run.name)}", "",
             f"- run directory: `{run}`",
             f"- recipe: `{manifest.get('recipe_file')}` (config hash `{manifest.get('config_hash')}`), "
             f"seed {manifest.get('seeds', {}).get('recipe')}",
             f"- complete: {manifest.get('complete')}; stage wall time {_fmt(manifest.get('total_stage_wall_s'))} s "
             f"(this invocation {_fmt(manifest.get('last_invocation_wall_s'))} s, "
             f"{manifest.get('invocations')} invocation(s))",
             "- versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val), "",
             "## Stages", "", *stage_table(manifest), ""]
    planted = planted_lines(run)
    if planted:
        lines += ["## Planted vs caught", "", "What the demo data planted (data/truth.json) and what the stages "
                  "removed:", "", *planted, ""]
    evals = _eval_lines(run, manifest)
    if evals:
        lines += ["## Evaluation", "", *evals, ""]
    if curves:
        lines += ["## Training curves", "", *curves, ""]
    lines += ["## Artefacts", ""]
    for stage, rel, label in ARTEFACTS:
        p = run / stage / rel
        if p.exists():
            lines.append(f"- [{label}]({(Path(stage) / rel).as_posix()})")
    if manifest.get("published_cards"):
        lines.append(f"- published cards: {', '.join(manifest['published_cards'])}")
    lines += ["- [manifest](manifest.json)", ""]
    out = run / "summary.md"
    out.write_text("\n".join(lines))
    log.info("run summary -> %s", out)
    return out


def publish_cards(run_dir: str | Path, dest: str | Path) -> list[str]:
    """Copy the mix's dataset card (+ its plots) and the contamination report into `dest` (e.g. data_cards/).

    The run folder's absolute path is replaced by `<run>` in text files, so re-running the demo
    regenerates byte-identical cards wherever it runs."""
    run, dst = Path(run_dir), Path(dest)
    dst.mkdir(parents=True, exist_ok=True)
    copied = []
    files = list(CARD_FILES) + [("mix", f"plots/{p.name}", f"plots/{p.name}")
                                for p in sorted((run / "mix" / "plots").glob("*.png"))]
    for stage, rel, name in files:
        src = run / stage / rel
        if not src.exists():
            continue
        target = dst / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.suffix in (".md", ".json"):
            target.write_text(_portable(src.read_text(encoding="utf-8"), run), encoding="utf-8")
        else:
            shutil.copyfile(src, target)
        copied.append(str(target))
    log.info("published %d card files to %s", len(copied), dst)
    return copied


def _portable(text: str, run: Path) -> str:
    """Replace the run folder's absolute (and given) path by `<run>`."""
    for form in sorted({str(run.resolve()), str(run)}, key=len, reverse=True):
        if form not in (".", ""):
            text = text.replace(form, "<run>")
    return text
