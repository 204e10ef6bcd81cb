"""FX103 context-compaction: the harness compacted the context (a harness event worth a row).

One finding per compaction, anchored at its boundary record (Claude Code ``compact_boundary``,
Codex ``compacted`` / ``context_compacted``, opencode's compaction part or summary message);
records of the same compaction with nothing between them are one finding.
"""

from __future__ import annotations

from collections.abc import Iterator

from forensics.analysis.params import NoParams
from forensics.findings import Evidence, Finding
from forensics.model import EventTurn, Session
from forensics.rules import rule
from forensics.rules._harness import event_runs


@rule("FX103")
def context_compaction(session: Session, params: NoParams) -> Iterator[Finding]:
    def wanted(turn) -> bool:
        return isinstance(turn, EventTurn) and turn.event == "compaction"

    total = 0
    for run in event_runs(session, wanted):
        total += 1
        head = run[0]
        trigger = next((t.detail.get("trigger") for t in run
                        if isinstance(t.detail.get("trigger"), str)), None)
        micro = any("micro" in str(t.detail.get("subtype", "")) for t in run)
        what = "The context was micro-compacted" if micro else "The context was compacted"
        if trigger in ("auto", "manual"):
            what += " automatically" if trigger == "auto" else " at the user's request"
        facts = [Evidence(kind="event", role="compaction" if t is head else "same compaction",
                          turn=t.ordinal, anchor=t.anchor, quote=trigger or "")
                 for t in run]
        yield Finding(turn=head.ordinal, anchor=head.anchor, severity="low",
                      severity_reason="a harness event, counted: not the assistant's mistake",
                      message=f"{what} (compaction {total} of this session).",
                      evidence=[t.ordinal for t in run[1:]], facts=facts)
