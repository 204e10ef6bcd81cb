"""How each tool result ended: the one place that says ok, failed how, probe, aborted, timed out.

The format's own status comes first (aborted, timed out, killed by a signal, a non-zero exit, an
error flag); then output that plainly reports death; then, for a rule that knows them, probes
(a result that did not end well, from a command whose non-zero exit answers a question) and
status lines reported only in the text. A rule
with its own lists passes them as ``OutcomeRules``; everyone else gets the shared ones
(``rules/analysis.toml``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, partial
from typing import Literal

from forensics import knowledge_cache
from forensics.analysis.knowledge import shared
from forensics.analysis.phrases import compile_later
from forensics.analysis.text import edges, shorten
from forensics.model import ToolResultTurn

OutcomeKind = Literal["ok", "failed", "probe", "aborted", "timed_out"]
Cause = Literal["", "death", "signal", "exit", "error", "text", "timeout", "abort"]


@dataclass(frozen=True)
class Outcome:
    """How one tool result ended, and the words that show it."""

    kind: OutcomeKind
    cause: Cause = ""
    """Why it failed: death in the output, a signal, an exit status, an error flag, a status
    line in the text; ``timeout`` / ``abort`` for those kinds."""
    words: str = ""
    """The words that prove it: the death line, the status line, the error text."""
    exit_code: int | None = None

    @property
    def failed(self) -> bool:
        """Failed or timed out (aborted and probes are not failures)."""
        return self.kind in ("failed", "timed_out")

    def status(self) -> str:
        """How it ended in one or two words (``killed``, ``timed out``, ``exit 1``, ``error``);
        empty when it did not fail."""
        if self.kind in ("aborted", "timed_out"):
            return {"aborted": "aborted", "timed_out": "timed out"}[self.kind]
        return {"death": "killed", "signal": "killed", "exit": f"exit {self.exit_code}",
                "error": "error", "text": "failed"}.get(self.cause, "")

    def describe(self) -> str:
        """How it ended, as a verb phrase: ``exited with status 1``, ``was killed by a signal``."""
        if self.kind == "aborted":
            return "was aborted"
        if self.kind == "timed_out":
            return "was killed at the harness timeout"
        if self.cause == "death":
            return f"output reports `{self.words}`"
        if self.cause == "signal":
            return "was killed by a signal"
        if self.cause == "exit":
            return f"exited with status {self.exit_code}"
        if self.cause == "error":
            return f"failed: {shorten(self.words, 80)}" if self.words.strip() else "failed"
        if self.cause == "text":
            return f"reported `{shorten(self.words, 60)}`"
        if self.kind == "probe":
            return "answered a probe"
        return "succeeded" if self.exit_code == 0 else "came back"


@dataclass(frozen=True)
class OutcomeRules:
    """A rule's own lists for judging results (defaults: the shared death list only)."""

    death: re.Pattern[str] | None
    death_gate: Callable[[str], bool] | None = None
    """A test every output a ``death`` pattern finds itself in passes (a rule's, from its
    patterns' needles): an output that fails it is not searched, one that passes is searched
    whole. None: the head and tail of every output are searched."""
    exit_text: re.Pattern[str] | None = None
    exit_gate: Callable[[str], bool] | None = None
    """A test every text an ``exit_text`` pattern finds itself in passes; a text that fails it
    is not searched (speed: a case-insensitive alternation that opens with ``\\b`` gives
    ``re`` no literal to skip to, so it is tried at every position). None: always searched."""
    failure_text: re.Pattern[str] | None = None
    is_probe: Callable[[str], bool] | None = None


@cache
def shared_rules() -> OutcomeRules:
    return OutcomeRules(death=any_of(shared()["death_patterns"]))


def any_of(patterns: Sequence[str]) -> re.Pattern[str] | None:
    """One multiline regex from many; a leading ``(?i)`` stays local to its pattern."""
    alts = []
    for p in patterns:
        p = p.removeprefix("(?m)")
        alts.append(f"(?i:{p[4:]})" if p.startswith("(?i)") else f"(?:{p})")
    return compile_later("|".join(alts), re.MULTILINE) if alts else None


def outcome(result: ToolResultTurn, command: str | None = None,
            rules: OutcomeRules | None = None) -> Outcome:
    """How ``result`` ended. ``command``: the script its call ran (for probes). Failure lines
    in the text count only where the format recorded no status (``result.status_in_text``)."""
    rules = rules or shared_rules()
    if result.aborted:
        return Outcome("aborted", "abort")
    text = result.error or result.output
    output = result.output
    if output and rules.death is not None and (
            rules.death_gate is None or rules.death_gate(output)):
        # without a gate, look where a death line stands: head and tail
        died = rules.death.search(output if rules.death_gate else edges(output, 4000))
        if died:
            return Outcome("failed", "death", died.group(0).strip(), result.exit_code)
    status = _status(result, text, rules)
    if status.kind != "ok" and command and rules.is_probe is not None and rules.is_probe(command):
        # asked only of a result that did not end well: a probe that came back ok is ok
        return Outcome("probe", exit_code=result.exit_code)
    return status


def _status(result: ToolResultTurn, text: str, rules: OutcomeRules) -> Outcome:
    """How the result ended by its status and, where the format has none, its status line."""
    if result.timed_out:
        return Outcome("timed_out", "timeout", exit_code=result.exit_code)
    if result.killed:
        return Outcome("failed", "signal", exit_code=result.exit_code)
    if result.exit_code not in (None, 0):
        return Outcome("failed", "exit", exit_code=result.exit_code)
    if result.is_error:
        return Outcome("failed", "error", text)
    if result.exit_code is None and text and (rules.exit_text or rules.failure_text):
        # a harness's status line sits at the start or the end of the output
        ends = text if len(text) <= 1200 else f"{text[:600]}\n{text[-600:]}"
        m = (rules.exit_text.search(ends) if rules.exit_text and (
            rules.exit_gate is None or rules.exit_gate(ends)) else None) or (
            result.status_in_text and rules.failure_text and rules.failure_text.search(text))
        if m:
            return Outcome("failed", "text", m.group(0).strip())
    return Outcome("ok", exit_code=result.exit_code)


@cache
def _telling() -> re.Pattern[str] | None:
    return any_of(shared()["telling_patterns"])


@cache
def _may_tell() -> Callable[[str], bool]:
    """Does an output hold one of the texts every telling line holds as written (the telling
    patterns' needles, ``ledger.needles_of``)? One without any has no telling line."""
    from forensics.analysis.ledger import holds_cased_needle, needles_of  # imports this module

    return partial(holds_cased_needle, needles_of(shared()["telling_patterns"], re.M,
                                                  cased=True))


_REMINDER = knowledge_cache.compile(r"<system-reminder>.*?(?:</system-reminder>|\Z)", re.S)
# harness wrappers such as </shell_metadata>
_TAG_ONLY = knowledge_cache.compile(r"^\s*</?[\w:-]+>\s*$")
_THREE_WORD_CHARS = knowledge_cache.compile(r"\w\W*\w\W*\w")
"""A line with three word characters or more: the first three, and what stands between them
(``len(re.findall(r"\\w", line)) >= 3`` without a list of every one, over every output line)."""


def telling_lines(text: str, limit: int = 3, *, fallback: int | None = None) -> list[str]:
    """The lines of an output that report the failure, or its last ``fallback`` lines (default
    ``limit``, at least 1) if none do. Harness reminders appended to outputs are not the
    tool's words."""
    if limit < 1 or (fallback is not None and fallback < 0):
        raise ValueError(f"telling_lines needs limit >= 1 and fallback >= 0, not {limit}, "
                         f"{fallback}")
    text = text or ""
    if "<system-reminder>" in text:
        text = _REMINDER.sub("", text)
    want = fallback or limit
    telling = _telling()
    may_tell = telling is not None and _may_tell()(text)
    # From the last line back, until ``limit`` lines tell (or, in an output that cannot
    # tell, until the last ``want`` lines are found): the lines filtering every line would
    # keep, without reading a long output's head for them.
    hits: list[str] = []
    tail: list[str] = []  # the last ``want`` lines kept, for an output where none tells
    for raw in reversed(text.splitlines()):
        if not _THREE_WORD_CHARS.search(raw) or _TAG_ONLY.match(raw):
            continue
        line = raw.rstrip()
        if len(tail) < want:
            tail.append(line)
        if not may_tell:
            if len(tail) == want:
                break
        elif telling.search(line):
            hits.append(line)
            if len(hits) == limit:
                break
    return [shorten(ln, 200) for ln in reversed(hits or tail)]
