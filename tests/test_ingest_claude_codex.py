"""Claude Code and Codex readers.

Fixtures are ours (tests/fixtures/ingest/claude_*, codex_*); the format examples and the real
corpus in ../shared are read when present and skipped otherwise.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CORPUS, FIXTURES, FORMAT_EXAMPLES, REPO, needs_shared
from welltyped import assert_well_typed
from forensics.errors import ForensicsError, IngestError, UnknownFormatError
from forensics.ingest import claude_code, codex, load, read_bytes
from forensics.ingest._time import iso_to_unix
from forensics.model import AssistantTurn, EventTurn, Session, ToolResultTurn, UserTurn

INGEST = FIXTURES / "ingest"


def kinds(session: Session) -> list[str]:
    return [t.event if isinstance(t, EventTurn) else t.kind for t in session.turns]


def uid(n: int) -> str:
    """The uuid our Claude Code fixtures give their n-th line with a uuid."""
    return f"0a1b2c3d-0000-4000-8000-{n:012d}"


# -- Claude Code fixture ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def claude_basic() -> Session:
    [s] = load(INGEST / "claude_basic.jsonl")
    return s


def test_claude_basic_turn_sequence(claude_basic: Session) -> None:
    assert kinds(claude_basic) == [
        "injected", "user", "command", "user",  # caveat, /model opus, its stdout, the prompt
        "assistant", "tool_result", "tool_result",  # one message.id split around a result
        "assistant", "tool_result",
        "assistant", "tool_result", "interrupt",  # rejected edit, then the interrupt marker
        "user", "assistant", "user",  # (no content) reply, then the re-sent prompt
        "retry", "assistant", "api_error",  # harness retry, synthetic API error line
        "user", "assistant",  # Korean retry request and the real answer
        "user",  # queued_command typed while busy
        "notification", "shell", "shell", "injected",  # task notification, ! lsof, No response
        "compaction", "injected",  # compact boundary, compaction summary
        "injected", "user",  # IDE context block, the human's text with an image
        "assistant", "tool_result", "assistant",  # e2e timeout
    ]
    assert [t.ordinal for t in claude_basic.turns] == list(range(1, 33))
    assert claude_basic.id == "5d2e8f41-7c3a-4b9e-a1d6-3f8c2e9b7a10"
    assert claude_basic.parent_id is None
    assert claude_basic.agent_version == "2.1.90"
    assert claude_basic.models == ["claude-sonnet-4-5-20250929"]
    assert claude_basic.project_dir == "/home/dev/shop"
    assert claude_basic.title == "Fix double discount in cart"
    assert claude_basic.started == pytest.approx(iso_to_unix("2026-03-14T09:00:03.411Z"))
    assert claude_basic.ended > claude_basic.started


def test_claude_split_message_is_one_turn_before_its_results(claude_basic: Session) -> None:
    turn = claude_basic.turn(5)
    assert isinstance(turn, AssistantTurn)
    assert turn.anchor == uid(5) and turn.line == 7
    assert turn.message_id == "msg_01AbCdEfGhJkLmNoPqRsTuVw"
    assert turn.text == "Starting the API server, then the tests."  # the empty chunk is dropped
    assert turn.reasoning == "Server first, in the background, then the tests."
    assert turn.part_kinds == ["thinking", "text", "text", "tool_use", "tool_use"]
    assert [(c.command, c.background, c.anchor) for c in turn.tool_calls] == [
        ("npm run start:api", True, uid(8)),
        ("npm test", False, uid(10)),  # a line after the first call's result, same message
    ]
    assert turn.finish == "tool_use" and turn.tokens_out == 141
    for call in turn.tool_calls:
        result = claude_basic.result_for(call)
        assert result is not None and result.ordinal > turn.ordinal
        assert claude_basic.call_for(result)[0] is turn


def test_claude_tool_results(claude_basic: Session) -> None:
    background, failed, grep = (claude_basic.turn(n) for n in (6, 7, 9))
    assert isinstance(failed, ToolResultTurn)
    assert (failed.anchor, failed.name, failed.exit_code, failed.is_error) == (
        uid(11), "Bash", 1, True)
    assert failed.output.startswith("Exit code 1\n FAIL")
    assert (background.exit_code, background.is_error, background.aborted) == (None, False, False)
    assert (grep.exit_code, grep.is_error) == (None, False)
    rejected = claude_basic.turn(11)
    assert (rejected.name, rejected.is_error, rejected.aborted) == ("Edit", True, True)
    assert claude_basic.turn(10).aborted is True  # the interrupt cut the edit short
    timeout = claude_basic.turn(31)
    assert (timeout.timed_out, timeout.is_error, timeout.exit_code) == (True, True, None)
    assert claude_basic.counts()["failed_tools"] == 3


def test_claude_user_turns_are_what_the_human_typed(claude_basic: Session) -> None:
    users = [t for t in claude_basic.turns if isinstance(t, UserTurn)]
    assert [(t.text, t.command, t.queued, t.images) for t in users] == [
        ("opus", "/model", False, 0),
        ("Start the API server in the background and run the unit tests.", None, False, 0),
        ("why is the discount applied twice?", None, False, 0),
        ("why is the discount applied twice?", None, False, 0),
        ("다시 해줘", None, False, 0),
        ("also check the coupon tests", None, True, 0),
        ("[Image #1] run the e2e suite, the checkout page still shows 72.90", None, False, 1),
    ]
    assert users[0].arguments == "opus"
    assert users[2].anchor == uid(18) and users[3].anchor == uid(20)


def test_claude_empty_and_error_replies(claude_basic: Session) -> None:
    empty = claude_basic.turn(14)
    assert isinstance(empty, AssistantTurn)
    assert (empty.text, empty.visible, empty.error, empty.finish) == ("", False, None, "end_turn")
    assert empty.part_kinds == ["text"]
    error = claude_basic.turn(17)
    assert isinstance(error, AssistantTurn) and error.error is not None
    assert error.error.name == "api_error" and error.error.message.startswith("API Error: 529")
    assert error.model == "<synthetic>" and error.anchor == uid(21)
    assert "<synthetic>" not in claude_basic.models
    event = claude_basic.turn(18)
    assert (event.event, event.anchor, event.detail) == ("api_error", uid(21), {"error": "unknown"})
    retry = claude_basic.turn(16)
    assert retry.detail == {"subtype": "api_error", "attempt": 1, "max_retries": 10,
                            "status": 529}
    assert claude_basic.turn(25).text == "No response requested."


def test_claude_harness_lines_are_events(claude_basic: Session) -> None:
    shell = claude_basic.turn(23)
    assert shell.event == "shell" and shell.detail == {"command": "lsof -i :4000"}
    assert claude_basic.turn(22).text.startswith("<task-notification>")
    assert claude_basic.turn(26).detail == {"subtype": "compact_boundary", "trigger": "auto"}
    assert claude_basic.turn(27).detail == {"compact_summary": True}
    assert [str(i) for i in claude_basic.issues] == [
        f"{INGEST / 'claude_basic.jsonl'}:36: 1 record of unknown type 'hologram-sync' skipped"]


def test_claude_subagent_file() -> None:
    [s] = load(INGEST / "claude_subagent.jsonl")
    assert s.id == "agent-a3f9c2e1b7d4e6f8"
    assert s.parent_id == "5d2e8f41-7c3a-4b9e-a1d6-3f8c2e9b7a10"
    assert kinds(s) == ["user", "assistant", "tool_result", "assistant"]
    assert all(t.sidechain for t in s.turns if isinstance(t, AssistantTurn))
    assert s.models == ["claude-haiku-4-5-20251001"]
    assert s.turn(3).name == "Grep" and s.issues == []


def test_claude_subagent_by_file_name(tmp_path: Path) -> None:
    """Older builds wrote agent-<id>.jsonl beside the session, without agentId fields."""
    lines = (INGEST / "claude_subagent.jsonl").read_text().splitlines()
    docs = []
    for line in lines:
        doc = json.loads(line)
        doc.pop("agentId", None)
        doc["isSidechain"] = False
        docs.append(json.dumps(doc))
    path = tmp_path / "agent-5e6f7a8b.jsonl"
    path.write_text("\n".join(docs) + "\n")
    [s] = load(path)
    assert (s.id, s.parent_id) == ("agent-5e6f7a8b", "5d2e8f41-7c3a-4b9e-a1d6-3f8c2e9b7a10")


def test_claude_acp_and_powershell_shells() -> None:
    """Zed's ACP wraps Bash as mcp__acp__Bash and reports "Exited with code N." in the text."""
    env = {"sessionId": "s-acp", "cwd": "C:\\work", "version": "2.1.22", "isSidechain": False}
    calls = [("toolu_a", "mcp__acp__Bash", "git show HEAD:src/x.js"),
             ("toolu_b", "PowerShell", "Get-ChildItem -Force"),
             ("toolu_c", "mcp__acp__Bash", "npm run watch")]
    outputs = ["Exited with code 128.Signal `Hangup: 1`. Final output:\n\nfatal: bad path",
               "Mode  Name\n----  ----\nd---  src", "Timed out. New output:\n\n"]
    lines = [dict(env, type="user", uuid="u0", message={"role": "user", "content": "go"})]
    for i, ((call_id, name, command), output) in enumerate(zip(calls, outputs)):
        lines.append(dict(env, type="assistant", uuid=f"a{i}", message={
            "id": f"msg_{i}", "model": "claude-opus-4-5", "role": "assistant", "content": [
                {"type": "tool_use", "id": call_id, "name": name, "input": {"command": command}}]}))
        lines.append(dict(env, type="user", uuid=f"r{i}", message={"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call_id,
             "content": [{"type": "text", "text": output}]}]}))
    [s] = read_bytes(b"\n".join(orjson.dumps(x) for x in lines), source="acp.jsonl")
    assert [c.command for t in s.turns if isinstance(t, AssistantTurn) for c in t.tool_calls] == [
        command for _, _, command in calls]
    results = [t for t in s.turns if isinstance(t, ToolResultTurn)]
    assert [(r.name, r.exit_code, r.timed_out) for r in results] == [
        ("mcp__acp__Bash", 128, False), ("PowerShell", None, False), ("mcp__acp__Bash", None, True)]


def test_claude_sidechain_lines_in_the_parent_file_become_a_linked_session(
        tmp_path: Path) -> None:
    main = (INGEST / "claude_basic.jsonl").read_bytes().splitlines(keepends=True)
    side = (INGEST / "claude_subagent.jsonl").read_bytes().splitlines(keepends=True)
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"".join(main[:10] + side + main[10:]))
    parent, child = load(path)
    [whole] = load(INGEST / "claude_basic.jsonl")
    assert [t.anchor for t in parent.turns] == [t.anchor for t in whole.turns]
    assert (child.id, child.parent_id) == ("agent-a3f9c2e1b7d4e6f8", parent.id)
    assert kinds(child) == ["user", "assistant", "tool_result", "assistant"]
    assert [t.ordinal for t in child.turns] == [1, 2, 3, 4]
    assert child.models == ["claude-haiku-4-5-20251001"]


# -- Codex fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def codex_basic() -> Session:
    [s] = load(INGEST / "codex_basic.jsonl")
    return s


def test_codex_basic_turn_sequence(codex_basic: Session) -> None:
    assert [(t.anchor, t.event if isinstance(t, EventTurn) else t.kind)
            for t in codex_basic.turns] == [
        ("L2", "injected"), ("L3", "injected"), ("L4", "injected"),  # developer, AGENTS.md, env
        ("L7", "user"),  # written twice (L7 item, L8 event): one turn, at the item
        ("L10", "assistant"), ("L12", "tool_result"),
        ("L16", "assistant"), ("L19", "turn_complete"),
        ("L22", "user"), ("L24", "assistant"), ("L26", "abort"), ("L27", "injected"),
        ("L30", "user"), ("L33", "turn_complete"),  # a turn with no assistant output at all
        ("L36", "user"), ("L39", "assistant"), ("L41", "turn_complete"),  # reasoning only
    ]
    assert codex_basic.id == "019ba2f2-5f36-7eb1-a791-e8b7d5a45da1"
    assert (codex_basic.agent_version, codex_basic.project_dir) == ("0.77.0", "/home/dev/shop")
    assert codex_basic.models == ["gpt-5.2-codex"] and codex_basic.issues == []
    assert codex_basic.started == pytest.approx(iso_to_unix("2026-01-09T13:00:00.100Z"))


def test_codex_step_call_and_merged_result(codex_basic: Session) -> None:
    step = codex_basic.by_anchor("L10")
    assert isinstance(step, AssistantTurn)
    assert step.part_kinds == ["reasoning", "function_call"]
    assert step.reasoning == "**Running the unit tests**"  # the agent_reasoning echo is dropped
    [call] = step.tool_calls
    assert (call.name, call.command, call.anchor) == ("shell", "npm test", "L11")
    assert call.input["workdir"] == "/home/dev/shop"
    assert (step.tokens_in, step.tokens_out) == (9120, 412)
    results = [t for t in codex_basic.turns if isinstance(t, ToolResultTurn)]
    assert len(results) == 1  # exec_command_end and function_call_output: one result
    [result] = results
    assert (result.anchor, result.call_id, result.name, result.exit_code) == (
        "L12", call.call_id, "shell", 1)
    assert result.output.startswith(" FAIL  src/cart.test.ts")
    assert result.duration_ms == 4512.0
    reply = codex_basic.by_anchor("L16")
    assert reply.text.startswith("The cart test fails") and reply.tokens_out == 58
    done = codex_basic.by_anchor("L19")
    assert done.detail["last_agent_message"] == reply.text


def test_codex_aborted_and_silent_turns(codex_basic: Session) -> None:
    aborted = codex_basic.by_anchor("L24")
    assert aborted.aborted is True and aborted.reasoning == ""
    assert aborted.tool_calls[0].command == "npm run dev"
    assert codex_basic.result_for(aborted.tool_calls[0]) is None  # dangling, no invented result
    assert codex_basic.by_anchor("L26").detail == {"reason": "interrupted"}
    silent_user = codex_basic.by_anchor("L30")
    assert silent_user.text == "就这样吧，谢谢"
    nxt = codex_basic.turn(silent_user.ordinal + 1)
    assert nxt.event == "turn_complete" and nxt.detail == {"last_agent_message": None}
    thinking = codex_basic.by_anchor("L39")
    assert (thinking.text, thinking.visible, thinking.reasoning) == (
        "", False, "**Listing remaining work**")
    assert thinking.part_kinds == ["reasoning"]


def test_codex_exec_newer_shapes() -> None:
    [s] = load(INGEST / "codex_exec.jsonl")
    assert s.parent_id == "019ba2f2-5f36-7eb1-a791-e8b7d5a45da1"
    assert s.agent_version == "0.128.0" and s.models == ["gpt-5.5"]
    assert kinds(s) == [
        "user", "assistant", "tool_result", "assistant", "tool_result", "assistant",
        "tool_result", "assistant", "tool_result", "assistant", "tool_result", "assistant",
        "turn_complete", "user", "retry", "api_error", "turn_complete"]
    assert s.turn(1).anchor == "L5"  # user_message event came first; the item anchors it
    first = s.turn(2)
    assert first.text == "I'll run the type checker first." and first.part_kinds == [
        "message", "function_call"]
    by_name = {t.name: t for t in s.turns if isinstance(t, ToolResultTurn)}
    assert by_name["exec_command"].exit_code is None  # the dev server: still running
    tsc = s.turn(3)
    assert (tsc.exit_code, tsc.duration_ms) == (2, 2910.3)
    assert (by_name["apply_patch"].exit_code, by_name["apply_patch"].output) == (
        0, "Success. Updated the following files:\nM src/cart.ts\n")
    assert (by_name["shell_command"].exit_code, by_name["shell_command"].duration_ms) == (
        0, 3200.0)
    assert by_name["exec"].exit_code is None  # code mode reports no exit status
    assert by_name["exec"].output.startswith("Script completed")
    calls = [c for t in s.turns if isinstance(t, AssistantTurn) for c in t.tool_calls]
    assert [(c.name, c.command) for c in calls] == [
        ("exec_command", "npx tsc --noEmit"), ("apply_patch", None),
        ("shell_command", "npm test"), ("exec_command", "npm run dev"), ("exec", None)]
    assert s.turn(16).text.startswith("stream disconnected")


def test_codex_pre_envelope_rollout_when_named() -> None:
    """Early rollouts: a bare meta line, then bare response items and state records."""
    lines = [
        {"id": "0b5c7e2a-1111-4222-8333-444455556666", "timestamp": "2025-05-02T10:00:00.000Z",
         "instructions": None},
        {"record_type": "state"},
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "list the files"}]},
        {"type": "function_call", "name": "shell", "call_id": "call_1",
         "arguments": "{\"command\": [\"bash\", \"-lc\", \"ls\"]}"},
        {"type": "function_call_output", "call_id": "call_1",
         "output": "{\"output\": \"a.txt\\n\", \"metadata\": {\"exit_code\": 0}}"},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "One file: a.txt"}]},
    ]
    data = b"\n".join(orjson.dumps(x) for x in lines)
    [s] = read_bytes(data, source="old.jsonl", format="codex")
    assert s.id == "0b5c7e2a-1111-4222-8333-444455556666" and s.issues == []
    assert [(t.anchor, t.kind) for t in s.turns] == [
        ("L3", "user"), ("L4", "assistant"), ("L5", "tool_result"), ("L6", "assistant")]
    assert s.turn(2).tool_calls[0].command == "ls" and s.turn(3).exit_code == 0


@pytest.mark.parametrize("argv, expected", [
    (["bash", "-lc", "npm test"], "npm test"),
    (["/bin/zsh", "-lc", "cd app && npm run dev"], "cd app && npm run dev"),
    (["C:\\WINDOWS\\System32\\WindowsPowerShell\\v1.0\\powershell.exe", "-Command",
      "Get-ChildItem"], "Get-ChildItem"),
    (["git", "commit", "-m", "two words"], "git commit -m 'two words'"),
    ("npm run dev", "npm run dev"),
    ([], None),
    ([1, 2], None),
])
def test_codex_shell_command_unwraps_wrappers(argv, expected) -> None:
    assert codex.shell_command(argv) == expected


@pytest.mark.parametrize("raw, exit_code, duration, is_error", [
    ('{"output":"ok\\n","metadata":{"exit_code":0,"duration_seconds":1.25}}', 0, 1250.0, False),
    ("Exit code: 127\nWall time: 0.3 seconds\nOutput:\nbash: pnpm: command not found", 127, 300.0,
     False),
    ("Chunk ID: 1\nWall time: 0.5 seconds\nProcess exited with code 2\nOutput:\nx", 2, 500.0,
     False),
    ("Chunk ID: 1\nWall time: 1.0 seconds\nProcess running with session ID 9\nOutput:\n", None,
     1000.0, False),
    ("Exit code: 0\nOutput:\nProcess exited with code 3\n", 0, None, False),  # body ignored
    ("execution error: Io(Custom { kind: Other })", None, None, True),
    ("{not json", None, None, False),
    ([{"type": "input_text", "text": "Script completed"}], None, None, False),
    # codex-rs SandboxErr::Denied: the status is only in the text
    ("failed in sandbox LinuxSeccomp with execution error: sandbox denied exec error, exit "
     "code: 1, stdout: , stderr: open /home/u/.cache/go-build/x: permission denied", 1, None,
     True),
    ("exec_command failed: missing required parameter: cmd", None, None, True),
    ([{"type": "input_text", "text": "Script failed\nWall time 0.1 seconds\nOutput:\n"},
      {"type": "input_text", "text": "Script error:\napply_patch verification failed: x"}],
     None, None, True),
    ([{"type": "input_text", "text": "Script running with cell ID 1\nWall time 10.1 seconds"}],
     None, None, False),
])
def test_codex_output_parsing(raw, exit_code, duration, is_error) -> None:
    parsed = codex._parse_output(raw)
    assert (parsed["exit_code"], parsed["duration_ms"], parsed["is_error"]) == (
        exit_code, duration, is_error)


def test_codex_text_only_statuses_are_typed_at_read_time() -> None:
    """A sandbox denial, a sandbox timeout and a failed code-mode cell are failed results as
    read; a result with no status at all is marked as having its status only in the text."""
    outputs = [
        ("function_call_output", "failed in sandbox MacosSeatbelt with execution error: sandbox "
         "denied exec error, exit code: 2, stdout: , stderr: ls: /x: Operation not permitted"),
        ("function_call_output", "failed in sandbox LinuxSeccomp with execution error: command "
         "timed out"),
        ("custom_tool_call_output", [
            {"type": "input_text", "text": "Script failed\nWall time 0.0 seconds\nOutput:\n"},
            {"type": "input_text", "text": "Script error:\nTypeError: x is not a function"}]),
        ("custom_tool_call_output", [{"type": "input_text", "text": "Script completed\nOutput:\nok"}]),
    ]
    lines = [{"timestamp": "2025-11-20T10:00:00.000Z", "type": "session_meta",
              "payload": {"id": "0b5c7e2a-1111-4222-8333-444455556667", "cwd": "/w"}}]
    for i, (kind, output) in enumerate(outputs):
        call = "custom_tool_call" if kind.startswith("custom") else "function_call"
        lines.append({"timestamp": "2025-11-20T10:00:01.000Z", "type": "response_item",
                      "payload": {"type": call, "name": "exec" if call != "function_call"
                                  else "shell", "call_id": f"c{i}",
                                  "arguments": '{"command": ["bash", "-lc", "ls /x"]}',
                                  "input": "text('hi')"}})
        lines.append({"timestamp": "2025-11-20T10:00:02.000Z", "type": "response_item",
                      "payload": {"type": kind, "call_id": f"c{i}", "output": output}})
    [s] = read_bytes(b"\n".join(orjson.dumps(x) for x in lines), source="t.jsonl",
                     format="codex")
    results = [t for t in s.turns if isinstance(t, ToolResultTurn)]
    denied, timed_out, cell_failed, cell_ok = results
    assert (denied.is_error, denied.exit_code, denied.status_in_text) == (True, 2, False)
    assert denied.error.startswith("failed in sandbox MacosSeatbelt")
    assert (timed_out.timed_out, timed_out.failed) == (True, True)
    assert (cell_failed.is_error, cell_failed.error) == (True, "TypeError: x is not a function")
    assert (cell_ok.failed, cell_ok.status_in_text) == (False, True)


# -- format examples ----------------------------------------------------------------------------


@needs_shared
def test_format_example_claude_code() -> None:
    [s] = load(FORMAT_EXAMPLES / "claude-code-session.jsonl")
    assert kinds(s) == ["user", "assistant", "tool_result", "assistant", "tool_result",
                        "interrupt", "user", "assistant", "api_error"]
    assert s.title == "Vitest discount test failure and dev server"
    split = s.turn(2)
    assert split.anchor == "e2a4b6c8-1d3f-4a5b-9c7e-0f2d4b6a8c91"
    assert split.part_kinds == ["thinking", "text", "tool_use"]
    assert split.tool_calls[0].anchor == "a9c3e5f7-0b2d-4f6a-8c1e-3d5f7b9a1c24"
    assert (s.turn(3).exit_code, s.turn(3).is_error) == (1, True)
    assert (s.turn(5).exit_code, s.turn(5).is_error) == (None, False)
    assert s.turn(4).aborted is True
    assert s.turn(1).text == s.turn(7).text
    assert s.turn(8).error.name == "api_error"


@needs_shared
def test_format_example_codex() -> None:
    [s] = load(FORMAT_EXAMPLES / "codex-rollout.jsonl")
    assert [(t.anchor, t.event if isinstance(t, EventTurn) else t.kind) for t in s.turns] == [
        ("L2", "injected"), ("L5", "user"), ("L7", "assistant"), ("L10", "tool_result"),
        ("L13", "assistant"), ("L15", "turn_complete"), ("L18", "user"), ("L20", "assistant"),
        ("L21", "abort")]
    result = s.turn(4)
    assert (result.exit_code, result.call_id) == (1, "call_Jq3vT8sLw2Rk5nYpXe9bD1aF")
    assert s.turn(3).tool_calls[0].command == "npm test"
    assert s.turn(8).aborted is True and s.models == ["gpt-5-codex"]


# -- the real corpus ----------------------------------------------------------------------------


def _manifest() -> dict[str, dict[str, int]]:
    """P/T/E columns of corpus/MANIFEST.md, keyed by local file name."""
    out: dict[str, dict[str, int]] = {}
    path = CORPUS / "MANIFEST.md"
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith(("| `claude/", "| `codex/")):
            continue
        cells = [c.strip() for c in line.split("|")]
        name = cells[1].strip("`")
        try:
            out[name] = {"P": int(cells[9]), "T": int(cells[10]), "E": int(cells[11])}
        except (IndexError, ValueError):
            continue
    return out


def _corpus(sub: str) -> list[Path]:
    d = CORPUS / sub
    return sorted(d.glob("*.jsonl")) if d.is_dir() else []


@needs_shared
@pytest.mark.parametrize("path", _corpus("claude") + _corpus("codex"), ids=lambda p: p.name)
def test_corpus_file_reads_plausibly(path: Path) -> None:
    sessions = load(path)
    s = sessions[0]
    expected = _manifest().get(f"{path.parent.name}/{path.name}")
    counts = {k: sum(x.counts()[k] for x in sessions) for k in s.counts()}
    assert all(x.agent == ("claude-code" if path.parent.name == "claude" else "codex")
               for x in sessions)
    assert all(x.parent_id == s.id for x in sessions[1:])
    assert s.counts()["user"] >= 1 and s.counts()["assistant"] >= 1
    assert s.issues == [], [str(i) for i in s.issues]
    for x in sessions:
        assert [t.ordinal for t in x.turns] == list(range(1, len(x.turns) + 1))
        assert all(t.anchor for t in x.turns)
    if expected is None:
        return
    # The manifest's columns are rough heuristics: tool calls match within a few (Codex web
    # searches are calls here), failures within a factor (we also count apply_patch failures,
    # exit codes from exec_command_end, sandbox execution errors, failed code-mode cells).
    assert abs(counts["tool_calls"] - expected["T"]) <= max(5, expected["T"] // 10)
    assert expected["E"] // 2 <= counts["failed_tools"] <= expected["E"] * 2 + 6
    assert counts["tool_result"] <= counts["tool_calls"] + 2
    if "jazzyalex" not in path.name:  # schema fixtures
        assert counts["user"] >= expected["P"] * 0.8


@needs_shared
def test_corpus_claude_subagent_is_linked() -> None:
    [s] = load(CORPUS / "claude" / "Damon-Salvetore__claude-code__agent-a9645e5cae9c1a445.jsonl")
    assert s.id == "agent-a9645e5cae9c1a445"
    assert s.parent_id == "6e901229-6912-48e3-8e8a-cc49793fa4a8"


@needs_shared
def test_corpus_claude_api_errors_and_queued_prompts() -> None:
    [s] = load(CORPUS / "claude" / "Eduardodmb__ClaudeHome__71b482a4-915a-4d69-80cb-04c122118ed3"
               ".jsonl")
    errors = [t for t in s.turns if isinstance(t, AssistantTurn) and t.error]
    events = [t for t in s.turns if isinstance(t, EventTurn) and t.event == "api_error"]
    assert len(errors) == len(events) == 7
    [s] = load(CORPUS / "claude" / "akshatairan47-dot__pv-case-review__claude-code-session.jsonl")
    queued = [t for t in s.turns if isinstance(t, UserTurn) and t.queued]
    assert [t.text for t in queued][:1] == ["no wait"]


# -- bad input ----------------------------------------------------------------------------------

READERS = {"claude-code": claude_code, "codex": codex}
SAMPLES = {"claude-code": INGEST / "claude_basic.jsonl", "codex": INGEST / "codex_basic.jsonl"}


def test_empty_file_is_an_ingest_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    with pytest.raises(IngestError) as info:
        load(path)
    assert info.value.path == str(path) and "empty" in str(info.value)


@pytest.mark.parametrize("fmt", sorted(READERS))
def test_nothing_readable_names_the_path_and_line(fmt: str) -> None:
    with pytest.raises(IngestError) as info:
        READERS[fmt].read_stream(io.BytesIO(b"\n\nnot json at all\n"), "bad.jsonl")
    assert (info.value.path, info.value.line) == ("bad.jsonl", 3)


def test_binary_file_is_unknown_format(tmp_path: Path) -> None:
    path = tmp_path / "blob.jsonl"
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(UnknownFormatError):
        load(path)


def test_json_of_another_kind_is_unknown_format(tmp_path: Path) -> None:
    path = tmp_path / "package.json"
    path.write_text('{"name": "shop", "version": "1.0.0", "scripts": {"test": "vitest"}}\n')
    with pytest.raises(UnknownFormatError) as info:
        load(path)
    assert str(path) in str(info.value)


def test_unreadable_path_is_an_ingest_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(IngestError) as info:
        load(missing)
    assert info.value.path == str(missing)
    if os.geteuid() != 0:  # root reads anything
        locked = tmp_path / "locked.jsonl"
        locked.write_bytes(SAMPLES["claude-code"].read_bytes())
        locked.chmod(0)
        with pytest.raises(IngestError) as info:
            load(locked)
        assert info.value.path == str(locked)


@pytest.mark.parametrize("fmt", sorted(READERS))
def test_truncated_last_line_keeps_the_rest(fmt: str, tmp_path: Path) -> None:
    data = SAMPLES[fmt].read_bytes()
    lines = data.splitlines(keepends=True)
    cut = b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2]
    path = tmp_path / f"cut-{fmt}.jsonl"
    path.write_bytes(cut)
    [whole] = load(SAMPLES[fmt])
    [s] = load(path)
    assert [i.line for i in s.issues if "truncated" in i.message] == [len(lines)]
    assert len(s.turns) == len(whole.turns) - 1  # only the last line's turn is lost


@pytest.mark.parametrize("fmt", sorted(READERS))
def test_invalid_utf8_line_is_an_issue(fmt: str, tmp_path: Path) -> None:
    lines = SAMPLES[fmt].read_bytes().splitlines(keepends=True)
    bad = 5
    lines[bad - 1] = b'{"type": "user", "text": "caf\xe9 \xff"}\n'
    path = tmp_path / f"latin1-{fmt}.jsonl"
    path.write_bytes(b"".join(lines))
    [s] = load(path)
    [issue] = [i for i in s.issues if i.line == bad]
    assert "UTF-8" in issue.message and str(path) in str(issue)
    assert len(s.turns) >= 10


# -- the CLI ------------------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forensics.cli", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_cli_turns_shows_anchors() -> None:
    done = _cli("turns", str(INGEST / "claude_basic.jsonl"))
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if re.match(r"\s+\d+\s", line)]
    assert len(rows) == 32
    assert rows[4][:3] == ["5", uid(5), "assistant"]
    done = _cli("turns", str(INGEST / "codex_basic.jsonl"))
    assert done.returncode == 0, done.stderr
    assert re.search(r"^\s+5\s+L10\s+assistant\s", done.stdout, re.M)


def test_cli_turns_on_empty_file_fails_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    done = _cli("turns", str(path))
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "Traceback" not in done.stderr


# -- properties ---------------------------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(
    allow_nan=False, allow_infinity=False) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                              max_size=4),
    max_leaves=12,
)
CLAUDE_KEYS = ["type", "uuid", "sessionId", "message", "content", "role", "model", "id",
               "tool_use_id", "is_error", "toolUseResult", "isMeta", "isSidechain", "subtype",
               "attachment", "prompt", "origin", "timestamp", "text", "input", "name",
               "isApiErrorMessage", "usage", "output_tokens", "retryInMs", "error"]
CODEX_KEYS = ["type", "payload", "timestamp", "role", "content", "text", "name", "arguments",
              "call_id", "output", "message", "summary", "info", "last_token_usage",
              "exit_code", "aggregated_output", "duration", "last_agent_message", "command",
              "id", "source", "cwd", "model", "action", "input"]
CLAUDE_TYPES = ["user", "assistant", "system", "attachment", "summary", "progress",
                "tool_use", "tool_result", "text", "thinking", "queued_command", "api_error",
                "compact_boundary", "local_command", "<synthetic>", "image"]
CODEX_TYPES = ["session_meta", "response_item", "event_msg", "turn_context", "compacted",
               "message", "reasoning", "function_call", "function_call_output",
               "custom_tool_call", "custom_tool_call_output", "local_shell_call",
               "web_search_call", "user_message", "agent_message", "agent_reasoning",
               "token_count", "exec_command_end", "turn_aborted", "task_complete", "error",
               "user", "assistant", "developer", "shell", "exec_command"]


def _records(keys: list[str], types: list[str]):
    """Nested dicts shaped like the format's records, with arbitrary values in them."""
    leaf = json_scalars | st.sampled_from(types) | st.sampled_from(
        ["<command-name>/x</command-name>", "[Request interrupted by user]", "Exit code 3",
         "<bash-input>ls</bash-input>", "<environment_context>", "Process exited with code 1",
         '{"output":"x","metadata":{"exit_code":2}}', '{"command":["bash","-lc","ls"]}',
         "2026-01-09T13:00:00.100Z", "(no content)"])
    return st.recursive(
        leaf,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(keys), inner,
                                                                  max_size=6),
        max_leaves=20,
    ).filter(lambda v: isinstance(v, dict)) | st.dictionaries(st.sampled_from(keys), leaf,
                                                              max_size=6)


def _roundtrip(sessions: list[Session]) -> None:
    """Well typed, and printed as JSON that reads back as the same data."""
    assert_well_typed(sessions)
    for s in sessions:
        doc = s.dump()
        assert orjson.loads(orjson.dumps(doc)) == doc


@pytest.mark.parametrize("turn", [
    UserTurn(ordinal=1, anchor="L1", text="x", time=3),  # JSON would print 3, not 3.0
    UserTurn(ordinal=1, anchor="L1", text=None),  # type: ignore[arg-type]
    EventTurn(ordinal=1, anchor="L1", event="nope"),  # type: ignore[arg-type]
    EventTurn(ordinal=1, anchor="L1", event="abort", detail={"at": (1, 2)}),
    AssistantTurn(ordinal=1, anchor="L1", tool_calls=[{"call_id": "c"}]),  # type: ignore[list-item]
], ids=["int-time", "none-text", "unknown-event", "tuple-detail", "dict-call"])
def test_the_type_check_catches_what_the_model_no_longer_refuses(turn) -> None:
    session = Session(id="s", agent="codex", format="codex", source="s.jsonl", turns=[turn])
    with pytest.raises(AssertionError, match=r"turns\[0\]\."):
        assert_well_typed([session])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=600), fmt=st.sampled_from([None, "claude-code", "codex"]))
def test_arbitrary_bytes_raise_only_forensics_errors(data: bytes, fmt: str | None) -> None:
    try:
        sessions = read_bytes(data, source="fuzz.jsonl", format=fmt)
    except ForensicsError:
        return
    _roundtrip(sessions)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(_records(CLAUDE_KEYS, CLAUDE_TYPES), min_size=1, max_size=8),
       noise=st.lists(json_values, max_size=2), sniff=st.booleans())
def test_arbitrary_claude_lines_never_crash(records: list, noise: list, sniff: bool) -> None:
    lines = [orjson.dumps(r) for r in records + noise]
    try:
        sessions = read_bytes(b"\n".join(lines), source="fuzz.jsonl",
                              format=None if sniff else "claude-code")
    except ForensicsError:
        return
    _roundtrip(sessions)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(_records(CODEX_KEYS, CODEX_TYPES), min_size=1, max_size=8),
       noise=st.lists(json_values, max_size=2), sniff=st.booleans())
def test_arbitrary_codex_lines_never_crash(records: list, noise: list, sniff: bool) -> None:
    lines = [orjson.dumps(r) for r in records + noise]
    try:
        sessions = read_bytes(b"\n".join(lines), source="fuzz.jsonl",
                              format=None if sniff else "codex")
    except ForensicsError:
        return
    _roundtrip(sessions)


@pytest.mark.parametrize("name", ["claude_basic", "claude_subagent", "codex_basic",
                                  "codex_exec"])
def test_fixture_sessions_roundtrip(name: str) -> None:
    _roundtrip(load(INGEST / f"{name}.jsonl"))


def test_sniffing_odd_type_tags_is_not_a_crash() -> None:
    with pytest.raises(UnknownFormatError):
        read_bytes(b'{"type": [], "sessionId": "x"}\n', source="odd.jsonl")


def test_mutated_fixture_lines_never_crash() -> None:
    """Every line of our fixtures with each top-level value replaced by odd JSON."""
    odd = [None, 0, -1, "", "x", [], {}, [None], {"type": None}, True, 1e308]
    for path in (INGEST / "claude_basic.jsonl", INGEST / "codex_basic.jsonl",
                 INGEST / "codex_exec.jsonl"):
        for raw in path.read_bytes().splitlines():
            rec = orjson.loads(raw)
            targets = [rec] + [v for v in rec.values() if isinstance(v, dict)]
            for target in targets:
                for key in list(target):
                    for value in odd:
                        saved = target[key]
                        target[key] = value
                        try:
                            sessions = read_bytes(orjson.dumps(rec), source="m.jsonl",
                                                  format="claude-code" if "claude" in path.name
                                                  else "codex")
                            _roundtrip(sessions)
                        except ForensicsError:
                            pass
                        finally:
                            target[key] = saved


def test_resumed_file_takes_its_id_from_its_name(tmp_path: Path) -> None:
    """Claude Code names the file after the session; a resumed session's first lines carry the
    id of the session it resumed, which is recorded, not used as the id."""
    from forensics.ingest import load
    from forensics.ingest.claude_code import RESUMED_NOTE

    text = (FIXTURES / "ingest" / "claude_basic.jsonl").read_text(encoding="utf-8")
    lines = text.splitlines()
    old = "5d2e8f41-7c3a-4b9e-a1d6-3f8c2e9b7a10"
    new = "c001e9a4-1b2c-4d3e-8f90-a1b2c3d4e5f6"
    resumed = "\n".join(lines[:5] + [l.replace(old, new) for l in lines[5:]]) + "\n"
    path = tmp_path / f"{new}.jsonl"
    path.write_text(resumed, encoding="utf-8")
    (session,) = load(path)
    assert session.id == new
    assert f"{RESUMED_NOTE} {old}" in session.notes
    plain = tmp_path / "not-a-uuid.jsonl"  # a file renamed by hand: the lines' id
    plain.write_text(resumed, encoding="utf-8")
    (other,) = load(plain)
    assert other.id == old
    assert not any(n.startswith(RESUMED_NOTE) for n in other.notes)
