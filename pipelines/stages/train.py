"""Adapters of the training and evaluation stages (sft, rl, eval_base, evaluate): fill the model, data and
output paths from the run, then call `train.*` in process or through a `launch:` command."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from cotforge.pipelines.config import RecipeError, build_dataclass
from cotforge.pipelines.stages.model import MODEL_REF
from cotforge.pipelines.stages.spec import StageContext

log = logging.getLogger(__name__)


def _find(ctx: StageContext, group: tuple[str, ...]) -> Path | None:
    found = ctx.earlier(group)
    return Path(found[-1]) if found else None


def _model_path(ctx: StageContext) -> str:
    """The newest model before this stage: RUN/rl/final, RUN/sft (saved in place), else RUN/model/model."""
    d = _find(ctx, ("rl",))
    if d is not None:
        return str(d / "final")
    d = _find(ctx, ("sft",))
    if d is not None:
        return str(d)
    d = _find(ctx, ("model",))
    if d is None:
        raise RecipeError(f"stage {ctx.name!r} needs a model: enable the `model` stage")
    if (d / MODEL_REF).exists():
        return json.loads((d / MODEL_REF).read_text())["model"]
    return str(d / "model")


def _train_options(ctx: StageContext, data_key: str, data_dir: str) -> dict[str, Any]:
    """The stage's options with model, data and output_dir filled from the run."""
    opts = dict(ctx.cfg)
    mix = _find(ctx, ("mix",))
    if not opts.get("model"):
        opts["model"] = _model_path(ctx)
    if not opts.get(data_key) and mix is not None:
        opts[data_key] = [str(mix / data_dir)]
    opts["output_dir"] = str(ctx.out_dir)
    return opts


def _launch(ctx: StageContext, opts: dict[str, Any]) -> bool:
    """Run a train stage through its `launch` command (distributed launchers); False when not set.

    The filled options are written to RUN/<stage>/stage_config.yaml; `{config}`, `{run_dir}` and
    `{out_dir}` in the command are replaced."""
    launch = ctx.recipe.stages.get(ctx.name, {}).get("launch")
    if not launch:
        return False
    import subprocess

    import yaml

    path = ctx.out_dir / "stage_config.yaml"
    path.write_text(yaml.safe_dump(opts, sort_keys=True))
    cmd = str(launch).format(config=path, run_dir=ctx.run_dir, out_dir=ctx.out_dir)
    log.info("stage %s: launching %s", ctx.name, cmd)
    subprocess.run(cmd, shell=True, check=True)
    return True


def _sft(ctx: StageContext) -> dict[str, Any]:
    from cotforge.train.sft import config_from_dict, run_sft

    opts = _train_options(ctx, "data", "sft")
    if _launch(ctx, opts):
        return _train_stats(ctx.out_dir, None)
    cfg = config_from_dict(opts, origin=f"stages.{ctx.name}")
    result = run_sft(cfg)
    stats = _train_stats(ctx.out_dir, None)
    stats.update({"steps": result.global_step, "train_loss": result.train_loss, "data": result.data})
    return stats


def _rl(ctx: StageContext) -> dict[str, Any]:
    from cotforge.train.rl.config import GPPOConfig
    from cotforge.train.rl.trainer import run_rl

    opts = _train_options(ctx, "train_files", "rl")
    if _launch(ctx, opts):
        return _train_stats(ctx.out_dir, None)
    cfg = build_dataclass(GPPOConfig, opts, f"stages.{ctx.name}")
    trainer = run_rl(cfg)
    return _train_stats(ctx.out_dir, trainer)


def _train_stats(out: Path, result: Any) -> dict[str, Any]:
    """Steps and last logged values of a training stage (from its metrics log)."""
    from cotforge.pipelines.summary import read_metrics

    rows = read_metrics(out)
    stats: dict[str, Any] = {"stage": out.name, "log_rows": len(rows)}
    if rows:
        stats["steps"] = max(int(r.get("step", 0)) for r in rows)
        last = {k: v for r in rows for k, v in r.items() if isinstance(v, (int, float)) and k != "step"}
        stats["last"] = {k: last[k] for k in sorted(last)}
    state = getattr(result, "state", None)
    if state is not None and getattr(state, "global_step", None) is not None:
        stats["steps"] = int(state.global_step)
    return stats


def _evaluate(ctx: StageContext) -> dict[str, Any]:
    """avg@k of the newest model before this stage (eval_base: the base model) on the recipe's eval sets."""
    from cotforge.train.eval.run import EvalConfig, run_eval

    opts = dict(ctx.cfg)
    b = ctx.recipe.benchmarks
    if not opts.get("model"):
        opts["model"] = _model_path(ctx)
    if not opts.get("benchmarks_dir") and b.dir:
        opts["benchmarks_dir"] = ctx.recipe.resolve_path(b.dir, ctx.run_dir)
    if not opts.get("registry") and b.registry:
        opts["registry"] = ctx.recipe.resolve_path(b.registry, ctx.run_dir)
    opts["out"] = str(ctx.out_dir)
    results = run_eval(build_dataclass(EvalConfig, opts, f"stages.{ctx.name}"))
    return {"stage": ctx.name, "model": opts["model"], "benchmarks": _eval_headline(results)}


def _eval_headline(results: dict[str, Any]) -> dict[str, Any]:
    """Per benchmark: the avg@k-style headline numbers (whatever scalar metrics the report has)."""
    out: dict[str, Any] = {}
    for name, r in (results.get("benchmarks") or {}).items():
        out[name] = {k: v for k, v in r.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return out
