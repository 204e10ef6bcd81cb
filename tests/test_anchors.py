"""A finding about a tool call anchors on the record that holds the call, in every format.

Claude Code: the ``tool_use`` line (not the thinking line of the same message); Codex: the
``function_call`` line (not the reasoning item); opencode: the message. The fixtures in
tests/fixtures/anchors/ are small sessions in the real on-disk shapes: the same
``nohup python train.py … &`` launched twice, then a failed test run the assistant ignores.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from conftest import FIXTURES
from forensics import report
from forensics.engine import scan_session
from forensics.ingest import load

ANCHORS = FIXTURES / "anchors"


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _claude_line(path: Path, block_type: str, tool_id: str | None = None,
                 message_id: str | None = None) -> str:
    """The uuid of the line holding a content block of that type (and tool id / message)."""
    for line in _lines(path):
        content = line.get("message", {}).get("content")
        if line.get("type") != "assistant" or not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == block_type and (tool_id is None or block.get("id") == tool_id) \
                    and (message_id is None or line["message"]["id"] == message_id):
                return line["uuid"]
    raise AssertionError(f"no {block_type} line for {tool_id or message_id}")


def _codex_line(path: Path, call_id: str) -> str:
    for number, line in enumerate(_lines(path), 1):
        payload = line.get("payload", {})
        if payload.get("type") == "function_call" and payload.get("call_id") == call_id:
            return f"L{number}"
    raise AssertionError(call_id)


def _scan(path: Path):
    (session,) = load(path)
    return scan_session(session)


def test_claude_code_findings_anchor_on_the_tool_use_line() -> None:
    path = ANCHORS / "claude_two_launches.jsonl"
    result = _scan(path)
    by_code = {i.code: i for i in result.incidents}
    second = _claude_line(path, "tool_use", "toolu_01SecondLaunch00000000001")
    thinking = _claude_line(path, "thinking", message_id="msg_01TrainAgain0000000001")
    assert by_code["FX002"].anchor == second != thinking
    # the turn still starts at the thinking line: the anchor is the call's, not the turn's
    assert result.session.turn(by_code["FX002"].turn).anchor == thinking
    assert by_code["FX003"].anchor == _claude_line(path, "tool_use", "toolu_01PytestRun000000000001")


def test_codex_findings_anchor_on_the_function_call_line() -> None:
    path = ANCHORS / "codex_two_launches.jsonl"
    by_code = {i.code: i for i in _scan(path).incidents}
    assert by_code["FX002"].anchor == _codex_line(path, "call_SecondLaunch000000000001") == "L15"
    assert by_code["FX003"].anchor == _codex_line(path, "call_PytestRun0000000000001") == "L23"


def test_opencode_findings_anchor_on_the_message() -> None:
    seeds = FIXTURES / "seeds"
    expected = orjson.loads((seeds / "anchors.json").read_bytes())["seed_000_duplicate_launch"]
    by_code = {i.code: i for i in _scan(seeds / "seed_000_duplicate_launch.json").incidents}
    assert by_code["FX002"].anchor == expected["relaunch"]
    assert by_code["FX003"].anchor == expected["relaunch"]  # the message holding the failed call


def test_two_launch_example_finding_and_report_name_both_launches() -> None:
    """The issue's example: two ``nohup python train.py … &`` in a Claude Code file."""
    path = ANCHORS / "claude_two_launches.jsonl"
    result = _scan(path)
    incident = next(i for i in result.incidents if i.code == "FX002")
    first = _claude_line(path, "tool_use", "toolu_01FirstLaunch000000000001")
    second = _claude_line(path, "tool_use", "toolu_01SecondLaunch00000000001")
    launches = [(f.role, f.anchor) for f in incident.facts if f.kind == "launch"]
    assert launches == [("earlier launch", first), ("relaunch", second)]
    said = next(f for f in incident.facts if f.kind == "message")
    assert said.role == "user said it was up"
    assert said.quote == "great, it's running now. Also add a --seed flag to train.py"
    assert incident.severity == "high"
    assert incident.severity_reason == f'the user had said it was up ("{said.quote}")'

    cs = report.case_study(result, incident)
    labels = {s.ordinal: s.label for s in cs.timeline}
    assert labels[2] == "launch" and labels[6] == "launch"  # both launches in the chain
    text = report.render_incident(result, incident)
    assert "# A second train.py launched at turn 6 while the first was still running" in text
    assert "At **turn 6** the assistant sent the launch of `train.py` from **turn 2** again, " \
        "unchanged." in text
    assert "the user had said it was up (\"great, it's running now." in text
    assert "“great, it's running now. Also add a --seed flag to train.py”" in text


def test_a_medium_duplicate_says_which_launch_nothing_ended() -> None:
    path = ANCHORS / "codex_two_launches.jsonl"
    incident = next(i for i in _scan(path).incidents if i.code == "FX002")
    assert incident.severity == "medium"
    assert incident.severity_reason == (
        "nothing in the transcript ended the earlier launch (`python train.py --epochs 10 --lr "
        "3e-4` at L7)")


@pytest.mark.parametrize("name", ["claude_two_launches.jsonl", "codex_two_launches.jsonl"])
def test_the_second_launch_is_flagged_not_the_first(name: str) -> None:
    incidents = [i for i in _scan(ANCHORS / name).incidents if i.code == "FX002"]
    assert len(incidents) == 1
    assert [f.role for f in incidents[0].facts if f.kind == "launch"][-1] == "relaunch"
