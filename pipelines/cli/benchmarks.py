"""`cotforge benchmarks`: the benchmarks decontamination and evaluation know by name, and where each is read from."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("benchmarks")
@click.option("--benchmarks-dir", type=click.Path(file_okay=False), default=None,
              help="Also say which benchmarks this folder holds (and list its files the registry does not know).")
@click.option("--registry", "registry_yaml", type=click.Path(exists=True, dir_okay=False), default=None,
              help="YAML with extra benchmark specs (as for `cotforge curate decontaminate --registry`).")
def benchmarks(benchmarks_dir: str | None, registry_yaml: str | None) -> None:
    """List the known benchmarks: name, domain, where the items are read from, and what the set is."""
    from cotforge.curate.core.benchmarks import (
        REGISTRY,
        BenchmarkError,
        load_registry_yaml,
        resolve_spec,
        where_read,
    )

    try:
        if benchmarks_dir is not None and not Path(benchmarks_dir).is_dir():
            raise BenchmarkError(f"--benchmarks-dir: {benchmarks_dir} is not a folder")
        extra = load_registry_yaml(registry_yaml) if registry_yaml else {}
    except BenchmarkError as e:
        raise click.ClickException(str(e)) from e
    reg = {**REGISTRY, **extra}
    names = sorted(reg)
    if benchmarks_dir is not None:  # files of the folder that no registry entry reads: usable by their stem
        stems = {p.name.split(".")[0] for p in Path(benchmarks_dir).iterdir() if p.is_file()}
        owned = {s.local_file or n for n, s in reg.items()}
        names += sorted(stems - owned - set(reg))
    width = max(len(n) for n in names)
    click.echo(f"{'name':<{width}}  {'domain':<7}  read from")
    for n in names:
        spec = resolve_spec(n, benchmarks_dir, extra)
        click.echo(f"{n:<{width}}  {spec.domain:<7}  {where_read(spec, benchmarks_dir)}"
                   + (f"  -- {spec.description}" if spec.description else ""))
    click.echo("\nWith --benchmarks-dir DIR, DIR/<name>.jsonl[.gz]/.parquet/.json is read first (decontamination is "
               "then offline unless --online); names not listed here may be any file stem of DIR.")
