"""The labelled sets' Unicode / plain-text renderings are faithful copies of the item (bench/decontam_forms.py).

Round 1's builder passed whole texts to unicodeit, whose prefix replacement turned `\\log` into `łog`, `\\pmod`
into `±od` and `\\left` into `≤ft`, and to pylatexenc, which reads a bare `%` as a comment, writes
\\frac{a+1}{b} as a+1/b, \\binom{5}{2} as 52 and drops \\pmod: such "copies" are not the same problem.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))


@pytest.fixture(scope="module")
def forms():
    pytest.importorskip("unicodeit")
    pytest.importorskip("pylatexenc")
    import decontam_forms

    return decontam_forms


@pytest.mark.parametrize("tex, uni", [
    (r"Find $\log_2 8 + \ln 3$.", "Find log₂ 8 + ln 3."),
    (r"Solve $x \equiv 3 \pmod{7}$.", "Solve x ≡ 3 (mod 7)."),
    (r"Let $\left(\frac{a+1}{b}\right)^2 \leq 5$.", "Let ((a+1)/b)² ≤ 5."),
    (r"Simplify $2^{\log _{4} T}$.", "Simplify 2^(log ₄ T)."),
    (r"It costs \$5, that is $20\%$ of the price.", "It costs $5, that is 20% of the price."),
    (r"Earn $3.00 for laundry and $1.50 for cleaning.", "Earn $3.00 for laundry and $1.50 for cleaning."),
    (r"State $\left({n}_{{i}}\right)$ of $\{1, 2\}$ in $10^{-8} {~m}$.", "State (nᵢ) of {1, 2} in 10⁻⁸ m."),
    (r"$f(x)=\begin{cases}x&\text{if }x<1\\2-x&\text{if }x\geq 1\end{cases}$", "f(x)=x if x<1\n2-x if x≥ 1"),
    (r"Find $\sqrt[3]{x+1}$ and $\sqrt{2}$ and $\text{lcm}(4,6)$.", "Find ∛(x+1) and √2 and lcm(4,6)."),
])
def test_unicode_rendering_is_faithful(forms, tex, uni):
    assert forms.unicode_math(tex) == uni


@pytest.mark.parametrize("tex, want", [
    (r"What is 30% of $\frac{a+1}{b}$?", "What is 30% of (a+1)/b?"),
    (r"Compute $\binom{5}{2}$ and $x \bmod 3$.", "Compute C(5, 2) and x mod 3."),
    (r"Find $x \equiv 3 \pmod{7}$ with $a_{n+1}$.", "Find x ≡ 3 (mod 7) with a_(n+1)."),
    (r"Find $\sqrt[3]{x}$, $\sqrt[5]{y}$.", "Find ∛x, (y)^(1/5)."),
    (r"The form $\tfrac{\sqrt{m}}{n}$.", "The form √(m)/n."),
    (r"Find $\gcd(a, b) + \det A$ in $\triangle ABC$.", "Find gcd(a, b) + det A in △ ABC."),
])
def test_plain_text_rendering_is_faithful(forms, tex, want):
    assert " ".join(forms.plain_text_math(tex).split()) == want
