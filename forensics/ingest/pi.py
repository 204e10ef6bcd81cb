"""pi (pi-coding-agent) sessions: ``~/.pi/agent/sessions/--<cwd>--/<timestamp>_<uuid>.jsonl``.

Line 1 is the header ``{"type": "session", "version": N, "id", "timestamp", "cwd",
"parentSession"?}``; every later line is an entry ``{type, id, parentId, timestamp, …}``.
Session format v1 has no ``id``/``parentId`` (file order is the chain); v2 made the file a
tree; v3 renamed the ``hookMessage`` role ``custom``. All three are read.

Branches: the file keeps every branch; the live conversation is the path from the last entry
back to the root. Every entry is read: the live path is the session, and each branch off it
becomes a session of its own, ``<id>:branch-<first entry id>``, linked to the main one
(``parent_id``) and noted as off the live path. Anchor: the entry ``id`` (``L<line>`` in v1).

* ``message`` entries by ``message.role``: ``user`` → ``UserTurn``; ``assistant`` →
  ``AssistantTurn`` (``text``, ``thinking``, ``toolCall`` blocks; ``stopReason: "aborted"`` →
  ``aborted``; ``"error"`` → ``error`` with ``errorMessage`` plus an ``api_error`` event);
  ``toolResult`` → ``ToolResultTurn`` (``isError``; the bash tool's ``Command exited with code
  N`` / ``Command aborted`` / ``Command timed out after`` endings); ``bashExecution`` (a ``!cmd``
  the user ran) → ``shell``; ``custom`` / ``hookMessage`` → ``injected``; ``compactionSummary``
  / ``branchSummary`` → ``compaction`` / ``other``.
* ``compaction`` → ``compaction``; ``custom_message`` (in context) → ``injected``;
  ``branch_summary`` → ``other``; ``model_change`` adds a model; ``session_info`` names the
  session; ``thinking_level_change``, ``label`` and ``custom`` (not in context) are skipped.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any, BinaryIO

from forensics import knowledge_cache
from forensics.errors import IngestError
from forensics.ingest._source import iter_jsonl
from forensics.ingest._text import clip, json_int
from forensics.ingest._time import iso_to_unix
from forensics.model import (
    AssistantTurn,
    EventTurn,
    ProviderError,
    ReadIssue,
    Session,
    ToolCall,
    ToolResultTurn,
    UserTurn,
    renumber,
)

__all__ = ["read_stream", "DEFAULT_LOCATIONS"]

FORMAT = "pi"

DEFAULT_LOCATIONS: dict[str, list[str]] = {
    "linux": ["~/.pi/agent/sessions/"],
    "darwin": ["~/.pi/agent/sessions/"],
    "windows": ["%USERPROFILE%\\.pi\\agent\\sessions\\"],
    "env": ["PI_CODING_AGENT_DIR (sessions under $PI_CODING_AGENT_DIR/sessions/)",
            "PI_CODING_AGENT_SESSION_DIR (the sessions folder itself; from secondary notes)"],
    "notes": ["one folder per working directory: --<cwd with / replaced by ->--/"],
}
"""Where pi keeps sessions."""

SHELL_TOOLS = frozenset({"bash"})
SKIPPED = frozenset({"thinking_level_change", "label", "custom"})
_EXITED = knowledge_cache.compile(r"Command exited with code (-?\d+)\s*$")
EVENT_TEXT_CHARS = 4000


def read_stream(stream: BinaryIO, source: str) -> list[Session]:
    reader = _Reader(source)
    for line_no, rec in iter_jsonl(stream, source, reader.issues):
        reader.add(line_no, rec)
    return reader.finish()


def _blocks(content: Any) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _text(content: Any) -> tuple[str, int]:
    parts, images = [], 0
    for b in _blocks(content):
        if b.get("type") == "text" and isinstance(b.get("text"), str):
            parts.append(b["text"])
        elif b.get("type") == "image":
            images += 1
    return "\n".join(parts), images


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source
        self.issues: list[ReadIssue] = []
        self.header: dict | None = None
        self.entries: list[tuple[int, dict]] = []
        self.unknown: Counter[str] = Counter()
        self.unknown_line: dict[str, int] = {}

    def add(self, line: int, rec: dict) -> None:
        if rec.get("type") == "session" and self.header is None:
            self.header = rec
            return
        self.entries.append((line, rec))

    # -- tree -------------------------------------------------------------------------------

    def _paths(self) -> tuple[list[tuple[int, dict]], list[list[tuple[int, dict]]]]:
        """The live path (root → last entry) and the off-path branches, in file order."""
        ids = {rec["id"]: i for i, (_, rec) in enumerate(self.entries)
               if isinstance(rec.get("id"), str)}
        if not ids:  # v1: a linear file
            return self.entries, []
        on_path: set[int] = set()
        index: int | None = len(self.entries) - 1
        while index is not None and index not in on_path:
            on_path.add(index)
            parent = self.entries[index][1].get("parentId")
            index = ids.get(parent) if isinstance(parent, str) else None
        live = [e for i, e in enumerate(self.entries) if i in on_path]
        branches: dict[int, list[tuple[int, dict]]] = {}
        root_of: dict[int, int] = {}
        for i, (line, rec) in enumerate(self.entries):
            if i in on_path:
                continue
            parent = rec.get("parentId")
            p = ids.get(parent) if isinstance(parent, str) else None
            root = root_of.get(p, i) if p is not None and p not in on_path else i
            root_of[i] = root
            branches.setdefault(root, []).append((line, rec))
        return live, list(branches.values())

    # -- entries ----------------------------------------------------------------------------

    def _turns(self, entries: list[tuple[int, dict]], models: dict[str, None],
               meta: dict[str, Any]) -> list[Any]:
        turns: list[Any] = []
        names: dict[str, str] = {}
        for line, rec in entries:
            kind = rec.get("type") if isinstance(rec.get("type"), str) else None
            anchor = rec.get("id") if isinstance(rec.get("id"), str) and rec["id"] else f"L{line}"
            time = iso_to_unix(rec.get("timestamp"))
            if kind == "message" and isinstance(rec.get("message"), dict):
                self._message(turns, rec["message"], anchor, line, time, models, names)
            elif kind == "compaction":
                summary = rec.get("summary") if isinstance(rec.get("summary"), str) else ""
                turns.append(_event("compaction", anchor, line, time, summary,
                                    tokens_before=rec.get("tokensBefore") if isinstance(
                                        rec.get("tokensBefore"), int) else None))
            elif kind == "custom_message":
                text, _ = _text(rec.get("content"))
                turns.append(_event("injected", anchor, line, time, text,
                                    custom_type=_str(rec.get("customType"))))
            elif kind == "branch_summary":
                turns.append(_event("other", anchor, line, time, _str(rec.get("summary")) or "",
                                    branch_from=_str(rec.get("fromId"))))
            elif kind == "model_change":
                if isinstance(rec.get("modelId"), str):
                    models.setdefault(rec["modelId"], None)
            elif kind == "session_info":
                if isinstance(rec.get("name"), str):
                    meta["title"] = rec["name"]
            elif kind in SKIPPED:
                pass
            else:
                name = kind or "(no type)"
                if kind == "message":
                    name = "message without a message object"
                self.unknown[name] += 1
                self.unknown_line.setdefault(name, line)
        return turns

    def _message(self, turns: list, msg: dict, anchor: str, line: int, time: float | None,
                 models: dict[str, None], names: dict[str, str]) -> None:
        role = msg.get("role")
        time = time if time is not None else iso_to_unix(msg.get("timestamp"))
        if role == "user":
            text, images = _text(msg.get("content"))
            if text.strip() or images:
                turns.append(UserTurn(ordinal=0, anchor=anchor, line=line, time=time, text=text,
                                      images=images))
        elif role == "assistant":
            model = msg.get("model") if isinstance(msg.get("model"), str) else None
            if model:
                models.setdefault(model, None)
            turn = AssistantTurn(ordinal=0, anchor=anchor, line=line, time=time,
                                 message_id=anchor, model=model, finish=_str(msg.get("stopReason")))
            texts, thoughts = [], []
            for b in _blocks(msg.get("content")):
                kind = b.get("type")
                turn.part_kinds.append(str(kind))
                if kind == "text" and isinstance(b.get("text"), str) and b["text"].strip():
                    texts.append(b["text"])
                elif kind == "thinking" and isinstance(b.get("thinking"), str):
                    thoughts.append(b["thinking"])
                elif kind == "toolCall":
                    name = b.get("name") if isinstance(b.get("name"), str) else ""
                    args = b.get("arguments") if isinstance(b.get("arguments"), dict) else {}
                    cid = b.get("id") if isinstance(b.get("id"), str) and b["id"] else \
                        f"{anchor}#{len(turn.tool_calls)}"
                    names[cid] = name
                    turn.tool_calls.append(ToolCall(
                        call_id=cid, name=name, input=args, anchor=anchor,
                        command=args.get("command") if name in SHELL_TOOLS and isinstance(
                            args.get("command"), str) else None))
            turn.text = "\n".join(texts)
            turn.reasoning = "\n".join(thoughts)
            usage = msg.get("usage") if isinstance(msg.get("usage"), dict) else {}
            turn.tokens_in = json_int(usage.get("input"))
            turn.tokens_out = json_int(usage.get("output"))
            error = msg.get("errorMessage") if isinstance(msg.get("errorMessage"), str) else ""
            if turn.finish == "aborted":
                turn.aborted = True
            elif turn.finish == "error":
                turn.error = ProviderError(name="error", message=error)
            turns.append(turn)
            if turn.finish == "error":
                turns.append(_event("api_error", anchor, line, time, error))
        elif role == "toolResult":
            cid = msg.get("toolCallId") if isinstance(msg.get("toolCallId"), str) else ""
            text, images = _text(msg.get("content"))
            tail = text.rstrip()[-200:]
            exited = _EXITED.search(tail)
            code = int(exited.group(1)) if exited else None
            turns.append(ToolResultTurn(
                ordinal=0, anchor=anchor, line=line, time=time, call_id=cid,
                name=names.get(cid) or _str(msg.get("toolName")) or "",
                output=clip(text + ("\n[image]" * images if images else "")), exit_code=code,
                is_error=msg.get("isError") is True, killed=code in (137, 143),
                timed_out="Command timed out after" in tail,
                aborted=tail.endswith("Command aborted")))
        elif role == "bashExecution":
            command = _str(msg.get("command")) or ""
            code = msg.get("exitCode")
            turns.append(_event("shell", anchor, line, time, command, command=command,
                                exit_code=json_int(code),
                                cancelled=True if msg.get("cancelled") is True else None))
        elif role in ("custom", "hookMessage"):
            text, _ = _text(msg.get("content"))
            turns.append(_event("injected", anchor, line, time, text, role=role))
        elif role == "compactionSummary":
            turns.append(_event("compaction", anchor, line, time, _str(msg.get("summary")) or ""))
        elif role == "branchSummary":
            turns.append(_event("other", anchor, line, time, _str(msg.get("summary")) or "",
                                role=role))
        else:
            name = f"message/{role}" if isinstance(role, str) else "message without a role"
            self.unknown[name] += 1
            self.unknown_line.setdefault(name, line)

    # -- result -----------------------------------------------------------------------------

    def finish(self) -> list[Session]:
        if self.header is None and not self.entries:
            first_bad = next((i.line for i in self.issues if i.line), None)
            raise IngestError(self.source, "no readable pi records", line=first_bad)
        header = self.header or {}
        notes: list[str] = []
        sid = header.get("id") if isinstance(header.get("id"), str) and header["id"] else None
        if sid is None:
            sid = os.path.splitext(os.path.basename(self.source))[0]
            notes.append("no session header: session id taken from the file name")
        version = header.get("version")
        if isinstance(version, int):
            notes.append(f"pi session format v{version}")
        if isinstance(header.get("parentSession"), str):
            notes.append(f"forked from {header['parentSession']}")
        live, branches = self._paths()
        models: dict[str, None] = {}
        meta: dict[str, Any] = {}
        turns = self._turns(live, models, meta)
        if branches:
            notes.append(f"{len(branches)} branch(es) off the live path read as linked sessions")
        sessions = [self._session(sid, turns, models, meta, header, None, notes)]
        for branch in branches:
            first = branch[0][1].get("id")
            side_models: dict[str, None] = dict(models)
            side = self._turns(branch, side_models, {})
            start = branch[0][1].get("parentId")
            sessions.append(self._session(
                f"{sid}:branch-{first}", side, side_models, {}, header, sid,
                [f"branch off the live path (from entry {start}): the user went back and "
                 "took another way; not part of the current conversation"]))
        for name, count in sorted(self.unknown.items()):
            self.issues.append(ReadIssue(path=self.source, line=self.unknown_line[name],
                                         message=f"{count} entr(ies) of unknown type {name!r} "
                                                 "skipped"))
        sessions[0].issues = self.issues
        return sessions

    def _session(self, sid: str, turns: list, models: dict, meta: dict, header: dict,
                 parent: str | None, notes: list[str]) -> Session:
        renumber(turns)
        times = [t.time for t in turns if t.time is not None]
        started = iso_to_unix(header.get("timestamp")) if parent is None else None
        if started is None and times:
            started = min(times)
        return Session(
            id=sid, agent="pi", format=FORMAT, source=self.source, models=list(models),
            project_dir=_str(header.get("cwd")), title=meta.get("title"), parent_id=parent,
            started=started, ended=max(times) if times else None, turns=turns, notes=notes)


def _event(event: str, anchor: str, line: int, time: float | None, text: str,
           **detail: Any) -> EventTurn:
    return EventTurn(ordinal=0, anchor=anchor, line=line, time=time, event=event,
                     text=clip(text, EVENT_TEXT_CHARS // 2, EVENT_TEXT_CHARS // 2),
                     detail={k: v for k, v in detail.items() if v is not None})


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None

