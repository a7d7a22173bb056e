"""`cotforge run RECIPE`: curation -> SFT -> RL as one job, resumable, with a manifest and a summary; and
`cotforge recipes`, the recipes shipped in the package."""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

import click

from cotforge.curate.core.config import ConfigError, blame_sets
from cotforge.curate.io import fs
from cotforge.pipelines.config import RecipeError, find_recipe, load_raw, load_recipe, packaged_recipes

log = logging.getLogger(__name__)


@click.command("run")
@click.argument("recipe")
@click.option("--run-dir", default=None, metavar="DIR|URL",
              help="Output folder (default: runs/<recipe>-<timestamp>), local or an fsspec URL such as "
                   "s3://bucket/runs/x (run in a local mirror, uploaded at the end). Re-running into it skips "
                   "complete stages.")
@click.option("--resume", is_flag=True, help="Continue the newest runs/<recipe>-* folder.")
@click.option("--dry-run", is_flag=True, help="Validate the recipe and print the stages, inputs and outputs.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a recipe value, e.g. --set stages.sft.max_steps=2 (YAML value; repeatable).")
@click.option("--profile", default=None, help="Apply a named profile from the recipe's `profiles:` (e.g. small).")
@click.option("--until", default=None, metavar="STAGE", help="Stop after this stage.")
@click.option("--force", multiple=True, metavar="STAGE", help="Re-run this stage and everything after it.")
@click.option("--publish-cards", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="After a complete run, also copy the dataset card and the contamination report into DIR "
                   "(e.g. the repository's data_cards/); without it the run writes only under its run folder.")
def run(recipe: str, run_dir: str | None, resume: bool, dry_run: bool, overrides: tuple[str, ...],
        profile: str | None, until: str | None, force: tuple[str, ...], publish_cards: str | None) -> None:
    """Run the pipeline RECIPE end to end: a YAML file, or the name of a packaged recipe (`cotforge recipes`)."""
    from cotforge.pipelines.runner import describe_plan, latest_run_dir, run_recipe

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        rec = load_recipe(recipe, overrides, profile)
        target: Path | str | None = (run_dir if fs.is_remote(run_dir) else Path(run_dir)) if run_dir else None
        if resume and target is None:
            target = latest_run_dir(rec)
            if target is None:
                raise RecipeError(f"--resume: no earlier run of {rec.name!r} under {rec.runs_root}/")
        if dry_run:
            click.echo(describe_plan(rec, target, publish_cards))
            return
        t0 = time.time()
        result = run_recipe(rec, target, until=until, force=force, command=sys.argv, publish_cards=publish_cards)
    except (RecipeError, ConfigError) as e:
        raise click.ClickException(_blamed(str(e), recipe, overrides)) from e
    except ValueError as e:  # a stage's bad input or setting (InputError, a missing package): one line
        log.debug("run failed", exc_info=e)
        raise click.ClickException(f"{e} (-v for the traceback)") from e
    except RuntimeError as e:  # run folder in use, Slurm jobs pending or failed: the message says what to do
        from cotforge.curate.engine import JobsFailed, JobsPending
        from cotforge.curate.io.lock import RunLocked

        if isinstance(e, JobsPending | JobsFailed | RunLocked):
            raise click.ClickException(str(e)) from e
        raise
    ran = [n for n, s in result.statuses.items() if s == "ran"]
    skipped = [n for n, s in result.statuses.items() if s == "skipped"]
    click.echo(f"run {rec.name}: {len(ran)} stage(s) ran, {len(skipped)} skipped"
               + (f" ({', '.join(skipped)})" if skipped else "") + f" in {time.time() - t0:.1f}s")
    click.echo(f"summary: {fs.join(str(result.run_dir), 'summary.md')}")
    click.echo(f"manifest: {fs.join(str(result.run_dir), 'manifest.json')}")


def _blamed(message: str, recipe: str, overrides: tuple[str, ...]) -> str:
    """A recipe error blamed on the `--set` that introduced the key, when one did."""
    try:
        where = str(find_recipe(recipe))
    except RecipeError:
        return message
    return blame_sets(message, where, overrides)


@click.command("recipes")
def recipes() -> None:
    """List the recipes shipped in the package (`cotforge run NAME` runs one)."""
    for name, path in packaged_recipes().items():
        description = " ".join(str(load_raw(path).get("description") or "").split())
        click.echo(f"{name:<18} {description[:90] + ('...' if len(description) > 90 else '')}")
        click.echo(f"{'':<18} {path}")
