"""`InputSpec`: one input of a curation stage, with where it lives, how to read it and how to map it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from cotforge.curate.io import fs
from cotforge.curate.io.presets import PRESETS

FORMATS = ("auto", "jsonl", "json", "csv", "tsv", "parquet", "arrow")


@dataclass
class InputSpec:
    """One input: a local path, an fsspec URL (`s3://b/x/*.jsonl.gz`, `hf://datasets/o/n/data/*.parquet`, globs
    allowed), a `save_to_disk` folder, or a Hub dataset `hf:org/name[:split]` (also a local folder laid out
    like a Hub dataset repository), plus per-input options."""

    path: str
    source_name: str | None = None
    mapping: dict[str, str] = field(default_factory=dict, metadata={
        "help": "Field overrides, e.g. {prompt: problem}; a mapping turns preset detection off."})
    domain: str | None = None
    preset: str | None = field(default=None, metadata={
        "help": "Source preset (see `cotforge.curate.io.presets.PRESETS`); None: detect it from the columns; "
                "'none': plain field detection."})
    format: str = field(default="auto", metadata={
        "help": "File format: auto (by name and content) or one of jsonl, json, csv, tsv, parquet, arrow."})
    config_name: str | None = field(default=None, metadata={"help": "Hub dataset config (subset) name."})
    split: str | None = field(default=None, metadata={
        "help": "Hub / save_to_disk split (default: the `:split` in the path, else train)."})
    revision: str | None = field(default=None, metadata={"help": "Hub dataset revision (branch, tag or commit)."})
    data_files: str | list[str] | None = field(default=None, metadata={
        "help": "Hub dataset data_files pattern(s), e.g. data/train-0000*.parquet."})
    streaming: bool = field(default=True, metadata={
        "help": "Stream Hub datasets row by row (no full download first) where the dataset allows it."})

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path:
            raise ValueError(f"path: expected a non-empty string, got {self.path!r}")
        if self.preset not in (None, "none") and self.preset not in PRESETS:
            raise ValueError(f"preset: unknown preset {self.preset!r} (known: {', '.join(sorted(PRESETS))}, none)")
        if self.format not in FORMATS:
            raise ValueError(f"format: {self.format!r} is not one of {', '.join(FORMATS)}")
        if self.preset not in (None, "none") and self.mapping:
            raise ValueError("mapping: a preset reads its own fields; give either `preset` or `mapping`")
        if isinstance(self.data_files, list) and not all(isinstance(x, str) for x in self.data_files):
            raise ValueError("data_files: expected a string or a list of strings")

    @property
    def is_hub(self) -> bool:
        return self.path.startswith("hf:") and not self.path.startswith("hf://")

    def hub_name_split(self) -> tuple[str, str]:
        """(dataset name or folder, split) of an `hf:` input; the split field wins over `:split`."""
        rest = self.path[3:]
        name, _, split = rest.rpartition(":") if rest.count(":") and not _is_windows_drive(rest) else (rest, "", "")
        if not name:
            name, split = rest, ""
        return name, self.split or split or "train"

    @property
    def default_source(self) -> str:
        if self.source_name:
            return self.source_name
        if self.is_hub:
            return self.hub_name_split()[0].rstrip("/").split("/")[-1]
        name = Path(fs.shown(self.path).rstrip("/")).name
        for suf in (".gz", ".zst", ".zstd", ".bz2", ".xz", ".jsonl", ".ndjson", ".json", ".csv", ".tsv",
                    ".parquet", ".arrow"):
            name = name.removesuffix(suf)
        return name.replace("*", "") or "input"

    def with_path(self, path: str) -> InputSpec:
        """The same options for one file of this input (a folder or glob expands into several)."""
        return replace(self, path=path, source_name=self.source_name or self.default_source)


def _is_windows_drive(rest: str) -> bool:
    return len(rest) > 1 and rest[1] == ":"
