"""Choosing what to train on: per-source profiles, source ranking (top-k), difficulty labels and the hard/easy policy."""
