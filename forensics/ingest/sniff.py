"""Decide which reader a source needs from its content, never from its name."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

SQLITE_MAGIC = b"SQLite format 3\x00"
HEAD_BYTES = 256 * 1024

OPENCODE_RUN_TYPES = {"step_start", "text", "reasoning", "tool_use", "step_finish", "error", "done"}
CLAUDE_TYPES = {"summary", "user", "assistant", "system", "file-history-snapshot",
                "queue-operation", "attachment", "custom-title", "ai-title", "last-prompt", "mode",
                "progress", "permission-mode", "agent-name"}
CODEX_TYPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}


def sniff_bytes(head: bytes) -> str | None:
    """Format name for the first bytes of a file, or None when nothing matches."""
    if head.startswith(SQLITE_MAGIC):
        return "opencode-sqlite"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text:
        return None
    if text.startswith(b"{"):
        first_line = text.split(b"\n", 1)[0]
        try:
            obj = orjson.loads(first_line)
        except orjson.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            kind = _sniff_record(obj)
            if kind:
                return kind
            # A one-line JSON document (an export printed without indentation).
            if "info" in obj and "messages" in obj:
                return "opencode-export"
        # A pretty-printed JSON document: look for the export's keys near the top.
        if b'"info"' in text[:4096] and b'"messages"' in text:
            return "opencode-export"
        if obj is None:
            # First line may be truncated or not alone; try the next complete lines.
            for line in text.split(b"\n")[1:20]:
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(rec, dict) and (kind := _sniff_record(rec)):
                    return kind
    return None


def _sniff_record(obj: dict) -> str | None:
    kind = obj.get("type")
    if not isinstance(kind, str):
        kind = None  # a list or object here would make the set lookups below raise
    if "payload" in obj and kind in CODEX_TYPES:
        return "codex"
    if "sessionID" in obj and "part" in obj and kind in OPENCODE_RUN_TYPES:
        return "opencode-run"
    if "sessionId" in obj and ("uuid" in obj or "parentUuid" in obj):
        return "claude-code"
    if kind in CLAUDE_TYPES and ("message" in obj or "sessionId" in obj or kind in {
            "summary", "file-history-snapshot", "queue-operation"}):
        return "claude-code"
    return None


def is_dir(path: Path) -> bool:
    """``path.is_dir()`` that answers False for a folder it may not look into (PermissionError
    from a parent without search permission), so one unreadable folder never stops a walk."""
    try:
        return path.is_dir()
    except OSError:
        return False


def is_opencode_tree(path: Path) -> Path | None:
    """The ``storage/`` folder of an opencode data dir, or None. Accepts the data dir too."""
    for candidate in (path, path / "storage"):
        if is_dir(candidate / "message") and is_dir(candidate / "part"):
            return candidate
        if is_dir(candidate / "session") and is_dir(candidate / "message"):
            return candidate
    # The oldest layout (≤ mid-2025): project/<slug>/storage/session/{info,message,part}/…
    project = path / "project"
    try:
        if project.is_dir() and next(project.glob("*/storage/session"), None) is not None:
            return path
    except OSError:
        pass
    return None


def sniff_path(path: Path) -> str | None:
    """Format of a file on disk, reading only its head."""
    with open(path, "rb") as fh:
        head = fh.read(HEAD_BYTES)
    return sniff_bytes(head)


def sqlite_in(path: Path) -> list[Path]:
    """opencode databases directly inside a data dir (``opencode.db``, ``opencode-*.db``)."""
    out = []
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return []
    for name in names:
        if name.startswith("opencode") and name.endswith(".db"):
            out.append(path / name)
    return out
