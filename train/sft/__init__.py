"""Long-CoT SFT: the config and trainer in `trainer.py` (CotSFTConfig(SFTConfig) with TRL's SFTTrainer), rows ->
chat template and assistant-only labels in `data.py` / `render.py`, leak-checked packing in `packing.py`, model
loading and the packing probe in `model.py`."""
