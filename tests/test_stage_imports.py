"""Running one stage imports that stage's code only: the registry builds each Stage on first use."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHECK = ("import sys\n{body}\n"
         "heavy = sorted(m for m in ('math_verify', 'sympy', 'cotforge.curate.verify', 'torch') if m in sys.modules)\n"
         "print(','.join(heavy) or 'none')\n")


def _imported(body: str) -> str:
    p = subprocess.run([sys.executable, "-c", CHECK.format(body=body)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("stage", ["dedup", "decontaminate", "ingest"])
def test_one_stage_imports_no_verifier(stage):
    body = f"from cotforge.pipelines.stages import get_stage\nst = get_stage({stage!r})\nst.config(); st.help"
    assert _imported(body) == "none"


def test_cli_command_of_one_stage_imports_no_verifier():
    body = ("from click.testing import CliRunner\nfrom cotforge.pipelines.cli.main import main\n"
            "r = CliRunner().invoke(main, ['curate', 'dedup', '--help'])\nassert r.exit_code == 0 and '--bands' in r.output")
    assert _imported(body) == "none"


def test_listing_the_stages_still_builds_each_one():
    from cotforge.pipelines.stages import ORDER, get_stage, stage_names

    assert stage_names("cotforge.pipelines.stages.curate", "curate")[:2] == ["ingest", "decontaminate"]
    assert get_stage("verify").config.__name__ == "VerifyConfig"
    body = ("from click.testing import CliRunner\nfrom cotforge.pipelines.cli.main import main\n"
            "r = CliRunner().invoke(main, ['curate', '--help'])\nassert 'verify' in r.output and 'dedup' in r.output")
    assert "cotforge.curate.verify" in _imported(body)  # the help lists every stage, so builds every one
    assert "verify" in ORDER
