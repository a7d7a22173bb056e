"""The stage registry: every pipeline stage in order, with its adapter, options dataclass, inputs and
outputs."""

from __future__ import annotations

from pipelines.curate_stages import CURATE_STAGES, _curate_stage, _decontaminate, _generate, _ingest, _mix
from pipelines.model_stage import _model
from pipelines.stage_spec import StageSpec
from pipelines.train_stages import _evaluate, _rl, _sft

# Stages whose code is split over several modules hash all of them (editing any re-runs the stage).
DEDUP_CODE = ("curate.dedup", "curate.dedup_core", "curate.dedup_steps", "curate.ingest", "curate.normalize",
              "curate.hashing", "curate.stage", "curate.dt")
VERIFY_CODE = ("curate.verify.stage", "curate.verify.math", "curate.verify.code", "curate.verify.sandbox",
               "curate.reasoning")
DECONTAM_CODE = ("curate.decontam", "curate.decontam_index", "curate.decontam_match", "curate.benchmarks",
                 "curate.normalize", "curate.hashing", "curate.report", "curate.stage", "curate.dt")
EVAL_CODE = ("train.evaluate", "train.eval_config", "train.eval_items", "train.eval_scoring",
             "train.eval_store", "train.eval_metrics", "train.eval_report")

STAGES: dict[str, StageSpec] = {s.name: s for s in (
    StageSpec("data", "data", _generate, "pipelines.demo_data:DemoDataConfig",
              outputs="*.jsonl sources, benchmarks/, truth.json"),
    StageSpec("ingest", "curate", _ingest, None, uses=("sources",), code=("curate.ingest", "curate.readers")),
    StageSpec("decontaminate", "curate", _decontaminate, "curate.decontam:DecontamConfig", after=CURATE_STAGES,
              uses=("benchmarks",), outputs="kept/, removed/, stats.json, contamination_report.{md,json}",
              code=DECONTAM_CODE),
    StageSpec("dedup", "curate", _curate_stage("curate.dedup:run_dedup"), "curate.dedup:DedupConfig",
              after=CURATE_STAGES, code=DEDUP_CODE),
    StageSpec("verify", "curate", _curate_stage("curate.verify.stage:run_verify"), "curate.verify.stage:VerifyConfig",
              after=CURATE_STAGES, outputs="kept/ (+correct), removed/, stats.json", code=VERIFY_CODE),
    StageSpec("difficulty", "curate", _curate_stage("curate.difficulty:run_difficulty"),
              "curate.difficulty:DifficultyConfig", after=CURATE_STAGES,
              outputs="kept/ (+pass_rate, difficulty), stats.json"),
    StageSpec("profile", "curate", _curate_stage("curate.profile:run_profile", ("decontaminate", "dedup", "verify")),
              "curate.profile:ProfileConfig", after=CURATE_STAGES, outputs="kept/, profile.{parquet,md}, plots/"),
    StageSpec("select", "curate", _curate_stage("curate.select:run_select", ("decontaminate", "dedup", "verify")),
              "curate.select:SelectConfig", after=CURATE_STAGES, outputs="kept/, removed/, selection.{parquet,md}"),
    StageSpec("mix", "curate", _mix, "curate.mix:MixConfig", after=CURATE_STAGES,
              outputs="sft/*.parquet (messages), rl/*.parquet (verl), README.md (card), removed/"),
    StageSpec("model", "model", _model, "pipelines.model_stage:ModelConfig", outputs="model/ (weights + tokenizer)",
              code=("train.tiny",)),
    StageSpec("eval_base", "eval", _evaluate, "train.evaluate:EvalConfig", needs=("model",),
              outputs="samples.parquet, results.json, report.md (base model)", code=EVAL_CODE),
    StageSpec("sft", "train", _sft, "train.sft:CotSFTConfig", needs=("mix", "model"), check_values=False,
              outputs="model + tokenizer (in place), log.jsonl/.csv, loss.png"),
    StageSpec("rl", "train", _rl, "train.rl:RLConfig", needs=("mix", "model", "sft"),
              outputs="final/, metrics.jsonl, curves.png"),
    StageSpec("evaluate", "eval", _evaluate, "train.evaluate:EvalConfig", needs=("model", "sft", "rl"),
              outputs="samples.parquet, results.json, report.md (final model)", code=EVAL_CODE),
)}
ORDER = list(STAGES)
