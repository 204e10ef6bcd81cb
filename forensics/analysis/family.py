"""A subagent call's child session, read from its own file when that file is at hand.

Claude Code keeps each subagent's transcript beside its parent's:
``<project>/<session id>.jsonl`` and ``<project>/<session id>/subagents/agent-<agentId>.jsonl``,
and the ``Task`` result names the child (``agentId: a1b2c3…``). The process ledger reads the
child's launches from it, so what the child left running is known by its command and port, not
only by the child's summary. The child is read while the parent's ledger is built and kept
until the walk reaches its file, right after the parent's (``ingest.handover``): memory stays
bounded by the session family, and the file is parsed once. Sources that are not plain files (archive
members, standard input) have no child at hand; the ledger then reads the result's words.
"""

from __future__ import annotations

import re
from pathlib import Path

from forensics import knowledge_cache
from forensics.errors import ForensicsError
from forensics.ingest import handover
from forensics.model import Session, ToolCall, ToolResultTurn

_AGENT_ID = knowledge_cache.compile(r"\bagentId:\s*([A-Za-z0-9_-]{4,64})\b")


def child_session(parent: Session, call: ToolCall, result: ToolResultTurn) -> Session | None:
    """The child session ``call`` ran, read from its own file, or None when not at hand."""
    if parent.format != "claude-code":
        return None
    found = _AGENT_ID.search(result.output or "")
    if not found:
        return None
    path = Path(parent.source).parent / parent.id / "subagents" / f"agent-{found.group(1)}.jsonl"
    try:
        if not path.is_file():  # never open a FIFO or a device: the read could block forever
            return None
        sessions = handover.read_child(parent.source, path)
    except (OSError, ForensicsError):
        return None
    return sessions[0] if sessions else None
