"""PNG plots for profiles and dataset cards (matplotlib, Agg backend, deterministic file output)."""

from __future__ import annotations

import logging
from pathlib import Path

import polars as pl

log = logging.getLogger(__name__)

DIFFICULTY_ORDER = ("hard", "medium", "easy", "unknown")


def _plt():
    """pyplot on the non-interactive Agg backend (no display on servers)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> str:
    """Write `fig` to `path` (metadata stripped so the bytes depend only on the data)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight", metadata={"Software": None})
    _plt().close(fig)
    return str(path)


def _integer_y(ax) -> None:
    """Row counts on the y axis: integer ticks only."""
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def _short(x: float, _pos: int = 0) -> str:
    """1500 -> "1.5k", 2000000 -> "2M": tick labels that fit."""
    for div, suffix in ((1e6, "M"), (1e3, "k")):
        if x >= div:
            return f"{x / div:g}{suffix}"
    return f"{x:g}"


def _readable_log_x(ax) -> None:
    """A log x axis labelled at 1, 2 and 5 times each power of ten (a range inside one decade would otherwise
    get one or two labels)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(_short))
    ax.xaxis.set_minor_formatter(NullFormatter())


def length_histogram(rows: pl.DataFrame, path: str | Path, unit: str = "chars", bins: int = 30) -> str | None:
    """Response length histogram per source (log-spaced bins); needs columns source, length, has_response."""
    data = rows.filter(pl.col("has_response") & (pl.col("length") > 0))
    if data.is_empty():
        return None
    import numpy as np

    plt = _plt()
    lo, hi = max(1, int(data["length"].min())), int(data["length"].max()) + 1
    edges = np.logspace(np.log10(lo), np.log10(max(hi, lo + 1)), bins + 1)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for src in sorted(data["source"].unique().to_list()):
        ax.hist(data.filter(pl.col("source") == src)["length"].to_numpy(), bins=edges, histtype="step",
                label=src, linewidth=1.4)
    ax.set_xscale("log")
    _readable_log_x(ax)
    _integer_y(ax)
    ax.set_xlabel(f"response length ({unit}, log scale)")
    ax.set_ylabel("rows")
    ax.set_title("Response length per source")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, Path(path))


def source_mix(counts: pl.DataFrame, path: str | Path, value: str = "rows") -> str | None:
    """Horizontal bar chart of rows per source (coloured by domain); needs source, domain, `value`."""
    if counts.is_empty():
        return None
    plt = _plt()
    data = counts.sort("domain", "source")
    labels = [f"{s} ({d})" for s, d in zip(data["source"], data["domain"], strict=True)]
    domains = sorted(data["domain"].unique().to_list())
    colours = {d: f"C{i}" for i, d in enumerate(domains)}
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(labels) + 1.2))
    ax.barh(labels, data[value].to_list(), color=[colours[d] for d in data["domain"]])
    ax.invert_yaxis()
    if value == "rows":
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(value)
    ax.set_title("Source mix")
    return _save(fig, Path(path))


def difficulty_histogram(rows: pl.DataFrame, path: str | Path) -> str | None:
    """Pass-rate histogram when pass rates exist, else counts per difficulty bin; None without any."""
    plt = _plt()
    rates = rows.filter(pl.col("pass_rate").is_not_null())["pass_rate"] if "pass_rate" in rows.columns else None
    if rates is not None and len(rates):
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.hist(rates.to_numpy(), bins=[i / 10 for i in range(11)], color="C2", edgecolor="black")
        ax.set_xlabel("pass rate p of the reference model")
        ax.set_ylabel("rows")
        _integer_y(ax)
        ax.set_title("Difficulty (pass rate)")
        return _save(fig, Path(path))
    if "difficulty" not in rows.columns or rows["difficulty"].is_null().all():
        return None
    diff = rows["difficulty"].fill_null("unknown").to_list()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.bar(list(DIFFICULTY_ORDER), [diff.count(b) for b in DIFFICULTY_ORDER], color="C2")
    ax.set_ylabel("rows")
    _integer_y(ax)
    ax.set_title("Difficulty bins")
    return _save(fig, Path(path))
