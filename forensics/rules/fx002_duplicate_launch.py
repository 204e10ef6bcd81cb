"""FX002 duplicate-launch: the assistant started again what was already running.

The process ledger lives in ``forensics.analysis.ledger``; this module only asks it, for every
launch, whether an equivalent earlier launch (same normalised command, or same port) was still
alive when it came, and says how sure the transcript makes that:

* high: the relaunch's own output shows the port taken, or it was killed at once, or the earlier
  launch had been shown up (a health check answered, its output said ready, the user said so);
* low: a ``Start-Process`` / GUI window twice (the user may have closed the first unseen);
* medium otherwise, and when the session had resumed (state unknown) but the relaunch still
  found its port taken.

``docker compose up -d`` (and other reconciling launchers) on a running stack is flagged only when
its output shows a conflict.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Iterator

from forensics.analysis.ledger import Clock, Knowledge, Launch, Ledger, Signal, State
from forensics.analysis.session import analysis_of
from forensics.analysis.text import code_span as _code
from forensics.findings import Evidence, Finding
from forensics.model import Session
from forensics.rules import rule


EARLIER_LISTED = 5
"""Equivalent earlier launches a finding names one by one (the one it relaunched over, the first
of all, the latest); two or more others are counted in one fact. Listing every one made a
relaunch loop quadratic: each of 1,000 relaunches named all the launches before it (180 MB of
JSON)."""

SIGNALS_LISTED = 5
"""Signals that the earlier launch was up a finding names (the latest; the message still reads
all of them)."""


@rule("FX002")
def duplicate_launch(session: Session, params: Knowledge) -> Iterator[Finding]:
    ledger = analysis_of(session).ledger(params)
    launches = ledger.launches
    if len(launches) < 2:
        return
    best: dict[int, Finding] = {}
    candidates = _Candidates(launches)
    for i, later in enumerate(launches):
        finding = _judge(i, later, candidates, ledger)
        candidates.open(i)
        if finding is None:
            continue
        kept = best.get(finding.turn)
        if kept is None or _rank(finding) < _rank(kept):
            best[finding.turn] = finding
    yield from (best[t] for t in sorted(best))


class _Candidates:
    """For each launch, the earlier ones that can be ``equivalent`` to it: those sharing one of its
    ports or its normalised command (``equivalent`` holds of no other), and which of them still
    matter to its judgement. Looking back over every earlier launch grew with the square of the
    launches; a relaunch loop of one server is thousands of equivalent launches.

    * ``before``: every such earlier launch, in launch order (the evidence).
    * ``newest_open``: the same, newest first, without the settled ones: ended for good before
      any later launch, so no later judgement finds them alive or unknown; or unknown for good,
      kept as the newest one of each shape (``newest_unknown``).
    * ``equivalent``: asked once per shape of launch (``Launch.shape``)."""

    def __init__(self, launches: list[Launch]) -> None:
        self.launches = launches
        self.by_port: dict[int, list[int]] = {}
        self.by_command: dict[str, list[int]] = {}
        self.by_shape: dict[tuple, list[int]] = {}
        self.shapes_by_port: dict[int, dict[tuple, Launch]] = {}
        self.shapes_by_command: dict[str, dict[tuple, Launch]] = {}
        self.open_by_port: dict[int, list[int]] = {}
        self.open_by_command: dict[str, list[int]] = {}
        for i, e in enumerate(launches):
            for port in {e.port, e.requested_port} - {None}:
                self.by_port.setdefault(port, []).append(i)
                self.shapes_by_port.setdefault(port, {}).setdefault(e.shape, e)
            self.by_command.setdefault(e.normalized, []).append(i)
            self.shapes_by_command.setdefault(e.normalized, {}).setdefault(e.shape, e)
            self.by_shape.setdefault(e.shape, []).append(i)
        # the earliest clock of any launch from i on: a launch whose last change (an end) comes
        # before it is ended whenever launch i or a later one asks
        self.earliest_from: list[Clock] = [launch.clock for launch in launches]
        for i in range(len(launches) - 2, -1, -1):
            self.earliest_from[i] = min(self.earliest_from[i], self.earliest_from[i + 1])
        self.settled_unknown: dict[tuple, int] = {}
        """The newest position of each shape whose launch was unknown for good (state unknown,
        no change to come, no deadline): off the walk, since only the newest one is relaunched
        over and equivalence goes by shape."""
        self._answers: dict[tuple, bool] = {}
        self._asker: Launch | None = None

    def equivalent(self, e: Launch, later: Launch) -> bool:
        if later is not self._asker:
            self._asker, self._answers = later, {}
        shape = e.shape
        answer = self._answers.get(shape)
        if answer is None:
            answer = self._answers[shape] = e.equivalent(later)
        return answer

    def _lists(self, later: Launch, by_port: dict, by_command: dict) -> list:
        """``later``'s entries in the by-port and by-command maps given, each once."""
        found = [by_command.get(later.normalized)]
        found += [by_port.get(p) for p in {later.port, later.requested_port, later.conflict_port}
                  if p is not None]
        unique = {id(entry): entry for entry in found if entry}
        return list(unique.values())

    def before(self, i: int, *, newest_first: bool = False, since: int = 0) -> Iterator[Launch]:
        """The candidates of launch ``i`` from position ``since`` on."""
        lists = [lst[bisect_left(lst, since):bisect_left(lst, i)]
                 for lst in self._lists(self.launches[i], self.by_port, self.by_command)]
        for j in _merged(lists, newest_first):
            yield self.launches[j]

    def newest_open(self, i: int) -> Iterator[tuple[int, Launch]]:
        """The open earlier candidates of launch ``i``, newest first; those found settled are
        closed for the launches after it as the walk passes them."""
        lists = self._lists(self.launches[i], self.open_by_port, self.open_by_command)
        settled: list[int] = []
        try:
            for j in _merged(lists, newest_first=True):
                e = self.launches[j]
                last = e.changes[-1] if e.changes else None
                if last is not None and last.clock < self.earliest_from[i]:
                    if last.state is State.ENDED:
                        settled.append(j)
                        continue
                    if last.state is State.UNKNOWN and e.deadline is None:
                        settled.append(j)  # unknown for good: the newest of its shape stands
                        self.settled_unknown[e.shape] = max(self.settled_unknown.get(e.shape, j), j)
                        continue
                yield j, e
        finally:
            for j in settled:
                for lst in lists:
                    k = bisect_left(lst, j)
                    if k < len(lst) and lst[k] == j:
                        del lst[k]

    def newest_unknown(self, i: int, walked: int) -> int:
        """The newest equivalent launch before ``i`` in an unknown state: the one the walk met
        (its position, or -1), or a newer one settled unknown (by shape: one ``equivalent``
        each); its position, or -1."""
        later, newest = self.launches[i], walked
        for kinds in self._lists(later, self.shapes_by_port, self.shapes_by_command):
            for shape, e in kinds.items():
                j = self.settled_unknown.get(shape, -1)
                if j > newest and self.equivalent(e, later):
                    newest = j
        return newest

    def open(self, i: int) -> None:
        """Launch ``i`` is judged: it is a candidate of the launches after it."""
        e = self.launches[i]
        for port in {e.port, e.requested_port} - {None}:
            self.open_by_port.setdefault(port, []).append(i)
        self.open_by_command.setdefault(e.normalized, []).append(i)

    def count_equivalent(self, i: int) -> int:
        """How many launches before ``i`` are equivalent to it: per shape among its candidates,
        one ``equivalent`` and a count of that shape's launches before it."""
        later = self.launches[i]
        shapes: dict[tuple, Launch] = {}
        for kinds in self._lists(later, self.shapes_by_port, self.shapes_by_command):
            shapes.update(kinds)
        return sum(bisect_left(self.by_shape[shape], i) for shape, e in shapes.items()
                   if self.equivalent(e, later))


def _merged(lists: list[list[int]], newest_first: bool) -> Iterator[int]:
    """The positions of ascending ``lists`` once each, in order (or newest first)."""
    if len(lists) == 1:
        yield from (reversed(lists[0]) if newest_first else lists[0])
        return
    last = None
    runs = [reversed(lst) for lst in lists] if newest_first else lists
    for j in heapq.merge(*runs, reverse=newest_first):
        if j != last:
            yield j
            last = j


_RANK = {"high": 0, "medium": 1, "low": 2}


def _rank(f: Finding) -> int:
    return _RANK[f.severity]


def _judge(i: int, later: Launch, candidates: _Candidates, ledger: Ledger) -> Finding | None:
    """A finding when an equivalent earlier launch was alive (or unknown, with a conflict): the
    newest alive one, else the newest unknown one."""
    alive: Launch | None = None
    unknown: Launch | None = None
    unknown_at = -1
    for j, e in candidates.newest_open(i):
        if not candidates.equivalent(e, later):
            continue
        if e.deadline is not None and later.time is not None and later.time > e.deadline:
            continue
        state, _ = e.state_before(later.clock)
        if state is State.ALIVE:
            alive = e
            break
        if state is State.UNKNOWN and unknown is None:
            unknown, unknown_at = e, j
    if later.reconciling and not later.conflict:
        return None
    if alive is not None:
        if alive.reconciling and not later.conflict:
            return None
        return _finding(i, later, alive, candidates, ledger, resumed=False)
    if later.conflict:
        unknown_at = candidates.newest_unknown(i, unknown_at)
        unknown = candidates.launches[unknown_at] if unknown_at >= 0 else None
    if unknown is not None and later.conflict:
        # a more recent equivalent launch that was ended explains the taken port (dying process)
        for e in candidates.before(i, since=unknown_at + 1):
            if e.seq > unknown.seq and candidates.equivalent(e, later):
                state, change = e.state_before(later.clock)
                if state is State.ENDED and change is not None and change.kind.startswith("kill"):
                    return None
        return _finding(i, later, unknown, candidates, ledger, resumed=True)
    return None


def _finding(i: int, later: Launch, first: Launch, candidates: _Candidates, ledger: Ledger, *,
             resumed: bool) -> Finding:
    """The finding on ``later``'s turn: message, severity and why, evidence ordinals."""
    signals = [s for s in first.signals if first.clock < s.clock < later.clock]
    evidence = {first.turn}
    if first.result:
        evidence.add(first.result)
    for change in first.changes:
        if change.clock < later.clock and change.kind in ("revived", "resume", "kill-pid",
                                                          "kill-unresolved"):
            evidence.add(change.ordinal)
    for s in signals[-SIGNALS_LISTED:]:
        evidence.add(s.ordinal)
    if later.result:
        evidence.add(later.result)
    evidence.discard(later.turn)

    command = _code(later.normalized or later.command)
    port = later.requested_port or (first.port if later.moved else later.port)
    port = f" (port {port})" if port else ""
    where = f"the launch at {first.anchor}"
    if first.delegated:
        where = f"the process its subagent ({first.anchor}) left running"
    elif first.normalized != later.normalized and first.port == later.port:
        where = f"{_code(first.normalized or first.command)} from {first.anchor}, on the same port,"
    user = next((s for s in reversed(signals) if s.kind == "user"), None)
    health = next((s for s in reversed(signals) if s.kind == "health"), None)
    ready = next((s for s in reversed(signals) if s.kind == "output"), None)
    told = next((s for s in reversed(signals) if s.kind == "subagent"), None)

    facts = _facts(i, later, first, candidates, ledger, signals)
    if resumed:
        severity = "medium"
        reason = ("the session had resumed, so the earlier launch's state was unknown, but the "
                  "relaunch found its port taken")
        if later.result_words:
            reason += f" (\"{later.result_words}\")"
        tail = "after the session resumed; the relaunch found the port still taken"
        return Finding(turn=later.turn, anchor=later.anchor, severity=severity,
                       severity_reason=reason,
                       message=f"Relaunched {command}{port} while {where} may still have been "
                               f"up: {tail}.",
                       evidence=sorted(evidence), facts=facts)
    clauses: list[str] = []  # what the message adds after "was still up"
    reasons: list[str] = []  # why the severity is high
    if later.conflict:
        reasons.append("the relaunch's output shows the port was already taken"
                       + (f" (\"{later.result_words}\")" if later.result_words else ""))
        if later.moved and later.port and later.port != first.port:
            clauses.append(f"its port was taken, so it came up on {later.port}: two copies now run")
        else:
            clauses.append("the relaunch reported its port already in use")
    if later.killed_at_once:
        reasons.append("the relaunch was killed at once"
                       + (f" (\"{later.result_words}\")" if later.result_words else ""))
        clauses.append("the relaunch was killed at once")
    if user:
        reasons.append(f"the user had said it was up (\"{user.text}\")")
        clauses.append(f"the user had said \"{user.text}\"")
    elif health:
        reasons.append(f"a health check had answered ({health.text})")
        clauses.append(f"a health check had answered ({health.text})")
    elif ready:
        reasons.append(f"its own output said it was up ({ready.text})")
        clauses.append(f"its output had said it was up ({ready.text})")
    elif told:
        reasons.append(f"the subagent's result said it was running (\"{told.text}\")")
        clauses.append(f"the subagent had said \"{told.text}\"")
    if later.conflict or later.killed_at_once:
        severity, reason = "high", "; ".join(reasons)
    elif first.weak or later.weak:
        severity = "low"
        reason = ("a second window of the same app with nothing closing the first; the user may "
                  "have closed it unseen")
    elif reasons:
        severity, reason = "high", "; ".join(reasons)
    else:
        severity, reason = "medium", (
            "nothing in the transcript ended the earlier launch "
            f"({_code(first.normalized or first.command, 60)} at {first.anchor})")
    revived = next((c for c in first.changes if c.kind == "revived" and c.clock < later.clock),
                   None)
    if revived:
        clauses.append(f"the earlier kill had missed ({revived.reason})")
    message = f"Relaunched {command}{port} while {where} was still up"
    if clauses:
        message += "; " + "; ".join(clauses)
    return Finding(turn=later.turn, anchor=later.anchor, severity=severity,
                   severity_reason=reason, message=_sentence(message), evidence=sorted(evidence),
                   facts=facts)


_SIGNAL_ROLES = {"health": "health check that answered", "output": "its output said it was up",
                 "user": "user said it was up", "running": "harness said it was running",
                 "subagent": "subagent said it was running"}


def _facts(i: int, later: Launch, first: Launch, candidates: _Candidates, ledger: Ledger,
           signals: list[Signal]) -> list[Evidence]:
    """The typed evidence: the equivalent earlier launches (past ``EARLIER_LISTED``, the first, the
    one relaunched over and the latest, the rest counted), what happened between, the relaunch."""
    facts: list[Evidence] = []
    for e in _listed_earlier(i, later, first, candidates, facts):
        state, change = e.state_before(later.clock)
        fate = ("no kill or exit recorded before the relaunch" if state is State.ALIVE else
                f"state unknown ({change.reason})" if state is State.UNKNOWN and change else
                f"killed at turn {change.ordinal}" if change and change.kind.startswith(
                    "kill") else f"ended: {change.reason}" if change else "")
        facts.append(Evidence(kind="launch", role="earlier launch" if e is first
                              else "earlier launch (ended)" if state is State.ENDED
                              else "earlier launch", turn=e.turn, anchor=e.anchor,
                              command=e.command, port=e.port, quote=fate))
    for kill in ledger.kills_between(first.clock, later.clock):
        if first.seq in kill.ended:
            missed = any(c.kind == "revived" and kill.clock < c.clock < later.clock
                         for c in first.changes)
            if not missed:
                continue
            role = "kill that missed"
        elif kill.ended:
            continue  # it stopped another process
        else:
            role = "kill that reached no launch it names"
        facts.append(Evidence(kind="kill", role=role, turn=kill.ordinal, anchor=kill.anchor,
                              command=kill.command))
    for signal in signals[-SIGNALS_LISTED:]:
        facts.append(Evidence(kind="message" if signal.kind == "user" else "check"
                              if signal.kind == "health" else "result",
                              role=_SIGNAL_ROLES.get(signal.kind, signal.kind),
                              turn=signal.ordinal, anchor=signal.anchor, quote=signal.text))
    facts.append(Evidence(kind="launch", role="relaunch", turn=later.turn, anchor=later.anchor,
                          command=later.command, port=later.port))
    if later.result is not None:
        role = ("port taken" if later.conflict and not later.killed_at_once else
                "killed at once" if later.killed_at_once else "relaunch result")
        facts.append(Evidence(kind="result", role=role, turn=later.result,
                              anchor=later.result_anchor, quote=later.result_words,
                              port=later.conflict_port))
    port = later.requested_port or (first.port if later.moved else later.port) or first.port
    if port:
        known = ("named in the command" if later.port_explicit or first.port_explicit else
                 "named in the relaunch's output" if port == later.conflict_port else
                 f"default of {later.server or first.server}" if (later.server or first.server)
                 else "named in the relaunch's output")
        facts.append(Evidence(kind="port", role="port both compete for", turn=later.turn,
                              anchor=later.anchor, port=port, quote=known))
    facts.sort(key=lambda f: f.turn)
    return facts


def _listed_earlier(i: int, later: Launch, first: Launch, candidates: _Candidates,
                    facts: list[Evidence]) -> list[Launch]:
    """The equivalent launches before ``later`` its finding names, in launch order; past
    ``EARLIER_LISTED`` the others go into ``facts`` as one counted fact."""
    def equivalents(newest_first: bool = False) -> Iterator[Launch]:
        return (e for e in candidates.before(i, newest_first=newest_first)
                if e is first or candidates.equivalent(e, later))

    total = candidates.count_equivalent(i)
    if total <= EARLIER_LISTED + 1:  # a count would stand for a single launch
        return list(equivalents())
    listed = {id(e): e for e in (next(equivalents()), first)}
    for e in equivalents(newest_first=True):
        if len(listed) >= EARLIER_LISTED:
            break
        listed.setdefault(id(e), e)
    since = next(e for e in equivalents() if id(e) not in listed)
    until = next(e for e in equivalents(newest_first=True) if id(e) not in listed)
    count = total - len(listed)
    facts.append(Evidence(kind="launch", role="earlier launches not listed", turn=since.turn,
                          anchor=since.anchor, quote=f"{count} more equivalent launches, turns "
                          f"{since.turn} to {until.turn}"))
    return sorted(listed.values(), key=lambda e: e.seq)


def _sentence(text: str) -> str:
    """End with one full stop, also after a quoted ``"Ready."``."""
    return text if text.endswith((".", '."', '!"', '?"', "。\"", "。")) else text + "."
