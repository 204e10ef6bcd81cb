"""Long-running processes the assistant launched, and what the transcript says became of them.

The duplicate-launch rule needs a model of process state that no single turn holds: which
servers and background jobs the assistant started, on which port, and whether each was still
alive when the next launch came. ``track`` builds that model in one walk over the turns:

* **Launch**: a shell pipeline that starts something long-running: a server pattern
  (``sglang.launch_server``, ``uvicorn``, ``npm run dev``…), or anything sent to the background
  (trailing ``&``, ``docker run -d``, ``tmux new -d``, Claude Code ``run_in_background``) that is
  not a short command (tests, builds, installs).
* **State over time**: alive until the transcript shows it ended: a kill aimed at it (by PID, by
  ``pkill -f`` pattern, by name, by port, ``docker stop``, ``KillShell``…), its own result showing
  it exited, crashed, was killed or never bound its port, or the harness killing a foreground
  command at its timeout. A session resumed after a long pause, a compaction or a new session
  start makes every earlier process UNKNOWN. A later answer from its port revives a launch whose
  kill could have missed (a PID kill may hit only the wrapper shell) or whose state was unknown.
* **Up signals**: a health check that got an answer, the launch's own output saying it is ready,
  the user saying it is up (structure first: the first short user message after the launch's
  result that neither asks for a relaunch nor reports a failure; plus a word list).

Background-task notifications (``EventTurn`` "notification") concern the wrapper shell and are
ignored on purpose: they do not prove the server exited.

All knowledge (patterns, default ports, kill forms, phrases) comes in as data: ``Knowledge`` is
compiled once per parameter set from the rule's ``[params]``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from forensics.model import AssistantTurn, EventTurn, Session, ToolCall, ToolResultTurn, UserTurn
from forensics.shell import Pipeline, command_of, split_pipelines
from forensics.timeline import shorten as _short

Clock = tuple[int, int, int]
"""Where something happened: (turn ordinal, call index, pipeline index within the script)."""


class State(str, Enum):
    ALIVE = "alive"
    ENDED = "ended"
    UNKNOWN = "unknown"


@dataclass
class Change:
    """A change in a launch's state, and why."""

    clock: Clock
    state: State
    kind: str
    """exit, timeout, abort, killed, crash, conflict, kill-pid, kill-pattern, kill-name,
    kill-port, kill-container, kill-group, kill-session, kill-harness, kill-unresolved,
    resume, revived, expired."""
    reason: str
    ordinal: int


@dataclass
class Signal:
    """Evidence that a launch was up: a health check, its own ready line, the user's word."""

    clock: Clock
    kind: str  # health, output, user, running
    ordinal: int
    text: str = ""


@dataclass(eq=False)
class Launch:
    """One long-running process the assistant started."""

    seq: int
    command: str
    """The launching pipeline as written (wrappers and redirections included)."""
    normalized: str
    server: str | None
    """Name of the server pattern that matched (``sglang``, ``vite``…), or None for a generic
    background job."""
    port: int | None
    """The port it binds: the one its output showed, else the requested one, else the default."""
    port_explicit: bool
    background: bool
    detached: bool
    weak: bool
    reconciling: bool
    cwd: str | None
    turn: int
    anchor: str
    clock: Clock
    call_id: str
    time: float | None = None
    result: int | None = None
    pids: set[int] = field(default_factory=set)
    handles: set[str] = field(default_factory=set)
    logs: set[str] = field(default_factory=set)
    deadline: float | None = None
    harness_only: bool = False
    """Sent to the background only by the harness (``run_in_background``), no ``&`` of its own."""
    changes: list[Change] = field(default_factory=list)
    signals: list[Signal] = field(default_factory=list)
    requested_port: int | None = None
    """The port the command asked for (or the tool's default), before any output moved it."""
    conflict: bool = False
    """Its own output showed the port was already taken."""
    conflict_port: int | None = None
    """The port its output said was taken (``Bind for 0.0.0.0:5432 failed``, ``:::3000``)."""
    moved: bool = False
    """Its port was taken and it came up on another one (Next.js, Vite): two servers now run."""
    killed_at_once: bool = False

    def state_before(self, clock: Clock) -> tuple[State, Change | None]:
        state, last = State.ALIVE, None
        for change in self.changes:
            if change.clock >= clock:
                break
            state, last = change.state, change
        return state, last

    @property
    def state(self) -> State:
        return self.changes[-1].state if self.changes else State.ALIVE

    def end(self, clock: Clock, kind: str, reason: str, ordinal: int,
            state: State = State.ENDED) -> None:
        self.changes.append(Change(clock, state, kind, reason, ordinal))

    @property
    def intended_port(self) -> int | None:
        """The port it tried to bind: the taken one it reported, else the asked-for one."""
        return self.conflict_port or self.requested_port or self.port

    def equivalent(self, later: "Launch") -> bool:
        """Would ``later`` start this again: same port, or the same normalised command.

        Same port: the port this one holds (or asked for) is the one ``later`` binds, asks for or
        found taken. Same command: in the same directory when both are known, and not when both
        name different ports (``PORT=3001 npm run dev`` beside ``PORT=3000 npm run dev``).
        """
        mine = {p for p in (self.port, self.requested_port) if p is not None}
        theirs = {p for p in (later.port, later.requested_port, later.conflict_port)
                  if p is not None}
        if mine & theirs:
            return True
        if self.normalized != later.normalized:
            return False
        a, b = self.intended_port, later.intended_port
        if a is not None and b is not None and a != b:
            return False
        if self.cwd and later.cwd:
            return _basename(self.cwd) == _basename(later.cwd)
        return True


# -- knowledge ---------------------------------------------------------------------------------

def _compile(pattern: str, flags: int = re.I | re.M) -> re.Pattern[str]:
    try:
        return re.compile(pattern, flags)
    except re.error:
        return re.compile(re.escape(pattern), flags)


def _union(patterns: Iterable[str], flags: int = re.I | re.M) -> re.Pattern[str] | None:
    parts = [p for p in patterns if p]
    if not parts:
        return None
    return _compile("|".join(f"(?:{p})" for p in parts), flags)


def _words(words: Iterable[str]) -> re.Pattern[str] | None:
    """A phrase list as one regex; ASCII phrases match on word boundaries, others anywhere."""
    ascii_words = sorted({re.escape(w.strip()) for w in words if w.strip() and w.isascii()},
                         key=len, reverse=True)
    other = sorted({re.escape(w.strip()) for w in words if w.strip() and not w.isascii()},
                   key=len, reverse=True)
    parts = []
    if ascii_words:
        parts.append(rf"(?<!\w)(?:{'|'.join(ascii_words)})(?!\w)")
    if other:
        parts.append(f"(?:{'|'.join(other)})")
    return _compile("|".join(parts)) if parts else None


def _literal_words(patterns: Iterable[str]) -> tuple[str, ...] | None:
    """Lower-case words (3+ letters) that the patterns spell out literally.

    A text containing none of them cannot match any pattern whose words were all taken, so a
    substring test on these words is a cheap prefilter. None when some pattern spells no word
    (then the prefilter must always pass).
    """
    words: set[str] = set()
    for pattern in patterns:
        source = re.sub(r"\\.|\(\?P?<\w+>|\(\?[a-zA-Z]+\)|\[[^\]]*\]|\{\d+(?:,\d*)?\}", " ",
                        pattern)
        found = re.findall(r"[A-Za-z_][A-Za-z0-9_-]{2,}", source)
        if not found:
            return None
        words.update(w.lower().rstrip("?*+") for w in found)
    return tuple(sorted(words))


def _any_word(words: tuple[str, ...] | None, text: str) -> bool:
    if words is None:
        return True
    low = text.lower()
    return any(w in low for w in words)


_LONE_AMP = re.compile(r"(?<![&>|])&(?![&>])")

_CACHE: dict[Any, "Knowledge"] = {}


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


@dataclass
class Knowledge:
    """The rule's data, compiled once per parameter set."""

    servers: list[tuple[str, re.Pattern[str]]]
    server_any: re.Pattern[str] | None
    default_ports: dict[str, int]
    background: re.Pattern[str] | None
    short: re.Pattern[str] | None
    weak: re.Pattern[str] | None
    reconciling: set[str]
    port_patterns: list[re.Pattern[str]]
    bound_ports: list[re.Pattern[str]]
    kills: dict[str, list[re.Pattern[str]]]
    kill_any: re.Pattern[str] | None
    harness_kill_tools: dict[str, str]
    harness_poll_tools: dict[str, str]
    background_ids: list[re.Pattern[str]]
    output_files: list[re.Pattern[str]]
    job_end_notifications: list[re.Pattern[str]]
    pid_patterns: list[re.Pattern[str]]
    conflict: re.Pattern[str] | None
    conflict_ports: list[re.Pattern[str]]
    crash: re.Pattern[str] | None
    killed: re.Pattern[str] | None
    up: re.Pattern[str] | None
    health_ok: re.Pattern[str] | None
    health: re.Pattern[str] | None
    down: re.Pattern[str] | None
    user_up: re.Pattern[str] | None
    relaunch_request: re.Pattern[str] | None
    failure: re.Pattern[str] | None
    script_children: set[str]
    resume_gap: float
    prefilter: tuple[str, ...] | None
    """Words one of which a script must contain to be worth analysing (or ``&``)."""
    kill_words: tuple[str, ...] | None

    @classmethod
    def build(cls, **params: Any) -> "Knowledge":
        key = _freeze(params)
        cached = _CACHE.get(key)
        if cached is not None:
            return cached
        servers = [(name, _compile(p)) for name, p in params["server_commands"].items()]
        kills = {kind: [_compile(p) for p in (pats if isinstance(pats, list) else [pats])]
                 for kind, pats in params["kill_commands"].items()}
        kill_patterns = [p for pats in params["kill_commands"].values()
                         for p in (pats if isinstance(pats, list) else [pats])]
        pre = [*params["server_commands"].values(), *params["background_markers"],
               *params["weak_launchers"], *kill_patterns, params["health_check_commands"] or "",
               r"\b(?:lsof|pgrep|netstat|fuser)\b"]
        know = cls(
            servers=servers,
            server_any=_union(params["server_commands"].values()),
            default_ports={k: int(v) for k, v in params["default_ports"].items()},
            background=_union(params["background_markers"]),
            short=_union(params["short_commands"]),
            weak=_union(params["weak_launchers"]),
            reconciling=set(params["reconciling_commands"]),
            port_patterns=[_compile(p) for p in params["port_patterns"]],
            bound_ports=[_compile(p) for p in params["bound_port_patterns"]],
            kills=kills,
            kill_any=_union(kill_patterns),
            harness_kill_tools=dict(params["harness_kill_tools"]),
            harness_poll_tools=dict(params["harness_poll_tools"]),
            background_ids=[_compile(p) for p in params["background_id_patterns"]],
            output_files=[_compile(p) for p in params["output_file_patterns"]],
            job_end_notifications=[_compile(p) for p in params["job_end_notifications"]],
            pid_patterns=[_compile(p) for p in params["pid_patterns"]],
            conflict=_union(params["port_conflict_patterns"]),
            conflict_ports=[_compile(p) for p in params["conflict_port_patterns"]],
            crash=_union(params["crash_patterns"]),
            killed=_union(params["killed_patterns"]),
            up=_union(params["up_patterns"]),
            health_ok=_union(params["health_ok_patterns"]),
            health=_compile(params["health_check_commands"]) if params["health_check_commands"]
            else None,
            down=_union(params["down_patterns"]),
            user_up=_words(params["user_up_words"]),
            relaunch_request=_words(params["relaunch_request_words"]),
            failure=_words(params["failure_words"]),
            script_children={n.lower() for n in params["script_child_names"]},
            resume_gap=float(params["resume_gap_minutes"]) * 60.0,
            prefilter=_literal_words(p for p in pre if p),
            kill_words=_literal_words(kill_patterns),
        )
        if len(_CACHE) > 32:
            _CACHE.clear()
        _CACHE[key] = know
        return know


# -- launches -------------------------------------------------------------------------------

_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_WRAPPERS = {"nohup", "setsid", "exec", "time", "command", "builtin", "stdbuf", "caffeinate",
             "unbuffer", "disown"}
_WRAPPERS_WITH_ARG = {"nice": {"-n"}, "sudo": {"-u", "-g"}, "env": {"-u"},
                      "timeout": set(), "stdbuf": set()}
_REDIRECT = re.compile(r"^(?:\d*|&)>>?(?:&\d+|&-)?$|^(?:\d*|&)>>?\S+$|^\d*<\S*$|^<<<?$|^\d*>&\d+$")
_LOG_TOKEN = re.compile(r"\.(?:log|out|err)$", re.I)


def _tokens(text: str) -> tuple[list[str], bool]:
    try:
        return shlex.split(text, posix=True), True
    except ValueError:
        return text.split(), False


def strip_command(text: str) -> tuple[list[str], dict[str, str], dict[str, Any]]:
    """Tokens of a launch with env prefixes, wrappers and redirections taken off.

    Returns (tokens, env assignments, notes) where notes hold ``detached`` (setsid/disown: out
    of the process group a harness timeout kills), ``timeout`` (seconds of a ``timeout N``
    wrapper) and ``logs`` (redirection targets).
    """
    tokens, _ = _tokens(text)
    env: dict[str, str] = {}
    notes: dict[str, Any] = {"detached": False, "timeout": None, "logs": set()}
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
                notes["logs"].add(target)
            i += 1
            continue
        if tok in ("&", "disown"):  # also a leading PowerShell call operator (`& a=`)
            i += 1
            continue
        if leading:
            if tok == "export" or tok in ("sudo",) and i + 1 < len(tokens):
                i += 1
                if tok == "sudo":
                    while i < len(tokens) and tokens[i].startswith("-"):
                        i += 2 if tokens[i] in _WRAPPERS_WITH_ARG["sudo"] else 1
                continue
            if _ASSIGN.match(tok):
                name, _, value = tok.partition("=")
                env[name] = value
                i += 1
                continue
            if tok in _WRAPPERS:
                notes["detached"] |= tok in ("setsid", "disown")  # nohup shares the process group
                i += 1
                while i < len(tokens) and tokens[i].startswith("-") and tok in ("setsid", "stdbuf"):
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
                    notes["timeout"] = _duration(tokens[i])
                    i += 1
                continue
            leading = False
        out.append(tok)
        i += 1
    # ``| tee file`` stages: the file is a log, the stage is not part of the command.
    if "|" in out:
        cut = out.index("|")
        rest = out[cut + 1:]
        if rest and rest[0] == "tee":
            notes["logs"].update(t for t in rest[1:] if not t.startswith("-") and t != "|")
            out = out[:cut]
    return out, env, notes


def _duration(text: str) -> float | None:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd]?)", text)
    if not m:
        return None
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def normalize(text: str) -> str:
    """A launch command in comparable form.

    Whitespace folded; environment prefixes (``FOO=bar``, ``export …``), wrappers (``nohup``,
    ``setsid``, ``env``, ``timeout N``…), output redirections, ``| tee`` stages, log-file names
    and a trailing ``&`` removed. ``cd``/``source`` prefixes are separate pipelines and never
    reach this function when called on a pipeline; called on a whole script, it keeps the last
    pipeline that is not ``cd``/``source``/``export``/an assignment. Idempotent.
    """
    pipes = split_pipelines(text)
    chosen = fallback = ""
    for pipe in pipes:
        toks, _, _ = strip_command(pipe.text)
        if not toks:
            continue
        if _program(toks) not in _INERT:
            chosen = pipe.text
        elif toks[0] not in ("cd", "source", ".", "export", "set", "pushd", "popd"):
            fallback = pipe.text
    chosen = chosen or fallback
    if not chosen:
        return ""
    toks, _, _ = strip_command(chosen)
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


def _basename(path: str) -> str:
    return re.split(r"[\\/]", path.rstrip("\\/"))[-1].lower()


def _program(tokens: Sequence[str]) -> str:
    if not tokens:
        return ""
    prog = _basename(tokens[0])
    return prog[:-4] if prog.endswith(".exe") else prog


# -- the tracker -------------------------------------------------------------------------------

_INERT = {"echo", "printf", "cat", "grep", "rg", "egrep", "sed", "awk", "git", "which", "type",
          "man", "head", "tail", "less", "more", "ps", "pgrep", "lsof", "ss", "netstat", "test",
          "[", "[[", "ls", "find", "wc", "sort", "jq", "curl", "wget", "sleep", "true", "false",
          "wait", "read", "cd", "source", ".", "export", "set", "unset", "local", "if", "then",
          "else", "fi", "for", "do", "done", "while", "case", "esac", "return", "exit", "kill",
          "pkill", "killall", "fuser", "xargs", "vim", "vi", "nano", "code", "touch", "mkdir",
          "rm", "cp", "mv", "chmod", "chown", "diff", "tee", "get-content", "write-host",
          "write-output", "select-string", "get-process", "stop-process", "test-path",
          "get-childitem", "get-nettcpconnection", "invoke-webrequest", "invoke-restmethod",
          "taskkill", "tasklist", "pushd", "popd", "docker-compose-ps", "mkdocs-build"}


_SKIP_FAST = _INERT - {"cd", "export", "set", "kill", "pkill", "killall", "fuser", "xargs",
                       "lsof", "stop-process", "taskkill", "get-process", "get-nettcpconnection",
                       "pgrep"}


def _first_word(text: str) -> str:
    for tok in text.split(None, 4):
        if not _ASSIGN.match(tok):
            return _basename(tok.strip("'\"")).lower()
    return ""


@dataclass
class _Script:
    """What one tool call's script says, pipeline by pipeline."""

    pipes: list[Pipeline]
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None


class Tracker:
    """Walks a session once and builds every launch with its state over time."""

    def __init__(self, session: Session, know: Knowledge) -> None:
        self.session = session
        self.k = know
        self.launches: list[Launch] = []
        self.by_call: dict[str, list[Launch]] = {}
        self.by_handle: dict[str, Launch] = {}
        self.log_names: dict[str, list[Launch]] = {}
        self.health_calls: dict[str, list[tuple[Clock, int]]] = {}
        self.code_polls: dict[str, list[Launch]] = {}
        """Codex code-mode cells that poll a session (``tools.write_stdin``), by call id."""
        self._last_time: float | None = None
        self._user_seen_after: set[int] = set()

    # -- walking ---------------------------------------------------------------------------

    def run(self) -> list[Launch]:
        for turn in self.session.turns:
            self._gap(turn)
            if isinstance(turn, AssistantTurn):
                for idx, call in enumerate(turn.tool_calls):
                    self._call(turn, idx, call)
            elif isinstance(turn, ToolResultTurn):
                self._result(turn)
            elif isinstance(turn, UserTurn):
                self._user(turn)
            elif isinstance(turn, EventTurn):
                if turn.event == "notification":
                    self._notification(turn)
                elif turn.event in ("compaction", "session_start"):
                    self._unknown_all((turn.ordinal, 0, 0), turn.ordinal,
                                      "compaction" if turn.event == "compaction"
                                      else "a new session start")
        return self.launches

    def _gap(self, turn: Any) -> None:
        t = turn.time
        if t is None:
            return
        if self._last_time is not None and t - self._last_time > self.k.resume_gap:
            hours = (t - self._last_time) / 3600
            self._unknown_all((turn.ordinal, -1, 0), turn.ordinal,
                              f"the session resumed after {hours:.1f} h")
        self._last_time = t if self._last_time is None else max(t, self._last_time)

    def _notification(self, turn: EventTurn) -> None:
        """A finished background task ends a plain job run as the task itself, never a server.

        The notification is about the harness's wrapper shell: when the wrapper ran the job in
        its foreground (no ``&`` of its own), the job is done; a server may have been left
        running by the wrapper, so servers stay alive (rules.md, Common ground).
        """
        for pat in self.k.job_end_notifications:
            for m in pat.finditer(turn.text):
                launch = self.by_handle.get(m.group(1))
                if launch and launch.server is None and launch.harness_only \
                        and launch.state is State.ALIVE:
                    launch.end((turn.ordinal, 0, 0), "exit",
                               f"its task finished ({turn.anchor})", turn.ordinal)

    def _unknown_all(self, clock: Clock, ordinal: int, why: str) -> None:
        for launch in self.launches:
            if launch.state is State.ALIVE:
                launch.end(clock, "resume", why, ordinal, State.UNKNOWN)

    def _alive(self) -> list[Launch]:
        return [l for l in self.launches if l.state is State.ALIVE]

    # -- calls -----------------------------------------------------------------------------

    def _call(self, turn: AssistantTurn, idx: int, call: ToolCall) -> None:
        k = self.k
        harness_key = k.harness_kill_tools.get(call.name)
        if harness_key:
            handle = str(call.input.get(harness_key, ""))
            launch = self.by_handle.get(handle)
            if launch and launch.state is not State.ENDED:
                launch.end((turn.ordinal, idx, 0), "kill-harness",
                           f"{call.name} {handle} at {turn.anchor}", turn.ordinal)
            return
        if call.name in k.harness_poll_tools:
            key = k.harness_poll_tools[call.name]
            chars = call.input.get("chars")
            handle = str(call.input.get(key, ""))
            launch = self.by_handle.get(handle)
            if launch and isinstance(chars, str) and ("\x03" in chars or "\\u0003" in chars):
                launch.end((turn.ordinal, idx, 0), "kill-harness",
                           f"Ctrl-C sent to session {handle} at {turn.anchor}", turn.ordinal)
            return
        code = call.input.get("input") or call.input.get("code")
        if isinstance(code, str) and "write_stdin" in code:
            for handle, chars in _code_mode_stdin(code):
                launch = self.by_handle.get(handle)
                if launch and ("\x03" in chars):
                    launch.end((turn.ordinal, idx, 0), "kill-harness",
                               f"Ctrl-C sent to session {handle} at {turn.anchor}", turn.ordinal)
                elif launch:
                    self.code_polls.setdefault(call.call_id, []).append(launch)
        script = command_of(call)
        if not script:
            return
        if not _any_word(k.prefilter, script) and not _LONE_AMP.search(script) \
                and not any(n in script for n in self.log_names) and not call.background:
            return
        pipes = split_pipelines(script)
        ctx = _Script(pipes)
        workdir = call.input.get("workdir") or call.input.get("cwd")
        ctx.cwd = workdir if isinstance(workdir, str) else None
        script_launches: list[Launch] = []
        assigns = _assignments(script)
        for p_idx, pipe in enumerate(pipes):
            clock = (turn.ordinal, idx, p_idx + 1)
            if k.health:
                for m in k.health.finditer(pipe.text):
                    if m.group(1) and m.group(1).isdigit():
                        self.health_calls.setdefault(call.call_id, []).append(
                            (clock, int(m.group(1))))
            if _first_word(pipe.text) in _SKIP_FAST:
                continue  # echo, grep, sed, ls…: neither a launch nor a kill; spare the tokenizer
            toks, env, notes = strip_command(pipe.text)
            if not toks:
                ctx.env.update(env)
                continue
            prog = _program(toks)
            if prog == "cd" and len(toks) > 1:
                ctx.cwd = toks[1]
                continue
            if prog in ("export", "set") or (not toks and env):
                continue
            if self._kill(pipe.text, toks, prog, clock, turn, script_launches, assigns):
                continue
            launch = self._launch(pipe, toks, env, notes, prog, clock, turn, call, ctx)
            if launch:
                script_launches.append(launch)
        for launch in script_launches:
            self.by_call.setdefault(call.call_id, []).append(launch)

    def _launch(self, pipe: Pipeline, toks: list[str], env: dict[str, str],
                notes: dict[str, Any], prog: str, clock: Clock, turn: AssistantTurn,
                call: ToolCall, ctx: _Script) -> Launch | None:
        k = self.k
        text = pipe.text
        if prog in _INERT:
            return None
        stripped = " ".join(toks)
        server = server_of(stripped, k)
        detach_marker = bool(k.background and k.background.search(stripped))
        background = pipe.background or detach_marker or call.background
        weak = bool(k.weak and k.weak.search(stripped)) and server is None
        if server is None and not background:
            return None
        if server is None and k.short and k.short.search(stripped):
            return None
        if notes["timeout"] is not None and (server is None or not background):
            return None  # bounded: it ends on its own
        port, explicit = self._port(stripped, {**ctx.env, **env}, server)
        launch = Launch(
            seq=len(self.launches), command=text.strip(), normalized=normalize(text),
            server=server, port=port, port_explicit=explicit, background=background,
            detached=notes["detached"] or detach_marker or call.background,
            weak=weak, reconciling=server in k.reconciling, cwd=ctx.cwd,
            turn=turn.ordinal, anchor=turn.anchor, clock=clock, call_id=call.call_id,
            time=turn.time, requested_port=port,
            harness_only=call.background and not pipe.background and not detach_marker,
        )
        if notes["timeout"] is not None and turn.time is not None:
            launch.deadline = turn.time + notes["timeout"]
        launch.logs = {l for l in notes["logs"]}
        for name in launch.logs:
            self.log_names.setdefault(name, []).append(launch)
        self.launches.append(launch)
        return launch

    def _port(self, text: str, env: dict[str, str], server: str | None) -> tuple[int | None, bool]:
        return port_of(text, self.k, server=server, env=env)

    # -- kills -----------------------------------------------------------------------------

    def _kill(self, text: str, toks: list[str], prog: str, clock: Clock, turn: AssistantTurn,
              script_launches: list[Launch], assigns: dict[str, tuple[str, Any]]) -> bool:
        """Apply a kill in this pipeline to the launches it aims at; True if it was a kill."""
        k = self.k
        if not k.kill_any or not _any_word(k.kill_words, text):
            return False
        where = f"`{_short(text, 80)}` at {turn.anchor}"
        for kind, pats in k.kills.items():
            for pat in pats:
                m = pat.search(text)
                if not m:
                    continue
                target = next((g for g in m.groups() if g), "") if m.groups() else ""
                self._apply_kill(kind, target.strip(), clock, turn, where, script_launches,
                                 assigns)
                return True
        return False

    def _apply_kill(self, kind: str, target: str, clock: Clock, turn: AssistantTurn,
                    where: str, script_launches: list[Launch],
                    assigns: dict[str, tuple[str, Any]]) -> None:
        alive = [l for l in self.launches if l.state is not State.ENDED]
        hit: list[Launch] = []
        how = kind
        if kind == "port":
            port = int(target) if target.isdigit() else None
            hit = [l for l in alive if port is not None and l.port == port]
        elif kind == "pid":
            args = [a for a in re.split(r"[\s,]+", target) if a]
            if any(a in ("-0", "-l", "-L") for a in args):
                return  # a liveness probe, not a kill
            pids = {int(a) for a in args if a.isdigit()}
            refs = [a for a in args if a.startswith(("$", "%", '"$'))]
            for ref in refs:
                name = ref.strip('"${}()')
                kind_, value = assigns.get(name, ("", None))
                if ref.startswith("%") or name == "!" or kind_ == "bg":
                    hit.extend(l for l in script_launches if l.background)
                elif kind_ == "port":
                    hit.extend(l for l in alive if l.port == value)
                    how = "port"
                elif "lsof" in ref or "lsof" in target:
                    m = re.search(r":(\d{2,5})", target)
                    if m:
                        hit.extend(l for l in alive if l.port == int(m.group(1)))
                        how = "port"
            if "$(" in target and "lsof" in target and not hit:
                m = re.search(r":(\d{2,5})", target)
                if m:
                    hit.extend(l for l in alive if l.port == int(m.group(1)))
                    how = "port"
            for l in alive:
                if l.pids & pids:
                    hit.append(l)
            if not hit and (pids or refs):
                for l in alive:
                    if l.state is State.ALIVE and not l.reconciling and l.server != "docker":
                        l.end(clock, "kill-unresolved",
                              f"a kill of a process the transcript does not name ({where})",
                              turn.ordinal, State.UNKNOWN)
                return
        elif kind in ("pattern", "name"):
            pattern = _kill_target(target, kind)
            if not pattern:
                return
            rx = _compile(pattern, re.I) if kind == "pattern" else None
            for l in alive:
                toks, _, _ = strip_command(l.command)
                prog = _program(toks)
                if kind == "pattern":
                    hay = " ".join(toks)
                    ok = bool(rx.search(hay)) or bool(rx.search(l.command))
                else:  # pkill NAME / killall NAME: the process name, as pkill matches it
                    ok = bool(_compile(pattern, re.I).search(prog))
                if not ok and prog in ("npm", "pnpm", "yarn", "bun", "npx", "node"):
                    word = pattern.lower()
                    ok = any(re.search(rf"(?<![\w-]){re.escape(c)}(?![\w-])", word)
                             for c in self.k.script_children)
                if ok:
                    hit.append(l)
        elif kind == "container":
            names = [t for t in re.split(r"\s+", target) if t and not t.startswith("-")]
            for l in alive:
                if l.server not in ("docker",):
                    continue
                if "$(" in target or any(n in l.command for n in names):
                    hit.append(l)
        elif kind == "group":
            group = target.lower()
            for l in alive:
                if l.server and (l.server == group or l.server.startswith(group)):
                    hit.append(l)
        elif kind == "session":
            for l in alive:
                if l.server in ("tmux", "screen") and (not target or target in l.command):
                    hit.append(l)
        for l in dict.fromkeys(hit):
            l.end(clock, f"kill-{how}", f"killed by {where}", turn.ordinal)

    # -- results ---------------------------------------------------------------------------

    def _result(self, res: ToolResultTurn) -> None:
        k = self.k
        out = res.output or ""
        clock = (res.ordinal, 0, 0)
        call_info = self.session.call_for(res)
        call = call_info[1] if call_info else None
        if call and call.name in k.harness_poll_tools:
            handle = str(call.input.get(k.harness_poll_tools[call.name], ""))
            launch = self.by_handle.get(handle)
            if launch:
                self._poll(launch, res, out, clock)
            return
        for launch in self.code_polls.get(res.call_id, []):
            if launch.state is State.ENDED:
                continue
            if any(p.search(out) for p in k.background_ids):
                self._read_log(launch, out, clock, res.ordinal, running=True)
            else:
                launch.end(clock, "exit", f"its session no longer ran at {res.anchor}",
                           res.ordinal)
        launches = self.by_call.get(res.call_id, [])
        for launch in launches:
            launch.result = res.ordinal
            self._own_result(launch, res, out, clock)
        if call is not None and not launches:
            script = command_of(call)
            if script:
                self._probe_output(script, res, out, clock)
        elif call is not None and launches:
            script = command_of(call)
            if script and k.health and k.health.search(script):
                self._probe_output(script, res, out, clock)

    def _own_result(self, launch: Launch, res: ToolResultTurn, out: str, clock: Clock) -> None:
        k = self.k
        for pat in k.background_ids:
            m = pat.search(out)
            if m:
                launch.handles.add(m.group(1))
                self.by_handle[m.group(1)] = launch
        for pat in k.output_files:
            m = pat.search(out)
            if m:
                launch.logs.add(m.group(1))
                self.log_names.setdefault(m.group(1), []).append(launch)
        still_running = bool(launch.handles) or res.error == "tool call still running when " \
            "the session was saved"
        for pat in k.pid_patterns:
            for m in pat.finditer(out):
                launch.pids.add(int(m.group(1)))
        for pat in k.bound_ports:
            m = None
            for m in pat.finditer(out):
                pass
            if m:
                launch.port = int(m.group(1))
                launch.port_explicit = True
        conflict = bool(k.conflict and k.conflict.search(out))
        if conflict:
            self._conflict_port(launch, out)
        if conflict and not _moved_port(out, k):
            launch.conflict = True
            launch.end(clock, "conflict", f"its port was already taken ({res.anchor})",
                       res.ordinal)
            return
        if conflict:
            launch.conflict = launch.moved = True
        if (res.killed or (k.killed and k.killed.search(out))) and not res.timed_out:
            launch.killed_at_once = True
            launch.end(clock, "killed", "it was killed at once", res.ordinal)
            return
        foreground = not launch.background
        if foreground and not still_running:
            if res.timed_out:
                launch.end(clock, "timeout", "the harness killed it at its timeout", res.ordinal)
            elif res.aborted:
                launch.end(clock, "abort", "the user interrupted it", res.ordinal)
            else:
                code = f" with code {res.exit_code}" if res.exit_code is not None else ""
                launch.end(clock, "exit", f"its command returned{code}", res.ordinal)
            return
        if res.timed_out and not launch.detached:
            launch.end(clock, "timeout", "the harness killed its process group at the timeout",
                       res.ordinal)
            return
        self._read_log(launch, out, clock, res.ordinal)

    def _conflict_port(self, launch: Launch, out: str) -> None:
        """Note which port the output says was taken; it is the port the launch tried."""
        for pat in self.k.conflict_ports:
            m = pat.search(out)
            if m:
                launch.conflict_port = int(m.group(1))
                if launch.port is None:
                    launch.port = launch.conflict_port
                return

    def _poll(self, launch: Launch, res: ToolResultTurn, out: str, clock: Clock) -> None:
        """BashOutput / TaskOutput / write_stdin on a launch's handle."""
        status = re.search(r"<status>(\w+)</status>|\"status\":\s*\"(\w+)\"", out)
        word = (status.group(1) or status.group(2)).lower() if status else ""
        exited = re.search(r"Process exited with code (\d+)", out)
        if self.k.conflict and self.k.conflict.search(out):
            launch.conflict = True
            launch.moved = _moved_port(out, self.k)
            self._conflict_port(launch, out)
        for pat in self.k.background_ids:
            for m in pat.finditer(out):
                launch.handles.add(m.group(1))
                self.by_handle[m.group(1)] = launch
        if launch.state is State.ENDED:
            return
        if (word in ("completed", "failed", "killed", "exited") or exited) \
                and not launch.background:
            launch.end(clock, "exit", f"its task reported {word or 'exit'} ({res.anchor})",
                       res.ordinal)
            return
        running = word == "running" or "Process running with session ID" in out
        self._read_log(launch, out, clock, res.ordinal, running=running)

    def _read_log(self, launch: Launch, out: str, clock: Clock, ordinal: int,
                  running: bool = False) -> None:
        """What the launch's own output or log says; ``running``: the harness says it still is."""
        k = self.k
        if launch.state is State.ENDED:
            return
        if k.conflict and k.conflict.search(out) and not running:
            launch.conflict = True
            self._conflict_port(launch, out)
            if _moved_port(out, k):
                launch.moved = True
            else:
                launch.end(clock, "conflict", "its output showed its port was already taken",
                           ordinal)
                return
        last_up = _last(k.up, out)
        last_crash = _last(k.crash, out)
        if last_crash > last_up and not running:
            launch.end(clock, "crash", "its output showed it crashed", ordinal)
            return
        if last_up >= 0 and launch.state is State.ALIVE:
            launch.signals.append(Signal(clock, "output", ordinal, _line_at(out, last_up)))
        for pat in k.bound_ports:
            m = None
            for m in pat.finditer(out):
                pass
            if m:
                launch.port = int(m.group(1))

    def _probe_output(self, script: str, res: ToolResultTurn, out: str, clock: Clock) -> None:
        """Health checks, log reads and process listings after a launch."""
        k = self.k
        # log files of earlier launches
        for name, launches in self.log_names.items():
            if name in script and re.search(r"\b(?:tail|cat|head|less|grep|Get-Content|type)\b",
                                            script):
                for launch in launches:
                    if launch.state is State.ALIVE and launch.result is not None:
                        self._read_log(launch, out, clock, res.ordinal)
        for health_clock, port in self.health_calls.get(res.call_id, []):
            self._health(port, res, out, health_clock)
        if re.search(r"\b(?:lsof|pgrep|ps|ss|netstat)\b", script):
            self._pids_from_listing(script, out)

    def _health(self, port: int, res: ToolResultTurn, out: str, clock: Clock) -> None:
        k = self.k
        if res.exit_code not in (None, 0) or res.is_error or res.timed_out:
            return
        body = out.strip()
        if not body or (k.down and k.down.search(body)):
            return
        if not ((k.health_ok and k.health_ok.search(body)) or (k.up and k.up.search(body))):
            return
        candidates = [l for l in self.launches if l.port == port and l.clock < clock]
        if not candidates:
            return
        latest = candidates[-1]
        state, change = latest.state_before(clock)
        if latest.changes and latest.changes[-1].clock > clock:
            state = State.ENDED  # ended later in the same script: nothing to revive
        text = _short(body.splitlines()[0] if body.splitlines() else body, 60)
        if state is State.ALIVE:
            latest.signals.append(Signal(clock, "health", res.ordinal, text))
        elif change is not None and change.kind in ("kill-pid", "resume", "kill-unresolved",
                                                    "kill-harness"):
            latest.end(clock, "revived",
                       f"port {port} still answered at {res.anchor} after {change.reason}",
                       res.ordinal, State.ALIVE)
            latest.signals.append(Signal(clock, "health", res.ordinal, text))

    def _pids_from_listing(self, script: str, out: str) -> None:
        ports = {int(p) for p in re.findall(r":(\d{2,5})\b", script)}
        for line in out.splitlines()[:200]:
            nums = re.findall(r"(?:^|\s|pid=)(\d{2,7})(?=\s|,|$)", line)
            if not nums:
                continue
            pid = int(nums[0]) if not line.lstrip()[:1].isalpha() else int(nums[0])
            line_ports = {int(p) for p in re.findall(r":(\d{2,5})\b", line)} or ports
            for launch in self.launches:
                if launch.state is State.ENDED:
                    continue
                sig = _signature(launch)
                if (launch.port is not None and launch.port in line_ports) or \
                        (sig and sig in line):
                    launch.pids.add(pid)

    # -- users -----------------------------------------------------------------------------

    def _user(self, turn: UserTurn) -> None:
        k = self.k
        if not any(l.state is State.ALIVE for l in self.launches):
            return
        text = turn.text.strip()[:600]  # status words come early; long pastes cost, not help
        asks = bool(k.relaunch_request and k.relaunch_request.search(text))
        fails = bool(k.failure and k.failure.search(text))
        says_up = bool(k.user_up and k.user_up.search(text))
        question = "?" in text or "？" in text
        short = len(text) <= 40 and len(text.split()) <= 6 and not question
        clock = (turn.ordinal, 0, 0)
        for launch in self.launches:
            first = launch.seq not in self._user_seen_after and launch.result is not None
            if launch.result is not None:
                self._user_seen_after.add(launch.seq)
            if launch.state is not State.ALIVE or asks or fails:
                continue
            if says_up or (first and short and text):
                launch.signals.append(Signal(clock, "user", turn.ordinal, _short(text, 60)))


def server_of(command: str, know: Knowledge) -> str | None:
    """Name of the first server pattern the (stripped) command matches, or None."""
    for name, pat in know.servers:
        if pat.search(command):
            return name
    return None


def port_of(command: str, know: Knowledge, *, server: str | None = None,
            env: Mapping[str, str] | None = None) -> tuple[int | None, bool]:
    """The port a launch binds and whether the command says so explicitly.

    An explicit ``--port N`` / ``-p N`` / bind address / positional port wins, then ``PORT=N``
    from the environment prefix or an earlier ``export``, then the tool's well-known default.
    """
    for pat in know.port_patterns:
        m = pat.search(command)
        if m:
            value = next((g for g in m.groups() if g), None)
            if value and value.isdigit():
                return int(value), True
    port_env = (env or {}).get("PORT", "")
    if port_env.isdigit():
        return int(port_env), True
    if server is None:
        toks, prefix_env, _ = strip_command(command)
        if prefix_env.get("PORT", "").isdigit():
            return int(prefix_env["PORT"]), True
        server = server_of(" ".join(toks), know)
    if server and server in know.default_ports:
        return know.default_ports[server], False
    return None, False


def _assignments(script: str) -> dict[str, tuple[str, Any]]:
    out: dict[str, tuple[str, Any]] = {}
    for m in re.finditer(r"\b([A-Za-z_]\w*)=(\$!|\$\(([^)]*)\))", script):
        name, value, inner = m.group(1), m.group(2), m.group(3) or ""
        if value == "$!":
            out[name] = ("bg", None)
        elif "lsof" in inner or "fuser" in inner:
            pm = re.search(r":(\d{2,5})", inner)
            if pm:
                out[name] = ("port", int(pm.group(1)))
    return out


_CODE_STDIN = re.compile(r"write_stdin\(\s*(\{.*?\})\s*\)", re.S)


def _code_mode_stdin(code: str) -> list[tuple[str, str]]:
    """(session id, chars) of each ``tools.write_stdin({...})`` in a Codex code-mode cell."""
    import json

    out = []
    for m in _CODE_STDIN.finditer(code):
        try:
            args = json.loads(m.group(1))
        except ValueError:
            continue
        if isinstance(args, dict) and isinstance(args.get("chars"), str):
            out.append((str(args.get("session_id", "")), args["chars"]))
    return out


def _kill_target(target: str, kind: str) -> str:
    """The pattern or name a pkill/killall/Stop-Process aims at, flags and signals removed."""
    toks, _ = _tokens(target)
    words = []
    skip = False
    for t in toks:
        if skip:
            skip = False
            continue
        if t in ("-s", "-signal", "--signal", "-u", "-U", "-g", "-t", "-P", "/F", "/T", "-f"):
            skip = t not in ("-f", "/F", "/T")
            continue
        if t.startswith("-") or t.startswith("/") and len(t) <= 4:
            continue
        if t in ("2>/dev/null", "||", "true", "|"):
            break
        if t.startswith(("2>", ">", "&")):
            break
        words.append(t)
    name = words[0] if words else ""
    if kind == "name" and name.lower().endswith(".exe"):
        name = name[:-4]
    return name


def _moved_port(out: str, k: Knowledge) -> bool:
    """The server noticed the taken port and came up on another one (Next.js, Vite)."""
    return bool(re.search(r"trying (?:\d+|another one)|using (?:port )?\d+ instead", out, re.I))


def _last(pattern: re.Pattern[str] | None, text: str) -> int:
    if pattern is None:
        return -1
    pos = -1
    for m in pattern.finditer(text):
        pos = m.start()
    return pos


def _line_at(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return _short(text[start:end if end >= 0 else None].strip(), 60)


def _signature(launch: Launch) -> str:
    """A piece of the launch's command that a process listing line would show."""
    toks = launch.normalized.split()
    if not toks:
        return ""
    if launch.server and len(toks) >= 2:
        for i, t in enumerate(toks):
            if launch.server.split("-")[0] in t.lower():
                return t.strip("'")
    return " ".join(toks[:2]).strip("'") if len(toks) > 1 else ""


def track(session: Session, know: Knowledge) -> list[Launch]:
    """Every long-running launch in ``session``, with its state changes and up signals."""
    return Tracker(session, know).run()
