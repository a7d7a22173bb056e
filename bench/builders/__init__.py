"""Builders of data that ships with cotforge or its tests (run once, output committed): the WordNet tables
(`wordnet_tables` -> curate/dedup/pairs/wordnet_*.txt.gz), the math word list (`math_words` ->
curate/dedup/pairs/math_words.txt), the math conformance suites (`math_conformance` -> tests/data/math_conformance)."""
