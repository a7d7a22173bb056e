"""The `cotforge` command: groups `curate`, `train`, `run`, `recipes` and `eval` (each imported on first use)."""

from __future__ import annotations

import logging
import os
import sys

import click

from cotforge.pipelines.cli.lazy import LazyGroup


def setup_logging(verbose: int = 0) -> None:
    """One log format for cotforge and datatrove (whose loguru output is routed to stderr, INFO+)."""
    level = logging.DEBUG if verbose > 0 else logging.INFO
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S", stream=sys.stderr, force=True)
    try:
        from loguru import logger

        logger.remove()
        logger.add(sys.stderr, level="DEBUG" if verbose > 1 else "WARNING",
                   format="{time:HH:mm:ss} {level} datatrove: {message}")
    except ImportError:
        pass
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    # datatrove's worker processes read this (curate/engine.py quiet_datatrove): -vv shows their output too
    os.environ["COTFORGE_DATATROVE_LOG_LEVEL"] = "DEBUG" if verbose > 1 else "WARNING"


def _curate() -> click.Command:
    from cotforge.pipelines.cli.curate import curate

    return curate


def _train() -> click.Command:
    from cotforge.pipelines.cli.train import train

    return train


def _run() -> click.Command:
    from cotforge.pipelines.cli.run import run

    return run


def _recipes() -> click.Command:
    from cotforge.pipelines.cli.run import recipes

    return recipes


def _benchmarks() -> click.Command:
    from cotforge.pipelines.cli.benchmarks import benchmarks

    return benchmarks


def _eval() -> click.Command:
    from cotforge.pipelines.cli.eval import eval_command

    return eval_command


@click.group(cls=LazyGroup, lazy={"curate": _curate, "train": _train, "run": _run, "recipes": _recipes,
                                  "eval": _eval, "benchmarks": _benchmarks})
@click.option("-v", "--verbose", count=True, help="More logging (-vv includes datatrove's).")
@click.version_option(package_name="cotforge", prog_name="cotforge")
def main(verbose: int) -> None:
    """cotforge: curate long chain-of-thought data, then SFT and GPPO RL on it."""
    setup_logging(verbose)

