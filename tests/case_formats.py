"""Rule cases written as real transcripts: Claude Code JSONL, Codex rollouts, opencode exports.

A rule case (``tests/rulecases.py``) is a short script of turns. ``render(raw, fmt)`` writes it
in one agent's on-disk shape, so the case also runs through that format's reader: a rule that
flags the in-memory case must flag the same turns, with the same severity, after the reader has
read the file. ``anchors`` maps every native anchor the file holds (Claude Code line uuids,
Codex ``L<n>``, opencode message ids) back to the case turn it was written for.

A case that uses something a format cannot express (a queued message in an opencode export, a
Codex ``turn_complete`` in Claude Code) is not written in that format: ``render`` returns None
and the reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

FORMATS = ("claude-code", "codex", "opencode-export")
BASE = 1_700_000_000.0


@dataclass
class Rendered:
    text: str
    anchors: dict[str, int] = field(default_factory=dict)
    """Native anchor -> the case turn's ordinal (1-based, as ``build_case`` numbers them)."""


def _iso(t: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[
        :-3] + "Z"


def _timeline(raw: dict[str, Any]) -> list[tuple[int, float, dict[str, Any]]]:
    """The case's turns with their ordinals and times, as ``build_case`` assigns them."""
    out, clock = [], BASE
    for spec in raw.get("turn", []):
        if "gap" in spec and len(spec) == 1:
            clock += float(spec["gap"])
            continue
        clock += float(spec.get("after", 5))
        out.append((len(out) + 1, clock, spec))
    return out


def _calls(spec: dict[str, Any], ordinal: int) -> list[dict[str, Any]]:
    calls = []
    if "bash" in spec:
        calls.append({"tool": "bash", "command": spec["bash"],
                      "background": spec.get("background", False)})
    calls.extend(spec.get("calls", []))
    out = []
    for i, c in enumerate(calls):
        cmd = c.get("command")
        out.append({"id": c.get("id", f"call{ordinal}_{i}"), "tool": c.get("tool", "bash"),
                    "input": c.get("input", {"command": cmd} if cmd else {}), "command": cmd,
                    "background": c.get("background", False)})
    return out


def unsupported(raw: dict[str, Any], fmt: str) -> str | None:
    """Why this case cannot be written in ``fmt``, or None."""
    if raw.get("formats") and fmt not in raw["formats"]:
        return "a case about formats that can lack a result record"
    agent = raw.get("agent")
    if agent and agent != fmt and not (agent == "opencode" and fmt == "opencode-export"):
        return f"an {agent} case"
    for _, _, spec in _timeline(raw):
        if "event" in spec:
            event = spec["event"]
            if fmt == "claude-code" and event not in ("interrupt", "abort"):
                return f"Claude Code has no {event} record"
            if fmt == "codex" and event not in ("abort", "turn_complete"):
                return f"Codex has no {event} record"
            if fmt == "opencode-export":
                return f"an opencode export keeps no {event} record of its own"
        if "user" in spec and (spec.get("command") or spec.get("arguments")):
            return "slash commands are stored differently by each agent"
        if spec.get("queued") and fmt != "claude-code":
            return "only Claude Code records a message typed while the assistant was busy"
        if "assistant" in spec and (spec.get("aborted") or spec.get("finish")):
            return "aborted replies are written differently by each agent"
        if "assistant" in spec and spec.get("error") and fmt == "codex":
            return "Codex rollouts keep provider errors as events"
        if "result" in spec and spec.get("killed"):
            return "a signal is recorded differently by each agent"
        if "result" in spec and spec.get("aborted"):
            return "a rejected call is recorded differently by each agent"
        if "result" in spec and spec.get("call"):
            return "results out of call order"
        if "result" in spec and spec.get("timed_out") and fmt != "claude-code":
            return "only Claude Code's timeout text is rendered here"
    if fmt == "codex":
        kinds = [next(k for k in ("user", "assistant", "result", "event") if k in spec)
                 for _, _, spec in _timeline(raw)]
        if any(a == b == "user" for a, b in zip(kinds, kinds[1:])):
            return "in Codex a second message ends the first turn (there is no quick edit)"
    return None


def render(raw: dict[str, Any], fmt: str) -> tuple[Rendered | None, str | None]:
    why = unsupported(raw, fmt)
    if why:
        return None, why
    writer = {"claude-code": _claude, "codex": _codex, "opencode-export": _opencode}[fmt]
    return writer(raw), None


# -- Claude Code ---------------------------------------------------------------------------------

SESSION = "5d2e8f41-7c3a-4b9e-a1d6-3f8c2e9b7a10"


def _claude(raw: dict[str, Any]) -> Rendered:
    lines: list[str] = []
    anchors: dict[str, int] = {}
    parent: list[str | None] = [None]
    counter = [0]
    pending: list[dict[str, Any]] = []

    def emit(ordinal: int, t: float, record: dict[str, Any]) -> None:
        counter[0] += 1
        uuid = f"00000000-0000-4000-8000-{counter[0]:012d}"
        record.update({"parentUuid": parent[0], "isSidechain": False, "userType": "external",
                       "cwd": "/home/dev/app", "sessionId": SESSION, "version": "2.1.90",
                       "uuid": uuid, "timestamp": _iso(t)})
        parent[0] = uuid
        anchors[uuid] = ordinal
        lines.append(json.dumps(record, ensure_ascii=False))

    for ordinal, t, spec in _timeline(raw):
        if "user" in spec:
            if spec.get("queued"):
                emit(ordinal, t, {"type": "attachment", "attachment": {
                    "type": "queued_command", "prompt": spec["user"], "origin": {"kind": "human"},
                    "commandMode": "prompt"}})
            else:
                emit(ordinal, t, {"type": "user", "message": {"role": "user",
                                                               "content": spec["user"]}})
        elif "assistant" in spec:
            mid = f"msg_{ordinal:024d}"
            if spec.get("error"):
                emit(ordinal, t, {"type": "assistant", "isApiErrorMessage": True, "message": {
                    "id": mid, "model": "<synthetic>", "role": "assistant", "type": "message",
                    "content": [{"type": "text", "text": "API Error: " + (
                        spec.get("error_message") or spec["error"])}]}})
                continue
            blocks: list[dict[str, Any]] = []
            if spec.get("reasoning"):
                blocks.append({"type": "thinking", "thinking": spec["reasoning"],
                               "signature": "sig"})
            if spec["assistant"] or not (_calls(spec, ordinal) or blocks):
                blocks.append({"type": "text", "text": spec["assistant"]})
            for c in _calls(spec, ordinal):
                tool = {"bash": "Bash", "read": "Read", "write": "Write", "edit": "Edit"}.get(
                    c["tool"], c["tool"])
                args = dict(c["input"])
                if tool == "Bash" and c["background"]:
                    args["run_in_background"] = True
                for old, new in (("filePath", "file_path"), ("oldString", "old_string"),
                                 ("newString", "new_string")):
                    if old in args:
                        args[new] = args.pop(old)
                blocks.append({"type": "tool_use", "id": c["id"], "name": tool, "input": args})
                pending.append(c)
            for block in blocks:  # Claude Code writes one line per content block
                emit(ordinal, t, {"type": "assistant", "message": {
                    "id": mid, "model": "claude-sonnet-4-5", "role": "assistant",
                    "type": "message", "content": [block], "stop_reason": None}})
        elif "result" in spec:
            call = pending.pop(0)
            output = spec["result"]
            failed = bool(spec.get("is_error") or spec.get("exit") not in (None, 0)
                          or spec.get("timed_out"))
            if spec.get("timed_out"):
                content = "Command timed out after 2m 0s" + (f"\n{output}" if output else "")
            elif spec.get("exit") not in (None, 0):
                content = f"Exit code {spec['exit']}\n{output}"
            elif spec.get("error"):
                content = f"<tool_use_error>{spec['error']}</tool_use_error>"
            else:
                content = output
            emit(ordinal, t, {"type": "user", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call["id"], "content": content,
                 **({"is_error": True} if failed else {})}]},
                "toolUseResult": {"stdout": output, "stderr": "", "interrupted": False}
                if call["tool"] == "bash" else content})
        elif "event" in spec:
            emit(ordinal, t, {"type": "user", "message": {
                "role": "user", "content": [{"type": "text",
                                             "text": "[Request interrupted by user]"}]}})
    return Rendered("\n".join(lines) + "\n", anchors)


# -- Codex ---------------------------------------------------------------------------------------


def _codex(raw: dict[str, Any]) -> Rendered:
    lines: list[str] = []
    anchors: dict[str, int] = {}

    def emit(ordinal: int | None, t: float, kind: str, payload: dict[str, Any]) -> None:
        lines.append(json.dumps({"timestamp": _iso(t), "type": kind, "payload": payload},
                                ensure_ascii=False))
        if ordinal is not None:
            anchors[f"L{len(lines)}"] = ordinal

    emit(None, BASE, "session_meta", {"id": "019c7d10-2b44-7a10-9e55-4c1f0a2b3c4d",
                                      "timestamp": _iso(BASE), "cwd": "/home/dev/app",
                                      "originator": "codex_cli_rs", "cli_version": "0.128.0"})
    pending: list[dict[str, Any]] = []
    open_turn = False
    silent: int | None = None  # an empty reply writes no record: its turn's end stands for it
    for ordinal, t, spec in _timeline(raw):
        if "user" in spec:
            if open_turn:
                emit(silent, t - 0.5, "event_msg", {"type": "task_complete",
                                                    "last_agent_message": None})
            silent = None
            emit(None, t - 0.2, "event_msg", {"type": "task_started"})
            open_turn = True
            emit(ordinal, t, "response_item", {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": spec["user"]}]})
            emit(ordinal, t, "event_msg", {"type": "user_message", "message": spec["user"]})
        elif "assistant" in spec:
            silent = None
            if not (spec.get("reasoning") or spec["assistant"] or _calls(spec, ordinal)):
                silent = ordinal
            if spec.get("reasoning"):
                emit(ordinal, t, "response_item", {"type": "reasoning", "summary": [
                    {"type": "summary_text", "text": spec["reasoning"]}], "content": None,
                    "encrypted_content": "gAAAA"})
            if spec["assistant"]:
                emit(ordinal, t, "response_item", {"type": "message", "role": "assistant",
                                                   "content": [{"type": "output_text",
                                                                "text": spec["assistant"]}]})
            for c in _calls(spec, ordinal):
                if c["command"] is not None:
                    emit(ordinal, t, "response_item", {
                        "type": "function_call", "name": "shell", "call_id": c["id"],
                        "arguments": json.dumps({"command": ["bash", "-lc", c["command"]]})})
                else:
                    emit(ordinal, t, "response_item", {
                        "type": "function_call", "name": c["tool"], "call_id": c["id"],
                        "arguments": json.dumps(c["input"])})
                pending.append(c)
        elif "result" in spec:
            call = pending.pop(0)
            exit_code = spec.get("exit")
            if exit_code is None and (spec.get("is_error") or spec.get("error")):
                exit_code = 1
            output = spec["result"] or spec.get("error") or ""
            body = {"output": output, "metadata": {"exit_code": exit_code,
                                                    "duration_seconds": 0.4}}
            if exit_code is None:
                body = {"output": output}
                payload = output
            else:
                payload = json.dumps(body)
            emit(ordinal, t, "response_item", {"type": "function_call_output",
                                               "call_id": call["id"], "output": payload})
        elif "event" in spec:
            if spec["event"] == "abort":
                emit(ordinal, t, "event_msg", {"type": "turn_aborted", "reason": "interrupted"})
            else:
                emit(ordinal, t, "event_msg", {"type": "task_complete",
                                               "last_agent_message": None})
            open_turn = False
    last = _timeline(raw)[-1][2] if _timeline(raw) else {}
    if open_turn and "user" not in last:  # a session that ends on a message is still running
        emit(silent, _timeline(raw)[-1][1] + 1, "event_msg", {"type": "task_complete",
                                                             "last_agent_message": None})
    return Rendered("\n".join(lines) + "\n", anchors)


# -- opencode export -----------------------------------------------------------------------------


def _opencode(raw: dict[str, Any]) -> Rendered:
    sid = "ses_4e1f0a2b3ffeQm7TcK2pLx9vRa"
    messages: list[dict[str, Any]] = []
    anchors: dict[str, int] = {}
    parts_by_call: dict[str, dict[str, Any]] = {}
    last_user: str | None = None

    def ms(t: float) -> int:
        return int(t * 1000)

    for ordinal, t, spec in _timeline(raw):
        mid = f"msg_{ordinal:04d}aaaaaaaaaaaaaaaaaaaaaa"
        if "user" in spec:
            messages.append({"info": {"id": mid, "sessionID": sid, "role": "user",
                                      "time": {"created": ms(t)}},
                             "parts": [{"id": f"prt_{ordinal:04d}u", "sessionID": sid,
                                        "messageID": mid, "type": "text",
                                        "text": spec["user"]}]})
            anchors[mid] = ordinal
            last_user = mid
        elif "assistant" in spec:
            info: dict[str, Any] = {"id": mid, "sessionID": sid, "role": "assistant",
                                    "time": {"created": ms(t), "completed": ms(t) + 500},
                                    "parentID": last_user, "modelID": "claude-sonnet-4-5",
                                    "providerID": "anthropic"}
            if spec.get("error"):
                info["error"] = {"name": spec["error"],
                                 "data": {"message": spec.get("error_message", "")}}
            parts: list[dict[str, Any]] = [{"id": f"prt_{ordinal:04d}s", "type": "step-start"}]
            if spec.get("reasoning"):
                parts.append({"id": f"prt_{ordinal:04d}r", "type": "reasoning",
                              "text": spec["reasoning"]})
            if spec["assistant"]:
                parts.append({"id": f"prt_{ordinal:04d}t", "type": "text",
                              "text": spec["assistant"]})
            for i, c in enumerate(_calls(spec, ordinal)):
                part = {"id": f"prt_{ordinal:04d}c{i}", "type": "tool", "callID": c["id"],
                        "tool": c["tool"], "state": {"status": "running", "input": c["input"],
                                                      "time": {"start": ms(t)}}}
                parts.append(part)
                parts_by_call[c["id"]] = part
            for p in parts:
                p.update({"sessionID": sid, "messageID": mid})
            messages.append({"info": info, "parts": parts})
            anchors[mid] = ordinal
        elif "result" in spec:
            # opencode keeps a call and its result in one tool part of the assistant message
            pending = [p for p in parts_by_call.values() if p["state"]["status"] == "running"]
            part = pending[0]
            state = part["state"]
            state["time"]["end"] = ms(t)
            if spec.get("is_error") or spec.get("error"):
                state.update({"status": "error", "error": spec.get("error") or spec["result"]})
            else:
                state.update({"status": "completed", "output": spec["result"],
                              "title": part["tool"], "metadata": {}})
                if part["tool"] == "bash":
                    state["metadata"] = {"exit": spec.get("exit", 0), "output": spec["result"]}
    info = {"id": sid, "version": "1.1.10", "projectID": "c0ffee", "directory": "/home/dev/app",
            "title": raw.get("name", "case"), "time": {"created": ms(BASE), "updated": ms(BASE)}}
    return Rendered(json.dumps({"info": info, "messages": messages}, ensure_ascii=False),
                    anchors)
