"""Other stages' sampling through the generate stage: the generation interface the difficulty stage uses to
sample a reference model on the stage's executor (`RunnerGenerator`)."""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from cotforge.curate.generate.config import GenerateConfig
from cotforge.curate.generate.stage import public_config, run

log = logging.getLogger(__name__)


@dataclass
class Sampled:
    """One response as the generation interface returns it (`.text`; "" when the request failed)."""

    text: str
    finish_reason: str | None


class RunnerGenerator:
    """The generation interface the difficulty stage samples with (`generate(prompts, sampling)` ->
    one list of responses per prompt), run as a generate stage: datatrove's runner on `executor` (so a
    large pool's pass rates run on Slurm/Ray, with a server per task or an endpoint). Each call is one
    stage run into `work/batch-<i>`; a batch already published with the same prompts and settings is read
    back instead of sampled again, so a rerun after a failure resumes batch by batch."""

    def __init__(self, base: GenerateConfig, work: Path, executor: Any, ctx_fields: dict[str, Any] | None = None):
        self.base, self.work, self.executor = base, Path(work), executor
        self.ctx_fields = ctx_fields or {}
        self.calls = 0

    def generate(self, prompts: list[list[dict[str, str]]], sampling: Any) -> list[list[Sampled]]:
        from cotforge.curate.context import StageContext
        from cotforge.curate.io.inputs import resolve_inputs

        cfg = dataclasses.replace(self.base, n=sampling.n, temperature=sampling.temperature, top_p=sampling.top_p,
                                  max_tokens=sampling.max_new_tokens, seed=sampling.seed, on_truncated="flag")
        folder = self.work / f"batch-{self.calls:05d}"
        self.calls += 1
        folder.mkdir(parents=True, exist_ok=True)
        lines = []
        for i, msgs in enumerate(prompts):
            system = next((m["content"] for m in msgs if m["role"] == "system"), None)
            user = [m["content"] for m in msgs if m["role"] == "user"][-1]
            lines.append(json.dumps({"id": f"q{i:07d}", "prompt": user, "source": "sampled", "domain": "other",
                                     "meta": json.dumps({"system": system} if system else {})}))
        src = folder / "prompts.jsonl"
        text = "\n".join(lines) + "\n"
        out = folder / "out"
        stats_file = out / "stats.json"
        done = (stats_file.exists() and src.exists() and src.read_text() == text
                and json.loads(stats_file.read_text()).get("config") == public_config(cfg))
        if not done:
            src.write_text(text)
            ctx = StageContext(out_dir=out, inputs=resolve_inputs([str(src)]), executor=self.executor,
                               **self.ctx_fields)
            run(cfg, ctx)
        got: dict[str, dict[int, Sampled]] = {}
        for part in ("kept", "removed"):
            for f in sorted((out / part).glob("*.parquet")):
                for r in pq.read_table(f, columns=["prompt_id", "sample_index", "response",
                                                   "finish_reason"]).to_pylist():
                    if r["prompt_id"] is not None:
                        got.setdefault(r["prompt_id"], {})[r["sample_index"]] = Sampled(r["response"] or "",
                                                                                        r["finish_reason"])
        return [[got.get(f"q{i:07d}", {}).get(k, Sampled("", None)) for k in range(cfg.n)]
                for i in range(len(prompts))]
