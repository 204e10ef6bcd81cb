"""What shell commands and tool outputs say: launches, kills, checks, ports, failures, figures.

Knowledge the reports need to tell a story, not to detect anything. What starts a server, what
kills one and which port a tool binds by default come from the duplicate-launch rule's file (the
same data a user extends), so a report never contradicts the finding it explains. Here it only
names things: which program a command runs, which port it binds, whether a result plainly
reports death, which lines of an output tell.
"""

from __future__ import annotations

import re

from functools import cache

from forensics.model import ToolCall, ToolResultTurn
from forensics.processes import Knowledge, port_of, server_of
from forensics.report._prose import shorten


_CHECK = re.compile(r"(^|[\s;&|(])(curl|wget|ss|lsof|netstat|ps|pgrep|nvidia-smi|kill\s+-0|"
                    r"docker\s+ps|systemctl\s+status|tail|cat\s+\S+\.log|head)\b")


_FLAG = re.compile(r"(?<![\w/.-])(--[A-Za-z][\w-]*)")


_ENV_PREFIX = re.compile(r"^(?:export\s+)?[A-Za-z_][A-Za-z0-9_]*=\S*\s*(?:&&\s*|;\s*)?")


_DEATH = re.compile(r"\bKilled\b|Segmentation fault|core dumped|EADDRINUSE|address already in use|"
                    r"port is already allocated|is (?:already )?in use|Traceback|Error\b|error:|"
                    r"Exception\b|FAILED|fatal:|No such file|command not found|Permission denied")


_TAG_ONLY = re.compile(r"^\s*</?[\w:-]+>\s*$")  # harness wrappers such as </shell_metadata>


_FIGURE = re.compile(
    r"\d[\d,]*(?:\.\d+)?\s?(?:[KMGT]?tok/s|tokens?/s|it/s|samples?/s|req/s|[KMGTP]?FLOPS|"
    r"[KMGT]i?B/s|[KMGT]i?B\b|ms\b|µs\b|%|°C|\s?days?\b|\s?hours?\b|\s?h\b|\s?min(?:utes?)?\b|"
    r"[x×](?=\W|$)|W\b|\s?epochs?\b|\s?tests?\b|\s?passed\b|\s?failed\b)")


@cache
def _launch_knowledge() -> Knowledge:
    from forensics.rules import registry

    return Knowledge.build(**registry()["FX002"].params)


def launches(command: str | None, call: ToolCall | None = None) -> bool:
    if call is not None and call.background:
        return True
    if not command:
        return False
    k = _launch_knowledge()
    return bool(server_of(command, k)
                or (k.background and k.background.search(command))
                or (k.weak and k.weak.search(command)))


_LIVENESS = re.compile(r"\bkill\s+-0\s+\S+")  # asks whether a process lives; kills nothing


def kills(command: str | None) -> bool:
    k = _launch_knowledge()
    return bool(command and k.kill_any and k.kill_any.search(_LIVENESS.sub("", command)))


def checks(command: str | None) -> bool:
    return bool(command and _CHECK.search(command))


def ports_in(command: str) -> list[tuple[str, str]]:
    """(port, how we know): the one the command names, else its tool's well-known default."""
    k = _launch_knowledge()
    server = server_of(command, k)
    port, explicit = port_of(command, k, server=server)
    if port is None:
        return []
    return [(str(port), "explicit" if explicit else f"default of {server}")]


def flags_in(command: str) -> list[str]:
    """The long options a command passes (``--tp``, ``--port``), in order."""
    return _FLAG.findall(command)


_CONFLICT_PORT = re.compile(
    r"(?:[Pp]ort|:)\s?(\d{2,5})\b[^\n]*?(?:in use|already allocated|EADDRINUSE|failed)"
    r"|(?:EADDRINUSE|in use|allocated)[^\n]*?:(\d{2,5})\b")


def ports_named(output: str) -> list[str]:
    """Ports a conflict message names (``Port 5173 is in use``, ``0.0.0.0:5432 failed``)."""
    out: list[str] = []
    for m in _CONFLICT_PORT.finditer(output or ""):
        port = m.group(1) or m.group(2)
        if port not in out:
            out.append(port)
    return out


def program(command: str) -> str:
    """What a command runs, for titles: ``sglang.launch_server``, ``pytest``, ``npm run dev``."""
    text = command.strip()
    variables = dict(re.findall(r"\$(\w+)\s*=\s*[\"']([^\"']+)[\"']", text))
    start = re.search(r"\bStart-Process\s+(?:-FilePath\s+)?([\"']?)([^\s\"']+)\1", text)
    if start:  # PowerShell: the program is the file it starts, often through a variable
        target = start.group(2)
        if target.startswith("$"):
            target = variables.get(target[1:], target)
        return re.split(r"[\\/]", target)[-1]
    for line in text.splitlines():
        line = line.strip().rstrip("\\").strip()
        if not line or line.startswith("#"):
            continue
        parts = [p for p in re.split(r"\s*(?:&&|;|\|\|)\s*", line) if p.strip()]
        useful = [p for p in parts if not re.match(
            r"^(export|cd|source|\.|set|sleep|echo|printf|true|wait|Write-Output|"
            r"Start-Sleep)\b|^\$\w+\s*=", p.strip())]
        for part in useful or parts:
            part = part.strip()
            while _ENV_PREFIX.match(part) and _ENV_PREFIX.sub("", part, count=1) != part:
                part = _ENV_PREFIX.sub("", part, count=1)
            quoted = re.match(r"^(?:&\s*)?([\"'])(.+?)\1", part)
            if quoted:  # a quoted path with spaces: C:\Program Files\...\gh.exe
                return re.split(r"[\\/]", quoted.group(2))[-1]
            words = part.split()
            while words and words[0] in ("nohup", "setsid", "sudo", "exec", "time", "env", "&"):
                words = words[1:]
            if words and words[0].startswith("$") and words[0][1:] in variables:
                words[0] = variables[words[0][1:]]
            if not words:
                continue
            m = re.search(r"-m\s+([\w.]+)", " ".join(words))
            if m and re.search(r"python", words[0]):
                return m.group(1)
            head = re.split(r"[\\/]", words[0].strip("\"'"))[-1]
            if head in ("npm", "pnpm", "yarn", "bun", "docker", "cargo", "uv", "git") \
                    and len(words) > 1:
                return " ".join([head] + [w for w in words[1:3] if not w.startswith("-")][:2])
            return head
    return shorten(text, 40)


def strip_env(command: str) -> str:
    """A command without its leading ``export X=…``/``cd …`` set-up, for quoting in prose."""
    text = command.strip()
    while True:
        m = re.match(r"^(?:export\s+[A-Za-z_]\w*=(?:\"[^\"]*\"|'[^']*'|\S*)|cd\s+\S+|"
                     r"source\s+\S+)\s*(?:&&|;)\s*", text)
        if not m:
            return text
        text = text[m.end():]


def result_failed(result: ToolResultTurn) -> bool:
    return bool(result.failed or re.search(r"(^|\s)Killed(\s|$)", result.output or ""))


def result_status(result: ToolResultTurn) -> str:
    """How a tool result ended, in words."""
    if result.aborted:
        return "was aborted"
    if result.timed_out:
        return "timed out"
    if result.killed or re.search(r"(^|\s)Killed(\s|$)", result.output or ""):
        return "was killed"
    if result.exit_code not in (None, 0):
        return f"exited with code {result.exit_code}"
    if result.is_error:
        return "failed"
    return "succeeded" if result.exit_code == 0 else "came back"


_REMINDER = re.compile(r"<system-reminder>.*?(?:</system-reminder>|\Z)", re.S)


def telling_lines(text: str, limit: int = 3, *, fallback: int | None = None) -> list[str]:
    """The lines of an output that report the failure, or its last ``fallback`` lines (default
    ``limit``) if none do. Harness reminders appended to outputs are not the tool's words."""
    if "<system-reminder>" in (text or ""):
        text = _REMINDER.sub("", text)
    lines = [ln.rstrip() for ln in (text or "").splitlines()
             if len(re.findall(r"\w", ln)) >= 3 and not _TAG_ONLY.match(ln)]
    hits = [ln for ln in lines if _DEATH.search(ln)]
    chosen = hits[-limit:] if hits else lines[-(fallback or limit):]
    return [shorten(ln, 200) for ln in chosen]


def figure_sentences(text: str, limit: int = 4) -> list[str]:
    """Sentences of ``text`` that report figures (numbers with units), the first ``limit`` of
    them (a report leads with its headline numbers)."""
    out: list[str] = []
    for chunk in re.split(r"(?<=[.!?])\s+|\n+", text or ""):
        chunk = re.sub(r"\*\*|__", "", chunk).strip(" -*#|>")
        if len(chunk) > 8 and _FIGURE.search(chunk) and not chunk.startswith(("$", "```")):
            out.append(shorten(chunk, 220))
    return out[:limit]
