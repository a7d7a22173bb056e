"""The check of an LSH candidate pair of prompts, decided in `verdict.py` above its two checks: `text.py` (the
graded alignment of two normalised prompts) and `code.py` (code problems compared by sections, `sections.py`),
with the word knowledge they use (`words.py`, `lexicon.py`, `synonyms.py`, `relations.py` and their tables);
`semantic.py` is the numbers- and question-aware check of the semantic tier's embedding neighbours."""
