"""Scale-out machinery behind `curate/engine.py`: executor options validated by name (`options`), Slurm
(`slurm`: executors, the sbatch script, waiting for jobs), Ray (`ray`: connecting, grouped tasks), resumable
work folders (`work`), byte budgets for task and batch sizes (`budget`) and the run-folder lock (`lock`)."""
