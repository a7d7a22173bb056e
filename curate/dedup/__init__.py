"""Problem-level dedup as datatrove steps: exact (prompt, response) keys, MinHash problem clusters, kept/removed split."""
