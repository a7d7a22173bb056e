"""File formats: detection by name and content, and streaming record readers for each format.

Formats: JSONL (also `.json` holding one object per line), JSON arrays (streamed element by element with an
incremental decoder, never loaded whole), CSV / TSV, Parquet, Arrow IPC files and streams (`.arrow`,
`.feather`); each text format may be gzip / zstd / bz2 / xz compressed. `detect_format` reads the first bytes:
the content decides when it disagrees with the name, and a file that is none of these is an `InputError`
naming it (raised at validation time by the recipe planner, never a traceback).

A compressed stream that breaks (truncated download, corrupt block) keeps every record before the break and
yields one `Break` carrying the compressed byte offset and the reason, which the readers turn into a
quarantined row (or a `--strict` error with the same message).
"""

from __future__ import annotations

import bz2
import codecs
import csv
import io
import json
import lzma
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from cotforge.curate.io import fs

CHUNK = 1 << 16
MAX_JSON_ELEMENT = 256 << 20  # one JSON-array element larger than this is an error, not a memory blow-up

COMPRESSIONS = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd", ".bz2": "bz2", ".xz": "xz"}
MAGIC = ((b"\x1f\x8b", "gzip"), (b"\x28\xb5\x2f\xfd", "zstd"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "xz"))
KINDS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".tsv": "tsv",
         ".parquet": "parquet", ".arrow": "arrow", ".feather": "arrow", ".ipc": "arrow"}
DATA_SUFFIXES = tuple(k + c for k in KINDS for c in ("", *COMPRESSIONS))
KNOWN = "JSONL, JSON array, CSV, TSV (optionally .gz/.zst/.bz2/.xz), Parquet, Arrow"


class UnknownFormat(ValueError):
    """The file is none of the known formats (the message names the file and what was seen)."""


@dataclass(frozen=True)
class Format:
    """What a file holds: `kind` (jsonl | json | csv | tsv | parquet | arrow) and its compression."""

    kind: str
    compression: str | None = None

    def __str__(self) -> str:
        return self.kind + (f"+{self.compression}" if self.compression else "")


@dataclass
class Break:
    """A stream that stopped early: where (compressed byte offset) and why; rows before it were read."""

    offset: int
    reason: str
    tail: bytes = b""  # decoded bytes after the last complete record (the partial record)


def name_format(path: str) -> Format | None:
    """The format the file name says (`x.jsonl.zst` -> jsonl+zstd), or None."""
    name = path.lower().split("?", 1)[0]
    comp = next((c for s, c in COMPRESSIONS.items() if name.endswith(s)), None)
    if comp:
        name = name[: name.rindex(".")]
    kind = next((k for s, k in KINDS.items() if name.endswith(s)), None)
    return Format(kind, comp) if kind else None


def _sniff_kind(head: bytes) -> str | None:
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"ARROW1") or head.startswith(b"\xff\xff\xff\xff"):
        return "arrow"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"{"):
        return "jsonl"
    if text.startswith(b"["):
        return "json"
    return None


def detect_format(path: str) -> Format:
    """Format of one file from its first bytes, with the name deciding only what content cannot (CSV vs TSV,
    JSON array vs JSONL named .json). Raises UnknownFormat naming the file."""
    by_name = name_format(path)
    try:
        with fs.open_binary(path) as fh:
            head = fh.read(4096)
    except OSError as e:
        raise UnknownFormat(f"{fs.shown(path)}: cannot read ({e})") from e
    comp = next((c for m, c in MAGIC if head.startswith(m)), None)
    inner = head
    if comp:
        try:
            inner = _head_decompressed(path, comp)
        except Exception:  # a head we cannot even start decoding: let the reader report the break
            inner = b""
    kind = _sniff_kind(inner)
    if not head:  # empty file: trust the name (the reader logs "empty file")
        if by_name:
            return by_name
        raise UnknownFormat(f"{fs.shown(path)}: empty file with no known extension ({KNOWN})")
    if by_name and by_name.kind in ("csv", "tsv") and kind not in ("parquet", "arrow"):
        return Format(by_name.kind, comp)
    if kind == "json" and by_name and by_name.kind == "jsonl":
        kind = "json"  # an array in a .jsonl file is still an array
    if kind is None and by_name:
        kind = by_name.kind  # content says nothing (garbage lines, a broken file): the reader reports it
    if kind is None:
        seen = head[:40].decode("utf-8", "replace").replace("\n", "\\n")
        raise UnknownFormat(f"{fs.shown(path)}: unknown format (expected {KNOWN}; the file starts with {seen!r})")
    if kind == "jsonl" and by_name and by_name.kind == "json":
        kind = "jsonl"  # `.json` holding objects line by line
    return Format(kind, comp)


def _head_decompressed(path: str, comp: str) -> bytes:
    out = b""
    with fs.open_binary(path) as fh:
        for chunk in decoded_chunks(fh, comp):
            if isinstance(chunk, Break):
                break
            out += chunk
            if len(out) >= 4096:
                break
    return out


# --------------------------------------------------------------------------- decompression with offsets


def _decoder(comp: str):
    if comp == "gzip":
        return zlib.decompressobj(wbits=47)
    if comp == "bz2":
        return bz2.BZ2Decompressor()
    if comp == "xz":
        return lzma.LZMADecompressor()
    if comp == "zstd":
        try:
            import zstandard
        except ImportError as e:  # pragma: no cover - zstandard is a dependency
            raise UnknownFormat("zstd input needs the zstandard package (pip install zstandard)") from e
        return zstandard.ZstdDecompressor().decompressobj()
    raise UnknownFormat(f"unknown compression {comp!r}")


def decoded_chunks(raw: IO[bytes], comp: str | None) -> Iterator[bytes | Break]:
    """Decoded bytes of `raw` chunk by chunk; a broken stream ends with one Break (offset = compressed bytes
    read up to the failing chunk, or the file end for a truncated stream). Multi-member files are read whole."""
    if comp is None:
        while chunk := raw.read(CHUNK):
            yield chunk
        return
    dec, fed, offset = _decoder(comp), False, 0
    while True:
        chunk = raw.read(CHUNK)
        if not chunk:
            break
        start, offset = offset, offset + len(chunk)
        data = chunk
        while data:
            try:
                out = dec.decompress(data)
            except (zlib.error, OSError, EOFError, lzma.LZMAError, ValueError) as e:
                yield Break(start, f"corrupt {comp} data in the block starting at compressed byte {start} ({e})")
                return
            except Exception as e:  # zstandard.ZstdError
                yield Break(start, f"corrupt {comp} data in the block starting at compressed byte {start} ({e})")
                return
            fed = True
            if out:
                yield out
            if dec.eof:
                data = dec.unused_data
                dec, fed = _decoder(comp), False
                data = data.lstrip(b"\x00") if comp == "gzip" else data  # gzip members may be zero-padded
            else:
                data = b""
    if fed:
        yield Break(offset, f"truncated {comp} stream: it ends at compressed byte {offset} inside a block")


class _RawStream(io.RawIOBase):
    """File-like view over decoded chunks (for csv / pyarrow); a Break is kept in `.broken` and ends it."""

    def __init__(self, chunks: Iterator[bytes | Break]):
        self._chunks, self._buf, self.broken = chunks, b"", None

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while not self._buf:
            nxt = next(self._chunks, None)
            if nxt is None:
                return 0
            if isinstance(nxt, Break):
                self.broken = nxt
                return 0
            self._buf = nxt
        n = min(len(b), len(self._buf))
        b[:n], self._buf = self._buf[:n], self._buf[n:]
        return n


# --------------------------------------------------------------------------- record readers
# Each yields (index, record | Break | bad-line tuple); the readers module turns them into rows / quarantine.


@dataclass
class BadRecord:
    """One record that is not a JSON object / not decodable; `index` is its line or element number."""

    index: int
    reason: str
    raw: str


def iter_jsonl(raw: IO[bytes], comp: str | None) -> Iterator[tuple[int, dict[str, Any] | BadRecord | Break]]:
    """(1-based line, record) per line; a break ends the iteration after the complete lines before it."""
    pending, lineno = b"", 0
    for chunk in decoded_chunks(raw, comp):
        if isinstance(chunk, Break):
            chunk.tail = pending
            yield lineno + 1, chunk
            return
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for line in lines:
            lineno += 1
            yield lineno, parse_json_line(line, lineno)
    if pending:
        lineno += 1
        yield lineno, parse_json_line(pending, lineno)


def parse_json_line(raw: bytes, lineno: int) -> dict[str, Any] | BadRecord:
    """One JSONL line as an object, or a BadRecord saying what is wrong with it."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return BadRecord(lineno, f"malformed: invalid UTF-8 at byte {e.start}", raw.decode("utf-8", "replace"))
    if lineno == 1:
        text = text.lstrip("\ufeff")
    if not text.strip():
        return BadRecord(lineno, "malformed: empty line", text)
    try:
        rec = json.loads(text)
    except json.JSONDecodeError as e:
        # json's "Unterminated string starting at" already ends in "at": no "at at column"
        return BadRecord(lineno, f"malformed: invalid JSON ({e.msg.removesuffix(' at')} at column {e.colno})", text)
    if not isinstance(rec, dict):
        return BadRecord(lineno, "malformed: line is not a JSON object", text)
    return rec


def iter_json_array(raw: IO[bytes], comp: str | None) -> Iterator[tuple[int, dict[str, Any] | BadRecord | Break]]:
    """(0-based element, record) of a top-level JSON array, decoded one element at a time: memory holds
    one element plus a read chunk, whatever the file size."""
    decoder = json.JSONDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8")()
    chunks = decoded_chunks(raw, comp)
    buf, pos, done, idx, state = "", 0, False, 0, "start"

    def more() -> Break | None:
        nonlocal buf, pos, done
        nxt = next(chunks, None)
        if nxt is None:
            done = True
            buf = buf[pos:] + utf8.decode(b"", final=True)
            pos = 0
            return None
        if isinstance(nxt, Break):
            done = True
            return nxt
        buf, pos = buf[pos:] + utf8.decode(nxt), 0
        return None

    try:
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n\ufeff":
                pos += 1
            if pos >= len(buf):
                if done:
                    if state != "end":
                        yield idx, BadRecord(idx, "malformed: JSON array is not closed (file ends early)", "")
                    return
                brk = more()
                if brk:
                    yield idx, brk
                    return
                continue
            ch = buf[pos]
            if state == "start":
                if ch != "[":
                    yield idx, BadRecord(idx, "malformed: not a JSON array", buf[pos:pos + 80])
                    return
                pos, state = pos + 1, "value_or_end"
                continue
            if state in ("value_or_end", "value"):
                if ch == "]" and state == "value_or_end":
                    pos, state = pos + 1, "end"
                    continue
                try:
                    value, end = decoder.raw_decode(buf, pos)
                except json.JSONDecodeError as e:
                    if not done and len(buf) - pos < MAX_JSON_ELEMENT:
                        brk = more()
                        if brk:
                            yield idx, brk
                            return
                        continue
                    yield idx, BadRecord(idx, f"malformed: invalid JSON in element {idx} ({e.msg})", buf[pos:pos + 200])
                    return
                if end == len(buf) and not done:  # a number may continue in the next chunk
                    brk = more()
                    if brk:
                        yield idx, brk
                        return
                    continue
                pos = end
                yield idx, value if isinstance(value, dict) else BadRecord(
                    idx, "malformed: record is not an object", json.dumps(value)[:2000])
                idx += 1
                state = "sep"
                continue
            if state == "sep":
                if ch == ",":
                    pos, state = pos + 1, "value"
                elif ch == "]":
                    pos, state = pos + 1, "end"
                else:
                    yield idx, BadRecord(idx, f"malformed: expected ',' or ']' after element {idx - 1}", buf[pos:pos + 80])
                    return
                continue
            if state == "end":  # trailing content after the array
                yield idx, BadRecord(idx, "malformed: content after the JSON array", buf[pos:pos + 80])
                return
    except UnicodeDecodeError as e:
        yield idx, BadRecord(idx, f"malformed: invalid UTF-8 ({e.reason})", "")


def iter_csv(raw: IO[bytes], comp: str | None, delimiter: str) -> Iterator[tuple[int, dict[str, Any] | BadRecord | Break]]:
    """(1-based data row, record) of a CSV/TSV file with a header row; cells stay strings (empty -> None)."""
    stream = _RawStream(decoded_chunks(raw, comp))
    text = io.TextIOWrapper(io.BufferedReader(stream), encoding="utf-8-sig", newline="")
    csv.field_size_limit(1 << 30)
    reader = csv.reader(text, delimiter=delimiter)
    try:
        header = next(reader, None)
        if header is None:
            return
        for i, cells in enumerate(reader, 1):
            if len(cells) != len(header):
                yield i, BadRecord(i, f"malformed: row has {len(cells)} cells, the header has {len(header)}",
                                   delimiter.join(cells)[:2000])
                continue
            yield i, {k: (v if v != "" else None) for k, v in zip(header, cells, strict=True)}
    except (UnicodeDecodeError, csv.Error) as e:
        yield reader.line_num, BadRecord(reader.line_num, f"malformed: {e}", "")
    if stream.broken:
        yield reader.line_num, stream.broken


def iter_arrow(raw: IO[bytes]) -> Iterator[tuple[int, dict[str, Any] | Break]]:
    """(0-based row, record) of an Arrow IPC file or stream (what `datasets.save_to_disk` writes)."""
    import pyarrow as pa

    head = raw.read(6)
    raw.seek(0)
    i = 0
    try:
        reader = pa.ipc.open_file(raw) if head == b"ARROW1" else pa.ipc.open_stream(raw)
        batches = (reader.get_batch(k) for k in range(reader.num_record_batches)) if head == b"ARROW1" else reader
        for batch in batches:
            for rec in batch.to_pylist():
                yield i, rec
                i += 1
    except (pa.ArrowInvalid, OSError) as e:
        yield i, Break(-1, f"unreadable Arrow data after row {i} ({e})")


def iter_parquet(raw: IO[bytes]) -> Iterator[tuple[int, dict[str, Any] | Break]]:
    """(0-based row, record) of a Parquet file, batch by batch; a corrupt row group ends it with a Break."""
    from cotforge.curate.io.budget import open_streaming

    pf = open_streaming(raw)  # page by page; a broken footer raises: the caller reports the file as unreadable
    i = 0
    try:
        for batch in pf.iter_batches(batch_size=2048):
            for rec in batch.to_pylist():
                yield i, rec
                i += 1
    except (OSError, ValueError) as e:
        yield i, Break(-1, f"unreadable Parquet data after row {i} ({e})")
