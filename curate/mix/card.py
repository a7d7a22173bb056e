"""Hugging Face dataset card (OUT/README.md) for a mix: YAML front matter + a report of the pipeline.

Front matter follows the Hub's dataset card spec (license, pretty_name, task_categories, tags,
size_categories from the Hub's buckets, configs with data_files for the `sft` and `rl` parquet
shards). The body records the pipeline config, per-source rows in/out (per stage when earlier stages
are given), removals by reason, a contamination summary when a decontamination stage is among them,
and PNG plots (response length per source, source mix, difficulty).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from cotforge.curate.io.inputs import read_stats

log = logging.getLogger(__name__)

# The Hub's size_categories buckets (upper bounds exclusive), smallest first.
SIZE_BUCKETS: tuple[tuple[int, str], ...] = (
    (1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B"),
    (10_000_000_000, "1B<n<10B"), (100_000_000_000, "10B<n<100B"), (1_000_000_000_000, "100B<n<1T"),
)
HUB_SIZE_CATEGORIES = tuple(b for _, b in SIZE_BUCKETS) + ("n>1T",)
DOMAIN_TAGS = {"math": "mathematics", "code": "code", "science": "science"}


def size_category(n: int) -> str:
    """The Hub bucket for n examples (e.g. 999 -> "n<1K", 1000 -> "1K<n<10K")."""
    for upper, name in SIZE_BUCKETS:
        if n < upper:
            return name
    return "n>1T"


def front_matter(name: str, n_rows: int, license: str = "other", domains: list[str] | None = None,
                 rl: bool = True) -> dict[str, Any]:
    """The card's YAML metadata: license, names, tasks, tags, size bucket and sft/rl configs."""
    tags = ["reasoning", "long-cot", "cotforge"] + [DOMAIN_TAGS[d] for d in sorted(domains or []) if d in DOMAIN_TAGS]
    meta: dict[str, Any] = {
        "license": license,
        "pretty_name": name,
        "language": ["en"],
        "task_categories": ["text-generation"],
        "tags": tags,
        "size_categories": [size_category(n_rows)],
        "annotations_creators": ["machine-generated"],
        "configs": [{"config_name": "sft", "default": True, "data_files": [{"split": "train", "path": "sft/*.parquet"}]}],
    }
    if rl:
        meta["configs"].append({"config_name": "rl", "data_files": [{"split": "train", "path": "rl/*.parquet"}]})
    if license == "other":
        meta["license_name"] = "mixed (see the sources' licences)"
    return meta


def parse_front_matter(text: str) -> dict[str, Any]:
    """The YAML between the leading `---` lines of a card (raises ValueError when there is none)."""
    if not text.startswith("---\n"):
        raise ValueError("card does not start with a '---' YAML front matter block")
    end = text.find("\n---\n", 4)
    if end < 0:
        raise ValueError("card front matter is not closed by '---'")
    return yaml.safe_load(text[4:end])


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join("" if v is None else str(v) for v in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _stages(history: list[str], final: dict[str, Any]) -> list[dict[str, Any]]:
    """stats.json of each earlier stage folder (in the given order) followed by the mix's own."""
    out = []
    for d in history:
        try:
            out.append(read_stats(d))
        except FileNotFoundError:
            log.warning("card: %s has no stats.json; left out of the card", d)
    return out + [final]


def source_flow(stages: list[dict[str, Any]]) -> str:
    """Per source: rows into the first stage, then rows kept after each stage."""
    sources = sorted({s for st in stages for s in st.get("per_source", {})})
    header = ["source", f"rows in ({stages[0]['stage']})"] + [f"kept after {st['stage']}" for st in stages]
    rows = []
    for s in sources:
        first = next((st["per_source"][s]["rows_in"] for st in stages if s in st.get("per_source", {})), 0)
        rows.append([s, count(first)] + [count(st.get("per_source", {}).get(s, {}).get("kept", 0)) for st in stages])
    return _table(header, rows)


def removals(stages: list[dict[str, Any]]) -> str:
    """Rows removed per stage and reason."""
    rows = [[st["stage"], r, count(n)] for st in stages for r, n in sorted(st.get("removed_by_reason", {}).items())]
    return _table(["stage", "reason", "rows"], rows) if rows else "No rows were removed.\n"


def contamination_summary(stages: list[dict[str, Any]], history: list[str] | None = None) -> str | None:
    """Per-source contamination removals from decontamination stages, plus the per-benchmark table of
    their contamination_report.json when an earlier stage folder has one (None when there is nothing)."""
    rows = []
    for st in stages:
        name = str(st.get("stage", ""))
        if "decont" not in name and "contam" not in name:
            continue
        for s, rec in sorted(st.get("per_source", {}).items()):
            n = sum(rec.get("removed", {}).values())
            rows.append([name, s, rec.get("rows_in", 0), n, f"{n / rec['rows_in']:.2%}" if rec.get("rows_in") else ""])
    if not rows:
        return None
    text = _table(["stage", "source", "rows in", "removed as contaminated", "rate"], rows)
    for d in history or []:
        report = Path(d) / "contamination_report.json"
        if not report.exists():
            continue
        per_bench = json.loads(report.read_text()).get("per_benchmark", {})
        fingerprints = {k: v.get("fingerprint", "") for k, v in
                        json.loads(report.read_text()).get("benchmarks", {}).items() if isinstance(v, dict)}
        text += "\n" + _table(["benchmark", "items", "items hit", "training rows removed", "fingerprint"],
                              [[b, r.get("items"), r.get("items_hit"), r.get("rows_removed"), fingerprints.get(b, "")]
                               for b, r in sorted(per_bench.items())])
    return text


def render_card(name: str, stats: dict[str, Any], *, config: dict[str, Any], history: list[str] | None = None,
                license: str = "other", plots: list[str] | None = None, domains: list[str] | None = None,
                base: Path | None = None) -> str:
    """The README.md text of a mix folder (front matter + body); `base` is that folder (paths in the
    settings are written relative to it)."""
    n_sft = int(stats.get("kept", 0))
    mix = stats.get("mix", {})
    meta = front_matter(name, n_sft, license, domains, rl=bool(config.get("write_rl", True)))
    stages = _stages(history or [], stats)
    parts = [
        "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n",
        f"# {name}\n",
        f"Built with cotforge: {n_sft} SFT rows (`sft/`, schema columns plus a `messages` chat list) and "
        f"{mix.get('rl_rows', 0)} RL prompts in verl's layout (`rl/`). Load with "
        f"`datasets.load_dataset(\"parquet\", data_files=\"sft/*.parquet\")`, or by config "
        f"(`load_dataset(FOLDER, \"rl\")`; for a local folder give a fresh `cache_dir`: datasets caches "
        f"folder configs by folder name).\n",
        "## Mix\n",
        _table(["domain", f"available ({mix.get('measure', 'rows')})", "target", "drawn"],
               [[d, count(v), count(mix.get("targets", {}).get(d, 0)), count(mix.get("drawn", {}).get(d, 0))]
                for d, v in sorted(mix.get("available", {}).items())]),
        "## Rows per source\n",
        source_flow(stages),
        "## Removals by reason\n",
        removals(stages),
    ]
    contam = contamination_summary(stages, history)
    if contam:
        parts += ["## Contamination\n", contam]
    if plots:
        parts.append("## Plots\n")
        parts += [f"![{Path(p).stem}]({p})\n" for p in plots]
    settings = portable({"mix": config, "stages": [{"stage": st["stage"], "config": st.get("config", {})}
                                                    for st in stages[:-1]]}, base)
    parts += ["## Pipeline config\n", "<details><summary>Settings of every stage (paths relative to the run folder, "
              "the card folder's parent)</summary>\n", "```yaml\n" + yaml.safe_dump(settings, sort_keys=True, allow_unicode=True)
              + "```\n", "</details>\n"]
    return "\n".join(parts)


def count(value: Any) -> Any:
    """A count for a card table: an integer when the value is whole (JSON round trips give 57.0), else
    rounded to one decimal."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return int(value) if float(value).is_integer() else round(float(value), 1)


def portable(value: Any, base: Path | None) -> Any:
    """`value` with absolute paths made relative to the run folder (the parent of `base`, the card's folder)
    when they are inside it, else cut to their last two parts: a published card names no machine's folders."""
    import os

    if isinstance(value, dict):
        return {k: portable(v, base) for k, v in value.items()}
    if isinstance(value, list):
        return [portable(v, base) for v in value]
    if not isinstance(value, str) or not value.startswith("/"):
        return value
    path = Path(value)
    if base is not None and base.is_absolute() and path.is_relative_to(base.parent):
        return os.path.relpath(path, base.parent)
    return "…/" + "/".join(path.parts[-2:])


def write_card(out_dir: str | Path, name: str, stats: dict[str, Any], drawn: pl.DataFrame, *,
               config: dict[str, Any], history: list[str] | None = None, license: str = "other",
               length_unit: str = "chars") -> Path:
    """Render plots from the drawn rows and write OUT/README.md; returns its path."""
    from cotforge.curate.core.plots import difficulty_histogram, length_histogram, source_mix

    out = Path(out_dir)
    counts = drawn.group_by("source", "domain").len("rows")
    made = [length_histogram(drawn, out / "plots" / "length_hist.png", length_unit),
            source_mix(counts, out / "plots" / "source_mix.png"),
            difficulty_histogram(drawn, out / "plots" / "difficulty_hist.png")]
    plots = [str(Path(p).relative_to(out)) for p in made if p]
    domains = sorted(drawn["domain"].unique().to_list()) if drawn.height else []
    text = render_card(name, stats, config=config, history=history, license=license, plots=plots, domains=domains,
                       base=out.resolve())
    path = out / "README.md"
    path.write_text(text)
    return path
