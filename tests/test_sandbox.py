"""Hostile-program suite: every attack is contained, reported with the right status, and the test
process and the files outside the sandbox survive."""

from __future__ import annotations

import os
import socket
import tempfile
import time
from pathlib import Path

import pytest

from cotforge.curate.verify.code import run_tests, run_tests_batch
from cotforge.curate.verify.sandbox import SandboxLimits, run_python

LIM = SandboxLimits(wall_s=2.0, cpu_s=1.0, memory_mb=256, nproc=16, fsize_mb=4, output_bytes=1 << 16,
                    wall_allowance_s=1.0)


def _stdio(inp: str, out: str) -> dict:
    return {"kind": "stdio", "cases": [{"input": inp, "output": out}]}


def test_well_behaved_program_passes_and_reads_stdin():
    r = run_python("import heapq, collections\nprint(sum(map(int, input().split())))", stdin="2 3\n", limits=LIM)
    assert (r.status, r.stdout) == ("pass", "5\n")


def test_infinite_loop_is_a_timeout():
    assert run_python("while True:\n    pass", limits=LIM).status == "timeout"


def test_sleep_past_the_deadline_is_a_timeout():
    r = run_python("import time\ntime.sleep(60)", limits=LIM)
    assert r.status == "timeout" and r.wall_s < LIM.wall_s + LIM.wall_allowance_s + 1.5


def test_memory_bomb_is_memory():
    assert run_python("x = bytearray(8 * 1024**3)", limits=LIM).status == "memory"
    assert run_python("a = []\nwhile True:\n    a.append(' ' * 10**6)", limits=LIM).status == "memory"


def test_fork_bomb_is_contained():
    prog = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    r = run_python(prog, limits=LIM)
    assert r.status in ("timeout", "runtime_error")
    # the host can still start processes afterwards, and nothing of the run is left behind
    assert run_python("print('alive')", limits=LIM).stdout == "alive\n"
    assert _sandbox_processes() == []


def _sandbox_processes() -> list[int]:
    """Pids of live processes owned by sandbox uids (root mode) or running our child code."""
    from cotforge.curate.verify.sandbox import UID_BASE, UID_SPAN

    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                uid = d.stat().st_uid
                state = (d / "stat").read_text().split(")")[-1].split()[0]
            except OSError:
                continue
            if UID_BASE <= uid < UID_BASE + UID_SPAN and state != "Z":
                found.append(int(d.name))
    return found


def test_background_children_do_not_survive_the_run():
    prog = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(120)\nprint('parent done')"
    r = run_python(prog, limits=LIM)
    assert r.status == "pass" and r.stdout == "parent done\n"
    time.sleep(0.2)
    assert _sandbox_processes() == []


def test_gigabytes_of_output_are_capped():
    r = run_python("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)", limits=LIM)
    assert r.status == "runtime_error" and "output limit" in r.detail
    assert len(r.stdout) <= LIM.output_bytes


def test_environment_is_not_inherited(monkeypatch):
    monkeypatch.setenv("COTFORGE_SECRET_TOKEN", "hunter2")
    prog = ("import os\nprint(sorted(os.environ))\n"
            "try:\n    print(open('/proc/%d/environ' % os.getppid(), 'rb').read())\nexcept OSError as e:\n"
            "    print('denied', type(e).__name__)\n"
            f"try:\n    print(open('/proc/{os.getpid()}/environ', 'rb').read())\nexcept OSError as e:\n"
            "    print('denied', type(e).__name__)\n")
    r = run_python(prog, limits=LIM)
    assert r.status == "pass"
    assert "hunter2" not in r.stdout and "COTFORGE_SECRET_TOKEN" not in r.stdout
    assert r.stdout.count("denied") == 2


def test_socket_is_blocked():
    with socket.socket() as srv:  # a listener on the host that the sandbox must not reach
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        prog = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\nprint('connected')"
        r = run_python(prog, limits=LIM)
    assert r.status == "runtime_error" and "connected" not in r.stdout


def test_cannot_kill_the_parent():
    prog = (f"import os, signal\nfor pid in ({os.getpid()}, os.getppid(), -1):\n"
            "    try:\n        os.kill(pid, signal.SIGKILL)\n    except OSError as e:\n        print(type(e).__name__)")
    r = run_python(prog, limits=LIM)
    assert r.status in ("pass", "runtime_error")
    assert os.getpid() > 0  # still here


def test_files_outside_the_workdir_are_untouched():
    with tempfile.TemporaryDirectory() as d:
        victim = Path(d) / "victim.txt"
        victim.write_text("keep me")
        os.chmod(d, 0o777)
        os.chmod(victim, 0o666)
        run_python("pass", limits=LIM)  # the process's own staging (harness copy, uid locks) exists from here on
        before = sorted(os.listdir(tempfile.gettempdir()))
        prog = (
            "import os\nhits = []\n"
            f"for p in ({str(victim)!r}, {str(Path(d) / 'new.txt')!r}, '../escape.txt',"
            f" {str(Path(tempfile.gettempdir()) / 'cotforge-escape.txt')!r}, {str(Path.cwd() / 'escape.txt')!r}):\n"
            "    try:\n        open(p, 'w').write('pwned'); hits.append(p)\n    except OSError:\n        pass\n"
            f"try:\n    os.remove({str(victim)!r}); hits.append('rm')\nexcept OSError:\n    pass\n"
            "open('inside.txt', 'w').write('fine')\nprint(hits)"
        )
        r = run_python(prog, limits=LIM)
        assert victim.read_text() == "keep me"
        assert not (Path(d) / "new.txt").exists()
        assert not (Path.cwd() / "escape.txt").exists()
        assert not (Path(tempfile.gettempdir()) / "cotforge-escape.txt").exists()
        assert r.status == "pass"
        after = sorted(os.listdir(tempfile.gettempdir()))
        assert [x for x in after if x not in before and x.startswith("cotforge")] == []


def test_big_file_hits_the_file_size_limit():
    r = run_python("f = open('big', 'wb')\nwhile True:\n    f.write(b'x' * 1000000)", limits=LIM)
    assert r.status == "runtime_error"


def test_syntax_error_status():
    v = run_tests("def f(:\n    pass", _stdio("", ""), LIM)
    assert v.status == "syntax_error" and v.results == ["syntax_error"]


def test_stdio_tests_compare_stripped_lines():
    prog = "n = int(input())\nfor i in range(n):\n    print(i, ' ')\n"
    tests = {"kind": "stdio", "cases": [{"input": "2\n", "output": "0\n1"}, {"input": "1\n", "output": "5"}]}
    v = run_tests(prog, tests, LIM)
    assert (v.status, v.passed, v.total, v.results) == ("fail", 1, 2, ["pass", "fail"])
    assert v.pass_fraction == 0.5


def test_assert_tests_with_entry_point_and_exit_tricks():
    test = "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(3) == 9\n"
    assert run_tests("def sq(x):\n    return x * x", {"kind": "assert", "test": test, "entry_point": "sq"},
                     LIM).status == "pass"
    assert run_tests("def sq(x):\n    return 4", {"kind": "assert", "test": test, "entry_point": "sq"},
                     LIM).status == "fail"
    # exiting early must not count as passing
    cheat = "import sys\nsys.exit(0)"
    assert run_tests(cheat, {"kind": "assert", "test": test, "entry_point": "sq"}, LIM).status == "runtime_error"
    cheat2 = "import os\nos._exit(0)"
    assert run_tests(cheat2, {"kind": "assert", "test": test, "entry_point": "sq"}, LIM).status == "runtime_error"


def test_batch_preserves_order_and_mixes_statuses():
    items = [("print(input())", _stdio("a\n", "a")), ("while True: pass", _stdio("", "")),
             ("print('no')", _stdio("", "yes")), ("x = bytearray(8 * 1024**3)", _stdio("", "")),
             ("print(1)", "not json")]
    v = run_tests_batch(items, LIM, workers=3)
    assert [x.status for x in v] == ["pass", "timeout", "fail", "memory", "sandbox_error"]
    assert "invalid JSON" in v[4].details[0]


@pytest.mark.skipif(os.geteuid() != 0, reason="namespace isolation needs root")
def test_private_tmp_hides_host_tmp():
    marker = Path(tempfile.gettempdir()) / "cotforge-host-marker"
    marker.write_text("x")
    try:
        r = run_python(f"import os\nprint(os.path.exists({str(marker)!r}))", limits=LIM)
        assert r.stdout.strip() == "False"
    finally:
        marker.unlink()


def test_missing_bwrap_is_a_clear_error(monkeypatch):
    """No bubblewrap: an error that says what to install, never a silently weaker sandbox."""
    import cotforge.curate.verify.sandbox.jail as jail
    from cotforge.curate.verify.sandbox import SandboxUnavailable

    monkeypatch.setattr(jail.shutil, "which", lambda name: None)
    with pytest.raises(SandboxUnavailable, match="apt-get install -y bubblewrap"):
        run_python("print(1)", limits=LIM)
    with pytest.raises(SandboxUnavailable):
        run_tests_batch([("print(1)", _stdio("", "1"))], LIM)


def test_unprivileged_bwrap_mode_contains_the_basics(monkeypatch):
    """The code path for hosts without root (bwrap maps the caller's uid, --disable-userns) still runs,
    classifies and contains the basic cases."""
    import cotforge.curate.verify.sandbox.jail as jail

    monkeypatch.setattr(jail, "is_root", lambda: False)
    assert run_python("print(input())", stdin="hi\n", limits=LIM).stdout == "hi\n"
    assert run_python("while True:\n    pass", limits=LIM).status == "timeout"
    assert run_python("x = bytearray(8 * 1024**3)", limits=LIM).status == "memory"
    r = run_python("import ctypes\nprint(ctypes.CDLL(None).unshare(0x10000000))", limits=LIM)
    assert r.stdout.strip() == "-1"


def test_sandbox_error_only_before_the_programs_code():
    """A setup or test the harness cannot run is sandbox_error (not the program's doing); anything the
    program does after it started, including exiting with the harness's own failure code, is not."""
    ok = "def f():\n    return 1\n"
    bad_setup = {"kind": "assert", "test": "assert f() == 1\n", "setup": "import no_such_module_here\n"}
    bad_test = {"kind": "assert", "test": "assert f() ==\n"}
    assert run_tests(ok, bad_setup, LIM).status == "sandbox_error"
    v = run_tests(ok, bad_test, LIM)
    assert v.status == "sandbox_error" and "test setup" in v.details[0]
    for prog in ("import os\nos._exit(70)", "raise SystemExit(70)", "import os, signal\nos.kill(os.getpid(), 9)"):
        assert run_tests(prog, {"kind": "assert", "test": "assert f() == 1\n"}, LIM).status == "runtime_error"
        assert run_python(prog, limits=LIM).status == "runtime_error"


def test_limits_validate_themselves():
    with pytest.raises(ValueError, match="cpu_s"):
        SandboxLimits(cpu_s=0)
    with pytest.raises(ValueError, match="memory_mb"):
        SandboxLimits(memory_mb=16)
    with pytest.raises(ValueError, match="stderr_bytes"):
        SandboxLimits(stderr_bytes=-1)
    with pytest.raises(ValueError, match="packages"):
        SandboxLimits(packages="numpy")  # a string is not a list of names (it would become its letters)


def test_package_allow_list_from_the_generated_cli():
    """The allow-list as the generated CLI takes it: repeatable and comma-separated."""
    import click
    from click.testing import CliRunner

    from cotforge.pipelines.cli.fields import FlagSet

    flags = FlagSet(SandboxLimits, "cfg")

    @click.command(params=flags.options)
    @click.pass_context
    def cmd(ctx: click.Context, **_: object) -> dict:
        return flags.values(ctx)

    res = CliRunner().invoke(cmd, ["--packages", "numpy,sortedcontainers", "--packages", "pytest"],
                             standalone_mode=False)
    assert res.exception is None, res.output
    assert SandboxLimits(**res.return_value).packages == ("numpy", "sortedcontainers", "pytest")


def test_run_cgroups_are_left_empty():
    from cotforge.curate.verify.sandbox.cgroups import cgroup_tree

    run_python("import os\nfor _ in range(3):\n    os.fork()\nimport time\ntime.sleep(0.2)", limits=LIM)
    tree = cgroup_tree()
    if tree is None:
        pytest.skip("no writable cgroup here")
    assert tree._free and all(cg.pids() == [] for cg in tree._free)


@pytest.mark.slow
def test_a_forked_verifier_process_gets_its_own_sandbox_state():
    """datatrove workers fork: the child must neither share the parent's cgroups and test server nor remove
    them when it exits."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent('''
        import os, sys
        from cotforge.curate.verify.sandbox import run_python
        A = ("def f():\\n    return 1\\n",)
        def both():
            return run_python("print(1)").status, run_python(A[0], mode="assert", test="assert f() == 1\\n").status
        print("parent", *both())
        pid = os.fork()
        if pid == 0:
            print("child", *both(), flush=True)
            sys.exit(0)
        os.waitpid(pid, 0)
        print("parent", *both())
    ''')
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert out.split("\n")[:3] == ["parent pass pass", "child pass pass", "parent pass pass"], out


def test_a_plain_leetcode_run_loads_no_unneeded_modules():
    """Start-up cost guard: the program's harness encodes the Solution() handle without importing fractions,
    decimal or re (they cost a fresh interpreter ~20 ms CPU, more than the rest of a typical run)."""
    program = ("import sys\nclass Solution:\n    def loaded(self):\n"
               "        return sorted(m for m in ('fractions', 'decimal', 're', 'importlib', 'binascii') if m in sys.modules)\n")
    spec = {"kind": "assert", "test": "def check(c):\n    assert c() == [], c()\n\n\ncheck(Solution().loaded)\n"}
    v = run_tests(program, spec, LIM)
    assert v.status == "pass", v.details
