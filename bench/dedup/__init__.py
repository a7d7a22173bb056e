"""Problem-level dedup measurements: quality on the frozen labelled sets (`quality`), speed and memory against
plain datasketch (`speed`), the per-source table on the shared data (`sources`); the sets' builders
(`labelled`, `fresh`, `code_set`) with their word pools (`pools`) and variant generators (`variants`)."""
