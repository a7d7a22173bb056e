"""Benchmark decontamination: index of benchmark n-grams, matching rules, the datatrove filter stage and its report."""
