"""Tables for `cotforge.curate.text.normalize`: Unicode math -> the LaTeX it stands for, and LaTeX commands ->
the canonical word (or nothing).

The canonical form is what LaTeX input normalises to: `x²` reads as `x^2`, `√3` as `\\sqrt 3`, `≤` and `<=` as
`\\leq`, `π` as `\\pi`, `½` as `1/2`. Commands that only change presentation are dropped (`\\left`, `\\dfrac`,
`\\quad`, `\\mathrm`, `\\text`), and so are the operators whose ASCII form is punctuation (`\\times`, `\\cdot`,
`\\div`, like `*`, `+`, `/`), so `\\frac{a}{b}`, `a/b` and `a÷b` all become the words `a b`. Aliases collapse
to one name (`\\le`/`\\leqslant` -> `leq`, `\\to`/`\\rightarrow`/`→`/`⇒` -> `to`, `\\varphi` -> `phi`).
"""

from __future__ import annotations

import unicodedata

SUPERSCRIPTS = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿⁱᵃᵇᶜᵈᵉᶠᵍʰʲᵏˡᵐᵒᵖʳˢᵗᵘᵛʷˣʸᶻᴬᴮᴰᴱᴳᴴᴵᴶᴷᴸᴹᴺᴼᴾᴿᵀᵁⱽᵂ",
                        "0123456789+-=()niabcdefghjklmoprstuvwxyzABDEGHIJKLMNOPRTUVW", strict=True))
SUBSCRIPTS = dict(zip("₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₒₓₕₖₗₘₙₚₛₜᵢᵣᵤᵥⱼ", "0123456789+-=()aeoxhklmnpstiruvj", strict=True))
VULGAR = {"¼": "1/4", "½": "1/2", "¾": "3/4", "⅐": "1/7", "⅑": "1/9", "⅒": "1/10", "⅓": "1/3", "⅔": "2/3",
          "⅕": "1/5", "⅖": "2/5", "⅗": "3/5", "⅘": "4/5", "⅙": "1/6", "⅚": "5/6", "⅛": "1/8", "⅜": "3/8",
          "⅝": "5/8", "⅞": "7/8", "↉": "0/3"}
# Combining accents math writes on letters (A̅B̅ for \\overline{AB}, ẋ for \\dot{x}, v⃗ for \\vec{v}): dropped like the
# accent commands (COMMANDS), before NFKC composes them with their letter. Marks that spell words (é, ñ, ü: acute,
# tilde, circumflex, diaeresis) are left to NFKC.
COMBINING_ACCENTS = "\u0304\u0305\u0307\u0332\u20d6\u20d7\u20e1"
# ... and the precomposed letters they make (ẋ, ȳ, ż, ā: Latin letters whose NFD is a letter + one such mark)
ACCENTED = {c: d[0] for c in map(chr, [*range(0xC0, 0x250), *range(0x1E00, 0x1F00)])
            if len(d := unicodedata.normalize("NFD", c)) == 2 and d[1] in COMBINING_ACCENTS}
# Applied before NFKC (which would flatten x² to x2 and ½ to 1⁄2): a run of superscripts gets one "^", a run
# of subscripts one "_" (x²³ -> x^23 like x^{23}), vulgar fractions become a/b with spaces around.
PRE_NFKC: dict[str, str] = {**SUPERSCRIPTS, **SUBSCRIPTS, **{k: f" {v} " for k, v in VULGAR.items()},
                            **dict.fromkeys(COMBINING_ACCENTS, ""), **ACCENTED}
SUP_CHARS = "".join(SUPERSCRIPTS)
SUB_CHARS = "".join(SUBSCRIPTS)

_GREEK = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi o pi rho sigma tau upsilon "
          "phi chi psi omega").split()
_GREEK_LOWER = "αβγδεζηθικλμνξοπρστυφχψω"
_GREEK_UPPER = "ΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩ"
_SYMBOLS = {
    "≤": "leq", "⩽": "leq", "≦": "leq", "≥": "geq", "⩾": "geq", "≧": "geq", "≠": "neq", "≈": "approx",
    "≅": "cong", "≡": "equiv", "∼": "sim", "≃": "simeq", "∝": "propto", "≪": "ll", "≫": "gg",
    "×": "times", "÷": "div", "·": "cdot", "⋅": "cdot", "∙": "cdot", "∗": "ast", "±": "pm", "∓": "mp",
    "∘": "circ", "√": "sqrt", "∛": "sqrt[3]", "∜": "sqrt[4]", "∞": "infty", "∑": "sum", "∏": "prod",
    "∫": "int", "∬": "iint", "∮": "oint", "∂": "partial", "∇": "nabla", "∆": "delta", "∀": "forall",
    "∃": "exists", "∄": "nexists", "¬": "neg", "∧": "wedge", "∨": "vee", "⊕": "oplus", "⊗": "otimes",
    "∈": "in", "∉": "notin", "∋": "ni", "⊂": "subset", "⊃": "supset", "⊆": "subseteq", "⊇": "supseteq",
    "∪": "cup", "∩": "cap", "∖": "setminus", "∅": "emptyset", "→": "to", "⟶": "to", "⇒": "to", "⟹": "to",
    "←": "leftarrow", "⟵": "leftarrow", "⇐": "leftarrow", "↔": "iff", "⇔": "iff", "⟺": "iff", "↦": "mapsto",
    "∠": "angle", "∡": "measuredangle", "△": "triangle", "⊥": "perp", "∥": "parallel", "⌊": "lfloor",
    "⌋": "rfloor", "⌈": "lceil", "⌉": "rceil", "⟨": "langle", "⟩": "rangle", "〈": "langle", "〉": "rangle",
    "⋯": "cdots", "⋮": "vdots", "⋱": "ddots", "ς": "sigma", "ϵ": "epsilon", "ϑ": "theta", "ϕ": "phi",
    "ϖ": "pi", "ϱ": "rho", "ϰ": "kappa", "⋄": "diamond", "♢": "diamond", "◇": "diamond", "★": "star", "⋆": "star",
}
# Applied after NFKC and lower-casing. Values are LaTeX commands padded with spaces ("2α" -> "2 \\alpha ").
MATH: dict[str, str] = {
    "<=": " \\leq ", ">=": " \\geq ", "°": "^\\circ ",
    **{c: f" \\{n} " for c, n in zip(_GREEK_LOWER, _GREEK, strict=True)},
    **{c: f" \\{n.capitalize()} " for c, n in zip(_GREEK_UPPER, _GREEK, strict=True)},
    **{c: f" \\{n} " for c, n in _SYMBOLS.items()},
}

# LaTeX command names (after lower-casing when it is on) -> replacement; "" drops the command.
_DROP = (
    "left right middle big bigl bigr bigm bigg biggl biggr displaystyle textstyle scriptstyle scriptscriptstyle "
    "mathrm mathbf mathit mathsf mathtt mathbb mathcal mathfrak mathscr mathnormal boldsymbol bm text textrm "
    "textbf textit texttt textsf textnormal emph mbox hbox operatorname mathop limits nolimits quad qquad "
    "enspace thinspace medspace thickspace negthinspace negmedspace negthickspace hspace vspace frac dfrac tfrac "
    "cfrac times cdot div ast ldots dots cdots dotsc dotsb dotsm vdots ddots mid vert lvert rvert lt gt colon "
    "lbrace rbrace lbrack rbrack "
    # accents and decorations (A̅B̅, ẋ, v⃗, f′ and a boxed answer read the same without them)
    "overline underline bar dot ddot vec widehat widetilde wideparen overrightarrow overleftarrow "
    "overleftrightarrow mathring prime boxed hline bullet over"
).split()
_ALIASES = {
    "le": "leq", "leqslant": "leq", "leqq": "leq", "ge": "geq", "geqslant": "geq", "geqq": "geq", "ne": "neq",
    "rightarrow": "to", "longrightarrow": "to", "implies": "to", "gets": "leftarrow", "longleftarrow": "leftarrow",
    "leftrightarrow": "iff", "longleftrightarrow": "iff", "land": "wedge", "lor": "vee", "lnot": "neg",
    "degree": "circ", "varnothing": "emptyset", "varepsilon": "epsilon", "vartheta": "theta", "varphi": "phi",
    "varpi": "pi", "varrho": "rho", "varsigma": "sigma", "varkappa": "kappa", "dbinom": "binom", "tbinom": "binom",
    "pmod": "mod", "bmod": "mod",  # x \\equiv 2 \\pmod{7} = x ≡ 2 (mod 7)
}
COMMANDS: dict[str, str] = {**{c: "" for c in _DROP}, **{c.capitalize(): "" for c in _DROP if c.startswith("big")},
                            **_ALIASES, **{k.capitalize(): v for k, v in _ALIASES.items()}}
