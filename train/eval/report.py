"""results.json (per-benchmark metrics with CIs, per-item results, model and versions) and
report.md / report.png."""

from __future__ import annotations

import platform
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cotforge.curate.core.schema import load_meta
from cotforge.train.eval.config import EvalConfig
from cotforge.train.eval.items import EvalItem, benchmark_fingerprint
from cotforge.train.eval.metrics import maj_at_k, math_equivalent, mean_ci, pass_at_k


def compute_results(cfg: EvalConfig, all_items: dict[str, list[EvalItem]],
                    rows: list[dict[str, Any]]) -> dict[str, Any]:
    """results.json content: config, model, versions, per-benchmark metrics with CIs and per-item results."""
    ks = cfg.benchmark_ks()
    by_item: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        if r["sample_idx"] < ks.get(r["benchmark"], 0):
            by_item.setdefault((r["benchmark"], r["item_id"]), []).append(r)
    benches = {}
    for name, items in all_items.items():
        benches[name] = _benchmark_metrics(cfg, name, ks[name], items, by_item)
    return {"config": asdict(cfg), "model": _model_info(cfg.model), "versions": _versions(),
            "benchmarks": benches}


def _benchmark_metrics(cfg: EvalConfig, name: str, k: int, items: list[EvalItem],
                       by_item: dict[tuple[str, str], list[dict[str, Any]]]) -> dict[str, Any]:
    """Per-item avg/pass/maj and their item-level means with confidence intervals."""
    domain = items[0].domain
    pass_ks = sorted({j for j in (cfg.pass_ks or _default_pass_ks(k)) if 1 <= j <= k})
    per_item = []
    for it in items:
        samples = sorted(by_item.get((name, it.id), []), key=lambda r: r["sample_idx"])
        if len(samples) < k:
            raise RuntimeError(f"{name} item {it.id!r}: {len(samples)} of {k} samples present after generation")
        corr = [bool(r["correct"]) for r in samples]
        c = sum(corr)
        rec: dict[str, Any] = {"id": it.id, "n": k, "correct": c, f"avg@{k}": c / k,
                               "mean_score": sum(float(r["score"]) for r in samples) / k,
                               "mean_tokens": sum(int(r["n_tokens"]) for r in samples) / k,
                               "truncated": sum(r["finish_reason"] == "length" for r in samples)}
        for j in pass_ks:
            rec[f"pass@{j}"] = pass_at_k(k, c, j)
        if domain == "math":
            eq = math_equivalent if cfg.maj_verify_max_groups > 0 else None
            rec[f"maj@{k}"] = float(maj_at_k([r["extracted"] for r in samples], corr, eq,
                                             cfg.maj_verify_max_groups))
        per_item.append(rec)
    metric_names = [f"avg@{k}"] + [f"pass@{j}" for j in pass_ks if j > 1] + (
        [f"maj@{k}"] if domain == "math" else []) + (["mean_score"] if domain == "code" else [])
    metrics = {}
    for m in metric_names:
        mean, lo, hi = mean_ci([r[m] for r in per_item], cfg.ci, cfg.ci_level, cfg.n_bootstrap, cfg.seed)
        metrics[m] = {"value": mean, "ci_low": lo, "ci_high": hi}
    n_samples = k * len(items)
    headline = [f"avg@{k}"] + ([f"pass@{k}"] if k > 1 else []) + ([f"maj@{k}"] if domain == "math" else [])
    # headline scalars first: run summaries show a benchmark's first top-level numbers
    return {**{m: metrics[m]["value"] for m in headline}, "k": k, "n_items": len(items), "n_samples": n_samples,
            "domain": domain,
            "ci": {"method": cfg.ci, "level": cfg.ci_level, "over": "items"}, "metrics": metrics,
            "mean_tokens": sum(r["mean_tokens"] for r in per_item) / len(per_item),
            "truncated_fraction": sum(r["truncated"] for r in per_item) / n_samples,
            "subset_fingerprint": benchmark_fingerprint(items), "items": per_item}


def _default_pass_ks(k: int) -> list[int]:
    """1, 2, 4, ... up to k, and k itself."""
    out, j = [], 1
    while j <= k:
        out.append(j)
        j *= 2
    return sorted(set(out) | {k})


def _model_info(model: str) -> dict[str, Any]:
    """The model id/path and, for a local folder, its architecture from config.json."""
    info: dict[str, Any] = {"id": model}
    p = Path(model)
    if p.is_dir():
        info["path"] = str(p.resolve())
        cfg = load_meta((p / "config.json").read_text()) if (p / "config.json").exists() else {}
        info["architectures"] = cfg.get("architectures")
        info["model_type"] = cfg.get("model_type")
    return info


def _versions() -> dict[str, str | None]:
    """Installed versions of what generation and scoring depend on."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {"python": platform.python_version()}
    for pkg in ("cotforge", "torch", "transformers", "vllm", "math-verify", "datasets"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def write_report(results: dict[str, Any], out: Path) -> None:
    """OUT/report.md (one row per benchmark, main metric with its CI) and OUT/report.png (bar chart)."""
    cfg = results["config"]
    lines = [f"# Evaluation of `{results['model']['id']}`", "",
             f"Sampling: temperature {cfg['temperature']}, top_p {cfg['top_p']}, top_k {cfg['top_k'] or 'off'}, "
             f"repetition_penalty {cfg['repetition_penalty']}, max_tokens {cfg['max_tokens']}, seed {cfg['seed']}. "
             f"Intervals: {int(cfg['ci_level'] * 100)}% {cfg['ci']} over items.", "",
             "| benchmark | items | k | avg@k | CI | pass@k | maj@k | mean tokens | truncated |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, b in results["benchmarks"].items():
        k, m = b["k"], b["metrics"]
        avg = m[f"avg@{k}"]
        pk = m.get(f"pass@{k}", avg)["value"] if k > 1 else avg["value"]
        maj = m.get(f"maj@{k}")
        maj_s = "-" if maj is None else f"{100 * maj['value']:.2f}"
        lines.append(f"| {name} | {b['n_items']} | {k} | {100 * avg['value']:.2f} | "
                     f"[{100 * avg['ci_low']:.2f}, {100 * avg['ci_high']:.2f}] | {100 * pk:.2f} | "
                     f"{maj_s} | {b['mean_tokens']:.0f} | "
                     f"{100 * b['truncated_fraction']:.1f}% |")
    lines += ["", "![avg@k per benchmark](report.png)", ""]
    (out / "report.md").write_text("\n".join(lines))
    _plot(results, out / "report.png")


def _plot(results: dict[str, Any], path: Path) -> None:
    """Bar chart of avg@k per benchmark with CI error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results["benchmarks"])
    vals, lo, hi = [], [], []
    for n in names:
        b = results["benchmarks"][n]
        m = b["metrics"][f"avg@{b['k']}"]
        vals.append(100 * m["value"])
        lo.append(100 * (m["value"] - m["ci_low"]))
        hi.append(100 * (m["ci_high"] - m["value"]))
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(names) + 2), 3.5))
    ax.bar(names, vals, yerr=[lo, hi], capsize=4, color="#4c72b0")
    ax.set_ylabel("avg@k (%)")
    ax.set_ylim(0, 100)
    ax.set_title(f"{results['model']['id']}"[-60:], fontsize=9)
    for i, v in enumerate(vals):
        ax.text(i, v + 1, f"{v:.1f}", ha="center", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
