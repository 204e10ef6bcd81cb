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

from bisect import bisect_left
from collections.abc import Iterator

from forensics.analysis.ledger import Knowledge, Launch, Ledger, Signal, State
from forensics.analysis.session import analysis_of
from forensics.analysis.text import code_span as _code
from forensics.findings import Evidence, Finding
from forensics.model import Session
from forensics.rules import rule


@rule("FX002")
def duplicate_launch(session: Session, params: Knowledge) -> Iterator[Finding]:
    ledger = analysis_of(session).ledger(params)
    launches = ledger.launches
    if len(launches) < 2:
        return
    best: dict[int, Finding] = {}
    candidates = _Candidates(launches)
    for i, later in enumerate(launches):
        finding = _judge(later, candidates.before(i), ledger)
        if finding is None:
            continue
        kept = best.get(finding.turn)
        if kept is None or _rank(finding) < _rank(kept):
            best[finding.turn] = finding
    yield from (best[t] for t in sorted(best))


class _Candidates:
    """For each launch, the earlier ones that can be ``equivalent`` to it, in launch order: those
    sharing one of its ports or its normalised command (``equivalent`` holds of no other). Every
    launch looked back over every earlier one, which grew with the square of the launches."""

    def __init__(self, launches: list[Launch]) -> None:
        self.launches = launches
        self.by_port: dict[int, list[int]] = {}
        self.by_command: dict[str, list[int]] = {}
        for i, e in enumerate(launches):
            for port in {e.port, e.requested_port} - {None}:
                self.by_port.setdefault(port, []).append(i)
            self.by_command.setdefault(e.normalized, []).append(i)

    def before(self, i: int) -> list[Launch]:
        later = self.launches[i]
        found = set(_below(self.by_command.get(later.normalized, []), i))
        for port in (later.port, later.requested_port, later.conflict_port):
            if port is not None:
                found.update(_below(self.by_port.get(port, []), i))
        return [self.launches[j] for j in sorted(found)]


def _below(positions: list[int], i: int) -> list[int]:
    """The positions (ascending) before ``i``."""
    return positions[:bisect_left(positions, i)]


_RANK = {"high": 0, "medium": 1, "low": 2}


def _rank(f: Finding) -> int:
    return _RANK[f.severity]


def _judge(later: Launch, earlier: list[Launch], ledger: Ledger) -> Finding | None:
    """A finding when an equivalent earlier launch was alive (or unknown, with a conflict)."""
    alive: list[Launch] = []
    unknown: list[Launch] = []
    for e in earlier:
        if not e.equivalent(later):
            continue
        if e.deadline is not None and later.time is not None and later.time > e.deadline:
            continue
        state, _ = e.state_before(later.clock)
        if state is State.ALIVE:
            alive.append(e)
        elif state is State.UNKNOWN:
            unknown.append(e)
    if later.reconciling and not later.conflict:
        return None
    if alive:
        first = alive[-1]
        if first.reconciling and not later.conflict:
            return None
        return _finding(later, first, earlier, ledger, resumed=False)
    if unknown and later.conflict:
        first = unknown[-1]
        # a more recent equivalent launch that was ended explains the taken port (dying process)
        for e in earlier:
            if e.seq > first.seq and e.equivalent(later):
                state, change = e.state_before(later.clock)
                if state is State.ENDED and change is not None and change.kind.startswith("kill"):
                    return None
        return _finding(later, first, earlier, ledger, resumed=True)
    return None


def _finding(later: Launch, first: Launch, earlier: list[Launch], ledger: Ledger, *,
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
    for s in signals:
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

    facts = _facts(later, first, earlier, ledger, signals)
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


def _facts(later: Launch, first: Launch, earlier: list[Launch], ledger: Ledger,
           signals: list[Signal]) -> list[Evidence]:
    """The typed evidence: every equivalent earlier launch, what happened between, the relaunch.
    ``earlier``: the launches before ``later`` that can be equivalent to it (``first`` too)."""
    facts: list[Evidence] = []
    for e in earlier:
        if e is first or e.equivalent(later):
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
    for signal in signals:
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


def _sentence(text: str) -> str:
    """End with one full stop, also after a quoted ``"Ready."``."""
    return text if text.endswith((".", '."', '!"', '?"', "。\"", "。")) else text + "."
