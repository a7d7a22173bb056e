"""Schema rows <-> datatrove Documents: the reader/writer adapters (a row becomes a Document with
`text = prompt`, `id = id` and every other column in `metadata`), the work-shard reader and writer built on
them, and the spaCy-free word tokenizer datatrove steps use."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from datatrove.pipeline.readers import ParquetReader
from datatrove.pipeline.writers import ParquetWriter
from datatrove.utils.word_tokenizers import WordTokenizer

from cotforge.curate.text.normalize import DEFAULT_NORM, NormConfig, normalize


class NormTokenizer(WordTokenizer):
    """Word tokenizer for datatrove steps: cotforge's normalisation, then whitespace split.

    Replaces spaCy (datatrove's default for English) and keeps numbers, unlike datatrove's
    default text normalisation."""

    def __init__(self, norm: NormConfig = DEFAULT_NORM):
        super().__init__("xx")
        self.norm = norm

    def word_tokenize(self, text: str) -> list[str]:
        out = normalize(text, self.norm)
        return out.split(" ") if out else []

    def sent_tokenize(self, text: str) -> list[str]:
        return [text]

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        return [(0, len(text))]



def row_to_doc(self, data: dict, path: str, id_in_file: int | str) -> dict:
    """ParquetReader adapter: a schema row -> Document fields (text = prompt)."""
    meta = {k: v for k, v in data.items() if k not in ("prompt", "id")}
    return {"text": data["prompt"], "id": data["id"], "metadata": meta}


def doc_to_row(self, document) -> dict:
    """ParquetWriter adapter: Document -> schema row (unknown metadata keys are dropped by the schema)."""
    row = dict(document.metadata)
    row["id"] = document.id
    row["prompt"] = document.text
    if "filter_reason" in row and not row.get("reason"):
        row["reason"] = row.pop("filter_reason")
    return row



def schema_reader(folder: Path, batch_size: int = 1000) -> ParquetReader:
    """Reads work shards back as Documents, one file per task, in file order (`batch_size` rows at a time)."""
    return ParquetReader(str(folder), adapter=row_to_doc, glob_pattern="*.parquet", batch_size=batch_size)


def schema_writer(folder: Path, schema: pa.Schema, batch_size: int = 1000) -> ParquetWriter:
    """Writes Documents as schema rows, one file per rank (`NNNNN.parquet`), `batch_size` rows per batch."""
    return ParquetWriter(str(folder), output_filename="${rank}.parquet", adapter=doc_to_row, schema=schema,
                         compression="zstd", max_file_size=-1, batch_size=batch_size)


