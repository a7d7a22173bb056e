"""Curation: raw reasoning data in, clean Parquet shards out."""
