"""Typed shell commands: every command text parsed once, behind its wrappers.

A ``Command`` is one pipeline of a script as written, plus what it runs once environment
prefixes (``FOO=1``, ``export``), wrappers (``nohup``, ``setsid``, ``sudo -u x``, ``env``,
``timeout 30``…) and redirections are taken off: the program, its arguments, the environment it
sets, whether ``&`` sent it to the background, whether it left the process group, its
``timeout`` bound and the files its output goes to (redirections and ``| tee``). Parsing is
cached by command text, so the ledger, the rules and the reports share one parse of each text.
There is one list of wrappers, here.
"""

from __future__ import annotations

import dataclasses

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass

from forensics import knowledge_cache
from forensics.analysis.session_cache import per_session
from forensics.analysis.shell import Pipeline, split_commands, split_pipelines

WRAPPERS = frozenset({"nohup", "setsid", "exec", "time", "command", "builtin", "stdbuf",
                      "caffeinate", "unbuffer", "disown", "xvfb-run", "doas"})
"""Programs that run the next word as the real command (their options skipped)."""
_DETACHING = frozenset({"setsid", "disown"})  # out of the process group (nohup is not)
_WITH_OPTIONS = frozenset({"setsid", "stdbuf", "xvfb-run"})
_ASSIGN = knowledge_cache.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_REDIRECT = knowledge_cache.compile(
    r"^(?:\d*|&)>>?(?:&\d+|&-)?$|^(?:\d*|&)>>?\S+$|^\d*<\S*$|^<<<?$|^\d*>&\d+$")
_LOG_TOKEN = knowledge_cache.compile(r"\.(?:log|out|err)$", re.I)


@dataclass(frozen=True)
class Command:
    """One pipeline (or simple command) of a script, parsed."""

    text: str
    """As written, wrappers and redirections included."""
    tokens: tuple[str, ...]
    """What it runs: env prefixes, wrappers, redirections, ``&`` and ``| tee`` stages removed."""
    env: tuple[tuple[str, str], ...]
    background: bool
    """Sent to the background by its own ``&`` (the pipeline's, set by the script parse)."""
    detached: bool
    """``setsid`` / ``disown``: out of the process group a harness timeout kills."""
    timeout: float | None
    """Seconds of a ``timeout N`` wrapper: it ends on its own."""
    logs: frozenset[str]
    """Files its output is written to (redirection targets, ``tee`` files)."""
    quoted_ok: bool
    """The text split cleanly as shell words (False: unbalanced quotes, split on blanks)."""
    title: str | None = None
    """The window title cmd.exe's ``start "title" program`` gave it (``taskkill /FI
    "WINDOWTITLE eq …"`` ends it by that title)."""

    @property
    def program(self) -> str:
        """The program as written, without its directory: ``python3``, ``Test-Path``."""
        return re.split(r"[\\/]", self.tokens[0])[-1] if self.tokens else ""

    @property
    def name(self) -> str:
        """The program in comparable form: lower case, ``.exe`` removed."""
        prog = self.program.lower()
        return prog[:-4] if prog.endswith(".exe") else prog

    @property
    def args(self) -> tuple[str, ...]:
        return self.tokens[1:]

    @property
    def stripped(self) -> str:
        """What it runs, as one line: the text patterns are matched against."""
        return " ".join(self.tokens)

    @property
    def environment(self) -> dict[str, str]:
        return dict(self.env)


def words(text: str) -> tuple[list[str], bool]:
    """Shell words of ``text``; on unbalanced quotes, blank-separated words (and False)."""
    try:
        return shell_words(text), True
    except ValueError:
        return text.split(), False


_BLANK_SEPARATED = knowledge_cache.compile(r"[^ \t\r\n]+")
_QUOTING = knowledge_cache.compile(r"['\"\\]")
_PIECE = knowledge_cache.compile(
    r"""[^ \t\r\n'"\\]+|\\(.)|'([^']*)'|"((?:[^"\\]|\\.)*)"|([ \t\r\n]+)""",
    re.S)
_IN_DOUBLE_QUOTES = knowledge_cache.compile(r"\\(.)", re.S)


def shell_words(text: str) -> list[str]:
    """``shlex.split(text)``, the same answer for every text, without its character-by-character
    state machine (the words of every command a session ran are the scan's hottest loop).

    As shlex in POSIX mode with no comments: words split at space, tab, CR and LF; a backslash
    takes the next character as it is; single quotes take everything up to the next one; in
    double quotes a backslash escapes only ``"`` and itself (it stays before anything else);
    quoted parts join the word around them, and an empty quoted word is a word. An unclosed
    quote, or a backslash at the very end, raises ValueError as shlex does.
    """
    if _QUOTING.search(text) is None:
        return _BLANK_SEPARATED.findall(text)
    out: list[str] = []
    word: str | None = None  # None: between words
    pos, end = 0, len(text)
    while pos < end:
        piece = _PIECE.match(text, pos)
        if piece is None:
            raise ValueError(f"unclosed quotation or escape at {pos}")
        pos = piece.end()
        kind = piece.lastindex
        if kind == 4:  # blanks end the word
            if word is not None:
                out.append(word)
                word = None
            continue
        if kind is None:
            part = piece.group(0)
        elif kind == 3:
            part = piece.group(3)
            if "\\" in part:
                part = _IN_DOUBLE_QUOTES.sub(_unescape_in_double_quotes, part)
        else:
            part = piece.group(kind)
        word = part if word is None else word + part
    if word is not None:
        out.append(word)
    return out


def _unescape_in_double_quotes(escape: re.Match[str]) -> str:
    char = escape.group(1)
    return char if char in '"\\' else escape.group(0)


_CMD_START = knowledge_cache.compile(
    r'^\s*start\s+(?:/[A-Za-z]+(?::\S+)?\s+)*"([^"]*)"\s+'
    r'(?:/[A-Za-z]+(?::\S+)?\s+)*(?=\S)', re.I)
"""cmd.exe's ``start "window title" [/flags] program …``: the program after the title runs in
a window of its own, and the command returns at once (a detached launch)."""


@per_session(maxsize=16384)
def parse(text: str, background: bool = False) -> Command:
    """``text`` as a typed command (cached by text)."""
    started = _CMD_START.match(text)
    if started:
        inner = parse(text[started.end():], True)
        return dataclasses.replace(inner, text=text, background=True, detached=True,
                                   title=started.group(1))
    tokens, clean = words(text)
    env: dict[str, str] = {}
    logs: set[str] = set()
    detached = False
    timeout: float | None = None
    out: list[str] = []
    i = 0
    leading = True
    while i < len(tokens):
        tok = tokens[i]
        # a redirection may stand anywhere, even before the env prefix (`>log FOO=1 cmd`)
        if _REDIRECT.match(tok):
            target = tok.lstrip("0123456789&").lstrip("<>")
            if target.startswith("&"):
                i += 1
                continue
            if not target and i + 1 < len(tokens):
                target = tokens[i + 1]
                i += 1
            if target and not target.startswith("/dev/"):
                logs.add(target)
            i += 1
            continue
        if leading:
            if tok in ("(", "{", "then", "do", "else", "!", "&"):  # `&`: PowerShell's call
                # operator before a program (`& a=` must read as `a=` both times)
                i += 1
                continue
            if tok == "export" or tok in ("sudo",) and i + 1 < len(tokens):
                i += 1
                if tok == "sudo":
                    while i < len(tokens) and tokens[i].startswith("-"):
                        i += 2 if tokens[i] in ("-u", "-g") else 1
                continue
            if _ASSIGN.match(tok):
                name, _, value = tok.partition("=")
                env[name] = value
                i += 1
                continue
            if tok in WRAPPERS or tok.rsplit("/", 1)[-1] in WRAPPERS:
                base = tok.rsplit("/", 1)[-1]
                detached |= base in _DETACHING
                i += 1
                while i < len(tokens) and tokens[i].startswith("-") and base in _WITH_OPTIONS:
                    i += 1
                continue
            if tok == "env":
                i += 1
                while i < len(tokens) and (tokens[i].startswith("-") or _ASSIGN.match(tokens[i])):
                    if _ASSIGN.match(tokens[i]):
                        name, _, value = tokens[i].partition("=")
                        env[name] = value
                    i += 1
                continue
            if tok == "nice":
                i += 1
                while i < len(tokens) and tokens[i].startswith("-"):
                    i += 2 if tokens[i] == "-n" else 1
                continue
            if tok == "timeout":
                i += 1
                while i < len(tokens) and tokens[i].startswith("-"):
                    i += 1
                if i < len(tokens):
                    timeout = _duration(tokens[i])
                    i += 1
                continue
            leading = False
        if tok in ("&", "disown"):
            i += 1
            continue
        out.append(tok)
        i += 1
    # ``| tee file`` stages: the file is a log, the stage is not part of the command.
    if "|" in out:
        cut = out.index("|")
        rest = out[cut + 1:]
        if rest and rest[0] == "tee":
            logs.update(t for t in rest[1:] if not t.startswith("-") and t != "|")
            out = out[:cut]
    return Command(text=text, tokens=tuple(out), env=tuple(sorted(env.items())),
                   background=background, detached=detached, timeout=timeout,
                   logs=frozenset(logs), quoted_ok=clean)


@per_session(maxsize=4096)
def parse_script(script: str) -> tuple[Command, ...]:
    """Every pipeline of a script as a typed command, in order (cached by script text)."""
    return tuple(parse(p.text, p.background) for p in split_pipelines(script))


def simple_commands(script: str) -> tuple[Command, ...]:
    """Every simple command (pipelines split at ``|``) as a typed command, in order."""
    return tuple(parse(s) for s in split_commands(script))


def program(simple: str) -> tuple[str, tuple[str, ...]]:
    """The program a simple command runs and its arguments, behind wrappers and assignments."""
    command = parse(simple)
    return command.program, command.args


def _duration(text: str) -> float | None:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd]?)", text)
    if not m:
        return None
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


_SETUP = frozenset({"cd", "source", ".", "export", "set", "pushd", "popd"})


def normalize(text: str, inert: Iterable[str]) -> str:
    """A launch command in comparable form.

    Whitespace folded; environment prefixes, wrappers, output redirections, ``| tee`` stages,
    log-file names and a trailing ``&`` removed. Called on a whole script, it keeps the last
    pipeline whose program is not ``inert`` (else the last that is not ``cd``/``source``/
    ``export``/an assignment). Idempotent.
    """
    inert = frozenset(inert)
    chosen: Command | None = None
    fallback: Command | None = None
    for command in parse_script(text):
        if not command.tokens:
            continue
        if command.name not in inert:
            chosen = command
        elif command.tokens[0] not in _SETUP:
            fallback = command
    chosen = chosen or fallback
    if chosen is None:
        return ""
    toks = list(chosen.tokens)
    if "|" in toks:
        toks = toks[: toks.index("|")]  # the launch is the first stage: `| tail`, `| head` go
    cleaned: list[str] = []
    skip = False
    for t in toks:
        if skip:
            skip = False
            continue
        if t in ("--log-file", "--logfile", "--log-path"):
            skip = True
            continue
        if re.match(r"--log-?(?:file|path)=", t) or _LOG_TOKEN.search(t):
            continue
        cleaned.append(t)
    return " ".join(shlex.quote(t) for t in cleaned)


__all__ = ["Command", "Pipeline", "WRAPPERS", "normalize", "parse", "parse_script", "program",
           "simple_commands", "split_commands", "split_pipelines", "words"]
