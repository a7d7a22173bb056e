"""Source presets: how the popular long-CoT sources are read, as they are published.

A preset says which field is the prompt, how responses are formed (one row per generation; a trace and its
final answer joined the way the source means them, the reasoning block in a marker of
`cotforge.curate.core.reasoning`), the gold answer or code tests, and which shipped labels go into the
optional schema columns (`correct`, `pass_rate`, `difficulty`) or meta (finish reason, completeness, topic,
upstream source). Every label's provenance (the field it came from, and any rule applied) is recorded in the
row's `meta["_labels"]`, so verify, difficulty and selection use them instead of recomputing.

Rows made from one upstream record share `problem_id` and carry `gen_index` (0, 1, ...): dedup keeps all
responses of a problem together (same prompt) and the per-problem response cap counts them.

A preset is chosen explicitly (`InputSpec.preset`, `preset:` in a recipe source) or detected from the first
record's columns (`detect_preset`; the choice is logged). Sources no preset matches are read by plain field
detection, as before. Dataset cards the schemas were checked against are named in `Preset.card`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from cotforge.curate.core.schema import dump_meta, make_id, normalize_domain
from cotforge.curate.io.mapping import check_unicode, parse_meta, scalar_text
from cotforge.curate.io.preset_sources import (
    Generation,
    Problem,
    build_acereason_math,
    build_am,
    build_deepcoder,
    build_deepmath,
    build_kodcode,
    build_limo,
    build_nemotron,
    build_numina,
    build_omr,
    build_opencodereasoning,
    build_openr1,
    build_openthoughts,
    build_openthoughts_metadata,
    build_s1k,
    build_taco,
    build_verl,
)
from cotforge.curate.io.records import Origin, err

# Optional columns a preset adds to the schema (only for inputs read through a preset).
PRESET_FIELDS = [pa.field("problem_id", pa.string()), pa.field("gen_index", pa.int64()),
                 pa.field("correct", pa.bool_()), pa.field("pass_rate", pa.float64()),
                 pa.field("difficulty", pa.string())]


Builder = Callable[[dict[str, Any], Origin], tuple[Problem, list[Generation]]]


@dataclass(frozen=True)
class Preset:
    """A named source layout: the columns that identify it, its builder and the fields it consumes."""

    name: str
    card: str
    build: Builder
    requires: tuple[str, ...]
    used: tuple[str, ...]
    domain: str | None = None
    match: Callable[[dict[str, Any]], bool] | None = None  # extra check on the first record
    exact: bool = False  # the record's columns must be exactly `requires` (generic column names)

    def matches(self, rec: dict[str, Any]) -> bool:
        keys = set(rec)
        if self.exact and keys != set(self.requires):
            return False
        return set(self.requires) <= keys and (self.match is None or self.match(rec))


# --------------------------------------------------------------------------- registry


def _has_info_messages(rec: dict) -> bool:
    msgs = rec.get("messages")
    return isinstance(msgs, list) and any(isinstance(m, dict) and isinstance(m.get("info"), dict) for m in msgs)


def _verl_shaped(rec: dict) -> bool:
    return isinstance(rec.get("reward_model"), dict) and isinstance(rec.get("prompt"), (list, str))


HF = "https://huggingface.co/datasets/"
_LIST: list[Preset] = [
    Preset("verl", HF + "Skywork/Skywork-OR1-RL-Data (also BytedTsinghua-SIA/DAPO-Math-17k, verl parquet rows)",
           build_verl, ("prompt", "reward_model", "data_source"), ("prompt", "reward_model", "data_source", "ability",
                                                             "extra_info"), match=_verl_shaped),
    Preset("am_r1_distilled", HF + "a-m-team/AM-DeepSeek-R1-Distilled-1.4M", build_am, ("messages",), ("messages",),
           match=_has_info_messages),
    Preset("openr1_math", HF + "open-r1/OpenR1-Math-220k", build_openr1, ("problem", "generations", "correctness_math_verify"),
           ("problem", "answer", "generations", "correctness_math_verify", "correctness_llama", "finish_reasons",
            "is_reasoning_complete", "uuid", "problem_type", "question_type", "source", "solution", "messages",
            "correctness_count"), "math"),
    Preset("openthoughts3", HF + "open-thoughts/OpenThoughts3-1.2M", build_openthoughts,
           ("conversations", "difficulty", "domain", "source"), ("conversations", "difficulty", "domain", "source")),
    Preset("openthoughts", HF + "open-thoughts/OpenThoughts-114k", build_openthoughts, ("system", "conversations"),
           ("system", "conversations")),
    Preset("openthoughts_metadata", HF + "open-thoughts/OpenThoughts-114k (config metadata)", build_openthoughts_metadata,
           ("problem", "deepseek_reasoning", "deepseek_solution"),
           ("problem", "deepseek_reasoning", "deepseek_solution", "ground_truth_solution", "domain", "source",
            "test_cases", "starter_code")),
    Preset("s1k", HF + "simplescaling/s1K", build_s1k, ("question", "thinking_trajectories", "attempt"),
           ("question", "thinking_trajectories", "attempt", "solution", "cot_type", "source_type", "metadata", "cot"),
           "math"),
    Preset("deepmath", HF + "zwhe99/DeepMath-103K", build_deepmath, ("question", "final_answer", "r1_solution_1"),
           ("question", "final_answer", "difficulty", "topic", "r1_solution_1", "r1_solution_2", "r1_solution_3"),
           "math"),
    Preset("openmathreasoning", HF + "nvidia/OpenMathReasoning", build_omr,
           ("problem", "generated_solution", "expected_answer", "inference_mode"),
           ("problem", "generated_solution", "expected_answer", "inference_mode", "pass_rate_72b_tir",
            "problem_type", "problem_source", "generation_model"), "math"),
    Preset("kodcode", HF + "KodCode/KodCode-V1 (and KodCode/KodCode-V1-SFT-R1)", build_kodcode,
           ("question", "solution", "test", "gpt_difficulty"),
           ("question", "solution", "test", "test_info", "gpt_difficulty", "gpt_pass_percentage", "question_id",
            "subset", "style", "version", "r1_solution", "r1_correctness", "conversations"), "code"),
    Preset("opencodereasoning", HF + "nvidia/OpenCodeReasoning", build_opencodereasoning,
           ("input", "output", "solution", "dataset", "split"),
           ("input", "output", "solution", "dataset", "split", "difficulty", "source", "license"), "code"),
    Preset("taco", HF + "BAAI/TACO (and codeparrot/apps)", build_taco, ("question", "solutions", "input_output", "difficulty"),
           ("question", "solutions", "input_output", "difficulty", "starter_code", "source", "url", "tags", "raw_tags"),
           "code"),
    Preset("llama_nemotron", HF + "nvidia/Llama-Nemotron-Post-Training-Dataset", build_nemotron,
           ("input", "output", "category", "reasoning", "generator"),
           ("input", "output", "category", "reasoning", "generator", "license", "used_in_training", "version",
            "system_prompt")),
    Preset("numinamath", HF + "AI-MO/NuminaMath-1.5 (and AI-MO/NuminaMath-CoT)", build_numina,
           ("problem", "solution", "source"), ("problem", "solution", "answer", "source", "problem_type",
                                               "question_type", "messages"), "math",
           match=lambda r: "messages" in r or "question_type" in r),
    Preset("deepcoder", HF + "agentica-org/DeepCoder-Preview-Dataset (RL code prompts)", build_deepcoder,
           ("problem", "tests", "metadata"), ("problem", "tests", "metadata", "starter_code", "solutions"), "code"),
    Preset("acereason_math", HF + "nvidia/AceReason-Math (RL math prompts)", build_acereason_math,
           ("problem", "answer"), ("problem", "answer"), "math", exact=True),
    Preset("limo", HF + "GAIR/LIMO", build_limo, ("question", "solution", "answer"), ("question", "solution", "answer"),
           "math", exact=True),
]
PRESETS: dict[str, Preset] = {p.name: p for p in _LIST}
ALIASES = {"apps": "taco", "skywork_or1": "verl", "dapo": "verl", "openthoughts-114k": "openthoughts",
           "deepmath-103k": "deepmath", "s1": "s1k", "nemotron": "llama_nemotron", "am": "am_r1_distilled"}
PRESETS.update({a: PRESETS[n] for a, n in ALIASES.items()})


def detect_preset(rec: dict[str, Any]) -> Preset | None:
    """The first preset (most specific first) whose columns the record has, else None."""
    return next((p for p in _LIST if p.matches(rec)), None)


# --------------------------------------------------------------------------- rows


def preset_rows(preset: Preset, rec: dict[str, Any], spec: Any, origin: Origin) -> list[dict[str, Any]]:
    """Schema rows (one per generation, sharing `problem_id`) of one upstream record read through `preset`;
    raises InputError naming the place and field when the record does not have the preset's shape."""
    missing = [k for k in preset.requires if k not in rec]
    if missing:
        raise err(origin, f"preset {preset.name!r} expects field(s) {', '.join(missing)} "
                          f"(the record has {', '.join(sorted(rec)) or 'none'})")
    prob, gens = preset.build(rec, origin)
    if not isinstance(prob.prompt, str) or not prob.prompt.strip():
        raise err(origin, f"preset {preset.name!r}: the prompt is empty")
    source = spec.source_name or spec.default_source
    dom = spec.domain or prob.domain or preset.domain
    answer, tests = scalar_text(prob.answer), prob.tests
    domain = normalize_domain(dom) if dom else ("code" if tests else "math" if answer else "other")
    problem_id = str(prob.upstream_id) if prob.upstream_id not in (None, "") else make_id(source, prob.prompt, None)
    meta: dict[str, Any] = {}
    for k, v in rec.items():
        if k in preset.used:
            continue
        if k == "meta":
            meta.update(parse_meta(v))
        else:
            meta[k] = v
    meta.update({k: v for k, v in prob.meta.items() if v is not None})
    if prob.system:
        meta["system"] = prob.system
    meta["_origin"], meta["_preset"] = origin.as_meta(), preset.name
    gens = gens or [Generation(None)]
    rows = []
    for i, g in enumerate(gens):
        response = g.response if isinstance(g.response, str) and g.response.strip() else None
        m = {**meta, **{k: v for k, v in g.meta.items() if v is not None}}
        labels = {**prob.labels, **g.labels}
        if labels:
            m["_labels"] = labels
        if len(gens) > 1:
            m["n_generations"] = len(gens)
            row_id = f"{problem_id}#{i}"
        else:
            row_id = problem_id if prob.upstream_id not in (None, "") else make_id(source, prob.prompt, response)
        row = {"id": row_id, "source": source, "domain": domain, "prompt": prob.prompt, "response": response,
               "answer": answer, "tests": tests, "meta": dump_meta(m), "problem_id": problem_id, "gen_index": i,
               "correct": g.correct, "pass_rate": prob.pass_rate, "difficulty": prob.difficulty}
        check_unicode(row, {"prompt": "prompt"}, origin)
        rows.append(row)
    return rows
