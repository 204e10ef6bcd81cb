"""OpenAI Codex CLI rollouts: ``~/.codex/sessions/YYYY/MM/DD/rollout-…jsonl``.

Each line is ``{"timestamp", "type", "payload"}``. Codex has no per-message ids on disk, so every
anchor is ``L<line>`` (1-based line of the record the turn starts at).

* User messages are written twice: a ``response_item`` message (role ``user``) and an
  ``event_msg`` ``user_message``. One ``UserTurn`` is emitted, anchored at the response item;
  an event whose text matches a user turn of the same turn (before any assistant output) is a
  duplicate. Scaffolding in the user's name is an ``EventTurn``: ``<environment_context>``,
  ``<user_instructions>``, ``# AGENTS.md instructions``, ``<turn_aborted>``, ``<skill>`` and
  other contextual fragments (``injected``), ``<user_shell_command>`` (``shell``),
  ``<subagent_notification>`` (``notification``); ``developer``/``system`` messages
  (``injected``).
* One model step = the consecutive ``response_item``s between two boundaries (a user message,
  a tool output, a turn/compaction event): ``reasoning``, assistant ``message``,
  ``function_call``, ``custom_tool_call``, ``local_shell_call``, ``web_search_call``. It becomes
  ONE ``AssistantTurn`` anchored at its first item (a ``web_search_call`` is a ``ToolCall``
  named ``web_search``; Codex writes no result item for it, so it has no ``ToolResultTurn``).
  ``agent_message``/``agent_reasoning`` events repeat those texts (usually just before the
  item); they are used only when no response item carried the same text (older rollouts), so
  nothing is counted twice.
* Tool outputs (``function_call_output``, ``custom_tool_call_output``) -> ``ToolResultTurn``.
  Shell outputs are a JSON string ``{"output", "metadata": {"exit_code", "duration_seconds"}}``
  or, in newer builds, text with ``Exit code: N`` / ``Process exited with code N`` and
  ``Wall time: X seconds`` headers; both are parsed. ``exec_command_end`` (extended history)
  carries the exit code and output of the same call: it is merged into that call's single
  result (whichever line comes first anchors it). Tools that report no exit status (code-mode
  ``exec`` cells, ``apply_patch`` text replies) keep ``exit_code=None``.
* Events: ``turn_aborted`` -> ``abort`` (the assistant turn it cut short gets ``aborted``);
  ``task_complete``/``turn_complete`` -> ``turn_complete`` with ``last_agent_message`` in
  ``detail``; ``context_compacted`` and ``compacted`` lines -> ``compaction``; ``error`` ->
  ``api_error``; ``stream_error`` -> ``retry``; ``token_count`` adds ``last_token_usage`` to the
  assistant turn before it (repeated totals are ignored).

Empty replies stay visible in the turn sequence. A step that produced only reasoning (often
``encrypted_content`` with no summary) is an ``AssistantTurn`` with ``text=""``, ``reasoning``
set (possibly empty) and ``part_kinds=["reasoning"]``. A turn with no assistant item at all
reads as a ``UserTurn`` followed directly by an ``EventTurn`` ``turn_complete`` whose
``detail["last_agent_message"]`` is None.

Skipped bookkeeping: ``turn_context`` (read for the model name), later ``session_meta`` lines
(forked/resumed history), ``world_state``, ``inter_agent_communication_metadata``,
``ghost_snapshot``; events ``task_started``/``turn_started``, ``agent_reasoning_raw_content``,
``agent_reasoning_section_break``, ``exec_command_begin``, ``patch_apply_begin/end``,
``web_search_begin/end``, ``mcp_tool_call_begin/end``, ``view_image_tool_call``,
``item_started/completed``, ``thread_settings_applied``, ``thread_goal_updated``,
``entered/exited_review_mode``, ``collab_*``, ``sub_agent_activity``, ``guardian_assessment``,
``dynamic_tool_call_request/response``, ``image_generation_begin/end``, ``undo_started/completed``,
``plan_update``, ``turn_diff``, ``background_event``, ``shutdown_complete``. The matching
``function_call``/output items carry what those events describe. Any other type is counted as a
``ReadIssue``.
"""

from __future__ import annotations

import os
import re
import shlex
from collections import Counter
from typing import Any, BinaryIO

import orjson

from forensics import knowledge_cache
from forensics.errors import IngestError
from forensics.ingest._source import add_each_line
from forensics.ingest._text import clip
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

__all__ = ["read_stream"]

SHELL_TOOLS = frozenset({"shell", "container.exec", "local_shell", "shell_command",
                         "exec_command"})
STEP_ITEMS = frozenset({"reasoning", "function_call", "custom_tool_call", "local_shell_call",
                        "web_search_call", "image_generation_call", "tool_search_call"})
OUTPUT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output",
                          "local_shell_call_output"})
SKIPPED_ITEMS = frozenset({"ghost_snapshot", "tool_search_output"})
SKIPPED_EVENTS = frozenset({
    "task_started", "turn_started", "agent_reasoning_raw_content",
    "agent_reasoning_raw_content_delta", "agent_reasoning_section_break", "exec_command_begin",
    "exec_command_output_delta", "patch_apply_begin", "patch_apply_end", "web_search_begin",
    "web_search_end", "mcp_tool_call_begin", "mcp_tool_call_end", "view_image_tool_call",
    "item_started", "item_completed", "thread_settings_applied", "thread_goal_updated",
    "entered_review_mode", "exited_review_mode", "collab_agent_spawn_begin",
    "collab_agent_spawn_end", "collab_agent_interaction_begin", "collab_agent_interaction_end",
    "collab_waiting_begin", "collab_waiting_end", "collab_close_begin", "collab_close_end",
    "sub_agent_activity", "guardian_assessment", "dynamic_tool_call_request",
    "dynamic_tool_call_response", "image_generation_begin", "image_generation_end",
    "undo_started", "undo_completed", "plan_update", "turn_diff", "background_event",
    "shutdown_complete", "session_configured", "mcp_startup_update", "mcp_startup_complete",
    "get_history_entry_response", "mcp_list_tools_response", "list_custom_prompts_response",
    "deprecation_notice", "warning",
})
SKIPPED_LINES = frozenset({"turn_context", "world_state", "inter_agent_communication_metadata"})

# Contextual fragments Codex stores as user-role messages (codex-rs contextual_user_message.rs).
INJECTED_PREFIXES = (
    "<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<turn_aborted>",
    "<skill>", "<context_update>", "<tool_context>", "<reasoning_context>", "<pinned_notes>",
    "<plugins>", "<subagents>", "<INSTRUCTIONS>",
)
SHELL_PREFIX = "<user_shell_command>"
NOTIFICATION_PREFIX = "<subagent_notification>"

_HEADER_EXIT = knowledge_cache.compile(r"^(?:Exit code:|Process exited with code) (-?\d+)\s*$",
                                        re.M)
_HEADER_WALL = knowledge_cache.compile(r"^Wall time: ([0-9.]+) seconds", re.M)

EVENT_TEXT_CHARS = 4000
NORMS_KEPT = 256
"""Folded texts a reader keeps before it starts again (echoes follow their item closely)."""


def read_stream(stream: BinaryIO, source: str) -> list[Session]:
    """The session in one Codex rollout stream."""
    reader = _Reader(source)
    add_each_line(stream, source, reader.issues, reader.add)
    return [reader.finish()]


def _norm(text: str) -> str:
    return " ".join(text.split())


def _blank(text: str) -> bool:
    """``not _norm(text)`` without folding: split and isspace know the same whitespace."""
    return not text or text.isspace()


def _short(text: str) -> str:
    return clip(text, EVENT_TEXT_CHARS // 2, EVENT_TEXT_CHARS // 2)


def shell_command(argv: Any) -> str | None:
    """The command line an argv runs, with ``bash -lc`` / ``powershell -Command`` unwrapped."""
    if isinstance(argv, str):
        return argv
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return None
    prog = os.path.basename(argv[0].replace("\\", "/")).lower()
    if prog.endswith(".exe"):
        prog = prog[:-4]
    if len(argv) == 3 and prog in ("bash", "sh", "zsh", "dash", "fish") and argv[1] in (
            "-lc", "-c", "-ic", "-cl"):
        return argv[2]
    if prog in ("powershell", "pwsh") and len(argv) >= 3 and argv[-2].lower() in (
            "-command", "-c"):
        return argv[-1]
    if prog == "cmd" and len(argv) >= 3 and argv[1].lower() == "/c":
        return " ".join(argv[2:])
    return shlex.join(argv)


def _content_text(content: Any) -> tuple[str, int]:
    """Joined text of a message's content items, and how many images it holds."""
    if isinstance(content, str):
        return content, 0
    if not isinstance(content, list):
        return "", 0
    parts, images = [], 0
    for item in content:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind in ("input_image", "image"):
            images += 1
        elif isinstance(item.get("text"), str):
            parts.append(item["text"])
    return "\n".join(parts), images


def _parse_output(raw: Any) -> dict[str, Any]:
    """Output text and status of a tool output payload, however this build encoded it."""
    out: dict[str, Any] = {"output": "", "exit_code": None, "duration_ms": None,
                           "is_error": False, "error": None, "timed_out": False,
                           "killed": False}
    if isinstance(raw, dict):
        if isinstance(raw.get("success"), bool) and not raw["success"]:
            out["is_error"] = True
        raw = raw.get("content", raw.get("output", raw.get("text", "")))
    if isinstance(raw, list):
        text, images = _content_text(raw)
        out["output"] = text + ("\n[image]" * images if images else "")
        _status_in_text(text, out)
        return out
    if not isinstance(raw, str):
        return out
    text = raw
    if raw[:1] == "{":
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            doc = None
        if isinstance(doc, dict) and "output" in doc:
            text = doc["output"] if isinstance(doc["output"], str) else orjson.dumps(
                doc["output"]).decode()
            meta = doc.get("metadata")
            if isinstance(meta, dict):
                code = meta.get("exit_code")
                if isinstance(code, int) and not isinstance(code, bool):
                    out["exit_code"] = code
                secs = meta.get("duration_seconds")
                if isinstance(secs, (int, float)) and not isinstance(secs, bool):
                    out["duration_ms"] = round(float(secs) * 1000.0, 3)
    out["output"] = text
    header = text[:600]
    cut = header.find("\nOutput:")
    if cut >= 0:
        header = header[:cut]
    if out["exit_code"] is None:
        match = _HEADER_EXIT.search(header)
        if match:
            out["exit_code"] = int(match.group(1))
    if out["duration_ms"] is None:
        match = _HEADER_WALL.search(header)
        if match:
            try:
                out["duration_ms"] = round(float(match.group(1)) * 1000.0, 3)
            except ValueError:
                pass
    _status_in_text(text, out)
    return out


_SANDBOX_EXIT = knowledge_cache.compile(r"exit code: (-?\d+)")
_SCRIPT_ERROR = knowledge_cache.compile(r"^Script error:\s*\n?(.+)", re.M)


def _status_in_text(text: str, out: dict[str, Any]) -> None:
    """Type the failures Codex reports only in the text of an output, at read time.

    * ``failed in sandbox <kind> with execution error: sandbox denied exec error, exit code: N,
      stdout: …, stderr: …`` (codex-rs ``SandboxErr::Denied``): failed, with that exit code;
      ``… command timed out`` / ``… killed by a signal`` are the sandbox's timeout and signal;
    * ``execution error: …``, ``exec_command failed: …``, ``apply_patch verification failed``:
      the harness refused or could not run the call;
    * a code-mode ``exec`` cell headed ``Script failed``: failed, with its ``Script error:`` line.
    """
    first = text.lstrip()[:300]
    line = first.split("\n", 1)[0]
    if first.startswith("failed in sandbox"):
        out["is_error"] = True
        out["error"] = line.split(", stdout:", 1)[0]
        code = _SANDBOX_EXIT.search(line)
        if code and out["exit_code"] is None:
            out["exit_code"] = int(code.group(1))
        if "command timed out" in line:
            out["timed_out"] = True
        elif "killed by a signal" in line:
            out["killed"] = True
    elif first.startswith(("execution error:", "apply_patch verification failed",
                           "exec_command failed:")):
        out["is_error"] = True
        out["error"] = line
    elif first.startswith("Script failed"):
        out["is_error"] = True
        why = _SCRIPT_ERROR.search(text[:4000])
        out["error"] = why.group(1).strip()[:300] if why else line


class _Reader:
    """Builds one session line by line; keeps only turns and small per-turn indexes."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.issues: list[ReadIssue] = []
        self.turns: list[Any] = []
        self.records = 0
        self.meta: dict | None = None
        self.meta_line: int | None = None
        self.models: dict[str, None] = {}
        self.title: str | None = None
        self.started: float | None = None
        self.ended: float | None = None
        self.unknown: Counter[str] = Counter()
        self.unknown_first_line: dict[str, int] = {}
        # the open model step and the event texts waiting for their response item
        self.step: AssistantTurn | None = None
        self.pending_text: list[tuple[int, float | None, str]] = []
        self.pending_reasoning: list[tuple[int, float | None, str]] = []
        self.item_texts: Counter[str] = Counter()
        """Texts response items carried in the current turn (to drop their echo events)."""
        self.recent_users: list[UserTurn] = []
        """User turns since the last assistant output (to dedupe the user_message echo)."""
        self.call_names: dict[str, str] = {}
        self.results: dict[str, ToolResultTurn] = {}
        self.last_total_tokens: int | None = None
        self.norms: dict[str, str] = {}
        """Whitespace-folded form of the texts seen lately: each user message, reasoning summary
        and assistant text is compared to its echo event, so it is folded once, not per look."""

    # -- dispatch ---------------------------------------------------------------------------

    def add(self, line: int, rec: dict) -> None:
        self.records += 1
        get = rec.get
        time = iso_to_unix(get("timestamp"))
        if time is not None:
            if self.started is None or time < self.started:
                self.started = time
            if self.ended is None or time > self.ended:
                self.ended = time
        kind = get("type")
        payload = get("payload")
        if type(payload) is dict:  # an envelope (orjson builds plain dicts only)
            if kind == "response_item":
                self._item(line, payload, time)
                return
            if kind == "event_msg":
                self._event_msg(line, payload, time)
                return
        if not isinstance(kind, str):  # fuzzed or broken records carry anything as their tag
            kind = None
        if "payload" not in rec and isinstance(kind, str) and (
                kind in STEP_ITEMS or kind in OUTPUT_ITEMS or kind == "message"):
            kind, payload = "response_item", rec  # pre-envelope rollouts: bare response items
        if kind == "response_item" and isinstance(payload, dict):
            self._item(line, payload, time)
        elif kind == "event_msg" and isinstance(payload, dict):
            self._event_msg(line, payload, time)
        elif kind == "session_meta" and isinstance(payload, dict):
            if self.meta is None:
                self.meta, self.meta_line = payload, line
        elif kind == "turn_context" and isinstance(payload, dict):
            if isinstance(payload.get("model"), str) and payload["model"]:
                self.models.setdefault(payload["model"], None)
        elif kind == "compacted":
            self._close_step()
            message = payload.get("message") if isinstance(payload, dict) else None
            self._event("compaction", line, time, message if isinstance(message, str) else "",
                        source="compacted")
        elif kind in SKIPPED_LINES:
            pass
        elif kind is None and "record_type" in rec:
            pass  # pre-envelope rollouts: {"record_type": "state"} lines
        elif kind is None and self.meta is None and isinstance(rec.get("id"), str):
            self.meta, self.meta_line = rec, line  # pre-envelope rollouts: first line is meta
        else:
            self._unknown(line, kind if kind is not None else _type_name(rec.get("type")))

    def _norm(self, text: str) -> str:
        """``_norm(text)``, folded once per text."""
        key = self.norms.get(text)
        if key is None:
            if len(self.norms) >= NORMS_KEPT:
                self.norms.clear()
            key = self.norms[text] = _norm(text)
        return key

    def _same(self, one: str, other: str) -> bool:
        """``_norm(one) == _norm(other)``; an echo is most often the very same text, and
        folding a long pasted message costs more than the rest of its line."""
        return one == other or self._norm(one) == self._norm(other)

    def _unknown(self, line: int, name: str) -> None:
        self.unknown[name] += 1
        self.unknown_first_line.setdefault(name, line)

    def _event(self, event: str, line: int, time: float | None, text: str = "",
               **detail: Any) -> EventTurn:
        turn = EventTurn(ordinal=0, anchor=f"L{line}", line=line, time=time, event=event,
                         text=_short(text),
                         detail={k: v for k, v in detail.items() if v is not None})
        self.turns.append(turn)
        return turn

    # -- model steps ------------------------------------------------------------------------

    def _open_step(self, line: int, time: float | None) -> AssistantTurn:
        if self.step is None:
            model = next(reversed(self.models), None) if self.models else None
            self.step = AssistantTurn(ordinal=0, anchor=f"L{line}", line=line, time=time,
                                      model=model)
            self.turns.append(self.step)
            self.recent_users.clear()
        return self.step

    def _close_step(self) -> None:
        """End the open step; event texts no response item carried become assistant output."""
        if self.pending_text or self.pending_reasoning:
            first = min(p[0] for p in self.pending_text + self.pending_reasoning)
            time = next((p[1] for p in self.pending_text + self.pending_reasoning
                         if p[0] == first), None)
            step = self._open_step(first, time)
            for _, _, text in self.pending_reasoning:
                step.part_kinds.append("agent_reasoning")
                step.reasoning = f"{step.reasoning}\n{text}" if step.reasoning else text
            for _, _, text in self.pending_text:
                step.part_kinds.append("agent_message")
                step.text = f"{step.text}\n{text}" if step.text else text
            self.pending_text.clear()
            self.pending_reasoning.clear()
        self.step = None

    def _new_turn(self) -> None:
        """A Codex turn ended or began: echoes never cross it."""
        self._close_step()
        self.item_texts.clear()
        self.recent_users.clear()

    def _carried(self, text: str, pending: list[tuple[int, float | None, str]]) -> None:
        """A response item carried ``text``: drop its waiting echo, or remember it."""
        if _blank(text):
            return
        for i, (_, _, waiting) in enumerate(pending):
            if self._same(waiting, text):
                del pending[i]
                return
        self.item_texts[self._norm(text)] += 1

    def _echo(self, text: str, pending: list, line: int, time: float | None) -> None:
        """An event repeated (or preceded) a response item's text."""
        if _blank(text):
            return
        if self.item_texts:  # else no item to look up: the text need not be folded
            key = self._norm(text)
            count = self.item_texts.get(key, 0)
            if count > 0:
                if count == 1:
                    del self.item_texts[key]  # an empty Counter means none waiting
                else:
                    self.item_texts[key] = count - 1
                return
        pending.append((line, time, text))

    # -- response items ---------------------------------------------------------------------

    def _item(self, line: int, item: dict, time: float | None) -> None:
        kind = item.get("type")
        if not isinstance(kind, str):
            kind = None
        if kind == "message":
            role = item.get("role")
            if role == "assistant":
                text, _ = _content_text(item.get("content"))
                step = self._open_step(line, time)
                step.part_kinds.append("message")
                if text.strip():
                    step.text = f"{step.text}\n{text}" if step.text else text
                self._carried(text, self.pending_text)
            elif role == "user":
                self._user_item(line, item, time)
            else:
                self._close_step()
                text, _ = _content_text(item.get("content"))
                self._event("injected", line, time, text, role=str(role))
        elif kind == "reasoning":
            step = self._open_step(line, time)
            step.part_kinds.append("reasoning")
            parts = [s.get("text") for s in _list(item.get("summary"))
                     if isinstance(s, dict) and isinstance(s.get("text"), str)]
            raw = [c.get("text") for c in _list(item.get("content"))
                   if isinstance(c, dict) and isinstance(c.get("text"), str)]
            for part in parts:
                self._carried(part, self.pending_reasoning)
            text = "\n".join(p for p in parts + raw if p.strip())
            if text:
                step.reasoning = f"{step.reasoning}\n{text}" if step.reasoning else text
        elif kind in ("function_call", "custom_tool_call", "local_shell_call", "web_search_call"):
            step = self._open_step(line, time)
            step.part_kinds.append(kind)
            call = self._call(line, kind, item)
            step.tool_calls.append(call)
            self.call_names[call.call_id] = call.name
        elif kind in ("image_generation_call", "tool_search_call"):
            self._open_step(line, time).part_kinds.append(kind)
        elif kind in OUTPUT_ITEMS:
            self._output(line, item, time)
        elif kind in ("compaction", "compaction_summary"):
            self._close_step()
            self._event("compaction", line, time, source=kind)
        elif kind == "agent_message":
            self._close_step()
            text, _ = _content_text(item.get("content"))
            self._event("other", line, time, text, item="agent_message",
                        author=item.get("author") if isinstance(item.get("author"), str) else None)
        elif kind in SKIPPED_ITEMS:
            pass
        else:
            self._unknown(line, f"response_item/{kind}")

    def _call(self, line: int, kind: str, item: dict) -> ToolCall:
        anchor = f"L{line}"
        call_id = item.get("call_id") or item.get("id")
        call_id = call_id if isinstance(call_id, str) and call_id else f"{kind}@{anchor}"
        name = item.get("name") if isinstance(item.get("name"), str) else ""
        data: dict[str, Any] = {}
        command = None
        if kind == "function_call":
            args = item.get("arguments")
            if isinstance(args, str):
                try:
                    parsed = orjson.loads(args) if args.strip() else {}
                except orjson.JSONDecodeError:
                    parsed = {"arguments": args}
            else:
                parsed = args if args is not None else {}
            data = parsed if isinstance(parsed, dict) else {"arguments": parsed}
            if name in SHELL_TOOLS:
                command = shell_command(data.get("command", data.get("cmd")))
        elif kind == "custom_tool_call":
            raw = item.get("input")
            data = {"input": raw} if raw is not None else {}
            if name in SHELL_TOOLS and isinstance(raw, str):
                command = raw
        elif kind == "local_shell_call":
            name = name or "local_shell"
            action = item.get("action") if isinstance(item.get("action"), dict) else {}
            data = action
            command = shell_command(action.get("command"))
        else:  # web_search_call
            name = name or "web_search"
            data = item.get("action") if isinstance(item.get("action"), dict) else {}
        return ToolCall(call_id=call_id, name=name, input=data, command=command, anchor=anchor)

    def _user_item(self, line: int, item: dict, time: float | None) -> None:
        self._close_step()
        content = item.get("content")
        text, images = _content_text(content)
        parts = [c.get("text", "") for c in content if isinstance(c, dict)] \
            if isinstance(content, list) else [text]
        heads = [p.lstrip() for p in parts if isinstance(p, str)]
        if any(h.startswith(SHELL_PREFIX) for h in heads):
            self._event("shell", line, time, text)
            return
        if any(h.startswith(NOTIFICATION_PREFIX) for h in heads):
            self._event("notification", line, time, text)
            return
        if any(h.startswith(INJECTED_PREFIXES) for h in heads):
            self._event("injected", line, time, text)
            return
        for turn in self.recent_users:
            if (self._same(turn.text, text) and turn.line is not None
                    and turn.anchor != f"L{line}"):
                turn.anchor, turn.line, turn.time = f"L{line}", line, time  # prefer the item
                turn.images = max(turn.images, images)
                return
        if not images and _blank(text):
            return
        turn = UserTurn(ordinal=0, anchor=f"L{line}", line=line, time=time, text=text,
                        images=images)
        self.turns.append(turn)
        self.recent_users.append(turn)

    def _output(self, line: int, item: dict, time: float | None) -> None:
        self._close_step()
        call_id = item.get("call_id") if isinstance(item.get("call_id"), str) else ""
        parsed = _parse_output(item.get("output"))
        head = parsed["output"][:1000].lstrip()[:300]
        aborted = "aborted by user" in head
        timed_out = parsed["timed_out"] or "command timed out" in head.lower()
        existing = self.results.get(call_id) if call_id else None
        if existing is not None:  # exec_command_end came first
            existing.output = clip(parsed["output"]) or existing.output
            if existing.exit_code is None:
                existing.exit_code = parsed["exit_code"]
            existing.duration_ms = existing.duration_ms or parsed["duration_ms"]
            existing.is_error = existing.is_error or parsed["is_error"]
            existing.error = existing.error or parsed["error"]
            existing.aborted = existing.aborted or aborted
            existing.timed_out = existing.timed_out or timed_out
            existing.killed = existing.killed or parsed["killed"]
            return
        turn = ToolResultTurn(
            ordinal=0, anchor=f"L{line}", line=line, time=time, call_id=call_id,
            name=self.call_names.get(call_id, ""), output=clip(parsed["output"]),
            exit_code=parsed["exit_code"], is_error=parsed["is_error"], error=parsed["error"],
            killed=parsed["killed"] or parsed["exit_code"] in (137, 143),
            timed_out=timed_out, aborted=aborted,
            duration_ms=parsed["duration_ms"])
        self.turns.append(turn)
        if call_id:
            self.results[call_id] = turn

    # -- events -----------------------------------------------------------------------------

    def _event_msg(self, line: int, ev: dict, time: float | None) -> None:
        kind = ev.get("type")
        if not isinstance(kind, str):
            kind = None
        if kind == "user_message":
            self._user_event(line, ev, time)
        elif kind == "agent_message":
            if isinstance(ev.get("message"), str):
                self._echo(ev["message"], self.pending_text, line, time)
        elif kind == "agent_reasoning":
            if isinstance(ev.get("text"), str):
                self._echo(ev["text"], self.pending_reasoning, line, time)
        elif kind == "token_count":
            self._tokens(ev)
        elif kind == "exec_command_end":
            self._exec_end(line, ev, time)
        elif kind == "turn_aborted":
            self._close_step()
            for turn in reversed(self.turns):
                if isinstance(turn, (UserTurn, ToolResultTurn)):
                    break
                if isinstance(turn, AssistantTurn):
                    turn.aborted = True
                    break
            self._event("abort", line, time, str(ev.get("reason") or ""),
                        reason=ev.get("reason") if isinstance(ev.get("reason"), str) else None)
            self._new_turn()
        elif kind in ("task_complete", "turn_complete"):
            self._close_step()
            last = ev.get("last_agent_message")
            done = self._event("turn_complete", line, time, last if isinstance(last, str) else "")
            done.detail["last_agent_message"] = last if isinstance(last, str) else None
            self._new_turn()
        elif kind in ("task_started", "turn_started"):
            self._new_turn()
        elif kind == "context_compacted":
            self._close_step()
            self._event("compaction", line, time, source="context_compacted")
        elif kind == "error":
            self._close_step()
            message = ev.get("message")
            self._event("api_error", line, time, message if isinstance(message, str) else "",
                        info=ev.get("codex_error_info") if isinstance(
                            ev.get("codex_error_info"), (str, dict)) else None)
        elif kind == "stream_error":
            message = ev.get("message")
            self._event("retry", line, time, message if isinstance(message, str) else "")
        elif kind == "thread_name_updated":
            if isinstance(ev.get("thread_name"), str):
                self.title = ev["thread_name"]
        elif kind in SKIPPED_EVENTS or (isinstance(kind, str) and kind.startswith("collab_")):
            pass
        else:
            self._unknown(line, f"event_msg/{kind}")

    def _user_event(self, line: int, ev: dict, time: float | None) -> None:
        text = ev.get("message") if isinstance(ev.get("message"), str) else ""
        for turn in self.recent_users:
            if self._same(turn.text, text):
                return  # the response item already gave this message
        images = sum(len(ev[k]) for k in ("images", "local_images") if isinstance(ev.get(k), list))
        if text.lstrip().startswith(INJECTED_PREFIXES):
            self._close_step()
            self._event("injected", line, time, text)
            return
        if not images and _blank(text):
            return
        self._close_step()
        turn = UserTurn(ordinal=0, anchor=f"L{line}", line=line, time=time, text=text,
                        images=images)
        self.turns.append(turn)
        self.recent_users.append(turn)

    def _tokens(self, ev: dict) -> None:
        info = ev.get("info")
        if not isinstance(info, dict):
            return
        total = info.get("total_token_usage")
        total_tokens = total.get("total_tokens") if isinstance(total, dict) else None
        if total_tokens is not None and total_tokens == self.last_total_tokens:
            return  # the same count written again
        self.last_total_tokens = total_tokens
        last = info.get("last_token_usage")
        if not isinstance(last, dict):
            return
        for turn in reversed(self.turns):
            if isinstance(turn, UserTurn):
                return
            if isinstance(turn, AssistantTurn):
                for field, key in (("tokens_in", "input_tokens"), ("tokens_out", "output_tokens")):
                    value = last.get(key)
                    if isinstance(value, int) and not isinstance(value, bool):
                        setattr(turn, field, (getattr(turn, field) or 0) + value)
                return

    def _exec_end(self, line: int, ev: dict, time: float | None) -> None:
        call_id = ev.get("call_id") if isinstance(ev.get("call_id"), str) else ""
        output = ev.get("aggregated_output")
        if not isinstance(output, str) or not output:
            parts = [ev.get(k) for k in ("stdout", "stderr") if isinstance(ev.get(k), str)]
            output = "".join(p for p in parts if p)
        code = ev.get("exit_code")
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        duration = ev.get("duration")
        ms = None
        if isinstance(duration, dict):
            secs, nanos = duration.get("secs"), duration.get("nanos")
            if isinstance(secs, (int, float)) and isinstance(nanos, (int, float)):
                ms = round(secs * 1000.0 + nanos / 1e6, 3)
        existing = self.results.get(call_id) if call_id else None
        if existing is not None:  # the function_call_output came first
            if code is not None:
                existing.exit_code = code
            existing.duration_ms = existing.duration_ms or ms
            existing.killed = existing.killed or code in (137, 143)
            return
        if call_id not in self.call_names and ev.get("source") == "user_shell":
            self._event("shell", line, time, shell_command(ev.get("command")) or "",
                        exit_code=code)
            return
        self._close_step()
        turn = ToolResultTurn(
            ordinal=0, anchor=f"L{line}", line=line, time=time, call_id=call_id,
            name=self.call_names.get(call_id, ""), output=clip(output), exit_code=code,
            killed=code in (137, 143), duration_ms=ms)
        self.turns.append(turn)
        if call_id:
            self.results[call_id] = turn

    # -- result -----------------------------------------------------------------------------

    def finish(self) -> Session:
        self._close_step()
        for turn in self.results.values():
            turn.status_in_text = turn.exit_code is None and not turn.is_error
        if self.records == 0:
            first_bad = next((i.line for i in self.issues if i.line), None)
            raise IngestError(self.source, "no readable Codex records", line=first_bad)
        for name, count in sorted(self.unknown.items()):
            plural = "record" if count == 1 else "records"
            self.issues.append(ReadIssue(path=self.source, line=self.unknown_first_line[name],
                                         message=f"{count} {plural} of unknown type {name!r} "
                                                 "skipped"))
        renumber(self.turns)
        meta = self.meta or {}
        notes: list[str] = []
        sid = meta.get("id") or meta.get("session_id")
        if not isinstance(sid, str) or not sid:
            sid = os.path.splitext(os.path.basename(self.source))[0]
            notes.append("no session_meta line: session id taken from the file name")
        parent = _parent_of(meta)
        if isinstance(meta.get("forked_from_id"), str) and meta["forked_from_id"]:
            notes.append(f"forked from {meta['forked_from_id']}")
        version = meta.get("cli_version") if isinstance(meta.get("cli_version"), str) else None
        cwd = meta.get("cwd") if isinstance(meta.get("cwd"), str) else None
        started = iso_to_unix(meta.get("timestamp")) if meta else None
        if started is None or (self.started is not None and self.started < started):
            started = self.started
        return Session(
            id=sid, agent="codex", format="codex", source=self.source, agent_version=version,
            models=list(self.models), project_dir=cwd, title=self.title, parent_id=parent,
            started=started, ended=self.ended, turns=self.turns, issues=self.issues,
            notes=notes)


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _type_name(value: Any) -> str:
    return "(no type)" if value is None else f"({type(value).__name__} type)"


def _parent_of(meta: dict) -> str | None:
    """The parent thread a subagent or fork names, if any."""
    for key in ("parent_thread_id", "forked_from_id"):
        if isinstance(meta.get(key), str) and meta[key]:
            return meta[key]
    source = meta.get("source")
    if isinstance(source, dict):
        sub = source.get("subagent")
        if isinstance(sub, dict):
            spawn = sub.get("thread_spawn")
            if isinstance(spawn, dict) and isinstance(spawn.get("parent_thread_id"), str):
                return spawn["parent_thread_id"]
    return None
