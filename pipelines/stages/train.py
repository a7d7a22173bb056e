"""The training and evaluation stages (sft, rl, eval_base, evaluate) as `Stage` objects; their configs and
`run(cfg, ctx)` live in cotforge.train (`train/sft/trainer.py`, `train/rl/trainer.py`, `train/eval/run.py`).

Their `fill` functions give the model, data and output paths from the run folder (the newest model
before the stage, the mix's sft/ or rl/ shards, RUN/<stage>/); options the recipe sets win, except the
output folder, which is always the stage's own. Importing this module imports torch and TRL (the config
classes subclass TRL's), so the registry loads it only for recipes that use these stages.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cotforge.curate.context import StageContext
from cotforge.pipelines.stages.model import MODEL_REF
from cotforge.pipelines.stages.spec import RecipeDefault, Requirement, Stage
from cotforge.train.callbacks import train_stats
from cotforge.train.eval import run as evaluation
from cotforge.train.eval.config import EvalConfig
from cotforge.train.rl import trainer as rl
from cotforge.train.rl.config import GPPOConfig
from cotforge.train.sft import trainer as sft

MODEL_STAGES = ("model", "sft", "rl")  # stages that leave a model behind, oldest first
NEEDS_MODEL = Requirement(MODEL_STAGES, "model", "needs a model")


def newest_model(ctx: StageContext) -> str | None:
    """The newest model before this stage: RUN/rl/final, RUN/sft (saved in place), else RUN/model/model
    (or the folder / hub id a `pretrained` model stage points to)."""
    found = ctx.earlier
    if "rl" in found:
        return str(Path(found["rl"]) / "final")
    if "sft" in found:
        return found["sft"]
    if "model" in found:
        ref = Path(found["model"]) / MODEL_REF
        return json.loads(ref.read_text())["model"] if ref.exists() else str(Path(found["model"]) / "model")
    return None


def _trainer_fill(data_key: str, mix_part: str):
    def fill(opts: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
        out = dict(opts)
        if not out.get("model") and newest_model(ctx):
            out["model"] = newest_model(ctx)
        if not out.get(data_key) and "mix" in ctx.earlier:
            out[data_key] = [str(Path(ctx.earlier["mix"]) / mix_part)]
        out["output_dir"] = str(ctx.out_dir)
        return out

    return fill


def _eval_fill(opts: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    out = dict(opts)
    if not out.get("model") and newest_model(ctx):
        out["model"] = newest_model(ctx)
    out["out"] = str(ctx.out_dir)
    return out


_EVAL_DEFAULTS = (RecipeDefault("benchmarks_dir", "benchmarks", "dir", path=True),
                  RecipeDefault("registry", "benchmarks", "registry", path=True))

STAGES: dict[str, Stage] = {s.name: s for s in (
    Stage("eval_base", "eval", EvalConfig, evaluation.run, reads="folders", needs=("model",), requires=(NEEDS_MODEL,),
          defaults=_EVAL_DEFAULTS, fill=_eval_fill,
          outputs="samples.parquet, results.json, report.md (base model)"),
    Stage("sft", "train", sft.CotSFTConfig, sft.run, reads="folders", needs=("mix", "model"), fill=_trainer_fill("data", "sft"),
          requires=(NEEDS_MODEL, Requirement(("mix",), "data", "its input is missing")), launched=train_stats,
          outputs="model + tokenizer (in place), log.jsonl/.csv, loss.png"),
    Stage("rl", "train", GPPOConfig, rl.run, reads="folders", needs=("mix", "model", "sft"), fill=_trainer_fill("train_files", "rl"),
          requires=(NEEDS_MODEL, Requirement(("mix",), "train_files", "its input is missing")),
          launched=train_stats, outputs="final/, log.jsonl/.csv, curves.png"),
    Stage("evaluate", "eval", EvalConfig, evaluation.run, reads="folders", needs=("model", "sft", "rl"), requires=(NEEDS_MODEL,),
          defaults=_EVAL_DEFAULTS, fill=_eval_fill,
          outputs="samples.parquet, results.json, report.md (final model)"),
)}
