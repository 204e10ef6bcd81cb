"""Find the files that live outside the package: rule files, report templates and knowledge,
the sample; read a rule file.

In a source checkout they sit at the repository top (``rules/``, ``reports/templates/``); in an
installed wheel they are carried inside the package as ``forensics/_data/``. The secret patterns
of the redaction helper live in ``redaction/``.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

_PKG = Path(__file__).resolve().parent


@cache
def data_dir(name: str) -> Path:
    """``rules``, ``templates``, ``knowledge`` or ``redaction``: the installed copy if present,
    else the checkout's."""
    installed = _PKG / "_data" / name
    if installed.is_dir():
        return installed
    checkout = _PKG.parent / {"templates": "reports/templates",
                              "knowledge": "reports/knowledge"}.get(name, name)
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"forensics data folder {name!r} is missing from the installation")


def rules_dir() -> Path:
    return data_dir("rules")


RULE_CASES_HEADER = "\n[[covered]]\n"
"""Where a rule file's ``[[covered]]`` records start: they come last in the file."""


def read_rule_file(path: Path, *, cases: bool = False) -> dict[str, Any]:
    """A rule file's TOML (``tomllib.TOMLDecodeError`` if it is not), without its
    ``[[covered]]`` records unless ``cases``: they are about half of every file, and only the
    tests of the rule cases read them, never a scan. They come after everything else, so the
    text before the first one is the rest of the file, line numbers and all. That text's
    parse is kept between runs (``forensics.knowledge_cache``)."""
    text = path.read_text(encoding="utf-8")
    if cases:
        return _toml(text)
    from forensics import knowledge_cache

    return knowledge_cache.rule_file(text[:text.find(RULE_CASES_HEADER) + 1 or len(text)],
                                     _toml)


def _toml(text: str) -> dict[str, Any]:
    import tomllib  # 5 ms of start-up, spent only when a rule file is new to the cache

    return tomllib.loads(text)


def templates_dir() -> Path:
    return data_dir("templates")


def knowledge_dir() -> Path:
    """What case studies know about reading evidence (``reports/knowledge/``)."""
    return data_dir("knowledge")


def sample_session() -> Path:
    """A small opencode export with incidents of every core rule; ships inside the package."""
    return _PKG / "samples" / "sample-session.json"
