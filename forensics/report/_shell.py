"""How to name commands and results in prose: programs, flags, set-up, outcomes, figures.

Wording only, never detection: what was a launch, a kill or a health check, which port two
launches compete for and what a result showed come from the finding's typed evidence
(``Incident.facts``) and the session's analysis (``forensics.analysis``). Here they are named:
which program a command runs, which flags it passes, how a result ended in words, which lines of
an output tell.
"""

from __future__ import annotations

import re

from forensics.analysis.session import analysis_of
from forensics.analysis.commands import parse
from forensics.analysis.outcome import telling_lines as _telling_lines
from forensics.model import Session, ToolResultTurn
from forensics.report._memo import TextMemo
from forensics.report._prose import shorten

_telling = TextMemo(lambda text, limit, fallback: tuple(
    _telling_lines(text, limit, fallback=fallback)))


def telling_lines(text: str, limit: int = 3, *, fallback: int | None = None) -> list[str]:
    """``forensics.analysis.outcome.telling_lines``, once per output and session (the chain,
    the reaction and the readings of several case studies ask about the same outputs)."""
    return list(_telling(text or "", limit, fallback))


_FLAG = re.compile(r"(?<![\w/.-])(--[A-Za-z][\w-]*)")


_ENV_PREFIX = re.compile(r"^(?:export\s+)?[A-Za-z_][A-Za-z0-9_]*=\S*\s*(?:&&\s*|;\s*)?")


def flags_in(command: str) -> list[str]:
    """The long options a command passes (``--tp``, ``--port``), in order."""
    return _FLAG.findall(command)


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
            while words and words[0] == "&":
                words = words[1:]
            parsed = parse(" ".join(words))
            if parsed.tokens and parsed.quoted_ok:
                words = list(parsed.tokens)
            if words and words[0].startswith("$") and words[0][1:] in variables:
                words[0] = variables[words[0][1:]]
            if not words:
                continue
            m = re.search(r"-m\s+([\w.]+)", " ".join(words))
            if m and re.search(r"python", words[0]):
                return m.group(1)
            if re.search(r"python", words[0]) and len(words) > 1 and words[1].endswith(".py"):
                return re.split(r"[\\/]", words[1])[-1]  # the script it runs: train.py
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


def result_failed(session: Session, result: ToolResultTurn) -> bool:
    """Did the result fail (the analysis' outcome: status, signal, death in the output)."""
    return analysis_of(session).outcome(result).failed


_STATUS_WORDS = {"aborted": "was aborted", "timed out": "timed out", "killed": "was killed",
                 "error": "failed", "failed": "failed", "ok": "succeeded",
                 "no result": "never came back", "pending": "was still marked running",
                 "crashed": "died", "port taken": "found its port already taken"}


def status_words(status: str) -> str:
    """A status of the evidence's vocabulary (``exit 1``, ``killed``, ``ok``…) in words."""
    if status.startswith("exit "):
        return f"exited with code {status[5:]}"
    return _STATUS_WORDS.get(status, status)


def result_status(session: Session, result: ToolResultTurn) -> str:
    """How a tool result ended, in words (from the analysis' outcome)."""
    status = analysis_of(session).outcome(result).status()
    if status:
        return status_words(status)
    return "succeeded" if result.exit_code == 0 else "came back"

