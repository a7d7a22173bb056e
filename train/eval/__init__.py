"""Evaluation: avg@k / pass@k / maj@k on the benchmark registry, scored by the same verifiers as curation."""
