"""`cotforge curate ...`: one command per curation stage (each lives beside its stage code)."""

from __future__ import annotations

import click

from cotforge.curate.cli_common import fail, input_options, specs_from_cli
from cotforge.curate.io.readers import InputError
from cotforge.curate.select.difficulty import DEFAULT_T_EASY, DEFAULT_T_HARD, DifficultyConfig, run_difficulty
from cotforge.pipelines.cli.lazy import LazyGroup


@click.group(cls=LazyGroup, lazy={
    "ingest": "cotforge.curate.io.ingest:ingest_command",
    "dedup": "cotforge.curate.dedup.stage:dedup_command",
    "decontaminate": "cotforge.curate.decontam.stage:decontaminate_command",
    "verify": "cotforge.curate.verify.stage:verify_command",
    "profile": "cotforge.curate.select.profile:profile_command",
    "select": "cotforge.curate.select.sources:select_command",
    "mix": "cotforge.curate.mix.stage:mix_command",
})
def curate() -> None:
    """Curation stages. Each reads raw files or an earlier stage's folder and writes
    OUT/kept/*.parquet, OUT/removed/*.parquet (with `reason`) and OUT/stats.json."""


def difficulty_generator(cfg: DifficultyConfig):
    """The generation interface for the difficulty stage's reference model (None without `model`)."""
    if not cfg.model:
        return None
    from cotforge.train.rollout import make_generator

    return make_generator(cfg.model, backend=cfg.backend)


@click.command("difficulty")
@input_options
@click.option("--model", default=None, help="Reference model (path or name) to sample N responses per problem.")
@click.option("--backend", type=click.Choice(["auto", "vllm", "hf"]), default="auto", show_default=True)
@click.option("-n", "--n-samples", type=int, default=8, show_default=True)
@click.option("--temperature", type=float, default=0.6, show_default=True)
@click.option("--top-p", type=float, default=0.95, show_default=True)
@click.option("--max-new-tokens", type=int, default=4096, show_default=True)
@click.option("--t-hard", type=float, default=DEFAULT_T_HARD, show_default=True, help="p <= t_hard is hard.")
@click.option("--t-easy", type=float, default=DEFAULT_T_EASY, show_default=True, help="p >= t_easy is easy.")
@click.option("--level-key", default=None, help="meta key with a numeric level (e.g. difficulty, level).")
@click.option("--hard-level", type=float, default=5.0, show_default=True)
@click.option("--easy-level", type=float, default=2.0, show_default=True)
@click.option("--recompute", is_flag=True, help="Ignore existing pass_rate / difficulty columns.")
@click.option("--seed", type=int, default=0, show_default=True)
def difficulty_command(inputs, out, maps, source_names, domain, strict, rows_per_shard, model, backend, n_samples,
                       temperature, top_p, max_new_tokens, t_hard, t_easy, level_key, hard_level, easy_level,
                       recompute, seed) -> None:
    """Label problems hard/medium/easy from a reference model's pass rate (columns pass_rate, difficulty)."""
    specs = specs_from_cli(inputs, maps, source_names, domain)
    try:
        cfg = DifficultyConfig(t_hard=t_hard, t_easy=t_easy, level_key=level_key, hard_level=hard_level,
                               easy_level=easy_level, model=model, backend=backend, n_samples=n_samples,
                               temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, seed=seed,
                               recompute=recompute)
    except ValueError as e:
        raise click.UsageError(str(e)) from e
    try:
        stats = run_difficulty(specs, out, cfg, generator=difficulty_generator(cfg), strict=strict,
                               rows_per_shard=rows_per_shard)
    except (InputError, ValueError) as e:
        fail(e)
    click.echo(f"{stats['rows_in']} rows: bins {stats['difficulty_bins']}, methods {stats['difficulty_methods']}")


curate.add_command(difficulty_command)
