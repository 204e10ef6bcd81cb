"""forensics: find what went wrong in AI coding-agent sessions.

    >>> import forensics
    >>> sessions = forensics.load("session.jsonl")
"""

from forensics.errors import ConfigError, ForensicsError, IngestError, UnknownFormatError
from forensics.ingest import iter_sessions, load
from forensics.model import (
    AssistantTurn,
    EventTurn,
    ReadIssue,
    Session,
    ToolCall,
    ToolResultTurn,
    UserTurn,
)

__version__ = "0.1.0"

__all__ = [
    "AssistantTurn",
    "ConfigError",
    "EventTurn",
    "ForensicsError",
    "IngestError",
    "ReadIssue",
    "Session",
    "ToolCall",
    "ToolResultTurn",
    "UnknownFormatError",
    "UserTurn",
    "iter_sessions",
    "load",
]
