"""Rows in and out: readers (file formats, field mapping), ingest into work shards, stage inputs and the stage writer."""
