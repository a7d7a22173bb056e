"""cotforge's measurements: run from the repository root as modules (`python -m bench.dedup.quality ...`).

Not part of the installed wheel (pyproject's package list names cotforge's packages only). Layout:
measurements per area (`dedup/`, `decontam/`, `verify/`, `train/`, `io/`, `select/`), builders of shipped
package data and test data (`builders/`), GPU / infrastructure scripts (`gpu/`), and the frozen labelled sets
with their recorded digests (`frozen.py`, `records/`): `python -m bench.frozen --check` rebuilds every frozen
set and compares its digest with the recorded one.
"""
