"""Claude Code transcripts: ``~/.claude/projects/<munged-cwd>/<session>.jsonl``.

One JSON object per line, tagged by ``type``. What becomes which turn:

* ``assistant`` lines: one API response is split across several lines, one content block each,
  sharing ``message.id``; tool results of its calls arrive on ``user`` lines in between. All lines
  of one ``message.id`` form ONE ``AssistantTurn``, placed at its first line (anchor = that line's
  ``uuid``), so every ``ToolResultTurn`` (file order) comes after the turn holding its call.
  Blank text and the ``(no content)`` placeholder are not visible text. ``<synthetic>`` lines:
  API errors (``isApiErrorMessage``) become an ``AssistantTurn`` with ``error`` plus an
  ``api_error`` event; ``No response requested.`` is harness text (``injected``).
* ``user`` lines: ``tool_result`` blocks -> ``ToolResultTurn``; text typed by the human ->
  ``UserTurn``; everything the harness wrote in the user's name -> ``EventTurn``: ``isMeta`` and
  caveat / ``<system-reminder>`` / IDE text (``injected``), compaction summaries (``injected``),
  ``<command-name>`` lines (a ``UserTurn`` with ``command``/``arguments``), their
  ``<local-command-stdout>`` (``command``), ``<bash-input>``/``<bash-stdout>`` (``shell``),
  ``<task-notification>`` (``notification``), ``[Request interrupted by user…]`` (``interrupt``;
  the assistant turn it cut short gets ``aborted``, as does a line with ``isAbortedMidStream``).
* ``attachment`` lines: a ``queued_command`` typed by the human is a ``UserTurn(queued=True)``;
  a queued ``<task-notification>`` is a ``notification``. Other attachments (reminders, file
  and IDE context, hook output, skill/tool listings, mode changes, budgets) are context the
  harness adds for the model and are skipped.
* ``system`` lines: ``compact_boundary``/``microcompact_boundary`` -> ``compaction``;
  ``api_error`` -> ``retry`` when the harness scheduled a retry, else ``api_error``; ``error``,
  ``api_refusal``, ``model_refusal_fallback`` -> ``api_error``; ``local_command`` -> as the
  matching user line; ``session_start`` -> ``session_start``; ``away_summary``,
  ``informational`` and other subtypes -> ``other``. ``turn_duration`` and
  ``stop_hook_summary`` are timing/hook bookkeeping and are skipped.
* Tokens: ``tokens_in``/``tokens_out`` are the response's ``usage.input_tokens`` (the uncached
  part) and ``usage.output_tokens``, from the last line of the group.
* Titles: ``custom-title`` over ``ai-title`` over ``summary`` lines.
* Skipped bookkeeping (nothing for the turn model): ``file-history-snapshot``,
  ``queue-operation`` (the prompt itself arrives as a user line or ``queued_command``),
  ``progress`` (hook/bash/MCP progress; ``agent_progress`` repeats subagent messages that live in
  the subagent's own file), ``last-prompt``, ``mode``, ``permission-mode``, ``agent-name``,
  ``pr-link``, ``worktree-state``, ``frame-link``, ``relocated``, ``bridge-session``,
  ``atis-latch``, ``started``, ``result``, ``tag``. Any other type is counted as a ``ReadIssue``.

Session id: the uuid in the file's name (Claude Code names each transcript after its session),
else the first ``sessionId``; a resumed session's file starts with lines of the session it
resumed, whose ids are noted as ``resumed from …``.

Subagent files (every conversational line ``isSidechain``, or under ``subagents/``, or named
``agent-*.jsonl``) become session ``agent-<agentId>`` with ``parent_id`` = the parent's
``sessionId``; their "user" turns are the parent agent's instructions. A file that mixes main and
sidechain lines (older builds) yields the main session first, then one session per sidechain
``agentId`` (``<sessionId>:sidechain`` when unnamed), each linked to the main one.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from typing import Any, BinaryIO

from forensics import knowledge_cache
from forensics.errors import IngestError
from forensics.ingest._source import add_each_line
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

__all__ = ["read_stream"]

SKIPPED_TYPES = frozenset({
    "file-history-snapshot", "queue-operation", "progress", "last-prompt", "mode",
    "permission-mode", "agent-name", "pr-link", "worktree-state", "frame-link", "relocated",
    "bridge-session", "atis-latch", "started", "result", "tag",
})
SKIPPED_SYSTEM = frozenset({"turn_duration", "stop_hook_summary"})
COMPACTION_SYSTEM = frozenset({"compact_boundary", "microcompact_boundary"})
ERROR_SYSTEM = frozenset({"error", "api_refusal", "model_refusal_fallback"})

SHELL_TOOLS = frozenset({"bash", "powershell", "mcp__acp__bash"})
"""Tools (lower-cased) whose ``input.command`` is a shell command line (ACP wraps Bash)."""

NO_CONTENT = "(no content)"
NO_RESPONSE = "No response requested."
INTERRUPT_PREFIX = "[Request interrupted by user"
USER_REJECTED = "The user doesn't want to proceed with this tool use"
INJECTED_PREFIXES = (
    "<local-command-caveat>", "Caveat: The messages below were generated by the user",
    "<system-reminder>", "<ide_opened_file>", "<ide_selection>", "<ide_diagnostics>",
    "<user-prompt-submit-hook>", "<post-tool-use-hook>", "<session-start-hook>",
    "<user-memory-input>",
)
COMMAND_OUTPUT_PREFIXES = ("<local-command-stdout>", "<local-command-stderr>")
SHELL_PREFIXES = ("<bash-input>", "<bash-stdout>", "<bash-stderr>")
NOTIFICATION_PREFIXES = ("<task-notification>",)

_COMMAND_NAME = knowledge_cache.compile(r"<command-name>\s*(.*?)\s*</command-name>", re.S)
_COMMAND_ARGS = knowledge_cache.compile(r"<command-args>(.*?)</command-args>", re.S)
_EXIT_CODE = knowledge_cache.compile(r"^(?:Error: )?Exit(?: code|ed with code) (-?\d+)")
"""``Exit code 1`` (Bash), ``Error: Exit code 1`` (toolUseResult), ``Exited with code 1.`` (ACP)."""
_TOOL_USE_ERROR = knowledge_cache.compile(r"<tool_use_error>(.*?)</tool_use_error>", re.S)
_BASH_INPUT = knowledge_cache.compile(r"<bash-input>(.*?)</bash-input>", re.S)

SUBAGENT_NOTE = ("subagent transcript: its user turns are the parent agent's instructions, "
                 "not the human's")

EVENT_TEXT_CHARS = 4000
"""Injected / event text is kept short: it is context for a reviewer, not evidence."""


def read_stream(stream: BinaryIO, source: str) -> list[Session]:
    """The session in one Claude Code JSONL stream."""
    reader = _Reader(source)
    add_each_line(stream, source, reader.issues, reader.add)
    return reader.finish()


def _text_of(content: Any) -> str:
    """Plain text of a string or a list of content blocks (images shown as ``[image]``)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "image":
            parts.append("[image]")
        elif kind == "tool_reference" and isinstance(block.get("tool_name"), str):
            parts.append(block["tool_name"])
    return "\n".join(parts)


def _short(text: str) -> str:
    return clip(text, EVENT_TEXT_CHARS // 2, EVENT_TEXT_CHARS // 2)


class _Reader:
    """Builds one session line by line; keeps only turns and small indexes."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.issues: list[ReadIssue] = []
        self.turns: list[Any] = []
        self.turn_keys: list[str | None] = []
        """Per turn: None for the main chain, else the sidechain's agentId ("" if unnamed)."""
        self.key: str | None = None
        self.session_id: str | None = None
        self.agent_id: str | None = None
        self.version: str | None = None
        self.cwd: str | None = None
        self.models: dict[str, None] = {}
        self.titles: dict[str, str] = {}
        self.started: float | None = None
        self.ended: float | None = None
        self.records = 0
        self.conversational = 0
        self.sidechain_lines = 0
        self.session_ids: dict[str, None] = {}
        self.unknown: Counter[str] = Counter()
        self.unknown_first_line: dict[str, int] = {}
        self.groups: dict[str, AssistantTurn] = {}
        """message.id -> its AssistantTurn, for lines of a response split across lines."""
        self.call_names: dict[str, str] = {}
        self.call_ids_in_group: dict[int, set[str]] = {}
        """id(AssistantTurn) -> call ids already in it (streamed lines may repeat a block)."""

    # -- dispatch ---------------------------------------------------------------------------

    def add(self, line: int, rec: dict) -> None:
        self.records += 1
        get = rec.get
        if get("isSidechain") is True:
            agent = get("agentId")
            self.key = agent if isinstance(agent, str) else ""
        else:
            self.key = None
        kind = get("type")
        if not isinstance(kind, str):  # _str, inlined: this runs on every line
            kind = None
        time = iso_to_unix(get("timestamp"))
        if time is not None:  # min and max, without their calls (equal times keep the first)
            if self.started is None or time < self.started:
                self.started = time
            if self.ended is None or time > self.ended:
                self.ended = time
        sid = get("sessionId")
        if isinstance(sid, str) and sid and sid not in self.session_ids:
            self.session_ids[sid] = None
            if self.session_id is None:
                self.session_id = sid
        if kind in SKIPPED_TYPES:  # most often progress lines: nothing more to read
            return
        if kind in ("user", "assistant"):
            self._envelope(rec)
            message = rec.get("message")
            if not isinstance(message, dict):
                self._issue(line, f"{kind} line without a message object")
                return
            if kind == "user":
                self._user(line, rec, message, time)
            else:
                self._assistant(line, rec, message, time)
        elif kind == "system":
            self._system(line, rec, time)
        elif kind == "attachment":
            self._attachment(line, rec, time)
        elif kind == "summary":
            if isinstance(rec.get("summary"), str):
                self.titles.setdefault("summary", rec["summary"])
        elif kind == "ai-title":
            if isinstance(rec.get("aiTitle"), str):
                self.titles["ai"] = rec["aiTitle"]
        elif kind == "custom-title":
            if isinstance(rec.get("customTitle"), str):
                self.titles["custom"] = rec["customTitle"]
        else:
            name = kind if kind is not None else _type_name(rec.get("type"))
            self.unknown[name] += 1
            self.unknown_first_line.setdefault(name, line)

    def _envelope(self, rec: dict) -> None:
        self.conversational += 1
        if rec.get("isSidechain") is True:
            self.sidechain_lines += 1
        if self.agent_id is None and isinstance(rec.get("agentId"), str):
            self.agent_id = rec["agentId"]
        if self.version is None and isinstance(rec.get("version"), str):
            self.version = rec["version"]
        if self.cwd is None and isinstance(rec.get("cwd"), str) and rec["cwd"]:
            self.cwd = rec["cwd"]

    def _push(self, turn: Any) -> None:
        self.turns.append(turn)
        self.turn_keys.append(self.key)

    def _issue(self, line: int | None, message: str) -> None:
        self.issues.append(ReadIssue(path=self.source, line=line, message=message))

    @staticmethod
    def _anchor(rec: dict, line: int) -> str:
        uuid = rec.get("uuid")
        return uuid if isinstance(uuid, str) and uuid else f"L{line}"

    def _event(self, event: str, rec: dict, line: int, time: float | None, text: str = "",
               **detail: Any) -> EventTurn:
        turn = EventTurn(ordinal=0, anchor=self._anchor(rec, line), line=line, time=time,
                         event=event, text=_short(text),
                         detail={k: v for k, v in detail.items() if v is not None})
        self._push(turn)
        return turn

    # -- assistant --------------------------------------------------------------------------

    def _assistant(self, line: int, rec: dict, message: dict, time: float | None) -> None:
        content = message.get("content")
        blocks = content if isinstance(content, list) else (
            [{"type": "text", "text": content}] if isinstance(content, str) else [])
        model = message.get("model") if isinstance(message.get("model"), str) else None
        if model == "<synthetic>" or rec.get("isApiErrorMessage") is True:
            self._synthetic(line, rec, blocks, time)
            return
        if model:
            self.models.setdefault(model, None)
        anchor = self._anchor(rec, line)
        mid = message.get("id") if isinstance(message.get("id"), str) else None
        turn = self.groups.get(mid) if mid else None
        if turn is None:
            turn = AssistantTurn(ordinal=0, anchor=anchor, line=line, time=time, message_id=mid,
                                 model=model, sidechain=rec.get("isSidechain") is True)
            self._push(turn)
            if mid:
                self.groups[mid] = turn
            self.call_ids_in_group[id(turn)] = set()
        seen_calls = self.call_ids_in_group.setdefault(id(turn), set())
        for index, block in enumerate(blocks):
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            turn.part_kinds.append(str(kind))
            if kind == "text":
                text = block.get("text")
                if isinstance(text, str) and text.strip() and text.strip() != NO_CONTENT:
                    turn.text = f"{turn.text}\n{text}" if turn.text else text
            elif kind == "thinking":
                thinking = block.get("thinking")
                if isinstance(thinking, str) and thinking:
                    turn.reasoning = f"{turn.reasoning}\n{thinking}" if turn.reasoning else thinking
            elif kind == "tool_use":
                call = self._tool_call(block, anchor, f"{anchor}#{index}")
                if call.call_id in seen_calls:
                    continue
                seen_calls.add(call.call_id)
                turn.tool_calls.append(call)
                self.call_names[call.call_id] = call.name
        if rec.get("isAbortedMidStream") is True:
            turn.aborted = True
        stop = message.get("stop_reason")
        if isinstance(stop, str):
            turn.finish = stop
        usage = message.get("usage")
        if isinstance(usage, dict):
            if json_int(usage.get("input_tokens")) is not None:
                turn.tokens_in = usage["input_tokens"]
            if json_int(usage.get("output_tokens")) is not None:
                turn.tokens_out = usage["output_tokens"]

    @staticmethod
    def _tool_call(block: dict, anchor: str, fallback_id: str) -> ToolCall:
        name = block.get("name") if isinstance(block.get("name"), str) else ""
        data = block.get("input") if isinstance(block.get("input"), dict) else {}
        call_id = block.get("id")
        call_id = call_id if isinstance(call_id, str) and call_id else fallback_id
        command = None
        if name.lower() in SHELL_TOOLS and isinstance(data.get("command"), str):
            command = data["command"]
        return ToolCall(call_id=call_id, name=name, input=data, command=command,
                        background=data.get("run_in_background") is True, anchor=anchor)

    def _synthetic(self, line: int, rec: dict, blocks: list, time: float | None) -> None:
        text = _text_of(blocks).strip()
        if text == NO_RESPONSE and rec.get("isApiErrorMessage") is not True:
            self._event("injected", rec, line, time, text, synthetic=True)
            return
        if rec.get("isApiErrorMessage") is True or text.startswith("API Error"):
            error = rec.get("error") if isinstance(rec.get("error"), str) else None
            self._push(AssistantTurn(
                ordinal=0, anchor=self._anchor(rec, line), line=line, time=time,
                model="<synthetic>", part_kinds=["text"],
                error=ProviderError(name="api_error", message=text),
                sidechain=rec.get("isSidechain") is True))
            self._event("api_error", rec, line, time, text, error=error)
            return
        self._event("injected", rec, line, time, text, synthetic=True)

    # -- user -------------------------------------------------------------------------------

    def _user(self, line: int, rec: dict, message: dict, time: float | None) -> None:
        content = message.get("content")
        if isinstance(content, str):
            blocks: list = [{"type": "text", "text": content}]
        elif isinstance(content, list):
            blocks = content
        else:
            blocks = []
        meta = rec.get("isMeta") is True
        compact = rec.get("isCompactSummary") is True
        typed: list[str] = []
        images = 0
        for block in blocks:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_result":
                self._tool_result(line, rec, block, time)
            elif kind == "image":
                images += 1
            elif kind == "text" and isinstance(block.get("text"), str):
                text = block["text"]
                if meta or compact:
                    typed.append(text)  # harness text; classified below as a whole
                elif not self._harness_text(line, rec, text, time):
                    typed.append(text)
        if meta or compact:
            if typed or images:
                self._event("injected", rec, line, time, "\n".join(typed),
                            compact_summary=True if compact else None)
            return
        text = "\n".join(t for t in typed if t.strip())
        if text.strip() or images:
            self._push(UserTurn(ordinal=0, anchor=self._anchor(rec, line), line=line,
                                       time=time, text=text, images=images))

    def _harness_text(self, line: int, rec: dict, text: str, time: float | None) -> bool:
        """Emit the event for harness-written text; False when a human typed it."""
        head = text.lstrip()
        if head.startswith(INTERRUPT_PREFIX):
            self._interrupt(rec, line, time, head)
            return True
        if "<command-name>" in head[:400] and head.startswith(("<command-", "<command-name>")):
            self._command(rec, line, time, head)
            return True
        if head.startswith("<command-message>"):
            self._event("injected", rec, line, time, head)
            return True
        if head.startswith(COMMAND_OUTPUT_PREFIXES):
            self._event("command", rec, line, time, head)
            return True
        if head.startswith(SHELL_PREFIXES):
            match = _BASH_INPUT.search(head)
            self._event("shell", rec, line, time, head,
                        command=match.group(1).strip() if match else None)
            return True
        if head.startswith(NOTIFICATION_PREFIXES):
            self._event("notification", rec, line, time, head)
            return True
        if head.startswith(INJECTED_PREFIXES):
            self._event("injected", rec, line, time, head)
            return True
        return False

    def _command(self, rec: dict, line: int, time: float | None, text: str) -> None:
        name_match = _COMMAND_NAME.search(text)
        args_match = _COMMAND_ARGS.search(text)
        name = name_match.group(1) if name_match else ""
        args = args_match.group(1).strip() if args_match else ""
        self._push(UserTurn(ordinal=0, anchor=self._anchor(rec, line), line=line,
                                   time=time, text=args or name, command=name or None,
                                   arguments=args))

    def _interrupt(self, rec: dict, line: int, time: float | None, text: str) -> None:
        for turn in reversed(self.turns):
            if isinstance(turn, UserTurn):
                break
            if isinstance(turn, AssistantTurn):
                turn.aborted = True
                break
        self._event("interrupt", rec, line, time, text.strip())

    def _tool_result(self, line: int, rec: dict, block: dict, time: float | None) -> None:
        call_id = block.get("tool_use_id") if isinstance(block.get("tool_use_id"), str) else ""
        output = _text_of(block.get("content"))
        extra = rec.get("toolUseResult")
        if not output.strip() and isinstance(extra, dict):
            streams = [extra.get(k) for k in ("stdout", "stderr")]
            output = "\n".join(x for x in streams if isinstance(x, str) and x) or output
        head = output.lstrip()[:300]
        exit_code = None
        match = _EXIT_CODE.match(head)
        if match is None and isinstance(extra, str):
            match = _EXIT_CODE.match(extra.lstrip()[:300])
        if match:
            exit_code = int(match.group(1))
        aborted = (
            USER_REJECTED in head or INTERRUPT_PREFIX in output[-300:] or INTERRUPT_PREFIX in head
            or head.startswith("Request was aborted")
            or (isinstance(extra, str) and extra.startswith("User rejected tool use"))
            or rec.get("toolDenialKind") == "user-rejected"
        )
        timed_out = head.startswith(("Command timed out after", "Error: Command timed out",
                                     "Timed out. New output:"))
        duration = None
        if isinstance(extra, dict):
            if extra.get("interrupted") is True:
                aborted = True
            for key in ("durationMs", "totalDurationMs"):
                if isinstance(extra.get(key), (int, float)) and not isinstance(extra[key], bool):
                    duration = float(extra[key])
                    break
        error_match = _TOOL_USE_ERROR.search(head) if "<tool_use_error>" in head else None
        tail = output.rstrip()[-40:]
        killed = exit_code in (137, 143) or tail.endswith("\nKilled") or tail == "Killed"
        self._push(ToolResultTurn(
            ordinal=0, anchor=self._anchor(rec, line), line=line, time=time, call_id=call_id,
            name=self.call_names.get(call_id, ""), output=clip(output), exit_code=exit_code,
            is_error=block.get("is_error") is True,
            error=error_match.group(1).strip() if error_match else None,
            killed=killed, timed_out=timed_out, aborted=aborted, duration_ms=duration))

    # -- attachments and system lines -------------------------------------------------------

    def _attachment(self, line: int, rec: dict, time: float | None) -> None:
        att = rec.get("attachment")
        if not isinstance(att, dict) or att.get("type") != "queued_command":
            return
        prompt = att.get("prompt")
        text = _text_of(prompt)
        images = sum(1 for b in prompt if isinstance(b, dict) and b.get("type") == "image") \
            if isinstance(prompt, list) else 0
        if isinstance(prompt, list):
            text = "\n".join(t for t in text.split("\n") if t != "[image]")
        origin = att.get("origin")
        origin_kind = origin.get("kind") if isinstance(origin, dict) else None
        if att.get("commandMode") == "task-notification" or text.lstrip().startswith(
                NOTIFICATION_PREFIXES):
            self._event("notification", rec, line, time, text, queued=True)
        elif rec.get("isMeta") is True or att.get("isMeta") is True or origin_kind not in (
                None, "human"):
            self._event("injected", rec, line, time, text, queued=True, origin=origin_kind)
        elif text.strip() or images:
            self._push(UserTurn(ordinal=0, anchor=self._anchor(rec, line), line=line,
                                       time=time, text=text, queued=True, images=images))

    def _system(self, line: int, rec: dict, time: float | None) -> None:
        subtype = _str(rec.get("subtype"))
        content = rec.get("content") if isinstance(rec.get("content"), str) else ""
        if subtype in SKIPPED_SYSTEM:
            return
        if subtype in COMPACTION_SYSTEM:
            meta = rec.get("compactMetadata") or rec.get("microcompactMetadata")
            trigger = meta.get("trigger") if isinstance(meta, dict) else None
            self._event("compaction", rec, line, time, content, subtype=subtype, trigger=trigger)
        elif subtype == "api_error":
            retry_in = rec.get("retryInMs")
            retrying = isinstance(retry_in, (int, float)) and retry_in > 0
            self._event("retry" if retrying else "api_error", rec, line, time,
                        content or _error_text(rec.get("error")), subtype=subtype,
                        attempt=rec.get("retryAttempt"), max_retries=rec.get("maxRetries"),
                        status=_error_status(rec.get("error")))
        elif subtype in ERROR_SYSTEM:
            text = content or rec.get("apiRefusalExplanation") or _error_text(rec.get("error"))
            self._event("api_error", rec, line, time, str(text or subtype), subtype=subtype,
                        status=_error_status(rec.get("error")))
        elif subtype == "local_command":
            if not self._harness_text(line, rec, content, time) and content.strip():
                self._event("command", rec, line, time, content)
        elif subtype == "session_start":
            self._event("session_start", rec, line, time, content)
        else:
            self._event("other", rec, line, time, content, subtype=str(subtype))

    # -- result -----------------------------------------------------------------------------

    def finish(self) -> list[Session]:
        if self.records == 0:
            first_bad = next((i.line for i in self.issues if i.line), None)
            raise IngestError(self.source, "no readable Claude Code records", line=first_bad)
        for name, count in sorted(self.unknown.items()):
            plural = "record" if count == 1 else "records"
            self._issue(self.unknown_first_line[name],
                        f"{count} {plural} of unknown type {name!r} skipped")
        base = os.path.basename(self.source)
        agent_file = base.startswith("agent-") and base.endswith(".jsonl")
        subagent = (
            (self.conversational > 0 and self.sidechain_lines == self.conversational)
            or "/subagents/" in self.source.replace(os.sep, "/") or agent_file
        )
        notes: list[str] = []
        stem = os.path.splitext(base)[0]
        # Claude Code names the file after the session; a resumed session's first lines carry
        # the id of the session it resumed, so the name wins and the other ids are noted.
        named = stem if UUID_NAME.match(stem) else None
        sid = named or self.session_id or stem
        parent = None
        if subagent:
            agent_id = self.agent_id or (base[len("agent-"):-len(".jsonl")] if agent_file else None)
            parent = self.session_id
            sid = f"agent-{agent_id}" if agent_id else f"agent-{os.path.splitext(base)[0]}"
            notes.append(SUBAGENT_NOTE)
        others = [i for i in self.session_ids if i != sid]
        if named and others and not subagent:
            notes.append(f"{RESUMED_NOTE} {', '.join(others)}")
        elif len(self.session_ids) > 1:
            notes.append(f"lines carry {len(self.session_ids)} session ids; read as one session")
        title = self.titles.get("custom") or self.titles.get("ai") or self.titles.get("summary")
        turns, sides = self.turns, {}
        if not subagent and any(k is not None for k in self.turn_keys):
            # Older builds wrote subagent (sidechain) lines into the parent's file: split them
            # off into sessions of their own, linked to this one.
            turns = [t for t, k in zip(self.turns, self.turn_keys) if k is None]
            for turn, key in zip(self.turns, self.turn_keys):
                if key is not None:
                    sides.setdefault(key, []).append(turn)
            notes.append(f"{len(sides)} sidechain transcript(s) in this file read as subagent "
                         "sessions")
        renumber(turns)
        models = list(self.models) if not sides else list(_models(turns))
        sessions = [Session(
            id=sid, agent="claude-code", format="claude-code", source=self.source,
            agent_version=self.version, models=models, project_dir=self.cwd,
            title=title, parent_id=parent, started=self.started, ended=self.ended,
            turns=turns, issues=self.issues, notes=notes)]
        for key, side in sides.items():
            renumber(side)
            times = [t.time for t in side if t.time is not None]
            sessions.append(Session(
                id=f"agent-{key}" if key else f"{sid}:sidechain", agent="claude-code",
                format="claude-code", source=self.source, agent_version=self.version,
                models=list(_models(side)), project_dir=self.cwd, parent_id=sid,
                started=min(times) if times else None, ended=max(times) if times else None,
                turns=side, notes=[SUBAGENT_NOTE]))
        return sessions


UUID_NAME = knowledge_cache.compile(
    r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
RESUMED_NOTE = "resumed from"
"""Note prefix naming the other session ids a resumed file's lines carry."""


def _models(turns: list[Any]) -> dict[str, None]:
    """Distinct real model names of the assistant turns, in order of first use."""
    return {t.model: None for t in turns
            if isinstance(t, AssistantTurn) and t.model and t.model != "<synthetic>"}


def _str(value: Any) -> str | None:
    """A record's tag when it is a string (fuzzed or broken records carry anything)."""
    return value if isinstance(value, str) else None


def _type_name(value: Any) -> str:
    return "(no type)" if value is None else f"({type(value).__name__} type)"


def _error_text(error: Any) -> str:
    """Message of a Claude Code error object, however deeply the API nested it."""
    for _ in range(4):
        if not isinstance(error, dict):
            break
        if isinstance(error.get("message"), str) and error["message"].strip():
            return error["message"].strip()
        error = error.get("error")
    return ""


def _error_status(error: Any) -> int | None:
    if isinstance(error, dict) and isinstance(error.get("status"), int):
        return error["status"]
    return None
