"""`cotforge eval`: avg@k / pass@k / maj@k of a model on registry benchmarks, scored by the shared verifiers.

Flags are generated from EvalConfig's fields. Precedence of settings: EvalConfig defaults < --preset <
--config YAML < --set < flags given on the command line, all through the one config loader. The report's
numbers: `--preset paper` (temperature 0.6, top_p 0.95) is what the paper states; `--preset official` adds
top_k 20 and repetition_penalty 1.05 as in the official benchmarks/inference.py (use it to reproduce the
released AIME avg@64 outputs). The paper's 64K row also needs `--yarn-factor 2.5 --max-tokens 65536`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from cotforge.curate.core.config import ConfigError, load
from cotforge.pipelines.cli.fields import FlagSet


def build_eval_command() -> click.Command:
    """The `cotforge eval` command, its flags generated from EvalConfig."""
    from cotforge.train.eval.config import PRESETS, EvalConfig

    flags = FlagSet(EvalConfig, "cfg")
    params = [
        click.Option(["preset", "--preset"], type=click.Choice(sorted(PRESETS)), default=None,
                     help="Sampling preset: paper = T 0.6, top_p 0.95; official = + top_k 20, repetition_penalty 1.05."),
        click.Option(["config_path", "--config"], type=click.Path(exists=True, dir_okay=False), default=None,
                     help="YAML with EvalConfig fields; --set and flags override it."),
        click.Option(["overrides", "--set"], multiple=True, metavar="KEY=VALUE", help="Set any EvalConfig field."),
        *flags.options,
        click.Option(["dry_run", "--dry-run"], is_flag=True,
                     help="Print the plan (items, samples, sampling, tokens); load no model."),
    ]

    def callback(preset: str | None, config_path: str | None, overrides: tuple[str, ...], dry_run: bool,
                 **_: Any) -> None:
        from cotforge.train.eval.run import format_plan, plan_eval, run_eval

        try:
            cfg = load(EvalConfig, config_path, overrides, flags.values(click.get_current_context()),
                       base=PRESETS[preset] if preset else None, what="eval option")
        except ConfigError as e:
            raise click.UsageError(str(e)) from e
        if not cfg.model:
            raise click.UsageError("--model is required (or `model:` in --config)")
        try:
            if dry_run:
                click.echo(format_plan(plan_eval(cfg)))
                return
            results = run_eval(cfg)
        except (ValueError, FileNotFoundError) as e:
            raise click.ClickException(str(e)) from e
        for name, b in results["benchmarks"].items():
            m = b["metrics"][f"avg@{b['k']}"]
            click.echo(f"{name}: avg@{b['k']} = {100 * m['value']:.2f} "
                       f"[{100 * m['ci_low']:.2f}, {100 * m['ci_high']:.2f}] over {b['n_items']} items")
        click.echo(json.dumps(results["run"]))
        click.echo(f"wrote {Path(cfg.out) / 'results.json'}, samples.parquet, report.md")

    return click.Command("eval", params=params, callback=callback, help=(
        "Sample k answers per benchmark item and report avg@k, pass@k and maj@k with CIs over items.\n\n"
        "Writes OUT/samples.parquet (every sample and its verdict), OUT/results.json and OUT/report.md + .png; "
        "re-running the same command resumes (stored samples are not regenerated).\n\n"
        "The report's protocol: AIME/HMMT avg@64, LiveCodeBench avg@8, temperature 0.6, top_p 0.95 (--preset "
        "paper). The official inference script also used top_k 20 and repetition_penalty 1.05 (--preset "
        "official); it was committed with the released AIME avg@64 outputs, so use it to reproduce those. The "
        "64K row adds --yarn-factor 2.5 --max-tokens 65536."))


eval_command = build_eval_command()
