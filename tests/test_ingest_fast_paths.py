"""The readers' fast paths give the answers of the plain code they replaced (issue 17).

Each shortcut is exact by construction; these hold it against the straightforward definition,
so an edit that breaks the reasoning fails here rather than moving a turn.
"""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.ingest import _time, codex, read_bytes
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


_REFERENCE_MINUTES: dict[str, float] = {}


def _iso_to_unix_as_first_written(value: object) -> float | None:
    """iso_to_unix before the minute cache implied its range check (issue 17, fourth round)."""
    if isinstance(value, str):
        if len(value) >= 20 and value[-1] == "Z" and value[16] == ":" and value[10] == "T":
            minute = value[:16]
            base = _REFERENCE_MINUTES.get(minute)
            if base is None:
                base = _time._slow(minute + ":00+00:00")
                if base is None:
                    return _time._slow(value)
                _REFERENCE_MINUTES[minute] = base
            try:
                seconds = float(value[17:-1])
            except ValueError:
                return _time._slow(value)
            if 0.0 <= seconds < 61.0:
                seconds += base
                return seconds if 0.0 <= seconds <= _time.LATEST else None
            return _time._slow(value)
        return _time._slow(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        if not 0 < value < 1e15:
            return None
        return _time.in_range(float(value) / 1000.0 if value > 1e11 else float(value))
    return None


_YEARS = st.sampled_from(["1969", "1970", "2025", "9999", "0001"])
_STAMPS = st.builds(
    lambda y, mo, d, sep, h, mi, s, tail: f"{y}-{mo}-{d}{sep}{h}:{mi}:{s}{tail}",
    _YEARS, st.sampled_from(["01", "12", "13"]), st.sampled_from(["01", "31"]),
    st.sampled_from(["T", " ", "t"]), st.sampled_from(["00", "23"]),
    st.sampled_from(["00", "59"]),
    st.sampled_from(["00", "03.004", "59.999", "60.5", "61", "nan", "1_0", " 5", "x"]),
    st.sampled_from(["Z", "+00:00", "", "z", ".5Z"]))


@settings(max_examples=400)
@given(st.lists(st.one_of(_STAMPS, st.text(max_size=26), st.integers(), st.floats(),
                          st.booleans(), st.none()), max_size=6))
def test_iso_to_unix_as_first_written(values: list) -> None:
    """The same answers, in any order of first and later sight of a minute."""
    for value in values + values:
        got, want = _time.iso_to_unix(value), _iso_to_unix_as_first_written(value)
        assert got == want or (got != got and want != want), value


def test_iso_to_unix_at_the_edges_as_first_written() -> None:
    edges = ["9999-12-31T23:59:60.5Z", "9999-12-31T23:59:59.5Z", "9999-12-31T23:58:60.5Z",
             "1970-01-01T00:00:00.000Z", "1969-12-31T23:59:59.999Z", "2025-11-20T10:15:1_0Z",
             "2025-11-20T10:15:nanZ", "2025-11-20 10:15:03.004Z"]
    for value in edges + edges:
        assert _time.iso_to_unix(value) == _iso_to_unix_as_first_written(value), value
