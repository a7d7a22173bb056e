"""Text-kernel measurements: the compiled normaliser + hasher against the Python reference, the polars batch
path and the lean 8-gram baseline (`kernel`)."""
