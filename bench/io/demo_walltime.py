"""Wall time of the demo pipeline: a fresh run (per stage), a re-run that skips every stage, and a run
killed after one stage and resumed; ratios are against the fresh run measured here.

    python -m bench.io.demo_walltime                 # the README's demo (default sizes)
    python -m bench.io.demo_walltime --profile small # the shortened demo the tests run
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from bench.paths import REPO


def timed(fn):
    """(result, wall seconds, CPU seconds of this process and its children)."""
    def cpu() -> float:
        s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

    t0, c0 = time.time(), cpu()
    out = fn()
    return out, time.time() - t0, cpu() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipe", default=str(REPO / "pipelines" / "demo.yaml"))
    ap.add_argument("--profile", default=None, help="e.g. small")
    ap.add_argument("--kill-after", default="dedup", help="stage after which the resumed run is interrupted")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="KEY=VALUE recipe override")
    ap.add_argument("--keep", action="store_true", help="keep the run folders")
    args = ap.parse_args()

    import logging

    logging.basicConfig(level=logging.WARNING)
    from cotforge.pipelines.config import load_recipe
    from cotforge.pipelines.runner import run_recipe

    recipe = load_recipe(args.recipe, [*args.overrides, "publish_cards=null"], args.profile)
    tmp = Path(tempfile.mkdtemp(prefix="demo_walltime-"))
    try:
        fresh, wall, cpu = timed(lambda: run_recipe(recipe, tmp / "fresh"))
        print(f"fresh run: {wall:.1f} s wall, {cpu:.1f} s CPU (load average {os.getloadavg()[0]:.1f}, "
              f"{os.cpu_count()} cores)")
        for name, entry in fresh.manifest["stages"].items():
            print(f"  {name:<14} {entry.get('wall_s', 0):7.1f} s  ({entry.get('wall_s', 0) / wall:5.1%})")
        _, wall_skip, _ = timed(lambda: run_recipe(recipe, tmp / "fresh"))
        print(f"re-run, every stage complete: {wall_skip:.1f} s ({wall_skip / wall:.2f}x the fresh run)")

        def kill(stage: str) -> None:
            if stage == args.kill_after:
                raise KeyboardInterrupt

        t0 = time.time()
        try:
            run_recipe(recipe, tmp / "killed", hooks={"after": kill})
        except KeyboardInterrupt:
            pass
        wall_killed = time.time() - t0
        resumed, wall_resume, _ = timed(lambda: run_recipe(recipe, tmp / "killed"))
        skipped = [n for n, s in resumed.statuses.items() if s == "skipped"]
        print(f"killed after {args.kill_after} at {wall_killed:.1f} s; resume took {wall_resume:.1f} s "
              f"({wall_resume / wall:.2f}x the fresh run; skipped {', '.join(skipped)})")
        print(f"killed + resumed total: {(wall_killed + wall_resume) / wall:.2f}x the fresh run")
    finally:
        if args.keep:
            print(f"runs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
