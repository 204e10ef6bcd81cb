"""forensics: find what went wrong in AI coding-agent sessions.

    >>> import forensics
    >>> sessions = forensics.load("session.jsonl")
    >>> report = forensics.scan("sessions.tar.gz")   # .incidents / .turns are polars frames
"""

from forensics import knowledge_cache as _knowledge_cache

_knowledge_cache.keep_generated_code()  # before any of forensics' classes is made

from forensics.errors import (  # noqa: E402
    ConfigError,
    ForensicsError,
    IngestError,
    UnknownFormatError,
)

# Everything else loads on first use, so `forensics --help` does not pay for pydantic or polars.
_LAZY = {
    "iter_sessions": "forensics.ingest",
    "AssistantTurn": "forensics.model",
    "EventTurn": "forensics.model",
    "ReadIssue": "forensics.model",
    "Session": "forensics.model",
    "ToolCall": "forensics.model",
    "ToolResultTurn": "forensics.model",
    "UserTurn": "forensics.model",
    "ScanReport": "forensics.notebook",
    "harness_counts": "forensics.notebook",
    "load": "forensics.notebook",
    "read_incidents": "forensics.notebook",
    "read_turns": "forensics.notebook",
    "scan": "forensics.notebook",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'forensics' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


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
    "harness_counts",
    "iter_sessions",
    "load",
    "read_incidents",
    "read_turns",
    "scan",
]
