"""opencode's SQLite database (``opencode.db``, v1.2+), opened strictly read-only.

v1 tables ``session``/``message``/``part`` hold the same JSON as the storage tree, minus the ids
(``message.data`` + ``{id, sessionID}``; ``part.data`` + ``{id, sessionID, messageID}``).
opencode 2.x writes new sessions as typed rows in ``session_message`` (ordered by ``seq``); those
are read for sessions that have no v1 messages, so a migrated session is never counted twice. For
v1 sessions, ``session_message`` holds mostly ``agent-switched``/``model-switched`` rows: they are
summarised in ``Session.notes``; its other rows are copies of v1 messages and skipped. Sessions
with no messages at all are skipped (a JSON tree beside the database may still hold them).

Nothing is ever written to or next to the database: without a ``-wal`` beside it the file is
opened read-only (``immutable`` in WAL mode, so SQLite creates no ``-wal``/``-shm``); with a
``-wal`` the database and its WAL are copied into a temporary folder and read there, because
even a ``mode=ro`` connection rewrites the ``-shm`` index of a live WAL. ``read_sqlite_bytes`` reads an
archive member from memory (without its WAL, which an archive rarely holds).

Total on hostile rows: text that is not UTF-8 is read with U+FFFD (counted in one issue), ids of
another type (a BLOB ``session.id``) are read as text, and a row the reader chokes on becomes an
issue naming its table and id; the other rows and sessions are still read.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import orjson

from forensics.errors import IngestError
from forensics.ingest._opencode import SessionBuilder, V2_TYPES
from forensics.ingest._source import one_record
from forensics.model import ReadIssue, Session

FORMAT = "opencode-sqlite"
SQLITE_MAGIC = b"SQLite format 3\x00"
BUSY_TIMEOUT = 2.0
"""Seconds to wait for another process's lock before giving up."""
SWITCH_TYPES = {"agent-switched", "model-switched", "location-switched"}


def read_sqlite(path: str | os.PathLike[str]) -> list[Session]:
    """Every session in an opencode database on disk; never writes beside it."""
    p = Path(path)
    source = str(path)
    try:
        with open(p, "rb") as fh:
            header = fh.read(100)
    except OSError as exc:
        raise IngestError(source, exc.strerror or str(exc)) from None
    if not header.startswith(SQLITE_MAGIC):
        raise IngestError(source, "not an SQLite database")
    wal = Path(f"{p}-wal")
    if wal.is_file():
        with tempfile.TemporaryDirectory(prefix="forensics-db-") as tmp:
            copy = Path(tmp) / "opencode.db"
            try:
                shutil.copyfile(p, copy)
                shutil.copyfile(wal, f"{copy}-wal")
            except OSError as exc:
                raise IngestError(source, f"cannot copy the database and its WAL to read "
                                          f"them safely ({exc.strerror or exc})") from None
            return _read_uri(f"{copy.as_uri()}?mode=ro", source)
    # A WAL database with no WAL: ``mode=ro`` would create ``-wal``/``-shm``, so read it as an
    # immutable file. A rollback-journal database: ``mode=ro`` writes nothing and honours locks.
    wal_mode = header[18:20] == b"\x02\x02"
    query = "mode=ro&immutable=1" if wal_mode else "mode=ro"
    return _read_uri(f"{p.resolve().as_uri()}?{query}", source)


def read_sqlite_bytes(data: bytes, source: str) -> list[Session]:
    """Every session in an opencode database held in memory (an archive member)."""
    if not data.startswith(SQLITE_MAGIC):
        raise IngestError(source, "not an SQLite database")
    if data[18:20] == b"\x02\x02":
        # An in-memory copy cannot use WAL; mark it rollback-journal so SQLite will read it.
        data = data[:18] + b"\x01\x01" + data[20:]
    con = sqlite3.connect(":memory:")
    try:
        con.deserialize(data)
        return _read(con, source)
    except (sqlite3.Error, UnicodeDecodeError) as exc:
        raise _ingest_error(source, exc) from None
    finally:
        con.close()


def _read_uri(uri: str, source: str) -> list[Session]:
    try:
        con = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT)
    except (sqlite3.Error, UnicodeDecodeError) as exc:
        raise _ingest_error(source, exc) from None
    try:
        return _read(con, source)
    except (sqlite3.Error, UnicodeDecodeError) as exc:
        raise _ingest_error(source, exc) from None
    finally:
        con.close()


def _ingest_error(source: str, exc: Exception) -> IngestError:
    if isinstance(exc, UnicodeDecodeError):  # SQLite's own message on a damaged schema
        return IngestError(source, "corrupt SQLite database (schema is not valid text)")
    text = str(exc)
    if "locked" in text or "busy" in text:
        return IngestError(source, f"database is locked by another process ({text})")
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return IngestError(source, f"corrupt SQLite database ({text})")
    return IngestError(source, f"cannot read SQLite database ({text})")


class _Text:
    """SQLite text as str whatever its bytes: invalid UTF-8 becomes U+FFFD and is counted."""

    def __init__(self) -> None:
        self.bad = 0

    def __call__(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.bad += 1
            return raw.decode("utf-8", "replace")


def _ident(value: Any) -> str | None:
    """An id cell as text: a BLOB or number where opencode writes text is still an id."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def _read(con: sqlite3.Connection, source: str) -> list[Session]:
    text = _Text()
    con.text_factory = text
    con.row_factory = sqlite3.Row
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    has_v1 = {"message", "part"} <= tables
    has_v2 = "session_message" in tables
    if not has_v1 and not has_v2:
        raise IngestError(source, "SQLite database without opencode tables "
                                  "(message/part or session_message)")
    lost: list[ReadIssue] = []  # rows and sessions the reader choked on, named by table and id
    infos: dict[str, dict[str, Any]] = {}
    for table in ("session", "session_v2"):
        if table in tables:
            for row in con.execute(f"SELECT * FROM {table}"):
                with one_record(lost, source, what=f"table {table} row {_ident(row['id'])}"):
                    info = _session_info(dict(row))
                    if info["id"] is not None:
                        infos.setdefault(info["id"], info)

    builders: dict[str, SessionBuilder] = {}
    if has_v1:
        ids = [r[0] for r in con.execute("SELECT DISTINCT session_id FROM message")]
        for raw in ids:
            ses = _ident(raw)
            if ses is None:
                lost.append(ReadIssue(path=source, message="table message: rows without a "
                                                           "session_id skipped"))
                continue
            with one_record(lost, source, what=f"session {ses}"):
                builders[ses] = _v1_session(con, raw, ses, infos.get(ses), source)
    if has_v2:
        with one_record(lost, source, what="table session_message"):
            _v2_rows(con, builders, infos, source)

    sessions = []
    for ses, builder in builders.items():
        with one_record(lost, source, what=f"session {ses}"):
            sessions.append(builder.build())
    if text.bad:
        lost.append(ReadIssue(path=source, message=f"{text.bad} text cells are not valid UTF-8 "
                                                   "(read with U+FFFD in place of bad bytes)"))
    if not sessions:
        if lost:
            raise IngestError(source, str(lost[0]))
        return []
    sessions.sort(key=lambda s: (s.started is None, s.started or 0.0, s.id))
    sessions[0].issues.extend(lost)
    return sessions


def _session_info(row: dict[str, Any]) -> dict[str, Any]:
    """A session row as the Session.Info dict the builder expects."""
    info: dict[str, Any] = {"id": _ident(row.get("id"))}
    for key in ("title", "version", "directory", "slug"):
        if isinstance(row.get(key), str):
            info[key] = row[key]
    if _ident(row.get("parent_id")):
        info["parentID"] = _ident(row["parent_id"])
    if "directory" not in info and isinstance(row.get("location"), str):
        try:
            location = orjson.loads(row["location"])
            if isinstance(location, dict) and isinstance(location.get("directory"), str):
                info["directory"] = location["directory"]
        except orjson.JSONDecodeError:
            pass
    info["time"] = {k: row[c] for k, c in (("created", "time_created"), ("updated", "time_updated"))
                    if isinstance(row.get(c), (int, float))}
    return info


def _json(raw: Any, what: str, builder: SessionBuilder) -> dict[str, Any] | None:
    try:
        obj = orjson.loads(raw)
    except (orjson.JSONDecodeError, TypeError) as exc:
        builder.issue(f"{what}: data is not valid JSON ({exc})")
        return None
    if not isinstance(obj, dict):
        builder.issue(f"{what}: data is not a JSON object")
        return None
    return obj


def _v1_session(con: sqlite3.Connection, raw_id: Any, ses: str, info: dict[str, Any] | None,
                source: str) -> SessionBuilder:
    builder = SessionBuilder(session_id=ses, format=FORMAT, source=source)
    builder.set_info(info or {"id": ses})
    parts: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in con.execute("SELECT id, message_id, data FROM part WHERE session_id = ? "
                           "ORDER BY message_id, id", (raw_id,)):
        part_id, msg_id = _ident(row["id"]), _ident(row["message_id"])
        part = _json(row["data"], f"part {part_id}", builder)
        if part is not None and part_id is not None and msg_id is not None:
            parts[msg_id].append({**part, "id": part_id, "sessionID": ses, "messageID": msg_id})
    for row in con.execute("SELECT id, data FROM message WHERE session_id = ? "
                           "ORDER BY time_created, id", (raw_id,)):
        msg_id = _ident(row["id"])
        msg = _json(row["data"], f"message {msg_id}", builder)
        if msg is not None and msg_id is not None:
            with one_record(builder.issues, source, what=f"table message row {msg_id}"):
                builder.add_message({**msg, "id": msg_id, "sessionID": ses},
                                    parts.pop(msg_id, []))
    if parts:
        n = sum(len(v) for v in parts.values())
        builder.issue(f"{n} parts belong to {len(parts)} messages missing from the message table")
    return builder


def _v2_rows(con: sqlite3.Connection, builders: dict[str, SessionBuilder],
             infos: dict[str, dict[str, Any]], source: str) -> None:
    columns = {r[1] for r in con.execute("PRAGMA table_info(session_message)")}
    order = "session_id, seq" if "seq" in columns else "session_id, time_created, id"
    v1 = set(builders)
    switches: dict[str, Counter[str]] = defaultdict(Counter)
    for row in con.execute(f"SELECT id, session_id, type, time_created, data "
                           f"FROM session_message ORDER BY {order}"):
        ses, kind = _ident(row["session_id"]), row["type"]
        if ses is None:
            continue
        if ses in v1:
            if kind in SWITCH_TYPES:
                switches[ses][kind] += 1
            continue  # other rows of a v1 session are copies of its v1 messages
        builder = builders.get(ses)
        if builder is None:
            builder = builders[ses] = SessionBuilder(session_id=ses, format=FORMAT, source=source)
            builder.set_info(infos.get(ses) or {"id": ses})
        data = _json(row["data"], f"session_message {row['id']}", builder)
        if data is None:
            continue
        with one_record(builder.issues, source, what=f"table session_message row "
                                                      f"{_ident(row['id'])}"):
            data = {**data, "id": _ident(row["id"])}
            if not isinstance(data.get("time"), dict) and row["time_created"] is not None:
                data["time"] = {"created": row["time_created"]}
            if kind in V2_TYPES:
                builder.add_v2(kind, data)
            else:
                builder.unknown(f"session_message type {kind!r}")
    for ses, counts in switches.items():
        what = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
        builders[ses].notes.append(f"session_message also records {what} (not in the timeline)")
