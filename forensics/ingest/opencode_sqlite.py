"""opencode's SQLite database (``opencode.db``, v1.2+), opened strictly read-only.

v1 tables ``session``/``message``/``part`` hold the same JSON as the storage tree, minus the ids
(``message.data`` + ``{id, sessionID}``; ``part.data`` + ``{id, sessionID, messageID}``).
opencode 2.x writes new sessions as typed rows in ``session_message`` (ordered by ``seq``); those
are read for sessions that have no v1 messages, so a migrated session is never counted twice. For
v1 sessions, ``session_message`` holds mostly ``agent-switched``/``model-switched`` rows: they are
summarised in ``Session.notes``; its other rows are copies of v1 messages and skipped. Sessions
with no messages at all are skipped (a JSON tree beside the database may still hold them).

Nothing is ever written next to the database: a WAL-mode file with no ``-wal`` beside it is
opened ``immutable`` (so SQLite creates no ``-wal``/``-shm``), one with ``-wal`` and ``-shm`` is
opened ``mode=ro`` (reading the WAL), and one with a ``-wal`` but no ``-shm`` is copied with its
WAL into a temporary folder first. ``read_sqlite_bytes`` reads an archive member from memory
(without its WAL, which an archive rarely holds).
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
from forensics.model import Session

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
    wal_mode = header[18:20] == b"\x02\x02"
    wal, shm = Path(f"{p}-wal"), Path(f"{p}-shm")
    if wal_mode and wal.exists() and not shm.exists():
        with tempfile.TemporaryDirectory(prefix="forensics-db-") as tmp:
            copy = Path(tmp) / "opencode.db"
            shutil.copyfile(p, copy)
            shutil.copyfile(wal, f"{copy}-wal")
            return _read_uri(f"{copy.as_uri()}?mode=ro", source)
    query = "mode=ro&immutable=1" if wal_mode and not wal.exists() else "mode=ro"
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
    except sqlite3.Error as exc:
        raise _ingest_error(source, exc) from None
    finally:
        con.close()


def _read_uri(uri: str, source: str) -> list[Session]:
    try:
        con = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT)
    except sqlite3.Error as exc:
        raise _ingest_error(source, exc) from None
    try:
        return _read(con, source)
    except sqlite3.Error as exc:
        raise _ingest_error(source, exc) from None
    finally:
        con.close()


def _ingest_error(source: str, exc: sqlite3.Error) -> IngestError:
    text = str(exc)
    if "locked" in text or "busy" in text:
        return IngestError(source, f"database is locked by another process ({text})")
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return IngestError(source, f"corrupt SQLite database ({text})")
    return IngestError(source, f"cannot read SQLite database ({text})")


def _read(con: sqlite3.Connection, source: str) -> list[Session]:
    con.row_factory = sqlite3.Row
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    has_v1 = {"message", "part"} <= tables
    has_v2 = "session_message" in tables
    if not has_v1 and not has_v2:
        raise IngestError(source, "SQLite database without opencode tables "
                                  "(message/part or session_message)")
    infos: dict[str, dict[str, Any]] = {}
    for table in ("session", "session_v2"):
        if table in tables:
            for row in con.execute(f"SELECT * FROM {table}"):
                info = _session_info(dict(row))
                infos.setdefault(info["id"], info)

    builders: dict[str, SessionBuilder] = {}
    if has_v1:
        ids = [r[0] for r in con.execute("SELECT DISTINCT session_id FROM message")]
        for ses in ids:
            builders[ses] = _v1_session(con, ses, infos.get(ses), source)
    if has_v2:
        _v2_rows(con, builders, infos, source)

    sessions = [b.build() for b in builders.values()]
    sessions.sort(key=lambda s: (s.started is None, s.started or 0.0, s.id))
    return sessions


def _session_info(row: dict[str, Any]) -> dict[str, Any]:
    """A session row as the Session.Info dict the builder expects."""
    info: dict[str, Any] = {"id": row.get("id")}
    for key in ("title", "version", "directory", "slug"):
        if isinstance(row.get(key), str):
            info[key] = row[key]
    if row.get("parent_id"):
        info["parentID"] = row["parent_id"]
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


def _v1_session(con: sqlite3.Connection, ses: str, info: dict[str, Any] | None,
                source: str) -> SessionBuilder:
    builder = SessionBuilder(session_id=ses, format=FORMAT, source=source)
    builder.set_info(info or {"id": ses})
    parts: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in con.execute("SELECT id, message_id, data FROM part WHERE session_id = ? "
                           "ORDER BY message_id, id", (ses,)):
        part = _json(row["data"], f"part {row['id']}", builder)
        if part is not None:
            parts[row["message_id"]].append(
                {**part, "id": row["id"], "sessionID": ses, "messageID": row["message_id"]})
    for row in con.execute("SELECT id, data FROM message WHERE session_id = ? "
                           "ORDER BY time_created, id", (ses,)):
        msg = _json(row["data"], f"message {row['id']}", builder)
        if msg is not None:
            builder.add_message({**msg, "id": row["id"], "sessionID": ses},
                                parts.pop(row["id"], []))
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
        ses, kind = row["session_id"], row["type"]
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
        data = {**data, "id": row["id"]}
        if not isinstance(data.get("time"), dict) and row["time_created"] is not None:
            data["time"] = {"created": row["time_created"]}
        if kind in V2_TYPES:
            builder.add_v2(kind, data)
        else:
            builder.unknown(f"session_message type {kind!r}")
    for ses, counts in switches.items():
        what = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
        builders[ses].notes.append(f"session_message also records {what} (not in the timeline)")
