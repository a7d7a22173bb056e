"""The ground floor every curation layer stands on: the config loader, the row schema, the benchmark registry,
reasoning markers and plots. Imports nothing else of cotforge."""
