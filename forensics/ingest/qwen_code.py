"""Qwen Code sessions: ``~/.qwen/projects/<cwd with / → ->/chats/<sessionId>.jsonl``.

Qwen Code forked Gemini CLI but records like Claude Code: one ``ChatRecord`` per line
``{uuid, parentUuid, sessionId, timestamp, type, subtype?, cwd, version, message?, …}`` where
``message`` is Gemini ``Content`` (``{role, parts[]}``); the part and shell-output handling is
shared with the Gemini reader (``forensics.ingest._gemini``). Early Qwen Code builds wrote the
Gemini single-document shape (model messages typed ``qwen``); the Gemini reader reads those.

Anchor: the record ``uuid``. What becomes which turn:

* ``user`` → ``UserTurn`` (text parts); parts that are all ``functionResponse`` are results, not
  words. ``provenance`` other than ``real_user`` (goal runtime, system) → ``injected``.
* ``assistant`` → ``AssistantTurn``: text parts, ``thought: true`` parts as reasoning,
  ``functionCall`` parts as calls; tokens from ``usageMetadata`` (``promptTokenCount``,
  ``candidatesTokenCount``).
* ``tool_result`` → one ``ToolResultTurn`` per ``functionResponse`` (paired by id with the
  call); ``toolCallResult.status`` ``error`` → ``is_error``, ``cancelled`` → ``aborted``;
  ``durationMs``; the shell exit code from the output text (Qwen keeps the old ``Exit Code: N``).
* ``system``: ``chat_compression`` → ``compaction``; ``slash_command`` (``invocation``) →
  ``UserTurn`` with ``command``; ``notification``, ``cron``, ``background_task_completed`` →
  ``notification``/``injected``; ``mid_turn_user_message`` → a queued ``UserTurn``;
  ``custom_title`` sets the title; ``rewind`` → ``other``; bookkeeping subtypes (telemetry, file
  history, goals, managed-session records…) are skipped.

Records of a subagent (``isSidechain`` / ``agentId``) become session ``agent-<agentId>`` linked
to the main one. Records are read in file order; ``/branch`` forks live in their own files.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any, BinaryIO

from forensics.errors import IngestError
from forensics.ingest._gemini import (
    SHELL_TOOLS,
    function_responses,
    only_function_responses,
    parts_of,
    response_text,
    shell_status,
    split_parts,
)
from forensics.ingest._source import iter_jsonl
from forensics.ingest._text import clip, json_int
from forensics.ingest._time import iso_to_unix
from forensics.model import (
    AssistantTurn,
    EventTurn,
    ReadIssue,
    Session,
    ToolCall,
    ToolResultTurn,
    UserTurn,
    renumber,
)

__all__ = ["read_stream", "DEFAULT_LOCATIONS"]

FORMAT = "qwen-code"

DEFAULT_LOCATIONS: dict[str, list[str]] = {
    "linux": ["~/.qwen/projects/*/chats/", "~/.qwen/tmp/*/chats/"],
    "darwin": ["~/.qwen/projects/*/chats/", "~/.qwen/tmp/*/chats/"],
    "windows": ["%USERPROFILE%\\.qwen\\projects\\*\\chats\\",
                "%USERPROFILE%\\.qwen\\tmp\\*\\chats\\"],
    "env": ["QWEN_DATA_DIR (used by third-party readers for ~/.qwen; not checked in the CLI)"],
    "notes": ["projects/<cwd with / replaced by ->/chats/<sessionId>.jsonl in current builds; "
              "tmp/<hash>/chats/session-*.json (Gemini shape) in early 2025 builds"],
}
"""Where Qwen Code keeps sessions (``*`` = one path segment)."""

SKIPPED_SYSTEM = frozenset({
    "ui_telemetry", "at_command", "attribution_snapshot", "parent_session", "session_source",
    "session_execution_engine", "omni_recall", "session_model", "session_approval_mode",
    "agent_bootstrap", "agent_session_ready", "file_history_snapshot", "user_text_elements",
    "session_artifact_event", "session_artifact_snapshot", "session_sources_snapshot",
    "branch_checkpoint", "goal_state", "goal_turn_end", "managed_session_header_v1",
    "managed_session_event_v1", "managed_session_commit_v1", "session_notes", "turn_result",
    "realtime_message",
})
INJECTED_SYSTEM = frozenset({"cron", "goal_runtime", "agent_launch_prompt"})
NOTIFICATION_SYSTEM = frozenset({"notification", "background_task_completed"})
EVENT_TEXT_CHARS = 4000


def read_stream(stream: BinaryIO, source: str) -> list[Session]:
    reader = _Reader(source)
    for line_no, rec in iter_jsonl(stream, source, reader.issues):
        reader.add(line_no, rec)
    return reader.finish()


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source
        self.issues: list[ReadIssue] = []
        self.turns: list[Any] = []
        self.keys: list[str | None] = []
        self.key: str | None = None
        self.records = 0
        self.session_id: str | None = None
        self.version: str | None = None
        self.cwd: str | None = None
        self.title: str | None = None
        self.models: dict[str, None] = {}
        self.call_names: dict[str, str] = {}
        self.unknown: Counter[str] = Counter()
        self.unknown_line: dict[str, int] = {}

    def _push(self, turn: Any) -> None:
        self.turns.append(turn)
        self.keys.append(self.key)

    def _event(self, event: str, anchor: str, line: int, time: float | None, text: str,
               **detail: Any) -> None:
        self._push(EventTurn(ordinal=0, anchor=anchor, line=line, time=time, event=event,
                             text=clip(text, EVENT_TEXT_CHARS // 2, EVENT_TEXT_CHARS // 2),
                             detail={k: v for k, v in detail.items() if v is not None}))

    def add(self, line: int, rec: dict) -> None:
        self.records += 1
        agent = rec.get("agentId")
        self.key = (agent if isinstance(agent, str) else "") if (
            rec.get("isSidechain") is True or isinstance(agent, str)) else None
        for field in ("sessionId", "version", "cwd"):
            value = rec.get(field)
            attr = {"sessionId": "session_id"}.get(field, field)
            if isinstance(value, str) and value and getattr(self, attr) is None:
                setattr(self, attr, value)
        kind = rec.get("type") if isinstance(rec.get("type"), str) else None
        anchor = rec.get("uuid") if isinstance(rec.get("uuid"), str) and rec["uuid"] else f"L{line}"
        time = iso_to_unix(rec.get("timestamp"))
        message = rec.get("message") if isinstance(rec.get("message"), dict) else {}
        parts = message.get("parts")
        if kind == "user":
            self._user(line, anchor, time, rec, parts)
        elif kind == "assistant":
            self._assistant(line, anchor, time, rec, parts)
        elif kind == "tool_result":
            self._tool_result(line, anchor, time, rec, parts)
        elif kind == "system":
            self._system(line, anchor, time, rec)
        else:
            name = kind or "(no type)"
            self.unknown[name] += 1
            self.unknown_line.setdefault(name, line)

    def _user(self, line: int, anchor: str, time: float | None, rec: dict, parts: Any) -> None:
        if only_function_responses(parts):
            self._tool_result(line, anchor, time, rec, parts)
            return
        text, _, images = split_parts(parts)
        if not text.strip() and not images:
            return
        provenance = rec.get("provenance")
        if isinstance(provenance, str) and provenance != "real_user":
            self._event("injected", anchor, line, time, text, provenance=provenance)
            return
        self._push(UserTurn(ordinal=0, anchor=anchor, line=line, time=time, text=text,
                            images=images))

    def _assistant(self, line: int, anchor: str, time: float | None, rec: dict,
                   parts: Any) -> None:
        text, reasoning, _ = split_parts(parts)
        model = rec.get("model") if isinstance(rec.get("model"), str) and rec["model"] else None
        if model:
            self.models.setdefault(model, None)
        turn = AssistantTurn(ordinal=0, anchor=anchor, line=line, time=time, message_id=anchor,
                             text=text if text.strip() else "", reasoning=reasoning, model=model)
        for index, part in enumerate(parts_of(parts)):
            if isinstance(part.get("functionCall"), dict):
                fc = part["functionCall"]
                name = fc.get("name") if isinstance(fc.get("name"), str) else ""
                args = fc.get("args") if isinstance(fc.get("args"), dict) else {}
                cid = fc.get("id") if isinstance(fc.get("id"), str) and fc["id"] else \
                    f"{anchor}#{index}"
                turn.tool_calls.append(ToolCall(
                    call_id=cid, name=name, input=args,
                    command=args.get("command") if name in SHELL_TOOLS and isinstance(
                        args.get("command"), str) else None,
                    background=args.get("is_background") is True, anchor=anchor))
                self.call_names[cid] = name
                turn.part_kinds.append("functionCall")
            elif isinstance(part.get("text"), str):
                turn.part_kinds.append("thought" if part.get("thought") is True else "text")
        usage = rec.get("usageMetadata")
        if isinstance(usage, dict):
            turn.tokens_in = json_int(usage.get("promptTokenCount"))
            turn.tokens_out = json_int(usage.get("candidatesTokenCount"))
        self._push(turn)

    def _tool_result(self, line: int, anchor: str, time: float | None, rec: dict,
                     parts: Any) -> None:
        info = rec.get("toolCallResult") if isinstance(rec.get("toolCallResult"), dict) else {}
        status = info.get("status") if isinstance(info.get("status"), str) else None
        responses = function_responses(parts)
        if not responses and isinstance(info.get("callId"), str):
            responses = [{"id": info["callId"], "response": {}}]
        for n, fr in enumerate(responses):
            cid = fr.get("id") if isinstance(fr.get("id"), str) else ""
            name = self.call_names.get(cid) or (fr.get("name") if isinstance(fr.get("name"), str)
                                                else "")
            output, error = response_text(fr.get("response"))
            if not error and isinstance(info.get("error"), str):
                error = info["error"]
            display = info.get("resultDisplay")
            if not output and not error and isinstance(display, str):
                output = display
            facts = shell_status(output or error or "") if name in SHELL_TOOLS else {
                "exit_code": None, "killed": False, "timed_out": False, "aborted": False}
            duration = info.get("durationMs")
            self._push(ToolResultTurn(
                ordinal=0, anchor=anchor if n == 0 else f"{anchor}#{n}", line=line, time=time,
                call_id=cid, name=name, output=clip(output or error or ""),
                exit_code=facts["exit_code"], is_error=status == "error" or (
                    error is not None and status is None),
                error=error, killed=facts["killed"], timed_out=facts["timed_out"],
                aborted=status == "cancelled" or facts["aborted"],
                duration_ms=float(duration) if isinstance(duration, (int, float))
                and not isinstance(duration, bool) else None))

    def _system(self, line: int, anchor: str, time: float | None, rec: dict) -> None:
        subtype = rec.get("subtype") if isinstance(rec.get("subtype"), str) else None
        payload = rec.get("systemPayload") if isinstance(rec.get("systemPayload"), dict) else {}
        message = rec.get("message") if isinstance(rec.get("message"), dict) else {}
        text, _, _ = split_parts(message.get("parts"))
        if subtype in SKIPPED_SYSTEM:
            return
        if subtype == "chat_compression":
            info = payload.get("info")
            self._event("compaction", anchor, line, time, text, info=info if isinstance(
                info, (dict, str)) else None)
        elif subtype == "slash_command":
            raw = payload.get("rawCommand") if isinstance(payload.get("rawCommand"), str) else ""
            if payload.get("phase") in (None, "invocation") and raw.startswith("/"):
                name, _, args = raw.partition(" ")
                self._push(UserTurn(ordinal=0, anchor=anchor, line=line, time=time, text=raw,
                                    command=name, arguments=args.strip()))
            else:
                self._event("command", anchor, line, time, text or raw,
                            phase=payload.get("phase") if isinstance(payload.get("phase"), str)
                            else None)
        elif subtype == "mid_turn_user_message":
            words = text or (payload.get("text") if isinstance(payload.get("text"), str) else "")
            if words.strip():
                self._push(UserTurn(ordinal=0, anchor=anchor, line=line, time=time, text=words,
                                    queued=True))
        elif subtype in NOTIFICATION_SYSTEM:
            self._event("notification", anchor, line, time, text, subtype=subtype)
        elif subtype in INJECTED_SYSTEM:
            self._event("injected", anchor, line, time, text, subtype=subtype)
        elif subtype == "custom_title":
            title = payload.get("title") if isinstance(payload.get("title"), str) else text
            self.title = title or self.title
        elif subtype == "agent_retry":
            self._event("retry", anchor, line, time, text, subtype=subtype)
        else:
            self._event("other", anchor, line, time, text, subtype=subtype)

    def finish(self) -> list[Session]:
        if self.records == 0:
            first_bad = next((i.line for i in self.issues if i.line), None)
            raise IngestError(self.source, "no readable Qwen Code records", line=first_bad)
        for name, count in sorted(self.unknown.items()):
            self.issues.append(ReadIssue(path=self.source, line=self.unknown_line[name],
                                         message=f"{count} record(s) of unknown type {name!r} "
                                                 "skipped"))
        sid = self.session_id or os.path.splitext(os.path.basename(self.source))[0]
        main = [t for t, k in zip(self.turns, self.keys) if k is None]
        sides: dict[str, list[Any]] = {}
        for t, k in zip(self.turns, self.keys):
            if k is not None:
                sides.setdefault(k, []).append(t)
        sessions = []
        for turns, session_id, parent, notes in (
                [(main, sid, None, [])] + [
                    (side, f"agent-{key}" if key else f"{sid}:sidechain", sid,
                     ["subagent transcript: its user turns are the parent agent's instructions"])
                    for key, side in sides.items()]):
            if not turns and parent is None and sides:
                continue
            renumber(turns)
            times = [t.time for t in turns if t.time is not None]
            models = [t.model for t in turns if isinstance(t, AssistantTurn) and t.model]
            sessions.append(Session(
                id=session_id, agent="qwen-code", format=FORMAT, source=self.source,
                agent_version=self.version, models=list(dict.fromkeys(models)),
                project_dir=self.cwd, title=self.title if parent is None else None,
                parent_id=parent, started=min(times) if times else None,
                ended=max(times) if times else None, turns=turns,
                issues=self.issues if parent is None else [], notes=notes))
        if sessions and sessions[0].parent_id is not None:
            sessions[0].issues = self.issues
        return sessions

