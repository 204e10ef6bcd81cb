"""The one exception tree of forensics.

    ForensicsError
    ├── IngestError            a source could not be read at all (names path and line)
    │   └── UnknownFormatError no reader recognises the content
    ├── ConfigError            a config file or rule parameter is invalid
    └── RuleError              a rule file and its implementation disagree

Only ``forensics.cli`` turns these into exit codes; everything else raises or records.
"""

from __future__ import annotations


class ForensicsError(Exception):
    """Base of every error forensics raises on purpose."""


class IngestError(ForensicsError):
    def __init__(self, path: str, message: str, *, line: int | None = None) -> None:
        self.path = str(path)
        self.line = line
        self.reason = message
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {message}")


class UnknownFormatError(IngestError):
    pass


class ConfigError(ForensicsError):
    pass


class RuleError(ForensicsError):
    pass
