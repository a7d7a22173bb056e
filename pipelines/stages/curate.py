"""Adapters of the data and curation stages: thin calls from a `StageContext` into `curate.*` and the demo
data generator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cotforge.pipelines.stages.spec import StageContext, _call

CURATE_STAGES = ("ingest", "decontaminate", "dedup", "verify", "difficulty", "profile", "select")


def _generate(ctx: StageContext) -> dict[str, Any]:
    from cotforge.pipelines.demo_data import generate_demo_data

    out = ctx.out_dir
    truth = generate_demo_data(out, ctx.cfg)
    return {"stage": "data", "rows_out": sum(truth["files"].values()), "files": truth["files"]}


def _curate_stage(target: str, stats_from: tuple[str, ...] = ()) -> Callable[[StageContext], dict[str, Any]]:
    """Adapter for `run_X(specs, out_dir, cfg, *, exec_cfg=..., rows_per_shard=...)` curation stages."""

    def run(ctx: StageContext) -> dict[str, Any]:
        cfg = ctx.cfg
        if stats_from and hasattr(cfg, "stats_dirs") and not cfg.stats_dirs:
            cfg.stats_dirs = ctx.earlier(stats_from)
        return _call(target, ctx.input_specs(), ctx.out_dir, cfg, exec_cfg=ctx.exec_cfg(),
                     input_paths=ctx.input_dirs())

    return run


def _ingest(ctx: StageContext) -> dict[str, Any]:
    return _call("cotforge.curate.io.ingest:run_ingest", ctx.input_specs(), ctx.out_dir, strict=ctx.cfg.get("strict", False))


def _decontaminate(ctx: StageContext) -> dict[str, Any]:
    cfg = ctx.cfg
    b = ctx.recipe.benchmarks
    if hasattr(cfg, "benchmarks") and not cfg.benchmarks:
        cfg.benchmarks = list(b.names)
    if hasattr(cfg, "benchmarks_dir") and not cfg.benchmarks_dir and b.dir:
        cfg.benchmarks_dir = ctx.recipe.resolve_path(b.dir, ctx.run_dir)
    if hasattr(cfg, "registry_yaml") and not cfg.registry_yaml and b.registry:
        cfg.registry_yaml = ctx.recipe.resolve_path(b.registry, ctx.run_dir)
    return _call("cotforge.curate.decontam.stage:run_decontam", ctx.input_specs(), ctx.out_dir, cfg, exec_cfg=ctx.exec_cfg())


def _mix(ctx: StageContext) -> dict[str, Any]:
    cfg = ctx.cfg
    if hasattr(cfg, "history") and not cfg.history:
        cfg.history = ctx.earlier(CURATE_STAGES)
    stats = _call("cotforge.curate.mix.stage:run_mix", ctx.input_specs(), ctx.out_dir, cfg, input_paths=ctx.input_dirs())
    return stats


def _difficulty(ctx: StageContext) -> dict[str, Any]:
    """The difficulty stage with its reference model's generator built here (curation does not import train)."""
    from cotforge.pipelines.cli.curate import difficulty_generator

    return _call("cotforge.curate.select.difficulty:run_difficulty", ctx.input_specs(), ctx.out_dir, ctx.cfg,
                 generator=difficulty_generator(ctx.cfg))
