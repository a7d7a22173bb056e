"""Input/output and run-folder measurements: ingest throughput local vs S3 (`readers_throughput`), peak RSS
under the memory budget on long-CoT rows (`longcot_rss`), the demo pipeline's wall time, re-run and resume
(`demo_walltime`)."""
