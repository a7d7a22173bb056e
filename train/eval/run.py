"""Evaluation: sample k answers per benchmark item and score them with the project's verifiers.

Protocol (Klear-Reasoner paper §4.2, official `benchmarks/inference.py`; see docs/paper_notes.md §5):
  AIME 2024/2025 and HMMT: avg@64, LiveCodeBench: avg@8; temperature 0.6, top_p 0.95, 32K generation.
  The paper's numbers state only temperature/top_p ("paper" preset, top_k off, repetition_penalty 1.0); the
  official inference script adds top_k 20 and repetition_penalty 1.05 ("official" preset); it was committed
  (with the released AIME avg@64 outputs) the day after a user reported a ~5 point AIME24 gap at 64K with the
  paper's settings, so reproducing the released numbers likely needs "official". Both are exposed.

Metrics, for an item with n samples of which c are correct (and k <= n):
  avg@n  = c / n                                   (mean accuracy over the n samples; = pass@1 estimate)
  pass@k = 1 - C(n - c, k) / C(n, k)                (unbiased estimator, Chen et al. 2021)
  maj@n  = 1[the most voted extracted answer is correct]   (math only; correct answers form one vote group)
A benchmark's metric is the mean over items; its confidence interval is over items (bootstrap percentile or
normal approximation), i.e. it reflects which problems were drawn, not sampling noise within an item alone.

Outputs in OUT: `samples.parquet` (every sample with its verdict), `results.json`, `report.md` + `report.png`.
Samples are written in chunks to `OUT/samples.parts/` as they are scored and merged into `samples.parquet`
at the end, so a killed run resumes: samples already in either place are not regenerated.

Files (read in this order): `config.py` (EvalConfig, presets) -> `items.py` (benchmark items, prompts) ->
this module (generate missing samples, `run_eval`, dry-run `plan_eval`) -> `scoring.py` (verdicts) ->
`store.py` (samples on disk, resume) -> `metrics.py` (avg/pass/maj@k, CIs) -> `report.py` (results.json,
report.md/png). The command line (`cotforge eval`) is generated from EvalConfig in pipelines/cli/eval.py.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cotforge.train.eval.config import EvalConfig
from cotforge.train.eval.items import EvalItem, build_messages, load_items, registry_fingerprint
from cotforge.train.eval.report import compute_results, write_report
from cotforge.train.eval.scoring import score_samples
from cotforge.train.eval.store import SampleStore, check_resumable, chunk_seed, gen_key, plan_chunks

if TYPE_CHECKING:
    from cotforge.curate.context import StageContext

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- generation


def _sample_rows(chunk: list[EvalItem], start: int, seed: int, comps: list[list[Any]], cfg: EvalConfig,
                 key: str, prompts: list[str]) -> list[dict[str, Any]]:
    """Score a generated chunk and turn it into sample rows."""
    flat_items = [it for it, group in zip(chunk, comps, strict=True) for _ in group]
    flat = [c for group in comps for c in group]
    verdicts = score_samples(flat_items, [c.text for c in flat], cfg)
    rows = []
    pos = 0
    for it, group, prompt in zip(chunk, comps, prompts, strict=True):
        for j, c in enumerate(group):
            v = verdicts[pos]
            pos += 1
            rows.append({"benchmark": it.benchmark, "item_id": it.id, "item_index": it.index,
                         "sample_idx": start + j, "domain": it.domain, "prompt": prompt, "response": c.text,
                         "answer": it.answer, "finish_reason": c.finish_reason, "n_tokens": len(c.token_ids),
                         "correct": v.correct, "score": v.score, "status": v.status, "extracted": v.extracted,
                         "tests_passed": v.passed, "tests_total": v.total, "seed": seed, "gen_key": key})
    return rows


def _make_generator(cfg: EvalConfig) -> Any:
    """The shared generation interface (`train.rollout.make_generator`) with eval's backend options."""
    from cotforge.train.rollout import make_generator, vllm_available

    use_vllm = cfg.backend == "vllm" or (cfg.backend == "auto" and vllm_available())
    if not use_vllm:
        if cfg.yarn_factor:
            raise ValueError("EvalConfig.yarn_factor is applied through vLLM only; use backend='vllm' or drop it")
        return make_generator(cfg.model, "hf", batch_size=cfg.batch_size)
    return make_generator(cfg.model, "vllm", **vllm_engine_kwargs(cfg))


def vllm_engine_kwargs(cfg: EvalConfig) -> dict[str, Any]:
    """`vllm.LLM` kwargs: TP, seed, prefix caching, max_model_len, YaRN (the report's 64K row: factor 2.5)."""
    kw: dict[str, Any] = {"tensor_parallel_size": cfg.tensor_parallel_size, "seed": cfg.seed,
                          "enable_prefix_caching": True}
    if cfg.max_model_len:
        kw["max_model_len"] = cfg.max_model_len
    if cfg.yarn_factor:
        kw["hf_overrides"] = {"rope_scaling": {"rope_type": "yarn", "factor": cfg.yarn_factor,
                                               "original_max_position_embeddings": cfg.yarn_original_max_positions}}
        kw.setdefault("max_model_len", int(cfg.yarn_original_max_positions * cfg.yarn_factor))
    kw.update(cfg.vllm_kwargs)
    return kw


# --------------------------------------------------------------------------- run


def run_eval(cfg: EvalConfig, generator: Any = None) -> dict[str, Any]:
    """Generate missing samples, score them, and write samples.parquet, results.json and report.md/png.

    `generator`: anything with `generate(prompts, SamplingConfig) -> list[list[Completion]]`; by default one
    is made from cfg.model/cfg.backend, only if some sample is missing.
    """
    from cotforge.train.rollout import SamplingConfig

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    store = SampleStore(out)
    if cfg.overwrite:
        store.clear()
    key = gen_key(cfg)
    rows = store.load()
    check_resumable(rows, key, out)
    have: dict[tuple[str, str], set[int]] = {}
    for r in rows:
        have.setdefault((r["benchmark"], r["item_id"]), set()).add(int(r["sample_idx"]))
    ks = cfg.benchmark_ks()
    all_items = {name: load_items(name, cfg) for name in ks}
    t0 = time.monotonic()
    generated, gen_s, load_s = 0, 0.0, 0.0
    for name, items in all_items.items():
        chunks = plan_chunks(items, ks[name], have, cfg.chunk_items)
        if chunks:
            log.info("%s: %d items, k=%d, %d chunk(s) to generate", name, len(items), ks[name], len(chunks))
        for chunk, start, n in chunks:
            if generator is None:
                t_load = time.monotonic()
                generator = _make_generator(cfg)
                load_s = time.monotonic() - t_load
            seed = chunk_seed(cfg.seed, name, chunk[0].id, start)
            scfg = SamplingConfig(n=n, temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k,
                                  repetition_penalty=cfg.repetition_penalty, max_new_tokens=cfg.max_tokens,
                                  seed=seed)
            messages = [build_messages(it, cfg) for it in chunk]
            t_gen = time.monotonic()
            comps = generator.generate(messages, scfg)
            gen_s += time.monotonic() - t_gen
            if len(comps) != len(chunk) or any(len(g) != n for g in comps):
                raise RuntimeError(f"generator returned {[len(g) for g in comps]} completions for {len(chunk)} "
                                   f"prompts x n={n}")
            new = _sample_rows(chunk, start, seed, comps, cfg, key, [m[-1]["content"] for m in messages])
            store.append(new)
            rows.extend(new)
            generated += len(new)
            log.info("%s: scored %d samples (%d items from #%d)", name, len(new), len(chunk), chunk[0].index)
    loop_s = time.monotonic() - t0
    store.consolidate(rows)
    results = compute_results(cfg, all_items, rows)
    for name in all_items:
        results["benchmarks"][name]["registry_fingerprint"] = registry_fingerprint(name, cfg)
    results["run"] = {"generated_samples": generated, "reused_samples": len(rows) - generated,
                      "generate_s": round(gen_s, 2), "model_load_s": round(load_s, 2),
                      "score_and_write_s": round(loop_s - gen_s - load_s, 2),
                      "generated_tokens": sum(int(r["n_tokens"]) for r in rows[len(rows) - generated:])}
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    write_report(results, out)
    return results


# --------------------------------------------------------------------------- dry run


def plan_eval(cfg: EvalConfig) -> dict[str, Any]:
    """What a run would do (benchmarks, items, k, samples, sampling, backend, tokens) without loading a model."""
    ks = cfg.benchmark_ks()
    benches = {}
    total_samples = total_prompt_tok = 0
    max_prompt_tok = 0
    for name, k in ks.items():
        items = load_items(name, cfg)
        ptoks = [len(build_messages(it, cfg)[-1]["content"]) // 3 + 16 for it in items]
        benches[name] = {"domain": items[0].domain, "items": len(items), "k": k, "samples": k * len(items),
                         "generate_calls": math.ceil(len(items) / cfg.chunk_items),
                         "registry_fingerprint": registry_fingerprint(name, cfg)}
        total_samples += k * len(items)
        total_prompt_tok += sum(p * k for p in ptoks)
        max_prompt_tok = max(max_prompt_tok, max(ptoks))
    from cotforge.train.rollout import vllm_available

    backend = cfg.backend if cfg.backend != "auto" else ("vllm" if vllm_available() else "hf")
    plan: dict[str, Any] = {
        "model": cfg.model, "out": cfg.out, "backend": backend, "benchmarks": benches,
        "total_samples": total_samples,
        "sampling": {"temperature": cfg.temperature, "top_p": cfg.top_p, "top_k": cfg.top_k,
                     "repetition_penalty": cfg.repetition_penalty, "max_tokens": cfg.max_tokens,
                     "seed": cfg.seed, "math_suffix": cfg.math_suffix, "think_end": cfg.think_end},
        "tokens": {"prompt_est": total_prompt_tok, "generated_max": total_samples * cfg.max_tokens,
                   "max_sequence": max_prompt_tok + cfg.max_tokens},
    }
    if backend == "vllm":
        kw = vllm_engine_kwargs(cfg)
        kw.setdefault("max_model_len", max_prompt_tok + cfg.max_tokens)
        plan["vllm"] = kw
    else:
        plan["hf"] = {"batch_size": cfg.batch_size}
    return plan


def format_plan(plan: dict[str, Any]) -> str:
    """Human-readable dry-run plan."""
    s = plan["sampling"]
    lines = [f"model:      {plan['model']}", f"backend:    {plan['backend']}", f"output:     {plan['out']}",
             "benchmarks:"]
    for name, b in plan["benchmarks"].items():
        lines.append(f"  {name:<24} {b['domain']:<5} items={b['items']:<5} k={b['k']:<4} samples={b['samples']:<7}"
                     f" generate calls={b['generate_calls']}  registry fingerprint={b['registry_fingerprint']}")
    lines += [f"total samples: {plan['total_samples']}",
              f"sampling:   temperature={s['temperature']} top_p={s['top_p']} top_k={s['top_k'] or 'off'} "
              f"repetition_penalty={s['repetition_penalty']} max_tokens={s['max_tokens']} seed={s['seed']}",
              f"prompt:     math suffix={s['math_suffix']!r}; judged after {s['think_end'] or '(whole response)'!r}",
              f"tokens:     prompts ~{plan['tokens']['prompt_est']:,} (estimate), generated <= "
              f"{plan['tokens']['generated_max']:,} (samples x max_tokens; long-CoT models typically use a "
              f"large fraction on AIME), longest sequence <= {plan['tokens']['max_sequence']:,}"]
    if "vllm" in plan:
        lines.append(f"vllm.LLM:   {plan['vllm']}")
    else:
        lines.append(f"hf:         {plan['hf']}")
    return "\n".join(lines)


def run(cfg: EvalConfig, ctx: StageContext) -> dict[str, Any]:
    """An eval stage: avg@k / pass@k / maj@k of `cfg.model` on the benchmarks, with CIs over items."""
    results = run_eval(cfg)
    headline = {name: {k: v for k, v in r.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
                for name, r in (results.get("benchmarks") or {}).items()}
    return {"stage": Path(ctx.out_dir).name, "model": cfg.model, "benchmarks": headline}
