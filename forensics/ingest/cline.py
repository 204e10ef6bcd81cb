"""Cline, Roo Code and Kilo Code task folders: ``…/globalStorage/<extension>/tasks/<taskId>/``.

A task folder holds ``api_conversation_history.json`` (the Anthropic-style messages the model
saw), ``ui_messages.json`` (the ``say`` / ``ask`` stream the user saw) and
``task_metadata.json`` (files in context, models used); real folders often hold only one of the
two JSON files, so either alone is read as a session. All are JSON arrays rewritten whole.

From the API history (when present it gives the turns):

* assistant messages → one ``AssistantTurn`` each (anchor ``api#<index>``, the index
  ``conversationHistoryIndex`` points at). Native ``tool_use`` blocks (Cline ≥ 3.34) and XML
  tool calls written inside the text (``<execute_command><command>…</command></execute_command>``,
  the older era) are both ``ToolCall``s; ``<thinking>`` text and ``thinking`` blocks are
  reasoning. What the user reads from a tool (``attempt_completion``'s ``result``,
  ``ask_followup_question``'s ``question``, ``plan_mode_respond``'s ``response``) is added to the
  turn's visible text.
* user messages are mostly harness text. A ``tool_result`` block, or a text block starting
  ``[<tool> for '<param>'] Result:`` (plus the text blocks after it), is the result of the next
  unanswered call of the assistant turn before (by ``tool_use_id`` when there is one, else by
  order). Human words are the ones Cline wraps: ``<task>``, ``<feedback>``, ``<answer>``,
  ``<user_message>`` → ``UserTurn``. ``<environment_details>``, ``[ERROR] You did not use a
  tool…``, todo-list reminders and attached file contents are ``injected``;
  ``[TASK RESUMPTION]`` is a ``session_start`` resume marker (an assistant turn whose calls
  never got a result is marked ``aborted``); ``[NOTE] Some previous conversation history … has
  been removed`` is ``compaction``.
* Roo's condensing keeps the hidden messages in the file and adds a summary message
  (``isSummary``) or a truncation marker (``isTruncationMarker``): those are ``compaction``.
* Exit status lives in the result text: ``Command executed successfully (exit code N).`` /
  ``Command failed with exit code N.`` (Cline ≥ 3.57.1), Roo's ``Exit code: N``; older Cline
  writes ``Command executed.`` with no code (``exit_code`` stays ``None``). ``The user denied
  this operation.`` → ``aborted``; ``Command timed out after…`` → ``timed_out``; ``The tool
  execution failed with the following error: <error>…</error>`` → ``is_error``.

From the UI stream (anchor ``ts:<ts>``, ``#<k>`` appended when several rows share a ``ts``):
provider failures and retries the API history does not show are merged in after the API message
their ``conversationHistoryIndex`` names: ``ask:"api_req_failed"`` and a request's
``cancelReason`` ``streaming_failed`` / ``retries_exhausted`` → ``api_error``; ``error_retry`` /
``api_req_retried`` → ``retry``; ``cancelReason:"user_cancelled"`` → ``abort``; ``say:"error"``,
``diff_error``, ``mistake_limit_reached`` … → ``other`` (``detail.say``/``ask``); context
condensing (Roo) → ``compaction``. With no API history the UI stream alone gives the turns:
``task`` / first ``text`` and ``user_feedback`` rows are user turns; the rows after each
``api_req_started`` form one assistant turn (``text``, ``reasoning``, ``tool``, ``command``,
``completion_result``, ``followup``, MCP requests); ``command_output`` rows are the command's
result (no exit code: the UI stores none); ``resume_task`` is ``session_start``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from collections.abc import Mapping
from typing import Any, BinaryIO

import orjson

from forensics import knowledge_cache
from forensics.errors import IngestError
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

__all__ = ["read_stream", "read_task", "read_task_files", "DEFAULT_LOCATIONS", "TASK_FILES"]

FORMAT = "cline"

_EDITORS = {
    "linux": ["~/.config/Code/User", "~/.config/Code - Insiders/User", "~/.config/VSCodium/User",
              "~/.config/Cursor/User", "~/.config/Windsurf/User"],
    "darwin": ["~/Library/Application Support/Code/User",
               "~/Library/Application Support/Code - Insiders/User",
               "~/Library/Application Support/VSCodium/User",
               "~/Library/Application Support/Cursor/User",
               "~/Library/Application Support/Windsurf/User"],
    "windows": ["%APPDATA%\\Code\\User", "%APPDATA%\\Code - Insiders\\User",
                "%APPDATA%\\VSCodium\\User", "%APPDATA%\\Cursor\\User",
                "%APPDATA%\\Windsurf\\User"],
}
EXTENSIONS = {"cline": "saoudrizwan.claude-dev", "roo-code": "rooveterinaryinc.roo-cline",
              "kilo-code": "kilocode.kilo-code"}
"""VS Code extension id of each product: the ``globalStorage`` folder its tasks live under."""


def _locations() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for platform, users in _EDITORS.items():
        sep = "\\" if platform == "windows" else "/"
        out[platform] = [f"{user}{sep}globalStorage{sep}{ext}{sep}tasks{sep}"
                         for ext in EXTENSIONS.values() for user in users]
    out["linux"].append("~/.cline/data/tasks/")
    out["darwin"].append("~/.cline/data/tasks/")
    out["windows"].append("%USERPROFILE%\\.cline\\data\\tasks\\")
    out["env"] = ["CLINE_DATA_DIR (tasks under $CLINE_DATA_DIR/tasks/)",
                  "CLINE_DIR (tasks under $CLINE_DIR/data/tasks/)"]
    out["notes"] = ["Roo Code's roo-cline.customStoragePath setting moves its tasks/ folder",
                    "Cline 4.x (SDK) writes ~/.cline/data/sessions/ (sessions.db): not read"]
    return out


DEFAULT_LOCATIONS: dict[str, list[str]] = _locations()
"""Where Cline, Roo Code and Kilo Code keep task folders (VS Code, Insiders, VSCodium, Cursor,
Windsurf user dirs; the Cline CLI's ``~/.cline``)."""

API_FILE, UI_FILE, META_FILE = ("api_conversation_history.json", "ui_messages.json",
                                "task_metadata.json")
TASK_FILES = (API_FILE, UI_FILE, META_FILE)
SHELL_TOOLS = frozenset({"execute_command", "attempt_completion"})
"""Tools whose ``command`` parameter is run in the user's shell (``attempt_completion`` may run
one to show the result, and reports its exit status like ``execute_command``)."""
XML_TOOLS = frozenset({
    "execute_command", "read_file", "write_to_file", "replace_in_file", "search_files",
    "list_files", "list_code_definition_names", "browser_action", "use_mcp_tool",
    "access_mcp_resource", "ask_followup_question", "attempt_completion", "plan_mode_respond",
    "new_task", "load_mcp_documentation", "web_fetch", "condense", "new_rule",
    "report_bug", "apply_diff", "insert_content", "search_and_replace", "switch_mode",
    "codebase_search", "fetch_instructions", "update_todo_list", "run_slash_command",
    "generate_image", "focus_chain", "summarize_task",
})
"""Cline and Roo tool names, for XML tool calls written inside assistant text."""
VISIBLE_PARAMS = {"attempt_completion": "result", "ask_followup_question": "question",
                  "plan_mode_respond": "response"}
"""Tools whose parameter is what the user reads as the assistant's words."""

_RESULT = knowledge_cache.compile(r"^\[([\w:.\-]+)(?: for '(.*?)')?\] Result:", re.S)
_XML_CALL = knowledge_cache.compile(r"<(" + "|".join(sorted(XML_TOOLS)) + r")>(.*?)</\1>", re.S)
_XML_PARAM = knowledge_cache.compile(r"<([a-z_]+)>\n?(.*?)\n?</\1>", re.S)
_THINKING = knowledge_cache.compile(r"<thinking>(.*?)</thinking>", re.S)
_HUMAN = knowledge_cache.compile(r"<(task|feedback|answer|user_message)>\n?(.*?)\n?</\1>", re.S)
_CWD = knowledge_cache.compile(r"# Current Working Directory \((.+?)\) Files")
_EXIT = knowledge_cache.compile(r"Command executed successfully \(exit code (-?\d+)\)|"
                                r"Command failed with exit code (-?\d+)|^Exit code: (-?\d+)", re.M)
_TOOL_ERROR = knowledge_cache.compile(
    r"The tool execution failed with the following error:\s*<error>\s*(.*?)\s*</error>", re.S)
DENIED = "The user denied this operation."
TIMED_OUT = ("Command timed out after",)
BACKGROUNDED = "Running in background"
"""Cline ≥ 3.57 after its wait limit: the command goes on running; it was not killed."""
CANCELLED = ("Command cancelled", "Command was cancelled")
SIGNAL = "Process terminated by signal"

INJECTED_PREFIXES = (
    "<environment_details>", "[ERROR] You did not use a tool", "# TODO LIST UPDATE REQUIRED",
    "# task_progress", "# Todo List", "Files attached by the user:", "<file_content",
    "[Response interrupted by", "<explicit_instructions", "The user has provided feedback",
    "[IMPORTANT]", "Note: If you previously attempted",
)
RESUMPTION = "[TASK RESUMPTION]"
TRUNCATION = "[NOTE] Some previous conversation history"
NEW_INSTRUCTIONS = ("New instructions for task continuation:", "New message to respond to with")
EVENT_TEXT_CHARS = 4000

UI_RETRY = frozenset({"error_retry", "api_req_retried", "api_req_retry_delayed",
                      "api_req_rate_limit_wait"})
UI_ERRORS = frozenset({"error", "diff_error", "clineignore_error", "rooignore_error",
                       "command_permission_denied", "condense_context_error",
                       "shell_integration_warning"})
UI_COMPACTION = frozenset({"condense_context", "sliding_window_truncation"})


def read_stream(stream: BinaryIO, source: str) -> list[Session]:
    """One task file alone: an API history or a UI message stream."""
    issues: list[ReadIssue] = []
    rows = _load_array(stream.read(), source)
    builder = _Builder(source, issues, folder=None)
    if _is_ui(rows):
        builder.ui = rows
    else:
        builder.api = rows
    return [builder.build()]


def read_task(folder: str | os.PathLike[str]) -> list[Session]:
    """The task in a folder: its API history, UI stream and metadata read together."""
    root = Path(folder)
    files: dict[str, bytes] = {}
    problems: list[ReadIssue] = []
    for name in TASK_FILES:
        f = root / name
        if not f.is_file():
            continue
        try:
            files[name] = f.read_bytes()
        except OSError as exc:
            problems.append(ReadIssue(path=str(f), message=exc.strerror or str(exc)))
    return read_task_files(files, str(root), issues=problems)


def read_task_files(files: Mapping[str, bytes], label: str, *,
                    issues: list[ReadIssue] | None = None) -> list[Session]:
    """A task from its files' bytes by name (a folder on disk or members of an archive)."""
    issues = [] if issues is None else issues
    builder = _Builder(label, issues, folder=_leaf(label))
    found = False
    for name in TASK_FILES:
        if name not in files:
            continue
        where = f"{label}/{name}"
        try:
            value = orjson.loads(files[name])
        except orjson.JSONDecodeError as exc:
            issues.append(ReadIssue(path=where, line=exc.lineno, message=(
                f"not valid JSON ({exc.msg}); file skipped")))
            continue
        if name == META_FILE:
            builder.meta = value if isinstance(value, dict) else {}
            continue
        if not isinstance(value, list):
            issues.append(ReadIssue(path=where, message="expected a JSON array; file skipped"))
            continue
        found = True
        if name == UI_FILE:
            builder.ui = value
        else:
            builder.api = value
    if not found:
        raise IngestError(label, "task folder without a readable api_conversation_history."
                          "json or ui_messages.json")
    return [builder.build()]


def _leaf(label: str) -> str:
    """The last path segment of a folder label (``archive.zip!tasks/123`` → ``123``)."""
    return re.split(r"[/\\!]", label.rstrip("/\\"))[-1]


def _load_array(data: bytes, source: str) -> list:
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        what = "truncated JSON" if exc.pos >= len(data.rstrip()) else "not valid JSON"
        raise IngestError(source, f"{what} ({exc.msg})", line=exc.lineno) from None
    if not isinstance(value, list):
        raise IngestError(source, "not a Cline task file: expected a JSON array")
    return value


def _is_ui(rows: list) -> bool:
    for row in rows[:20]:
        if isinstance(row, dict):
            if row.get("type") in ("say", "ask") and "ts" in row:
                return True
            if "role" in row:
                return False
    return False


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for b in value:
            if isinstance(b, dict) and isinstance(b.get("text"), str):
                parts.append(b["text"])
            elif isinstance(b, dict) and b.get("type") == "image":
                parts.append("[image]")
        return "\n".join(parts)
    return ""


def _result_facts(text: str) -> dict[str, Any]:
    """Exit code, error and abort facts of a tool result text."""
    head = text[:4000]
    facts: dict[str, Any] = {"exit_code": None, "error": None, "is_error": False,
                             "aborted": False, "timed_out": False, "killed": False,
                             "background": False}
    match = _EXIT.search(head)
    if match:
        facts["exit_code"] = int(next(g for g in match.groups() if g is not None))
    error = _TOOL_ERROR.search(head)
    if error:
        facts["is_error"] = True
        facts["error"] = error.group(1)[:2000]
    stripped = head.strip()
    if stripped.startswith(DENIED) or f"\n{DENIED}" in head[:400]:
        facts["aborted"] = True
    if stripped.startswith(CANCELLED):
        facts["aborted"] = True
    if stripped.startswith(TIMED_OUT):
        if BACKGROUNDED in stripped[:200]:
            facts["background"] = True
        else:
            facts["timed_out"] = True
    if SIGNAL in head[:600] or facts["exit_code"] in (137, 143):
        facts["killed"] = True
    return facts


class _Builder:
    """Turns of one task from whichever of its files exist."""

    def __init__(self, source: str, issues: list[ReadIssue], folder: str | None) -> None:
        self.source = source
        self.issues = issues
        self.folder = folder
        self.api: list | None = None
        self.ui: list | None = None
        self.meta: dict | None = None
        self.models: dict[str, None] = {}
        self.cwd: str | None = None
        self.call_names: dict[str, str] = {}
        self.calls: dict[str, ToolCall] = {}
        self.reported_requests: set[str] = set()
        """UI request rows whose failure an ``api_req_failed`` row reports."""

    def build(self) -> Session:
        if self.api is not None:
            slots = self._api_turns(self.api)
            if self.ui is not None:
                self._merge_ui_events(slots, self.ui)
            turns = [t for slot in slots for t in slot]
        elif self.ui is not None:
            turns = self._ui_turns(self.ui)
        else:  # pragma: no cover - callers always set one
            turns = []
        for usage in _list((self.meta or {}).get("model_usage")):
            if isinstance(usage, dict) and isinstance(usage.get("model_id"), str):
                self.models.setdefault(usage["model_id"], None)
        renumber(turns)
        times = [t.time for t in turns if t.time is not None]
        notes = []
        if self.api is None:
            notes.append("no api_conversation_history.json: turns rebuilt from the UI stream "
                         "(tool outputs of file tools and exit codes are not in it)")
        if self.ui is None:
            notes.append("no ui_messages.json: provider errors and retries the user saw are "
                         "not in the API history")
        return Session(
            id=self._task_id(), agent=self._agent(), format=FORMAT, source=self.source,
            models=list(self.models), project_dir=self.cwd,
            started=min(times) if times else None, ended=max(times) if times else None,
            turns=turns, issues=self.issues, notes=notes)

    def _task_id(self) -> str:
        if self.folder:
            return self.folder
        segments = re.split(r"[/\\!]", self.source)
        parent = segments[-2] if len(segments) > 1 else ""
        if re.fullmatch(r"\d{10,}|[0-9a-f]{8}-[0-9a-f-]{27}", parent):
            return parent
        return os.path.splitext(segments[-1])[0]

    def _agent(self) -> str:
        path = self.source.replace("\\", "/").lower()
        for agent, ext in EXTENSIONS.items():
            if f"/{ext}/" in path:
                return agent
        for row in (self.ui or [])[:200]:
            if isinstance(row, dict) and ("apiProtocol" in row or "isProtected" in row):
                return "roo-code"
        return "cline"

    def _issue(self, message: str) -> None:
        self.issues.append(ReadIssue(path=self.source, message=message))

    # -- API history ------------------------------------------------------------------------

    def _api_turns(self, api: list) -> list[list[Any]]:
        slots: list[list[Any]] = []
        last_assistant: AssistantTurn | None = None
        pending: list[ToolCall] = []
        for index, msg in enumerate(api):
            slot: list[Any] = []
            slots.append(slot)
            if not isinstance(msg, dict):
                self._issue(f"api_conversation_history[{index}] is not an object")
                continue
            anchor = f"api#{index}"
            time = iso_to_unix(msg.get("ts"))
            content = msg.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else \
                [b for b in _list(content) if isinstance(b, dict)]
            role = msg.get("role")
            if msg.get("isSummary") is True or msg.get("isTruncationMarker") is True:
                # Roo's non-destructive condensing: the summary (or truncation marker) it
                # writes in place of the messages it hides, which stay in the file.
                slot.append(self._event("compaction", anchor, time, _text(content),
                                        condense_id=_str(msg.get("condenseId")) or _str(
                                            msg.get("truncationId"))))
            elif role == "assistant":
                last_assistant = self._assistant(slot, msg, blocks, anchor, time)
                pending = list(last_assistant.tool_calls)
            elif role == "user":
                self._user(slot, blocks, anchor, time, pending, last_assistant)
            else:
                self._issue(f"api_conversation_history[{index}] has role {role!r}; skipped")
        return slots

    def _assistant(self, slot: list, msg: dict, blocks: list[dict], anchor: str,
                   time: float | None) -> AssistantTurn:
        info = msg.get("modelInfo") if isinstance(msg.get("modelInfo"), dict) else {}
        model = info.get("modelId") if isinstance(info.get("modelId"), str) else None
        if model:
            self.models.setdefault(model, None)
        turn = AssistantTurn(ordinal=0, anchor=anchor, line=None, time=time, message_id=anchor,
                             model=model)
        texts, reasoning = [], []
        for index, block in enumerate(blocks):
            kind = block.get("type")
            turn.part_kinds.append(str(kind))
            if kind == "text" and isinstance(block.get("text"), str):
                text = block["text"]
                reasoning.extend(m.strip() for m in _THINKING.findall(text))
                text = _THINKING.sub("", text)
                for k, call in enumerate(_XML_CALL.finditer(text)):
                    params = {p.group(1): p.group(2) for p in _XML_PARAM.finditer(call.group(2))}
                    turn.tool_calls.append(self._call(f"{anchor}#xml{index}.{k}", call.group(1),
                                                      params, anchor))
                text = _XML_CALL.sub("", text).strip()
                if text:
                    texts.append(text)
            elif kind in ("thinking", "reasoning") and isinstance(
                    block.get("thinking", block.get("text")), str):
                reasoning.append(block.get("thinking", block.get("text")))
            elif kind == "tool_use":
                cid = block.get("id") if isinstance(block.get("id"), str) and block["id"] else \
                    f"{anchor}#{index}"
                name = block.get("name") if isinstance(block.get("name"), str) else ""
                data = block.get("input") if isinstance(block.get("input"), dict) else {}
                turn.tool_calls.append(self._call(cid, name, data, anchor))
        for call in turn.tool_calls:
            visible = VISIBLE_PARAMS.get(call.name)
            if visible and isinstance(call.input.get(visible), str) and call.input[visible].strip():
                texts.append(call.input[visible].strip())
        turn.text = "\n".join(texts)
        turn.reasoning = "\n".join(r for r in reasoning if r)
        metrics = msg.get("metrics") if isinstance(msg.get("metrics"), dict) else {}
        tokens = metrics.get("tokens") if isinstance(metrics.get("tokens"), dict) else {}
        turn.tokens_in = json_int(tokens.get("prompt"))
        turn.tokens_out = json_int(tokens.get("completion"))
        slot.append(turn)
        return turn

    def _call(self, call_id: str, name: str, data: dict, anchor: str) -> ToolCall:
        command = data.get("command") if name in SHELL_TOOLS and isinstance(
            data.get("command"), str) else None
        self.call_names[call_id] = name
        call = ToolCall(call_id=call_id, name=name, input=data, command=command, anchor=anchor)
        self.calls[call_id] = call
        return call

    def _user(self, slot: list, blocks: list[dict], anchor: str, time: float | None,
              pending: list[ToolCall], last_assistant: AssistantTurn | None) -> None:
        images = sum(1 for b in blocks if b.get("type") == "image")
        open_result: dict[str, Any] | None = None
        humans = 0

        def human(matches: list[re.Match], block_anchor: str, kinds: tuple[str, ...]) -> None:
            nonlocal humans, images
            for m in matches:
                if m.group(1) in kinds and m.group(2).strip():
                    slot.append(UserTurn(ordinal=0, anchor=block_anchor, time=time,
                                         text=m.group(2).strip(), images=images))
                    humans += 1
                    images = 0

        def close() -> None:
            nonlocal open_result
            if open_result is not None:
                slot.append(self._result_turn(**open_result))
                human(list(_HUMAN.finditer(open_result["text"])), open_result["anchor"],
                      ("answer", "feedback"))
                open_result = None

        for index, block in enumerate(blocks):
            kind = block.get("type")
            block_anchor = f"{anchor}.{index}"
            if kind == "tool_result":
                close()
                tid = block.get("tool_use_id") if isinstance(block.get("tool_use_id"), str) else ""
                call = next((c for c in pending if c.call_id == tid), None)
                if call is not None:
                    pending.remove(call)
                open_result = {"call_id": tid or block_anchor,
                               "name": self.call_names.get(tid, ""),
                               "text": _text(block.get("content")), "anchor": block_anchor,
                               "time": time, "flagged": block.get("is_error") is True}
                continue
            if kind != "text" or not isinstance(block.get("text"), str):
                continue
            text = block["text"]
            head = text.lstrip()
            match = _RESULT.match(head)
            if match:
                close()
                tool = match.group(1)
                call = next((c for c in pending if c.name == tool), None) or (
                    pending[0] if pending else None)
                if call is not None:
                    pending.remove(call)
                open_result = {"call_id": call.call_id if call else block_anchor,
                               "name": call.name if call else tool,
                               "text": head[match.end():].lstrip("\n"), "anchor": block_anchor,
                               "time": time, "flagged": False}
                continue
            if head.startswith(RESUMPTION):
                close()
                if pending and last_assistant is not None:
                    last_assistant.aborted = True  # its calls never got a result
                    pending.clear()
                slot.append(self._event("session_start", block_anchor, time, head, resumed=True))
                human(list(_HUMAN.finditer(head)), block_anchor, ("user_message",))
                continue
            if head.startswith(TRUNCATION):
                close()
                slot.append(self._event("compaction", block_anchor, time, head))
                continue
            if head.startswith("<environment_details>"):
                close()
                cwd = _CWD.search(head)
                if cwd and self.cwd is None:
                    self.cwd = cwd.group(1)
                slot.append(self._event("injected", block_anchor, time, head))
                continue
            if open_result is not None and not head.startswith(INJECTED_PREFIXES):
                # more of the result (its body, a denial, feedback)
                open_result["text"] = f"{open_result['text']}\n{text}" if open_result["text"] \
                    else text
                continue
            close()
            wrapped = list(_HUMAN.finditer(head))
            if wrapped:
                human(wrapped, block_anchor, ("task", "feedback", "answer", "user_message"))
                continue
            slot.append(self._event("injected", block_anchor, time, head))
        close()
        if not humans and images:
            slot.append(UserTurn(ordinal=0, anchor=anchor, time=time, text="", images=images))

    def _result_turn(self, call_id: str, name: str, text: str, anchor: str, time: float | None,
                     flagged: bool) -> ToolResultTurn:
        facts = _result_facts(text)
        if facts["background"] and call_id in self.calls:
            self.calls[call_id].background = True  # the harness left it running
        return ToolResultTurn(
            ordinal=0, anchor=anchor, time=time, call_id=call_id, name=name, output=clip(text),
            exit_code=facts["exit_code"], is_error=flagged or facts["is_error"],
            error=facts["error"], killed=facts["killed"], timed_out=facts["timed_out"],
            aborted=facts["aborted"],
            status_in_text=name == "execute_command" and facts["exit_code"] is None)

    @staticmethod
    def _event(event: str, anchor: str, time: float | None, text: str, **detail: Any) -> EventTurn:
        return EventTurn(ordinal=0, anchor=anchor, time=time, event=event,
                         text=clip(text, EVENT_TEXT_CHARS // 2, EVENT_TEXT_CHARS // 2),
                         detail={k: v for k, v in detail.items() if v is not None})

    # -- UI stream --------------------------------------------------------------------------

    def _ui_rows(self, ui: list) -> list[tuple[str, dict]]:
        """``(anchor, row)`` for every row worth reading; streaming leftovers dropped."""
        seen: dict[Any, int] = {}
        rows: list[tuple[str, dict]] = []
        for index, row in enumerate(ui):
            if not isinstance(row, dict):
                self._issue(f"ui_messages[{index}] is not an object")
                continue
            ts = row.get("ts")
            if ts is not None and (isinstance(ts, bool) or not isinstance(ts, (int, float, str))):
                self._issue(f"ui_messages[{index}]: ts is not a number")
                continue
            k = seen.get(ts, 0)
            seen[ts] = k + 1
            anchor = f"ts:{ts}" if k == 0 else f"ts:{ts}#{k}"
            if row.get("partial") is True and index + 1 < len(ui):
                nxt = ui[index + 1]
                if isinstance(nxt, dict) and nxt.get("ts") == ts and nxt.get(
                        "say", nxt.get("ask")) == row.get("say", row.get("ask")):
                    continue  # the final version of this row follows
            info = row.get("modelInfo") if isinstance(row.get("modelInfo"), dict) else {}
            if isinstance(info.get("modelId"), str):
                self.models.setdefault(info["modelId"], None)
            rows.append((anchor, row))
        # A failed request is written twice: as the request row's cancelReason and as the
        # api_req_failed row after it. Report it once, at the api_req_failed row.
        request = None
        for anchor, row in rows:
            if row.get("say") == "api_req_started":
                request = anchor
            elif row.get("ask") == "api_req_failed" and request is not None:
                self.reported_requests.add(request)
                request = None
        return rows

    def _ui_event(self, anchor: str, row: dict, previous: str | None) -> EventTurn | None:
        """The harness event of a UI row, or None when the row is not one."""
        say, ask = _str(row.get("say")), _str(row.get("ask"))
        kind = say or ask
        text = _str(row.get("text")) or ""
        time = iso_to_unix(row.get("ts"))
        if ask == "api_req_failed":
            return self._event("api_error", anchor, time, _message_of(text), ask=ask)
        if say == "api_req_started":
            info = _json(text)
            reason = info.get("cancelReason") if isinstance(info, dict) else None
            if reason == "user_cancelled":
                return self._event("abort", anchor, time, reason, say=say)
            if isinstance(reason, str) and anchor not in self.reported_requests:
                failed = info.get("streamingFailedMessage")
                return self._event("api_error", anchor, time,
                                   failed if isinstance(failed, str) else reason, say=say,
                                   reason=reason)
            return None
        if say in UI_RETRY:
            info = _json(text)
            if isinstance(info, dict) and info.get("failed") is True:
                return None  # the api_req_failed row that follows reports it
            if say == "api_req_retried" and previous == "error_retry":
                return None  # the same retry, announced twice
            return self._event("retry", anchor, time, text, say=say,
                               attempt=info.get("attempt") if isinstance(info, dict) else None)
        if say in UI_COMPACTION:
            return self._event("compaction", anchor, time, text, say=say)
        if say in UI_ERRORS or ask == "mistake_limit_reached":
            return self._event("other", anchor, time, text, level="error", say=say, ask=ask)
        if say == "deleted_api_reqs":
            return self._event("other", anchor, time, text, say=say)
        if kind in ("resume_task", "resume_completed_task"):
            return self._event("session_start", anchor, time, "", resumed=True, ask=ask)
        return None

    def _merge_ui_events(self, slots: list[list[Any]], ui: list) -> None:
        previous = None
        for anchor, row in self._ui_rows(ui):
            kind = _str(row.get("say")) or _str(row.get("ask"))
            if kind in ("resume_task", "resume_completed_task"):
                previous = kind
                continue  # the API history has its [TASK RESUMPTION] marker
            event = self._ui_event(anchor, row, previous)
            previous = kind
            if event is None:
                continue
            if not slots:
                slots.append([])
            index = row.get("conversationHistoryIndex")
            if not isinstance(index, int) or isinstance(index, bool):
                index = len(slots) - 1
            slots[max(0, min(index, len(slots) - 1))].append(event)

    def _ui_turns(self, ui: list) -> list[Any]:
        turns: list[Any] = []
        step: AssistantTurn | None = None
        request: dict | None = None
        commands: dict[str, ToolResultTurn] = {}
        last_command: str | None = None
        previous = None
        for anchor, row in self._ui_rows(ui):
            say, ask = _str(row.get("say")), _str(row.get("ask"))
            kind = say or ask
            text = _str(row.get("text")) or ""
            time = iso_to_unix(row.get("ts"))
            images = len(row["images"]) if isinstance(row.get("images"), list) else 0

            def open_step() -> AssistantTurn:
                nonlocal step
                if step is None:
                    step = AssistantTurn(ordinal=0, anchor=anchor, time=time, message_id=anchor)
                    info = row.get("modelInfo") if isinstance(row.get("modelInfo"), dict) else {}
                    step.model = info.get("modelId") if isinstance(info.get("modelId"), str) \
                        else None
                    if request:
                        step.tokens_in = json_int(request.get("tokensIn"))
                        step.tokens_out = json_int(request.get("tokensOut"))
                    turns.append(step)
                return step

            if say in ("task", "user_feedback", "user_feedback_diff") or (
                    say == "text" and not turns and row.get("conversationHistoryIndex", -1) == -1):
                step = None
                if text.strip() or images:
                    turns.append(UserTurn(ordinal=0, anchor=anchor, time=time, text=text,
                                          images=images))
            elif say == "api_req_started":
                step = None
                info = _json(text)
                request = info if isinstance(info, dict) else None
                event = self._ui_event(anchor, row, previous)
                if event is not None:
                    turns.append(event)
            elif say == "text" and text.strip():
                turn = open_step()
                turn.part_kinds.append("text")
                turn.text = f"{turn.text}\n{text}" if turn.text else text
            elif say == "reasoning" and text.strip():
                turn = open_step()
                turn.part_kinds.append("reasoning")
                turn.reasoning = f"{turn.reasoning}\n{text}" if turn.reasoning else text
            elif say == "completion_result" and text.strip():
                turn = open_step()
                turn.part_kinds.append("completion_result")
                turn.text = f"{turn.text}\n{text}" if turn.text else text
            elif ask == "followup" or ask == "plan_mode_respond":
                info = _json(text)
                words = info.get("question", info.get("response")) if isinstance(info, dict) \
                    else text
                if isinstance(words, str) and words.strip():
                    turn = open_step()
                    turn.part_kinds.append(ask)
                    turn.text = f"{turn.text}\n{words}" if turn.text else words
            elif kind == "tool":
                info = _json(text)
                data = info if isinstance(info, dict) else {"text": text}
                name = data.get("tool") if isinstance(data.get("tool"), str) else "tool"
                turn = open_step()
                turn.part_kinds.append("tool")
                turn.tool_calls.append(ToolCall(call_id=anchor, name=name, input=data,
                                                anchor=anchor))
            elif kind == "command" and text.strip():
                turn = open_step()
                turn.part_kinds.append("command")
                turn.tool_calls.append(ToolCall(call_id=anchor, name="execute_command",
                                                input={"command": text}, command=text,
                                                anchor=anchor))
                last_command = anchor
            elif kind == "command_output" and last_command is not None:
                result = commands.get(last_command)
                if result is None:
                    result = ToolResultTurn(ordinal=0, anchor=anchor, time=time,
                                            call_id=last_command, name="execute_command")
                    commands[last_command] = result
                    turns.append(result)
                    step = None
                result.output = clip(f"{result.output}{text}" if result.output else text)
                facts = _result_facts(result.output)
                result.exit_code = facts["exit_code"]
                result.status_in_text = facts["exit_code"] is None
            elif ask == "use_mcp_server" or say == "use_mcp_server":
                info = _json(text)
                data = info if isinstance(info, dict) else {"text": text}
                name = "/".join(str(data[k]) for k in ("serverName", "toolName") if data.get(k)) \
                    or "use_mcp_server"
                turn = open_step()
                turn.part_kinds.append("mcp")
                turn.tool_calls.append(ToolCall(call_id=anchor, name=name, input=data,
                                                anchor=anchor))
                last_command = anchor
            elif say == "mcp_server_response" and last_command is not None:
                turns.append(ToolResultTurn(ordinal=0, anchor=anchor, time=time,
                                            call_id=last_command, output=clip(text)))
                step = None
            else:
                event = self._ui_event(anchor, row, previous)
                if event is not None:
                    step = None
                    turns.append(event)
            previous = kind
        return turns


def _message_of(text: str) -> str:
    info = _json(text)
    if isinstance(info, dict) and isinstance(info.get("message"), str):
        return info["message"]
    return text


def _json(text: Any) -> Any:
    if not isinstance(text, str) or not text.lstrip().startswith(("{", "[")):
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None

