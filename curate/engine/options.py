"""Options of the Slurm and Ray executors, validated by name.

`ExecutorConfig.options` (YAML `executor.options:`, or `--executor-option KEY=VALUE` on the command line) is
a flat mapping; its keys are the fields below for the chosen executor. A misspelt key is a ValueError with a
did-you-mean (`options.partiton: unknown Slurm option (did you mean 'partition'?)`), a value of the wrong type
names the key, and command-line strings are converted to the field's type ("4" -> 4, "true" -> True).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import sys
import typing
from dataclasses import dataclass, field
from typing import Any


@dataclass
class SlurmOptions:
    """sbatch settings of `executor: slurm` (datatrove's SlurmPipelineExecutor)."""

    partition: str = field(default="cpu", metadata={"help": "Slurm partition (sbatch --partition)."})
    time: str = field(default="04:00:00", metadata={"help": "Time limit per job (sbatch --time, e.g. 04:00:00)."})
    cpus_per_task: int = field(default=1, metadata={"help": "CPUs per datatrove task (sbatch --cpus-per-task)."})
    mem_per_cpu_gb: int = field(default=2, metadata={
        "help": "Memory per CPU in GB (sbatch --mem-per-cpu); keep it above the stage's memory budget."})
    qos: str | None = field(default=None, metadata={"help": "Quality of service (sbatch --qos); unset: the default."})
    account: str | None = field(default=None, metadata={"help": "Account to charge (sbatch --account)."})
    env_command: str | None = field(default=None, metadata={
        "help": "Shell line run before each job to set up Python, e.g. 'source /shared/venv/bin/activate' or "
                "'module load python; conda activate cf'. Unset: activate the virtualenv running this command."})
    venv_path: str | None = field(default=None, metadata={
        "help": "Virtualenv folder (or its bin/activate) each job activates; an alternative to env_command."})
    logs: str | None = field(default=None, metadata={
        "help": "Folder for Slurm's job output files (must be visible from the compute nodes); "
                "unset: slurm_logs/ inside the step's datatrove logging folder."})
    job_name: str | None = field(default=None, metadata={
        "help": "Prefix of the job names (a step's name and a hash of its work folder are appended)."})
    gpus_per_task: int = field(default=0, metadata={"help": "GPUs per task (sbatch --gpus)."})
    max_array_size: int = field(default=1001, metadata={
        "help": "Largest job array the cluster accepts (MaxArraySize); more tasks are split over several arrays."})
    requeue: bool = field(default=True, metadata={"help": "Let Slurm requeue a preempted job (sbatch --requeue)."})
    srun: bool = field(default=True, metadata={"help": "Start each task with srun inside the job."})
    tasks_per_job: int | None = field(default=None, metadata={
        "help": "datatrove tasks one array job runs one after the other. Unset: spread the tasks over `workers` "
                "jobs (a job start costs seconds; a step of many small tasks should not pay it per task); "
                "1: one job per task (datatrove's default). `time` must cover a job's tasks."})
    sbatch_args: dict[str, Any] = field(default_factory=dict, metadata={
        "help": "Further sbatch directives, e.g. {constraint: cpu, exclusive: ''}."})

    def __post_init__(self) -> None:
        for name in ("cpus_per_task", "mem_per_cpu_gb", "max_array_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"options.{name}: must be >= 1 (got {getattr(self, name)})")
        if self.tasks_per_job is not None and self.tasks_per_job < 1:
            raise ValueError(f"options.tasks_per_job: must be >= 1 or unset (got {self.tasks_per_job})")
        if self.gpus_per_task < 0:
            raise ValueError(f"options.gpus_per_task: must be >= 0 (got {self.gpus_per_task})")
        if self.env_command and self.venv_path:
            raise ValueError("options.env_command and options.venv_path: give one of them, not both")

    def env_line(self) -> str | None:
        """The shell line each job runs first: env_command, venv_path's activate, else the current virtualenv."""
        if self.env_command:
            return self.env_command
        if self.venv_path:
            p = self.venv_path.rstrip("/")
            return f"source {p if p.endswith('activate') else p + '/bin/activate'}"
        return current_venv_line()


@dataclass
class RayOptions:
    """Cluster and resources of `executor: ray` (datatrove's RayPipelineExecutor)."""

    address: str | None = field(default=None, metadata={
        "help": "Ray cluster to join: 'auto', 'HOST:6379' or 'ray://HOST:10001'. Unset: $RAY_ADDRESS, else a "
                "local Ray instance started for this process. A Ray >= 2.60 cluster started with token auth also "
                "needs RAY_AUTH_MODE=token (and the token, see Ray's docs) in the environment."})
    cpus_per_task: int = field(default=1, metadata={"help": "CPUs Ray reserves per task."})
    mem_per_cpu_gb: float = field(default=2.0, metadata={
        "help": "Memory Ray reserves per CPU, in GB (a scheduling reservation; the memory budget bounds use)."})
    gpus_per_task: int = field(default=0, metadata={"help": "GPUs Ray reserves per task."})
    jobs: int | None = field(default=None, metadata={
        "help": "Most Ray jobs one step launches; a job runs its share of tasks one after the other (each in a "
                "fresh process), so a step with many small tasks does not start a Ray worker per task. "
                "Unset: `workers`."})
    num_cpus: int | None = field(default=None, metadata={
        "help": "CPUs of the local Ray instance (only when no address is given); unset: `workers`."})
    time_s: int | None = field(default=None, metadata={"help": "Time limit per Ray job in seconds (none: no limit)."})

    def __post_init__(self) -> None:
        if self.cpus_per_task < 1:
            raise ValueError(f"options.cpus_per_task: must be >= 1 (got {self.cpus_per_task})")
        if self.mem_per_cpu_gb <= 0:
            raise ValueError(f"options.mem_per_cpu_gb: must be > 0 (got {self.mem_per_cpu_gb})")
        for name in ("jobs", "num_cpus", "time_s"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ValueError(f"options.{name}: must be >= 1 or unset (got {v})")


OPTION_CLASSES: dict[str, type | None] = {"local": None, "slurm": SlurmOptions, "ray": RayOptions}


def current_venv_line() -> str | None:
    """`source <venv>/bin/activate` for the virtualenv this process runs in (None outside one)."""
    if sys.prefix != sys.base_prefix and os.path.exists(os.path.join(sys.prefix, "bin", "activate")):
        return f"source {os.path.join(sys.prefix, 'bin', 'activate')}"
    return None


def parse_options(executor: str, options: dict[str, Any]) -> SlurmOptions | RayOptions | None:
    """`options` checked against the executor's option fields (did-you-mean on a misspelt key) and built."""
    cls = OPTION_CLASSES.get(executor)
    if cls is None:
        if options:
            raise ValueError(f"options: the local executor takes no options (got {', '.join(sorted(options))}); "
                             "they are for executor slurm or ray")
        return None
    kind = "Slurm" if cls is SlurmOptions else "Ray"
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for key, value in options.items():
        if key not in fields:
            hint = difflib.get_close_matches(str(key), list(fields), n=1)
            did = f"did you mean {hint[0]!r}? " if hint else ""
            raise ValueError(f"options.{key}: unknown {kind} option ({did}known: {', '.join(sorted(fields))})")
        values[key] = _coerce(key, value, hints[key])
    return cls(**values)


def _coerce(key: str, value: Any, tp: Any) -> Any:
    """A YAML or command-line value converted to the field's type; a ValueError naming the key otherwise."""
    args = typing.get_args(tp)
    optional = type(None) in args
    base = next((a for a in args if a is not type(None)), tp) if args and typing.get_origin(tp) is not dict else tp
    if value is None or (optional and isinstance(value, str) and value.lower() in ("none", "null", "")):
        if optional:
            return None
        raise ValueError(f"options.{key}: a value is required")
    origin = typing.get_origin(base) or base
    try:
        if origin is bool:
            if isinstance(value, str) and value.lower() in ("true", "yes", "1", "false", "no", "0"):
                return value.lower() in ("true", "yes", "1")
            if isinstance(value, bool):
                return value
        elif origin is int and not isinstance(value, bool):
            if isinstance(value, int) or (isinstance(value, str) and value.strip().lstrip("-").isdigit()):
                return int(value)
        elif origin is float and not isinstance(value, bool):
            return float(value)
        elif origin is str:
            return str(value)
        elif origin is dict and isinstance(value, dict):
            return dict(value)
    except ValueError:
        pass
    raise ValueError(f"options.{key}: expected {getattr(origin, '__name__', origin)}, got {value!r}")
