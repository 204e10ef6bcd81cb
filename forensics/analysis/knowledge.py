"""The shared knowledge file (``rules/analysis.toml``): lists more than one rule or report reads."""

from __future__ import annotations

from functools import cache
from typing import Any

from forensics.errors import RuleError
from forensics.resources import read_rule_file, rules_dir

SHARED_FILE = "analysis.toml"


@cache
def shared() -> dict[str, Any]:
    path = rules_dir() / SHARED_FILE
    try:
        return read_rule_file(path)  # without the coverage records: for the tests, not knowledge
    except (OSError, ValueError) as exc:  # tomllib.TOMLDecodeError, or not UTF-8
        raise RuleError(f"{path}: {exc}") from None
