"""forensics: find what went wrong in AI coding-agent sessions.

    >>> import forensics
    >>> sessions = forensics.load("session.jsonl")
    >>> report = forensics.scan("sessions.tar.gz")   # .incidents / .turns are polars frames
"""

from forensics.errors import ConfigError, ForensicsError, IngestError, UnknownFormatError
from forensics.ingest import iter_sessions
from forensics.model import (
    AssistantTurn,
    EventTurn,
    ReadIssue,
    Session,
    ToolCall,
    ToolResultTurn,
    UserTurn,
)
from forensics.notebook import ScanReport, load, read_incidents, read_turns, scan

__version__ = "0.1.0"

__all__ = [
    "AssistantTurn",
    "ConfigError",
    "EventTurn",
    "ForensicsError",
    "IngestError",
    "ReadIssue",
    "ScanReport",
    "Session",
    "ToolCall",
    "ToolResultTurn",
    "UnknownFormatError",
    "UserTurn",
    "iter_sessions",
    "load",
    "read_incidents",
    "read_turns",
    "scan",
]
