"""FX006 retry-loop: the same failing step, again and again.

Calls are compared on their normalised command (whitespace, environment prefixes, wrappers and
redirections taken off) or, for other tools, their name and input; failures on their kind (the
first error line with numbers folded, else the status). A loop breaks when anything between two
runs could have changed the outcome: a call that is not read-only (an edit, an install, a
kill, a config change, any command not known to only read), a wait, a user message, or a
different command. Polling commands and loops that end in a pass (a flaky step) are not loops.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from forensics.findings import Evidence, Finding
from forensics.model import AssistantTurn, Session, UserTurn
from forensics.rules import rule
from forensics.rules._facts import Run, compile_all, failure_kind, normalized_command, outcome, runs
from forensics.analysis.commands import program
from forensics.analysis.phrases import compile_later
from forensics.analysis.shell import split_commands
from forensics.analysis.text import shorten


@dataclass(frozen=True)
class RetryLoopParams:
    """FX006's ``[params]``, compiled once per parameter set."""

    param_names: ClassVar[frozenset[str]] = frozenset({
        "min_runs", "high_runs", "polling_patterns", "probe_programs", "read_only_programs",
        "read_only_tools", "read_only_patterns", "error_line_patterns",
    })
    min_runs: int
    high_runs: int
    polling: tuple[re.Pattern[str], ...]
    probes: frozenset[str]
    readers: frozenset[str]
    """Programs known to only read."""
    tools: frozenset[str]
    """Non-shell tools known to only read (lower-cased)."""
    read_only: tuple[re.Pattern[str], ...]
    error_line: re.Pattern[str]

    @classmethod
    def from_params(cls, raw: Mapping[str, Any]) -> "RetryLoopParams":
        return cls(
            min_runs=raw["min_runs"],
            high_runs=raw["high_runs"],
            polling=tuple(compile_all(raw["polling_patterns"])),
            probes=frozenset(raw["probe_programs"]),
            readers=frozenset(raw["read_only_programs"]),
            tools=frozenset(t.lower() for t in raw["read_only_tools"]),
            read_only=tuple(compile_all(raw["read_only_patterns"])),
            error_line=compile_later("|".join(f"(?:{p})" for p in raw["error_line_patterns"]),
                                     re.M | re.I),
        )


@rule("FX006")
def retry_loop(session: Session, params: RetryLoopParams) -> Iterator[Finding]:
    p = params
    min_runs, high_runs, polling, probes = p.min_runs, p.high_runs, p.polling, p.probes
    readers, tools, read_only, error_line = p.readers, p.tools, p.read_only, p.error_line
    all_runs = runs(session)
    loop: list[tuple[Run, str]] = []
    key: tuple[str, str] | None = None
    last_user = 0

    def finish() -> Iterator[Finding]:
        if len(loop) >= min_runs:
            yield _finding(session, loop, high_runs)

    for run in all_runs:
        user_between = _user_between(session, last_user, run.turn.ordinal)
        last_user = run.turn.ordinal
        state = outcome(run.result)
        identity = _identity(run) if (loop or (state is not None and not state.passed)) else ""
        if loop and user_between:
            yield from finish()
            loop, key = [], None
        if state is None:  # aborted or never came back: neither a failure nor a change
            continue
        if not state.passed and identity and not _is_polling(run, polling, probes):
            kind = failure_kind(run.result, error_line)
            if key == (identity, kind):
                loop.append((run, kind))
                continue
            yield from finish()
            loop, key = [(run, kind)], (identity, kind)
            continue
        if loop and identity == key[0] and state.passed:
            loop, key = [], None  # passed on a rerun: flaky, not a loop
            continue
        if loop and not _read_only(run, readers, tools, read_only):
            yield from finish()
            loop, key = [], None
    yield from finish()


def _user_between(session: Session, after: int, before: int) -> bool:
    return any(isinstance(t, UserTurn) for t in session.turns[after:before - 1])


def _identity(run: Run) -> str:
    if run.command:
        return normalized_command(run.command)
    return f"{run.call.name}:{orjson.dumps(run.call.input, option=orjson.OPT_SORT_KEYS).decode()}"


def _is_polling(run: Run, polling, probes) -> bool:
    if not run.command:
        return False
    if any(p.search(run.command) for p in polling):
        return True
    simple = split_commands(run.command)
    return bool(simple) and program(simple[-1])[0] in probes


def _read_only(run: Run, readers, tools, patterns) -> bool:
    """A call known to change nothing the failing step depends on."""
    if run.command is None:
        return run.call.name.lower() in tools
    for simple in split_commands(run.command):
        prog, _args = program(simple)
        if prog in readers or any(p.search(simple) for p in patterns):
            if re.search(r"(?<![<>&\d])>(?!&)|\bsed\s+-i\b|\btee\b", simple):
                return False  # writes a file after all
            continue
        return False
    return True


def _finding(session: Session, loop: list[tuple[Run, str]], high_runs: int) -> Finding:
    third = loop[min(2, len(loop) - 1)][0]
    count = len(loop)
    last = loop[-1][0]
    after = last.result.ordinal if last.result is not None else last.turn.ordinal
    told = _told_user(session, after)
    if count >= high_runs:
        severity, reason = "high", f"the same failing run {count} times"
    elif not told:
        severity, reason = "high", "the loop ended the turn or the session without a word to the user"
    else:
        severity, reason = "medium", f"the same failing run {count} times, then the assistant said so"
    what = f"`{shorten(third.command, 80)}`" if third.command else f"the {third.call.name} call"
    facts = []
    for i, (run, kind) in enumerate(loop, 1):
        state = outcome(run.result)
        facts.append(Evidence(kind="failure", role=f"run {i} of {count}", turn=run.turn.ordinal,
                              anchor=run.call.anchor, command=run.command or run.call.name,
                              status=state.status if state is not None else None,
                              quote=shorten(kind, 160)))
    return Finding(turn=third.turn.ordinal, anchor=third.call.anchor, severity=severity,
                   severity_reason=reason,
                   evidence=[r.turn.ordinal for r, _k in loop if r is not third],
                   message=f"{what} failed the same way {count} times in a row with nothing "
                           f"changed between the runs ({shorten(loop[0][1], 70)}).", facts=facts)


def _told_user(session: Session, ordinal: int) -> bool:
    """Before the user writes again, does a later assistant message say anything at all."""
    for later in session.turns_after(ordinal):
        if isinstance(later, UserTurn):
            return False
        if isinstance(later, AssistantTurn) and later.text.strip():
            return True
    return False
