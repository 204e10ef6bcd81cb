"""Subagent transcripts parsed once: the parent's process ledger reads each child's file
(``analysis.family``), and the walk, which reaches the child right after its parent
(``sniff.family_order``), takes that read instead of parsing the file again.

Only the family being scanned is kept: the first child read for another family lets the last
one go, and a read is handed over once. What is handed over was parsed from the very bytes
the walk read, with the reader the walk would pick, so a scan finds what it found before.
"""

from __future__ import annotations

from pathlib import Path

from forensics.model import Session

CHILD_FORMAT = "claude-code"

_kept: dict[str, tuple[bytes, list[Session]]] = {}
_family: set[str] = set()
"""The sources of the family whose children are kept: its first parent, then each child."""


def read_child(parent_source: str, path: Path) -> list[Session]:
    """The sessions of a subagent's transcript, parsed once per family.

    Raises ``OSError`` or ``ForensicsError`` as reading the file would."""
    from forensics.ingest import read_bytes

    key = str(path)
    kept = _kept.get(key)
    if kept is not None:
        return kept[1]
    if parent_source not in _family:  # another family: the last one's children go
        forget()
        _family.add(parent_source)
    data = path.read_bytes()
    sessions = read_bytes(data, source=key, format=CHILD_FORMAT)
    _kept[key] = (data, sessions)
    _family.add(key)
    return sessions


def holds(path: str) -> bool:
    """Is a read of ``path`` waiting to be handed over (worth reading its bytes first)."""
    return path in _kept


def take(path: str, data: bytes, format: str | None) -> list[Session] | None:
    """The kept sessions of ``path`` if they were parsed from ``data`` by the reader ``format``
    names (None: the one sniffing picks), else None (then parse as usual). Once: a second
    scan of the same file parses it again."""
    kept = _kept.pop(path, None)
    if kept is None or kept[0] != data:
        return None
    if format is None:
        from forensics.ingest.sniff import HEAD_BYTES, sniff_bytes

        format = sniff_bytes(data[:HEAD_BYTES])
    return kept[1] if format == CHILD_FORMAT else None


def forget() -> None:
    """Let every kept read go (a walk that ended, a new family)."""
    _kept.clear()
    _family.clear()


def same_family(earlier: str, label: str) -> bool:
    """Is ``label`` a subagent transcript of the family ``earlier`` belongs to (its parent's
    file, or a sibling child), as ``sniff.family_order`` lists them."""
    child = Path(label).parent
    if child.name != "subagents":
        return False
    before = Path(earlier)
    return child.parent == before.with_suffix("") or child == before.parent
