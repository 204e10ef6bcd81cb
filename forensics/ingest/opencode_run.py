"""``opencode run --format json``: the JSONL event stream printed on stdout.

Each line is ``{type, timestamp, sessionID, part | error}`` with ``type`` one of ``step_start``,
``text``, ``reasoning``, ``tool_use``, ``step_finish``, ``error``. There are no user messages
and no message ``info``: parts are grouped by ``part.messageID`` into assistant messages (finish
reason and tokens come from ``step_finish``), and an ``error`` line is the error of the message
it interrupts (or a standalone event anchored ``L<line>`` when no message is open). ``done``
lines are bookkeeping and skipped.
"""

from __future__ import annotations

from typing import Any, BinaryIO

from forensics.errors import IngestError
from forensics.ingest._opencode import (
    ABORTED_ERROR,
    SessionBuilder,
    error_message,
    seconds,
    status_code,
)
from forensics.ingest._source import add_each_line
from forensics.model import ReadIssue, Session

FORMAT = "opencode-run"
NOTE = ("opencode run --format json has no user messages (the prompt and any re-sent prompt are "
        "not in the stream) and no per-message info; finish and tokens come from step_finish")
PART_TYPES = {"step_start", "text", "reasoning", "tool_use", "step_finish"}


class _Message:
    __slots__ = ("id", "parts", "lines", "first_ts", "last_ts", "line", "closed", "error")

    def __init__(self, msg_id: str, ts: Any, line: int) -> None:
        self.id, self.line = msg_id, line
        self.parts: dict[str, dict[str, Any]] = {}
        self.lines: dict[str, int] = {}
        self.first_ts = self.last_ts = ts
        self.closed = False
        self.error: dict[str, Any] | None = None


class _Stream:
    """One session's records in order: messages and standalone error events."""

    def __init__(self, session_id: str, source: str) -> None:
        self.builder = SessionBuilder(session_id=session_id, format=FORMAT, source=source)
        self.items: list[_Message | tuple[int, Any, dict[str, Any]]] = []
        self.messages: dict[str, _Message] = {}
        self.last: _Message | None = None

    def part(self, part: dict[str, Any], ts: Any, line: int) -> None:
        msg_id = part.get("messageID")
        if not isinstance(msg_id, str):
            self.builder.issue("part without messageID", line=line)
            return
        msg = self.messages.get(msg_id)
        if msg is None:
            msg = self.messages[msg_id] = _Message(msg_id, ts, line)
            self.items.append(msg)
        part_id = part.get("id") if isinstance(part.get("id"), str) else f"L{line}"
        msg.parts[part_id] = {**part, "id": part_id}
        msg.lines.setdefault(part_id, line)
        if isinstance(ts, (int, float)):
            msg.last_ts = ts
        if part.get("type") == "step-finish":
            msg.closed = True
        self.last = msg

    def error(self, error: dict[str, Any], ts: Any, line: int) -> None:
        if self.last is not None and not self.last.closed and self.last.error is None:
            self.last.error = error
            self.last.last_ts = ts if isinstance(ts, (int, float)) else self.last.last_ts
            self.last.closed = True
        else:
            self.items.append((line, ts, error))

    def build(self) -> Session:
        b = self.builder
        for item in self.items:
            if isinstance(item, _Message):
                info: dict[str, Any] = {"id": item.id, "role": "assistant",
                                        "time": {"created": item.first_ts}}
                if item.closed:
                    info["time"]["completed"] = item.last_ts
                if item.error is not None:
                    info["error"] = item.error
                b.add_message(info, list(item.parts.values()), line=item.line,
                              part_lines=item.lines)
            else:
                line, ts, error = item
                name = error.get("name") if isinstance(error.get("name"), str) else "UnknownError"
                b.add_event("abort" if name == ABORTED_ERROR else "api_error", f"L{line}",
                            text=error_message(error), time=seconds(ts),
                            detail={"name": name, **status_code(error)}, line=line)
        b.notes.append(NOTE)
        return b.build()


def read_stream(stream: BinaryIO, source: str) -> list[Session]:
    issues: list[ReadIssue] = []
    streams: dict[str, _Stream] = {}
    add_each_line(stream, source, issues,
                  lambda line, rec: _add(streams, rec, line, source, issues))
    if not streams:
        first = issues[0].line if issues else None
        raise IngestError(source, "no opencode run events found", line=first)
    sessions = [s.build() for s in streams.values()]
    sessions[0].issues[:0] = issues
    return sessions


def _add(streams: dict[str, _Stream], rec: dict, line: int, source: str,
         issues: list[ReadIssue]) -> None:
    """One event line into the stream of its session."""
    session_id = rec.get("sessionID")
    kind = rec.get("type")
    if not isinstance(kind, str):
        kind = repr(kind)
    if not isinstance(session_id, str):
        issues.append(ReadIssue(path=source, line=line, message="record without sessionID"))
        return
    s = streams.get(session_id)
    if s is None:
        s = streams[session_id] = _Stream(session_id, source)
    ts = rec.get("timestamp")
    if kind in PART_TYPES:
        if isinstance(rec.get("part"), dict):
            s.part(rec["part"], ts, line)
        else:
            s.builder.issue(f"{kind} record without a part", line=line)
    elif kind == "error":
        s.error(rec.get("error") if isinstance(rec.get("error"), dict) else {}, ts, line)
    elif kind == "done":
        return
    else:
        s.builder.unknown(f"record type {kind!r}")
