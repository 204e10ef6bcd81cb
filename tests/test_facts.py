"""Every rule's findings carry typed evidence (``Finding.facts``), built by the rule itself.

Over every rule case: each finding has facts, in transcript order, each anchored on a record of
the turn it names (the turn itself or one of its calls). Then, per rule, one case whose facts
are written out: what the failure was and the words that proved it, the claim, the re-sent
message and its original, the dangling call, the correction.
"""

from __future__ import annotations

import pytest

from forensics.findings import Evidence, Finding
from forensics.model import AssistantTurn
from forensics.rules import registry
from rulecases import Case, load_cases

CASES = [c for c in load_cases() if c.expect]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_finding_has_anchored_facts_in_order(case: Case) -> None:
    for finding in registry()[case.code].run(case.session):
        assert finding.facts, f"{case.id}: turn {finding.turn} has no facts"
        assert [f.turn for f in finding.facts] == sorted(f.turn for f in finding.facts)
        for fact in finding.facts:
            turn = case.session.turn(fact.turn)
            anchors = {turn.anchor} | ({c.anchor for c in turn.tool_calls}
                                       if isinstance(turn, AssistantTurn) else set())
            assert fact.anchor in anchors, f"{case.id}: {fact.role} anchored off its turn"


def _facts(case_id: str) -> list[tuple]:
    case = next(c for c in CASES if c.id == case_id)
    findings: list[Finding] = list(registry()[case.code].run(case.session))
    assert len(findings) == 1, case_id
    return [_row(f) for f in findings[0].facts]


def _row(f: Evidence) -> tuple:
    return (f.kind, f.role, f.turn, f.anchor, f.command, f.status, f.quote)


def test_ignored_tool_error_facts_name_the_failure_and_the_claim() -> None:
    assert _facts("FX003-claims-success") == [
        ("failure", "failed call", 3, "m3", "npm test", "exit 1",
         "FAIL src/cart.test.ts > applies discount\nTests 1 failed | 41 passed"),
        ("claim", "success claim", 4, "m4", None, None, "All tests pass ✅"),
    ]


def test_ignored_tool_error_quotes_the_status_line_it_judged_by() -> None:
    # the Codex output carries its status only in the text ("Process exited with code 2"): the
    # reader types it as exit 2, and the fact quotes the error line before it
    assert _facts("FX003-exit-in-text-only") == [
        ("failure", "failed call", 3, "m3", "make", "exit 2",
         "cc: error: main.c: No such file"),
        ("reply", "moved on", 4, "m4", None, None, "Next, let's write the docs."),
    ]


def test_user_resend_facts_hold_the_original_what_answered_it_and_the_repeat() -> None:
    rows = _facts("FX004-verbatim-after-empty")
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("message", "earlier message", 1), ("reply", "empty reply", 2), ("message", "repeat", 3)]
    assert rows[0][6] == rows[2][6] and rows[0][6].startswith("If a B200 machine")


def test_unverified_claim_facts_hold_the_green_run_the_edit_and_the_claim() -> None:
    assert _facts("FX005-edited-after-last-green-run") == [
        ("result", "last green test run", 3, "m3", "pytest -q", "ok", ""),
        ("edit", "edit after the last green run", 4, "m4", "edit", None, "src/sum.py"),
        ("claim", "test claim", 6, "m6", None, None,
         "Fixed the off-by-one in src/sum.py; all tests pass."),
    ]
    assert _facts("FX005-never-ran") == [
        ("claim", "test claim", 4, "m4", None, None, "All tests pass and lint is clean.")]


def test_retry_loop_facts_list_every_run() -> None:
    rows = _facts("FX006-three-identical-failures")
    assert [(r[1], r[2], r[5]) for r in rows] == [
        ("run 1 of 3", 2, "exit 1"), ("run 2 of 3", 4, "exit 1"), ("run 3 of 3", 6, "exit 1")]
    assert {r[6] for r in rows} == {"error TSN: Cannot find module './Tooltip'"}


def test_dangling_call_facts_hold_the_call_and_what_came_instead() -> None:
    assert _facts("FX007-claude-tool-use-without-result-user-writes") == [
        ("call", "dangling call", 2, "m2", "npx next build", "no result", ""),
        ("message", "user wrote next", 3, "m3", None, None, "is it stuck? continue please"),
    ]


def test_user_correction_facts_hold_the_correction_and_what_it_corrects() -> None:
    assert _facts("FX008-killed-working-server-high") == [
        ("call", "destroyed state", 2, "m2", "pkill -f node && npm run dev &", None, ""),
        ("claim", "corrected claim", 4, "m4", None, None, "Restarted the frontend."),
        ("message", "correction", 5, "m5", None, None,
         "No, the api was still running on node too and now it's down."),
    ]


def test_harness_events_have_their_event_as_a_fact() -> None:
    assert _facts("FX102-claude-synthetic-api-error") == [
        ("event", "provider error (auth)", 3, "u2", None, None,
         "API Error: 401 OAuth token has expired")]
    assert _facts("FX103-claude-compact-boundary") == [
        ("event", "compaction", 3, "m3", None, None, "auto")]
    assert _facts("FX101-claude-interrupt-line")[-1][:4] == ("event", "interruption", 4, "m4")
