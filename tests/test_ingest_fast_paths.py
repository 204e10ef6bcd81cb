"""The readers' fast paths give the answers of the plain code they replaced (issue 17).

Each shortcut is exact by construction; these hold it against the straightforward definition,
so an edit that breaks the reasoning fails here rather than moving a turn.
"""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.ingest import codex, read_bytes
from forensics.model import AssistantTurn, UserTurn

_SPACES = [chr(c) for c in range(0x110000) if chr(c).isspace() or not chr(c).split()]
_WORDY = st.text(st.sampled_from(_SPACES + list("ab\u00e9\u4e2d")), max_size=12)


def test_blank_is_an_empty_fold_for_every_character() -> None:
    for c in range(0x110000):
        ch = chr(c)
        assert codex._blank(ch) == (not codex._norm(ch)), hex(c)


@given(_WORDY)
def test_blank_is_an_empty_fold(text: str) -> None:
    assert codex._blank(text) == (not codex._norm(text))


@given(_WORDY, _WORDY)
def test_same_is_equal_folds(one: str, other: str) -> None:
    reader = codex._Reader("t.jsonl")
    assert reader._same(one, other) == (codex._norm(one) == codex._norm(other))


def _rollout(*payloads: tuple[str, dict]) -> bytes:
    lines = [{"timestamp": "2025-11-20T10:15:03.004Z", "type": "session_meta",
              "payload": {"id": "s"}}]
    lines += [{"timestamp": f"2025-11-20T10:15:{i + 4:02d}.000Z", "type": kind, "payload": p}
              for i, (kind, p) in enumerate(payloads)]
    return b"\n".join(orjson.dumps(x) for x in lines)


def _user_item(text: str) -> tuple[str, dict]:
    return "response_item", {"type": "message", "role": "user",
                             "content": [{"type": "input_text", "text": text}]}


def _said(text: str) -> tuple[str, dict]:
    return "response_item", {"type": "message", "role": "assistant",
                             "content": [{"type": "output_text", "text": text}]}


@settings(max_examples=60)
@given(_WORDY, _WORDY, st.booleans())
def test_echoes_are_dropped_by_their_folded_text(said: str, echo: str, echo_first: bool) -> None:
    """An echo event whose folded text is the item's is dropped, whichever line comes first;
    another text, or a blank one, is kept or skipped as the plain comparison decides."""
    event = ("event_msg", {"type": "agent_message", "message": echo})
    steps = [event, _said(said)] if echo_first else [_said(said), event]
    [s] = read_bytes(_rollout(_user_item("go"), *steps), source="t.jsonl", format="codex")
    [step] = [t for t in s.turns if isinstance(t, AssistantTurn)]
    kept_echo = bool(codex._norm(echo)) and codex._norm(echo) != codex._norm(said)
    assert step.part_kinds.count("agent_message") == int(kept_echo)


@settings(max_examples=60)
@given(_WORDY, _WORDY)
def test_user_echo_is_dropped_by_its_folded_text(typed: str, echo: str) -> None:
    event = ("event_msg", {"type": "user_message", "message": echo})
    [s] = read_bytes(_rollout(_user_item(typed), event), source="t.jsonl", format="codex")
    users = [t.text for t in s.turns if isinstance(t, UserTurn)]
    expected = [typed] if codex._norm(typed) else []
    if codex._norm(echo) and codex._norm(echo) != codex._norm(typed):
        expected.append(echo)
    assert users == expected
