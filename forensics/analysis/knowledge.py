"""The shared knowledge file (``rules/analysis.toml``): lists more than one rule or report reads."""

from __future__ import annotations

import tomllib
from functools import cache
from typing import Any

from forensics.errors import RuleError
from forensics.resources import rules_dir

SHARED_FILE = "analysis.toml"


@cache
def shared() -> dict[str, Any]:
    path = rules_dir() / SHARED_FILE
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise RuleError(f"{path}: {exc}") from None
    data.pop("covered", None)  # the coverage records are for the tests, not knowledge
    return data
