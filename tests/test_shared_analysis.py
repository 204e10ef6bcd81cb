"""Facts shared through the session's ``Analysis`` (the runs, the ledger, the outcomes) give
every rule what it would compute alone: the same findings whichever rules ran before."""

from __future__ import annotations

import copy

import pytest

from forensics.analysis.session import Run, analysis_of
from forensics.model import AssistantTurn
from forensics.rules import registry
from forensics.rules._facts import runs
from forensics.analysis.shell import command_of
from rulecases import Case, load_cases

CASES = load_cases()


def _runs_by_definition(session) -> list[Run]:
    return [Run(t, c, session.result_for(c), command_of(c)) for t in session.turns
            if isinstance(t, AssistantTurn) for c in t.tool_calls]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_shared_runs_are_the_calls_with_their_results(case: Case) -> None:
    session = copy.deepcopy(case.session)
    assert runs(session) is analysis_of(session).runs  # one list for every rule
    assert runs(session) == _runs_by_definition(session)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_a_rule_finds_the_same_alone_and_after_every_other(case: Case) -> None:
    rules = list(registry().values())
    alone = {spec.code: list(spec.run(copy.deepcopy(case.session))) for spec in rules}
    shared = copy.deepcopy(case.session)
    after = {spec.code: list(spec.run(shared)) for spec in reversed(rules)}
    assert after == alone
