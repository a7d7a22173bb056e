"""GPU and infrastructure scripts: SFT / RL-step / rollout throughput at real shapes (`train_throughput`,
driven on the node by `run.sh`, wheels gathered by `wheels.sh`), vLLM vs HF generate on CPU (`vllm_cpu`,
`vllm_cpu.sh`)."""
