"""The semantic tier (issue 34): labelled sets of rephrasings and reworded duplicates, their scores, its cost."""
