"""FX002 duplicate-launch: the assistant started again what was already running.

The process-state model lives in ``forensics.processes``; this module only asks it, for every
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

from collections.abc import Iterator
from typing import Any

from forensics.findings import Finding
from forensics.model import Session
from forensics.processes import Knowledge, Launch, State, track
from forensics.rules import rule


@rule("FX002")
def duplicate_launch(
    session: Session,
    *,
    server_commands: dict[str, str],
    default_ports: dict[str, int],
    background_markers: list[str],
    short_commands: list[str],
    weak_launchers: list[str],
    reconciling_commands: list[str],
    port_patterns: list[str],
    bound_port_patterns: list[str],
    kill_commands: dict[str, Any],
    harness_kill_tools: dict[str, str],
    harness_poll_tools: dict[str, str],
    background_id_patterns: list[str],
    output_file_patterns: list[str],
    job_end_notifications: list[str],
    pid_patterns: list[str],
    port_conflict_patterns: list[str],
    conflict_port_patterns: list[str],
    crash_patterns: list[str],
    killed_patterns: list[str],
    up_patterns: list[str],
    health_ok_patterns: list[str],
    health_check_commands: str,
    down_patterns: list[str],
    user_up_words: list[str],
    relaunch_request_words: list[str],
    failure_words: list[str],
    script_child_names: list[str],
    resume_gap_minutes: float,
) -> Iterator[Finding]:
    know = Knowledge.build(
        server_commands=server_commands, default_ports=default_ports,
        background_markers=background_markers, short_commands=short_commands,
        weak_launchers=weak_launchers, reconciling_commands=reconciling_commands,
        port_patterns=port_patterns, bound_port_patterns=bound_port_patterns,
        kill_commands=kill_commands, harness_kill_tools=harness_kill_tools,
        harness_poll_tools=harness_poll_tools, background_id_patterns=background_id_patterns,
        output_file_patterns=output_file_patterns, job_end_notifications=job_end_notifications,
        pid_patterns=pid_patterns, port_conflict_patterns=port_conflict_patterns,
        conflict_port_patterns=conflict_port_patterns,
        crash_patterns=crash_patterns, killed_patterns=killed_patterns, up_patterns=up_patterns,
        health_ok_patterns=health_ok_patterns,
        health_check_commands=health_check_commands, down_patterns=down_patterns,
        user_up_words=user_up_words, relaunch_request_words=relaunch_request_words,
        failure_words=failure_words, script_child_names=script_child_names,
        resume_gap_minutes=resume_gap_minutes,
    )
    launches = track(session, know)
    if len(launches) < 2:
        return
    best: dict[int, Finding] = {}
    for i, later in enumerate(launches):
        finding = _judge(later, launches[:i])
        if finding is None:
            continue
        kept = best.get(finding.turn)
        if kept is None or _rank(finding) < _rank(kept):
            best[finding.turn] = finding
    yield from (best[t] for t in sorted(best))


_RANK = {"high": 0, "medium": 1, "low": 2}


def _rank(f: Finding) -> int:
    return _RANK[f.severity]


def _judge(later: Launch, earlier: list[Launch]) -> Finding | None:
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
        return _finding(later, first, resumed=False)
    if unknown and later.conflict:
        first = unknown[-1]
        # a more recent equivalent launch that was ended explains the taken port (dying process)
        for e in earlier:
            if e.seq > first.seq and e.equivalent(later):
                state, change = e.state_before(later.clock)
                if state is State.ENDED and change is not None and change.kind.startswith("kill"):
                    return None
        return _finding(later, first, resumed=True)
    return None


def _finding(later: Launch, first: Launch, *, resumed: bool) -> Finding:
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
    if first.normalized != later.normalized and first.port == later.port:
        where = f"{_code(first.normalized or first.command)} from {first.anchor}, on the same port,"
    user = next((s for s in reversed(signals) if s.kind == "user"), None)
    health = next((s for s in reversed(signals) if s.kind == "health"), None)
    ready = next((s for s in reversed(signals) if s.kind == "output"), None)

    if resumed:
        severity = "medium"
        reason = ("the session had resumed, so the earlier launch's state was unknown, but the "
                  "relaunch found its port taken")
        tail = "after the session resumed; the relaunch found the port still taken"
        return Finding(turn=later.turn, anchor=later.anchor, severity=severity,
                       severity_reason=reason,
                       message=f"Relaunched {command}{port} while {where} may still have been "
                               f"up: {tail}.",
                       evidence=sorted(evidence))
    clauses: list[str] = []  # what the message adds after "was still up"
    reasons: list[str] = []  # why the severity is high
    if later.conflict:
        reasons.append("the relaunch's output shows the port was already taken")
        if later.moved and later.port and later.port != first.port:
            clauses.append(f"its port was taken, so it came up on {later.port}: two copies now run")
        else:
            clauses.append("the relaunch reported its port already in use")
    if later.killed_at_once:
        reasons.append("the relaunch was killed at once")
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
    if later.conflict or later.killed_at_once:
        severity, reason = "high", "; ".join(reasons)
    elif first.weak or later.weak:
        severity = "low"
        reason = ("a second window of the same app with nothing closing the first; the user may "
                  "have closed it unseen")
    elif reasons:
        severity, reason = "high", "; ".join(reasons)
    else:
        severity, reason = "medium", "nothing in the transcript ended the earlier launch"
    revived = next((c for c in first.changes if c.kind == "revived" and c.clock < later.clock),
                   None)
    if revived:
        clauses.append(f"the earlier kill had missed ({revived.reason})")
    message = f"Relaunched {command}{port} while {where} was still up"
    if clauses:
        message += "; " + "; ".join(clauses)
    return Finding(turn=later.turn, anchor=later.anchor, severity=severity,
                   severity_reason=reason, message=_sentence(message), evidence=sorted(evidence))


def _sentence(text: str) -> str:
    """End with one full stop, also after a quoted ``"Ready."``."""
    return text if text.endswith((".", '."', '!"', '?"', "。\"", "。")) else text + "."


def _code(command: str, width: int = 100) -> str:
    """The command in backticks; a long one keeps its head and its tail (where flags differ)."""
    text = " ".join(command.split())
    if len(text) > width:
        head = text[: width // 2].rsplit(" ", 1)[0]
        tail = text[-(width // 2):].split(" ", 1)[-1]
        text = f"{head} … {tail}"
    return f"`{text}`"
