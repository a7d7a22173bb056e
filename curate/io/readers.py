"""Read any input into rows of the one schema: files (any format, any filesystem), folders, globs,
`save_to_disk` folders and Hub datasets; source presets or plain field detection.

The pieces: `fs` (paths and fsspec URLs), `formats` (format detection and streaming record readers),
`presets` (popular sources as published), `mapping` (field detection for everything else), `codetests`.
One detection step (`detect_input`) decides per file its format (name + content) and its preset (first
record's columns); the recipe planner calls it for `--dry-run`, the readers for every file they open.

A bad row never raises unless ``strict``: it comes back as a `Quarantined` record naming the file,
line/row/byte offset and field, so every input row ends up somewhere. A compressed stream that breaks keeps
the rows before the break and adds one quarantined entry for the break.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from cotforge.curate.io import fs
from cotforge.curate.io.codetests import normalize_tests
from cotforge.curate.io.formats import (
    DATA_SUFFIXES,
    BadRecord,
    Break,
    Format,
    UnknownFormat,
    detect_format,
    iter_arrow,
    iter_csv,
    iter_json_array,
    iter_jsonl,
    iter_parquet,
)
from cotforge.curate.io.mapping import ALIASES, CHAT_KEYS, TARGETS, detect_mapping, to_row
from cotforge.curate.io.presets import PRESETS, Preset, detect_preset, preset_rows
from cotforge.curate.io.records import InputError, Origin, Quarantined
from cotforge.curate.io.spec import InputSpec

log = logging.getLogger(__name__)

HF_DIR_FILES = ("dataset_info.json", "dataset_dict.json", "state.json")
PEEK_UNITS = 16  # files whose first record input_schema looks at when a folder mixes sources

__all__ = ["ALIASES", "CHAT_KEYS", "DATA_SUFFIXES", "TARGETS", "InputError", "InputSpec", "Origin", "Quarantined",
           "describe_input", "detect_input", "detect_mapping", "input_units", "iter_raw", "normalize_tests",
           "read_rows", "to_row", "validate_input"]


# --------------------------------------------------------------------------- units (files / datasets)


def is_hf_dir(path: str) -> bool:
    """A `datasets.save_to_disk` folder (a Dataset or a DatasetDict)."""
    return any(fs.exists(fs.join(path, f)) for f in HF_DIR_FILES)


def input_units(spec: InputSpec) -> list[InputSpec]:
    """The units one input expands into, in order: each file of a folder or glob, or the one dataset."""
    p = spec.path
    if spec.is_hub:
        return [spec]
    try:
        if fs.has_glob(p):
            files = fs.expand(p)
            if not files:
                raise InputError(f"{fs.shown(p)}: the pattern matches no files")
            return [spec.with_path(f) for f in files]
        if not fs.exists(p):
            raise InputError(f"{fs.shown(p)}: no such file or directory")
        if fs.isdir(p):
            if is_hf_dir(p):
                return [spec]
            files = fs.list_files(p, DATA_SUFFIXES)
            if not files:
                raise InputError(f"{fs.shown(p)}: directory holds no data files ({', '.join(DATA_SUFFIXES[:8])}, ...)")
            return [spec.with_path(f) for f in files]
    except fs.StorageError as e:
        raise InputError(str(e)) from e
    except PermissionError as e:
        raise InputError(f"{fs.shown(p)}: not readable ({e})") from e
    return [spec]


def unit_format(unit: InputSpec) -> Format | str:
    """`Format` of a file unit, or "hub" / "save_to_disk" for dataset units; unknown formats raise InputError."""
    if unit.is_hub:
        name, _ = unit.hub_name_split()
        return "save_to_disk" if fs.local_path(name) and Path(name).is_dir() and is_hf_dir(name) else "hub"
    if fs.isdir(unit.path):
        return "save_to_disk"
    if unit.format != "auto":
        by_name = detect_format(unit.path) if unit.format in ("jsonl", "json", "csv", "tsv") else None
        return Format(unit.format, by_name.compression if by_name else None)
    try:
        return detect_format(unit.path)
    except UnknownFormat as e:
        raise InputError(str(e)) from e


# --------------------------------------------------------------------------- raw records


def iter_raw(spec: InputSpec) -> Iterator[tuple[Origin, dict[str, Any] | Quarantined]]:
    """Yield (origin, record) for every raw record of one input; bad records come as Quarantined."""
    for unit in input_units(spec):
        yield from _iter_unit(unit)


def _iter_unit(unit: InputSpec) -> Iterator[tuple[Origin, dict[str, Any] | Quarantined]]:
    fmt = unit_format(unit)
    if fmt == "hub":
        yield from _iter_hub(unit)
        return
    if fmt == "save_to_disk":
        name, split = unit.hub_name_split() if unit.is_hub else (unit.path, unit.split or "train")
        yield from _iter_disk(name, split, unit.path)
        return
    assert isinstance(fmt, Format)
    shown = fs.shown(unit.path)
    try:
        fh = fs.open_binary(unit.path)
    except (OSError, fs.StorageError) as e:
        raise InputError(f"{shown}: cannot read ({e})") from e
    n = 0
    with fh:
        if fmt.kind == "parquet":
            try:
                records: Iterator = iter_parquet(fh)
                first = next(records, None)
            except Exception as e:  # pyarrow raises several types for broken files
                raise InputError(f"{shown}: not a readable Parquet file ({e})") from e
            records = _chain(first, records)
            unit_name = "row"
        elif fmt.kind == "arrow":
            records, unit_name = iter_arrow(fh), "row"
        elif fmt.kind == "jsonl":
            records, unit_name = iter_jsonl(fh, fmt.compression), "line"
        elif fmt.kind == "json":
            records, unit_name = iter_json_array(fh, fmt.compression), "row"
        else:
            records, unit_name = iter_csv(fh, fmt.compression, "\t" if fmt.kind == "tsv" else ","), "line"
        for idx, rec in records:
            n += 1
            if isinstance(rec, Break):
                where = Origin(shown, rec.offset, "byte") if rec.offset >= 0 else Origin(shown, idx, unit_name)
                tail = rec.tail.decode("utf-8", "replace")[:2000]
                log.warning("%s: %s (records before it are kept)", shown, rec.reason)
                yield where, Quarantined(where, f"malformed: {rec.reason}; last complete record before it: "
                                                f"{unit_name} {idx - 1}", tail)
                continue
            origin = Origin(shown, idx, unit_name)
            yield origin, rec if not isinstance(rec, BadRecord) else Quarantined(origin, rec.reason, rec.raw)
    if n == 0:  # one quarantined record names the empty file (so it is counted, and --strict stops)
        where = Origin(shown, 0, "byte")
        yield where, Quarantined(where, "malformed: empty file (no records)", None)


def _chain(first: Any, rest: Iterator) -> Iterator:
    if first is not None:
        yield first
    yield from rest


def _iter_disk(folder: str, split: str, shown_path: str) -> Iterator[tuple[Origin, dict[str, Any] | Quarantined]]:
    """Rows of a `save_to_disk` folder read straight from its Arrow files (streamed, no `datasets` needed)."""
    if fs.exists(fs.join(folder, "dataset_dict.json")):
        with fs.open_text(fs.join(folder, "dataset_dict.json")) as f:
            splits = json.load(f).get("splits", [])
        if split not in splits:
            raise InputError(f"{shown_path}: no split {split!r} (has {sorted(splits)})")
        folder = fs.join(folder, split)
    try:
        with fs.open_text(fs.join(folder, "state.json")) as f:
            files = [d["filename"] for d in json.load(f)["_data_files"]]
    except (OSError, KeyError, json.JSONDecodeError) as e:
        raise InputError(f"{shown_path}: not a readable save_to_disk folder ({e})") from e
    i = 0
    for name in files:
        with fs.open_binary(fs.join(folder, name)) as fh:
            for _, rec in iter_arrow(fh):
                origin = Origin(fs.shown(shown_path), i, "row")
                if isinstance(rec, Break):
                    yield origin, Quarantined(origin, f"malformed: {name}: {rec.reason}", None)
                    break
                yield origin, rec
                i += 1
    log.info("%s: %d rows (split %s)", fs.shown(shown_path), i, split)


def _iter_hub(spec: InputSpec) -> Iterator[tuple[Origin, dict[str, Any] | Quarantined]]:
    """A Hub dataset (or a local folder in the Hub's layout) through `datasets.load_dataset`, streamed unless
    `streaming=False`: rows arrive as the files are read, nothing is converted to a cache first."""
    import datasets

    name, split = spec.hub_name_split()
    kwargs = {"name": spec.config_name, "split": split, "revision": spec.revision, "data_files": spec.data_files,
              "streaming": spec.streaming}
    try:
        ds = datasets.load_dataset(name, **{k: v for k, v in kwargs.items() if v is not None})
    except Exception as e:
        raise InputError(f"{spec.path}: cannot load dataset ({type(e).__name__}: {e})") from e
    log.info("%s: reading split %s%s (%s)", spec.path, split, f", config {spec.config_name}" if spec.config_name else "",
             "streamed" if spec.streaming else "downloaded")
    i = 0
    it = iter(ds)
    while True:
        try:
            rec = next(it)
        except StopIteration:
            break
        except Exception as e:
            raise InputError(f"{spec.path}, row {i}: reading the dataset failed ({type(e).__name__}: {e})") from e
        yield Origin(spec.path, i, "row"), rec
        i += 1


# --------------------------------------------------------------------------- detection (format + preset)


@dataclass
class Detection:
    """What the one detection step found for an input: its units' formats and the preset of its rows."""

    units: int
    formats: list[str]
    preset: Preset | None
    how: str  # explicit | detected | none | mapping | unknown (hub inputs are only opened when read)

    def describe(self, spec: InputSpec | None = None) -> str:
        kinds = sorted(set(self.formats))
        if kinds == ["hub"]:
            where = "Hub dataset, " + ("streamed" if spec is None or spec.streaming else "downloaded first")
            if spec is not None and (spec.config_name or spec.revision or spec.data_files):
                where += "".join(f", {k} {v}" for k, v in (("config", spec.config_name), ("revision", spec.revision),
                                                          ("data_files", spec.data_files)) if v)
        elif kinds == ["save_to_disk"]:
            where = "save_to_disk folder (Arrow files, streamed)"
        else:
            where = f"{', '.join(kinds)} ({self.units} file{'s' if self.units != 1 else ''})"
        if self.preset is not None:
            pre = f"preset {self.preset.name} ({self.how}{' from the columns' if self.how == 'detected' else ''})"
        elif self.how == "unknown":
            pre = "preset: detected from the first record's columns when read"
        elif self.how == "mapping":
            pre = "no preset (explicit field mapping)"
        else:
            pre = "no preset (field detection)"
        return f"{where}; {pre}"


def _explicit(spec: InputSpec) -> tuple[Preset | None, str] | None:
    if spec.preset == "none":
        return None, "none"
    if spec.mapping:
        return None, "mapping"
    if spec.preset:
        return PRESETS[spec.preset], "explicit"
    return None


def first_record(unit: InputSpec) -> dict[str, Any] | None:
    """The first good record of a unit (None when it has none)."""
    for _, rec in _iter_unit(unit):
        if not isinstance(rec, Quarantined):
            return rec
    return None


def detect_input(spec: InputSpec, *, open_hub: bool = True, max_units: int = PEEK_UNITS) -> Detection:
    """Formats of the input's units and the preset of its rows (explicit, or from the first record's columns).
    Missing inputs and unknown formats raise InputError naming the file."""
    units = input_units(spec)
    formats = [str(unit_format(u)) for u in units[:max_units]]
    chosen = _explicit(spec)
    if chosen is not None:
        return Detection(len(units), formats, chosen[0], chosen[1])
    if not open_hub and formats[0] == "hub":
        return Detection(len(units), formats, None, "unknown")
    for u in units[:max_units]:
        rec = first_record(u)
        if rec is not None:
            found = detect_preset(rec)
            if found is not None:
                return Detection(len(units), formats, found, "detected")
    return Detection(len(units), formats, None, "none")


@lru_cache(maxsize=256)
def _cached_preset(path: str, preset: str | None, fmt: str, mapping: tuple, config: str | None, split: str | None,
                   revision: str | None, data_files: str | None) -> str | None:
    spec = InputSpec(path, preset=preset, format=fmt, mapping=dict(mapping), config_name=config, split=split,
                     revision=revision, data_files=json.loads(data_files) if data_files else None)
    det = detect_input(spec)
    return det.preset.name if det.preset else None


def uses_preset(spec: InputSpec) -> bool:
    """True when the input is (or, detected from its first records, will be) read through a preset."""
    return _cached_preset(spec.path, spec.preset, spec.format, tuple(sorted(spec.mapping.items())),
                          spec.config_name, spec.split, spec.revision,
                          json.dumps(spec.data_files) if spec.data_files else None) is not None


def validate_input(spec: InputSpec) -> Detection:
    """Plan-time check (`--dry-run`): the input exists, every file's format is known, the preset is known.
    Hub inputs are not opened (no network at plan time); local folders in the Hub layout are."""
    name = spec.hub_name_split()[0] if spec.is_hub else None
    return detect_input(spec, open_hub=bool(name and Path(name).is_dir()))


def describe_input(spec: InputSpec) -> str:
    """One line for `--dry-run`: formats and the preset (and how it was chosen)."""
    return validate_input(spec).describe(spec)


# --------------------------------------------------------------------------- rows


def read_rows(spec: InputSpec, strict: bool = False,
              report: dict[str, Any] | None = None) -> Iterator[dict[str, Any] | Quarantined]:
    """Rows of one input in file order; bad records come back as Quarantined (or raise if strict).

    Per file the preset is explicit or detected from its first record; `report` (if given) gets, per
    source, the preset used and how it was chosen, for stats.json."""
    source = spec.source_name or spec.default_source
    for unit in input_units(spec):
        chosen: tuple[Preset | None, str] | None = _explicit(unit)
        mapping: dict[str, str] | None = None
        logged: set[tuple] = set()
        for origin, rec in _iter_unit(unit):
            if isinstance(rec, Quarantined):
                rec.source = source
                if strict:
                    raise InputError(f"{origin}: {rec.reason}")
                yield rec
                continue
            if chosen is None:
                found = detect_preset(rec)
                chosen = (found, "detected") if found else (None, "none")
            preset, how = chosen
            if ("preset", preset.name if preset else None) not in logged:
                logged.add(("preset", preset.name if preset else None))
                note_preset(report, source, unit, preset, how)
            if preset is not None:
                try:
                    yield from preset_rows(preset, rec, unit, origin)
                except InputError as e:
                    if strict:
                        raise
                    yield Quarantined(origin, f"malformed: {e.what}", rec, source)
                continue
            # re-detect when a mapped field (incl. the chat list) is absent: files or rows of another shape
            unmapped = mapping is not None and "prompt" not in mapping and "chat" not in mapping
            if mapping is None or (unit.mapping == {} and (unmapped or not set(mapping.values()) <= set(rec))):
                new = detect_mapping(list(rec), unit.mapping)
                key = tuple(sorted(new.items()))
                if key not in logged:
                    logged.add(key)
                    log.info("%s: field mapping %s", fs.shown(unit.path), ", ".join(f"{k}<-{v}" for k, v in new.items()))
                mapping = new
            try:
                yield to_row(rec, mapping, unit, origin)
            except InputError as e:
                if strict:
                    raise
                yield Quarantined(origin, f"malformed: {e.what}", rec, source)


def note_preset(report: dict[str, Any] | None, source: str, unit: InputSpec, preset: Preset | None, how: str) -> None:
    if preset is not None:
        log.info("%s: preset %s (%s%s)", fs.shown(unit.path), preset.name, how,
                 " from the columns" if how == "detected" else "")
    if report is None:
        return
    entry = report.setdefault(source, {"preset": None, "chosen": how, "files": 0})
    entry["files"] += 1
    if preset is not None:
        entry.update(preset=preset.name, chosen=how, card=preset.card)
