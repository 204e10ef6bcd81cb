"""Facts about a session that the "did it really work?" rules (FX005-FX008) establish.

Kept in one small module so that they can move into the shared analysis later: what a command
checks (tests, build, lint, …) and whether its run passed, which files an edit touched, and how
a failure reads. Word lists are matched by ``forensics.analysis.phrases``, as in every rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from forensics import knowledge_cache
from forensics.analysis.session import Run, analysis_of
from forensics.model import AssistantTurn, Session, ToolCall, ToolResultTurn, Turn, UserTurn
from forensics.analysis.phrases import compile_later
from forensics.analysis.session_cache import per_session
from forensics.analysis.shell import FILE_KEYS, command_of, split_commands

# -- words ------------------------------------------------------------------------------------


_LEAD = knowledge_cache.compile(r"^[\s>*_`'\"“”‘’«»(\[@#-]+")


def opening(text: str, size: int = 120) -> str:
    """The first words of a message, lower-cased, without quote marks or markdown."""
    return _LEAD.sub("", text.strip()[:size].lower())


_QUESTION_END = knowledge_cache.compile(r"[?？]\s*[)\]*_`'\"]*\s*$")


SIGN_OFF_CHARS = 100
"""A last paragraph this short that asks nothing (a sign-off, a signature quote) does not hide
the question in the paragraph before it."""


def asks_question(text: str) -> bool:
    """Does the text end by asking the user something (its last paragraph ends with ``?``, or
    the one before a short sign-off does)."""
    paragraphs = [p.strip() for p in text.strip().split("\n\n") if p.strip()]
    for i, tail in enumerate(reversed(paragraphs[-2:])):
        if _QUESTION_END.search(tail):
            return True
        last_line = tail.splitlines()[-1] if tail else ""
        if _QUESTION_END.search(last_line):
            return True
        if i == 0 and len(tail) > SIGN_OFF_CHARS:
            return False  # a long last paragraph is the message's end, not a sign-off
    return False


# -- the exchange before a user message ---------------------------------------------------------


def exchange_before(session: Session, user: UserTurn) -> list[Turn]:
    """Turns between the previous message the user typed and this one."""
    out: list[Turn] = []
    for prev in session.turns_before(user.ordinal):
        if isinstance(prev, UserTurn):
            break
        out.append(prev)
    out.reverse()
    return out


def commands(turn: AssistantTurn) -> list[tuple[ToolCall, str]]:
    return [(c, cmd) for c in turn.tool_calls if (cmd := command_of(c))]


def matches_any(patterns: Sequence[re.Pattern[str]], text: str) -> bool:
    return any(p.search(text) for p in patterns)


def compile_all(patterns: Iterable[str]) -> list[re.Pattern[str]]:
    return [compile_later(p, re.I | re.M) for p in patterns]






@dataclass(frozen=True)
class Outcome:
    """How a run ended, from the format's own status."""

    passed: bool
    why: str
    status: str
    """The same in the evidence's words: ``ok``, ``exit N``, ``killed``, ``timed out``,
    ``error`` (the vocabulary of ``forensics.analysis.outcome.Outcome.status``)."""


def outcome(result: ToolResultTurn | None) -> Outcome | None:
    if result is None or result.aborted:
        return None
    if result.timed_out:
        return Outcome(False, "timed out", "timed out")
    if result.killed:
        return Outcome(False, "was killed", "killed")
    if result.exit_code not in (None, 0):
        return Outcome(False, f"exited {result.exit_code}", f"exit {result.exit_code}")
    if result.is_error:
        return Outcome(False, "failed", "error")
    return Outcome(True, "passed", "ok")




# -- runs of tool calls ---------------------------------------------------------------------------


def runs(session: Session) -> list[Run]:
    """Every tool call in order, with its result (None when it never came back): the session's
    shared list (``Analysis.runs``, made once for every rule that reads it; do not change it)."""
    return analysis_of(session).runs


@per_session(maxsize=4096)
def normalized_command(command: str) -> str:
    """A script in comparable form: per pipeline, whitespace folded and environment prefixes,
    wrappers and redirections taken off (the typed command of ``forensics.analysis``)."""
    from forensics.analysis.commands import parse_script

    return " ; ".join(" ".join(c.tokens) for c in parse_script(command) if c.tokens)


_DIGITS = knowledge_cache.compile(r"\d+")
_HEX = knowledge_cache.compile(r"\b0x[0-9a-f]+\b|\b[0-9a-f]{8,}\b", re.I)


def failure_kind(result: ToolResultTurn, error_line: re.Pattern[str]) -> str:
    """What kind of failure a result reports: its first error line with numbers, hex ids and
    quoted values folded, else its status."""
    text = result.error or result.output or ""
    m = error_line.search(text[:4000]) or error_line.search(text[-4000:])
    if m:
        line = m.group(0).strip()[:160]
        return _DIGITS.sub("N", _HEX.sub("H", line))
    if result.timed_out:
        return "timed out"
    if result.killed:
        return "killed"
    return f"exit {result.exit_code}" if result.exit_code is not None else "error"


# -- what a command checks, and what an edit touched ------------------------------------------------


@lru_cache(maxsize=1)
def launch_knowledge():
    """What starts a server, from the duplicate-launch rule file (one list for every rule)."""
    from forensics.analysis.ledger import Knowledge
    from forensics.rules import registry

    return Knowledge.build(**registry()["FX002"].params)


def check_kinds(command: str, patterns: Mapping[str, Sequence[re.Pattern[str]]],
                server_kind: str | None = "server") -> set[str]:
    """The kinds of check (test, build, lint, …) a script runs, per simple command."""
    from forensics.analysis.commands import parse
    from forensics.analysis.ledger import server_of

    kinds: set[str] = set()
    matchers = [(kind, _any_of(tuple(pats))) for kind, pats in patterns.items()]  # once a call
    for simple in split_commands(command):
        bare = " ".join(parse(simple).tokens) or simple  # env prefixes, wrappers, redirects
        forms = {simple: None, bare: None, _RUNNER.sub("", bare, count=1): None}  # distinct
        one_line = "\n" not in simple and "\n" not in bare  # the third form is bare's tail
        for kind, matcher in matchers:
            if kind not in kinds and matcher.finds(forms, one_line):
                kinds.add(kind)
    if server_kind and server_kind not in kinds and server_of(command, launch_knowledge()):
        kinds.add(server_kind)
    return kinds


class _AnyOf:
    """Does any of a list of patterns find itself in a text: the answer of trying each pattern's
    ``search`` in turn, from one alternation (one regex call instead of one per pattern).

    Patterns whose matches can only begin where a line begins (the first item at the top level
    is ``^``, any line's start under ``re.M``, re knowing only ``\\n`` as a line break, or
    ``\\A``) are only tried at the start of a text of one line. An alternation of the patterns
    finds a match wherever one of them does; it is used only where it means the same: one set
    of flags (not verbose: a comment would swallow the rest), no reference to a group by
    number (``\\1``, ``(?(1)…)``), which the joining would renumber, and where it compiles (a
    pattern's own global flags do not)."""

    def __init__(self, patterns: Sequence[re.Pattern[str]]) -> None:
        self.line_start = _alternation([p for p in patterns if _anchored(p)])
        self.anywhere = _alternation([p for p in patterns if not _anchored(p)])

    def finds(self, forms: Iterable[str], one_line: bool) -> bool:
        for pattern in self.line_start:
            find = pattern.match if one_line else pattern.search
            if any(find(form) for form in forms):
                return True
        return any(p.search(form) for p in self.anywhere for form in forms)


@lru_cache(maxsize=256)
def _any_of(patterns: tuple[re.Pattern[str], ...]) -> _AnyOf:
    return _AnyOf(patterns)


_GROUP_NUMBER = knowledge_cache.compile(r"\\\d|\(\?\(")


def _alternation(patterns: list[re.Pattern[str]]) -> tuple[re.Pattern[str], ...]:
    """One regex for the patterns when it answers as they do, else the patterns themselves."""
    if len(patterns) < 2 or len({p.flags for p in patterns}) > 1 or patterns[0].flags & re.X \
            or any(_GROUP_NUMBER.search(p.pattern) for p in patterns):
        return tuple(patterns)
    try:
        return (knowledge_cache.compile("|".join(f"(?:{p.pattern})" for p in patterns),
                                        patterns[0].flags),)
    except re.error:
        return tuple(patterns)


def _anchored(pattern: re.Pattern[str]) -> bool:
    from re import _constants, _parser  # the parser re itself compiles with

    try:
        items = _parser.parse(pattern.pattern, pattern.flags).data
    except Exception:  # noqa: BLE001 - an unknown shape is tried everywhere, as before
        return False
    return bool(items) and items[0][0] is _constants.AT and items[0][1] in (
        _constants.AT_BEGINNING, _constants.AT_BEGINNING_STRING)


_RUNNER = knowledge_cache.compile(
    r"^(?:npx|bunx|pnpx|pnpm\s+(?:exec|dlx)|yarn\s+(?:exec|dlx)|pnpm|yarn|bun"
    r"|poetry\s+run|uv\s+run|pipenv\s+run|pdm\s+run|bundle\s+exec)\s+(?:--\S+\s+)*")
"""A package runner in front of the tool it runs (``pnpm vitest``, ``uv run pytest``)."""

_PATCH_FILE = knowledge_cache.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", re.M)
_REDIRECT_TARGET = knowledge_cache.compile(r"(?<![<>&\d=-])>>?\s*([^\s;&|>()'\"]+)")
_SED_I = knowledge_cache.compile(r"^sed\s+-i")
_SED_INPLACE = knowledge_cache.compile(r"\bsed\s+-i\S*\s+.*?(\S+)\s*$")


def edited_files(call: ToolCall, edit_tools: frozenset[str]) -> list[str] | None:
    """Files a call writes, or None when it writes nothing known. ``[]``: an edit, file unknown."""
    name = call.name.lower()
    if name in edit_tools:
        files = [v for k in FILE_KEYS if isinstance(v := call.input.get(k), str) and v]
        for key in ("patch", "input", "content", "patchText"):
            text = call.input.get(key)
            if isinstance(text, str) and "*** " in text:
                files.extend(m.strip() for m in _PATCH_FILE.findall(text))
        return files
    command = command_of(call)
    if not command:
        return None
    if "apply_patch" in command:
        return [m.strip() for m in _PATCH_FILE.findall(command)]
    if ">" not in command and "sed" not in command:
        # A simple command's characters are the script's: without either, none of them
        # writes a file that ``_shell_edits`` finds, and most scripts need no split.
        return None
    return _shell_edits(command)


def _shell_edits(command: str) -> list[str] | None:
    """Files a shell script writes by ``sed -i`` or a redirection (None: none)."""
    files: list[str] = []
    for simple in split_commands(command):
        if simple.startswith("sed") and _SED_I.match(simple):
            m = _SED_INPLACE.search(simple)
            files.append(m.group(1) if m else "")
        if ">" not in simple:
            continue  # every redirection target follows a ">"
        for m in _REDIRECT_TARGET.finditer(simple):
            target = m.group(1).strip("'\"")
            if not target.startswith(("/dev/", "/tmp/", "&")) and not target.endswith(
                    (".log", ".out", ".txt")):
                files.append(target)
    return files or None
