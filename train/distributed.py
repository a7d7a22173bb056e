"""What a multi-process training launch really does, checked before training starts (SFT and RL).

Several processes train one model when a launcher starts them (`accelerate launch`, `torchrun`) and each
joins the process group. On CPU that is gloo data parallelism; on GPUs NCCL (DDP, FSDP, DeepSpeed):

    # CPU, 2 processes (gloo). NOTE: `accelerate launch --cpu --num_processes 2` starts ONE process
    # (accelerate's CPU launcher); `--multi_gpu` is the flag that starts N gloo processes on a CPU machine.
    python -m accelerate.commands.launch --multi_gpu --num_processes 2 --num_machines 1 --mixed_precision no \
        --dynamo_backend no -m cotforge.pipelines.cli train sft --config sft.yaml --set use_cpu=true
    # GPUs (NCCL): the same with the GPU count, or --config_file pipelines/accelerate/{fsdp2,deepspeed_zero3}.yaml

Keep the global batch (processes x per-device batch x gradient accumulation) to reproduce a 1-process run
(tests/test_multiprocess.py: 2 gloo processes give the 1-process SFT losses).

Launches that would silently do something else are refused (`DistributedLaunchError`):
- N processes launched (WORLD_SIZE=N) but the trainer sees one (distributed type NO): N independent
  trainers on the same data, all writing the same output_dir (e.g. an FSDP config with `use_cpu: false` on a
  machine without CUDA);
- FSDP or DeepSpeed asked for (accelerate config / env, or the trainer's `fsdp` / `deepspeed`) but the run
  would be plain DDP (MULTI_CPU on CPU: accelerate drops the FSDP plugin without sharding anything).
Not detectable from inside the process: `accelerate launch --cpu --num_processes N` (no trace of N reaches it).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# accelerate turns these into FSDP / DeepSpeed (AcceleratorState); NO and MULTI_CPU drop the plugin silently
NO_SHARDING = ("NO", "MULTI_CPU")
CPU_HOWTO = ("for data parallelism on CPU launch `python -m accelerate.commands.launch --multi_gpu "
             "--num_processes N ...` with use_cpu: true (gloo)")


class DistributedLaunchError(RuntimeError):
    """A multi-process launch that would not train as launched (see the module docstring)."""


@dataclass(frozen=True)
class LaunchReport:
    """What the launch is: accelerate's distributed type, the process count and backend, this rank."""

    distributed_type: str
    num_processes: int
    backend: str | None
    rank: int

    def describe(self) -> str:
        """One log line: e.g. `MULTI_CPU, 2 processes (gloo), rank 0`."""
        what = "1 process" if self.num_processes == 1 else f"{self.num_processes} processes"
        return f"{self.distributed_type}, {what} ({self.backend or 'no process group'}), rank {self.rank}"


def _flag(env: Mapping[str, str], key: str) -> bool:
    return env.get(key, "false").strip().lower() in ("1", "true", "yes")


def requested_sharding(env: Mapping[str, str], fsdp: Any = None, deepspeed: Any = None) -> str | None:
    """`FSDP` / `DEEPSPEED` when the launch or the trainer arguments ask for it, else None."""
    if _flag(env, "ACCELERATE_USE_FSDP") or fsdp:
        return "FSDP"
    if _flag(env, "ACCELERATE_USE_DEEPSPEED") or deepspeed:
        return "DEEPSPEED"
    return None


def check_launch(distributed_type: str, num_processes: int, backend: str | None, rank: int = 0,
                 env: Mapping[str, str] | None = None, fsdp: Any = None, deepspeed: Any = None,
                 output_dir: str = "output_dir") -> LaunchReport:
    """Raise DistributedLaunchError for a launch that would silently fall back; else describe it."""
    env = os.environ if env is None else env
    kind = str(getattr(distributed_type, "value", distributed_type))
    world = int(env.get("WORLD_SIZE", "1") or 1)
    if world > 1 and num_processes != world:
        raise DistributedLaunchError(
            f"{world} processes were launched (WORLD_SIZE={world}) but this one trains alone (distributed type "
            f"{kind}, {num_processes} process): {world} independent trainers would train on the same data and all "
            f"write {output_dir}. On a machine without CUDA set use_cpu: true (gloo process group); on GPUs check "
            "that CUDA is visible to every process")
    sharding = requested_sharding(env, fsdp, deepspeed)
    if sharding and kind in NO_SHARDING:
        raise DistributedLaunchError(
            f"{sharding} was asked for (accelerate config or trainer arguments) but this run would be {kind} with "
            f"{num_processes} process(es): nothing would be sharded. {sharding} needs CUDA GPUs; {CPU_HOWTO}")
    report = LaunchReport(kind, num_processes, backend, rank)
    if num_processes > 1 or world > 1:
        log.info("distributed training: %s", report.describe())
    return report


def check_training_args(args: Any) -> LaunchReport:
    """`check_launch` for a transformers TrainingArguments (SFTConfig, GRPOConfig): its accelerate state."""
    state = args.distributed_state
    return check_launch(state.distributed_type, state.num_processes, getattr(state, "backend", None),
                        state.process_index, fsdp=getattr(args, "fsdp", None),
                        deepspeed=getattr(args, "deepspeed", None), output_dir=str(args.output_dir))


def finish_distributed() -> None:
    """Tear down the process group at the end of a launched training command. A gloo or NCCL group left for the
    interpreter's exit can abort a process that finished its work ("terminate called without an active
    exception", exit -6), which a launcher reports as a failed run. Every process first waits for the others
    (a process tearing its group down while another still uses the connections is such an abort: seen once in
    ~12 two-process runs under load without the barrier). No-op without a process group."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
