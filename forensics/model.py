"""The typed turn model every layer shares.

A session is an ordered list of turns. Every reader (opencode, Claude Code, Codex) produces this
shape and nothing else, so rules, reports and frames never look at a native record. Four kinds:

* ``UserTurn``: words the human typed (never harness-injected text).
* ``AssistantTurn``: one assistant message: visible text, reasoning, tool calls, provider error.
* ``ToolResultTurn``: the outcome of one tool call (output, exit status, error/killed/timeout).
* ``EventTurn``: what the harness did: abort, provider error, retry, compaction, interrupt,
  injected text, a shell command the user ran, a background-task notification.

Every turn carries its 1-based ``ordinal`` and an ``anchor`` a reviewer can jump to: the native
message id where the format has one (opencode ``msg_…``, Claude Code line ``uuid``, Gemini CLI
message ``id``…; ``docs/formats.md`` lists each format's anchor), otherwise ``L<line>`` (Codex
rollouts).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any, Literal, Union

Agent = Literal["opencode", "claude-code", "codex", "gemini-cli", "qwen-code", "cline", "roo-code",
                "kilo-code", "pi", "copilot-cli"]

EventName = Literal[
    "abort",  # the user stopped the turn (opencode MessageAbortedError, Codex turn_aborted)
    "interrupt",  # Claude Code "[Request interrupted by user…]"
    "api_error",  # a provider error the user was shown
    "retry",  # the harness retried a provider call
    "compaction",  # context compacted / summarised
    "injected",  # harness-injected text: reminders, caveats, environment context, hook output
    "shell",  # a command the user ran in their own shell (Claude Code <bash-input>, opencode shell)
    "notification",  # background-task notification about a wrapper shell
    "command",  # a local slash command's output (<local-command-stdout>)
    "session_start",  # session metadata / resume marker
    "turn_complete",  # the harness closed a turn (Codex task_complete)
    "other",
]


HTML_VIEW: list[Any] = []
"""The session HTML view a higher layer registers (``forensics.notebook.session_html``)."""

NO_CONTENT = "(no content)"
"""Claude Code's placeholder for a message with nothing in it; never visible text."""


class Record:
    """What every record of the shared types shares: its JSON form (turns here, findings and
    their evidence in ``forensics.findings``).

    Records are slots dataclasses, not pydantic models: a session is tens of thousands of
    them, built several times faster and held in a fraction of the memory
    (``docs/performance.md``, "Turn model as slots classes"). Readers build them from values
    they have already typed: unknown field names still fail at construction, types are not
    checked (``tests/welltyped.py`` checks what the readers build from hostile input)."""

    __slots__ = ()

    def dump(self, *, exclude: frozenset[str] = frozenset()) -> dict[str, Any]:
        """The record as JSON-ready data: fields in declaration order but those in
        ``exclude``, nested records as dicts, lists and dicts copied (what ``forensics turns
        --format json`` prints)."""
        return {f.name: _dumped(getattr(self, f.name)) for f in fields(self)  # type: ignore
                if f.name not in exclude}


def _dumped(value: Any) -> Any:
    if isinstance(value, Record):
        return value.dump()
    if isinstance(value, list):
        return [_dumped(v) for v in value]
    if isinstance(value, dict):
        return {k: _dumped(v) for k, v in value.items()}
    return value


_record = dataclass(slots=True, kw_only=True)
"""Every record's decorator: keyword-only, so a misspelt or missing field fails where built."""


@_record
class ToolCall(Record):
    """One tool invocation inside an assistant message."""

    call_id: str
    name: str
    input: dict[str, Any] = field(default_factory=dict)
    command: str | None = None
    """The shell command line, when the tool runs one (bash, Bash, shell, exec_command…)."""
    background: bool = False
    """Sent to the background by the harness itself (Claude Code ``run_in_background``)."""
    anchor: str
    """Anchor of the message (or line) that holds the call."""


@_record
class ProviderError(Record):
    name: str
    message: str = ""


@_record
class _TurnBase(Record):
    ordinal: int
    anchor: str
    line: int | None = None
    """1-based line in the source file, when the source is line-oriented."""
    file: str | None = None
    """Source file of this turn when it differs from the session's (storage trees)."""
    time: float | None = None
    """Unix time in seconds."""


@_record
class UserTurn(_TurnBase):
    kind: Literal["user"] = field(default="user", init=False)
    text: str
    command: str | None = None
    """Slash command or skill name when the message invoked one (``/review``)."""
    arguments: str | None = None
    """What the user typed after the slash command; compare this, not the expanded template."""
    queued: bool = False
    """Typed while the assistant was busy (Claude Code ``queued_command``)."""
    images: int = 0


@_record
class AssistantTurn(_TurnBase):
    kind: Literal["assistant"] = field(default="assistant", init=False)
    message_id: str | None = None
    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    model: str | None = None
    finish: str | None = None
    """Finish / stop reason as the format names it (``stop``, ``tool-calls``, ``end_turn``…)."""
    error: ProviderError | None = None
    aborted: bool = False
    """The user aborted this reply while it was being produced."""
    tokens_in: int | None = None
    tokens_out: int | None = None
    part_kinds: list[str] = field(default_factory=list)
    """Native part / block types seen, in order (for reviewers and the empty-response rule)."""
    sidechain: bool = False

    @property
    def visible(self) -> bool:
        """Did the user see anything: non-blank text or a tool call."""
        if self.tool_calls:
            return True
        text = self.text.strip()
        return bool(text) and text != NO_CONTENT


@_record
class ToolResultTurn(_TurnBase):
    kind: Literal["tool_result"] = field(default="tool_result", init=False)
    call_id: str
    name: str = ""
    output: str = ""
    """Output as the agent saw it; very long outputs keep head and tail."""
    exit_code: int | None = None
    is_error: bool = False
    """The format itself flagged the call as failed (opencode ``status:error``, ``is_error``)."""
    error: str | None = None
    """The error text the harness recorded, when separate from the output."""
    killed: bool = False
    """Ended by a signal (opencode ``metadata.exit: null``), or output says ``Killed``."""
    timed_out: bool = False
    aborted: bool = False
    """Aborted or rejected by the user; the assistant had no chance to react."""
    duration_ms: float | None = None
    status_in_text: bool = False
    """The format recorded no status for this call, so only its output's text can say it failed
    (Codex code-mode cells and custom tools, Cline command results without an exit code)."""

    @property
    def failed(self) -> bool:
        """What the format's own status says: an error flag, a signal, a timeout, a non-zero exit.

        Rules add judgement on top (probes, death reported only in the output); this is the raw
        status every table, figure and count shares.
        """
        return bool(self.is_error or self.killed or self.timed_out
                    or self.exit_code not in (None, 0))


@_record
class EventTurn(_TurnBase):
    kind: Literal["event"] = field(default="event", init=False)
    event: EventName
    text: str = ""
    detail: dict[str, Any] = field(default_factory=dict)


Turn = Union[UserTurn, AssistantTurn, ToolResultTurn, EventTurn]
"""A turn of any kind; ``kind`` names which (set by the class, never passed)."""


@_record
class ReadIssue(Record):
    """Something in the source that could not be read as expected; scanning went on."""

    path: str
    line: int | None = None
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.message}"


@dataclass(kw_only=True)
class Session(Record):
    """One transcript as typed turns, with the navigation helpers rules and reports share.

    A plain dataclass (not slots: the indexes below are cached on the instance)."""

    id: str
    agent: Agent
    format: str
    """Reader that produced it: ``opencode-export``, ``opencode-storage``, ``claude-code``…"""
    source: str
    agent_version: str | None = None
    models: list[str] = field(default_factory=list)
    project_dir: str | None = None
    title: str | None = None
    parent_id: str | None = None
    """Set for subagent / child sessions."""
    started: float | None = None
    ended: float | None = None
    turns: list[Turn] = field(default_factory=list)
    issues: list[ReadIssue] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What the format cannot show (e.g. ``run --format json`` has no user messages)."""

    # -- navigation helpers used by rules and reports -------------------------------------

    @cached_property
    def _calls_by_id(self) -> dict[str, tuple[AssistantTurn, ToolCall]]:
        index: dict[str, tuple[AssistantTurn, ToolCall]] = {}
        for turn in self.turns:
            if isinstance(turn, AssistantTurn):
                for call in turn.tool_calls:
                    index.setdefault(call.call_id, (turn, call))
        return index

    @cached_property
    def _results_by_id(self) -> dict[str, ToolResultTurn]:
        return {t.call_id: t for t in self.turns if isinstance(t, ToolResultTurn)}

    def call_for(self, result: ToolResultTurn) -> tuple[AssistantTurn, ToolCall] | None:
        """The assistant turn and call that a tool result answers."""
        return self._calls_by_id.get(result.call_id)

    def result_for(self, call: ToolCall) -> ToolResultTurn | None:
        return self._results_by_id.get(call.call_id)

    def turn(self, ordinal: int) -> Turn:
        return self.turns[ordinal - 1]

    def turns_after(self, ordinal: int) -> Iterator[Turn]:
        """The turns after ``ordinal``, in order. Unlike ``turns[ordinal:]`` nothing is copied,
        so a look-ahead that stops at the next message costs what it reads, not the rest of
        the session (which made rules quadratic in session length)."""
        turns = self.turns
        for i in range(max(ordinal, 0), len(turns)):
            yield turns[i]

    def turns_before(self, ordinal: int) -> Iterator[Turn]:
        """The turns before ``ordinal``, latest first, without copying (see ``turns_after``)."""
        turns = self.turns
        for i in range(min(ordinal - 2, len(turns) - 1), -1, -1):
            yield turns[i]

    def by_anchor(self, anchor: str) -> Turn | None:
        for t in self.turns:
            if t.anchor == anchor:
                return t
        return None

    def _repr_html_(self) -> str:
        """A compact table in Jupyter: the view ``forensics.notebook`` registers (the model
        sits below the notebook layer and does not import it)."""
        if HTML_VIEW:
            return HTML_VIEW[0](self)
        from html import escape

        return f"<pre>{escape(repr(self)[:2000])}</pre>"

    def counts(self) -> dict[str, int]:
        """Per-kind counts, plus tool calls and failed tool results."""
        out = {"user": 0, "assistant": 0, "tool_result": 0, "event": 0, "tool_calls": 0,
               "failed_tools": 0}
        for t in self.turns:
            out[t.kind] += 1
            if isinstance(t, AssistantTurn):
                out["tool_calls"] += len(t.tool_calls)
            elif isinstance(t, ToolResultTurn) and t.failed:
                out["failed_tools"] += 1
        return out


def renumber(turns: list[Any]) -> None:
    """Give turns their 1-based ordinals in list order (readers build, then renumber)."""
    for i, t in enumerate(turns, 1):
        t.ordinal = i
