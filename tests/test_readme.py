"""Every command in README.md runs, as a user pastes it (issue 33: examples that run).

The README's fenced blocks are read from the file itself, so an edited or broken command fails here:
- the first `bash` block must be exactly the two setup commands. They are not run here: (1) installs cotforge
  into a fresh venv and runs the demo, which `tests/test_packaging.py` does from the built wheel (with
  `--profile small`) and `tests/test_pipeline.py` does end to end; (2) is `.ci/run`, i.e. CI itself, which
  runs this file;
- every other `bash` block runs, command by command and in README order, in one working folder that holds
  what the walkthrough says the user has: `my_data.jsonl` (written below, with a planted benchmark leak, an
  exact duplicate and wrong answers), `my_benchmarks/my_eval.jsonl`, the files of the README's `# file: NAME`
  `yaml` blocks, and `pipelines/` of this checkout (the README's commands run from the clone);
- fast checks (default run): the block kinds, the YAML blocks parse, and every `cotforge ...` command parses
  through the real click command line (an unknown command, flag or a bad value fails without running).
"""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
SETUP_COMMANDS = [
    'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[train]" && cotforge run demo',
    ".ci/run",
]
KNOWN_LANGS = {"bash", "yaml", "text"}  # a command in a ```sh / ```console block would dodge this test
LEAK = ("Find the number of ordered pairs of positive integers (m, n) such that m times n equals 360 "
        "and m is less than n.")


@dataclass(frozen=True)
class Block:
    """One fenced block of the README: its language, body and first line number."""

    lang: str
    body: str
    line: int


def fenced_blocks(text: str) -> list[Block]:
    """Every ``` fenced block of a markdown text, in order."""
    blocks, lang, start, body = [], None, 0, []
    for i, line in enumerate(text.splitlines(), 1):
        fence = re.match(r"^```(\S*)\s*$", line)
        if fence and lang is None:
            lang, start, body = fence.group(1), i, []
        elif line.startswith("```") and lang is not None:
            blocks.append(Block(lang, "\n".join(body), start))
            lang = None
        elif lang is not None:
            body.append(line)
    assert lang is None, f"README.md: unclosed ``` block from line {start}"
    return blocks


def commands(block: Block) -> list[str]:
    """The shell commands of a bash block: continuation lines joined, comment-only lines dropped."""
    out, pending = [], ""
    for raw in block.body.splitlines():
        line = raw.rstrip()
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append(re.sub(r"\s+", " ", (pending + line).strip()))
        pending = ""
    assert not pending, f"README.md line {block.line}: a command ends with a line continuation"
    return out


def _strip_comment(cmd: str) -> list[str]:
    return shlex.split(cmd, comments=True)


BLOCKS = fenced_blocks(README.read_text(encoding="utf-8"))
BASH = [b for b in BLOCKS if b.lang == "bash"]
RUN_BLOCKS = BASH[1:]


def _block_id(b: Block) -> str:
    return f"line{b.line}"


# --------------------------------------------------------------------------- fast checks


def test_first_block_is_the_two_setup_commands():
    """(1) and (2) stay exactly what the project promises; they are run by the packaging / pipeline tests
    and by CI itself (see the module docstring), not here."""
    assert BASH, "README.md has no ```bash block"
    assert commands(BASH[0]) == SETUP_COMMANDS


def test_blocks_are_known_kinds_and_yaml_parses():
    for b in BLOCKS:
        assert b.lang in KNOWN_LANGS, f"README.md line {b.line}: ```{b.lang} block (use bash, yaml or text)"
        if b.lang == "yaml":
            assert isinstance(yaml.safe_load(b.body), dict), f"README.md line {b.line}: YAML is not a mapping"
            name = _file_name(b)
            assert name is None or not Path(name).is_absolute(), f"README.md line {b.line}: absolute path"


def test_walkthrough_is_there():
    """The "curate your own data" walkthrough: a handful of curate stages on the user's own JSONL."""
    cmds = [c for b in RUN_BLOCKS for c in commands(b)]
    stages = {_strip_comment(c)[2] for c in cmds if c.startswith("cotforge curate ")}
    assert {"ingest", "decontaminate", "dedup", "verify", "select", "mix"} <= stages
    assert any("my_data.jsonl" in c for c in cmds)


def _slug(heading: str) -> str:
    """GitHub's anchor of a markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@pytest.mark.parametrize("doc", [README, *sorted((REPO / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_doc_links_resolve(doc):
    """Relative links in README.md and docs/*.md point at files (and headings) that exist."""
    text = doc.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        assert dest.exists(), f"{doc.name}: link to missing {target}"
        if anchor and dest.suffix == ".md":
            headings = [_slug(h) for h in re.findall(r"^#+ (.+)$", dest.read_text(encoding="utf-8"), re.M)]
            assert anchor in headings, f"{doc.name}: link to missing heading {target}"


def _leaf_command(argv: list[str]) -> tuple[click.Command, str, list[str]]:
    from cotforge.pipelines.cli.main import main

    cmd: click.Command = main
    name, args = "cotforge", argv[1:]
    ctx = click.Context(main, info_name="cotforge")
    while isinstance(cmd, click.Group):
        assert args and not args[0].startswith("-"), f"{' '.join(argv)}: no subcommand after {name!r}"
        sub = cmd.get_command(ctx, args[0])
        assert sub is not None, f"{' '.join(argv)}: {name} has no command {args[0]!r}"
        cmd, name, args = sub, args[0], args[1:]
        ctx = click.Context(cmd, info_name=name, parent=ctx)
    return cmd, name, args


@pytest.fixture(scope="module")
def user_folder(tmp_path_factory) -> Path:
    """A folder holding what the README's walkthrough says the user has (nothing run yet)."""
    work = tmp_path_factory.mktemp("readme_parse")
    prepare_folder(work)
    return work


COTFORGE_COMMANDS = [c for b in RUN_BLOCKS for c in commands(b) if c.startswith("cotforge ")]


COMMAND_IDS = [f"{i}-{'_'.join(_strip_comment(c)[1:3])}" for i, c in enumerate(COTFORGE_COMMANDS)]


@pytest.mark.parametrize("cmd", COTFORGE_COMMANDS, ids=COMMAND_IDS)
def test_cotforge_commands_parse(cmd, user_folder, monkeypatch):
    """Each README `cotforge ...` line goes through click's parser and type checks (nothing runs)."""
    monkeypatch.chdir(user_folder)
    cmd_obj, name, args = _leaf_command(_strip_comment(cmd))
    try:
        cmd_obj.make_context(name, list(args))
    except click.exceptions.Exit as e:  # --help / --version style flags exit 0
        assert e.exit_code == 0
    except click.ClickException as e:
        pytest.fail(f"README command does not parse: {cmd}\n{e.format_message()}")


# --------------------------------------------------------------------------- running them


def _file_name(b: Block) -> str | None:
    first = b.body.splitlines()[0] if b.body else ""
    m = re.match(r"#\s*file:\s*(\S+)\s*$", first)
    return m.group(1) if m else None


def write_user_data(work: Path) -> None:
    """The walkthrough's inputs: 40 generated word problems (every 5th answer wrong, a MATH-style `level`),
    one exact duplicate, one row that copies an item of the user's benchmark; the benchmark file itself."""
    rng = random.Random(0)
    names = ["Ava", "Ben", "Cleo", "Dan", "Eli", "Fay", "Gus", "Hana"]
    rows = []
    for i in range(40):
        a, b, who = rng.randint(2, 40), rng.randint(2, 40), names[i % len(names)]
        given = a + b if i % 5 else a + b + 1
        rows.append({"question": f"{who} has {a} apples and buys {b} more at market number {i}. "
                                 f"How many apples does {who} have now?",
                     "solution": f"<think>{who} starts with {a} and adds {b}: {a} + {b} = {a + b}.</think>\n"
                                 f"The answer is $\\boxed{{{given}}}$.",
                     "answer": str(a + b), "level": 1 + i % 5})
    rows.append(dict(rows[3]))
    leak_solution = "<think>360 has 24 divisors, so 12 pairs.</think> $\\boxed{12}$"
    rows.append({"question": LEAK, "solution": leak_solution, "answer": "12", "level": 5})
    (work / "my_data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    bench = work / "my_benchmarks"
    bench.mkdir(exist_ok=True)
    items = [{"id": "my_eval/0", "problem": LEAK, "answer": "12"},
             {"id": "my_eval/1", "problem": "What is the sum of the first 100 positive multiples of seven?",
              "answer": "35350"}]
    (bench / "my_eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in items), encoding="utf-8")


def prepare_folder(work: Path) -> None:
    """The user's data, the README's `# file:` YAML blocks and this checkout's `pipelines/` in `work`."""
    write_user_data(work)
    (work / "pipelines").symlink_to(REPO / "pipelines", target_is_directory=True)
    for b in BLOCKS:
        name = _file_name(b) if b.lang == "yaml" else None
        if name:
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_text(b.body + "\n", encoding="utf-8")


class ReadmeRun:
    """Runs the README's bash blocks in order in one folder; block i runs after blocks 1..i-1."""

    def __init__(self, work: Path):
        self.work = work
        self.done = 0
        prepare_folder(work)
        self.env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
                    "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                    "TOKENIZERS_PARALLELISM": "false"}

    def through(self, index: int) -> None:
        """Run RUN_BLOCKS[:index + 1] (those not run yet)."""
        while self.done <= index:
            for cmd in commands(RUN_BLOCKS[self.done]):
                r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=self.work, env=self.env,
                                   capture_output=True, text=True, timeout=900)
                assert r.returncode == 0, (f"README command failed (exit {r.returncode}): {cmd}\n"
                                           f"--- output (tail) ---\n{(r.stdout + r.stderr)[-4000:]}")
            self.done += 1


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory) -> ReadmeRun:
    return ReadmeRun(tmp_path_factory.mktemp("readme"))


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(RUN_BLOCKS)), ids=[_block_id(b) for b in RUN_BLOCKS])
def test_readme_block_runs(readme_run, index):
    """Each bash block after the setup block runs without error (earlier blocks first: they make its
    inputs)."""
    readme_run.through(index)


@pytest.mark.slow
def test_walkthrough_catches_the_planted_rows(readme_run):
    """The walkthrough really curates: the planted leak and duplicate are removed, wrong answers are marked,
    and the mix has SFT and RL rows."""
    walk = next(i for i, b in enumerate(RUN_BLOCKS) if "cotforge curate ingest" in b.body)
    readme_run.through(walk)
    out = readme_run.work / "out"
    decontam = json.loads((out / "decontam" / "stats.json").read_text())
    dedup = json.loads((out / "dedup" / "stats.json").read_text())
    assert decontam["removed_by_reason"] == {"contaminated": 1}, decontam
    assert dedup["removed_by_reason"] == {"exact_duplicate": 1}, dedup
    report = (out / "decontam" / "contamination_report.md").read_text()
    assert "my_eval" in report
    import pyarrow.parquet as pq

    verified = pq.read_table(out / "verify" / "kept").to_pydict()
    assert verified["correct"].count(False) == 8  # every 5th of the 40 generated answers is wrong
    assert pq.read_table(out / "mix" / "sft").num_rows > 0 and pq.read_table(out / "mix" / "rl").num_rows > 0
