"""Readers of Gemini CLI, Qwen Code, Cline / Roo / Kilo, pi and Copilot CLI.

The golden files (``test_ingest_golden.py``) pin every field; these tests name the facts each
reader exists for, so a golden regeneration cannot quietly lose them. The corpus tests read the
real Gemini and Cline sessions and the shared format examples (skipped without ``../shared``).
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CORPUS, FIXTURES, FORMAT_EXAMPLES, needs_shared
from forensics.errors import IngestError
from forensics.ingest import FORMATS, iter_sessions, load, read_bytes
from forensics.ingest import cline, copilot_cli, gemini_cli, pi, qwen_code
from forensics.ingest.sniff import is_cline_task, sniff_path
from forensics.model import AssistantTurn, EventTurn, ToolResultTurn, UserTurn

INGEST = FIXTURES / "ingest"


def _one(name: str):
    sessions = load(INGEST / name)
    return sessions[0], sessions


def _by_anchor(session, anchor):
    turn = session.by_anchor(anchor)
    assert turn is not None, anchor
    return turn


# -- sniffing -------------------------------------------------------------------------------

@pytest.mark.parametrize("name, fmt", [
    ("gemini_legacy_2025.json", "gemini-cli"), ("gemini_legacy_2026.json", "gemini-cli"),
    ("gemini_log_044.jsonl", "gemini-cli"), ("gemini_log_049.jsonl", "gemini-cli"),
    ("qwen_legacy.json", "gemini-cli"), ("qwen_basic.jsonl", "qwen-code"),
    ("cline_xml.json", "cline"), ("cline_ui.json", "cline"),
    ("cline_task/api_conversation_history.json", "cline"),
    ("cline_task/ui_messages.json", "cline"), ("pi_v1.jsonl", "pi"),
    ("pi_v3_branches.jsonl", "pi"), ("copilot_events.jsonl", "copilot-cli"),
])
def test_sniffed_from_content(name: str, fmt: str, tmp_path: Path) -> None:
    assert sniff_path(INGEST / name) == fmt
    renamed = tmp_path / "renamed.txt"  # the name plays no part
    shutil.copy(INGEST / name, renamed)
    assert sniff_path(renamed) == fmt


def test_every_new_format_is_registered() -> None:
    for fmt in ("gemini-cli", "qwen-code", "cline", "pi", "copilot-cli"):
        assert fmt in FORMATS


def test_cline_folder_is_recognised_by_content_not_names(tmp_path: Path) -> None:
    fake = tmp_path / "1767644899093"
    fake.mkdir()
    (fake / "api_conversation_history.json").write_text('{"not": "a task"}')
    (fake / "ui_messages.json").write_text("[1, 2, 3]")
    assert not is_cline_task(fake)
    with pytest.raises(IngestError, match="no agent sessions"):
        load(tmp_path)
    real = tmp_path / "task"
    shutil.copytree(INGEST / "cline_task", real)
    assert is_cline_task(real)


def test_cline_task_folder_is_one_session_in_a_tree(tmp_path: Path) -> None:
    tasks = tmp_path / "globalStorage" / "saoudrizwan.claude-dev" / "tasks"
    shutil.copytree(INGEST / "cline_task", tasks / "1770000000000")
    shutil.copytree(INGEST / "roo_task", tasks / "1771000000000")
    sessions = load(tmp_path)
    assert [s.id for s in sessions] == ["1770000000000", "1771000000000"]
    assert [s.agent for s in sessions] == ["cline", "cline"]  # the folder names the extension


def test_cline_agent_from_the_extension_folder(tmp_path: Path) -> None:
    task = tmp_path / "kilocode.kilo-code" / "tasks" / "t1"
    shutil.copytree(INGEST / "cline_task", task)
    assert load(task)[0].agent == "kilo-code"


# -- Gemini CLI -----------------------------------------------------------------------------

def test_gemini_shell_exit_lives_in_the_output_text() -> None:
    s, _ = _one("gemini_legacy_2026.json")
    failed = _by_anchor(s, "run_shell_command_1773795630000_0")
    assert isinstance(failed, ToolResultTurn)
    assert (failed.exit_code, failed.is_error) == (2, False)  # status stayed "success"
    ok = _by_anchor(s, "run_shell_command_1773795690000_0")
    assert ok.exit_code == 0  # 2026 builds print "Exit Code:" only when it is not 0
    background = _by_anchor(s, "run_shell_command_1773795700000_1")
    assert background.exit_code is None
    call = s.call_for(background)[1]
    assert call.background and call.command == "npm run dev"
    old, _ = _one("gemini_legacy_2025.json")
    assert _by_anchor(old, "run_shell_command-1761076830000-cd34ef56ab789").exit_code == 0
    assert _by_anchor(old, "run_shell_command-1761076860000-ef56ab78cd901").exit_code == 127


def test_gemini_errors_cancels_and_notices() -> None:
    s, _ = _one("gemini_legacy_2026.json")
    denied = _by_anchor(s, "read_file_1773795641000_1")
    assert denied.is_error and denied.error.startswith("Path not in workspace")
    assert _by_anchor(s, "run_shell_command_1773795960000_0").timed_out
    cancelled = _by_anchor(s, "codebase_investigator_1773796260000_1")
    assert cancelled.aborted and not cancelled.is_error
    cut = _by_anchor(s, "70000000-0000-4000-8000-000000000006")
    assert isinstance(cut, AssistantTurn) and cut.aborted  # "Request cancelled." followed
    events = {t.anchor[-2:]: t.event for t in s.turns if isinstance(t, EventTurn)}
    assert events == {"01": "other", "07": "abort", "09": "api_error", "0a": "other",
                      "0b": "compaction"}
    assert s.title == "Fix the build and start the dev server"
    empty = s.turns[-1]
    assert isinstance(empty, AssistantTurn) and not empty.visible and empty.reasoning


def test_gemini_string_era_and_version_hint() -> None:
    s, _ = _one("gemini_legacy_2025.json")
    users = [t for t in s.turns if isinstance(t, UserTurn)]
    assert users[0].text == "Build a tiny todo app and run its tests"
    assert (users[1].command, users[1].arguments) == ("/stats", "")
    assert "agent version at least 0.9.0 (update notice)" in s.notes
    assert s.models == ["gemini-2.5-pro"]
    first = s.turns[1]
    assert first.reasoning == "Planning the app: A single HTML file with a script."
    assert (first.tokens_in, first.tokens_out) == (5000, 60)


def test_gemini_log_last_write_wins_and_rewind() -> None:
    s, sessions = _one("gemini_log_044.jsonl")
    assert [t.kind for t in s.turns] == ["user", "assistant", "tool_result", "assistant", "user"]
    merged = s.turns[1]
    assert merged.tokens_in == 9000 and [c.call_id for c in merged.tool_calls] == [
        "run_shell_command_1779264009000_0"]  # the second write of the same id
    assert s.turns[2].exit_code == 1
    assert s.title == "Start the api server"
    assert [i.line for i in s.issues] == [14] and "truncated" in s.issues[0].message
    rewound = sessions[1]
    assert rewound.id == f"{s.id}:rewound-1" and rewound.parent_id == s.id
    assert [t.anchor[-1] for t in rewound.turns] == ["5", "6"]


def test_gemini_log_synthetic_user_and_batched_results() -> None:
    s, _ = _one("gemini_log_049.jsonl")
    users = [t.text for t in s.turns if isinstance(t, UserTurn)]
    assert users == ["Run lint and the unit tests", "fix the lint problems"]
    kinds = [(t.anchor[-2:], t.event) for t in s.turns if isinstance(t, EventTurn)]
    assert kinds == [("01", "injected"), ("02", "shell"), ("06", "compaction"),
                     ("10", "injected")]
    lint = _by_anchor(s, "run_shell_command_1781517625000_0")
    test = _by_anchor(s, "run_shell_command_1781517625000_1")
    assert (lint.exit_code, test.exit_code) == (1, 0)  # paired by id, wrapper removed
    assert sum(isinstance(t, ToolResultTurn) for t in s.turns) == 2  # no copy from the echo
    step = _by_anchor(s, "e5000000-0000-4000-8000-000000000004")
    assert step.text == "Running lint and tests." and step.reasoning == "Checking both at once."


# -- Qwen Code ------------------------------------------------------------------------------

def test_qwen_records() -> None:
    s, sessions = _one("qwen_basic.jsonl")
    assert (s.agent, s.agent_version, s.project_dir) == ("qwen-code", "0.10.2", "/home/dev/svc")
    assert _by_anchor(s, "a3").exit_code == 1 and _by_anchor(s, "a3").duration_ms == 5012
    assert _by_anchor(s, "a4").is_error
    assert _by_anchor(s, "a7").aborted
    queued = _by_anchor(s, "a5")
    assert isinstance(queued, UserTurn) and queued.queued
    assert (_by_anchor(s, "a8").command, _by_anchor(s, "a9").event) == ("/compress", "compaction")
    assert _by_anchor(s, "a11").event == "notification"
    assert _by_anchor(s, "a2").reasoning == "Tests first."
    assert s.by_anchor("a10") is None  # telemetry
    side = sessions[1]
    assert (side.id, side.parent_id) == ("agent-explore-1", s.id)


def test_qwen_legacy_document_is_read_by_the_gemini_reader() -> None:
    s, _ = _one("qwen_legacy.json")
    assert (s.agent, s.format) == ("qwen-code", "gemini-cli")
    assert [t.kind for t in s.turns] == ["user", "assistant", "tool_result", "assistant"]


# -- Cline family ---------------------------------------------------------------------------

def test_cline_native_calls_results_and_ui_events() -> None:
    s, _ = _one("cline_task")
    assert s.project_dir == "/home/dev/shop"
    assert s.models == ["claude-sonnet-4-5", "claude-opus-4-1"]
    assert _by_anchor(s, "api#2.0").exit_code == 1
    read = _by_anchor(s, "api#2.1")  # "[read_file for …] Result:" text paired by order
    assert read.call_id == "toolu_02" and read.output.startswith("1 | test(")
    edit = _by_anchor(s, "api#4.0")
    assert edit.is_error and edit.error.startswith("The SEARCH block")
    assert _by_anchor(s, "api#8.0").exit_code == 0
    interrupted = _by_anchor(s, "api#5")
    assert interrupted.aborted and "The test passes now." in interrupted.text
    users = [(t.anchor, t.text) for t in s.turns if isinstance(t, UserTurn)]
    assert users == [("api#0.0", "Make the failing test pass"),
                     ("api#6.1", "the test still fails"), ("api#10.1", "thanks, commit it")]
    events = [(t.anchor, t.event) for t in s.turns if isinstance(t, EventTurn)
              and t.event != "injected"]
    assert events == [("ts:1770000015500", "retry"), ("ts:1770000026000", "other"),
                      ("ts:1770000031000", "abort"), ("api#6.0", "session_start"),
                      ("ts:1770010002000", "api_error")]  # one failure, written twice


def test_cline_xml_era() -> None:
    s, _ = _one("cline_xml.json")
    first = _by_anchor(s, "api#1")
    assert [c.command for c in first.tool_calls] == ["npm run dev"]
    assert first.reasoning == "The user wants the dev server; run it."
    assert first.text == "I'll start the server."
    assert _by_anchor(s, "api#4.0").exit_code is None  # "Command executed." has no code
    denied = _by_anchor(s, "api#8.0")
    assert isinstance(denied, ToolResultTurn) and denied.aborted
    assert [t.text for t in s.turns if isinstance(t, UserTurn)][-1] == (
        "it is already running, do not start it again")
    assert _by_anchor(s, "api#6.0").event == "injected"
    assert _by_anchor(s, "api#9.0").event == "compaction"
    assert _by_anchor(s, "api#10").text == "The dev server is running on port 3000."


def test_roo_exit_code_and_agent() -> None:
    s, _ = _one("roo_task")
    assert s.agent == "roo-code"
    assert _by_anchor(s, "api#2.0").exit_code == 101
    assert [t.event for t in s.turns if isinstance(t, EventTurn) and t.event != "injected"] == [
        "retry", "compaction", "compaction"]  # the UI's condense row, then Roo's summary
    summary = _by_anchor(s, "api#4")
    assert summary.event == "compaction" and summary.detail == {"condense_id": "c-1"}
    assert s.turns[-1].text == "ok, build again"


def test_cline_ui_stream_alone() -> None:
    s, _ = _one("cline_ui.json")
    kinds = [t.kind for t in s.turns]
    assert kinds == ["user", "assistant", "assistant", "tool_result", "event", "event", "event",
                     "user", "assistant", "tool_result", "assistant"]
    output = _by_anchor(s, "ts:1767640009000")
    assert output.output == "FAIL health.test.js\n1 failed"  # two chunks sharing one ts
    assert _by_anchor(s, "ts:1767640002000").text == "Reading the server."  # partial dropped
    assert [t.event for t in s.turns if isinstance(t, EventTurn)] == [
        "retry", "api_error", "session_start"]  # one retry, the failed marker left out
    assert s.models == ["x-ai/grok-code-fast-1"]


# -- pi ---------------------------------------------------------------------------------------

def test_pi_branches_are_read_and_labelled() -> None:
    s, sessions = _one("pi_v3_branches.jsonl")
    assert [t.anchor for t in s.turns] == [
        "b0000002", "b0000003", "b0000004", "b0000008", "b0000009", "b000000a", "b000000b",
        "b000000c", "b000000d"]
    assert s.title == "lint fixes" and s.project_dir == "/home/dev/cli"
    lint = _by_anchor(s, "b0000004")
    assert (lint.exit_code, lint.is_error) == (1, True)
    assert _by_anchor(s, "b000000b").timed_out
    assert _by_anchor(s, "b000000c").detail == {"command": "pkill -f vite", "exit_code": 0}
    branch = sessions[1]
    assert (branch.id, branch.parent_id) == (f"{s.id}:branch-b0000005", s.id)
    assert "off the live path" in branch.notes[0]
    error = _by_anchor(branch, "b0000007")
    assert isinstance(error, AssistantTurn) and error.error.message.startswith("529")


def test_pi_v1_is_linear() -> None:
    s, sessions = _one("pi_v1.jsonl")
    assert len(sessions) == 1 and s.turns[-1].aborted
    assert [t.anchor for t in s.turns][:3] == ["L2", "L3", "L4"]
    assert s.turns[3].event == "injected"


# -- Copilot CLI ------------------------------------------------------------------------------

def test_copilot_events() -> None:
    s, _ = _one("copilot_events.jsonl")
    assert (s.agent_version, s.project_dir, s.models) == ("0.0.402", "/home/dev/site",
                                                          ["gpt-5.1-codex"])
    build = s.turns[2]
    assert (build.exit_code, build.is_error) == (1, False)  # success:true, terminal exit 1
    rejected = s.turns[3]
    assert rejected.is_error and rejected.aborted
    assert s.turns[1].reasoning == "Build then deploy." and s.turns[1].tokens_in == 12000
    assert s.turns[5].aborted and s.turns[6].event == "abort"
    assert [i.line for i in s.issues] == [17]  # an unknown event is reported, not guessed


# -- robustness --------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from([
            "sessionId", "projectHash", "messages", "type", "id", "content", "toolCalls",
            "result", "functionResponse", "response", "output", "error", "status", "args",
            "name", "$set", "$rewindTo", "uuid", "message", "parts", "functionCall",
            "toolCallResult", "subtype", "role", "ts", "say", "ask", "text", "tool_use_id",
            "input", "parentId", "toolCallId", "arguments", "data", "toolRequests", "success",
            "contents", "exitCode", "version", "cwd", "thoughts", "tokens", "displayContent"]),
        inner, max_size=4),
    max_leaves=20,
)

STREAM_READERS = [gemini_cli, qwen_code, cline, pi, copilot_cli]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(json_values, max_size=5), junk=st.binary(max_size=40))
def test_new_readers_never_raise_on_odd_json(records, junk) -> None:
    as_lines = b"\n".join(orjson.dumps(r) for r in records) + b"\n" + junk
    as_doc = orjson.dumps(records)
    for reader in STREAM_READERS:
        for data in (as_lines, as_doc):
            try:
                sessions = reader.read_stream(io.BytesIO(data), "x")
            except IngestError:
                continue
            for s in sessions:
                assert all(t.ordinal == i for i, t in enumerate(s.turns, 1))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=st.lists(json_values, max_size=5))
def test_gemini_document_and_cline_rows_never_raise(messages) -> None:
    docs = [{"sessionId": "s", "projectHash": "h", "messages": messages}, messages,
            [{"role": "user", "content": messages}],
            [{"ts": 1, "type": "say", "say": "api_req_started", "text": orjson.dumps(m).decode()}
             for m in messages]]
    for doc in docs:
        for reader in (gemini_cli, cline):
            try:
                reader.read_stream(io.BytesIO(orjson.dumps(doc)), "x.json")
            except IngestError:
                pass


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=300))
def test_sniffing_arbitrary_bytes_never_raises(data) -> None:
    try:
        read_bytes(b"[" + data, source="x")
    except IngestError:
        pass
    try:
        read_bytes(b'{"sessionId":"s","projectHash":"h"}\n' + data, source="x")
    except IngestError:
        pass


# -- the real sessions and the shared format examples --------------------------------------

def _real_and_example_sources() -> list[Path]:
    out: list[Path] = []
    for sub in ("gemini", "cline"):
        d = CORPUS / sub
        if d.is_dir():
            out.extend(sorted(p for p in d.iterdir() if p.is_file()))
    for sub in ("gemini-cli", "qwen-code", "pi", "copilot-cli"):
        d = FORMAT_EXAMPLES / sub
        if d.is_dir():
            out.extend(sorted(p for p in d.iterdir() if p.is_file()))
    tasks = FORMAT_EXAMPLES / "cline" / "tasks"
    if tasks.is_dir():
        out.extend(sorted(p for p in tasks.iterdir() if p.is_dir()))
    return out


@needs_shared
@pytest.mark.parametrize("source", _real_and_example_sources(), ids=lambda p: p.name)
def test_real_files_and_examples_load_without_issues(source: Path) -> None:
    errors: list = []
    sessions = list(iter_sessions(source, errors=errors))
    assert not errors
    assert sessions and all(s.turns for s in sessions)
    for s in sessions:
        assert s.issues == [], [str(i) for i in s.issues]
        assert s.agent in ("gemini-cli", "qwen-code", "cline", "roo-code", "kilo-code", "pi",
                           "copilot-cli")


@needs_shared
def test_real_gemini_session_facts() -> None:
    s = load(CORPUS / "gemini" / "BrianV1981__aim__session-2026-03-18T01-56-3afe7bdc.json")[0]
    cancelled = [t for t in s.turns if isinstance(t, ToolResultTurn) and t.aborted]
    assert [t.name for t in cancelled] == ["run_shell_command"]
    assert any(isinstance(t, EventTurn) and t.event == "abort" for t in s.turns)
    bench = load(CORPUS / "gemini" / "BrianV1981__aim__control_pro.json")[0]
    exits = [t.exit_code for t in bench.turns if isinstance(t, ToolResultTurn)
             and t.name == "run_shell_command"]
    assert 127 in exits and 1 in exits and None not in exits


@needs_shared
def test_real_cline_history_pairs_text_results_with_native_calls() -> None:
    s = load(CORPUS / "cline" / "mike4567__MRA04242026__api_conversation_history.json")[0]
    calls = {c.call_id for t in s.turns if isinstance(t, AssistantTurn) for c in t.tool_calls}
    results = [t for t in s.turns if isinstance(t, ToolResultTurn)]
    assert len(calls) == 231
    assert all(r.call_id in calls for r in results)  # every "[tool] Result:" found its call
    assert len(results) >= 220
    shells = [r for r in results if r.name == "execute_command"]
    assert sum(r.exit_code is not None for r in shells) >= 90
    # "Command timed out after 30 seconds. Running in background.": left running, not killed
    backgrounded = [c for t in s.turns if isinstance(t, AssistantTurn) for c in t.tool_calls
                    if c.background]
    assert len(backgrounded) == 5
    assert not any(s.result_for(c).timed_out for c in backgrounded)


def test_resumed_gemini_document_is_read_once(tmp_path: Path) -> None:
    chats = tmp_path / "chats"
    chats.mkdir()
    doc = orjson.loads((INGEST / "gemini_legacy_2026.json").read_bytes())
    (chats / "session-2026-03-18T01-00-6e7f8091.json").write_bytes(orjson.dumps(doc))
    meta = {k: doc[k] for k in ("sessionId", "projectHash", "startTime", "lastUpdated")}
    lines = [meta, *doc["messages"], {"id": "70000000-0000-4000-8000-0000000000ff",
                                      "timestamp": "2026-03-18T02:00:00.000Z", "type": "user",
                                      "content": [{"text": "and after the resume"}]}]
    (chats / "session-2026-03-18T01-00-6e7f8091.jsonl").write_bytes(
        b"\n".join(orjson.dumps(x) for x in lines) + b"\n")
    sessions = load(tmp_path)
    assert len(sessions) == 1 and sessions[0].source.endswith(".jsonl")
    assert sessions[0].turns[-1].text == "and after the resume"
    from forensics.archive import iter_units

    units = list(iter_units([tmp_path], []))  # a batch reads it once too
    assert [Path(u.label).suffix for u in units] == [".jsonl"]


def test_every_new_reader_names_its_default_locations() -> None:
    for reader in (gemini_cli, qwen_code, cline, pi, copilot_cli):
        where = reader.DEFAULT_LOCATIONS
        for platform in ("linux", "darwin", "windows"):
            assert where[platform] and all(isinstance(p, str) for p in where[platform])
    assert any("Code - Insiders" in p for p in cline.DEFAULT_LOCATIONS["darwin"])
    assert any("VSCodium" in p and "kilocode.kilo-code" in p
               for p in cline.DEFAULT_LOCATIONS["linux"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(api=st.binary(max_size=60) | st.builds(orjson.dumps, st.lists(json_values, max_size=3)),
       ui=st.binary(max_size=60) | st.builds(orjson.dumps, st.lists(json_values, max_size=3)))
def test_task_files_never_raise(api, ui) -> None:
    try:
        cline.read_task_files({"api_conversation_history.json": api, "ui_messages.json": ui},
                              "tasks/1")
    except IngestError:
        pass


def test_gemini_subagent_file_links_to_its_parent_folder(tmp_path: Path) -> None:
    parent_id = "6e7f8091-a2b3-44c5-86d7-e8f90a1b2c3d"
    sub = tmp_path / "chats" / parent_id
    sub.mkdir(parents=True)
    doc = {"sessionId": "0c0c0c0c-1111-4222-8333-444455556666", "projectHash": "ab" * 32,
           "startTime": "2026-04-01T10:00:00.000Z", "lastUpdated": "2026-04-01T10:01:00.000Z",
           "kind": "subagent", "messages": [
               {"id": "s1", "timestamp": "2026-04-01T10:00:00.000Z", "type": "user",
                "content": [{"text": "Find the e2e config"}]},
               {"id": "s2", "timestamp": "2026-04-01T10:00:30.000Z", "type": "gemini",
                "content": "It is playwright.config.ts.", "model": "gemini-3-flash-preview"}]}
    (sub / "0c0c0c0c-1111-4222-8333-444455556666.json").write_bytes(orjson.dumps(doc))
    s = load(tmp_path)[0]
    assert s.parent_id == parent_id
    assert any("subagent transcript" in n for n in s.notes)


@needs_shared
@pytest.mark.parametrize("source", _real_and_example_sources(), ids=lambda p: p.name)
def test_turns_command_exits_0_on_every_shared_source(source: Path) -> None:
    from typer.testing import CliRunner

    from forensics.cli import app

    out = CliRunner().invoke(app, ["turns", str(source)])
    assert out.exit_code == 0, out.output
    assert out.exception is None or isinstance(out.exception, SystemExit)
    assert not [line for line in out.output.splitlines() if line.startswith("  issue: ")]


def _token_counts_of(data: bytes, fmt: str) -> list[tuple[object, object]]:
    from forensics.ingest import read_bytes
    from forensics.model import AssistantTurn

    return [(t.tokens_in, t.tokens_out) for s in read_bytes(data, source="damaged", format=fmt)
            for t in s.turns if isinstance(t, AssistantTurn)]


def test_a_token_count_of_true_is_no_count() -> None:
    """``true`` is an int to Python; a damaged record's ``"input": true`` is not a count of one
    (the turn model does not coerce, so a reader that let it through printed ``true``)."""
    import orjson

    export = orjson.loads((FIXTURES / "ingest" / "opencode_export_v1.json").read_bytes())
    tokens = next(m["info"]["tokens"] for m in export["messages"] if "tokens" in m["info"])
    tokens["input"] = True
    counts = _token_counts_of(orjson.dumps(export), "opencode-export")
    assert (None, 120) in counts and not any(v is True for pair in counts for v in pair)

    lines = []
    for raw in (FIXTURES / "ingest" / "claude_basic.jsonl").read_bytes().splitlines():
        record = orjson.loads(raw)
        if isinstance(record.get("message", {}).get("usage"), dict):
            record["message"]["usage"]["input_tokens"] = True
        lines.append(orjson.dumps(record))
    counts = _token_counts_of(b"\n".join(lines) + b"\n", "claude-code")
    assert counts and all(tokens_in is None for tokens_in, _ in counts)
    assert any(isinstance(tokens_out, int) for _, tokens_out in counts)
