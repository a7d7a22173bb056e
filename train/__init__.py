"""Training: curated shards in, checkpoints out (SFT, GPPO RL, evaluation)."""
