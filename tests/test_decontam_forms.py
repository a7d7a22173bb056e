"""The labelled sets' Unicode / plain-text renderings are faithful copies of the item (bench/decontam/render.py,
run as a command: tests never import bench).

Round 1's builder passed whole texts to unicodeit, whose prefix replacement turned `\\log` into `łog`, `\\pmod`
into `±od` and `\\left` into `≤ft`, and to pylatexenc, which reads a bare `%` as a comment, writes
\\frac{a+1}{b} as a+1/b, \\binom{5}{2} as 52 and drops \\pmod: such "copies" are not the same problem.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
UNICODE_CASES = [
    (r"Find $\log_2 8 + \ln 3$.", "Find log₂ 8 + ln 3."),
    (r"Solve $x \equiv 3 \pmod{7}$.", "Solve x ≡ 3 (mod 7)."),
    (r"Let $\left(\frac{a+1}{b}\right)^2 \leq 5$.", "Let ((a+1)/b)² ≤ 5."),
    (r"Simplify $2^{\log _{4} T}$.", "Simplify 2^(log ₄ T)."),
    (r"It costs \$5, that is $20\%$ of the price.", "It costs $5, that is 20% of the price."),
    (r"Earn $3.00 for laundry and $1.50 for cleaning.", "Earn $3.00 for laundry and $1.50 for cleaning."),
    (r"State $\left({n}_{{i}}\right)$ of $\{1, 2\}$ in $10^{-8} {~m}$.", "State (nᵢ) of {1, 2} in 10⁻⁸ m."),
    (r"$f(x)=\begin{cases}x&\text{if }x<1\\2-x&\text{if }x\geq 1\end{cases}$", "f(x)=x if x<1\n2-x if x≥ 1"),
    (r"Find $\sqrt[3]{x+1}$ and $\sqrt{2}$ and $\text{lcm}(4,6)$.", "Find ∛(x+1) and √2 and lcm(4,6)."),
]
PLAIN_CASES = [
    (r"What is 30% of $\frac{a+1}{b}$?", "What is 30% of (a+1)/b?"),
    (r"Compute $\binom{5}{2}$ and $x \bmod 3$.", "Compute C(5, 2) and x mod 3."),
    (r"Find $x \equiv 3 \pmod{7}$ with $a_{n+1}$.", "Find x ≡ 3 (mod 7) with a_(n+1)."),
    (r"Find $\sqrt[3]{x}$, $\sqrt[5]{y}$.", "Find ∛x, (y)^(1/5)."),
    (r"The form $\tfrac{\sqrt{m}}{n}$.", "The form √(m)/n."),
    (r"Find $\gcd(a, b) + \det A$ in $\triangle ABC$.", "Find gcd(a, b) + det A in △ ABC."),
]


@pytest.mark.parametrize("tex, uni", UNICODE_CASES)
def test_unicode_rendering_is_faithful(tex, uni):
    assert render("unicode", tex) == uni


@pytest.mark.parametrize("tex, want", PLAIN_CASES)
def test_plain_text_rendering_is_faithful(tex, want):
    assert " ".join(render("plain_text", tex).split()) == want


_RENDERED: dict[tuple[str, str], str] = {}


def render(form: str, tex: str) -> str:
    """`python -m bench.decontam.render FORM` on every case of this module at once (one interpreter per form)."""
    if (form, tex) not in _RENDERED:
        pytest.importorskip("unicodeit")
        pytest.importorskip("pylatexenc")
        texts = [case[0] for case in (UNICODE_CASES if form == "unicode" else PLAIN_CASES)]
        run = subprocess.run([sys.executable, "-m", "bench.decontam.render", form], input=json.dumps(texts),
                             capture_output=True, text=True, cwd=REPO, timeout=120)
        assert run.returncode == 0, run.stderr[-3000:]
        _RENDERED.update({(form, t): r for t, r in zip(texts, json.loads(run.stdout), strict=True)})
    return _RENDERED[(form, tex)]
