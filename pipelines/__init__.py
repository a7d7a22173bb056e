"""End-to-end recipes, the stage runner and the root `cotforge` CLI."""
