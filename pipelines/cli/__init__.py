"""The `cotforge` command line: the root group and its curate / train / eval / run subcommands."""
