"""How each source's records become a problem and its generations (the builders the presets name).

Each builder reads one upstream record in its dataset's published layout and returns a `Problem` (prompt,
gold answer or tests, per-problem labels) and its `Generation`s (one per response, with per-response labels);
`presets.preset_rows` turns those into schema rows. Label provenance goes into `labels` as text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from cotforge.curate.core.reasoning import REASONING_MARKERS
from cotforge.curate.core.schema import as_bool
from cotforge.curate.io.codetests import functional, normalize_tests, pytest_file
from cotforge.curate.io.mapping import chat_to_pair, chat_turns, parse_meta, text_field
from cotforge.curate.io.records import Origin, err


@dataclass
class Problem:
    """What one upstream record says about its problem."""

    prompt: str
    answer: str | None = None
    tests: str | None = None
    domain: str | None = None
    difficulty: str | None = None  # hard | medium | easy
    pass_rate: float | None = None
    system: str | None = None
    upstream_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # per-problem labels kept in meta (topic, ...)
    labels: dict[str, str] = field(default_factory=dict)  # column -> provenance


@dataclass
class Generation:
    """One response of the record, with its own labels."""

    response: str | None
    correct: bool | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # finish_reason, reasoning_complete, ...
    labels: dict[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------- helpers


def join_trace(trace: str | None, answer: str | None) -> str | None:
    """A reasoning trace and a final answer as one response: `<think>\\ntrace\\n</think>\\n\\nanswer`."""
    if not trace and not answer:
        return None
    if not trace:
        return answer
    return f"<think>\n{trace.strip()}\n</think>\n\n{(answer or '').strip()}".rstrip() + "\n"


def with_marker(text: str | None) -> str | None:
    """A response as shipped, with the reasoning block opened when the source's template opened it
    (R1 outputs that start inside the block and only close it: `...</think>answer`)."""
    if not text or not text.strip():
        return None
    if any(o in text for o, _ in REASONING_MARKERS):
        return text
    if "</think>" in text:
        return "<think>\n" + text
    return text


def as_float(value: Any) -> float | None:
    """A shipped number ("0.25", 0.25); "n/a", empty or non-numbers are None."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def scale_bin(level: float | None, lo: float, hi: float) -> str | None:
    """A numeric difficulty on the published [lo, hi] scale binned into thirds (easy / medium / hard)."""
    if level is None:
        return None
    third = (hi - lo) / 3
    return "easy" if level <= lo + third else "hard" if level >= hi - third else "medium"


_BOXED = re.compile(r"\\boxed\s*\{")


def last_boxed(text: str | None) -> str | None:
    """Content of the last `\\boxed{...}` (balanced braces), or None."""
    if not text:
        return None
    starts = [m.end() for m in _BOXED.finditer(text)]
    if not starts:
        return None
    i, depth = starts[-1], 1
    j = i
    while j < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        j += 1
    return text[i:j - 1].strip() if depth == 0 else None


def _req(rec: dict[str, Any], key: str, origin: Origin) -> str:
    return text_field(rec.get(key), key, origin, required=True)  # type: ignore[return-value]


def _list(rec: dict[str, Any], key: str) -> list:
    v = rec.get(key)
    return list(v) if isinstance(v, (list, tuple)) else []


def _at(values: list, i: int) -> Any:
    return values[i] if i < len(values) else None


# --------------------------------------------------------------------------- math sources


def build_openr1(rec: dict, origin: Origin) -> tuple[Problem, list[Generation]]:
    gens, mv, llama = _list(rec, "generations"), _list(rec, "correctness_math_verify"), _list(rec, "correctness_llama")
    finish, complete = _list(rec, "finish_reasons"), _list(rec, "is_reasoning_complete")
    if not gens:
        raise err(origin, "field 'generations' is empty or not a list")
    p = Problem(_req(rec, "problem", origin), answer=rec.get("answer"), domain="math",
                upstream_id=rec.get("uuid"),
                meta={"topic": rec.get("problem_type"), "question_type": rec.get("question_type"),
                      "upstream_source": rec.get("source"), "solution": rec.get("solution")})
    out = []
    for i, g in enumerate(gens):
        c, prov = as_bool(_at(mv, i)), f"correctness_math_verify[{i}]"
        if c is not True and as_bool(_at(llama, i)) is True:  # the card: Llama-3.3-70B judged 12% of the rows
            c, prov = True, f"correctness_llama[{i}]"
        out.append(Generation(with_marker(g), c, {"finish_reason": _at(finish, i),
                                                  "reasoning_complete": as_bool(_at(complete, i))},
                              {"correct": prov} if c is not None else {}))
    return p, out


def build_deepmath(rec: dict, origin: Origin) -> tuple[Problem, list[Generation]]:
    level = as_float(rec.get("difficulty"))
    p = Problem(_req(rec, "question", origin), answer=rec.get("final_answer"), domain="math",
                difficulty=scale_bin(level, 1, 10), meta={"topic": rec.get("topic"), "difficulty_level": level})
    if p.difficulty:
        p.labels["difficulty"] = f"difficulty={level} on the card's 1-10 scale, thirds (<=4 easy, >=7 hard)"
    gens = [Generation(with_marker(rec.get(k))) for k in ("r1_solution_1", "r1_solution_2", "r1_solution_3")
            if isinstance(rec.get(k), str) and rec[k].strip()]
    return p, gens


def build_s1k(rec: dict, origin: Origin) -> tuple[Problem, list[Generation]]:
    traj = rec.get("thinking_trajectories")
    trace = "\n".join(traj) if isinstance(traj, list) else traj
    cot_type = rec.get("cot_type")
    p = Problem(_req(rec, "question", origin), answer=rec.get("solution"),
                domain={"math": "math", "science": "science"}.get(str(cot_type), "other"),
                meta={"topic": cot_type, "upstream_source": rec.get("source_type"),
                      **parse_meta(rec.get("metadata"))})
    p.labels["answer"] = "solution (the source's reference solution; verifiers read its final answer)"
    return p, [Generation(join_trace(trace, rec.get("attempt")))]


def build_limo(rec: dict, origin: Origin) -> tuple[Problem, list[Generation]]:
    p = Problem(_req(rec, "question", origin), answer=rec.get("answer"), domain="math")
    return p, [Generation(with_marker(rec.get("solution")))]  # the whole long solution is the trace


def build_omr(rec: dict, origin: Origin) -> tuple[Problem, list[Generation]]:
    rate = as_float(rec.get("pass_rate_72b_tir"))
    p = Problem(_req(rec, "problem", origin), answer=rec.get("expected_answer"), domain="math", pass_rate=rate,
                meta={"topic": rec.get("problem_type"), "upstream_source": rec.get("problem_source")})
    if rate is not None:
        p.labels["pass_rate"] = "pass_rate_72b_tir (shipped: Qwen2.5-Math-72B-TIR pass rate on the problem)"
    g = Generation(with_marker(rec.get("generated_solution")),
                   meta={"generation_model": rec.get("generation_model"), "inference_mode": rec.get("inference_mode")})
    return p, [g]


def build_numina(rec: dict, origin: Origin) -> tuple[Problem, list[Generation]]:
    sol = rec.get("solution")
    answer = rec.get("answer")
    p = Problem(_req(rec, "problem", origin), domain="math",
                meta={"topic": rec.get("problem_type"), "upstream_source": rec.get("source")})
    if isinstance(answer, str) and answer.strip() and answer.strip().lower() not in ("proof", "notfound"):
        p.answer = answer
    elif answer is None and last_boxed(sol):
        p.answer, p.labels["answer"] = last_boxed(sol), "last \\boxed{} of solution"
    return p, [Generation(with_marker(sol))]


def build_acereason_math(rec: dict, origin: Origin) -> tuple[Problem, list[Generation]]:
    """nvidia/AceReason-Math: RL prompts (`problem`, `answer`), no responses."""
    p = Problem(_req(rec, "problem", origin), answer=rec.get("answer"), domain="math")
    p.labels["answer"] = "answer"
    return p, [Generation(None)]


# --------------------------------------------------------------------------- chat-shaped sources


def build_openthoughts(rec: dict, origin: Origin) -> tuple[Problem, list[Generation]]:
    prompt, response, system = chat_to_pair(rec.get("conversations"), origin, "conversations")
    system = system or rec.get("system")
    level = as_float(rec.get("difficulty"))
    p = Problem(prompt, system=system, domain=rec.get("domain"),
                difficulty=scale_bin(level, 1, 10),
                meta={"upstream_source": rec.get("source"), "difficulty_level": level})
    if p.difficulty:
        p.labels["difficulty"] = f"difficulty={level} on the card's 1-10 scale, thirds (<=4 easy, >=7 hard)"
    return p, [Generation(with_marker(response))]


def build_openthoughts_metadata(rec: dict, origin: Origin) -> tuple[Problem, list[Generation]]:
    trace, sol = rec.get("deepseek_reasoning"), rec.get("deepseek_solution")
    response = None
    if trace or sol:  # the format of the dataset's own conversations
        response = (f"<|begin_of_thought|>\n\n{(trace or '').strip()}\n\n<|end_of_thought|>\n\n"
                    f"<|begin_of_solution|>\n\n{(sol or '').strip()}\n\n<|end_of_solution|>")
    domain = rec.get("domain")
    tests = normalize_tests(rec.get("test_cases"), rec.get("starter_code")) if rec.get("test_cases") else None
    p = Problem(_req(rec, "problem", origin), domain=domain, tests=tests,
                answer=rec.get("ground_truth_solution") if not tests else None,
                meta={"upstream_source": rec.get("source"), "starter_code": rec.get("starter_code")})
    return p, [Generation(response)]


def build_am(rec: dict, origin: Origin) -> tuple[Problem, list[Generation]]:
    turns = chat_turns(rec.get("messages"), origin, "messages")
    prompt, response, system = chat_to_pair(rec.get("messages"), origin, "messages")
    infos = [m.get("info") or {} for _, _, m in turns]
    user_info = next((m.get("info") or {} for r, _, m in reversed(turns) if r == "user"), {})
    asst_info = next((m.get("info") or {} for r, _, m in reversed(turns) if r == "assistant"), {})
    ref = user_info.get("reference_answer") or asst_info.get("reference_answer")
    tc = user_info.get("test_case") or asst_info.get("test_case")
    if not response and (asst_info.get("think_content") or asst_info.get("answer_content")):
        response = join_trace(asst_info.get("think_content"), asst_info.get("answer_content"))
    p = Problem(prompt, system=system, answer=ref if isinstance(ref, str) and ref.strip() else None,
                tests=normalize_tests(tc) if tc else None,
                meta={"upstream_source": next((i.get("source") for i in infos if i.get("source")), None)})
    if p.answer:
        p.labels["answer"] = "messages[user].info.reference_answer"
    return p, [Generation(with_marker(response))]


def build_nemotron(rec: dict, origin: Origin) -> tuple[Problem, list[Generation]]:
    prompt, _, system = chat_to_pair(rec.get("input"), origin, "input")
    category = rec.get("category")
    p = Problem(prompt, system=system or rec.get("system_prompt"),
                domain=category if category in ("math", "code", "science") else "other",
                meta={"topic": category, "reasoning": rec.get("reasoning"), "generator": rec.get("generator"),
                      "license": rec.get("license"), "used_in_training": rec.get("used_in_training"),
                      "version": rec.get("version")})
    return p, [Generation(with_marker(rec.get("output")))]


def build_verl(rec: dict, origin: Origin) -> tuple[Problem, list[Generation]]:
    value = rec.get("prompt")
    if isinstance(value, list):
        prompt, _, system = chat_to_pair(value, origin, "prompt")
    else:
        prompt, system = _req(rec, "prompt", origin), None
    rm = rec.get("reward_model") or {}
    gt = rm.get("ground_truth") if isinstance(rm, dict) else None
    ability = str(rec.get("ability") or "").lower()
    code = ability in ("code", "coding") or "code" in str(rec.get("data_source") or "").lower()
    extra = rec.get("extra_info") if isinstance(rec.get("extra_info"), dict) else {}
    p = Problem(prompt, system=system, domain="code" if code else ability or None,
                meta={"upstream_source": rec.get("data_source"), "reward_style": rm.get("style") if isinstance(rm, dict) else None,
                      **{k: v for k, v in extra.items() if v is not None}})
    if code:
        p.tests, p.labels["tests"] = normalize_tests(gt), "reward_model.ground_truth (verl test cases)"
    else:
        p.answer = gt if isinstance(gt, str) else (json.dumps(gt) if gt is not None else None)
        p.labels["answer"] = "reward_model.ground_truth"
    return p, [Generation(None)]  # RL prompt rows: no response


# --------------------------------------------------------------------------- code sources


_TACO_BINS = {"EASY": "easy", "MEDIUM": "medium", "MEDIUM_HARD": "hard", "HARD": "hard", "VERY_HARD": "hard",
              "introductory": "easy", "interview": "medium", "competition": "hard"}


def build_taco(rec: dict, origin: Origin) -> tuple[Problem, list[Generation]]:
    raw = rec.get("difficulty")
    starter = rec.get("starter_code") or None
    p = Problem(_req(rec, "question", origin), domain="code", difficulty=_TACO_BINS.get(str(raw)),
                tests=normalize_tests(rec.get("input_output"), starter),
                meta={"difficulty_label": raw, "starter_code": starter, "upstream_source": rec.get("source"),
                      "url": rec.get("url"), "tags": rec.get("tags") or rec.get("raw_tags")})
    if p.difficulty:
        p.labels["difficulty"] = f"difficulty={raw!r} (EASY/introductory easy, MEDIUM/interview medium, harder hard)"
    if p.tests:
        p.labels["tests"] = "input_output (stdio cases, or fn_name call-based cases as assert code)"
    return p, [Generation(None)]  # human solutions are not long-CoT responses: prompt rows with tests


def deepcoder_tests(tests: Any, metadata: dict, starter: str | None) -> str | None:
    """DeepCoder's `tests` JSON (a list of {input, output[, testtype]}) as the verifiers' tests: stdin/stdout
    cases as stdio; LiveCodeBench `functional` cases (one JSON value per input line, `metadata.func_name`) as
    call-based asserts; None when they cannot be read (the row then has no tests)."""
    if isinstance(tests, str):
        try:
            tests = json.loads(tests)
        except json.JSONDecodeError:
            return normalize_tests(tests, starter)
    if isinstance(tests, list) and tests and all(isinstance(t, dict) for t in tests):
        if any(t.get("testtype") == "functional" for t in tests):
            fn = metadata.get("func_name")
            if not fn:
                return None
            try:
                ins = [[json.loads(line) for line in str(t["input"]).split("\n") if line.strip()] for t in tests]
                outs = [json.loads(str(t["output"])) for t in tests]
            except (KeyError, json.JSONDecodeError):
                return None
            return functional(str(fn), ins, outs, starter)
        return normalize_tests([{"input": t.get("input"), "output": t.get("output")} for t in tests], starter)
    return normalize_tests(tests, starter)


def build_deepcoder(rec: dict, origin: Origin) -> tuple[Problem, list[Generation]]:
    """agentica-org/DeepCoder-Preview-Dataset: RL prompts with `tests` (JSON) and `metadata` (JSON)."""
    meta = rec.get("metadata")
    if isinstance(meta, str):
        try:
            meta = json.loads(meta) if meta.strip() else {}
        except json.JSONDecodeError:
            meta = {}
    meta = meta if isinstance(meta, dict) else {}
    starter = rec.get("starter_code") or None
    p = Problem(_req(rec, "problem", origin), domain="code",
                tests=deepcoder_tests(rec.get("tests"), meta, starter),
                meta={"starter_code": starter, **{k: v for k, v in meta.items() if isinstance(v, (str, int, float))}})
    if p.tests:
        p.labels["tests"] = "tests (stdin/stdout cases; functional cases as call-based asserts)"
    return p, [Generation(None)]  # reference solutions are not long-CoT responses


def build_opencodereasoning(rec: dict, origin: Origin) -> tuple[Problem, list[Generation]]:
    prompt = rec.get("input")
    if prompt in (None, "", "-"):  # split_1 ships "-" and points at the upstream dataset row
        raise err(origin, f"field 'input' is a placeholder ({prompt!r}): the question is not shipped; it lives in "
                          f"{rec.get('dataset')} split {rec.get('split')} (join it first)")
    raw = rec.get("difficulty")
    p = Problem(_req(rec, "input", origin), domain="code", difficulty=_TACO_BINS.get(str(raw)),
                meta={"difficulty_label": raw, "upstream_source": rec.get("source"),
                      "upstream_dataset": rec.get("dataset"), "license": rec.get("license"),
                      "solution": rec.get("solution")})
    if p.difficulty:
        p.labels["difficulty"] = f"difficulty={raw!r} (TACO-style labels; others stay in meta)"
    return p, [Generation(with_marker(rec.get("output")))]


def build_kodcode(rec: dict, origin: Origin) -> tuple[Problem, list[Generation]]:
    rate = as_float(rec.get("gpt_pass_percentage"))
    if rate is not None and rate > 1:
        rate /= 100
    diff = rec.get("gpt_difficulty")
    p = Problem(_req(rec, "question", origin), domain="code", pass_rate=rate,
                difficulty=diff if diff in ("easy", "medium", "hard") else None,
                tests=pytest_file(rec["test"]) if isinstance(rec.get("test"), str) and rec["test"].strip() else None,
                upstream_id=rec.get("question_id"),
                meta={"subset": rec.get("subset"), "style": rec.get("style"), "test_info": rec.get("test_info"),
                      "version": rec.get("version")})
    if rate is not None:
        p.labels["pass_rate"] = "gpt_pass_percentage (shipped: share of the GPT-4o trials passing the tests)"
    if p.difficulty:
        p.labels["difficulty"] = "gpt_difficulty"
    p.labels["tests"] = "test (pytest file; plain test functions run as assert code)"
    if "r1_solution" in rec or "conversations" in rec:  # KodCode-V1-SFT-R1: one R1 response
        response = None
        if isinstance(rec.get("conversations"), list) and rec["conversations"]:
            _, response, _ = chat_to_pair(rec["conversations"], origin, "conversations")
        response = response or rec.get("r1_solution")
        c = as_bool(rec.get("r1_correctness"))
        return p, [Generation(with_marker(response), c, labels={"correct": "r1_correctness"} if c is not None else {})]
    return p, [Generation(rec.get("solution"), meta={"response_kind": "gpt-4o solution"})]
