"""Just enough shell to reason about the commands agents run.

Not a shell parser: it splits a script into pipelines at ``;``, newlines, ``&&``, ``||`` and
``&`` (quotes, ``$( … )``, comments and heredoc bodies respected), splits pipelines into simple
commands at ``|`` and finds the script a tool call ran. What each command runs (behind its
wrappers) is ``forensics.analysis.commands``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import lru_cache

from forensics import knowledge_cache
from forensics.analysis.session_cache import per_session
from forensics.model import ToolCall



@dataclass
class Pipeline:
    """One pipeline of a script (``|`` stages stay together) and whether ``&`` ended it."""

    text: str
    background: bool = False


_HEREDOC = knowledge_cache.compile(r"<<-?\s*(['\"]?)([A-Za-z_][\w-]*)\1")


def _strip_heredocs(script: str) -> str:
    if "<<" not in script:
        return script
    out: list[str] = []
    ending: list[str] = []
    for line in script.split("\n"):
        if ending:
            if line.strip() == ending[0]:
                ending.pop(0)
            continue
        out.append(line)
        ending.extend(m.group(2) for m in _HEREDOC.finditer(line))
    return "\n".join(out)


def split_pipelines(script: str) -> list[Pipeline]:
    """Split a shell script into pipelines at ``;``, newlines, ``&&``, ``||`` and ``&``.

    Quotes, ``$( … )``, backticks, comments and heredoc bodies are respected; ``2>&1``, ``&>``
    and ``|&`` are redirections, not separators.
    """
    if not _SEPARATING.search(script):
        # nothing the walk below acts on: it would keep every character and flush once
        chunk = _trim_grouping(script.strip())
        return [Pipeline(chunk)] if chunk else []
    return _walk(script)


_SEPARATING = knowledge_cache.compile(r"[;&|\n'\"`\\$#]")
"""The characters ``_walk`` acts on: separators, quotes, escapes, ``$(``, comments (a
heredoc needs a new line)."""


def _walk(script: str) -> list[Pipeline]:
    """``split_pipelines``, character by character."""
    text = _strip_heredocs(script)
    pipes: list[Pipeline] = []
    buf: list[str] = []
    quote = ""
    depth = 0
    i, n = 0, len(text)

    def flush(background: bool = False) -> None:
        chunk = "".join(buf).strip()
        buf.clear()
        chunk = _trim_grouping(chunk)
        if chunk:
            pipes.append(Pipeline(chunk, background))
        elif background and pipes and not pipes[-1].background:
            pipes[-1].background = True

    while i < n:
        c = text[i]
        if quote:
            buf.append(c)
            if c == "\\" and quote == '"' and i + 1 < n:
                buf.append(text[i + 1])
                i += 2
                continue
            if c == quote:
                quote = ""
            i += 1
            continue
        if c in "'\"`":
            quote = c
            buf.append(c)
        elif c == "\\" and i + 1 < n:
            if text[i + 1] == "\n":
                buf.append(" ")
            else:
                buf.append(c + text[i + 1])
            i += 2
            continue
        elif c == "$" and i + 1 < n and text[i + 1] == "(":
            depth += 1
            buf.append("$(")
            i += 2
            continue
        elif c == ")" and depth:
            depth -= 1
            buf.append(c)
        elif depth:
            buf.append(c)
        elif c == "#" and (i == 0 or text[i - 1] in " \t\n;&|("):
            while i < n and text[i] != "\n":
                i += 1
            continue
        elif c in "\n;":
            flush()
        elif c == "&":
            if i + 1 < n and text[i + 1] == "&":
                flush()
                i += 2
                continue
            prev = text[i - 1] if i else ""
            nxt = text[i + 1] if i + 1 < n else ""
            if prev in "<>|" or nxt == ">":
                buf.append(c)
            elif not "".join(buf).strip():
                buf.append(c)  # PowerShell's call operator (`& $exe …`), not a background marker
            else:
                flush(background=True)
        elif c == "|" and i + 1 < n and text[i + 1] == "|":
            flush()
            i += 2
            continue
        else:
            buf.append(c)
        i += 1
    flush()
    return pipes


_KEYWORDS = knowledge_cache.compile(r"^(?:(?:if|elif|while|until|then|do|else|!|time)\s+)+")


def _trim_grouping(chunk: str) -> str:
    """Drop subshell / group brackets and leading shell keywords: ``(cmd &)``, ``then kill …``."""
    chunk = _KEYWORDS.sub("", chunk.lstrip("({ \t"))
    chunk = chunk.lstrip("({ \t")
    while chunk and chunk[-1] in ")} \t":
        if chunk[-1] == ")" and chunk.count(")") <= chunk.count("("):
            break
        if chunk[-1] == "}" and chunk.count("}") <= chunk.count("{"):
            break
        chunk = chunk[:-1]
    return chunk.strip()


@per_session(maxsize=4096)
def split_commands(command: str) -> tuple[str, ...]:
    """Simple commands of a script, in order: its pipelines split at ``|``."""
    out: list[str] = []
    for pipe in split_pipelines(command):
        out.extend(part for part in _split_pipe(pipe.text) if part)
    return tuple(out)


def _split_pipe(text: str) -> list[str]:
    """Stages of one pipeline at unquoted ``|`` (``||`` was already split off)."""
    if "|" not in text:
        return [text.strip()]
    parts: list[str] = []
    buf: list[str] = []
    quote = ""
    depth = 0
    for i, c in enumerate(text):
        if quote:
            if c == quote and text[i - 1] != "\\":
                quote = ""
        elif c in "'\"`":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")" and depth:
            depth -= 1
        elif c == "|" and not depth and text[i - 1:i] not in (">",) and text[i + 1:i + 2] != "&":
            parts.append("".join(buf).strip())
            buf = []
            continue
        buf.append(c)
    parts.append("".join(buf).strip())
    return parts


_SHELLISH = knowledge_cache.compile(
    r"bash|shell|exec|powershell|pwsh|terminal|command|cmd|monitor", re.I)
_CODE_MODE = knowledge_cache.compile(r"exec_command\(\s*(\{.*?\})\s*\)", re.S)


FILE_KEYS = ("file_path", "filePath", "path", "absolute_path", "filename", "notebook_path")
"""Input keys under which agents' file tools name their file (Claude Code ``file_path``,
opencode ``filePath``, Gemini ``absolute_path``, Cline ``path``, notebooks)."""


def file_of(call: ToolCall) -> str | None:
    """The file a file tool's call names (a read, a write, an edit), if it names one."""
    return next((v for key in FILE_KEYS if isinstance(v := call.input.get(key), str) and v),
                None)


@lru_cache(maxsize=1024)
def _shellish(tool: str) -> bool:
    """Whether a tool's name says it runs shell commands (asked for every call: kept by name)."""
    return bool(_SHELLISH.search(tool))


def command_of(call: ToolCall) -> str | None:
    """The shell script a call runs: ``ToolCall.command``, else a ``cmd``/``command`` input."""
    if call.command:
        return call.command
    if not _shellish(call.name):
        return None
    for key in ("command", "cmd"):
        value = call.input.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            if len(value) >= 3 and value[1] in ("-lc", "-c"):
                return value[2]
            return " ".join(shlex.quote(v) for v in value)
    code = call.input.get("code") or call.input.get("input")
    if isinstance(code, str) and "exec_command" in code:
        import json
        cmds = []
        for m in _CODE_MODE.finditer(code):
            try:
                value = json.loads(m.group(1)).get("cmd")
            except ValueError:
                continue
            if isinstance(value, str):
                cmds.append(value)
        return "\n".join(cmds) or None
    return None
