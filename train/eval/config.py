"""Eval run settings: `EvalConfig` (one dataclass, YAML keys = field names) and the sampling presets
("paper" vs "official", see `train.evaluate`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MATH_SUFFIX_BOXED = "Please reason step by step, and put your final answer within \\boxed{}."
BACKENDS = ("auto", "hf", "vllm")
CI_KINDS = ("bootstrap", "normal")

# Sampling presets: "paper" = what the paper states; "official" = the repo's benchmarks/inference.py.
PRESETS: dict[str, dict[str, Any]] = {
    "paper": {"temperature": 0.6, "top_p": 0.95, "top_k": 0, "repetition_penalty": 1.0},
    "official": {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "repetition_penalty": 1.05},
}


@dataclass
class EvalConfig:
    """Everything an eval run depends on (TRL-style: one dataclass, YAML keys = field names).

    `benchmarks` entries may carry their own k as "name:k" (e.g. "aime2024:64", "lcb_v5:8"); `k` is the rest's.
    `think_end`: the verifiers judge the text after its last occurrence; "" judges the whole response (for
    models without a reasoning block). `chunk_items`: items per generate call and per resumable chunk.
    """

    model: str = field(default="", metadata={
        "help": "Model folder or hub id (loaded offline with HF_HUB_OFFLINE=1)."})
    benchmarks: list[str] = field(default_factory=lambda: ["aime2024"], metadata={
        "help": "Registry names, each optionally NAME:K (default k from --k), e.g. aime2024,hmmt_feb,livecodebench_v5:8.",
        "sep": ",", "metavar": "A,B:K,..."})
    out: str = field(default="eval_out", metadata={"help": "Output folder.", "flag": ["-o", "--out"]})
    benchmarks_dir: str | None = field(default=None, metadata={
        "help": "Folder with <name>.jsonl[.gz] benchmark files (e.g. ../shared/data/benchmarks)."})
    registry: str | None = field(default=None, metadata={
        "help": "Extra benchmark registry YAML (the one decontamination gets)."})
    k: int = field(default=64, metadata={"help": "Samples per item."})
    temperature: float = field(default=0.6, metadata={"help": "Sampling temperature."})
    top_p: float = field(default=0.95, metadata={"help": "Nucleus sampling top_p."})
    top_k: int = field(default=0, metadata={"help": "Top-k sampling (0 = off; the official script used 20)."})
    repetition_penalty: float = field(default=1.0, metadata={
        "help": "Repetition penalty (the official script used 1.05)."})
    max_tokens: int = field(default=32768, metadata={"help": "Max generated tokens per sample."})
    seed: int = field(default=0, metadata={"help": "Base sampling seed."})
    limit: int | None = field(default=None, metadata={"help": "Only the first N items of each benchmark."})
    backend: str = field(default="auto", metadata={
        "help": "Generation backend (auto = vLLM when installed with CUDA, else HF generate).",
        "choices": BACKENDS})
    batch_size: int = field(default=8, metadata={"help": "HF backend: prompts per generate call."})
    chunk_items: int = field(default=16, metadata={
        "help": "Items per generate call and per resumable chunk."})
    math_suffix: str = field(default="", metadata={
        "help": "Text appended to math problems ('boxed' = the step-by-step \\boxed{} instruction; default none, "
                "as in the official script)."})
    think_end: str = field(default="</think>", metadata={
        "help": "Judge the text after this marker ('' = the whole response)."})
    pass_ks: list[int] | None = field(default=None, metadata={
        "help": "k values of pass@k (default: powers of 2)."})
    ci: str = field(default="bootstrap", metadata={
        "help": "Confidence interval over items.", "choices": CI_KINDS})
    ci_level: float = field(default=0.95, metadata={"help": "Confidence level."})
    n_bootstrap: int = field(default=2000, metadata={"help": "Bootstrap resamples."})
    maj_verify_max_groups: int = field(default=8, metadata={"help": "maj@k: answer groups checked per item."})
    verify_workers: int | None = field(default=None, metadata={
        "help": "Verifier processes (default: all cores)."})
    math_timeout_s: float = field(default=5.0, metadata={"help": "Seconds per math verdict."})
    code_timeout_s: float = field(default=10.0, metadata={"help": "Wall seconds per sandboxed code run."})
    tensor_parallel_size: int = field(default=1, metadata={
        "help": "vLLM tensor parallel size.", "flag": ["--tensor-parallel-size", "--tp"]})
    max_model_len: int | None = field(default=None, metadata={"help": "vLLM max_model_len."})
    yarn_factor: float | None = field(default=None, metadata={
        "help": "vLLM YaRN rope scaling factor (report: 2.5 at 64K)."})
    yarn_original_max_positions: int = field(default=32768, metadata={"help": "YaRN original max positions."})
    vllm_kwargs: dict[str, Any] = field(default_factory=dict, metadata={
        "help": "Extra vllm.LLM keyword arguments."})
    overwrite: bool = field(default=False, metadata={"help": "Discard samples already in OUT."})

    def __post_init__(self) -> None:
        if isinstance(self.benchmarks, str):
            self.benchmarks = [b.strip() for b in self.benchmarks.split(",") if b.strip()]
        if self.math_suffix == "boxed":
            self.math_suffix = MATH_SUFFIX_BOXED
        if not self.benchmarks:
            raise ValueError("benchmarks: give at least one benchmark name")
        if self.k < 1:
            raise ValueError(f"k: must be >= 1, got {self.k}")
        for name, k in self.benchmark_ks().items():
            if k < 1:
                raise ValueError(f"benchmarks: k for {name!r} must be >= 1, got {k}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend: expected auto, hf or vllm, got {self.backend!r}")
        if self.ci not in CI_KINDS:
            raise ValueError(f"ci: expected bootstrap or normal, got {self.ci!r}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"limit: must be >= 1, got {self.limit}")
        if self.chunk_items < 1 or self.max_tokens < 1:
            raise ValueError("chunk_items: chunk_items and max_tokens must be >= 1")
        if not 0 < self.ci_level < 1:
            raise ValueError(f"ci_level: must be in (0, 1), got {self.ci_level}")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError(f"temperature: need temperature >= 0 and 0 < top_p <= 1, got {self.temperature}, "
                             f"{self.top_p}")

    def benchmark_ks(self) -> dict[str, int]:
        """{benchmark name: k}, from "name:k" entries or the default `k`."""
        out: dict[str, int] = {}
        for entry in self.benchmarks:
            name, _, k = entry.partition(":")
            try:
                out[name.strip()] = int(k) if k else self.k
            except ValueError as e:
                raise ValueError(f"benchmarks: bad entry {entry!r}; expected NAME or NAME:K") from e
        return out


def apply_preset(values: dict[str, Any], preset: str) -> dict[str, Any]:
    """`values` with the sampling settings of PRESETS[preset] filled in where not given."""
    if preset not in PRESETS:
        raise ValueError(f"unknown sampling preset {preset!r}; expected one of {sorted(PRESETS)}")
    return {**PRESETS[preset], **values}
