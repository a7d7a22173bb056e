"""Shared fixtures: the tiny offline model, and ../shared/data when present (skip otherwise)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("COTFORGE_SHARED_DATA") or REPO.parent / "shared" / "data")  # env: worktrees


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`../shared/data` (real benchmark and SFT files); tests using it skip when it is absent."""
    if not (SHARED_DATA / "MANIFEST.md").exists():
        pytest.skip("../shared/data not present")
    return SHARED_DATA


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny random Qwen2 model + locally trained tokenizer, saved with save_pretrained."""
    pytest.importorskip("torch")
    from cotforge.train.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"))
