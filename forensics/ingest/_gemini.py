"""What Gemini CLI and its fork Qwen Code share: Gemini ``Part`` lists and shell output text.

Both agents store message content as Gemini ``Part``s (``{text}``, ``{text, thought: true}``,
``{inlineData}``, ``{functionCall}``, ``{functionResponse}``) and run shell commands through the
same ``run_shell_command`` tool, whose exit status exists only in the output text:

* ≤ ~0.2x (and Qwen Code): ``Command: …\\nDirectory: …\\nOutput: …\\nError: …\\nExit Code: N\\n
  Signal: …\\nBackground PIDs: …\\nProcess Group PGID: …`` with ``(none)`` for unset fields.
* 2026 Gemini builds: ``Output: …``, ``Error: …`` only if set, ``Exit Code: N`` only when N ≠ 0,
  ``Signal: …``, ``Process Group PGID: …``; since 0.49 wrapped in ``<untrusted_context>``.

So a shell result whose text carries the ``Process Group PGID:`` trailer but no ``Exit Code:``
line exited 0; without the trailer (spawn failure, background launch, cancel) the exit status is
unknown and stays ``None``.
"""

from __future__ import annotations

import re
from typing import Any

SHELL_TOOLS = frozenset({"run_shell_command", "shell", "bash"})
"""Tools whose ``args.command`` is a shell command line."""

_EXIT = re.compile(r"^Exit Code: (-?\d+|\(none\))\s*$", re.M)
_SIGNAL = re.compile(r"^Signal: (\S+)\s*$", re.M)
_PGID = re.compile(r"^Process Group PGID: ", re.M)
CANCELLED_BY_USER = "Command was cancelled by user"
TIMEOUT = "Command was automatically cancelled because it exceeded the timeout"
BACKGROUND = ("Command moved to background", "Command is running in background")


def parts_of(content: Any) -> list[dict]:
    """A ``PartListUnion`` as a list of part objects (a bare string is one text part)."""
    if isinstance(content, str):
        return [{"text": content}]
    if isinstance(content, dict):
        return [content]
    if isinstance(content, list):
        out: list[dict] = []
        for p in content:
            if isinstance(p, str):
                out.append({"text": p})
            elif isinstance(p, dict):
                out.append(p)
        return out
    return []


def split_parts(content: Any) -> tuple[str, str, int]:
    """Visible text, thought text and image count of a content value."""
    text, thoughts, images = [], [], 0
    for p in parts_of(content):
        if isinstance(p.get("text"), str):
            (thoughts if p.get("thought") is True else text).append(p["text"])
        elif isinstance(p.get("inlineData"), dict) or isinstance(p.get("fileData"), dict):
            images += 1
    return "\n".join(t for t in text if t), "\n".join(t for t in thoughts if t), images


def function_responses(content: Any) -> list[dict]:
    """The ``functionResponse`` objects in a content value."""
    return [p["functionResponse"] for p in parts_of(content)
            if isinstance(p.get("functionResponse"), dict)]


def only_function_responses(content: Any) -> bool:
    parts = parts_of(content)
    return bool(parts) and all(isinstance(p.get("functionResponse"), dict) for p in parts)


def response_text(response: Any) -> tuple[str, str | None]:
    """Output text and error text of a ``functionResponse.response`` object."""
    if not isinstance(response, dict):
        return (response if isinstance(response, str) else ""), None
    output = response.get("output")
    error = response.get("error")
    if not isinstance(output, str):
        output = "" if output is None else _dump(output)
    if error is not None and not isinstance(error, str):
        error = _dump(error)
    if not output and "output" not in response and "error" not in response and response:
        output = _dump(response)  # MCP tools answer with their own objects
    return output, error or None


def _dump(value: Any) -> str:
    import orjson

    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return str(value)


def unwrap(text: str) -> str:
    """Drop the ``<untrusted_context>`` wrapper Gemini CLI ≥ 0.49 puts around tool output."""
    stripped = text.strip()
    if stripped.startswith("<untrusted_context>") and stripped.endswith("</untrusted_context>"):
        return stripped[len("<untrusted_context>"):-len("</untrusted_context>")].strip("\n")
    return text


def shell_status(text: str) -> dict[str, Any]:
    """Exit code, signal, cancel and timeout facts of a ``run_shell_command`` output text."""
    body = unwrap(text)
    out: dict[str, Any] = {"exit_code": None, "killed": False, "timed_out": False,
                           "aborted": False, "background": False}
    head = body.lstrip()[:300]
    if head.startswith(TIMEOUT) or TIMEOUT in body[:600]:
        out["timed_out"] = True
        return out
    if head.startswith(CANCELLED_BY_USER):
        out["aborted"] = True
        return out
    if head.startswith(BACKGROUND):
        out["background"] = True
        return out
    tail = body[-2000:]
    exits = _EXIT.findall(tail)
    signal = _SIGNAL.findall(tail)
    if signal and signal[-1] != "(none)":
        out["killed"] = True
    if exits and exits[-1] != "(none)":
        out["exit_code"] = int(exits[-1])
    elif not exits and _PGID.search(tail) and not out["killed"]:
        out["exit_code"] = 0  # the 2026 writer prints "Exit Code:" only when it is not 0
    if out["exit_code"] in (137, 143):
        out["killed"] = True
    return out
