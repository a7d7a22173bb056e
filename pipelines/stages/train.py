"""The training and evaluation stages (sft, rl_data, rl, rl_code, eval_base, evaluate) as `Stage` objects; their
configs and `run(cfg, ctx)` live in cotforge.train (`train/sft/trainer.py`, `train/rl/trainer.py`,
`train/eval/run.py`) and, for rl_data, in `curate/mix/rl_data.py`.

Their `fill` functions give the model, data and output paths from the run folder (the newest model
before the stage, the mix's sft/ or rl/ shards, RUN/<stage>/); options the recipe sets win, except the
output folder, which is always the stage's own.

RL runs in one or two stages ([P] §4.1: math RL, then code RL): `rl` and `rl_code` are the same trainer
(`GPPOConfig`, `cotforge train rl`), each with its own options (the report's mini-batch and learning rate per
domain; `abilities` picks the rows of the shared RL shards). `rl_code` starts from `rl`'s final model when `rl`
ran before it, so the runner's skip-if-complete and resume apply to each stage on its own. The RL data branch,
`rl_data` (`curate/mix/rl_data.py`: its own sources, dedup, decontamination, the tests rule and a pass-rate
filter by the SFT checkpoint), runs after `sft`; when it ran, `rl` reads its `rl_math/` and `rl_code` its
`rl_code/`, else both read the mix's `rl/`. Importing this module imports torch and TRL (the config
classes subclass TRL's), so the registry loads it only for recipes that use these stages.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cotforge.curate.context import StageContext
from cotforge.curate.mix import rl_data
from cotforge.curate.mix.rl_data import RLDataConfig
from cotforge.pipelines.stages.model import MODEL_REF
from cotforge.pipelines.stages.spec import RecipeDefault, Requirement, Stage
from cotforge.train.callbacks import train_stats
from cotforge.train.eval import run as evaluation
from cotforge.train.eval.config import EvalConfig
from cotforge.train.rl import trainer as rl
from cotforge.train.rl.config import GPPOConfig
from cotforge.train.sft import trainer as sft

MODEL_STAGES = ("model", "sft", "rl", "rl_code")  # stages that leave a model behind, oldest first
RL_STAGES = ("rl", "rl_code")
NEEDS_MODEL = Requirement(MODEL_STAGES, "model", "needs a model")


def newest_model(ctx: StageContext) -> str | None:
    """The newest model before this stage: RUN/rl_code/final, RUN/rl/final, RUN/sft (saved in place), else
    RUN/model/model (or the folder / hub id a `pretrained` model stage points to)."""
    found = ctx.earlier
    for name in reversed(RL_STAGES):
        if name in found:
            return str(Path(found[name]) / "final")
    if "sft" in found:
        return found["sft"]
    if "model" in found:
        ref = Path(found["model"]) / MODEL_REF
        return json.loads(ref.read_text())["model"] if ref.exists() else str(Path(found["model"]) / "model")
    return None


def _trainer_fill(data_key: str, mix_part: str, rl_part: str | None = None):
    """Options from the run: the newest model; the data: `rl_data/<rl_part>` when the RL data branch ran (and
    wrote that domain), else `mix/<mix_part>`; the stage's own output folder."""
    def fill(opts: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
        out = dict(opts)
        if not out.get("model") and newest_model(ctx):
            out["model"] = newest_model(ctx)
        if not out.get(data_key) and rl_part and "rl_data" in ctx.earlier:
            out[data_key] = [str(Path(ctx.earlier["rl_data"]) / rl_part)]
        elif not out.get(data_key) and "mix" in ctx.earlier:
            out[data_key] = [str(Path(ctx.earlier["mix"]) / mix_part)]
        out["output_dir"] = str(ctx.out_dir)
        return out

    return fill


def _rl_data_fill(opts: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    """The pass-rate model defaults to the newest model before the stage (the SFT checkpoint)."""
    out = dict(opts)
    if not out.get("model") and out.get("filter_pass_rate", True) and newest_model(ctx):
        out["model"] = newest_model(ctx)
    return out


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
    Stage("rl_data", "curate", RLDataConfig, rl_data.run, reads="folders", needs=("mix", "model", "sft"),
          fill=_rl_data_fill, uses=("benchmarks",), datatrove=True, requires=(NEEDS_MODEL,),
          defaults=(RecipeDefault("benchmarks", "benchmarks", "names"),
                    RecipeDefault("benchmarks_dir", "benchmarks", "dir", path=True),
                    RecipeDefault("registry_yaml", "benchmarks", "registry", path=True)),
          outputs="rl_math/, rl_code/ (verl rows), kept/, removed/, steps/{ingest,filter,decontaminate,difficulty}/, "
                  "stats.json"),
    Stage("rl", "train", GPPOConfig, rl.run, reads="folders", needs=("mix", "model", "sft", "rl_data"),
          fill=_trainer_fill("train_files", "rl", "rl_math"),
          requires=(NEEDS_MODEL, Requirement(("mix", "rl_data"), "train_files", "its input is missing")),
          launched=train_stats, outputs="final/, log.jsonl/.csv, curves.png"),
    Stage("rl_code", "train", GPPOConfig, rl.run, reads="folders", needs=("mix", "model", "sft", "rl_data", "rl"),
          fill=_trainer_fill("train_files", "rl", "rl_code"),
          requires=(NEEDS_MODEL, Requirement(("mix", "rl_data"), "train_files", "its input is missing")),
          launched=train_stats, outputs="final/, log.jsonl/.csv, curves.png (second RL stage, from rl/final)"),
    Stage("evaluate", "eval", EvalConfig, evaluation.run, reads="folders", needs=("model", "sft", *RL_STAGES),
          requires=(NEEDS_MODEL,),
          defaults=_EVAL_DEFAULTS, fill=_eval_fill,
          outputs="samples.parquet, results.json, report.md (final model)"),
)}
