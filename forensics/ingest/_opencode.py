"""opencode messages into typed turns: the part semantics every opencode reader shares.

The export, the JSON storage tree, the SQLite database and ``run --format json`` all carry the
same v1 message (``info`` + ``parts``); each reader only finds the messages and hands them to a
``SessionBuilder``. opencode 2.x rows (``session_message``, the 2.x export) are rewritten into the
v1 shape first (``add_v2``), so there is one place that decides what a part means.

Parts skipped on purpose (they carry nothing for the turn model beyond what is recorded in
``AssistantTurn.part_kinds``): ``step-start``, ``step-finish`` (its reason and tokens are used as
fallbacks), ``snapshot``, ``patch``, ``agent`` (an ``@agent`` mention; the text part holds it).
Any other unknown part type, message role or 2.x row type is counted as a ``ReadIssue``.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from forensics import knowledge_cache
from forensics.ingest._text import clip, json_int
from forensics.ingest._time import in_range
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

SHELL_TOOLS = {"bash", "shell"}
SILENT_PARTS = {"step-start", "step-finish", "snapshot", "patch", "agent"}
ABORTED_ERROR = "MessageAbortedError"
TOOL_ABORTED = "Tool execution aborted"
NEVER_FINISHED = "tool call never finished"
STILL_RUNNING = "tool call still running when the session was saved"

TIMEOUT_MARKERS = (
    "(Command timed out after",
    "bash tool terminated command after exceeding timeout",
    "shell tool terminated command after exceeding timeout",
)
ABORT_MARKERS = ("(Command was aborted)", "User aborted the command")
_BASH_C = knowledge_cache.compile(
    r"^\s*(?:/\S*/)?(?:ba|z)?sh\s+-l?c\s+(['\"])(?P<script>.*)\1\s*$", re.S)


def seconds(ms: Any) -> float | None:
    """opencode stores Unix milliseconds; the turn model wants seconds."""
    if isinstance(ms, bool) or not isinstance(ms, (int, float)):
        return None
    return in_range(ms / 1000.0)


def shell_command(input: dict[str, Any]) -> str | None:
    """The script a shell tool ran, with a ``bash -lc '…'`` wrapper taken off."""
    command = input.get("command")
    if not isinstance(command, str):
        return None
    match = _BASH_C.match(command)
    return match.group("script") if match else command


def model_name(provider: Any, model: Any) -> str | None:
    if not isinstance(model, str) or not model:
        return None
    return f"{provider}/{model}" if isinstance(provider, str) and provider else model


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def error_message(error: dict[str, Any]) -> str:
    data = _dict(error.get("data"))
    message = data.get("message", error.get("message"))
    return message if isinstance(message, str) else ""


class SessionBuilder:
    """Collects one session's turns, models, times and issues, message by message."""

    def __init__(self, *, session_id: str, format: str, source: str) -> None:
        self.session_id = session_id
        self.format = format
        self.source = source
        self.info: dict[str, Any] = {}
        self.turns: list[Any] = []
        self.issues: list[ReadIssue] = []
        self.notes: list[str] = []
        self.models: list[str] = []
        self.project_dir: str | None = None
        self._times: list[float] = []
        self._unknown: Counter[str] = Counter()

    # -- inputs ------------------------------------------------------------------------

    def set_info(self, info: dict[str, Any]) -> None:
        """Session.Info (v1) or the 2.x transfer ``info``."""
        self.info = info

    def issue(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        self.issues.append(ReadIssue(path=path or self.source, line=line, message=message))

    def unknown(self, what: str) -> None:
        """Count an unknown record kind; reported once per kind with its count."""
        self._unknown[what] += 1

    def add_message(
        self,
        info: dict[str, Any],
        parts: list[dict[str, Any]],
        *,
        file: str | None = None,
        line: int | None = None,
        part_lines: dict[str, int] | None = None,
        part_files: dict[str, str] | None = None,
    ) -> None:
        """One v1 message. ``part_lines``/``part_files`` locate parts read from other places."""
        role = info.get("role")
        anchor = _str(info.get("id")) or f"{self.session_id}#{len(self.turns) + 1}"
        ctx = _Where(anchor, file, line, part_lines or {}, part_files or {})
        if role == "user":
            self._user(info, parts, ctx)
        elif role == "assistant":
            self._assistant(info, parts, ctx)
        else:
            self.unknown(f"message role {role!r}")

    def add_event(self, event: str, anchor: str, *, text: str = "", time: float | None = None,
                  detail: dict[str, Any] | None = None, line: int | None = None,
                  file: str | None = None) -> None:
        self._note_time(time)
        self.turns.append(EventTurn(ordinal=0, anchor=anchor, event=event, text=text, time=time,
                                    detail=detail or {}, line=line, file=file))

    def add_v2(self, kind: str, data: dict[str, Any], *, file: str | None = None,
               line: int | None = None) -> None:
        """One opencode 2.x ``SessionMessage`` (a ``session_message`` row or a 2.x export item)."""
        msg_id = _str(data.get("id")) or f"{self.session_id}#{len(self.turns) + 1}"
        time = _dict(data.get("time"))
        when = seconds(time.get("created"))
        if kind == "user":
            parts: list[dict[str, Any]] = [{"type": "text", "text": _str(data.get("text"))}]
            for f in _list(data.get("files")):
                if isinstance(f, dict):
                    parts.append({"type": "file", **f})
            self.add_message({"id": msg_id, "role": "user", "time": time}, parts,
                             file=file, line=line)
        elif kind == "assistant":
            info, parts = _v2_assistant(msg_id, data)
            self.add_message(info, parts, file=file, line=line)
        elif kind == "synthetic":
            self.add_event("injected", msg_id, text=_str(data.get("text")), time=when,
                           detail={"type": "synthetic"}, file=file, line=line)
        elif kind == "system":
            self.add_event("injected", msg_id, text=_str(data.get("text")), time=when,
                           detail={"type": "system"}, file=file, line=line)
        elif kind == "shell":
            self.add_event("shell", msg_id, text=_str(data.get("command")), time=when,
                           detail={"call_id": data.get("callID"),
                                   "output": clip(_str(data.get("output")))},
                           file=file, line=line)
        elif kind == "compaction":
            self.add_event("compaction", msg_id, text=_str(data.get("summary")), time=when,
                           detail={"reason": data.get("reason")}, file=file, line=line)
        elif kind in ("agent-switched", "model-switched", "location-switched"):
            detail = {k: v for k, v in data.items() if k not in ("id", "time", "metadata")}
            self.add_event("other", msg_id, text=kind, time=when, detail={"type": kind, **detail},
                           file=file, line=line)
            model = _dict(data.get("model"))
            self._add_model(model_name(model.get("providerID"), model.get("id")))
        else:
            self.unknown(f"2.x message type {kind!r}")

    # -- output ------------------------------------------------------------------------

    def build(self) -> Session:
        info = self.info
        for what, n in self._unknown.items():
            self.issue(f"unknown {what} ({n} record{'s' if n > 1 else ''} skipped)")
        renumber(self.turns)
        times = _dict(info.get("time"))
        location = _dict(info.get("location"))
        project_dir = info.get("directory") or location.get("directory") or self.project_dir
        version = info.get("version")
        return Session(
            id=self.session_id,
            agent="opencode",
            format=self.format,
            source=self.source,
            agent_version=version if isinstance(version, str) else None,
            models=self.models,
            project_dir=project_dir if isinstance(project_dir, str) and project_dir else None,
            title=info.get("title") if isinstance(info.get("title"), str) else None,
            parent_id=info.get("parentID") if isinstance(info.get("parentID"), str) else None,
            started=seconds(times.get("created")) or (min(self._times) if self._times else None),
            ended=seconds(times.get("updated")) or (max(self._times) if self._times else None),
            turns=self.turns,
            issues=self.issues,
            notes=self.notes,
        )

    # -- message semantics -------------------------------------------------------------

    def _note_time(self, t: float | None) -> None:
        if t is not None:
            self._times.append(t)

    def _add_model(self, name: str | None) -> None:
        if name and name not in self.models:
            self.models.append(name)

    def _user(self, info: dict[str, Any], parts: list[dict[str, Any]], ctx: "_Where") -> None:
        time = seconds(_dict(info.get("time")).get("created"))
        self._note_time(time)
        model = _dict(info.get("model"))
        self._add_model(model_name(model.get("providerID"), model.get("modelID")))
        typed: list[str] = []
        injected: list[str] = []
        files: list[str] = []
        images = 0
        injected_first = False
        after: list[Any] = []
        for part in parts:
            kind = part.get("type")
            if not isinstance(kind, str):
                kind = repr(kind)  # a list or object here is unhashable in the set lookups
            if kind == "text":
                if part.get("synthetic"):
                    if not typed and not injected:
                        injected_first = True
                    injected.append(_str(part.get("text")))
                else:
                    typed.append(_str(part.get("text")))
            elif kind == "file":
                if _str(part.get("mime")).startswith("image/"):
                    images += 1
                else:
                    files.append(_str(part.get("filename")) or _str(part.get("url"))[:200])
            elif kind == "subtask":
                after.append(EventTurn(
                    ordinal=0, anchor=ctx.anchor, event="other", time=time, file=ctx.file,
                    line=ctx.line, text=_str(part.get("description")),
                    detail={"type": "subtask", "agent": part.get("agent"),
                            "prompt": clip(_str(part.get("prompt"))),
                            "command": part.get("command")}))
            elif kind == "compaction":
                after.append(EventTurn(
                    ordinal=0, anchor=ctx.anchor, event="compaction", time=time, file=ctx.file,
                    line=ctx.line, detail={"auto": part.get("auto"),
                                           "overflow": part.get("overflow")}))
            elif kind in SILENT_PARTS:
                continue
            else:
                self.unknown(f"part type {kind!r}")
        event = None
        if injected or files:
            detail: dict[str, Any] = {"parts": len(injected)}
            if files:
                detail["files"] = files
            text = "\n".join(t for t in injected if t.strip())
            event = EventTurn(ordinal=0, anchor=ctx.anchor, event="injected", time=time,
                              file=ctx.file, line=ctx.line,
                              text=clip(text or "attached: " + ", ".join(files)), detail=detail)
        user = None
        if typed or images:
            user = UserTurn(ordinal=0, anchor=ctx.anchor, text="\n".join(typed), images=images,
                            time=time, file=ctx.file, line=ctx.line)
        ordered = [event, user] if injected_first else [user, event]
        self.turns.extend(t for t in ordered if t is not None)
        self.turns.extend(after)

    def _assistant(self, info: dict[str, Any], parts: list[dict[str, Any]], ctx: "_Where") -> None:
        times = _dict(info.get("time"))
        time = seconds(times.get("created"))
        self._note_time(time)
        self._note_time(seconds(times.get("completed")))
        model = model_name(info.get("providerID"), info.get("modelID"))
        self._add_model(model)
        path = _dict(info.get("path"))
        if self.project_dir is None and isinstance(path.get("cwd"), str) and path["cwd"]:
            self.project_dir = path["cwd"]
        error = _dict(info.get("error"))
        error_name = _str(error.get("name")) or _str(error.get("type"))
        aborted = error_name == ABORTED_ERROR
        finished = "completed" in times or bool(error)

        if info.get("summary") is True:
            self._summary(info, parts, ctx, time)
            return

        texts: list[str] = []
        reasoning: list[str] = []
        calls: list[ToolCall] = []
        results: list[ToolResultTurn] = []
        before: list[EventTurn] = []
        after: list[EventTurn] = []
        kinds: list[str] = []
        finish_reason = None
        step_tokens = [0, 0]
        saw_step_tokens = False
        for part in parts:
            kind = part.get("type")
            if not isinstance(kind, str):
                kind = repr(kind)  # a list or object here is unhashable in the set lookups
            kinds.append(str(kind))
            if kind == "text":
                text = _str(part.get("text"))
                if text.strip() and not part.get("synthetic") and not part.get("ignored"):
                    texts.append(text)
            elif kind == "reasoning":
                text = _str(part.get("text"))
                if text.strip():
                    reasoning.append(text)
            elif kind == "tool":
                call, result = self._tool(part, ctx, aborted=aborted, finished=finished)
                calls.append(call)
                results.append(result)
            elif kind == "step-finish":
                if isinstance(part.get("reason"), str):
                    finish_reason = part["reason"]
                tokens = _dict(part.get("tokens"))
                if tokens:
                    saw_step_tokens = True
                    step_tokens[0] += _int(tokens.get("input"))
                    step_tokens[1] += _int(tokens.get("output"))
            elif kind == "retry":
                retry_error = _dict(part.get("error"))
                before.append(EventTurn(
                    ordinal=0, anchor=ctx.anchor, event="retry", file=ctx.part_file(part),
                    line=ctx.part_line(part),
                    time=seconds(_dict(part.get("time")).get("created")) or time,
                    text=error_message(retry_error),
                    detail={"attempt": part.get("attempt"), "name": retry_error.get("name"),
                            **status_code(retry_error)}))
            elif kind == "compaction":
                after.append(EventTurn(
                    ordinal=0, anchor=ctx.anchor, event="compaction", time=time, file=ctx.file,
                    line=ctx.line, detail={"auto": part.get("auto"),
                                           "overflow": part.get("overflow")}))
            elif kind == "subtask":
                after.append(EventTurn(
                    ordinal=0, anchor=ctx.anchor, event="other", time=time, file=ctx.file,
                    line=ctx.line, text=_str(part.get("description")),
                    detail={"type": "subtask", "agent": part.get("agent"),
                            "prompt": clip(_str(part.get("prompt")))}))
            elif kind in SILENT_PARTS or kind == "file":
                continue
            else:
                self.unknown(f"part type {kind!r}")

        tokens = _dict(info.get("tokens"))
        if tokens:
            tokens_in, tokens_out = tokens.get("input"), tokens.get("output")
        elif saw_step_tokens:  # no message info (run --format json): sum the steps
            tokens_in, tokens_out = step_tokens
        else:
            tokens_in = tokens_out = None
        finish = info.get("finish") if isinstance(info.get("finish"), str) else finish_reason
        turn = AssistantTurn(
            ordinal=0, anchor=ctx.anchor, file=ctx.file, line=ctx.line, time=time,
            message_id=_str(info.get("id")) or None,
            text="\n".join(texts), reasoning="\n".join(reasoning), tool_calls=calls,
            model=model, finish=finish, aborted=aborted,
            error=ProviderError(name=error_name, message=error_message(error)) if error else None,
            tokens_in=json_int(tokens_in),
            tokens_out=json_int(tokens_out),
            part_kinds=kinds,
        )
        self.turns.extend(before)
        self.turns.append(turn)
        self.turns.extend(results)
        self.turns.extend(after)
        if error:
            end = seconds(times.get("completed")) or time
            detail = {"name": error_name, **status_code(error)}
            self.turns.append(EventTurn(
                ordinal=0, anchor=ctx.anchor, file=ctx.file, line=ctx.line, time=end,
                event="abort" if aborted else "api_error", text=error_message(error),
                detail=detail))

    def _summary(self, info: dict[str, Any], parts: list[dict[str, Any]], ctx: "_Where",
                 time: float | None) -> None:
        """A compaction summary: the model's text is context for itself, not a reply."""
        text = "\n".join(_str(p.get("text")) for p in parts
                         if p.get("type") == "text" and _str(p.get("text")).strip())
        self.turns.append(EventTurn(
            ordinal=0, anchor=ctx.anchor, file=ctx.file, line=ctx.line, time=time,
            event="compaction", text=clip(text),
            detail={"summary": True, "finish": info.get("finish")}))

    def _tool(self, part: dict[str, Any], ctx: "_Where", *, aborted: bool,
              finished: bool) -> tuple[ToolCall, ToolResultTurn]:
        state = _dict(part.get("state"))
        status = state.get("status")
        name = _str(part.get("tool"))
        call_id = _str(part.get("callID")) or _str(part.get("id")) or f"{ctx.anchor}:tool"
        input = _dict(state.get("input"))
        metadata = _dict(state.get("metadata"))
        call = ToolCall(call_id=call_id, name=name, input=input, anchor=ctx.anchor,
                        command=shell_command(input) if name in SHELL_TOOLS else None)
        times = _dict(state.get("time"))
        start, end = times.get("start"), times.get("end")
        duration = (end - start if isinstance(start, (int, float)) and
                    isinstance(end, (int, float)) else None)
        output = state.get("output")
        if not isinstance(output, str):
            output = _str(metadata.get("output"))
        error = state.get("error") if isinstance(state.get("error"), str) else None
        exit_code = metadata.get("exit")
        result = ToolResultTurn(
            ordinal=0, anchor=ctx.anchor, file=ctx.part_file(part), line=ctx.part_line(part),
            call_id=call_id, name=name, output=clip(output),
            time=seconds(end) or seconds(start),
            duration_ms=float(duration) if duration is not None else None,
            exit_code=exit_code if isinstance(exit_code, int) and not isinstance(
                exit_code, bool) else None,
        )
        if status == "completed":
            result.killed = "exit" in metadata and exit_code is None
            if output.rstrip().endswith("\nKilled") or output.strip() == "Killed":
                result.killed = True
        elif status == "error":
            result.is_error = True
            result.error = error or ""
            result.aborted = (error == TOOL_ABORTED and aborted) or bool(
                metadata.get("interrupted"))
        elif status in ("pending", "running"):
            if finished:
                result.is_error = True
                result.error = NEVER_FINISHED
                result.aborted = aborted
            else:
                result.error = STILL_RUNNING
        else:
            self.unknown(f"tool status {status!r}")
        if _mentions(output, TIMEOUT_MARKERS):
            result.timed_out = True
        if _mentions(output, ABORT_MARKERS):
            result.aborted = True
        return call, result


def _mentions(text: str, markers: tuple[str, ...]) -> bool:
    """``any(m in text for m in markers)`` without a generator per tool part."""
    for marker in markers:
        if marker in text:
            return True
    return False


class _Where:
    """Where a message's turns point: its anchor, and the file/line of it and its parts."""

    __slots__ = ("anchor", "file", "line", "part_lines", "part_files")

    def __init__(self, anchor: str, file: str | None, line: int | None,
                 part_lines: dict[str, int], part_files: dict[str, str]) -> None:
        self.anchor, self.file, self.line = anchor, file, line
        self.part_lines, self.part_files = part_lines, part_files

    def part_line(self, part: dict[str, Any]) -> int | None:
        return self.part_lines.get(_str(part.get("id")), self.line)

    def part_file(self, part: dict[str, Any]) -> str | None:
        return self.part_files.get(_str(part.get("id")), self.file)


def status_code(error: dict[str, Any]) -> dict[str, Any]:
    code = _dict(error.get("data")).get("statusCode")
    return {"status_code": code} if isinstance(code, int) else {}


# -- opencode 2.x --------------------------------------------------------------------------

def _v2_assistant(msg_id: str, data: dict[str, Any]) -> tuple[dict[str, Any], list[dict]]:
    """A 2.x assistant row as a v1 message: ``content[]`` items become parts."""
    model = _dict(data.get("model"))
    time = _dict(data.get("time"))
    info: dict[str, Any] = {
        "id": msg_id, "role": "assistant", "time": time,
        "providerID": model.get("providerID"), "modelID": model.get("id"),
        "agent": data.get("agent"),
    }
    for key in ("finish", "tokens", "cost"):
        if key in data:
            info[key] = data[key]
    error = _dict(data.get("error"))
    if error:
        # 2.x errors are {type, message}; keep the v1 {name, data:{message}} shape.
        name = _str(error.get("name")) or _str(error.get("type"))
        name = _V2_ERROR_NAMES.get(name, name or "UnknownError")
        info["error"] = {"name": name, "data": {"message": error_message(error)}}
    parts: list[dict[str, Any]] = []
    for item in _list(data.get("content")):
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind in ("text", "reasoning"):
            parts.append(item)
        elif kind == "tool":
            parts.append(_v2_tool(item))
        else:
            parts.append(item)  # counted as unknown by the v1 path
    return info, parts


def _v2_tool(item: dict[str, Any]) -> dict[str, Any]:
    state = _dict(item.get("state"))
    time = _dict(item.get("time"))
    status = state.get("status")
    texts = [_str(c.get("text")) for c in _list(state.get("content"))
             if isinstance(c, dict) and c.get("type") == "text"]
    result = state.get("result")
    output = "\n".join(texts) if texts else (result if isinstance(result, str) else "")
    structured = _dict(state.get("structured"))
    metadata = dict(structured)
    if "output" not in metadata:
        metadata["output"] = output
    v1_state: dict[str, Any] = {
        "status": status,
        "input": _dict(state.get("input")),
        "metadata": metadata,
        "time": {"start": time.get("ran") or time.get("created"), "end": time.get("completed")},
    }
    if status == "completed":
        v1_state["output"] = output
    elif status == "error":
        err = state.get("error")
        v1_state["error"] = error_message(err) if isinstance(err, dict) else _str(err)
    return {"type": "tool", "id": item.get("id"), "callID": item.get("id"),
            "tool": item.get("name"), "state": v1_state}


_V2_ERROR_NAMES = {"unknown": "UnknownError", "aborted": ABORTED_ERROR, "abort": ABORTED_ERROR}
V2_TYPES = {"user", "assistant", "system", "synthetic", "shell", "compaction", "agent-switched",
            "model-switched", "location-switched"}
