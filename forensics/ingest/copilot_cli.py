"""GitHub Copilot CLI sessions: ``~/.copilot/session-state/<sessionId>/events.jsonl``.

UNVERIFIED against a real file: Copilot CLI is closed source and no public ``events.jsonl`` was
available. The shapes come from the generated event types of ``github/copilot-sdk``
(``session-events.ts``) and third-party readers; every field below is read defensively and an
event type not listed here is reported as a ``ReadIssue``, so the first real file shows what
differs.

Every line is ``{type, data, id, timestamp, parentId, ephemeral?, agentId?}``; the anchor is
the event ``id`` (a UUID). What becomes which turn:

* ``user.message`` → ``UserTurn`` with ``data.content`` (what the user typed;
  ``transformedContent`` is the harness-augmented text and is not used).
* ``assistant.message`` → ``AssistantTurn`` (``content``, ``reasoningText``, ``toolRequests[]``
  as calls); ``assistant.reasoning`` adds reasoning to the next message; ``assistant.usage``
  adds tokens to the last one. A message with ``parentToolCallId`` belongs to a subagent and is
  marked ``sidechain``.
* ``tool.execution_complete`` → ``ToolResultTurn``: ``success: false`` → ``is_error`` with
  ``error.message`` (``aborted`` when the code says the user rejected it); the exit code from a
  ``terminal`` block's ``exitCode`` in ``result.contents`` (a failed command can still be
  ``success: true``); ``tool.execution_start`` only supplies the tool name and start time.
* ``system.message`` → ``injected``; ``system.notification`` → ``notification``.
* ``abort`` → ``abort`` (the assistant turn it cut short gets ``aborted``); ``session.error`` →
  ``api_error``; ``session.compaction_complete`` / ``session.truncation`` → ``compaction``;
  ``session.info`` / ``session.warning`` → ``other``; ``session.resume`` → ``session_start``;
  ``subagent.*``, ``skill.invoked``, ``hook.*`` → ``other``; ``session.model_change`` adds a
  model; ``session.title_changed`` names the session; turn boundaries, idle, usage
  checkpoints, mode/plan changes, permissions and streaming deltas are bookkeeping.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any, BinaryIO

from forensics.errors import IngestError
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

FORMAT = "copilot-cli"

DEFAULT_LOCATIONS: dict[str, list[str]] = {
    "linux": ["~/.copilot/session-state/"],
    "darwin": ["~/.copilot/session-state/"],
    "windows": ["%USERPROFILE%\\.copilot\\session-state\\"],
    "env": ["COPILOT_HOME (sessions under $COPILOT_HOME/session-state/)"],
    "notes": ["<sessionId>/events.jsonl; older builds wrote session-state/<sessionId>.jsonl",
              "unverified against a real file"],
}
"""Where Copilot CLI keeps sessions."""

SHELL_TOOLS = frozenset({"bash", "shell", "powershell", "run_in_terminal"})
SKIPPED = frozenset({
    "assistant.turn_start", "assistant.turn_end", "assistant.message_delta",
    "assistant.reasoning_delta", "assistant.intent", "session.idle", "session.usage_checkpoint",
    "session.mode_changed", "session.plan_changed", "session.compaction_start",
    "session.shutdown", "tool.user_requested", "tool.execution_partial_result",
    "tool.execution_progress", "permission.requested", "permission.completed",
    "session.context_changed", "session.workspace_file_changed", "pending_messages.modified",
})
OTHER_EVENTS = frozenset({"session.info", "session.warning", "subagent.started",
                          "subagent.completed", "subagent.failed", "subagent.selected",
                          "skill.invoked", "hook.start", "hook.end"})
REJECTED_CODES = frozenset({"rejected", "denied", "user_rejected", "cancelled"})
EVENT_TEXT_CHARS = 4000


def read_stream(stream: BinaryIO, source: str) -> list[Session]:
    reader = _Reader(source)
    for line_no, rec in iter_jsonl(stream, source, reader.issues):
        reader.add(line_no, rec)
    return [reader.finish()]


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source
        self.issues: list[ReadIssue] = []
        self.turns: list[Any] = []
        self.records = 0
        self.session_id: str | None = None
        self.version: str | None = None
        self.cwd: str | None = None
        self.title: str | None = None
        self.models: dict[str, None] = {}
        self.call_names: dict[str, str] = {}
        self.started_at: dict[str, float] = {}
        self.reasoning: list[str] = []
        self.unknown: Counter[str] = Counter()
        self.unknown_line: dict[str, int] = {}

    def _event(self, event: str, anchor: str, line: int, time: float | None, text: str,
               **detail: Any) -> None:
        self.turns.append(EventTurn(
            ordinal=0, anchor=anchor, line=line, time=time, event=event,
            text=clip(text, EVENT_TEXT_CHARS // 2, EVENT_TEXT_CHARS // 2),
            detail={k: v for k, v in detail.items() if v is not None}))

    def add(self, line: int, rec: dict) -> None:
        self.records += 1
        kind = rec.get("type") if isinstance(rec.get("type"), str) else None
        data = rec.get("data") if isinstance(rec.get("data"), dict) else {}
        anchor = rec.get("id") if isinstance(rec.get("id"), str) and rec["id"] else f"L{line}"
        time = iso_to_unix(rec.get("timestamp"))
        if kind == "session.start":
            self.session_id = self.session_id or _str(data.get("sessionId"))
            self.version = self.version or _str(data.get("copilotVersion")) or _str(
                data.get("version"))
            context = data.get("context") if isinstance(data.get("context"), dict) else {}
            self.cwd = self.cwd or _str(context.get("cwd"))
        elif kind == "session.resume":
            self._event("session_start", anchor, line, time, "", resumed=True)
        elif kind == "session.model_change":
            if isinstance(data.get("newModel"), str):
                self.models.setdefault(data["newModel"], None)
        elif kind == "session.title_changed":
            self.title = _str(data.get("title")) or self.title
        elif kind == "user.message":
            text = _str(data.get("content")) or ""
            attachments = data.get("attachments") if isinstance(data.get("attachments"), list) \
                else []
            images = sum(1 for a in attachments if isinstance(a, dict) and a.get("type") == "image")
            source = _str(data.get("source"))
            if source not in (None, "user"):
                self._event("injected", anchor, line, time, text, source=source)
            elif text.strip() or images:
                self.turns.append(UserTurn(ordinal=0, anchor=anchor, line=line, time=time,
                                           text=text, images=images))
        elif kind == "assistant.reasoning":
            if isinstance(data.get("content"), str):
                self.reasoning.append(data["content"])
        elif kind == "assistant.message":
            self._assistant(anchor, line, time, data)
        elif kind == "assistant.usage":
            self._usage(data)
        elif kind == "tool.execution_start":
            cid = _str(data.get("toolCallId"))
            if cid:
                if isinstance(data.get("toolName"), str):
                    self.call_names.setdefault(cid, data["toolName"])
                if time is not None:
                    self.started_at[cid] = time
        elif kind == "tool.execution_complete":
            self._result(anchor, line, time, data)
        elif kind == "abort":
            for turn in reversed(self.turns):
                if isinstance(turn, UserTurn) or (isinstance(turn, ToolResultTurn)
                                                  and not (turn.aborted or turn.timed_out)):
                    break  # the reply it would have cut short had already finished
                if isinstance(turn, AssistantTurn):
                    turn.aborted = True
                    break
            self._event("abort", anchor, line, time, _str(data.get("reason")) or "")
        elif kind == "session.error":
            self._event("api_error", anchor, line, time, _str(data.get("message")) or "",
                        error_type=_str(data.get("errorType")))
        elif kind in ("session.compaction_complete", "session.truncation"):
            self._event("compaction", anchor, line, time,
                        _str(data.get("summaryContent")) or _str(data.get("message")) or "",
                        source=kind)
        elif kind in ("system.message", "system.notification"):
            text = _str(data.get("content")) or _str(data.get("message")) or ""
            self._event("injected" if kind == "system.message" else "notification", anchor,
                        line, time, text, source=kind)
        elif kind in OTHER_EVENTS:
            text = _str(data.get("message")) or _str(data.get("agentName")) or _str(
                data.get("name")) or ""
            self._event("other", anchor, line, time, text, source=kind)
        elif kind in SKIPPED:
            pass
        else:
            name = kind or "(no type)"
            self.unknown[name] += 1
            self.unknown_line.setdefault(name, line)

    def _assistant(self, anchor: str, line: int, time: float | None, data: dict) -> None:
        text = _str(data.get("content")) or ""
        reasoning = self.reasoning + ([data["reasoningText"]] if isinstance(
            data.get("reasoningText"), str) else [])
        self.reasoning = []
        turn = AssistantTurn(ordinal=0, anchor=anchor, line=line, time=time,
                             message_id=_str(data.get("messageId")), text=text,
                             reasoning="\n".join(r for r in reasoning if r),
                             sidechain=isinstance(data.get("parentToolCallId"), str))
        if text.strip():
            turn.part_kinds.append("text")
        requests = data.get("toolRequests") if isinstance(data.get("toolRequests"), list) else []
        for index, req in enumerate(requests):
            if not isinstance(req, dict):
                continue
            name = _str(req.get("name")) or ""
            args = req.get("arguments") if isinstance(req.get("arguments"), dict) else {}
            cid = _str(req.get("toolCallId")) or f"{anchor}#{index}"
            self.call_names[cid] = name
            turn.tool_calls.append(ToolCall(
                call_id=cid, name=name, input=args, anchor=anchor,
                command=args.get("command") if name in SHELL_TOOLS and isinstance(
                    args.get("command"), str) else None))
            turn.part_kinds.append("toolRequest")
        self.turns.append(turn)

    def _usage(self, data: dict) -> None:
        model = _str(data.get("model"))
        if model:
            self.models.setdefault(model, None)
        for turn in reversed(self.turns):
            if isinstance(turn, UserTurn):
                return
            if isinstance(turn, AssistantTurn):
                turn.model = turn.model or model
                turn.tokens_in = json_int(data.get("inputTokens"))
                turn.tokens_out = json_int(data.get("outputTokens"))
                return

    def _result(self, anchor: str, line: int, time: float | None, data: dict) -> None:
        cid = _str(data.get("toolCallId")) or anchor
        result = data.get("result") if isinstance(data.get("result"), dict) else {}
        error = data.get("error") if isinstance(data.get("error"), dict) else {}
        output = _str(result.get("content")) or ""
        exit_code = None
        for block in result.get("contents") if isinstance(result.get("contents"), list) else []:
            if isinstance(block, dict) and block.get("type") == "terminal":
                code = block.get("exitCode")
                if isinstance(code, int) and not isinstance(code, bool):
                    exit_code = code
                if not output and isinstance(block.get("text"), str):
                    output = block["text"]
        message = _str(error.get("message"))
        code = _str(error.get("code"))
        failed = data.get("success") is False
        start = self.started_at.get(cid)
        self.turns.append(ToolResultTurn(
            ordinal=0, anchor=anchor, line=line, time=time, call_id=cid,
            name=self.call_names.get(cid, ""), output=clip(output or message or ""),
            exit_code=exit_code, is_error=failed, error=message,
            killed=exit_code in (137, 143), aborted=failed and code in REJECTED_CODES,
            duration_ms=round((time - start) * 1000.0, 3) if time is not None
            and start is not None else None))

    def finish(self) -> Session:
        if self.records == 0:
            first_bad = next((i.line for i in self.issues if i.line), None)
            raise IngestError(self.source, "no readable Copilot CLI events", line=first_bad)
        for name, count in sorted(self.unknown.items()):
            self.issues.append(ReadIssue(path=self.source, line=self.unknown_line[name],
                                         message=f"{count} event(s) of unknown type {name!r} "
                                                 "skipped"))
        renumber(self.turns)
        notes = ["Copilot CLI reader built from the SDK's event types; not yet checked against "
                 "a real events.jsonl"]
        sid = self.session_id
        if not sid:
            base = os.path.basename(self.source)
            folder = os.path.basename(os.path.dirname(self.source.replace("\\", "/")))
            sid = folder if base == "events.jsonl" and folder else os.path.splitext(base)[0]
        times = [t.time for t in self.turns if t.time is not None]
        return Session(
            id=sid, agent="copilot-cli", format=FORMAT, source=self.source,
            agent_version=self.version, models=list(self.models), project_dir=self.cwd,
            title=self.title, started=min(times) if times else None,
            ended=max(times) if times else None, turns=self.turns, issues=self.issues,
            notes=notes)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None

