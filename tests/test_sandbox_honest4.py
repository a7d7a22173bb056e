"""Honest test forms of issue 30 left after round 3: each must pass with a right program, and a wrong program
must still fail the same test (so the pass is not vacuous).

- A shared scratch folder for pytest's `tmp_path` / `tmpdir` / `tmp_path_factory`: files the program writes
  there are visible to the test and files the test writes are visible to the program (both ways, appends,
  sub-folders), although the two run in different jails under different uids; the same for `tempfile`'s
  files and folders in pytest files and assert-style tests.
- `multiprocessing` with the spawn and forkserver start methods inside a program the test calls (the
  program is a module, not a script: a spawned process must import it by name, with the test's setup).
"""

from __future__ import annotations

import pytest
from conftest import case_pytest, check_form

from cotforge.curate.verify.leetcode import LEETCODE_PRELUDE
from cotforge.curate.verify.sandbox import SandboxLimits

LIM = SandboxLimits(wall_s=6.0, cpu_s=3.0, memory_mb=256, nproc=16, fsize_mb=4, output_bytes=1 << 16)


FILES_RIGHT = (
    "import os\n\n\n"
    "def save(path, text):\n    with open(path, 'w') as f:\n        f.write(text)\n\n\n"
    "def count_lines(path):\n    with open(path) as f:\n        return sum(1 for _ in f)\n\n\n"
    "def append(path, text):\n    with open(path, 'a') as f:\n        f.write(text)\n\n\n"
    "def make_tree(root):\n    os.makedirs(os.path.join(root, 'a', 'b'))\n"
    "    for name in ('x.txt', 'a/y.txt', 'a/b/z.txt'):\n        save(os.path.join(root, name), name)\n\n\n"
    "def upper_copy(src, dst):\n    with open(src) as f:\n        save(dst, f.read().upper())\n")
FILES_WRONG = (  # writes nothing / counts wrong: the same tests must fail
    "def save(path, text):\n    pass\n\n\ndef count_lines(path):\n    return 0\n\n\n"
    "def append(path, text):\n    pass\n\n\ndef make_tree(root):\n    pass\n\n\n"
    "def upper_copy(src, dst):\n    pass\n")

FORMS: dict[str, tuple[str, str, dict]] = {
    "program_writes_test_reads": (FILES_RIGHT, FILES_WRONG, case_pytest(
        "from solution import save\n\n\ndef test_save(tmp_path):\n    p = tmp_path / 'out.txt'\n"
        "    save(str(p), 'hello')\n    assert p.read_text() == 'hello'\n")),
    "test_writes_program_reads": (FILES_RIGHT, FILES_WRONG, case_pytest(
        "from solution import count_lines\n\n\ndef test_count(tmp_path):\n    p = tmp_path / 'in.txt'\n"
        "    p.write_text('a\\nb\\nc\\n')\n    assert count_lines(str(p)) == 3\n")),
    "program_appends_to_test_file": (FILES_RIGHT, FILES_WRONG, case_pytest(
        "from solution import append\n\n\ndef test_append(tmp_path):\n    p = tmp_path / 'log.txt'\n"
        "    p.write_text('one\\n')\n    append(str(p), 'two\\n')\n    p.write_text(p.read_text() + 'three\\n')\n"
        "    assert p.read_text() == 'one\\ntwo\\nthree\\n'\n")),
    "program_makes_a_tree": (FILES_RIGHT, FILES_WRONG, case_pytest(
        "import os\nfrom solution import make_tree\n\n\ndef test_tree(tmp_path):\n    make_tree(str(tmp_path))\n"
        "    found = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob('*.txt'))\n"
        "    assert found == ['a/b/z.txt', 'a/y.txt', 'x.txt']\n"
        "    (tmp_path / 'a' / 'b' / 'z.txt').unlink()\n    os.rmdir(tmp_path / 'a' / 'b')\n")),
    "tmp_path_factory_and_tmpdir": (FILES_RIGHT, FILES_WRONG, case_pytest(
        "from solution import upper_copy\n\n\ndef test_factory(tmp_path_factory):\n"
        "    d = tmp_path_factory.mktemp('data')\n    (d / 'a.txt').write_text('abc')\n"
        "    upper_copy(str(d / 'a.txt'), str(d / 'b.txt'))\n    assert (d / 'b.txt').read_text() == 'ABC'\n\n\n"
        "def test_tmpdir(tmpdir):\n    src = tmpdir.join('s.txt')\n    src.write('xyz')\n"
        "    upper_copy(str(src), str(tmpdir.join('d.txt')))\n    assert tmpdir.join('d.txt').read() == 'XYZ'\n")),
    "tempfile_named_file": (FILES_RIGHT, FILES_WRONG, case_pytest(
        "import os\nimport tempfile\nfrom solution import count_lines\n\n\ndef test_count():\n"
        "    with tempfile.NamedTemporaryFile('w', suffix='.txt', delete=False) as f:\n        f.write('a\\nb\\n')\n"
        "    try:\n        assert count_lines(f.name) == 2\n    finally:\n        os.unlink(f.name)\n")),
    "tempfile_directory": (FILES_RIGHT, FILES_WRONG, case_pytest(
        "import os\nimport tempfile\nfrom solution import save\n\n\ndef test_save():\n"
        "    with tempfile.TemporaryDirectory() as d:\n        save(os.path.join(d, 'o.txt'), 'hi')\n"
        "        with open(os.path.join(d, 'o.txt')) as f:\n            assert f.read() == 'hi'\n")),
    "tempfile_mkstemp_assert": (FILES_RIGHT, FILES_WRONG, {"kind": "assert", "entry_point": None, "test": (
        "import os\nimport tempfile\nfd, path = tempfile.mkstemp()\nos.write(fd, b'x\\ny\\nz\\n')\nos.close(fd)\n"
        "assert count_lines(path) == 3\nd = tempfile.mkdtemp()\nupper_copy(path, os.path.join(d, 'u.txt'))\n"
        "assert open(os.path.join(d, 'u.txt')).read() == 'X\\nY\\nZ\\n'\n")}),
}

POOL = ("import multiprocessing as mp\n\n\ndef sq(x):\n    return x * x\n\n\n"
        "def squares(xs):\n    with mp.get_context('{method}').Pool(2) as p:\n        return p.map(sq, xs)\n")
POOL_WRONG = POOL.replace("return x * x", "return x + x")
POOL_TEST = {"kind": "assert", "entry_point": None, "test": "assert squares([1, 2, 3]) == [1, 4, 9]\n"}
LEETCODE_POOL = (  # `List` and `reduce` come from the LeetCode prelude (the test's setup), not an import
    "import multiprocessing\n\n\ndef _sq(x: List[int]) -> int:\n    return reduce(lambda a, b: a * b, [x, x])\n\n\n"
    "class Solution:\n    def squares(self, nums: List[int]) -> List[int]:\n"
    "        with multiprocessing.get_context('spawn').Pool(2) as p:\n            return p.map(_sq, nums)\n")
for _method in ("spawn", "forkserver"):
    FORMS[f"multiprocessing_{_method}_pool"] = (POOL.format(method=_method), POOL_WRONG.format(method=_method),
                                                POOL_TEST)
FORMS["multiprocessing_spawn_leetcode"] = (LEETCODE_POOL, LEETCODE_POOL.replace("[x, x]", "[x, 1]"), {
    "kind": "assert", "entry_point": None, "setup": LEETCODE_PRELUDE,
    "test": "def check(candidate):\n    assert candidate([2, 3]) == [4, 9]\n\n\ncheck(Solution().squares)\n"})
FORMS["multiprocessing_spawn_pytest"] = (POOL.format(method="spawn"), POOL_WRONG.format(method="spawn"), case_pytest(
    "from solution import squares\n\n\ndef test_squares():\n    assert squares([4]) == [16]\n"))


def test_honest_form_passes_and_wrong_program_fails(form_verdicts, form):
    check_form(form_verdicts, form)


@pytest.mark.slow
def test_cli_verify_scores_shared_folder_and_spawn_rows(tmp_path):
    """From the user's door: `cotforge curate verify` on rows whose tests use `tmp_path` / a spawn Pool."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    import polars as pl

    tmp_test = FORMS["program_writes_test_reads"][2]
    rows = [("right_tmp", FILES_RIGHT, tmp_test), ("wrong_tmp", FILES_WRONG, tmp_test),
            ("right_pool", POOL.format(method="spawn"), POOL_TEST),
            ("wrong_pool", POOL_WRONG.format(method="spawn"), POOL_TEST)]
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps({"id": i, "source": "s", "domain": "code", "prompt": "p",
                                       "response": f"```python\n{prog}```", "answer": None,
                                       "tests": json.dumps(tests), "meta": "{}"}) + "\n"
                           for i, prog, tests in rows))
    out = tmp_path / "out"
    cli = Path(sys.executable).with_name("cotforge")
    res = subprocess.run([str(cli), "curate", "verify", str(src),
                          "-o", str(out), "--workers", "2"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    df = pl.read_parquet(out / "kept" / "*.parquet")
    got = dict(zip(df["id"], df["verify_status"], strict=True))
    assert got["right_tmp"] == "pass" and got["right_pool"] == "pass", got
    assert got["wrong_tmp"] != "pass" and got["wrong_pool"] != "pass", got
