"""The process ledger: what the assistant launched, and what the transcript says became of it.

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
* **Up signals**: a health check that got an answer, the launch's own output saying it is
  ready, the user's words matching the "it is up" list (and neither asking for a relaunch nor
  reporting a failure). Each signal keeps the words that said so and its anchor.
* **Kills**: every kill command or harness kill, with the launches it ended (none: it reached
  nothing the transcript names).
* **Looks**: a later read of a launch's log (``tail``/``cat``, a file-read tool such as ``Read``,
  the harness's task output) is read like its own output: a crash or a taken port there ends it.
* **Subagents**: what a subagent call left running is a launch of this session from the call's
  result on: the child's own ledger when its file is at hand (``family.child_session``), else
  the result's words.

Background-task notifications (``EventTurn`` "notification") concern the wrapper shell and are
ignored on purpose: they do not prove the server exited.

All knowledge (patterns, default ports, kill forms, phrases) comes in as data: ``Knowledge`` is
compiled once per parameter set from the rule's ``[params]``.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import unicodedata
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cache, cached_property
from typing import Any, ClassVar

from forensics.resources import read_rule_file, rules_dir
from forensics.model import AssistantTurn, EventTurn, Session, ToolCall, ToolResultTurn, UserTurn
from forensics.analysis.params import build as build_params
from forensics.analysis.phrases import compile_later, phrase_pattern, source_of
from forensics import knowledge_cache
from forensics.analysis.params import require_names, resolve_references
from forensics.analysis.commands import _ASSIGN, Command, Pipeline, normalize, parse, split_pipelines
from forensics.analysis.commands import words as shell_words
from forensics.analysis.outcome import telling_lines
from forensics.analysis.shell import command_of, file_of
from forensics.analysis.text import line_at
from forensics.analysis.text import shorten as _short

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
    """exit, timeout, abort, killed, crash, crash-after-up (a traceback after its ready line: a
    later answer from its port revives it), conflict, kill-pid, kill-pattern, kill-name,
    kill-port, kill-container, kill-group, kill-session, kill-harness, kill-unresolved,
    resume, revived, expired."""
    reason: str
    ordinal: int
    anchor: str = ""
    """The record that shows it (a kill's call, the result, the event)."""


@dataclass
class Signal:
    """Evidence that a launch was up: a health check, its own ready line, the user's word."""

    clock: Clock
    kind: str  # health, output, user, running, subagent
    ordinal: int
    text: str = ""
    """The words that said so (the answer's first line, the ready line, the user's message)."""
    anchor: str = ""


@dataclass
class Kill:
    """A command (or harness call) aimed at stopping processes, and the launches it ended."""

    clock: Clock
    ordinal: int
    anchor: str
    command: str
    kind: str
    """port, pid, pattern, name, container, group, session, harness."""
    ended: list[int] = field(default_factory=list)
    """``seq`` of each launch it ended (empty: it reached none the transcript names)."""


@dataclass
class Check:
    """A look at a process: a health check, a read of a launch's log, a process listing."""

    ordinal: int
    anchor: str
    kind: str  # health, log, listing
    port: int | None = None


@dataclass
class Ledger:
    """Every long-running launch of a session, every kill and check, with their anchors."""

    launches: list["Launch"]
    kills: list[Kill]
    checks: list[Check] = field(default_factory=list)

    _clocks: "tuple[int, list[Clock] | None]" = field(default=(-1, None), init=False,
                                                      repr=False, compare=False)

    def kills_between(self, start: Clock, end: Clock) -> list[Kill]:
        clocks = self._kill_clocks()
        if clocks is None:
            return [k for k in self.kills if start < k.clock < end]
        return self.kills[bisect_right(clocks, start):bisect_left(clocks, end)]

    def _kill_clocks(self) -> "list[Clock] | None":
        """The kills' clocks when they are in order (the walk appends them so): a relaunch
        loop asks for the kills between each pair of launches. None: out of order."""
        count, clocks = self._clocks
        if count != len(self.kills):
            clocks = [k.clock for k in self.kills]
            if not all(a <= b for a, b in zip(clocks, clocks[1:])):
                clocks = None
            self._clocks = (len(self.kills), clocks)
        return clocks


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
    result_anchor: str = ""
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
    result_words: str = ""
    """The line of its own result that showed the conflict or the kill."""
    death_words: str = ""
    """The line of its output or log that showed it crashed (the exception, the fatal error)."""
    delegated: bool = False
    """Started by a subagent (its call's result or its own file says it was left running)."""
    live: "dict[int, Launch] | None" = field(default=None, repr=False)
    """The tracker's launches whose state is ALIVE, by ``seq``, kept current by ``end`` while
    the ledger is built (None after): "is anything alive?" without a pass over every launch."""
    not_ended: "dict[int, Launch] | None" = field(default=None, repr=False)
    """The tracker's launches whose state is not ENDED, by ``seq``, kept likewise: what a kill
    could still reach, without a pass over every launch of a long loop."""

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
            state: State = State.ENDED, anchor: str = "") -> None:
        self.changes.append(Change(clock, state, kind, reason, ordinal, anchor))
        if self.live is not None:
            if state is State.ALIVE:
                self.live[self.seq] = self
            else:
                self.live.pop(self.seq, None)
        if self.not_ended is not None:
            if state is State.ENDED:
                self.not_ended.pop(self.seq, None)
            else:
                self.not_ended[self.seq] = self

    @property
    def intended_port(self) -> int | None:
        """The port it tried to bind: the taken one it reported, else the asked-for one."""
        return self.conflict_port or self.requested_port or self.port

    @property
    def shape(self) -> tuple:
        """What ``equivalent`` reads of a launch, on either side: two launches of one shape are
        equivalent to the same later launches, so a relaunch loop asks once per shape."""
        return (self.port, self.requested_port, self.conflict_port, self.normalized, self.cwd)

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

SERVER_CACHE_SIZE = 16_384
"""Command texts whose answers each ``Knowledge`` keeps (``server_of``, ``worth_reading``);
past that many it starts over."""

def _compile(pattern: str, flags: int = re.I | re.M) -> re.Pattern[str]:
    return compile_later(pattern, flags, literal_if_invalid=True)  # an invalid one: its text


def _union(patterns: Iterable[str], flags: int = re.I | re.M) -> re.Pattern[str] | None:
    parts = [p for p in patterns if p]
    if not parts:
        return None
    return _compile("|".join(f"(?:{p})" for p in parts), flags)


def _words(words: Iterable[str]) -> re.Pattern[str] | None:
    """A phrase list as one regex (``forensics.analysis.phrases``: the one way for every list)."""
    return phrase_pattern(words)


_TWINS = (("i\u0307", "i"), ("\u0131", "i"), ("\u017f", "s"))
"""What ``str.lower`` leaves of the letters outside ASCII that a case-blind regex takes for
ASCII ones, and the ASCII letter re takes them for: İ (lower-cased, ``i`` and a combining dot),
dotless ı and long ſ. (The Kelvin sign K lower-cases to ``k`` already.) A plain ``i`` before a
combining dot folds to ``i`` too, which only lets more texts through."""

_LATIN_EXACT = frozenset(map(chr, [*range(0xDF, 0xF7), *range(0xF8, 0x100)]))
"""The lower-case letters of Latin-1 (ß à á â ã ä … ÿ): re matches each, case-blind, only with
itself and its capital, which ``str.lower`` turns into it."""


def _fold_case(text: str) -> str:
    """``text`` as a case-blind pattern sees it, for substring tests: lower case, the letters of
    ``_TWINS`` as their ASCII twins. ``tests/test_ledger_gate.py`` checks against re, over
    every code point, that each character re matches with a pattern character that
    ``_caseless_exact`` vouches for folds into it."""
    low = text.lower()
    if low.isascii():
        return low
    for twin, letter in _TWINS:
        if twin in low:
            low = low.replace(twin, letter)
    return low


def _folded(text: str) -> str:
    """``_fold_case(text)`` with each run of white space (re's ``\\s``, which is
    ``str.split``'s) one space, as a phrase pattern's ``\\s+`` sees it."""
    return " ".join(_fold_case(text).split())


def _caseless_exact(char: str) -> bool:
    """Whether a pattern character is matched, case-blind, only by characters that
    ``_fold_case`` turns into it: ASCII (thanks to ``_TWINS``), the lower-case letters of
    Latin-1, or a letter with no case at all (Chinese, Japanese, Korean: re matches it as
    itself, ``str.lower`` keeps it)."""
    return char.isascii() or char in _LATIN_EXACT or unicodedata.category(char) == "Lo"


@dataclass(frozen=True)
class PhraseGate:
    """A substring test that every text a phrase pattern (``phrases.phrase_pattern``) matches
    passes, so a text that fails it needs no regex search.

    Each phrase contributes the pieces of its lower-cased form, white space made single, cut at
    any character ``_caseless_exact`` cannot vouch for. A match of the phrase in a text spells
    each piece in ``_folded(text)``: its characters fold one for one into the phrase's, its
    ``\\s+`` runs into one space; the word boundaries only narrow the pattern further. Built
    from the same words the pattern is; ``None`` (search always) when a phrase has no piece.
    """

    single: tuple[str, ...]
    """Phrases that are one piece: any of them in the text passes."""
    several: tuple[tuple[str, ...], ...]
    """Phrases of several pieces: all of one phrase's pieces in the text pass."""

    @classmethod
    def of(cls, words: Iterable[str]) -> "PhraseGate | None":
        single: set[str] = set()
        several: set[tuple[str, ...]] = set()
        for word in {w for w in words if w.strip()}:  # as phrase_pattern takes them
            pieces, piece = [], ""
            for char in " ".join(word.lower().split()):
                if char == " " or _caseless_exact(char):
                    piece += char
                else:
                    pieces.append(piece)
                    piece = ""
            pieces = [p.strip() for p in (*pieces, piece) if p.strip()]
            if not pieces:
                return None
            if len(pieces) == 1:
                single.add(pieces[0])
            else:
                several.add(tuple(pieces))
        # a needle holding another is implied by it: keep the shorter
        single = {p for p in single if not any(q != p and q in p for q in single)}
        several = {g for g in several if not any(q in p for p in g for q in single)}
        return cls(tuple(sorted(single)), tuple(sorted(several)))

    def passes(self, text: str) -> bool:
        holds = _folded(text).__contains__
        return any(map(holds, self.single)) or any(
            all(map(holds, pieces)) for pieces in self.several)


_WORD_RUN = knowledge_cache.compile(r"[\w-]+")


def _stands_alone(name: str, text: str, runs: set[str]) -> bool:
    """Does ``name`` occur in ``text`` with no word character or hyphen either side? For a name
    made of those characters only, that is being one of ``runs`` (``_WORD_RUN``'s matches in
    ``text``): a set look-up instead of a regular expression compiled per name at start-up."""
    if _WORD_RUN.fullmatch(name):
        return name in runs
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


def needles(pattern: re.Pattern[str]) -> tuple[str, ...] | None:
    """Texts one of which every match of ``pattern`` contains, folded (``_fold_case``), so a
    command whose folded text holds none of them needs no search; None when the pattern's
    structure does not promise any.

    Read from re's own parse of the pattern: a run of literal characters in a sequence that
    every match goes through (not under a repeat that may be empty, nor in a look-around),
    or one needle per branch of an alternation every branch of which has one. A literal counts
    only when ``_caseless_exact``: its case-blind matches all fold into it.
    """
    source, flags, literal = source_of(pattern)  # a lazy pattern stays uncompiled
    return _needles(source, flags, literal_if_invalid=literal)


def _needles(source: str, flags: int, *, literal_if_invalid: bool = False, cased: bool = False
             ) -> tuple[str, ...] | None:
    """``needles`` of a pattern's source, read without compiling it (``literal_if_invalid``:
    a pattern that does not compile is read as its own text, as ``_compile`` takes it;
    ``cased``: the needles as written, taken only from literals matched case-sensitively, for
    a test on the text itself rather than on its folded copy); kept between runs by
    ``knowledge_cache``."""
    key = f"{flags}:{int(literal_if_invalid)}:{'cased:' if cased else ''}{source}"
    return knowledge_cache.needles(
        key, lambda: _read_needles(source, flags, literal_if_invalid, cased))


def _read_needles(source: str, flags: int, literal_if_invalid: bool, cased: bool = False
                  ) -> tuple[str, ...] | None:
    try:
        from re import _constants as c, _parser

        try:
            tree = _parser.parse(source, flags)
        except re.error:
            if not literal_if_invalid:
                raise
            tree = _parser.parse(re.escape(source), flags)
    except Exception:  # another Python's private parser, or a pattern it cannot read
        return None

    def char(op: Any, av: Any, caseless: bool) -> str | None:
        if op is c.IN and len(av) == 1:
            op, av = av[0]
        if op is not c.LITERAL:
            return None
        if cased:  # as written, where re matches it as written
            return None if caseless else chr(av)
        return _fold_case(chr(av)) if _caseless_exact(chr(av)) else None

    def of(seq: Any, caseless: bool) -> frozenset[str] | None:
        options: list[frozenset[str]] = []
        run = ""
        for op, av in seq:
            found = char(op, av, caseless)
            if found is not None:
                run += found
                continue
            if run:
                options.append(frozenset([run]))
            run = ""
            inner: Any = None
            if op is c.BRANCH:
                each = [of(branch, caseless) for branch in av[1]]
                inner = None if None in each else frozenset().union(*each)
            elif op is c.SUBPATTERN:  # (group, flags it adds, flags it removes, pattern)
                inner = of(av[-1], (caseless or bool(av[1] & re.I)) and not av[2] & re.I)
            elif op is getattr(c, "ATOMIC_GROUP", None):
                inner = of(av, caseless)
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)) \
                    and av[0] >= 1:
                inner = of(av[2], caseless)
            if inner:
                options.append(inner)
        if run:
            options.append(frozenset([run]))
        options = [o for o in options if "" not in o]
        return max(options, key=lambda o: min(map(len, o)), default=None)

    found = of(tree, bool(tree.state.flags & re.I))
    return tuple(sorted(found)) if found else None


def needles_of(patterns: Iterable[str], flags: int = re.I | re.M, *, cased: bool = False
               ) -> tuple[str, ...] | None:
    """Folded texts one of which every match of any of ``patterns`` contains (the ``needles``
    of each), so a substring test on them is an exact prefilter. None when some pattern
    promises none: then the prefilter must always pass. ``cased``: the texts as written (see
    ``_needles``), for ``holds_cased_needle``."""
    found: set[str] = set()
    for pattern in patterns:
        these = _needles(pattern, flags, literal_if_invalid=True, cased=cased)
        if these is None:
            return None
        found.update(these)
    # a needle that holds another is implied by it: one substring test fewer per text
    return tuple(sorted(n for n in found if not any(m != n and m in n for m in found)))


def holds_needle(words: tuple[str, ...] | None, text: str) -> bool:
    """Whether ``text`` holds one of ``needles_of``'s texts (always, when there are none)."""
    if words is None:
        return True
    return any(map(_fold_case(text).__contains__, words))


def holds_cased_needle(words: tuple[str, ...] | None, text: str) -> bool:
    """Whether ``text`` holds one of ``needles_of(..., cased=True)``'s texts as they are
    (always, when there are none): no folded copy of a long text to make."""
    if words is None:
        return True
    return any(map(text.__contains__, words))


_LONE_AMP = knowledge_cache.compile(r"(?<![&>|])&(?![&>])")

PARAM_NAMES = frozenset({
    "server_commands", "default_ports", "background_markers", "gui_launchers", "short_commands",
    "weak_launchers", "reconciling_commands", "inert_programs", "log_readers",
    "process_listers", "port_patterns", "bound_port_patterns", "moved_port_patterns",
    "kill_commands", "harness_kill_tools", "harness_poll_tools", "background_id_patterns",
    "output_file_patterns", "job_end_notifications", "pid_patterns", "port_conflict_patterns",
    "conflict_port_patterns", "crash_patterns", "killed_patterns", "up_patterns",
    "health_ok_patterns", "health_check_commands", "down_patterns", "user_up_words",
    "relaunch_request_words", "failure_words", "script_child_names", "resume_gap_minutes",
    "file_read_tools", "delegate_tools", "delegated_running_patterns", "delegated_stop_words",
})


@dataclass(eq=False)
class Knowledge:
    """What starts, ends and answers for a long-running process: the duplicate-launch rule's
    ``[params]``, compiled once per parameter set (``forensics.analysis.params.build``)."""

    param_names: ClassVar[frozenset[str]] = PARAM_NAMES

    servers: list[tuple[str, re.Pattern[str]]]
    server_any: re.Pattern[str] | None
    default_ports: dict[str, int]
    background: re.Pattern[str] | None
    short: re.Pattern[str] | None
    weak: re.Pattern[str] | None
    reconciling: set[str]
    inert: frozenset[str]
    """Programs that never launch anything (echo, grep, curl, kill…)."""
    skip_fast: frozenset[str]
    """Inert programs that no kill form names either: a pipeline starting with one is skipped."""
    log_reader: re.Pattern[str] | None
    file_read_tools: frozenset[str]
    """Tools that read a file by path (``Read``, ``read``): a read of a launch's log."""
    delegate_tools: frozenset[str]
    """Tools that run a subagent (``Task``, opencode ``task``): what it leaves running lives on."""
    delegated_running: list[re.Pattern[str]]
    """A subagent's result saying a process it started still runs, group 1 the port."""
    delegated_stop: re.Pattern[str] | None
    """Words that, in the same sentence, say the subagent stopped it again."""
    process_lister: re.Pattern[str] | None
    port_patterns: list[re.Pattern[str]]
    bound_ports: list[re.Pattern[str]]
    moved_port: re.Pattern[str] | None
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
    user_up_gate: PhraseGate | None
    """Passed by every text ``user_up`` matches: most messages need no search."""
    relaunch_request: re.Pattern[str] | None
    failure: re.Pattern[str] | None
    script_children: set[str]
    resume_gap: float
    prefilter_patterns: tuple[str, ...]
    """What a script must match one of to be worth analysing (or hold ``&``)."""
    kill_patterns: tuple[str, ...]
    server_by_text: dict[str, str | None] = field(default_factory=dict, repr=False)
    """``server_of``'s answers by command text: FX005 asks for every command it judges."""
    worth_by_text: dict[str, bool] = field(default_factory=dict, repr=False)
    """``worth_reading``'s answers by script text."""

    def worth_reading(self, script: str) -> bool:
        """Whether ``script`` holds a ``prefilter`` text (kept by text: scripts recur)."""
        known = self.worth_by_text.get(script)
        if known is None:
            known = _keep(self.worth_by_text, script, holds_needle(self.prefilter, script))
        return known

    @cached_property
    def prefilter(self) -> tuple[str, ...] | None:
        """Texts one of which a script worth analysing holds (``needles_of``, on first use)."""
        return needles_of(self.prefilter_patterns)

    @cached_property
    def kill_words(self) -> tuple[str, ...] | None:
        """Texts one of which a kill command holds (``needles_of``, on first use)."""
        return needles_of(self.kill_patterns)

    @cached_property
    def server_needles(self) -> tuple[tuple[tuple[str, int], ...], frozenset[int]]:
        """``needles`` of the server patterns, read on first use (not at start-up): each
        needle with the index of its pattern, and the patterns that promise none."""
        found = [needles(pat) for _, pat in self.servers]
        return (tuple((n, i) for i, these in enumerate(found) for n in these or ()),
                frozenset(i for i, these in enumerate(found) if these is None))

    @classmethod
    def build(cls, **params: Any) -> "Knowledge":
        """The compiled knowledge for these params (made once per distinct set)."""
        return build_params(cls, params)

    @classmethod
    def from_params(cls, raw: Mapping[str, Any]) -> "Knowledge":
        params = resolve_references(raw)
        require_names(params, "default_ports", "server_commands", params["default_ports"])
        require_names(params, "reconciling_commands", "server_commands",
                      params["reconciling_commands"])
        servers = [(name, _compile(p)) for name, p in params["server_commands"].items()]
        kills = {kind: [_compile(p) for p in (pats if isinstance(pats, list) else [pats])]
                 for kind, pats in params["kill_commands"].items()}
        kill_patterns = [p for pats in params["kill_commands"].values()
                         for p in (pats if isinstance(pats, list) else [pats])]
        inert = frozenset(n.lower() for n in params["inert_programs"])
        kill_text = re.sub(r"\\[A-Za-z]", " ", "\n".join(kill_patterns).lower())
        kill_words = set(_WORD_RUN.findall(kill_text))
        skip_fast = frozenset(
            n for n in inert if n not in ("cd", "export", "set")
            and not _stands_alone(n, kill_text, kill_words))
        listers = [re.escape(n) for n in params["process_listers"]]
        lister = _compile(rf"\b(?:{'|'.join(listers)})\b") if listers else None
        readers = [re.escape(n) for n in params["log_readers"]]
        reader = _compile(rf"\b(?:{'|'.join(readers)})\b") if readers else None
        pre = [*params["server_commands"].values(), *params["background_markers"],
               *params["weak_launchers"], *kill_patterns, params["health_check_commands"] or "",
               *(rf"\b{n}\b" for n in listers if len(n) >= 3)]
        return cls(
            servers=servers,
            server_any=_union(params["server_commands"].values()),
            default_ports={k: int(v) for k, v in params["default_ports"].items()},
            background=_union(params["background_markers"]),
            short=_union(params["short_commands"]),
            weak=_union(params["weak_launchers"]),
            reconciling=set(params["reconciling_commands"]),
            inert=inert,
            skip_fast=skip_fast,
            log_reader=reader,
            file_read_tools=frozenset(params["file_read_tools"]),
            delegate_tools=frozenset(params["delegate_tools"]),
            delegated_running=[_compile(p) for p in params["delegated_running_patterns"]],
            delegated_stop=_words(params["delegated_stop_words"]),
            process_lister=lister,
            port_patterns=[_compile(p) for p in params["port_patterns"]],
            bound_ports=[_compile(p) for p in params["bound_port_patterns"]],
            moved_port=_union(params["moved_port_patterns"]),
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
            user_up_gate=PhraseGate.of(params["user_up_words"]),
            relaunch_request=_words(params["relaunch_request_words"]),
            failure=_words(params["failure_words"]),
            script_children={n.lower() for n in params["script_child_names"]},
            resume_gap=float(params["resume_gap_minutes"]) * 60.0,
            prefilter_patterns=tuple(p for p in pre if p),
            kill_patterns=tuple(kill_patterns),
        )


def _basename(path: str) -> str:
    return re.split(r"[\\/]", path.rstrip("\\/"))[-1].lower()


# -- the tracker -------------------------------------------------------------------------------

def _first_word(text: str) -> str:
    for tok in text.split(None, 4):
        if not _ASSIGN.match(tok):
            return _basename(tok.strip("'\"")).lower()
    return ""


class LogNames:
    """The log files launches write (name as the command or output wrote it, in the order they
    were first named), with the launches writing each, and the two questions every later call
    asks of them: which names a script holds, and which name a file read opens. Both were a
    pass over every name per call, which made the ledger grow with launches times calls."""

    PENDING = 32
    """Names added since the automaton was built are tried one by one, up to this many."""

    def __init__(self) -> None:
        self._launches: dict[str, list[Launch]] = {}
        self._order: dict[str, int] = {}
        self._automaton: Any = None
        self._pending: list[str] = []
        self._by_last_part: dict[str, list[str]] = {}

    def __bool__(self) -> bool:
        return bool(self._launches)

    def add(self, name: str, launch: Launch) -> None:
        known = self._launches.get(name)
        if known is not None:
            known.append(launch)
            return
        self._launches[name] = [launch]
        self._order[name] = len(self._order)
        self._pending.append(name)
        self._by_last_part.setdefault(_plain_path(name).rsplit("/", 1)[-1], []).append(name)

    def named_in(self, script: str) -> list[list[Launch]]:
        """The launches of each name ``script`` holds as a substring, in the names' order."""
        if len(self._pending) > self.PENDING:
            self._build()
        if self._automaton is None:  # a few names, none built in: in order already
            return [self._launches[n] for n in self._pending if n in script]
        found = {n for n in self._pending if n in script}
        found.update(name for _end, name in self._automaton.iter(script))
        return [self._launches[n] for n in sorted(found, key=self._order.__getitem__)]

    def any_in(self, script: str) -> bool:
        """Does ``script`` hold any of the names."""
        if len(self._pending) > self.PENDING:
            self._build()
        for name in self._pending:
            if name in script:
                return True
        return self._automaton is not None and next(self._automaton.iter(script),
                                                    None) is not None

    def read_as(self, path: str) -> list[list[Launch]]:
        """The launches of each name a file read of ``path`` opens: the same path, or one
        ending in the name (which then ends in the same last part), in the names' order."""
        wanted = path.replace("\\", "/")
        out = []
        for name in self._by_last_part.get(wanted.rsplit("/", 1)[-1], ()):
            plain = _plain_path(name)
            if wanted == plain or wanted.endswith("/" + plain.lstrip("/")):
                out.append(self._launches[name])
        return out

    def _build(self) -> None:
        """One Aho-Corasick automaton of every name: it reports every occurrence in a text,
        overlapping ones included, so the names it finds are the names the text holds."""
        import ahocorasick  # a runtime dependency (FX005's claim phrases)

        automaton = ahocorasick.Automaton()
        for name in self._order:
            if name:
                automaton.add_word(name, name)
        automaton.make_automaton()
        self._automaton = automaton if len(automaton) else None
        self._pending = [""] if "" in self._order else []  # the empty name is in every text


def _plain_path(name: str) -> str:
    return name.replace("\\", "/").removeprefix("./")


@dataclass
class _Script:
    """What one tool call's script says, pipeline by pipeline."""

    pipes: list[Pipeline]
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None


class Tracker:
    """Walks a session once and builds every launch with its state over time."""

    def __init__(self, session: Session, know: Knowledge,
                 children: "ChildLoader | None" = None,
                 child_launches: "ChildLaunches | None" = None) -> None:
        self.session = session
        self.k = know
        self.children = children
        """Finds the session file of a subagent call's child, when it is at hand."""
        self.child_launches = child_launches
        """A child's launches under this knowledge (None: walk the child here)."""
        self.launches: list[Launch] = []
        self.by_call: dict[str, list[Launch]] = {}
        self.by_handle: dict[str, Launch] = {}
        self.log_names = LogNames()
        """The log files launches write, with the launches that write each."""
        self.alive: dict[int, Launch] = {}
        """The launches whose state is ALIVE (``Launch.live``)."""
        self.not_ended: dict[int, Launch] = {}
        """The launches whose state is not ENDED (``Launch.not_ended``)."""
        self.by_pid: dict[int, list[Launch]] = {}
        """The launches each process id was seen for."""
        self.health_calls: dict[str, list[tuple[Clock, int, bool]]] = {}
        """Health checks by call id: (clock, port, whether the script has a ``||`` fallback)."""
        self.code_polls: dict[str, list[Launch]] = {}
        """Codex code-mode cells that poll a session (``tools.write_stdin``), by call id."""
        self._last_time: float | None = None
        self.kills: list[Kill] = []
        self.checks: list[Check] = []
        self._call_anchor = ""

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
        turns = self.session.turns
        for launch in self.launches:
            launch.live = launch.not_ended = None  # the ledger is built: states change no more
            for event in (*launch.changes, *launch.signals):
                if not event.anchor and 0 < event.ordinal <= len(turns):
                    event.anchor = turns[event.ordinal - 1].anchor
        return self.launches

    def ledger(self) -> Ledger:
        self.run()
        return Ledger(self.launches, self.kills, self.checks)

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
        running by the wrapper, so servers stay alive (docs/rules.md, "Common ground").
        """
        for pat in self.k.job_end_notifications:
            for m in pat.finditer(turn.text):
                launch = self.by_handle.get(m.group(1))
                if launch and launch.server is None and launch.harness_only \
                        and launch.state is State.ALIVE:
                    launch.end((turn.ordinal, 0, 0), "exit",
                               f"its task finished ({turn.anchor})", turn.ordinal)

    def _unknown_all(self, clock: Clock, ordinal: int, why: str) -> None:
        for launch in _in_order(self.alive):
            launch.end(clock, "resume", why, ordinal, State.UNKNOWN)

    def _with_pid(self, launch: Launch, pid: int) -> None:
        if pid not in launch.pids:
            launch.pids.add(pid)
            self.by_pid.setdefault(pid, []).append(launch)

    # -- calls -----------------------------------------------------------------------------

    def _call(self, turn: AssistantTurn, idx: int, call: ToolCall) -> None:
        k = self.k
        self._call_anchor = call.anchor
        harness_key = k.harness_kill_tools.get(call.name)
        if harness_key:
            handle = str(call.input.get(harness_key, ""))
            launch = self.by_handle.get(handle)
            kill = Kill((turn.ordinal, idx, 0), turn.ordinal, call.anchor,
                        f"{call.name} {handle}", "harness")
            self.kills.append(kill)
            if launch and launch.state is not State.ENDED:
                launch.end((turn.ordinal, idx, 0), "kill-harness",
                           f"{call.name} {handle} at {call.anchor}", turn.ordinal,
                           anchor=call.anchor)
                kill.ended.append(launch.seq)
            return
        if call.name in k.harness_poll_tools:
            key = k.harness_poll_tools[call.name]
            chars = call.input.get("chars")
            handle = str(call.input.get(key, ""))
            launch = self.by_handle.get(handle)
            if launch and isinstance(chars, str) and ("\x03" in chars or "\\u0003" in chars):
                launch.end((turn.ordinal, idx, 0), "kill-harness",
                           f"Ctrl-C sent to session {handle} at {call.anchor}", turn.ordinal,
                           anchor=call.anchor)
                self.kills.append(Kill((turn.ordinal, idx, 0), turn.ordinal, call.anchor,
                                       f"Ctrl-C to session {handle}", "harness", [launch.seq]))
            return
        code = call.input.get("input") or call.input.get("code")
        if isinstance(code, str) and "write_stdin" in code:
            for handle, chars in _code_mode_stdin(code):
                launch = self.by_handle.get(handle)
                if launch and ("\x03" in chars):
                    launch.end((turn.ordinal, idx, 0), "kill-harness",
                               f"Ctrl-C sent to session {handle} at {call.anchor}",
                               turn.ordinal, anchor=call.anchor)
                    self.kills.append(Kill((turn.ordinal, idx, 0), turn.ordinal, call.anchor,
                                           f"Ctrl-C to session {handle}", "harness",
                                           [launch.seq]))
                elif launch:
                    self.code_polls.setdefault(call.call_id, []).append(launch)
        script = command_of(call)
        if not script:
            return
        if not k.worth_reading(script) and not _LONE_AMP.search(script) \
                and not self.log_names.any_in(script) and not call.background:
            return
        pieces = split_pipelines(script)
        ctx = _Script(pieces)
        workdir = call.input.get("workdir") or call.input.get("cwd")
        ctx.cwd = workdir if isinstance(workdir, str) else None
        script_launches: list[Launch] = []
        assigns = _assignments(script)
        for p_idx, piece in enumerate(pieces):
            clock = (turn.ordinal, idx, p_idx + 1)
            if k.health:
                for m in k.health.finditer(piece.text):
                    if m.group(1) and m.group(1).isdigit():
                        self.health_calls.setdefault(call.call_id, []).append(
                            (clock, int(m.group(1)), "||" in script))
                        self.checks.append(Check(turn.ordinal, call.anchor, "health",
                                                 int(m.group(1))))
            if _first_word(piece.text) in k.skip_fast:
                continue  # echo, grep, sed, ls…: neither a launch nor a kill; spare the parse
            pipe = parse(piece.text, piece.background)  # the typed command, cached by text
            if not pipe.tokens:
                ctx.env.update(pipe.env)
                continue
            prog = pipe.name
            if prog == "cd" and len(pipe.tokens) > 1:
                ctx.cwd = pipe.tokens[1]
                continue
            if prog in ("export", "set"):
                continue
            if self._kill(pipe.text, clock, turn, script_launches, assigns):
                continue
            launch = self._launch(pipe, clock, turn, call, ctx)
            if launch:
                script_launches.append(launch)
        for launch in script_launches:
            self.by_call.setdefault(call.call_id, []).append(launch)

    def _launch(self, pipe: Command, clock: Clock, turn: AssistantTurn, call: ToolCall,
                ctx: _Script) -> Launch | None:
        k = self.k
        text = pipe.text
        if pipe.name in k.inert:
            return None
        stripped = pipe.stripped
        server = server_of(stripped, k)
        detach_marker = bool(k.background and k.background.search(stripped))
        background = pipe.background or detach_marker or call.background
        weak = bool(k.weak and k.weak.search(stripped)) and server is None
        if server is None and not background:
            return None
        if server is None and k.short and k.short.search(stripped):
            return None
        if pipe.timeout is not None and (server is None or not background):
            return None  # bounded: it ends on its own
        port, explicit = self._port(stripped, {**ctx.env, **pipe.environment}, server)
        launch = Launch(
            seq=len(self.launches), command=text.strip(), normalized=normalize(text, k.inert),
            server=server, port=port, port_explicit=explicit, background=background,
            detached=pipe.detached or detach_marker or call.background,
            weak=weak, reconciling=server in k.reconciling, cwd=ctx.cwd,
            turn=turn.ordinal, anchor=call.anchor, clock=clock, call_id=call.call_id,
            time=turn.time, requested_port=port,
            harness_only=call.background and not pipe.background and not detach_marker,
        )
        if pipe.timeout is not None and turn.time is not None:
            launch.deadline = turn.time + pipe.timeout
        launch.logs = set(pipe.logs)
        for name in launch.logs:
            self.log_names.add(name, launch)
        self._add(launch)
        return launch

    def _add(self, launch: Launch) -> None:
        """A new launch, alive from now on."""
        launch.live, launch.not_ended = self.alive, self.not_ended
        self.alive[launch.seq] = launch
        self.not_ended[launch.seq] = launch
        self.launches.append(launch)

    def _port(self, text: str, env: dict[str, str], server: str | None) -> tuple[int | None, bool]:
        return port_of(text, self.k, server=server, env=env)

    # -- kills -----------------------------------------------------------------------------

    def _kill(self, text: str, clock: Clock, turn: AssistantTurn, script_launches: list[Launch], assigns: dict[str, tuple[str, Any]]) -> bool:
        """Apply a kill in this pipeline to the launches it aims at; True if it was a kill."""
        k = self.k
        if not k.kill_any or not holds_needle(k.kill_words, text):
            return False
        where = f"`{_short(text, 80)}` at {self._call_anchor}"
        for kind, pats in k.kills.items():
            for pat in pats:
                m = pat.search(text)
                if not m:
                    continue
                target = next((g for g in m.groups() if g), "") if m.groups() else ""
                kill = Kill(clock, turn.ordinal, self._call_anchor, text.strip(), kind)
                self.kills.append(kill)
                self._apply_kill(kind, target.strip(), clock, turn, where, script_launches,
                                 assigns, kill)
                return True
        return False

    def _apply_kill(self, kind: str, target: str, clock: Clock, turn: AssistantTurn,
                    where: str, script_launches: list[Launch],
                    assigns: dict[str, tuple[str, Any]], kill: Kill) -> None:
        alive = _in_order(self.not_ended)
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
            hit.extend(sorted({l.seq: l for pid in pids for l in self.by_pid.get(pid, ())
                               if l.seq in self.not_ended}.values(), key=_seq))
            if not hit and (pids or refs):
                for l in _in_order(self.alive):
                    if not l.reconciling and l.server != "docker":
                        l.end(clock, "kill-unresolved",
                              f"a kill of a process the transcript does not name ({where})",
                              turn.ordinal, State.UNKNOWN, anchor=kill.anchor)
                return
        elif kind in ("pattern", "name"):
            pattern = _kill_target(target, kind)
            if not pattern:
                return
            rx = _compile(pattern, re.I) if kind == "pattern" else None
            for l in alive:
                parsed = parse(l.command)
                prog = parsed.name
                if kind == "pattern":
                    hay = parsed.stripped
                    ok = bool(rx.search(hay)) or bool(rx.search(l.command))
                else:  # pkill NAME / killall NAME: the process name, as pkill matches it
                    ok = bool(_compile(pattern, re.I).search(prog))
                if not ok and prog in ("npm", "pnpm", "yarn", "bun", "npx", "node"):
                    word = pattern.lower()
                    ok = any(re.search(rf"(?<![\w-]){re.escape(c)}(?![\w-])", word)
                             for c in self.k.script_children)
                if ok:
                    hit.append(l)
        elif kind == "title":  # taskkill /FI "WINDOWTITLE eq T*": the window `start "T"` opened
            wanted = target.strip().strip('"').lower()
            for l in alive:
                title = parse(l.command).title
                if title and fnmatch.fnmatchcase(title.lower(), wanted):
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
            l.end(clock, f"kill-{how}", f"killed by {where}", turn.ordinal, anchor=kill.anchor)
            kill.ended.append(l.seq)

    # -- results ---------------------------------------------------------------------------

    def _result(self, res: ToolResultTurn) -> None:
        k = self.k
        out = res.output or ""
        clock = (res.ordinal, 0, 0)
        call_info = self.session.call_for(res)
        call = call_info[1] if call_info else None
        if call and call.name in k.delegate_tools and call_info is not None:
            self._delegated(call_info[0], call, res)
            return
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
            launch.result_anchor = res.anchor
            self._own_result(launch, res, out, clock)
        if call is not None and not launches:
            script = command_of(call)
            if script:
                self._probe_output(script, res, out, clock)
            elif call.name in k.file_read_tools:
                self._file_read(call, res, out, clock)
        elif call is not None and launches:
            script = command_of(call)
            if script and k.health and k.health.search(script):
                self._probe_output(script, res, out, clock)

    def _own_result(self, launch: Launch, res: ToolResultTurn, out: str, clock: Clock) -> None:
        k = self.k
        if res.aborted and (launch.background or not out.strip()):
            # rejected or interrupted: a background launch returns at once, so an abort came
            # before it ran; a foreground one with no output never started either
            launch.end(clock, "abort", "the user rejected or interrupted it before it ran",
                       res.ordinal)
            return
        for pat in k.background_ids:
            m = pat.search(out)
            if m:
                launch.handles.add(m.group(1))
                self.by_handle[m.group(1)] = launch
        for pat in k.output_files:
            m = pat.search(out)
            if m:
                launch.logs.add(m.group(1))
                self.log_names.add(m.group(1), launch)
        still_running = bool(launch.handles) or res.error == "tool call still running when " \
            "the session was saved"
        for pat in k.pid_patterns:
            for m in pat.finditer(out):
                self._with_pid(launch, int(m.group(1)))
        bound = _bound_port(out, k)
        if bound is not None:
            launch.port = bound
            launch.port_explicit = True
        conflict_match = k.conflict.search(out) if k.conflict else None
        conflict = conflict_match is not None
        if conflict_match is not None:
            launch.result_words = line_at(out, conflict_match.start(), 120)
            self._conflict_port(launch, out)
        if conflict and not _moved_port(out, k):
            launch.conflict = True
            launch.end(clock, "conflict", f"its port was already taken ({res.anchor})",
                       res.ordinal)
            return
        if conflict:
            launch.conflict = launch.moved = True
        killed_line = k.killed.search(out) if k.killed else None
        if (res.killed or killed_line) and not res.timed_out:
            launch.killed_at_once = True
            launch.result_words = (line_at(out, killed_line.start(), 120) if killed_line
                                   else "killed by a signal")
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
                and (not launch.background or launch.harness_only):
            # the task is the job itself when only the harness sent it to the background
            if launch.harness_only and self._read_log(launch, out, clock, res.ordinal):
                return
            launch.end(clock, "exit", f"its task reported {word or 'exit'} ({res.anchor})",
                       res.ordinal)
            return
        running = word == "running" or "Process running with session ID" in out
        self._read_log(launch, out, clock, res.ordinal, running=running)

    def _read_log(self, launch: Launch, out: str, clock: Clock, ordinal: int,
                  running: bool = False) -> bool:
        """What the launch's own output or log says; ``running``: the harness says it still is.
        True when it showed the launch ended (a crash, a taken port)."""
        k = self.k
        if launch.state is State.ENDED:
            return False
        conflict = k.conflict.search(out) if k.conflict and not running else None
        if conflict is not None:
            launch.conflict = True
            self._conflict_port(launch, out)
            if _moved_port(out, k):
                launch.moved = True
            else:
                launch.result_words = line_at(out, conflict.start(), 120)
                launch.end(clock, "conflict", "its output showed its port was already taken",
                           ordinal)
                return True
        last_up = _last(k.up, out)
        last_crash = _last(k.crash, out)
        if last_crash > last_up and not running:
            launch.death_words = _death_line(out, last_crash)
            # after its ready line, a traceback may be a request's error in a live server
            kind = "crash-after-up" if last_up >= 0 else "crash"
            launch.end(clock, kind, "its output showed it crashed", ordinal)
            return True
        if last_up >= 0 and launch.state is State.ALIVE:
            launch.signals.append(Signal(clock, "output", ordinal, line_at(out, last_up)))
        bound = _bound_port(out, k)
        if bound is not None:
            launch.port = bound
        return False

    def _probe_output(self, script: str, res: ToolResultTurn, out: str, clock: Clock) -> None:
        """Health checks, log reads and process listings after a launch."""
        k = self.k
        # log files of earlier launches
        for launches in self.log_names.named_in(script):
            if k.log_reader and k.log_reader.search(script):
                self.checks.append(Check(res.ordinal, res.anchor, "log"))
                for launch in launches:
                    if launch.state is State.ALIVE and launch.result is not None:
                        self._read_log(launch, out, clock, res.ordinal)
        for health_clock, port, fallback in self.health_calls.get(res.call_id, []):
            self._health(port, res, out, health_clock, fallback)
        if k.process_lister and k.process_lister.search(script):
            self.checks.append(Check(res.ordinal, res.anchor, "listing"))
            self._pids_from_listing(script, out)

    def _delegated(self, turn: AssistantTurn, call: ToolCall, res: ToolResultTurn) -> None:
        """A subagent returned: the processes it left running are alive in this session.

        Its own file, when at hand, tells (its ledger: launches still alive at its end, with
        their commands and ports); else its result's words do (\"now running on port 8000\"),
        unless the same sentence says it stopped them.
        """
        if res.aborted or res.failed:
            return
        clock = (res.ordinal, 0, 0)
        child = self.children(self.session, call, res) if self.children else None
        if child is not None:
            left_behind = (self.child_launches(child, self.k) if self.child_launches
                           else Tracker(child, self.k, self.children).run())
            for left in left_behind:
                if left.state is not State.ALIVE:
                    continue
                launch = self._delegated_launch(turn, call, res, clock, left.command,
                                                left.port, left.port_explicit)
                launch.normalized, launch.server, launch.cwd = (left.normalized, left.server,
                                                                left.cwd)
                launch.requested_port = left.requested_port
                launch.weak, launch.reconciling = left.weak, left.reconciling
                if left.signals:
                    launch.signals.append(Signal((res.ordinal, 0, 1), "subagent", res.ordinal,
                                                 left.signals[-1].text, res.anchor))
            return
        for sentence in re.split(r"(?<=[.!?。！？])\s+|\n+", res.output or "")[:200]:
            for pat in self.k.delegated_running:
                m = pat.search(sentence)
                if not m or (self.k.delegated_stop and self.k.delegated_stop.search(sentence)):
                    continue
                words = _short(sentence.strip(), 100)
                launch = self._delegated_launch(turn, call, res, clock,
                                                f"(left running by a subagent) {words}",
                                                int(m.group(1)), True)
                launch.signals.append(Signal((res.ordinal, 0, 1), "subagent", res.ordinal, words,
                                             res.anchor))
                break

    def _delegated_launch(self, turn: AssistantTurn, call: ToolCall, res: ToolResultTurn,
                          clock: Clock, command: str, port: int | None,
                          explicit: bool) -> Launch:
        launch = Launch(
            seq=len(self.launches), command=command, normalized="", server=None, port=port,
            port_explicit=explicit, background=True, detached=True, weak=False,
            reconciling=False, cwd=None, turn=turn.ordinal, anchor=call.anchor, clock=clock,
            call_id=call.call_id, time=res.time, result=res.ordinal, result_anchor=res.anchor,
            requested_port=port, delegated=True)
        self._add(launch)
        return launch

    def _file_read(self, call: ToolCall, res: ToolResultTurn, out: str, clock: Clock) -> None:
        """A file-read tool (Claude Code ``Read``, opencode ``read``…) on a launch's log."""
        if not self.log_names:
            return  # no launch has named a log file yet
        path = file_of(call)
        if not path or res.failed:
            return
        for launches in self.log_names.read_as(path):
            self.checks.append(Check(res.ordinal, res.anchor, "log"))
            for launch in launches:
                if launch.state is State.ALIVE and launch.result is not None:
                    self._read_log(launch, out, clock, res.ordinal)

    def _health(self, port: int, res: ToolResultTurn, out: str, clock: Clock,
                fallback: bool = False) -> None:
        """A request to the port. Its own answer (exit 0, its own non-empty output) means
        something listens there, whatever the body; with a ``||`` fallback in the script the
        output may be the fallback's, so only an answer that reads as up counts."""
        k = self.k
        if res.exit_code not in (None, 0) or res.is_error or res.timed_out:
            return
        body = out.strip()
        if not body or (k.down and k.down.search(body)):
            return
        if fallback and not ((k.health_ok and k.health_ok.search(body))
                             or (k.up and k.up.search(body))):
            return
        latest = next((l for l in reversed(self.launches) if l.port == port and l.clock < clock),
                      None)  # the newest launch on the port: a loop of launches is not read whole
        if latest is None:
            return
        state, change = latest.state_before(clock)
        if latest.changes and latest.changes[-1].clock > clock:
            state = State.ENDED  # ended later in the same script: nothing to revive
        telling = next((ln for ln in body.splitlines() if re.search(r"\w{2,}", ln)), body)
        text = _short(telling, 60)  # the answer's first line that says something
        if state is State.ALIVE:
            latest.signals.append(Signal(clock, "health", res.ordinal, text))
        elif change is not None and change.kind in ("kill-pid", "resume", "kill-unresolved",
                                                    "kill-harness", "crash-after-up"):
            latest.end(clock, "revived",
                       f"port {port} still answered at {res.anchor} after {change.reason}",
                       res.ordinal, State.ALIVE)
            latest.signals.append(Signal(clock, "health", res.ordinal, text))

    def _pids_from_listing(self, script: str, out: str) -> None:
        ports = {int(p) for p in re.findall(r":(\d{2,5})\b", script)}
        reachable: list[tuple[Launch, str]] | None = None
        for line in out.splitlines()[:200]:
            nums = re.findall(r"(?:^|\s|pid=)(\d{2,7})(?=\s|,|$)", line)
            if not nums:
                continue
            pid = int(nums[0]) if not line.lstrip()[:1].isalpha() else int(nums[0])
            line_ports = {int(p) for p in re.findall(r":(\d{2,5})\b", line)} or ports
            if reachable is None:
                reachable = [(launch, _signature(launch)) for launch in _in_order(self.not_ended)]
            for launch, sig in reachable:
                if (launch.port is not None and launch.port in line_ports) or \
                        (sig and sig in line):
                    self._with_pid(launch, pid)

    # -- users -----------------------------------------------------------------------------

    def _user(self, turn: UserTurn) -> None:
        k = self.k
        if not self.alive:
            return
        text = turn.text.strip()[:600]  # status words come early; long pastes cost, not help
        # the "it is up" words first: without them the other two lists cannot make a signal
        if k.user_up is None or (k.user_up_gate and not k.user_up_gate.passes(text)) \
                or not k.user_up.search(text):
            return
        if (k.relaunch_request and k.relaunch_request.search(text)) \
                or (k.failure and k.failure.search(text)):
            return
        clock = (turn.ordinal, 0, 0)
        for launch in self.launches:
            if launch.state is State.ALIVE:
                launch.signals.append(Signal(clock, "user", turn.ordinal, _short(text, 60),
                                             turn.anchor))


def server_of(command: str, know: Knowledge) -> str | None:
    """Name of the first server pattern the (stripped) command matches, or None."""
    known = know.server_by_text
    if command in known:
        return known[command]
    folded = _fold_case(command)
    index, unpromised = know.server_needles
    maybe = unpromised.union([i for needle, i in index if needle in folded])
    return _keep(known, command, next((know.servers[i][0] for i in sorted(maybe)
                                       if know.servers[i][1].search(command)), None))


def _keep(answers: dict[str, Any], text: str, answer: Any) -> Any:
    """``answer`` kept as ``answers[text]``; a table past ``SERVER_CACHE_SIZE`` starts over."""
    if len(answers) >= SERVER_CACHE_SIZE:
        answers.clear()
    answers[text] = answer
    return answer


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
        parsed = parse(command)
        prefix_env = parsed.environment
        if prefix_env.get("PORT", "").isdigit():
            return int(prefix_env["PORT"]), True
        server = server_of(parsed.stripped, know)
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


_CODE_STDIN = knowledge_cache.compile(r"write_stdin\(\s*(\{.*?\})\s*\)", re.S)


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
    toks, _ = shell_words(target)
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


def _bound_port(out: str, k: Knowledge) -> int | None:
    """The port the output says the server bound: the last match of the last pattern that
    matches (a later pattern overrides an earlier one, as it always has)."""
    port = None
    for pat in k.bound_ports:
        m = None
        for m in pat.finditer(out):
            pass
        if m:
            port = int(m.group(1))
    return port


def _moved_port(out: str, k: Knowledge) -> bool:
    """The server noticed the taken port and came up on another one (Next.js, Vite)."""
    return bool(k.moved_port and k.moved_port.search(out))


def _death_line(out: str, crash_at: int) -> str:
    """The line that tells how it died: the last telling line from the crash on (a traceback's
    ``OSError: [Errno 98] Address already in use``), else its last line."""
    lines = telling_lines(out[crash_at:], 1)
    return _short(lines[-1] if lines else line_at(out, crash_at), 120)


def _last(pattern: re.Pattern[str] | None, text: str) -> int:
    if pattern is None:
        return -1
    pos = -1
    for m in pattern.finditer(text):
        pos = m.start()
    return pos


def _in_order(launches: dict[int, Launch]) -> list[Launch]:
    """A tracker's table of launches (``alive``, ``not_ended``) in the order they started."""
    return [launches[seq] for seq in sorted(launches)]


def _seq(launch: Launch) -> int:
    return launch.seq


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


@cache
def shipped_knowledge() -> Knowledge:
    """The process knowledge as shipped: the ``[params]`` of the duplicate-launch rule file,
    which owns it, for a reader of the ledger when that rule did not run."""
    [path] = sorted(rules_dir().glob("*-duplicate-launch.toml"))
    return Knowledge.build(**read_rule_file(path)["params"])


ChildLoader = Callable[[Session, ToolCall, ToolResultTurn], "Session | None"]
"""Finds the child session a subagent call ran, when its file is at hand (else None)."""

ChildLaunches = Callable[[Session, Knowledge], list["Launch"]]
"""A child session's launches under a knowledge: the session analysis hands its own ledger
of the child, so a child also scanned on its own has its ledger built once."""


def track(session: Session, know: Knowledge,
          children: ChildLoader | None = None) -> list[Launch]:
    """Every long-running launch in ``session``, with its state changes and up signals."""
    return Tracker(session, know, children).run()


def build_ledger(session: Session, know: Knowledge,
                 children: ChildLoader | None = None,
                 child_launches: ChildLaunches | None = None) -> Ledger:
    """The process ledger of ``session``: launches with their events, and every kill."""
    return Tracker(session, know, children, child_launches).ledger()
