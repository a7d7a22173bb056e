"""The mix: budgeted, seeded draw into SFT shards (chat messages) and RL rows (verl layout), plus the dataset card."""
