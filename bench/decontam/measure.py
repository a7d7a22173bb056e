"""Decontamination: quality and speed against a lean Python 8-gram baseline, measured in the same run.

Quality (`--quality`): recall and false-positive rate per form on the frozen contamination sets (bench/frozen.py:
decontam_first, decontam_forms and decontam_forms2: tuning data;
its forms3: the held-out set, counts only), parts reported apart; the held-out digests are checked against
bench/records/decontam_heldout.json (recorded before tuning). The baseline is
open-r1's rule: a set of lower-cased whitespace-split word 8-grams of the benchmark problems, a text is
flagged when it shares any.

Speed (`--speed short|longcot|both`): the corpora of bench/decontam/corpora.py, each method in a fresh
interpreter, timed from reading the input Parquet to writing the result:
- cotforge: the decontaminate stage (`run_stage`) with its defaults (whole responses, fuzzy tier on, 2 workers), all shared
  benchmarks; ingest, index build (or its copy from the cache of built indexes: `--index-cache cold|warm|both`,
  the table says which), datatrove tasks, publishing and report included;
- baseline: one process: load the same benchmarks, build the 8-gram set, read the Parquet, for each row the
  set of 8-grams of the prompt and of the whole response (lower-case, split) and one set intersection,
  then write kept / removed Parquet (zstd) like the stage.
Peak RSS: the main process's VmHWM, the largest child's ru_maxrss (which a child started by fork + exec inherits
from the main process at that moment: datatrove's forkserver starts after ingest) and the largest matcher
task's own VmHWM (stats.json `timings.task_peak_rss_mb`). Load average is printed.
Run it under `flock /work/coord/cpu.lock`.

    python -m bench.decontam.measure --quality
    python -m bench.decontam.measure --speed both
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.child import child_result  # noqa: E402
from bench.decontam.corpora import ensure_corpora  # noqa: E402
from bench.frozen import FROZEN  # noqa: E402
from bench.paths import SHARED  # noqa: E402
from cotforge.curate.decontam.config import DecontamConfig  # noqa: E402
from cotforge.curate.decontam.index import DecontamIndex  # noqa: E402
from cotforge.curate.decontam.match import Matcher  # noqa: E402


class OpenR1Baseline:
    """open-r1 decontaminate.py: lower-case, whitespace split, any shared word 8-gram flags the text."""

    def __init__(self, problems: list[str], n: int = 8):
        self.n = n
        self.grams: set[str] = set()
        for p in problems:
            w = p.lower().split()
            self.grams.update(" ".join(w[i:i + n]) for i in range(len(w) - n + 1))

    def flag(self, text: str | None) -> bool:
        """The whole text's 8-gram set against the benchmark set (no early exit: equal work)."""
        if not text:
            return False
        w = text.lower().split()
        n = self.n
        return not self.grams.isdisjoint({" ".join(w[i:i + n]) for i in range(len(w) - n + 1)})


# --------------------------------------------------------------------------- quality


def predict(matcher: Matcher, cfg: DecontamConfig, examples, batch: int = 512) -> list[bool]:
    """cotforge's verdict per labelled example (on the example's own side)."""
    out: list[bool] = []
    for s in range(0, len(examples), batch):
        ex = examples[s:s + batch]
        prompts = [e.text if e.side == "prompt" else "" for e in ex]
        responses = [e.text if e.side == "response" else None for e in ex]
        for e, ms in zip(ex, matcher.match_batch(prompts, responses, cfg), strict=True):
            out.append(any(m.side == e.side for m in ms))
    return out


def score(examples, preds) -> dict:
    """Recall, false-positive rate, and per-kind counts."""
    tp = sum(1 for e, p in zip(examples, preds, strict=True) if e.label and p)
    pos = sum(e.label for e in examples)
    fp = sum(1 for e, p in zip(examples, preds, strict=True) if not e.label and p)
    neg = len(examples) - pos
    kinds: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0])
    for e, p in zip(examples, preds, strict=True):
        kinds[(e.label, e.kind)][0] += int(p)
        kinds[(e.label, e.kind)][1] += 1
    return {"recall": tp / max(pos, 1), "fpr": fp / max(neg, 1), "tp": tp, "pos": pos, "fp": fp, "neg": neg,
            "kinds": dict(kinds)}


def quality(show_errors: int) -> None:
    """Per-form recall / false positives of every part. first_set and forms_set (both halves) are tuning data
    since round 2 of issue 18 (their held-out halves' misses were read); so is forms2_set (round 2's held-out
    set, measured once and then read); forms3_set is the held-out part: only its counts are printed, never its
    examples."""
    cache: dict = {}
    for fs in (FROZEN[n] for n in ("decontam_first", "decontam_forms", "decontam_forms2", "decontam_forms3")):
        name = fs.record.key
        benchmarks, examples = fs.build(SHARED, cache)
        digest = fs.digest((benchmarks, examples))
        ok = digest == fs.record.read()
        role = json.loads(fs.record.path.read_text())[name].get("role", "")
        print(f"\n## {name} ({role}): {len(examples)} examples; held-out digest "
              f"{'matches' if ok else 'DIFFERS FROM'} the recorded one ({digest[:16]}...)")
        cfg = DecontamConfig(benchmarks=list(benchmarks))
        matcher = Matcher(DecontamIndex.build(benchmarks, cfg, tempfile.mkdtemp(prefix="decontam_q_")))
        base = OpenR1Baseline([it.problem for items in benchmarks.values() for it in items])
        for split in ("tuning", "heldout"):
            ex = [e for e in examples if e.split == split]
            if not ex:
                continue
            part = {"forms3_set": "held-out", "forms2_set": "round 2's held-out set (measured once, read: tuning now)"
                    }.get(name, "tuning" if split == "tuning" else "old held-out half (read in round 1: tuning now)")
            so, sb = score(ex, predict(matcher, cfg, ex)), score(ex, [base.flag(e.text) for e in ex])
            print(f"\n{part}: cotforge recall {so['recall']:.4f} ({so['tp']}/{so['pos']}), false positives "
                  f"{so['fpr']:.2%} ({so['fp']}/{so['neg']}); baseline recall {sb['recall']:.4f}, false positives "
                  f"{sb['fpr']:.2%} ({sb['fp']}/{sb['neg']})")
            print("\n| form | label | n | cotforge flagged | rate | baseline flagged |\n|---|---:|---:|---:|---:|---:|")
            for (lab, kind), (k, n) in sorted(so["kinds"].items(), key=lambda x: (-x[0][0], x[0][1])):
                print(f"| {kind} | {lab} | {n} | {k} | {k / n:.1%} | {sb['kinds'][(lab, kind)][0]} |")
            if show_errors and name != "forms3_set":
                preds = predict(matcher, cfg, ex)
                errs = [e for e, p in zip(ex, preds, strict=True) if bool(e.label) != p][:show_errors]
                for e in errs:
                    print(f"- {'FN' if e.label else 'FP'} {e.kind} {e.benchmark} {e.item_id}: {e.text[:140]!r}")


# --------------------------------------------------------------------------- speed (subprocesses)


def _peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM: Linux carries ru_maxrss across fork + exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_baseline(path: str, out: str) -> dict:
    """Load benchmarks, build the 8-gram set, read the Parquet, flag each row, write kept/removed Parquet."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from cotforge.curate.core.benchmarks import load_benchmarks, local_benchmark_names

    names = local_benchmark_names(SHARED / "benchmarks")
    bm = load_benchmarks(names, SHARED / "benchmarks")
    base = OpenR1Baseline([it.problem for items in bm.values() for it in items])
    t = pq.read_table(path)
    flags = [base.flag(p) | base.flag(r) for p, r in zip(t.column("prompt").to_pylist(),
                                                          t.column("response").to_pylist(), strict=True)]
    m = pa.array(flags)
    pq.write_table(t.filter(pc.invert(m)), Path(out) / "kept.parquet", compression="zstd")
    pq.write_table(t.filter(m), Path(out) / "removed.parquet", compression="zstd")
    return {"rows": t.num_rows, "flagged": int(sum(flags))}


def shards_digest(out: Path) -> str:
    """sha256 of a stage folder's kept/ and removed/ shards (names and bytes), first 12 hex digits."""
    import hashlib

    h = hashlib.sha256()
    for part in ("kept", "removed"):
        for f in sorted((out / part).glob("*.parquet")):
            h.update(f"{part}/{f.name}".encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:12]


def _ours_cfg(prompt_cache: bool, batch_bytes: int = 0, text_kernel: str = "auto") -> DecontamConfig:
    from cotforge.curate.core.benchmarks import local_benchmark_names

    names = local_benchmark_names(SHARED / "benchmarks")
    return DecontamConfig(benchmarks=names, benchmarks_dir=str(SHARED / "benchmarks"), prompt_cache=prompt_cache,
                          text_kernel=text_kernel, **({"batch_bytes": batch_bytes} if batch_bytes else {}))


def drop_cached_index(cfg: DecontamConfig) -> None:
    """Remove this config's cached index build (decontam/indexcache.py): the next stage run builds it (cold)."""
    from cotforge.curate.decontam import indexcache
    from cotforge.curate.decontam.stage import load_config_benchmarks
    from cotforge.curate.text.unitables import cache_dir

    key = indexcache.index_key(load_config_benchmarks(cfg)[0], cfg)
    shutil.rmtree(cache_dir() / "decontam_index" / key, ignore_errors=True)


def run_ours(path: str, out: str, workers: int, prompt_cache: bool, batch_bytes: int = 0,
             text_kernel: str = "auto") -> dict:
    from cotforge.curate.engine import ExecutorConfig
    from cotforge.curate.io.readers import InputSpec
    from cotforge.pipelines.stages import run_stage

    cfg = _ours_cfg(prompt_cache, batch_bytes, text_kernel)
    stats = run_stage("decontaminate", [InputSpec(path, "corpus")], Path(out) / "o", cfg, ExecutorConfig(workers=workers))
    return {"rows": stats["rows_in"], "flagged": stats["removed"], "timings": stats.get("timings", {}),
            "shards_sha256": shards_digest(Path(out) / "o"),
            "rss_task_mb": stats.get("timings", {}).get("task_peak_rss_mb"),
            "report_json_bytes": (Path(out) / "o" / "contamination_report.json").stat().st_size}


def _child(method: str, path: str, workers: int, prompt_cache: bool, batch_bytes: int = 0,
           text_kernel: str = "auto", index_cold: bool = False) -> None:
    if method == "ours" and index_cold:  # before the clock starts
        drop_cached_index(_ours_cfg(prompt_cache, batch_bytes, text_kernel))
    t = time.time()
    with tempfile.TemporaryDirectory() as d:
        res = (run_ours(path, d, workers, prompt_cache, batch_bytes, text_kernel) if method == "ours"
               else run_baseline(path, d))
    res["wall_s"] = time.time() - t
    res["rss_self_mb"] = _peak_rss_mb()
    res["rss_children_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print("RESULT " + json.dumps(res))


def measure(method: str, path: Path, workers: int = 2, prompt_cache: bool = True, batch_bytes: int = 0,
            text_kernel: str = "auto", index_cold: bool = False) -> dict:
    """One method in a fresh interpreter; its result with wall time and peak RSS."""
    args = ["bench.decontam.measure", "--child", method, str(path), "--workers", str(workers),
            "--text-kernel", text_kernel] + (["--index-cold"] if index_cold else [])
    args += ([] if prompt_cache else ["--no-prompt-cache"]) + (["--batch-bytes", str(batch_bytes)] if batch_bytes else [])
    return child_result(args, method)


def speed(which: str, rows_short: int, rows_long: int, old_batches: bool = False,
          kernels: tuple[str, ...] = ("auto",), cache_off: bool = True, index_cache: str = "warm") -> None:
    corpora = ensure_corpora(rows_short=rows_short, rows_long=rows_long,
                             which=("short", "longcot", "short_clean") if which == "all" else (
                                 ("short", "longcot") if which == "both" else (which,)))
    print("| corpus | rows | method | wall s | rows/s | flagged | speed-up | peak RSS main / largest child / largest "
          "matcher task MB | stage s: index / ingest / match / collect / report | shards sha256 | load |")
    print("|---|---:|---|---:|---:|---:|---:|---|---|---|---|")
    for name, path in corpora.items():
        base = measure("baseline", path)
        load_b = os.getloadavg()
        runs = []
        for k in kernels:
            label = f"cotforge (defaults, 2 workers{'' if k == 'auto' else ', text_kernel=' + k}"
            if index_cache in ("cold", "both"):
                runs.append((label + ", index built)", measure("ours", path, text_kernel=k, index_cold=True)))
            if index_cache in ("warm", "both"):
                runs.append((label + ")", measure("ours", path, text_kernel=k)))
        if name.startswith("short") and cache_off:
            runs.append(("cotforge, prompt cache off", measure("ours", path, prompt_cache=False)))
        if old_batches:
            runs.append(("cotforge, 8 MiB batches (round 1)", measure("ours", path, batch_bytes=8 << 20)))
        load_o = os.getloadavg()
        print(f"| {name} | {base['rows']} | baseline (1 process) | {base['wall_s']:.1f} | "
              f"{base['rows'] / base['wall_s']:,.0f} | {base['flagged']} | 1.0x | {base['rss_self_mb']:.0f} | | | "
              f"{load_b[0]:.2f} |")
        for label, r in runs:
            t = r.get("timings", {})
            steps = " / ".join(f"{t.get(k + '_s', 0):.1f}" for k in ("index", "ingest", "match", "collect", "report"))
            steps += " (index cached)" if t.get("index_cached") else " (index built)"
            print(f"| {name} | {r['rows']} | {label} | {r['wall_s']:.1f} | {r['rows'] / r['wall_s']:,.0f} | "
                  f"{r['flagged']} | {base['wall_s'] / r['wall_s']:.2f}x | {r['rss_self_mb']:.0f} / "
                  f"{r['rss_children_mb']:.0f} / {r.get('rss_task_mb') or 0:.0f} | {steps} | {r.get('shards_sha256', '')} | "
                  f"{load_o[0]:.2f} |",
                  flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quality", action="store_true")
    ap.add_argument("--speed", choices=["short", "longcot", "short_clean", "both", "all"])
    ap.add_argument("--rows-short", type=int, default=200_000)
    ap.add_argument("--rows-long", type=int, default=10_000)
    ap.add_argument("--show-errors", type=int, default=0)
    ap.add_argument("--child", nargs=2, metavar=("METHOD", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--workers", type=int, default=2, help=argparse.SUPPRESS)
    ap.add_argument("--no-prompt-cache", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--batch-bytes", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--old-batches", action="store_true", help="also time 8 MiB matcher batches (round 1)")
    ap.add_argument("--text-kernel", default="auto",
                    help="comma list of DecontamConfig.text_kernel values to time (auto,python: both, in one run)")
    ap.add_argument("--no-cache-off", action="store_true", help="skip the prompt-cache-off run")
    ap.add_argument("--index-cache", choices=["warm", "cold", "both"], default="warm",
                    help="cotforge runs with the built index as the cache has it (warm: built on a miss), after "
                         "dropping it (cold), or both")
    ap.add_argument("--index-cold", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child[0], args.child[1], args.workers, not args.no_prompt_cache, args.batch_bytes,
               args.text_kernel, args.index_cold)
        return
    if not (SHARED / "MANIFEST.md").exists():
        sys.exit(f"needs {SHARED}")
    if args.quality:
        quality(args.show_errors)
    if args.speed:
        speed(args.speed, args.rows_short, args.rows_long, args.old_batches, tuple(args.text_kernel.split(",")),
              not args.no_cache_off, args.index_cache)


if __name__ == "__main__":
    main()
