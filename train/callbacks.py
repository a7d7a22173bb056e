"""Plain training logs any trainer can share: a TrainerCallback writing `log.jsonl` + `log.csv`, and a PNG
of the curves. Works next to `report_to` (TensorBoard, W&B), which it does not replace.

On resume the callback keeps the earlier run's records up to the checkpoint's step and drops the ones
after it, so the files show one trajectory.
"""

from __future__ import annotations

import csv
import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

log = logging.getLogger(__name__)

DEFAULT_CURVES = ("loss", "eval_loss", "learning_rate", "grad_norm")


def _scalar(value: Any) -> Any:
    """Keep numbers and strings; turn tensors/numpy scalars into floats; drop the rest (returns None)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float, str)):
        return value
    if hasattr(value, "item"):
        try:
            return value.item()
        except (ValueError, RuntimeError):
            return None
    return None


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Records of a JSON-lines log (missing file gives [])."""
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_csv(records: list[dict[str, Any]], path: str | Path) -> Path:
    """Write records to CSV with the union of their keys as header (`step`, `epoch` first)."""
    keys: list[str] = []
    for rec in records:
        keys += [k for k in rec if k not in keys]
    head = [k for k in ("step", "epoch") if k in keys]
    header = head + [k for k in keys if k not in head]
    p = Path(path)
    with p.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=header, restval="")
        writer.writeheader()
        writer.writerows(records)
    return p


LINE_KEYS = ("loss", "train_loss", "eval_loss", "reward", "rewards/mean", "accuracy", "policy_loss", "grad_norm",
             "learning_rate")


class LogLines(TrainerCallback):
    """One log line per Trainer log event on stderr (through `logging`), in place of transformers'
    PrinterCallback, which prints each raw log dict to stdout when progress bars are off."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        shown = [k for k in LINE_KEYS if isinstance(logs.get(k), (int, float))] or \
            [k for k, v in logs.items() if isinstance(v, (int, float))][:6]
        total = f"/{state.max_steps}" if state.max_steps and state.max_steps > 0 else ""
        log.info("step %d%s: %s", state.global_step, total, ", ".join(f"{k} {logs[k]:.4g}" for k in shown))


def quiet_printer(trainer: Any) -> None:
    """Replace transformers' PrinterCallback (raw dicts on stdout) with `LogLines` (one line on stderr)."""
    from transformers.trainer_callback import PrinterCallback

    if trainer.pop_callback(PrinterCallback) is not None:
        trainer.add_callback(LogLines())


class CsvJsonLogger(TrainerCallback):
    """Append each `on_log` record (plus `step`, `epoch`) to OUTPUT/log.jsonl and rewrite OUTPUT/log.csv;
    draw OUTPUT/loss.png at the end of training (and at each checkpoint if `plot_on_save`, ~1 s each).
    Only the main process writes."""

    def __init__(self, output_dir: str | Path, curves: Sequence[str] = DEFAULT_CURVES,
                 png_name: str = "loss.png", plot_on_save: bool = False):
        self.output_dir = Path(output_dir)
        self.curves = tuple(curves)
        self.jsonl_path = self.output_dir / "log.jsonl"
        self.csv_path = self.output_dir / "log.csv"
        self.png_path = self.output_dir / png_name
        self.plot_on_save = plot_on_save
        self.records: list[dict[str, Any]] = []

    def on_train_begin(self, args, state, control, **kwargs):
        """Start fresh, or (on resume) keep the earlier records up to the restored step."""
        if not state.is_world_process_zero:
            return
        self.output_dir.mkdir(parents=True, exist_ok=True)
        old = read_jsonl(self.jsonl_path) if state.global_step > 0 else []
        self.records = [r for r in old if r.get("step", 0) <= state.global_step]
        self._flush(rewrite=True)

    def on_log(self, args, state, control, logs=None, **kwargs):
        """Record one log event."""
        if not state.is_world_process_zero or not logs:
            return
        rec: dict[str, Any] = {"step": state.global_step, "epoch": _scalar(state.epoch)}
        for k, v in logs.items():
            s = _scalar(v)
            if s is not None and not (isinstance(s, float) and math.isnan(s)):
                rec[k] = s
        self.records.append(rec)
        self._flush(rewrite=False)

    def on_save(self, args, state, control, **kwargs):
        """Refresh the PNG when a checkpoint is written (if `plot_on_save`)."""
        if self.plot_on_save and state.is_world_process_zero:
            self.plot()

    def on_train_end(self, args, state, control, **kwargs):
        """Final CSV and PNG."""
        if state.is_world_process_zero:
            write_csv(self.records, self.csv_path)
            self.plot()

    def plot(self) -> Path | None:
        """Draw the configured curves that have data; returns the PNG path (None when nothing to draw)."""
        if not self.records:
            return None
        write_csv(self.records, self.csv_path)
        return plot_curves(self.csv_path, self.curves, self.png_path)

    def _flush(self, rewrite: bool) -> None:
        """Write the JSONL (append the last record, or rewrite all) and the CSV."""
        self.output_dir.mkdir(parents=True, exist_ok=True)
        if rewrite:
            self.jsonl_path.write_text("".join(json.dumps(r) + "\n" for r in self.records), encoding="utf-8")
        else:
            with self.jsonl_path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(self.records[-1]) + "\n")
        write_csv(self.records, self.csv_path)


def _read_series(csv_path: str | Path, key: str) -> tuple[list[float], list[float]]:
    """(steps, values) of one CSV column, skipping empty and non-numeric cells."""
    xs, ys = [], []
    with Path(csv_path).open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            try:
                x, y = float(row.get("step") or "nan"), float(row.get(key) or "nan")
            except ValueError:
                continue
            if not (math.isnan(x) or math.isnan(y)):
                xs.append(x)
                ys.append(y)
    return xs, ys


def plot_curves(csv_path: str | Path, keys: Sequence[str], png_path: str | Path) -> Path | None:
    """Plot each key of a step-indexed CSV log in its own panel and save a PNG.

    Keys without data are skipped; returns None (and writes nothing) when no key has data, or when
    matplotlib is not installed (a GPU node may lack it: the CSV/JSON logs are still written).
    """
    series = [(k, *_read_series(csv_path, k)) for k in keys]
    series = [s for s in series if s[1]]
    if not series:
        log.info("plot_curves: none of %s has data in %s", list(keys), csv_path)
        return None
    try:
        from matplotlib.figure import Figure
    except ImportError:
        log.warning("plot_curves: matplotlib is not installed; %s not drawn (the CSV log is written)", png_path)
        return None
    fig = Figure(figsize=(6, 2.2 * len(series)))
    fig.subplots_adjust(left=0.16, right=0.97, top=0.97, bottom=0.12 / len(series) + 0.04, hspace=0.35)
    axes = fig.subplots(len(series), 1, squeeze=False)[:, 0]
    for ax, (key, xs, ys) in zip(axes, series, strict=True):
        ax.plot(xs, ys, marker="." if len(xs) < 50 else None)
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("step")
    out = Path(png_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    return out


def train_stats(out_dir: str | Path, global_step: int | None = None) -> dict[str, Any]:
    """Steps and last logged values of a training run, from its output folder's log.jsonl (what the
    pipeline's manifest records for a train stage, also when it ran through a launcher)."""
    out = Path(out_dir)
    rows = read_jsonl(out / "log.jsonl")
    stats: dict[str, Any] = {"stage": out.name, "log_rows": len(rows)}
    if rows:
        stats["steps"] = max(int(r.get("step", 0)) for r in rows)
        last = {k: v for r in rows for k, v in r.items() if isinstance(v, (int, float)) and k != "step"}
        stats["last"] = {k: last[k] for k in sorted(last)}
    if global_step is not None:
        stats["steps"] = int(global_step)
    return stats
