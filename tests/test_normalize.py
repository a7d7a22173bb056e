"""Shared text normalisation: presentation never hides a duplicate, numbers always separate problems."""

from __future__ import annotations

import pytest

from cotforge.curate.text.normalize import DEFAULT_NORM, NormConfig, normalize, words

BASE = r"Let $f(x) = \frac{x^2}{3}$. Find $f(6)$ for $x \le 10$."


@pytest.mark.parametrize("variant", [
    "  let   $f(x)=\\frac{x^2}{3}$.\n\nFIND $f(6)$ for $x \\le 10$.  ",  # whitespace + case
    r"Let \(f(x) = \dfrac{x^2}{3}\). Find \(f(6)\) for \(x \leq 10\).",  # delimiters + \dfrac + \leq
    "Let $f\\left(x\\right) = \\tfrac{x^2}{3}$. Find $f(6)$ for $x \\le\n10$.",  # \left \right, \le + newline
    "Solve the following problem step by step. " + BASE,  # instruction wrapper before
    BASE + "\nPlease reason step by step, and put your final answer within \\boxed{}.",  # wrapper after
    "Problem: " + BASE + " Put your final answer within \\boxed{}.",
    "Let $f(x)\\,=\\;\\frac{x^2}{3}$. Find $\\displaystyle f(6)$ for $x \\le 10$!",  # spacing commands, punct
])
def test_presentation_variants_normalise_equal(variant):
    assert normalize(variant) == normalize(BASE)


@pytest.mark.parametrize("other", [
    BASE.replace("f(6)", "f(7)"),
    BASE.replace("{3}", "{4}"),
    BASE.replace("10", "100"),
    BASE.replace("x^2", "x^3"),
])
def test_numbers_are_kept(other):
    assert normalize(other) != normalize(BASE)


def test_number_collapse_is_opt_in():
    cfg = NormConfig(numbers=False)
    assert normalize(BASE.replace("f(6)", "f(7)"), cfg) == normalize(BASE, cfg)


def test_wrapper_only_removed_as_whole_phrase():
    assert normalize("Problem: what is 2+3?") == "what is 2 3"
    # a wrapper's words inside a sentence are not stripped piecemeal
    assert "problem" in normalize("This problem asks for 2+3.")
    assert normalize("Answer this question: is 7 prime?") == "answer this question is 7 prime"
    assert normalize("Question: Problem: is 7 prime? Think step by step.") == "is 7 prime"


def test_code_fences_and_empty():
    assert normalize("```python\nprint(1)\n```") == "print 1"
    assert normalize("") == "" and normalize(None) == "" and words("  ") == []
    assert words(BASE) == normalize(BASE).split(" ")
    assert DEFAULT_NORM.numbers and DEFAULT_NORM.wrappers


# --------------------------------------------------------------------------- Unicode math = its LaTeX

UNICODE_LATEX = [
    ("x² + y² = z²", "$x^2 + y^2 = z^2$"), ("x²³", "x^{23}"), ("a₁ + a₂₀", "$a_1 + a_{20}$"), ("x⁻¹", "x^{-1}"),
    ("√3", "\\sqrt{3}"), ("√(x+1)", "\\sqrt{x+1}"), ("∛2", "\\sqrt[3]{2}"), ("x ≤ 5", "$x \\le 5$"),
    ("x ≤ 5", "x <= 5"), ("x ≥ y", "$x\\geqslant y$"), ("a ≠ b", "$a \\neq b$"), ("a ≠ b", "$a \\ne b$"),
    ("2 × 3", "$2 \\times 3$"), ("2·3", "$2\\cdot3$"), ("2 × 3", "2*3"), ("πr²", "$\\pi r^2$"),
    ("α+β", "$\\alpha+\\beta$"), ("Γ(x)", "\\Gamma(x)"), ("φ", "\\varphi"), ("ε", "\\epsilon"),
    ("½", "\\frac{1}{2}"), ("3½", "3\\frac{1}{2}"), ("3/4", "\\dfrac{3}{4}"), ("a/b", "\\tfrac{a}{b}"),
    ("1/2", "\\frac12"), ("(a/b)²", "\\left(\\frac{a}{b}\\right)^2"), ("90°", "$90^\\circ$"), ("90°", "90^{\\circ}"),
    ("∠ABC", "$\\angle ABC$"), ("x ∈ ℝ", "$x \\in \\mathbb{R}$"), ("f: A → B", "$f\\colon A \\to B$"),
    ("a ⇒ b", "$a \\Rightarrow b$"), ("a ⇒ b", "a \\implies b"), ("∞", "\\infty"), ("∑ᵢ xᵢ", "\\sum_i x_i"),
    ("1 ≤ n ≤ 10⁵", "1 <= n <= 10^5"), ("⌊x⌋", "\\lfloor x \\rfloor"), ("a b c", "a \\, b \\quad c \\;"),
    ("x = 1", "\\begin{align} x = 1 \\end{align}"), ("x ± 1", "x \\pm 1"), ("x … y", "x \\ldots y"),
    ("|x|", "\\left| x \\right|"), ("a | b", "a \\mid b"), ("cm", "\\text{cm}"), ("x", "\\LEFT( x \\RIGHT)"),
    ("x ⊆ A ∪ B", "x \\subseteq A \\cup B"), ("Find x", "\\textbf{Find} $x$"), ("𝑥 + 𝑦", "x + y"),
    ("A̅B̅ ∥ C̲D̲", "$\\overline{AB} \\parallel \\underline{CD}$"), ("ẋ + ȳ = v⃗", "$\\dot{x} + \\bar{y} = \\vec{v}$"),
    ("Qᴰ = 4 − P", "$Q^{D}=4-P$"), ("f′(x)", "$f^\\prime(x)$"), ("x = 4", "$\\boxed{x = 4}$"),
    ("n ≡ 2 (mod 7)", "$n \\equiv 2 \\pmod{7}$"), ("a mod b", "$a \\bmod b$"), ("x ⋄ y", "$x\\diamond y$"),
]


@pytest.mark.parametrize("uni,tex", UNICODE_LATEX)
def test_unicode_math_reads_as_its_latex(uni, tex):
    assert normalize(uni) == normalize(tex), (normalize(uni), normalize(tex))


@pytest.mark.parametrize("a,b", [("x² + 1", "x³ + 1"), ("½", "⅓"), ("x ≤ 5", "x ≥ 5"), ("x₁", "x₂"),
                                 ("√3", "∛3"), ("x ≤ 5", "x < 5"), ("α", "β"), ("10⁵", "10⁶"),
                                 ("Qᴰ", "Qᴱ"), ("naïve café", "naive cafe")])
def test_unicode_math_keeps_what_differs(a, b):
    assert normalize(a) != normalize(b)


def test_math_mapping_is_switchable():
    assert normalize("x²", NormConfig(math=False, split_digits=False)) == "x2"
    assert normalize("x²") == "x 2" == normalize("x2") == normalize("x_2")
    assert normalize("holds420 and 3x") == normalize("holds $420 and $3 x$") == "holds 420 and 3 x"


PIECES = ["Problem:", "$x^{2}$", "\\(a\\le b\\)", "\\left(", "```python\n", "\n```", "İstanbul", "—", "x_1", "½",
          "\\dfrac{1}{2}", "Please reason step by step, and put your final answer within \\boxed{}.", "x²³", "√",
          "Question:", "  \t", "3²", "é", "\\,", "\\text{cm}", "Let's think step by step.", "\x00", "word", "≤", "<=",
          "πr²", "∑ᵢ", "ΣΑΣ", "ς", "\\frac12", "\\begin{align}", "\\end{align}", "ﬁ", "Ω", "°C", "\\LEFT(", "_", "a/b",
          "\ua7cb", "\U0001ccd6", "⇒", "\\Rightarrow", "αβ", "x⁻¹", "∛", "ℝ", "𝑥", "Ⅻ", "①", "ǅ", "ß", "Ⅸ", "\r\n", "a1b2", "420x", "x7", "A̅", "ẋ", "v⃗", "Qᴰ", "\\overline{AB}", "e\u0301"]


def test_batch_path_equals_normalize_on_fuzzed_text():
    """normalize_batch (polars kernels over Arrow buffers) gives normalize()'s text for every input."""
    import random

    from cotforge.curate.text.normalize import SELF_CHECK, _fast_path_ok, normalize_batch

    assert _fast_path_ok()
    rng = random.Random(5)
    texts = ["".join(rng.choice(PIECES) + rng.choice(["", " ", "\n"]) for _ in range(rng.randint(0, 14)))
             for _ in range(1500)]
    texts += list(SELF_CHECK) + [a for a, _ in UNICODE_LATEX] + [b for _, b in UNICODE_LATEX] + ["", None]
    texts += ["Café: \\Le x", "é \\geİ", "α \\textΣ", "\x00```python\nx\n```"]  # found by fuzzing earlier
    for cfg in (DEFAULT_NORM, NormConfig(wrappers=False), NormConfig(numbers=False), NormConfig(math=False),
                NormConfig(split_digits=False), NormConfig(lowercase=False)):
        y, norms = normalize_batch(texts, cfg)
        assert norms == [normalize(t, cfg) for t in texts]
        assert y == " \x00 ".join(norms).encode("utf-8")


def test_unicode_tables_disk_cache(tmp_path, monkeypatch):
    """The batch normaliser's Unicode tables: computed once, then read from the cache folder unchanged; a
    corrupt cache file is recomputed, an unwritable folder only means computing."""
    from cotforge.curate.text import unitables

    monkeypatch.setenv("COTFORGE_CACHE_DIR", str(tmp_path / "c"))
    fresh = unitables._compute_alnum_class(0x2000)
    assert unitables._disk_cached(unitables._compute_alnum_class, 0x2000) == fresh
    (f,) = (tmp_path / "c").iterdir()
    assert "ucd" in f.name and f.read_text()
    assert unitables._disk_cached(unitables._compute_alnum_class, 0x2000) == fresh  # from the file
    f.write_text("{not json")
    assert unitables._disk_cached(unitables._compute_alnum_class, 0x2000) == fresh
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("COTFORGE_CACHE_DIR", str(blocker / "sub"))
    assert unitables._disk_cached(unitables._compute_alnum_class, 0x2000) == fresh
    ascii_map, cls = unitables.nfkc_tables()
    assert ascii_map["…"] == "..." and cls.startswith("[")
