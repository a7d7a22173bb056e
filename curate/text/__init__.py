"""Text shared by dedup and decontamination: normalisation, vectorised word/n-gram hashing, reasoning markers."""
