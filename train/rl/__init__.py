"""RL: the GPPO trainer (a TRL GRPOTrainer subclass), the loss family (pure functions) and verifier rewards."""
