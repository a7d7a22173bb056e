"""Generate-stage measurements: tokens/s through datatrove's inference runner vs the same server called
directly (`throughput`)."""
