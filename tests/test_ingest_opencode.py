"""opencode readers: export (v1 and 2.x), storage tree, SQLite, ``run --format json``.

Fixtures are ours (tests/fixtures/ingest/opencode_*); the format examples and the real corpus in
../shared are read when present and skipped otherwise.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import sqlite3
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import CORPUS, FIXTURES, FORMAT_EXAMPLES, needs_shared
from forensics.cli import app
from forensics.errors import IngestError
from forensics.ingest import load, opencode_export, opencode_run, opencode_sqlite
from forensics.ingest._source import DirTree
from forensics.ingest._opencode import V2_TYPES
from forensics.ingest._text import clip
from forensics.ingest.opencode_storage import read_tree
from forensics.model import AssistantTurn, EventTurn, ToolResultTurn, UserTurn

INGEST = FIXTURES / "ingest"


def kinds(session) -> list[str]:
    return [t.event if isinstance(t, EventTurn) else t.kind for t in session.turns]


def results(session) -> dict[str, ToolResultTurn]:
    return {t.call_id: t for t in session.turns if isinstance(t, ToolResultTurn)}


def db_from_sql(sql: Path, db: Path) -> Path:
    con = sqlite3.connect(db)
    con.executescript(sql.read_text())
    con.close()
    return db


def snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file in a folder with its content hash and mtime."""
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in folder.iterdir()}


# -- export v1 ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def export_v1():
    [session] = load(INGEST / "opencode_export_v1.json")
    return session


def test_export_v1_turn_sequence(export_v1) -> None:
    assert kinds(export_v1) == [
        "user", "injected",
        "assistant", "tool_result", "tool_result",
        "assistant", "tool_result", "tool_result", "tool_result", "tool_result",
        "user",
        "retry", "assistant", "tool_result", "abort",
        "user", "assistant",
        "injected",
        "assistant", "tool_result", "api_error",
        "user", "other",
        "assistant", "tool_result",
        "compaction", "compaction",
        "assistant",
    ]
    assert [t.ordinal for t in export_v1.turns] == list(range(1, 29))
    s = export_v1
    assert (s.id, s.format, s.agent_version, s.project_dir) == (
        "ses_4e1f0a2b3ffeQm7TcK2pLx9vRa", "opencode-export", "1.1.10", "/home/dev/shop")
    assert s.models == ["anthropic/claude-sonnet-4-5"]
    assert s.started == 1764999999.0 and s.ended == 1765000320.0
    assert s.issues == []


def test_export_v1_user_text_is_typed_text_only(export_v1) -> None:
    first, injected = export_v1.turns[0], export_v1.turns[1]
    assert isinstance(first, UserTurn)
    assert first.text == "The cart tests fail. Fix them, see the screenshot and @src/cart.ts"
    assert first.images == 1
    assert injected.anchor == first.anchor == "msg_b1e0f0000001Ab3Cd4Ef5Gh6Ij"
    assert injected.text.startswith("Called the Read tool")
    assert injected.detail == {"parts": 2, "files": ["cart.ts"]}
    # A message whose only text is synthetic is an event, never a user turn.
    reminder = export_v1.by_anchor("msg_b1e0f0000008Ab3Cd4Ef5Gh6Ij")
    assert isinstance(reminder, EventTurn) and reminder.event == "injected"
    users = [t.text for t in export_v1.turns if isinstance(t, UserTurn)]
    assert users == [first.text, "Now start the dev server", "Now start the dev server",
                     "/review cart module"]


def test_export_v1_bash_outcomes(export_v1) -> None:
    r = results(export_v1)
    assert (r["toolu_01A"].exit_code, r["toolu_01A"].is_error) == (0, False)
    assert r["toolu_01B"].exit_code == 1 and not r["toolu_01B"].killed
    timeout = r["toolu_01C"]
    assert (timeout.exit_code, timeout.killed, timeout.timed_out, timeout.aborted) == (
        None, True, True, False)
    user_abort = r["toolu_01D"]
    assert (user_abort.killed, user_abort.aborted, user_abort.timed_out) == (True, True, False)
    old_timeout = r["toolu_01E"]  # 2025 marker, no exit recorded at all
    assert (old_timeout.timed_out, old_timeout.killed) == (True, False)
    read = r["toolu_01F"]
    assert (read.is_error, read.error, read.name) == (
        True, "Error: File not found: /home/dev/shop/src/carts.ts", "read")
    assert read.duration_ms == 10.0 and read.time == 1765000192.01


def test_export_v1_abort_and_provider_errors(export_v1) -> None:
    aborted = export_v1.by_anchor("msg_b1e0f0000005Ab3Cd4Ef5Gh6Ij")
    # by_anchor finds the first turn with the anchor: the retry event before the reply.
    assert isinstance(aborted, EventTurn) and aborted.event == "retry"
    assert aborted.detail == {"attempt": 1, "name": "APIError", "status_code": 529}
    turn = export_v1.turns[12]
    assert isinstance(turn, AssistantTurn) and turn.aborted
    assert turn.error.name == "MessageAbortedError"
    assert turn.part_kinds == ["retry", "step-start", "text", "tool"]
    dev = results(export_v1)["toolu_01G"]
    assert (dev.is_error, dev.aborted, dev.error) == (True, True, "Tool execution aborted")
    assert "localhost:5173" in dev.output  # the partial output of the running tool survives
    assert export_v1.turns[14].event == "abort"
    assert export_v1.turns[14].anchor == turn.anchor

    api = export_v1.turns[18]
    assert isinstance(api, AssistantTurn) and not api.aborted
    assert (api.error.name, api.error.message) == ("APIError", "Internal server error")
    never = results(export_v1)["toolu_01H"]
    assert (never.is_error, never.error, never.aborted) == (True, "tool call never finished",
                                                            False)
    event = export_v1.turns[20]
    assert (event.event, event.anchor, event.detail) == (
        "api_error", api.anchor, {"name": "APIError", "status_code": 500})


def test_export_v1_empty_summary_and_crashed_messages(export_v1) -> None:
    empty = export_v1.turns[16]
    assert isinstance(empty, AssistantTurn) and not empty.visible
    assert (empty.finish, empty.tokens_out, empty.part_kinds) == (
        "stop", 0, ["step-start", "step-finish"])
    summary = export_v1.turns[26]
    assert isinstance(summary, EventTurn) and summary.event == "compaction"
    assert summary.text.startswith("Summary: fixed cart tests")
    assert summary.anchor == "msg_b1e0f000000dAb3Cd4Ef5Gh6Ij"
    assert not any(isinstance(t, AssistantTurn) and t.anchor == summary.anchor
                   for t in export_v1.turns)
    crashed = export_v1.turns[-1]
    assert isinstance(crashed, AssistantTurn)
    assert (crashed.part_kinds, crashed.text, crashed.error, crashed.finish) == ([], "", None,
                                                                                 None)


def test_export_v1_subtask_and_synthetic_assistant_text(export_v1) -> None:
    subtask = export_v1.turns[22]
    assert (subtask.event, subtask.text, subtask.detail["agent"]) == (
        "other", "Review cart module", "general")
    reply = export_v1.turns[23]
    assert reply.text == "The reviewer found the discount applied twice."  # synthetic dropped
    assert [c.name for c in reply.tool_calls] == ["task"]
    assert reply.tool_calls[0].command is None


# -- export 2.x ---------------------------------------------------------------------------

def test_export_v2_transfer_shape() -> None:
    [s] = load(INGEST / "opencode_export_v2.json")
    assert kinds(s) == ["user", "injected", "assistant", "tool_result", "tool_result",
                        "tool_result", "other", "shell", "user", "assistant", "api_error",
                        "injected", "compaction", "assistant"]
    assert s.project_dir == "/srv/app"
    assert s.models == ["openai/gpt-5.6-sol", "openai/gpt-5.6-mini"]
    r = results(s)
    assert (r["call_02"].exit_code, r["call_02"].output) == (
        2, "deploy.sh: 3: Syntax error: end of file unexpected\n")
    assert (r["call_03"].is_error, r["call_03"].error) == (True, "oldString not found in content")
    assert r["call_01"].duration_ms == 90.0
    first = s.turns[2]
    assert first.reasoning == "Look at the script first." and first.tokens_out == 90
    assert s.turns[8].images == 1
    assert s.turns[9].error.name == "UnknownError" and s.turns[10].text == "rate limit exceeded"
    assert s.turns[6].detail["model"] == {"id": "gpt-5.6-mini", "providerID": "openai"}
    assert s.issues == []


# -- storage tree -------------------------------------------------------------------------

def test_storage_parent_and_child_with_corrupt_part() -> None:
    parent, child = load(INGEST / "opencode_storage")
    assert parent.id == "ses_49b7e3f55ffeHk2Jm4Np6Qr8St" and parent.parent_id is None
    assert child.parent_id == parent.id
    assert child.title == "Profile endpoints (@explore subagent)"
    assert kinds(parent) == ["user", "assistant", "tool_result", "assistant"]
    assert parent.turns[1].tool_calls[0].name == "task"
    assert parent.turns[1].file.endswith(
        "storage/message/ses_49b7e3f55ffeHk2Jm4Np6Qr8St/msg_b3a1c0020001Ee5Ff6Gg7Hh8.json")
    assert parent.turns[2].file.endswith("prt_b3a1c0020001PqRsTuVwXyZa01.json")
    assert parent.issues == []
    # The truncated bash part is reported by file; the rest of the child is read.
    assert kinds(child) == ["user", "assistant", "tool_result"]
    [issue] = child.issues
    assert issue.path.endswith(
        "part/msg_b3a1c0040001Uu1Vv2Ww3Xx4/prt_b3a1c0040002PqRsTuVwXyZa01.json")
    assert "truncated JSON" in issue.message
    assert child.turns[1].text == "GET /orders runs one query per row (N+1)."
    assert [c.name for c in child.turns[1].tool_calls] == ["grep"]


def test_storage_ids_come_from_paths_and_messages_sort_by_id(tmp_path: Path) -> None:
    tree = tmp_path / "storage"
    shutil.copytree(INGEST / "opencode_storage" / "storage", tree)
    # Content ids that disagree with the path lose; listing order does not matter.
    msg = tree / "message/ses_49b7e3f55ffeHk2Jm4Np6Qr8St/msg_b3a1c0010001Aa1Bb2Cc3Dd4.json"
    data = json.loads(msg.read_text())
    data["id"] = "msg_wrong"
    msg.write_text(json.dumps(data))
    sessions = read_tree(DirTree(tree))
    assert sessions[0].turns[0].anchor == "msg_b3a1c0010001Aa1Bb2Cc3Dd4"
    assert [t.anchor for t in sessions[0].turns if t.kind == "assistant"] == [
        "msg_b3a1c0020001Ee5Ff6Gg7Hh8", "msg_b3a1c1000001Mm3Nn4Oo5Pp6"]


def test_storage_legacy_per_project_layout(tmp_path: Path) -> None:
    src = INGEST / "opencode_storage" / "storage"
    ses = "ses_49b7e3f55ffeHk2Jm4Np6Qr8St"
    legacy = tmp_path / "project" / "global" / "storage" / "session"
    (legacy / "info").mkdir(parents=True)
    shutil.copy(next((src / "session").rglob(f"{ses}.json")), legacy / "info" / f"{ses}.json")
    shutil.copytree(src / "message" / ses, legacy / "message" / ses)
    for msg in (src / "message" / ses).iterdir():
        shutil.copytree(src / "part" / msg.stem, legacy / "part" / ses / msg.stem)
    [s] = read_tree(DirTree(tmp_path))
    assert s.id == ses and s.title == "Find the slow endpoint"
    assert kinds(s) == ["user", "assistant", "tool_result", "assistant"]
    # and the dispatcher finds it when pointed at the data dir
    [found] = load(tmp_path)
    assert found.id == ses and found.format == "opencode-storage"


def test_storage_without_sessions_is_an_ingest_error(tmp_path: Path) -> None:
    (tmp_path / "todo").mkdir()
    (tmp_path / "todo" / "x.json").write_text("[]")
    with pytest.raises(IngestError) as err:
        read_tree(DirTree(tmp_path))
    assert err.value.path == str(tmp_path)


# -- SQLite -------------------------------------------------------------------------------

@pytest.fixture()
def fixture_db(tmp_path: Path) -> Path:
    return db_from_sql(INGEST / "opencode_db.sql", tmp_path / "opencode.db")


def test_sqlite_v1_and_v2_sessions(fixture_db: Path) -> None:
    parent, child, v2 = opencode_sqlite.read_sqlite(fixture_db)
    assert (parent.format, parent.agent_version, parent.title) == (
        "opencode-sqlite", "1.2.4", "Fix the webhook retry")
    # The migrated copy of the user message in session_message is not counted twice.
    assert kinds(parent) == ["user", "assistant", "tool_result", "assistant", "api_error"]
    assert parent.turns[3].error.name == "ProviderAuthError"
    assert parent.notes == ["session_message also records 1 agent-switched, 1 model-switched "
                            "(not in the timeline)"]
    assert child.parent_id == parent.id
    assert results(child)["call_g1"].exit_code == 1
    assert kinds(v2) == ["other", "user", "assistant", "tool_result", "other", "assistant"]
    assert v2.turns[0].detail == {"type": "agent-switched", "agent": "build"}
    assert results(v2)["call_v1"].exit_code == 1
    assert v2.models == ["moonshot/kimi-k2", "moonshot/kimi-k2-turbo"]
    assert v2.project_dir == "/home/li/bot" and v2.agent_version == "2.0.3"
    # The session with no messages at all is left out.
    assert all(s.title != "New session" for s in (parent, child, v2))


def test_sqlite_is_read_only_rollback_and_wal(fixture_db: Path) -> None:
    folder = fixture_db.parent
    before = snapshot(folder)
    assert len(opencode_sqlite.read_sqlite(fixture_db)) == 3
    assert snapshot(folder) == before

    con = sqlite3.connect(fixture_db)
    assert con.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    con.close()
    before = snapshot(folder)
    assert sorted(before) == ["opencode.db"]
    assert len(load(fixture_db)) == 3
    assert snapshot(folder) == before  # no -wal / -shm created, bytes and mtime unchanged


def test_sqlite_reads_committed_wal_of_a_live_writer(fixture_db: Path) -> None:
    con = sqlite3.connect(fixture_db)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("UPDATE session SET title = 'Retitled' WHERE slug = 'swift-fox'")
    con.commit()
    try:
        before = snapshot(fixture_db.parent)
        assert sorted(before) == ["opencode.db", "opencode.db-shm", "opencode.db-wal"]
        db_hash = before["opencode.db"]
        sessions = opencode_sqlite.read_sqlite(fixture_db)
        assert sessions[0].title == "Retitled"
        after = snapshot(fixture_db.parent)
        assert after["opencode.db"] == db_hash
        # db, -wal and -shm keep their bytes and mtimes: the WAL is read from a copy, since
        # even a mode=ro connection rewrites the -shm index in place.
        assert after == before
    finally:
        con.close()


def test_sqlite_wal_without_shm_is_read_from_a_copy(fixture_db: Path, tmp_path: Path) -> None:
    con = sqlite3.connect(fixture_db)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("UPDATE session SET title = 'Only in the WAL' WHERE slug = 'swift-fox'")
    con.commit()
    elsewhere = tmp_path / "copied"
    elsewhere.mkdir()
    shutil.copy(fixture_db, elsewhere / "opencode.db")
    shutil.copy(f"{fixture_db}-wal", elsewhere / "opencode.db-wal")
    con.close()
    before = snapshot(elsewhere)
    assert opencode_sqlite.read_sqlite(elsewhere / "opencode.db")[0].title == "Only in the WAL"
    assert snapshot(elsewhere) == before


def test_sqlite_locked_database_names_the_file(tmp_path: Path, monkeypatch) -> None:
    db = db_from_sql(INGEST / "opencode_db.sql", tmp_path / "opencode.db")
    monkeypatch.setattr(opencode_sqlite, "BUSY_TIMEOUT", 0.0)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(IngestError) as err:
            opencode_sqlite.read_sqlite(db)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert err.value.path == str(db) and "locked" in str(err.value)


def test_sqlite_corrupt_database_names_the_file(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    good = db_from_sql(INGEST / "opencode_db.sql", tmp_path / "good.db").read_bytes()
    db.write_bytes(good[:100] + os.urandom(len(good) - 100))
    with pytest.raises(IngestError) as err:
        load(db)
    assert err.value.path == str(db)
    assert "SQLite" in err.value.reason
    with pytest.raises(IngestError):
        opencode_sqlite.read_sqlite_bytes(db.read_bytes(), "member.db")


def test_sqlite_without_opencode_tables(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    with pytest.raises(IngestError, match="without opencode tables"):
        opencode_sqlite.read_sqlite(db)


def test_sqlite_bytes_match_the_file_reader_even_in_wal_mode(fixture_db: Path) -> None:
    con = sqlite3.connect(fixture_db)
    con.execute("PRAGMA journal_mode=WAL")
    con.close()
    data = fixture_db.read_bytes()
    assert data[18:20] == b"\x02\x02"
    from_bytes = opencode_sqlite.read_sqlite_bytes(data, "archive.tar:opencode.db")
    from_file = opencode_sqlite.read_sqlite(fixture_db)
    assert [s.id for s in from_bytes] == [s.id for s in from_file]
    assert [kinds(s) for s in from_bytes] == [kinds(s) for s in from_file]
    assert from_bytes[0].source == "archive.tar:opencode.db"


# -- run --format json --------------------------------------------------------------------

def test_run_stream_groups_parts_by_message() -> None:
    [s] = load(INGEST / "opencode_run.jsonl")
    assert s.format == "opencode-run"
    assert kinds(s) == ["assistant", "tool_result", "assistant", "tool_result", "assistant",
                        "api_error"]
    assert not any(isinstance(t, UserTurn) for t in s.turns)
    assert len(s.notes) == 1 and "no user messages" in s.notes[0]
    first = s.turns[0]
    assert (first.anchor, first.line, first.finish, first.tokens_out) == (
        "msg_c71a00010000Kk5Ll6Mm7Nn8Oo", 1, "tool-calls", 60)
    assert first.reasoning == "Check the lockfile first."
    assert first.tool_calls[0].command == "make build"  # bash -lc wrapper unwrapped
    assert (s.turns[1].line, s.turns[1].exit_code) == (4, 0)
    assert s.turns[3].is_error and s.turns[3].line == 8
    # The error arrives after the last step finished: its own event at its line.
    assert (s.turns[5].anchor, s.turns[5].line, s.turns[5].detail) == (
        "L14", 14, {"name": "APIError", "status_code": 429})
    assert [(i.line, i.message.split(" (")[0]) for i in s.issues] == [
        (6, "not valid JSON"), (None, "unknown record type 'permission_asked'")]


def test_run_error_inside_an_open_message_marks_it() -> None:
    lines = [
        {"type": "step_start", "timestamp": 1, "sessionID": "ses_x",
         "part": {"id": "prt_1", "messageID": "msg_1", "type": "step-start"}},
        {"type": "error", "timestamp": 2, "sessionID": "ses_x",
         "error": {"name": "MessageAbortedError", "data": {"message": "aborted"}}},
    ]
    data = b"\n".join(orjson.dumps(x) for x in lines)
    [s] = opencode_run.read_stream(io.BytesIO(data), "x.jsonl")
    assert kinds(s) == ["assistant", "abort"]
    assert s.turns[0].aborted and s.turns[1].anchor == "msg_1"


def test_run_stream_with_no_events_is_an_error() -> None:
    with pytest.raises(IngestError):
        opencode_run.read_stream(io.BytesIO(b"not json\n"), "x.jsonl")


# -- the four forms of the same session agree ---------------------------------------------

@needs_shared
def test_format_examples_agree(tmp_path: Path) -> None:
    [export] = load(FORMAT_EXAMPLES / "opencode-export.json")
    [storage] = load(FORMAT_EXAMPLES / "opencode-storage")
    [db] = load(db_from_sql(FORMAT_EXAMPLES / "opencode-db.sql", tmp_path / "opencode.db"))
    [run] = load(FORMAT_EXAMPLES / "opencode-run-format-json.jsonl")
    expected = ["user", "assistant", "tool_result", "assistant", "tool_result", "abort", "user",
                "assistant"]
    for s in (export, storage, db):
        assert kinds(s) == expected, s.format
        assert [t.anchor for t in s.turns] == [t.anchor for t in export.turns]
        assert s.counts() == export.counts()
    assert [t.anchor for t in run.turns] == [t.anchor for t in export.turns if t.kind != "user"]
    assert run.counts()["tool_result"] == export.counts()["tool_result"]
    assert run.counts()["assistant"] == export.counts()["assistant"]
    assert run.counts()["user"] == 0
    for s in (export, storage, db, run):
        dev = results(s)["toolu_01Hc2RzKwq8LbV5nTdEu6PaJ"]
        assert (dev.is_error, dev.aborted) == (True, True)
        assert results(s)["toolu_01QmX7sJp2Gk9vTfY3bWcN4e"].exit_code == 1


# -- the real corpus ----------------------------------------------------------------------

def manifest_counts() -> dict[str, dict[str, int]]:
    """P (prompts) and T (tool calls) per opencode file, from corpus/MANIFEST.md."""
    text = (CORPUS / "MANIFEST.md").read_text()
    header: list[str] = []
    out: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == "local file":
            header = cells
        elif header and cells and cells[0].startswith("`opencode/"):
            name = cells[0].strip("`").split("/", 1)[1]
            out[name] = {k: int(cells[header.index(k)]) for k in ("P", "T", "I")}
    return out


def corpus_opencode() -> list[Path]:
    folder = CORPUS / "opencode"
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


@needs_shared
@pytest.mark.parametrize("path", corpus_opencode(), ids=lambda p: p.name[:40])
def test_corpus_file_loads_with_plausible_counts(path: Path) -> None:
    expected = manifest_counts()[path.name]
    [s] = load(path)
    counts = s.counts()
    assert s.issues == []
    assert counts["user"] >= 1
    assert abs(counts["user"] - expected["P"]) <= max(1, expected["P"] // 10)
    assert abs(counts["tool_calls"] - expected["T"]) <= max(1, expected["T"] // 10)
    assert counts["tool_result"] == counts["tool_calls"]
    aborts = sum(1 for t in s.turns if isinstance(t, EventTurn) and t.event == "abort")
    assert aborts == expected["I"]
    assert s.agent_version and s.models


@needs_shared
def test_corpus_cap_session_shapes() -> None:
    path = CORPUS / "opencode" / "w12z__Cap__opencode-session__abffe5c6.json"
    if not path.exists():
        pytest.skip("corpus file missing")
    [s] = load(path)
    assert s.project_dir == "C:\\Users\\22967\\cap"
    assistants = [t for t in s.turns if isinstance(t, AssistantTurn)]
    no_parts = [t for t in assistants if not t.part_kinds]
    assert len(no_parts) == 4
    silent = [t for t in assistants if not t.visible]
    assert len(silent) == 5  # MANIFEST: 1 reasoning-only, 4 with zero parts, 3 aborted
    assert sum(t.aborted for t in silent) == 3
    assert sum(1 for t in silent if t.reasoning and not t.part_kinds) == 0
    r = [t for t in s.turns if isinstance(t, ToolResultTurn)]
    assert sum(t.timed_out for t in r) == 2  # "shell tool terminated command after … timeout"
    assert all(t.killed for t in r if t.timed_out)
    patch = [t for t in r if t.name == "apply_patch" and t.is_error]
    assert len(patch) == 1 and patch[0].error.startswith("apply_patch verification failed")
    last = r[-1]  # the export ran while this bash call was still running
    assert not last.is_error
    assert last.error == "tool call still running when the session was saved"


@needs_shared
def test_corpus_redacted_export_reads_like_the_full_one() -> None:
    folder = CORPUS / "opencode"
    redacted, full = (folder / f"w12z__Cap__opencode-session__{h}.json"
                      for h in ("54ed861d", "abffe5c6"))
    if not (redacted.exists() and full.exists()):
        pytest.skip("corpus files missing")
    [r] = load(redacted)
    [f] = load(full)
    assert r.id == f.id
    assert r.project_dir.startswith("[redacted:")
    # Same session, exported earlier: its turns are a prefix of the full export's anchors.
    anchors = [t.anchor for t in r.turns]
    assert len(anchors) > 150 and anchors == [t.anchor for t in f.turns][:len(anchors)]
    bash = [t for t in r.turns if isinstance(t, ToolResultTurn) and t.name == "bash"]
    assert bash and all(t.exit_code is None and not t.killed for t in bash)  # metadata redacted


@needs_shared
def test_corpus_read_error_on_a_directory() -> None:
    path = CORPUS / "opencode" / "pai535Huang__matugen-theme-sync__opencode-session.json"
    if not path.exists():
        pytest.skip("corpus file missing")
    [s] = load(path)
    [read_error] = [t for t in s.turns if isinstance(t, ToolResultTurn) and t.name == "read"
                    and t.is_error]
    assert read_error.error.startswith("File not found: /home/hjk/Projects/matugen-theme-sync")


# -- CLI ------------------------------------------------------------------------------------

def test_cli_turns_prints_anchors_in_order() -> None:
    runner = CliRunner()
    out = runner.invoke(app, ["turns", str(INGEST / "opencode_export_v1.json")])
    assert out.exit_code == 0, out.output
    rows = [line.split() for line in out.output.splitlines() if re.match(r"^\s+\d+\s", line)]
    [session] = load(INGEST / "opencode_export_v1.json")
    assert [(int(r[0]), r[1], r[2]) for r in rows] == [
        (t.ordinal, t.anchor, t.kind) for t in session.turns]

    as_json = runner.invoke(app, ["turns", "-f", "json",
                                  str(INGEST / "opencode_export_v1.json")])
    assert as_json.exit_code == 0
    assert [t["anchor"] for t in json.loads(as_json.output)["turns"]] == [
        t.anchor for t in session.turns]


def test_cli_turns_on_a_corrupt_database_exits_2(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    db.write_bytes(b"SQLite format 3\x00" + b"\x10\x00\x01\x01" + os.urandom(4000))
    out = CliRunner().invoke(app, ["turns", str(db)])
    assert out.exit_code == 2
    assert str(db) in out.output and "Traceback" not in out.output


# -- robustness -----------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["info", "messages", "parts", "role", "type", "id", "state", "status",
                         "tool", "text", "error", "time", "metadata", "exit", "files",
                         "content", "tokens", "input", "output", "summary", "synthetic",
                         "callID", "mime", "data", "name", "part", "sessionID", "messageID"]),
        inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=st.lists(json_values, max_size=4))
def test_export_never_crashes_on_odd_json(messages) -> None:
    doc = {"info": {"id": "ses_x"}, "messages": messages}
    try:
        sessions = opencode_export.read_stream(io.BytesIO(orjson.dumps(doc)), "x.json")
    except IngestError:
        return
    for t in sessions[0].turns:
        assert t.ordinal >= 1 and t.anchor


def test_export_truncated_file_names_line() -> None:
    data = (INGEST / "opencode_export_v1.json").read_bytes()[:5000]
    with pytest.raises(IngestError) as err:
        opencode_export.read_stream(io.BytesIO(data), "cut.json")
    assert err.value.line is not None and "truncated JSON" in err.value.reason


def test_clip_keeps_head_and_tail() -> None:
    text = "a" * 9000 + "b" * 9000
    out = clip(text)
    assert out.startswith("a" * 8192) and out.endswith("b" * 8192)
    assert "...[1616 chars omitted]..." in out
    assert clip("short") == "short"


@settings(max_examples=100, deadline=None)
@given(records=st.lists(json_values, max_size=6), junk=st.binary(max_size=40))
def test_run_never_crashes_on_odd_lines(records, junk) -> None:
    data = b"\n".join(orjson.dumps(r) for r in records) + b"\n" + junk
    try:
        sessions = opencode_run.read_stream(io.BytesIO(data), "x.jsonl")
    except IngestError:
        return
    assert all(s.notes for s in sessions)


@settings(max_examples=30, deadline=None)
@given(tail=st.binary(min_size=0, max_size=3000))
def test_sqlite_bytes_never_crash_on_garbage(tail) -> None:
    try:
        opencode_sqlite.read_sqlite_bytes(b"SQLite format 3\x00" + tail, "m.db")
    except IngestError as exc:
        assert exc.path == "m.db"


def test_data_dir_with_database_and_json_tree(tmp_path: Path) -> None:
    """Both sources are read; a session in both is taken from the database only."""
    data_dir = tmp_path / "opencode"
    shutil.copytree(INGEST / "opencode_storage" / "storage", data_dir / "storage")
    sql = (INGEST / "opencode_db.sql").read_text().replace(
        "ses_44d1e2a07ffeVw5Xy4Za3Bc2De", "ses_49b7d8a12ffeAb1Cd3Ef5Gh7Ij")
    db = data_dir / "opencode.db"
    con = sqlite3.connect(db)
    con.executescript(sql)
    con.close()
    sessions = load(data_dir)
    by_id = {s.id: s for s in sessions}
    assert len(sessions) == len(by_id) == 4
    assert by_id["ses_49b7d8a12ffeAb1Cd3Ef5Gh7Ij"].format == "opencode-sqlite"
    assert by_id["ses_49b7e3f55ffeHk2Jm4Np6Qr8St"].format == "opencode-storage"


odd_fields = st.dictionaries(st.sampled_from(
    ["text", "state", "status", "input", "output", "metadata", "exit", "error", "time", "files",
     "content", "tokens", "summary", "synthetic", "callID", "tool", "mime", "model", "finish",
     "data", "name", "id"]), json_values, max_size=5)
part_types = st.sampled_from(["text", "reasoning", "tool", "file", "step-start", "step-finish",
                              "retry", "subtask", "compaction", "agent", "patch", "weird"])
v1_message = st.builds(
    lambda role, info, parts: {"info": {**info, "role": role},
                               "parts": [{**p, "type": t} for t, p in parts]},
    st.sampled_from(["user", "assistant", "system"]), odd_fields,
    st.lists(st.tuples(part_types, odd_fields), max_size=4))
v2_message = st.builds(lambda kind, data: {**data, "type": kind},
                       st.sampled_from(sorted(V2_TYPES) + ["weird"]), odd_fields)


@settings(max_examples=200, deadline=None)
@given(messages=st.lists(v1_message | v2_message, max_size=5))
def test_export_never_crashes_on_odd_messages(messages) -> None:
    doc = {"info": {"id": "ses_x"}, "messages": messages}
    [s] = opencode_export.read_stream(io.BytesIO(orjson.dumps(doc)), "x.json")
    assert [t.ordinal for t in s.turns] == list(range(1, len(s.turns) + 1))
    assert all(t.anchor for t in s.turns)
