"""Training data: SFT rows rendered with chat templates (assistant-only labels) and RL prompts from the mix's rows."""
