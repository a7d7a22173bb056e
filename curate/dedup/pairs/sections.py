"""Sections of a code problem: statement, examples, constraints / I-O format, follow-up, starter code, wrappers.

Why: two scrapes of one LeetCode problem differ in everything around the statement. One carries
"Example 1: Input ... Output ... Explanation ...", "Constraints:" and a stub after "Please complete the code
below ..."; the other an instruction wrapper ("Please solve the programming task below ...", "You will be given
a question (problem specification) and will generate a correct Python program ...") and a stub only. Compared
as whole prompts the inserted blocks hold numbers (the number guard rejects, and the number key keeps the two
from ever being LSH candidates) and far more words than `max_reworded` allows. Compared by sections they are
one problem: the statements agree, and so do the constraints / examples wherever both scrapes have them.

`code_sections(raw)` splits a prompt line by line on the headings LeetCode, Codeforces and LiveCodeBench-style
scrapes use; it returns None for a prompt with none of them (math problems keep the whole-prompt path). What
counts as a starter stub: a fenced (or trailing unfenced) block whose lines are only signatures (`class X:`,
`def f(...):`), decorators, imports, comments and `pass` / `...` (a block with a real body is part of the
problem: "what does this code print?"). Instruction wrappers are recognised by their role: a paragraph at the
start or the end of the statement that talks *about* the problem or the code ("the programming task below",
"problem specification", "the code below", "passes all tests", "starter code", "stdin") rather than stating it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

_FENCE = re.compile(r"^\s*```")
_HEADING = re.compile(
    r"^\s*(?:[#*>\-]+\s*)?(?P<h>example|examples|sample(?: test(?: case)?)?s?|(?:sample )?input(?: format)?|"
    r"(?:sample )?output(?: format)?|explanation|constraints|follow[- ]?up|note|notes|tags|time limit|memory limit)\b\s*\d*\s*[-*#]*\s*"
    r"(?P<colon>[:：.]|-----|\*\*|$)",
    re.IGNORECASE,
)
_DASHED = re.compile(r"^\s*-{3,}\s*(?P<h>[A-Za-z ]+?)\s*-{3,}\s*$")  # Codeforces "-----Input-----"
_STUB_LINE = re.compile(
    r"^\s*(?:class\s+\w+(?:\(.*\))?\s*:|def\s+\w+\s*\(.*\)\s*(?:->.*)?:|@\w+.*|(?:from\s+\S+\s+)?import\s+.*|#.*|//.*|"
    r"pass|\.\.\.|\"\"\".*|'''.*|(?:public|private|protected)\s*:|"
    r"(?:public|private|class|struct|func|fn|function|impl)\b.*[{(].*|[{}];?|)\s*$"
)
_FUNC = re.compile(r"\bdef\s+(\w+)\s*\(")
_WRAPPER = re.compile(
    r"\b(?:programming (?:task|problem) (?:below|above)|problem specification|code snippet|code block|markdown|"
    r"python code|python program|complete the (?:following )?(?:python )?code|code below|following (?:python )?code|"
    r"starter code|provided format|above (?:problem|prblem|question)|(?:problem|question|task) (?:below|above)|"
    r"passes all (?:the )?tests|from stdin|to stdout|backticks|self-contained)\b|"
    r"^\s*#+\s*(?:question|format|answer|problem|instruction)s?\s*:?",
    re.IGNORECASE,
)
_WRAPPER_HEADING = re.compile(r"^\s*#{1,6}\s*(?:question|format|answer|problem|instruction|task)s?\s*:?\s*$",
                              re.IGNORECASE)  # "### Question:" alone on its line
_SUP = re.compile(r"(\d)\s*(?:\^|\*\*)\s*\(?(\d)|(\d)\s*<sup>\s*(\d+)\s*</sup>")
_DIGITS = re.compile(r"\d+")
MAX_WRAPPER_WORDS = 80


@dataclass(frozen=True)
class CodeSections:
    """A code problem cut into its sections (raw text; the stub as the function names it declares)."""

    statement: str
    examples: tuple[str, ...]  # the Input / Output lines of each example, explanations dropped
    constraints: str  # "Constraints:" and I-O format sections ("-----Input-----", "Input Format")
    functions: frozenset[str]  # names declared by `def` in a starter stub

    def partial_to(self, other: CodeSections | None) -> bool:
        """Whether a section is on one side only (constraints, stub) or the example counts differ: the two agree
        on what both have, not on everything (a merge that `ProblemCluster` undoes when it bridges two problems
        that disagree)."""
        if other is None:
            return True
        return (bool(self.constraints.strip()) != bool(other.constraints.strip())
                or len(self.examples) != len(other.examples) or bool(self.functions) != bool(other.functions))

    def constraint_numbers(self) -> list[str]:
        """Sorted numbers of the constraints, superscripts joined as scrapes lose them ("10^5" = "105")."""
        return sorted(_DIGITS.findall(join_superscripts(self.constraints)))


def join_superscripts(text: str) -> str:
    """"10^9 + 7", "10**9" and "10<sup>9</sup>" as a scrape that lost the superscript writes them: "109 + 7"."""
    return _SUP.sub(lambda m: (m.group(1) or m.group(3)) + (m.group(2) or m.group(4)), text)


def maybe_code(raw: str) -> bool:
    """Cheap test (substring checks) whether `raw` can have code sections; False = `code_sections` is None."""
    return ("```" in raw or "Example" in raw or "Constraints" in raw or "class Solution" in raw or "-----" in raw
            or "Input" in raw or "def " in raw)


def _stub(lines: list[str]) -> frozenset[str] | None:
    """Function names of a starter stub, or None when the block has a body (it is part of the problem)."""
    code = [ln for ln in lines if ln.strip()]
    if not code or not any(re.match(r"\s*(?:class|def)\s", ln) for ln in code):
        return None
    if not all(_STUB_LINE.match(ln) for ln in code):
        return None
    live = "\n".join(ln for ln in code if not ln.lstrip().startswith(("#", "//")))  # "# class TreeNode: ..."
    return frozenset(f for f in _FUNC.findall(live) if not f.startswith("__"))


def _section_of(line: str, current: str) -> str | None:
    """The section a heading line opens (example / constraints / followup / meta / statement), None if none.
    A bare "Input" / "Output" heading outside an example describes the input (Codeforces); "Note" inside the
    examples explains them."""
    m = _DASHED.match(line)
    h = (m.group("h") if m else (_HEADING.match(line).group("h") if _HEADING.match(line) else "")).lower()
    if not h:
        return None
    if h.startswith(("example", "sample")) or h in ("explanation",):
        return "example"
    if h.startswith(("input", "output")):
        # "Input: nums = [1,2]" inside an example; "Input Format" / "-----Input-----" describe the input
        bare = m is not None or "format" in h or not line.split(":", 1)[-1].strip() or ":" not in line
        return "constraints" if bare and current != "example" else "example"
    if h.startswith("constraint"):
        return "constraints"
    if h.startswith("follow"):
        return "followup"
    if h in ("tags", "time limit", "memory limit"):
        return "meta"  # Codeforces metadata: scrapes differ in it, and it does not define the problem
    return "example" if current == "example" else "statement"  # Note: part of the statement


def _wrapper(paragraph: str) -> bool:
    return bool(_WRAPPER.search(paragraph)) and len(paragraph.split()) <= MAX_WRAPPER_WORDS


def _trim_wrappers(paragraphs: list[str]) -> list[str]:
    """Drop instruction paragraphs at the start and end (by role), keeping at least one paragraph."""
    while len(paragraphs) > 1 and _wrapper(paragraphs[0]):
        paragraphs = paragraphs[1:]
    while len(paragraphs) > 1 and _wrapper(paragraphs[-1]):
        paragraphs = paragraphs[:-1]
    return paragraphs


def _examples(lines: list[str]) -> tuple[str, ...]:
    """Input / Output lines of each example block (a block starts at an "Example N" / "Examples" heading);
    explanations and notes dropped."""
    blocks: list[list[str]] = []
    keep = False
    for ln in lines:
        h = _HEADING.match(ln)
        name = h.group("h").lower() if h else ""
        if name.startswith(("example", "sample")) and not name.startswith(("sample input", "sample output")):
            blocks.append([])
            keep = False
            continue
        if not blocks:
            blocks.append([])
        if name.startswith(("input", "output", "sample input", "sample output")):
            keep = True
        elif name in ("explanation", "note", "notes"):
            keep = False
        if keep and ln.strip():
            blocks[-1].append(ln.strip())
    return tuple("\n".join(b) for b in blocks if b)


@lru_cache(maxsize=4096)
def code_sections(raw: str) -> CodeSections | None:
    """The sections of `raw` when it is a code problem (a starter stub, an example / constraints heading or a
    Codeforces dashed heading), else None. Cached: the cluster step asks once per candidate pair."""
    if not raw or not maybe_code(raw):
        return None
    lines = raw.replace("\xa0", " ").replace("\r\n", "\n").split("\n")
    parts: dict[str, list[str]] = {"statement": [], "example": [], "constraints": [], "followup": [], "meta": []}
    functions: set[str] = set()
    found = False
    section, i = "statement", 0
    while i < len(lines):
        ln = lines[i]
        if _FENCE.match(ln):
            j = next((k for k in range(i + 1, len(lines)) if _FENCE.match(lines[k])), len(lines))
            names = _stub(lines[i + 1:j])
            if names is None:
                parts[section].extend(lines[i:j + 1])
            else:
                functions |= names
                found = True
            i = j + 1
            continue
        if re.match(r"\s*class\s+Solution\b", ln):  # an unfenced stub runs to the end
            names = _stub(lines[i:])
            if names is not None:
                functions |= names
                found = True
                break
        new = _section_of(ln, section)
        if new is not None:
            section = new
        if not _WRAPPER_HEADING.match(ln) and (section == "statement" or not _wrapper(ln)):
            parts[section].append(ln)  # instructions after the examples ("Please complete the code below") dropped
        i += 1
    examples = _examples(parts["example"])
    constraints = "\n".join(parts["constraints"])
    if not (found or examples or constraints.strip()):
        return None  # no stub, no example with input / output, no constraints: not a code problem
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", "\n".join(parts["statement"])) if p.strip()]
    return CodeSections(statement="\n\n".join(_trim_wrappers(paragraphs)), examples=examples,
                        constraints=constraints, functions=frozenset(functions))


__all__ = ["CodeSections", "code_sections", "join_superscripts", "maybe_code"]
