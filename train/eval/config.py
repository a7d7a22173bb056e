"""Eval run settings: `EvalConfig` (one dataclass, YAML keys = field names) and the sampling presets
("paper" vs "official", see `train.evaluate`)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

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

    model: str = ""
    benchmarks: list[str] = field(default_factory=lambda: ["aime2024"])
    out: str = "eval_out"
    benchmarks_dir: str | None = None
    registry: str | None = None
    k: int = 64
    temperature: float = 0.6
    top_p: float = 0.95
    top_k: int = 0
    repetition_penalty: float = 1.0
    max_tokens: int = 32768
    seed: int = 0
    limit: int | None = None
    backend: str = "auto"
    batch_size: int = 8
    chunk_items: int = 16
    math_suffix: str = ""
    think_end: str = "</think>"
    pass_ks: list[int] | None = None
    ci: str = "bootstrap"
    ci_level: float = 0.95
    n_bootstrap: int = 2000
    maj_verify_max_groups: int = 8
    verify_workers: int | None = None
    math_timeout_s: float = 5.0
    code_timeout_s: float = 10.0
    tensor_parallel_size: int = 1
    max_model_len: int | None = None
    yarn_factor: float | None = None
    yarn_original_max_positions: int = 32768
    vllm_kwargs: dict[str, Any] = field(default_factory=dict)
    overwrite: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.benchmarks, str):
            self.benchmarks = [b.strip() for b in self.benchmarks.split(",") if b.strip()]
        if not self.benchmarks:
            raise ValueError("EvalConfig.benchmarks: give at least one benchmark name")
        for name, k in self.benchmark_ks().items():
            if k < 1:
                raise ValueError(f"EvalConfig.benchmarks: k for {name!r} must be >= 1, got {k}")
        if self.backend not in ("auto", "hf", "vllm"):
            raise ValueError(f"EvalConfig.backend: expected auto, hf or vllm, got {self.backend!r}")
        if self.ci not in ("bootstrap", "normal"):
            raise ValueError(f"EvalConfig.ci: expected bootstrap or normal, got {self.ci!r}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"EvalConfig.limit: must be >= 1, got {self.limit}")
        if self.chunk_items < 1 or self.max_tokens < 1:
            raise ValueError("EvalConfig: chunk_items and max_tokens must be >= 1")
        if not 0 < self.ci_level < 1:
            raise ValueError(f"EvalConfig.ci_level: must be in (0, 1), got {self.ci_level}")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError(f"EvalConfig: need temperature >= 0 and 0 < top_p <= 1, got {self.temperature}, "
                             f"{self.top_p}")

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "config") -> EvalConfig:
        """Build from a YAML/JSON mapping; an unknown key is an error naming it and `source`."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"{source}: unknown eval option(s) {unknown}; known: {sorted(known)}")
        return cls(**data)

    def benchmark_ks(self) -> dict[str, int]:
        """{benchmark name: k}, from "name:k" entries or the default `k`."""
        out: dict[str, int] = {}
        for entry in self.benchmarks:
            name, _, k = entry.partition(":")
            try:
                out[name.strip()] = int(k) if k else self.k
            except ValueError as e:
                raise ValueError(f"EvalConfig.benchmarks: bad entry {entry!r}; expected NAME or NAME:K") from e
        return out


def apply_preset(values: dict[str, Any], preset: str) -> dict[str, Any]:
    """`values` with the sampling settings of PRESETS[preset] filled in where not given."""
    if preset not in PRESETS:
        raise ValueError(f"unknown sampling preset {preset!r}; expected one of {sorted(PRESETS)}")
    return {**PRESETS[preset], **values}
