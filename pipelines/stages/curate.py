"""The data and curation stages as `Stage` objects: each is its config dataclass and the `run(cfg, ctx)` of
its own module, plus how a recipe feeds it and what the command line prints after it.

Importing this module imports no stage's code: each Stage is built (and its modules imported) when first
asked for, so a dedup run never imports the verifier's math-verify/sympy, and nothing here imports torch or
transformers.
"""

from __future__ import annotations

from typing import Any

from cotforge.curate.context import StageContext
from cotforge.curate.io import fs
from cotforge.pipelines.config import GENERATED
from cotforge.pipelines.stages.spec import LazyStages, RecipeDefault, Stage

# The curation stages a curation stage may read from (its default input is the nearest enabled one).
CURATE_STAGES = ("ingest", "decontaminate", "dedup", "generate", "verify", "difficulty", "profile", "select")


def counts_line(stats: dict[str, Any], out: str) -> str:
    """`N rows in, K kept, R removed (reason n, ...) -> OUT`: what every curation command prints."""
    by = ", ".join(f"{k} {v}" for k, v in (stats.get("removed_by_reason") or {}).items()) or "none"
    return f"{stats['rows_in']} rows in, {stats['kept']} kept, {stats['removed']} removed ({by}) -> {out}"


def _decontam_report(stats: dict[str, Any], out: str) -> str:
    c = stats.get("contamination", {})
    return (f"{counts_line(stats, out)}\n{c.get('contaminated_rows', 0)} contaminated: "
            f"{c.get('prompt_side_rows', 0)} prompt side, {c.get('response_only_rows', 0)} response side only; "
            f"report: {fs.join(out, 'contamination_report.md')}")


def _generate_report(stats: dict[str, Any], out: str) -> str:
    g = stats["generate"]
    return (f"{counts_line(stats, out)}\n{g['prompts']} prompts x {g['n']} from {g['teacher']}: "
            f"{g['prompts_by_outcome']}; finish reasons {g['finish_reasons']}; "
            f"{g['completion_tokens_this_run']} tokens generated in this run ({g['tokens_per_s_this_run']} tokens/s)")


def _generate_fill(opts: dict[str, Any], ctx: StageContext) -> dict[str, Any]:
    """A `generated:NAME` model (the demo's tiny teacher) is the data stage's RUN/data/NAME."""
    out = dict(opts)
    model = str(out.get("model") or "")
    if model.startswith(GENERATED) and "data" in ctx.earlier:
        out["model"] = fs.join(ctx.earlier["data"], model[len(GENERATED):])
    return out


def _verify_report(stats: dict[str, Any], out: str) -> str:
    by = ", ".join(f"{k} {v}" for k, v in stats["verify"]["by_status"].items())
    return f"{counts_line(stats, out)}\nverdicts: {by}"


def _difficulty_report(stats: dict[str, Any], out: str) -> str:
    return f"{counts_line(stats, out)}\nbins {stats['difficulty_bins']}, methods {stats['difficulty_methods']}"


def _profile_report(stats: dict[str, Any], out: str) -> str:
    with fs.open_text(fs.join(out, "profile.md")) as f:
        return f.read()


def _select_report(stats: dict[str, Any], out: str) -> str:
    with fs.open_text(fs.join(out, "selection.md")) as f:
        return f.read().split("\n## Profile")[0] + "\n" + counts_line(stats, out)


def _mix_report(stats: dict[str, Any], out: str) -> str:
    return (f"{stats['mix']['name']}: {stats['kept']} SFT rows, {stats['mix']['rl_rows']} RL rows, "
            f"removed {stats['removed_by_reason']} -> {out}")


def _data() -> Stage:
    from cotforge.pipelines import demo_data

    return Stage("data", "data", demo_data.DemoDataConfig, demo_data.run, reads="none",
                 outputs="*.jsonl sources, benchmarks/, truth.json")


def _ingest() -> Stage:
    from cotforge.curate import ingest

    return Stage("ingest", "curate", ingest.IngestConfig, ingest.run, reads="sources", uses=("sources", "strict"),
                 report=counts_line)


def _decontaminate() -> Stage:
    from cotforge.curate.decontam import stage as decontam
    from cotforge.curate.decontam.config import DecontamConfig

    return Stage("decontaminate", "curate", DecontamConfig, decontam.run, after=CURATE_STAGES, datatrove=True,
                 uses=("benchmarks",), outputs="kept/, removed/, stats.json, contamination_report.{md,json,html}",
                 defaults=(RecipeDefault("benchmarks", "benchmarks", "names"),
                           RecipeDefault("benchmarks_dir", "benchmarks", "dir", path=True),
                           RecipeDefault("registry_yaml", "benchmarks", "registry", path=True)),
                 report=_decontam_report)


def _dedup() -> Stage:
    from cotforge.curate.dedup import stage as dedup
    from cotforge.curate.dedup.config import DedupConfig

    return Stage("dedup", "curate", DedupConfig, dedup.run, after=CURATE_STAGES, datatrove=True, report=counts_line)


def _generate() -> Stage:
    from cotforge.curate.generate import stage as generate
    from cotforge.curate.generate.config import GenerateConfig

    return Stage("generate", "curate", GenerateConfig, generate.run, after=CURATE_STAGES, datatrove=True,
                 fill=_generate_fill, report=_generate_report,
                 outputs="kept/ (one row per response: +prompt_id, sample_index, teacher, finish_reason, sampling), "
                         "removed/, stats.json")


def _verify() -> Stage:
    from cotforge.curate.verify import stage as verify

    return Stage("verify", "curate", verify.VerifyConfig, verify.run, after=CURATE_STAGES, datatrove=True,
                 outputs="kept/ (+correct), removed/, stats.json", report=_verify_report)


def _difficulty() -> Stage:
    from cotforge.curate.select import difficulty

    return Stage("difficulty", "curate", difficulty.DifficultyConfig, difficulty.run, after=CURATE_STAGES,
                 datatrove=True, outputs="kept/ (+pass_rate, difficulty), stats.json", report=_difficulty_report)


def _profile() -> Stage:
    from cotforge.curate.select import profile

    return Stage("profile", "curate", profile.ProfileConfig, profile.run, after=CURATE_STAGES,
                 outputs="kept/, profile.{parquet,md}, plots/", report=_profile_report)


def _select() -> Stage:
    from cotforge.curate.select import sources

    return Stage("select", "curate", sources.SelectConfig, sources.run, after=CURATE_STAGES,
                 outputs="kept/, removed/, selection.{parquet,md}", report=_select_report)


def _mix() -> Stage:
    from cotforge.curate.mix import stage as mix

    return Stage("mix", "curate", mix.MixConfig, mix.run, after=CURATE_STAGES,
                 outputs="sft/*.parquet (messages), rl/*.parquet (verl), README.md (card), removed/",
                 report=_mix_report)


# Built on first use, each importing only its own stage's code (see `LazyStages`).
STAGES: LazyStages = LazyStages({
    "data": ("data", _data), "ingest": ("curate", _ingest), "decontaminate": ("curate", _decontaminate),
    "dedup": ("curate", _dedup), "generate": ("curate", _generate), "verify": ("curate", _verify),
    "difficulty": ("curate", _difficulty), "profile": ("curate", _profile), "select": ("curate", _select),
    "mix": ("curate", _mix),
})
