"""Decide which reader a source needs from its content, never from its name."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import orjson

SQLITE_MAGIC = b"SQLite format 3\x00"
HEAD_BYTES = 256 * 1024

OPENCODE_RUN_TYPES = {"step_start", "text", "reasoning", "tool_use", "step_finish", "error", "done"}
CLAUDE_TYPES = {"summary", "user", "assistant", "system", "file-history-snapshot",
                "queue-operation", "attachment", "custom-title", "ai-title", "last-prompt", "mode",
                "progress", "permission-mode", "agent-name"}
CODEX_TYPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
COPILOT_NAMESPACES = {"session", "user", "assistant", "tool", "subagent", "skill", "hook",
                      "permission"}
GEMINI_MESSAGE_TYPES = {"user", "gemini", "qwen", "info", "error", "warning"}
QWEN_TYPES = {"user", "assistant", "tool_result", "system"}
PI_ENTRY_TYPES = {"message", "model_change", "thinking_level_change", "compaction",
                  "branch_summary", "custom", "custom_message", "label", "session_info"}
CLINE_FILES = ("api_conversation_history.json", "ui_messages.json")
"""The files of a Cline / Roo / Kilo task folder that hold turns (``task_metadata.json`` too)."""
_GEMINI_DOC = re.compile(rb'^\{\s*"sessionId"\s*:\s*"[^"]*"\s*,\s*"projectHash"\s*:')


def sniff_bytes(head: bytes) -> str | None:
    """Format name for the first bytes of a file, or None when nothing matches."""
    if head.startswith(SQLITE_MAGIC):
        return "opencode-sqlite"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text:
        return None
    if text.startswith(b"["):
        return _sniff_array(text)
    if _GEMINI_DOC.match(text):
        return "gemini-cli"  # the pretty-printed legacy document (and the JSONL metadata line)
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
            if "sessionId" in obj and "projectHash" in obj and (
                    "messages" in obj or "type" not in obj):
                return "gemini-cli"
        top = text[:4096]
        if b'"sessionId"' in top and b'"projectHash"' in top and b'"messages"' in text:
            return "gemini-cli"  # a legacy document with extra keys before sessionId
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
    message = obj.get("message")
    if ("uuid" in obj and "sessionId" in obj and kind in QWEN_TYPES
            and isinstance(message, dict) and "parts" in message):
        return "qwen-code"  # before Claude Code: same envelope, Gemini parts instead of content
    if kind == "session" and isinstance(obj.get("version"), int) and "cwd" in obj:
        return "pi"
    if kind in PI_ENTRY_TYPES and "parentId" in obj and "id" in obj and (
            kind != "message" or (isinstance(message, dict) and "role" in message)):
        return "pi"
    if kind and "." in kind and isinstance(obj.get("data"), dict) and "id" in obj and (
            kind.split(".", 1)[0] in COPILOT_NAMESPACES):
        return "copilot-cli"
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
def _sniff_array(text: bytes) -> str | None:
    """A JSON array: a Cline / Roo / Kilo task file when its first element has their shape."""
    first = _first_element(text)
    if first is None:
        return None
    if isinstance(first.get("ts"), (int, float)) and first.get("type") in ("say", "ask"):
        return "cline"
    if first.get("role") in ("user", "assistant") and "content" in first:
        return "cline"
    return None


def _first_element(text: bytes) -> dict | None:
    """The first object of a JSON array from the head of a file (None if it is cut off)."""
    try:
        body = text[1:].decode("utf-8", errors="replace").lstrip()
        obj, _ = json.JSONDecoder().raw_decode(body)
    except (ValueError, RecursionError):
        # The first element may be longer than the head (a pasted file): read its first keys.
        match = re.match(rb'\[\s*\{\s*"role"\s*:\s*"(user|assistant)"\s*,\s*"content"\s*:', text)
        return {"role": match.group(1).decode(), "content": None} if match else None
    return obj if isinstance(obj, dict) else None


_SESSION_ID = re.compile(rb'"sessionId"\s*:\s*"([^"]+)"')


def superseded_gemini_document(path: Path) -> bool:
    """A Gemini CLI ``session-….json`` whose resumed copy ``session-….jsonl`` sits beside it.

    Resuming a legacy session copies it into a ``.jsonl`` of the same name and goes on there,
    so the ``.jsonl`` holds everything the ``.json`` does: reading both would count the session
    twice. Decided from both files' content (same format, same ``sessionId``).
    """
    log = path.with_name(path.name + "l")
    if path.suffix != ".json" or not log.is_file():
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
        with open(log, "rb") as fh:
            first = fh.readline(HEAD_BYTES)
    except OSError:
        return False
    if sniff_bytes(head) != "gemini-cli" or sniff_bytes(first) != "gemini-cli":
        return False
    a, b = _SESSION_ID.search(head), _SESSION_ID.search(first)
    return a is not None and b is not None and a.group(1) == b.group(1)


def is_cline_task(path: Path) -> bool:
    """A folder holding a Cline-family task: one of its turn files has their content."""
    for name in CLINE_FILES:
        f = path / name
        try:
            if f.is_file() and sniff_path(f) == "cline":
                return True
        except OSError:
            continue
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


def family_order(here: Path, names: list[str], read_ahead: set[Path]) -> list[Path]:
    """A folder's files in name order, each Claude Code session's subagent transcripts
    (``<id>/subagents/``) right after its ``<id>.jsonl``.

    The parent's process ledger reads each child's file (``analysis.family``); scanned right
    after it, the child is handed over instead of parsed again, and only one family is ever
    kept. The folders read ahead are added to ``read_ahead``: a walk that reaches one later
    skips its files (it still descends into its subfolders)."""
    out: list[Path] = []
    for name in sorted(names):
        out.append(here / name)
        if not name.endswith(".jsonl"):
            continue
        children = here / name[:-len(".jsonl")] / "subagents"
        try:
            with os.scandir(children) as entries:
                kids = sorted(e.name for e in entries if not e.is_dir())
        except OSError:  # none (the common case), or unlistable: the walk reports it there
            continue
        if os.path.islink(children):  # the walk does not follow a linked folder: nor do we
            continue
        read_ahead.add(children)
        out.extend(children / kid for kid in kids)
    return out
