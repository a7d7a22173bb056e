"""The stage registry: every pipeline stage in order, with its adapter, options dataclass, inputs and
outputs."""

from __future__ import annotations

from cotforge.pipelines.stages.curate import (
              CURATE_STAGES,
              _curate_stage,
              _decontaminate,
              _difficulty,
              _generate,
              _ingest,
              _mix,
)
from cotforge.pipelines.stages.model import _model
from cotforge.pipelines.stages.spec import StageSpec
from cotforge.pipelines.stages.train import _evaluate, _rl, _sft

# Stages whose code is split over several modules hash all of them (editing any re-runs the stage).
DEDUP_CODE = ("cotforge.curate.dedup.stage", "cotforge.curate.dedup.core", "cotforge.curate.dedup.steps", "cotforge.curate.io.ingest", "cotforge.curate.text.normalize",
              "cotforge.curate.text.hashing", "cotforge.curate.io.writer", "cotforge.curate.io.inputs", "cotforge.curate.engine")
VERIFY_CODE = ("cotforge.curate.verify.stage", "cotforge.curate.verify.math", "cotforge.curate.verify.code", "cotforge.curate.verify.sandbox",
               "cotforge.curate.text.reasoning")
DECONTAM_CODE = ("cotforge.curate.decontam.stage", "cotforge.curate.decontam.index", "cotforge.curate.decontam.match", "cotforge.curate.benchmarks",
                 "cotforge.curate.text.normalize", "cotforge.curate.text.hashing", "cotforge.curate.decontam.report", "cotforge.curate.io.writer", "cotforge.curate.io.inputs", "cotforge.curate.engine")
EVAL_CODE = ("cotforge.train.eval.run", "cotforge.train.eval.config", "cotforge.train.eval.items", "cotforge.train.eval.scoring",
             "cotforge.train.eval.store", "cotforge.train.eval.metrics", "cotforge.train.eval.report")

STAGES: dict[str, StageSpec] = {s.name: s for s in (
    StageSpec("data", "data", _generate, "cotforge.pipelines.demo_data:DemoDataConfig",
              outputs="*.jsonl sources, benchmarks/, truth.json"),
    StageSpec("ingest", "curate", _ingest, None, uses=("sources",), code=("cotforge.curate.io.ingest", "cotforge.curate.io.readers")),
    StageSpec("decontaminate", "curate", _decontaminate, "cotforge.curate.decontam.stage:DecontamConfig", after=CURATE_STAGES,
              uses=("benchmarks",), outputs="kept/, removed/, stats.json, contamination_report.{md,json}",
              code=DECONTAM_CODE),
    StageSpec("dedup", "curate", _curate_stage("cotforge.curate.dedup.stage:run_dedup"), "cotforge.curate.dedup.stage:DedupConfig",
              after=CURATE_STAGES, code=DEDUP_CODE),
    StageSpec("verify", "curate", _curate_stage("cotforge.curate.verify.stage:run_verify"), "cotforge.curate.verify.stage:VerifyConfig",
              after=CURATE_STAGES, outputs="kept/ (+correct), removed/, stats.json", code=VERIFY_CODE),
    StageSpec("difficulty", "curate", _difficulty,
              "cotforge.curate.select.difficulty:DifficultyConfig", after=CURATE_STAGES,
              outputs="kept/ (+pass_rate, difficulty), stats.json"),
    StageSpec("profile", "curate", _curate_stage("cotforge.curate.select.profile:run_profile", ("decontaminate", "dedup", "verify")),
              "cotforge.curate.select.profile:ProfileConfig", after=CURATE_STAGES, outputs="kept/, profile.{parquet,md}, plots/"),
    StageSpec("select", "curate", _curate_stage("cotforge.curate.select.sources:run_select", ("decontaminate", "dedup", "verify")),
              "cotforge.curate.select.sources:SelectConfig", after=CURATE_STAGES, outputs="kept/, removed/, selection.{parquet,md}"),
    StageSpec("mix", "curate", _mix, "cotforge.curate.mix.stage:MixConfig", after=CURATE_STAGES,
              outputs="sft/*.parquet (messages), rl/*.parquet (verl), README.md (card), removed/"),
    StageSpec("model", "model", _model, "cotforge.pipelines.stages.model:ModelConfig", outputs="model/ (weights + tokenizer)",
              code=("cotforge.train.tiny",)),
    StageSpec("eval_base", "eval", _evaluate, "cotforge.train.eval.run:EvalConfig", needs=("model",),
              outputs="samples.parquet, results.json, report.md (base model)", code=EVAL_CODE),
    StageSpec("sft", "train", _sft, "cotforge.train.sft:CotSFTConfig", needs=("mix", "model"), check_values=False,
              outputs="model + tokenizer (in place), log.jsonl/.csv, loss.png"),
    StageSpec("rl", "train", _rl, "cotforge.train.rl.config:GPPOConfig", needs=("mix", "model", "sft"),
              outputs="final/, metrics.jsonl, curves.png",
              code=tuple(f"cotforge.train.rl.{m}" for m in ("config", "trainer", "losses", "groups", "rewards"))),
    StageSpec("evaluate", "eval", _evaluate, "cotforge.train.eval.run:EvalConfig", needs=("model", "sft", "rl"),
              outputs="samples.parquet, results.json, report.md (final model)", code=EVAL_CODE),
)}
ORDER = list(STAGES)
