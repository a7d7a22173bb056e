"""Verifier measurements: math verdicts/s and sandboxed executions/s (`throughput`), agreement with the real
labels of the shared data (`agreement`)."""
