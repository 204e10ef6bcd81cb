"""One analysis of each session, built once and shared by every rule and report.

``analysis_of(session)`` returns the session's ``Analysis``: the typed command of every shell
call (parsed once, cached by text), the outcome of every tool result, the exchanges (a user
message and everything up to the next), and the process ledger for a given ``Knowledge``. Rules
read these facts; they do not parse commands or judge results themselves. The analysis is kept
while the session lives, so every rule run over one session shares it.
"""

from __future__ import annotations

import weakref
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from functools import cached_property

from forensics.analysis.commands import Command, parse_script
from forensics.analysis.family import child_session
from forensics.analysis.ledger import Knowledge, Ledger, build_ledger, shipped_knowledge
from forensics.analysis.outcome import Outcome, OutcomeRules
from forensics.analysis.outcome import outcome as judge_outcome
from forensics.analysis.shell import command_of
from forensics.model import AssistantTurn, EventTurn, Session, ToolCall, ToolResultTurn, Turn, UserTurn

STOP_EVENTS = frozenset({"abort", "interrupt"})
"""Events that mean the user stopped the assistant: what came after was not its choice."""


@dataclass
class Exchange:
    """A user message (None before the first) and every turn after it up to the next one."""

    user: UserTurn | None
    turns: list[Turn] = field(default_factory=list)

    @property
    def stopped(self) -> bool:
        """Did the user abort or interrupt within it."""
        return user_stopped(self.turns)


def user_stopped(turns: list[Turn]) -> bool:
    return any(_stops(t) for t in turns)


def _stops(turn: Turn) -> bool:
    """The user stopped the assistant here: an abort or interrupt event, an aborted reply."""
    return ((isinstance(turn, EventTurn) and turn.event in STOP_EVENTS)
            or (isinstance(turn, AssistantTurn) and turn.aborted))


class _ExchangeMarks:
    """Found in one pass, so that a failure's look at the rest of its exchange is a slice and a
    lookup, not a walk (a loop of failures in one long exchange grew with its square): the
    indices, ascending, of the messages the user typed, of the stops (an abort or interrupt
    event, an aborted reply) and of the assistant's turns, and those turns."""

    __slots__ = ("size", "users", "stops", "assistant", "assistant_turns")

    def __init__(self, turns: list[Turn]) -> None:
        self.size = len(turns)
        self.users = [i for i, t in enumerate(turns) if isinstance(t, UserTurn)]
        self.stops = [i for i, t in enumerate(turns)
                      if isinstance(t, (EventTurn, AssistantTurn)) and _stops(t)]
        self.assistant = [i for i, t in enumerate(turns) if isinstance(t, AssistantTurn)]
        self.assistant_turns = [turns[i] for i in self.assistant]

    def next_of(self, indices: list[int], i: int) -> int:
        """The first of ``indices`` at or after ``i``, or the number of turns."""
        k = bisect_left(indices, i)
        return indices[k] if k < len(indices) else self.size


@dataclass(frozen=True)
class Run:
    """One tool call and what came of it."""

    turn: AssistantTurn
    call: ToolCall
    result: ToolResultTurn | None
    command: str | None
    """The shell script the call ran, if it ran one."""


class Analysis:
    """The facts of one session that more than one rule or report needs."""

    def __init__(self, session: Session) -> None:
        self._session = weakref.ref(session)
        self._ledgers: dict[int, tuple[Knowledge, Ledger]] = {}
        self._outcomes: dict[tuple[str, int], tuple[OutcomeRules | None, Outcome]] = {}

    @property
    def session(self) -> Session:
        session = self._session()
        assert session is not None, "the analysis outlived its session"
        return session

    # -- commands ------------------------------------------------------------------------

    def script(self, call: ToolCall | None) -> str | None:
        """The shell script a call ran, if it ran one."""
        return command_of(call) if call is not None else None

    def commands(self, call: ToolCall | None) -> tuple[Command, ...]:
        """The call's script as typed commands, one per pipeline (cached by text)."""
        script = self.script(call)
        return parse_script(script) if script else ()

    def call_of(self, result: ToolResultTurn) -> ToolCall | None:
        owner = self.session.call_for(result)
        return owner[1] if owner else None

    @cached_property
    def runs(self) -> list[Run]:
        """Every tool call in order, with its result (None when it never came back) and its
        script: read by several rules, so made once (the list is shared: do not change it)."""
        session = self.session
        out = []
        for turn in session.turns:
            if isinstance(turn, AssistantTurn):
                for call in turn.tool_calls:
                    out.append(Run(turn, call, session.result_for(call), command_of(call)))
        return out

    # -- results -------------------------------------------------------------------------

    def outcome(self, result: ToolResultTurn, rules: OutcomeRules | None = None) -> Outcome:
        """How ``result`` ended (with the shared lists unless a rule passes its own)."""
        key = (result.call_id, id(rules))  # hashing the lists on every call cost more
        kept = self._outcomes.get(key)
        if kept is None or kept[0] is not rules:
            kept = self._outcomes[key] = (rules, judge_outcome(
                result, self.script(self.call_of(result)), rules))
        return kept[1]

    # -- exchanges -----------------------------------------------------------------------

    @cached_property
    def exchanges(self) -> list[Exchange]:
        out = [Exchange(None)]
        for turn in self.session.turns:
            if isinstance(turn, UserTurn):
                out.append(Exchange(turn))
            else:
                out[-1].turns.append(turn)
        return out

    def rest_of_exchange(self, ordinal: int) -> list[Turn]:
        """Turns after ``ordinal`` up to (not including) the next message the user typed."""
        marks = self._marks
        return self.session.turns[ordinal:marks.next_of(marks.users, ordinal)]

    def stopped_after(self, ordinal: int) -> bool:
        """Did the user abort or interrupt after ``ordinal``, before typing again
        (``user_stopped`` of the rest of the exchange)."""
        marks = self._marks
        return marks.next_of(marks.stops, ordinal) < marks.next_of(marks.users, ordinal)

    def replies_after(self, ordinal: int) -> tuple[int, int]:
        """Where the assistant's turns after ``ordinal`` and before the user types again lie in
        ``assistant_turns``: ``assistant_turns[lo:hi]``."""
        marks = self._marks
        return (bisect_left(marks.assistant, ordinal),
                bisect_left(marks.assistant, marks.next_of(marks.users, ordinal)))

    def exchange_replies(self, ordinal: int) -> tuple[int, int]:
        """Where the assistant's turns of the whole exchange holding ``ordinal`` (from the
        user's message before it to the next) lie in ``assistant_turns``: a span that every
        ``replies_after`` of a turn in it ends with."""
        marks = self._marks
        before = bisect_right(marks.users, ordinal) - 1
        start = marks.users[before] if before >= 0 else 0
        return (bisect_left(marks.assistant, start),
                bisect_left(marks.assistant, marks.next_of(marks.users, ordinal + 1)))

    @property
    def assistant_turns(self) -> list[AssistantTurn]:
        """Every assistant turn of the session, in order."""
        return self._marks.assistant_turns

    @cached_property
    def _marks(self) -> "_ExchangeMarks":
        return _ExchangeMarks(self.session.turns)

    # -- processes -----------------------------------------------------------------------

    def latest_ledger(self) -> Ledger | None:
        """The ledger a rule last built for this session (None: no rule asked for one)."""
        return next(reversed(self._ledgers.values()))[1] if self._ledgers else None

    def process_ledger(self) -> Ledger:
        """The session's process ledger for a rule that does not own the process knowledge: the
        one the duplicate-launch rule built (under the user's config), else one under the
        shipped knowledge (that rule not selected)."""
        latest = self.latest_ledger()
        return latest if latest is not None else self.ledger(shipped_knowledge())

    def ledger(self, know: Knowledge) -> Ledger:
        """The process ledger under ``know`` (built once per knowledge)."""
        kept = self._ledgers.get(id(know))
        if kept is None or kept[0] is not know:
            kept = self._ledgers[id(know)] = (know, build_ledger(self.session, know,
                                                                 child_session, _launches))
        return kept[1]


_ANALYSES: dict[int, Analysis] = {}


def _launches(child: Session, know: Knowledge) -> list:
    """A subagent's launches, from its own analysis: the walk hands the child over to be
    scanned next (``ingest.handover``), and its scan reads the same ledger."""
    return analysis_of(child).ledger(know).launches


def analysis_of(session: Session) -> Analysis:
    """The session's analysis, built on first use and dropped with the session."""
    found = _ANALYSES.get(id(session))
    if found is not None and found._session() is session:
        return found
    made = _ANALYSES[id(session)] = Analysis(session)
    weakref.finalize(session, _ANALYSES.pop, id(session), None)
    return made


__all__ = ["Analysis", "Command", "Exchange", "Knowledge", "Ledger", "Outcome", "OutcomeRules",
           "Run", "STOP_EVENTS", "analysis_of", "user_stopped"]
