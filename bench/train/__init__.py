"""Training measurements on CPU: SFT packing (`sft_packing`), chat-template rendering (`sft_templates`), policy
loss cost (`loss_cost`), GPPO vs PPO-clip vs CISPO on a toy task (`rl_toy`) and on a real small model
(`rl_real`, figures in `figures/`), a real CPU eval run (`eval_smoke`)."""
