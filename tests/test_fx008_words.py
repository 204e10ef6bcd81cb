"""Every entry of user-correction's word lists, each in a message of its own.

The rule cases cover each line of the contract; these cover each word: a correction opener
after an assistant claim is flagged, a polite negative is not, a bare negation counts only with
a word of what is true after it.
"""

from __future__ import annotations

import pytest

from forensics.model import AssistantTurn, Session, UserTurn
from forensics.rules import registry

SPEC = registry()["FX008"]
CLAIM = "I changed the port in config.yaml to 3000 and restarted the api."


def _flagged(reply: str) -> list[int]:
    turns = [UserTurn(ordinal=1, anchor="u1", text="fix the port"),
             AssistantTurn(ordinal=2, anchor="a2", text=CLAIM),
             UserTurn(ordinal=3, anchor="u3", text=reply)]
    session = Session(id="words", agent="opencode", format="case", source="words", turns=turns)
    return [f.turn for f in SPEC.run(session)]


@pytest.mark.parametrize("opener", SPEC.params["strong_openers"])
def test_each_strong_opener_is_a_correction(opener: str) -> None:
    assert _flagged(f"{opener} — the port lives in .env") == [3]


@pytest.mark.parametrize("negation", SPEC.params["negation_openers"])
def test_each_negation_with_a_reference_is_a_correction(negation: str) -> None:
    assert _flagged(f"{negation}, config.yaml is not read at all") == [3]


@pytest.mark.parametrize("negation", SPEC.params["negation_openers"])
def test_each_negation_alone_is_not(negation: str) -> None:
    assert _flagged(f"{negation} hurry with the tests tomorrow") == []


@pytest.mark.parametrize("truth", SPEC.params["truth_words"])
def test_each_truth_word_makes_a_negation_a_correction(truth: str) -> None:
    assert _flagged(f"no {truth} xyz") == [3]


@pytest.mark.parametrize("polite", SPEC.params["polite_negatives"])
def test_each_polite_negative_is_not(polite: str) -> None:
    assert _flagged(f"{polite}, config.yaml looks good") == []


@pytest.mark.parametrize("mind", SPEC.params["change_of_mind"])
def test_each_change_of_mind_word_is_not(mind: str) -> None:
    assert _flagged(f"no, {mind} use toml for config.yaml") == []
