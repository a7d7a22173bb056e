"""Decontamination measurements: quality on the frozen contamination sets and speed against a lean 8-gram
baseline (`measure`), per-step cost (`probe`, `steps`), verdict equivalence of two code versions (`equiv`),
the per-source table (`sources`); the sets' builders (`labelled`, `forms`, renderings in `render`) and the
speed corpora (`corpora`)."""
