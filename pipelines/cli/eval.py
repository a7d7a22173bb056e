"""`cotforge eval`: avg@k / pass@k / maj@k of a model on registry benchmarks, scored by the shared verifiers.

Precedence of settings: EvalConfig defaults < --preset < --config YAML < flags given on the command line.
The report's numbers: `--preset paper` (temperature 0.6, top_p 0.95) is what the paper states; `--preset
official` adds top_k 20 and repetition_penalty 1.05 as in the official benchmarks/inference.py (use it to
reproduce the released AIME avg@64 outputs). The paper's 64K row also needs `--yarn-factor 2.5 --max-tokens 65536`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

# CLI option name -> EvalConfig field (options left out of this map are handled separately).
_FIELDS = {
    "model": "model", "benchmarks": "benchmarks", "benchmarks_dir": "benchmarks_dir", "registry": "registry",
    "k": "k", "temperature": "temperature", "top_p": "top_p", "top_k": "top_k",
    "repetition_penalty": "repetition_penalty", "max_tokens": "max_tokens", "limit": "limit",
    "backend": "backend", "seed": "seed", "batch_size": "batch_size", "chunk_items": "chunk_items",
    "math_suffix": "math_suffix", "think_end": "think_end", "tensor_parallel_size": "tensor_parallel_size",
    "max_model_len": "max_model_len", "yarn_factor": "yarn_factor", "ci": "ci", "out": "out",
    "overwrite": "overwrite", "verify_workers": "verify_workers",
}


def _load_yaml(path: str) -> dict[str, Any]:
    """The --config mapping (keys = EvalConfig fields); a non-mapping is a clear error."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except yaml.YAMLError as e:
        raise click.UsageError(f"{path}: invalid YAML ({e})") from e
    if not isinstance(data, dict):
        raise click.UsageError(f"{path}: expected a mapping of eval options, got {type(data).__name__}")
    return data


def collect_config(ctx: click.Context, params: dict[str, Any]) -> Any:
    """EvalConfig from preset, YAML and the flags the user actually typed (in that order of precedence)."""
    from cotforge.train.eval.run import EvalConfig, apply_preset

    values: dict[str, Any] = _load_yaml(params["config"]) if params.get("config") else {}
    if params.get("preset"):
        values = apply_preset(values, params["preset"])
    for opt, fname in _FIELDS.items():
        if ctx.get_parameter_source(opt) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT):
            values[fname] = params[opt]
    if params.get("math_suffix") == "boxed" or values.get("math_suffix") == "boxed":
        from cotforge.train.eval.run import MATH_SUFFIX_BOXED

        values["math_suffix"] = MATH_SUFFIX_BOXED
    if not values.get("model"):
        raise click.UsageError("--model is required (or `model:` in --config)")
    if not values.get("out") and not params.get("dry_run"):
        raise click.UsageError("-o/--out is required (or `out:` in --config)")
    try:
        return EvalConfig.from_dict(values, source=params.get("config") or "command line")
    except (TypeError, ValueError) as e:
        raise click.UsageError(str(e)) from e


@click.command("eval")
@click.option("--model", default=None, help="Model folder or hub id (loaded offline with HF_HUB_OFFLINE=1).")
@click.option("--benchmarks", default=None,
              help="Comma-separated registry names, each optionally NAME:K (default k from --k). "
                   "E.g. aime2024,aime2025,hmmt_feb,livecodebench_v5:8")
@click.option("--benchmarks-dir", type=click.Path(file_okay=False), default=None,
              help="Folder with <name>.jsonl[.gz] benchmark files (e.g. ../shared/data/benchmarks).")
@click.option("--registry", type=click.Path(dir_okay=False), default=None,
              help="Extra benchmark registry YAML (same one decontamination gets).")
@click.option("--k", type=int, default=None, help="Samples per item (default 64).")
@click.option("--preset", type=click.Choice(["paper", "official"]), default=None,
              help="Sampling preset: paper = T 0.6, top_p 0.95; official = + top_k 20, repetition_penalty 1.05.")
@click.option("--temperature", type=float, default=None, help="Default 0.6.")
@click.option("--top-p", type=float, default=None, help="Default 0.95.")
@click.option("--top-k", type=int, default=None, help="Default off (0); the official script used 20.")
@click.option("--repetition-penalty", type=float, default=None, help="Default 1.0; the official script used 1.05.")
@click.option("--max-tokens", type=int, default=None, help="Max generated tokens per sample (default 32768).")
@click.option("--limit", type=int, default=None, help="Only the first N items of each benchmark.")
@click.option("--backend", type=click.Choice(["auto", "hf", "vllm"]), default=None,
              help="Generation backend (auto = vLLM when installed with CUDA, else HF generate).")
@click.option("--seed", type=int, default=None, help="Base sampling seed (default 0).")
@click.option("--batch-size", type=int, default=None, help="HF backend: prompts per generate call (default 8).")
@click.option("--chunk-items", type=int, default=None,
              help="Items per generate call and per resumable chunk (default 16).")
@click.option("--math-suffix", default=None,
              help="Text appended to math problems ('boxed' = the step-by-step \\boxed{} instruction; "
                   "default none, as in the official script).")
@click.option("--think-end", default=None, help="Judge the text after this marker (default </think>).")
@click.option("--tensor-parallel-size", "--tp", "tensor_parallel_size", type=int, default=None, help="vLLM TP.")
@click.option("--max-model-len", type=int, default=None, help="vLLM max_model_len.")
@click.option("--yarn-factor", type=float, default=None, help="vLLM YaRN rope scaling factor (report: 2.5 at 64K).")
@click.option("--ci", type=click.Choice(["bootstrap", "normal"]), default=None, help="CI over items.")
@click.option("--verify-workers", type=int, default=None, help="Verifier processes (default: all cores).")
@click.option("-o", "--out", type=click.Path(file_okay=False), default=None, help="Output folder.")
@click.option("--overwrite", is_flag=True, default=None, help="Discard samples already in OUT.")
@click.option("--config", type=click.Path(exists=True, dir_okay=False), default=None,
              help="YAML with EvalConfig fields; flags given on the command line override it.")
@click.option("--dry-run", is_flag=True, help="Print the plan (items, samples, sampling, tokens); load no model.")
@click.pass_context
def eval_command(ctx: click.Context, dry_run: bool, **params: Any) -> None:
    """Sample k answers per benchmark item and report avg@k, pass@k and maj@k with CIs over items.

    Writes OUT/samples.parquet (every sample and its verdict), OUT/results.json and OUT/report.md + .png;
    re-running the same command resumes (stored samples are not regenerated).

    The report's protocol: AIME/HMMT avg@64, LiveCodeBench avg@8, temperature 0.6, top_p 0.95 (--preset paper).
    The official inference script also used top_k 20 and repetition_penalty 1.05 (--preset official); it was
    committed with the released AIME avg@64 outputs, so use it to reproduce those. The 64K row adds
    --yarn-factor 2.5 --max-tokens 65536.
    """
    from cotforge.train.eval.run import format_plan, plan_eval, run_eval

    cfg = collect_config(ctx, {**params, "dry_run": dry_run})
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
