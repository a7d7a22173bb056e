"""Math verdicts against the peer graders' own test cases (tests/data/math_conformance, data not code).

math_verify.jsonl was the tuning suite; hendrycks_math.jsonl and qwen25_math.jsonl are held out: their hashes
were recorded before any tuning (commit 71034bd) and must not change.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cotforge.curate.verify.conformance import (
    SUITES,
    Case,
    bare_answer,
    embed,
    file_sha256,
    load_suite,
    run_cases,
)
from cotforge.curate.verify.math_extract import last_box_group, strict_answer_part

DATA = Path(__file__).resolve().parent / "data" / "math_conformance"
HELD_OUT_SHA256 = {
    "hendrycks_math": "9f5c56bc7d10c256e400738a8e6ece1061f830f19378b258f0bd3e32329af4d3",
    "qwen25_math": "913e5cc9499ad2ad14d9071b3e5dd9c320fe1d74130aae42641b2b8b0b238667",
}
# lenient-mode acceptance: minimum agreement per suite
MIN_AGREE = {"math_verify": 0.95, "hendrycks_math": 15 / 16, "qwen25_math": 16 / 17}
# strict-mode disagreements that are neither a lenient disagreement nor "no box after the reasoning":
# the last box is an intermediate result and the final answer is a later "Final Answer:" line
STRICT_LAST_BOX_NOT_FINAL = {"test_all.py::test_math_extraction_additional_cases[17]"}


@pytest.fixture(scope="module")
def results():
    out = {}
    for suite in SUITES:
        header, cases = load_suite(DATA / f"{suite}.jsonl")
        out[suite] = {mode: run_cases(cases, suite, mode=mode, workers=2, timeout_s=20)
                      for mode in ("lenient", "strict")}
    return out


def test_suites_are_data_with_provenance():
    sizes = {}
    for suite in SUITES:
        header, cases = load_suite(DATA / f"{suite}.jsonl")
        assert {"repo", "commit", "licence", "path"} <= set(header) and len(header["commit"]) == 40
        assert len({c.id for c in cases}) == len(cases)
        sizes[suite] = len(cases)
    assert sizes == {"math_verify": 270, "hendrycks_math": 16, "qwen25_math": 17}


@pytest.mark.parametrize("suite", sorted(HELD_OUT_SHA256))
def test_held_out_suites_unchanged(suite):
    assert file_sha256(DATA / f"{suite}.jsonl") == HELD_OUT_SHA256[suite]


def test_embedding():
    assert bare_answer("$k = \\frac{1}{3}$") == "k = \\frac{1}{3}"
    assert bare_answer("7,425,000") == "7,425,000"
    assert bare_answer("10\\text{ units}") == "10\\text{ units}"
    assert bare_answer("\\$10") == "\\$10"
    assert bare_answer("Answer \\[ 9 \\]") is None
    assert bare_answer("28 percent") is None
    assert bare_answer("$\\boxed{28}$ pct") is None
    case = Case("x", "9", "9", True)
    assert embed(case).endswith("</think>\n\nSo the final answer is $\\boxed{9}$.")
    assert embed(Case("y", "9", "<think>a</think> \\boxed{9}", True)) == "<think>a</think> \\boxed{9}"


def test_bad_case_line_names_file_and_line(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text('{"header": {}}\n{"id": "a", "gold": "1"}\n')
    with pytest.raises(ValueError, match=r"s\.jsonl:2"):
        load_suite(p)


@pytest.mark.slow
@pytest.mark.parametrize("suite", SUITES)
def test_lenient_agreement_and_no_false_accepts(results, suite):
    res = results[suite]["lenient"]
    assert [r.case.id for r in res if r.false_accept] == []
    assert sum(r.agrees for r in res) / len(res) >= MIN_AGREE[suite] - 1e-9


@pytest.mark.parametrize("suite", SUITES)
def test_strict_no_false_accepts_and_every_disagreement_explained(results, suite):
    lenient = {r.case.id: r for r in results[suite]["lenient"]}
    unexplained = []
    for r in results[suite]["strict"]:
        assert not r.false_accept, r.case.id
        if r.agrees or not lenient[r.case.id].agrees:
            continue  # agrees, or the same disagreement as lenient mode (a comparison, not extraction)
        part = strict_answer_part(r.response)
        if part is not None and last_box_group(part) is None and r.status == "no_answer":
            continue  # not boxed after the reasoning block: strict mode has no answer by design
        if r.case.id in STRICT_LAST_BOX_NOT_FINAL:
            continue
        unexplained.append((r.case.id, r.status, r.extracted))
    assert unexplained == []
