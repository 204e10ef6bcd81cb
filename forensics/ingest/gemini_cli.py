"""Gemini CLI sessions: ``~/.gemini/tmp/<project-id>/chats/session-<start>-<id8>.json[l]``.

Two on-disk eras, one reader:

* ≤ 0.38: one JSON document ``{sessionId, projectHash, startTime, lastUpdated, messages[],
  summary?, kind?}``, rewritten whole on every change (only the final state survives).
* ≥ 0.39: an append-only JSONL log. Line 1 is the metadata; a message line is a full
  ``MessageRecord`` and the same ``id`` is appended again whenever the message changes (last
  write wins, the message keeps the place of its first write); ``{"$set": {...}}`` updates
  metadata, ``{"$set": {"messages": [...]}}`` replaces the whole list (a checkpoint after
  ``/compress``: the reader keeps the messages it dropped, since they were said, and reads its
  new user message, the summary, as ``injected``); ``{"$rewindTo": id}`` drops that message
  and everything after it (``/rewind``; an unknown id clears the list). Dropped messages are
  not lost to a reviewer: they become a second session ``<sessionId>:rewound-<n>`` linked to
  the main one (``parent_id``).

The project directory changed its name at 0.29 (``sha256(root)`` → a short slug); the
``projectHash`` inside the file stays the hash, so the session carries no readable project path.

What becomes which turn:

* ``user`` → ``UserTurn`` (``displayContent`` when present: what the user typed before ``@file``
  expansion). Since 0.44 the tool-response turn is also written as a ``user`` message whose parts
  are all ``functionResponse``: not a user turn; it only supplies a result no call recorded.
  ``<session_context>`` blocks are ``injected``; a ``!cmd`` the user ran is ``shell``.
* ``gemini`` (``qwen`` in early Qwen Code) → ``AssistantTurn`` anchored at the message ``id``:
  text = ``content`` (string or non-thought parts), reasoning = ``thoughts[]`` (subject and
  description) and thought parts, calls = ``toolCalls[]``, tokens = ``tokens.input/output``.
  Each call is followed by its ``ToolResultTurn`` (anchor = call ``id``; results are paired to
  calls by ``functionResponse.id``, never by position). ``status:"error"`` → ``is_error`` with
  ``response.error``; ``status:"cancelled"`` → ``aborted`` (``timed_out`` when the text says the
  timeout fired). Shell exit codes come from the output text (``forensics.ingest._gemini``): a
  non-zero exit keeps ``status:"success"``.
* ``info`` → ``abort`` for ``Request cancelled.`` (the assistant turn it cut short gets
  ``aborted``), ``compaction`` for compression notices, else ``other``; ``error`` →
  ``api_error`` for ``[API Error: …]`` texts (provider errors), else ``other`` (slash-command
  usage errors); ``warning`` → ``other`` (hook failures). ``detail.level`` names the type.

A turn that ended silently after a tool result writes no ``gemini`` message: the next record is
a user message. The reader adds nothing there; the empty-response rule sees what the file shows.
"""

from __future__ import annotations

import os
import re
from typing import Any, BinaryIO

import orjson

from forensics import knowledge_cache
from forensics.errors import IngestError
from forensics.ingest._gemini import (
    SHELL_TOOLS,
    function_responses,
    only_function_responses,
    response_text,
    shell_status,
    split_parts,
)
from forensics.ingest._source import loads_document
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

__all__ = ["read_stream", "read_document", "is_session_document", "DEFAULT_LOCATIONS"]

FORMAT = "gemini-cli"

DEFAULT_LOCATIONS: dict[str, list[str]] = {
    "linux": ["~/.gemini/tmp/*/chats/"],
    "darwin": ["~/.gemini/tmp/*/chats/"],
    "windows": ["%USERPROFILE%\\.gemini\\tmp\\*\\chats\\"],
    "env": [],
    "notes": ["no environment variable moves ~/.gemini; without a home dir the CLI uses "
              "<tmpdir>/.gemini", "subagents: chats/<parentSessionId>/<id>.json[l] (≥ 0.37)",
              "Qwen Code's early builds: ~/.qwen/tmp/<hash>/chats/ (same shape, type 'qwen')"],
}
"""Where Gemini CLI keeps sessions, per platform (``*`` = one path segment, the project id)."""

MODEL_TYPES = frozenset({"gemini", "qwen"})
MESSAGE_TYPES = frozenset({"user", "gemini", "qwen", "info", "error", "warning"})
CANCELLED_NOTICE = "Request cancelled."
API_ERROR_PREFIXES = ("[API Error", "API Error")
SESSION_CONTEXT = "<session_context>"
EVENT_TEXT_CHARS = 4000
_SLASH = knowledge_cache.compile(r"^/([a-z][\w-]*)(?:\s+(.*))?$", re.S)
_UPDATE = knowledge_cache.compile(
    r"update available!?\s*v?(\d+\.\d+\.\d+\S*)\s*(?:→|->)\s*v?(\d+\.\d+\.\d+\S*)", re.I)


def read_stream(stream: BinaryIO, source: str) -> list[Session]:
    """The session (plus rewound messages, if any) in a Gemini CLI ``.json`` or ``.jsonl``."""
    data = stream.read()
    issues: list[ReadIssue] = []
    doc = _as_document(data)
    if doc is not None:
        return read_document(doc, source, issues)
    return _read_log(data, source, issues)


def _as_document(data: bytes) -> dict | None:
    """The legacy single document, or None when the bytes are a JSONL log."""
    try:
        doc = loads_document(data)
    except orjson.JSONDecodeError:
        return None
    if isinstance(doc, dict) and ("messages" in doc or "sessionId" not in doc or "type" in doc):
        return doc
    return None  # a one-line log: just the metadata line


def read_document(doc: Any, source: str, issues: list[ReadIssue] | None = None) -> list[Session]:
    issues = [] if issues is None else issues
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        raise IngestError(source, "not a Gemini CLI session: expected {sessionId, messages: [...]}")
    messages = []
    for index, m in enumerate(doc["messages"]):
        if isinstance(m, dict):
            messages.append((None, m))
        else:
            issues.append(ReadIssue(path=source, message=f"messages[{index}] is not an object"))
    return _Builder(source, doc, issues).build(messages, [])


def _read_log(data: bytes, source: str, issues: list[ReadIssue]) -> list[Session]:
    meta: dict[str, Any] = {}
    order: dict[str, tuple[int, dict]] = {}
    """message id -> (line of its first write, last written record); dict keeps first order."""
    rewound: list[list[tuple[int, dict]]] = []
    checkpointed: set[str] = set()
    checkpoints = 0
    records = 0
    lines = data.split(b"\n")
    last_line = max((i for i, raw in enumerate(lines, 1) if raw.strip()), default=0)
    for line_no, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            rec = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            what = "truncated last line" if line_no == last_line else "not valid JSON"
            issues.append(ReadIssue(path=source, line=line_no, message=f"{what} ({exc.msg})"))
            continue
        if not isinstance(rec, dict):
            issues.append(ReadIssue(path=source, line=line_no,
                                    message="line is JSON but not an object"))
            continue
        records += 1
        if "$rewindTo" in rec:
            target = rec["$rewindTo"]
            ids = list(order)
            cut = ids.index(target) if isinstance(target, str) and target in order else 0
            dropped = [order.pop(i) for i in ids[cut:]]
            if dropped:
                rewound.append(dropped)
            continue
        if "$set" in rec:
            update = rec["$set"]
            if not isinstance(update, dict):
                issues.append(ReadIssue(path=source, line=line_no, message="$set is not an object"))
                continue
            if "messages" in update:
                if isinstance(update["messages"], list):
                    # A checkpoint (after /compress or masking) replaces the writer's list; the
                    # messages it drops were still said, so they stay. Its new messages (the
                    # compression summary) are the harness's, not the user's.
                    for m in update["messages"]:
                        if isinstance(m, dict) and isinstance(m.get("id"), str):
                            first = order.get(m["id"])
                            if first is None:
                                checkpointed.add(m["id"])
                            order[m["id"]] = (first[0] if first else line_no, m)
                    checkpoints += 1
                else:
                    issues.append(ReadIssue(path=source, line=line_no,
                                            message="$set.messages is not a list"))
            meta.update({k: v for k, v in update.items() if k != "messages"})
            continue
        if isinstance(rec.get("id"), str) and isinstance(rec.get("type"), str):
            first = order.get(rec["id"])
            order[rec["id"]] = (first[0] if first else line_no, rec)
            continue
        if not meta and ("sessionId" in rec or "projectHash" in rec):
            meta.update(rec)
            continue
        if "sessionId" in rec and "type" not in rec:
            meta.update({k: v for k, v in rec.items() if k not in meta})
            continue
        issues.append(ReadIssue(path=source, line=line_no,
                                message="record is neither a message, $set nor $rewindTo; skipped"))
    if records == 0:
        first_bad = next((i.line for i in issues if i.line), None)
        raise IngestError(source, "no readable Gemini CLI records", line=first_bad)
    builder = _Builder(source, meta, issues)
    builder.checkpointed = checkpointed
    if checkpoints:
        builder.notes.append(f"{checkpoints} $set.messages checkpoint(s): messages they dropped "
                             "are kept in place, their new messages read as harness text")
    return builder.build(list(order.values()), rewound)


class _Builder:
    """Turns of one message list; results paired to calls by ``functionResponse.id``."""

    def __init__(self, source: str, meta: dict, issues: list[ReadIssue]) -> None:
        self.source = source
        self.meta = meta
        self.issues = issues
        self.models: dict[str, None] = {}
        self.notes: list[str] = []
        self.agent = "gemini-cli"
        self.unknown: dict[str, int] = {}
        self.checkpointed: set[str] = set()
        """Ids of messages a ``$set.messages`` checkpoint introduced (summaries)."""

    def build(self, messages: list[tuple[int | None, dict]],
              rewound: list[list[tuple[int, dict]]]) -> list[Session]:
        meta = self.meta
        sid = meta.get("sessionId")
        if not isinstance(sid, str) or not sid:
            sid = os.path.splitext(os.path.basename(self.source))[0]
            self.notes.append("no sessionId: session id taken from the file name")
        if any(m.get("type") == "qwen" for _, m in messages):
            self.agent = "qwen-code"
        turns = self._turns(messages)
        for kind, count in sorted(self.unknown.items()):
            self.issues.append(ReadIssue(path=self.source, message=(
                f"{count} message(s) of unknown type {kind!r} skipped")))
        kind = meta.get("kind")
        parent = None
        if kind == "subagent":
            folder = os.path.basename(os.path.dirname(self.source.replace("\\", "/")))
            parent = folder if folder and folder != "chats" else None
            self.notes.append("subagent transcript: its user turns are the parent agent's "
                              "instructions, not the human's")
        if isinstance(meta.get("projectHash"), str):
            self.notes.append(f"project: sha256 {meta['projectHash'][:12]}… (the file names no "
                              "project path)")
        if rewound:
            self.notes.append(f"{sum(len(r) for r in rewound)} message(s) removed by /rewind "
                              f"read as {len(rewound)} linked session(s)")
        times = [t.time for t in turns if t.time is not None]
        started = iso_to_unix(meta.get("startTime"))
        ended = iso_to_unix(meta.get("lastUpdated"))
        if started is None and times:
            started = min(times)
        if ended is None and times:
            ended = max(times)
        title = meta.get("summary") if isinstance(meta.get("summary"), str) else None
        renumber(turns)
        sessions = [Session(
            id=sid, agent=self.agent, format=FORMAT, source=self.source, models=list(self.models),
            title=title, parent_id=parent, started=started, ended=ended, turns=turns,
            issues=self.issues, notes=self.notes)]
        for n, dropped in enumerate(rewound, 1):
            side = self._turns([(line, m) for line, m in dropped])
            renumber(side)
            side_times = [t.time for t in side if t.time is not None]
            sessions.append(Session(
                id=f"{sid}:rewound-{n}", agent=self.agent, format=FORMAT, source=self.source,
                models=list(_models(side)), parent_id=sid,
                started=min(side_times) if side_times else None,
                ended=max(side_times) if side_times else None, turns=side,
                notes=["messages the user removed with /rewind: off the live conversation"]))
        return sessions

    # -- messages ---------------------------------------------------------------------------

    def _turns(self, messages: list[tuple[int | None, dict]]) -> list[Any]:
        turns: list[Any] = []
        responses: dict[str, dict] = {}
        for _, m in messages:
            for call in _list(m.get("toolCalls")):
                if isinstance(call, dict):
                    for fr in function_responses(call.get("result")):
                        if isinstance(fr.get("id"), str):
                            responses.setdefault(fr["id"], fr)
            if m.get("type") == "user":
                for fr in function_responses(m.get("content")):
                    if isinstance(fr.get("id"), str):
                        responses.setdefault(fr["id"], fr)
        answered: set[str] = set()
        for index, (line, m) in enumerate(messages):
            kind = _str(m.get("type"))
            anchor = m["id"] if isinstance(m.get("id"), str) and m["id"] else f"messages[{index}]"
            time = iso_to_unix(m.get("timestamp"))
            if kind == "user":
                self._user(turns, m, anchor, line, time, answered)
            elif kind in MODEL_TYPES:
                self._model(turns, m, anchor, line, time, responses, answered)
            elif kind in ("info", "error", "warning"):
                self._notice(turns, kind, m, anchor, line, time)
            else:
                raw = m.get("type")
                name = kind if kind is not None else f"({type(raw).__name__})"
                self.unknown[name] = self.unknown.get(name, 0) + 1
        return turns

    def _user(self, turns: list, m: dict, anchor: str, line: int | None, time: float | None,
              answered: set[str]) -> None:
        content = m.get("content")
        if only_function_responses(content):
            # The synthetic tool-response turn (≥ 0.44): a result only when no call carried it.
            for fr in function_responses(content):
                cid = fr.get("id") if isinstance(fr.get("id"), str) else ""
                if cid and cid not in answered:
                    answered.add(cid)
                    turns.append(self._result(cid, _str(fr.get("name")), None, fr, anchor,
                                              line, time))
            return
        shown = m.get("displayContent")
        text, _, images = split_parts(shown if shown not in (None, "", []) else content)
        if not text.strip() and not images:
            return
        head = text.lstrip()
        if anchor in self.checkpointed:
            turns.append(self._event("injected", anchor, line, time, text, checkpoint=True))
            return
        if head.startswith(SESSION_CONTEXT):
            turns.append(self._event("injected", anchor, line, time, text))
            return
        if head.startswith("!") and len(head) > 1 and "\n" not in head.strip():
            turns.append(self._event("shell", anchor, line, time, text,
                                     command=head[1:].strip()))
            return
        slash = _SLASH.match(head.rstrip())
        turns.append(UserTurn(
            ordinal=0, anchor=anchor, line=line, time=time, text=text, images=images,
            command=f"/{slash.group(1)}" if slash else None,
            arguments=(slash.group(2) or "").strip() if slash else None))

    def _model(self, turns: list, m: dict, anchor: str, line: int | None, time: float | None,
               responses: dict[str, dict], answered: set[str]) -> None:
        text, thought_parts, _ = split_parts(m.get("content"))
        reasoning = [thought_parts] if thought_parts else []
        kinds: list[str] = []
        for th in _list(m.get("thoughts")):
            if isinstance(th, dict):
                bits = [th.get(k) for k in ("subject", "description")]
                joined = ": ".join(b for b in bits if isinstance(b, str) and b)
                if joined:
                    reasoning.append(joined)
        model = m.get("model") if isinstance(m.get("model"), str) and m["model"] else None
        if model:
            self.models.setdefault(model, None)
        if reasoning:
            kinds.append("thoughts")
        if text.strip():
            kinds.append("text")
        turn = AssistantTurn(ordinal=0, anchor=anchor, line=line, time=time, message_id=anchor,
                             text=text if text.strip() else "", reasoning="\n".join(reasoning),
                             model=model, part_kinds=kinds)
        tokens = m.get("tokens")
        if isinstance(tokens, dict):
            turn.tokens_in = json_int(tokens.get("input"))
            turn.tokens_out = json_int(tokens.get("output"))
        turns.append(turn)
        for index, call in enumerate(_list(m.get("toolCalls"))):
            if not isinstance(call, dict):
                continue
            name = _str(call.get("name")) or ""
            args = call.get("args") if isinstance(call.get("args"), dict) else {}
            cid = call.get("id") if isinstance(call.get("id"), str) and call["id"] else \
                f"{anchor}#{index}"
            command = args.get("command") if name in SHELL_TOOLS and isinstance(
                args.get("command"), str) else None
            turn.tool_calls.append(ToolCall(
                call_id=cid, name=name, input=args, command=command,
                background=args.get("is_background") is True, anchor=anchor))
            turn.part_kinds.append("tool_call")
            if cid in answered:
                continue
            fr = responses.get(cid)
            status = _str(call.get("status"))
            if fr is None and status is None:
                continue  # a call still running when the file was written
            answered.add(cid)
            turns.append(self._result(cid, name, status, fr or {}, cid,
                                      line, iso_to_unix(call.get("timestamp")) or time,
                                      display=call.get("resultDisplay")))

    def _result(self, call_id: str, name: str | None, status: str | None, fr: dict, anchor: str,
                line: int | None, time: float | None, display: Any = None) -> ToolResultTurn:
        output, error = response_text(fr.get("response"))
        if not output and not error and isinstance(display, str):
            output = display
        facts = shell_status(output) if (name or "") in SHELL_TOOLS else {
            "exit_code": None, "killed": False, "timed_out": False, "aborted": False}
        cancelled = status == "cancelled"
        timed_out = facts["timed_out"]
        return ToolResultTurn(
            ordinal=0, anchor=anchor, line=line, time=time, call_id=call_id, name=name or "",
            output=clip(output or (error or "")), exit_code=facts["exit_code"],
            is_error=status == "error", error=error if status != "success" else None,
            killed=facts["killed"], timed_out=timed_out,
            aborted=(cancelled and not timed_out) or facts["aborted"])

    def _notice(self, turns: list, kind: str, m: dict, anchor: str, line: int | None,
                time: float | None) -> None:
        text, _, _ = split_parts(m.get("content"))
        head = text.strip()
        if kind == "info" and head == CANCELLED_NOTICE:
            for turn in reversed(turns):
                if isinstance(turn, UserTurn) or (isinstance(turn, ToolResultTurn)
                                                  and not (turn.aborted or turn.timed_out)):
                    break  # the reply it would have cut short had already finished
                if isinstance(turn, AssistantTurn):
                    turn.aborted = True
                    break
            turns.append(self._event("abort", anchor, line, time, head, level=kind))
        elif kind == "info" and "compress" in head.lower():
            turns.append(self._event("compaction", anchor, line, time, head, level=kind))
        elif kind == "error" and head.startswith(API_ERROR_PREFIXES):
            turns.append(self._event("api_error", anchor, line, time, head, level=kind))
        else:
            update = _UPDATE.search(head) if kind == "info" else None
            if update:
                self.notes.append(f"agent version at least {update.group(1)} (update notice)")
            turns.append(self._event("other", anchor, line, time, head, level=kind))

    @staticmethod
    def _event(event: str, anchor: str, line: int | None, time: float | None, text: str,
               **detail: Any) -> EventTurn:
        return EventTurn(ordinal=0, anchor=anchor, line=line, time=time, event=event,
                         text=clip(text, EVENT_TEXT_CHARS // 2, EVENT_TEXT_CHARS // 2),
                         detail={k: v for k, v in detail.items() if v is not None})


def _models(turns: list[Any]) -> dict[str, None]:
    return {t.model: None for t in turns if isinstance(t, AssistantTurn) and t.model}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None



def is_session_document(obj: Any) -> bool:
    """A parsed JSON value shaped like a Gemini CLI (or early Qwen Code) session document."""
    if not isinstance(obj, dict) or not isinstance(obj.get("messages"), list):
        return False
    if "sessionId" not in obj:
        return False
    types = {m.get("type") for m in obj["messages"][:50]
             if isinstance(m, dict) and isinstance(m.get("type"), str)}
    return not types or bool(types & MESSAGE_TYPES)

