"""Teacher responses for prompts through datatrove's inference runner (`stage.run`), configured by
`config.GenerateConfig`; `hf_server` is a small OpenAI-compatible server for CPU runs."""
