"""Find the files that live outside the package: rule files, report templates and knowledge,
the sample.

In a source checkout they sit at the repository top (``rules/``, ``reports/templates/``); in an
installed wheel they are carried inside the package as ``forensics/_data/``. The secret patterns
of the redaction helper live in ``redaction/``.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

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


def templates_dir() -> Path:
    return data_dir("templates")


def knowledge_dir() -> Path:
    """What case studies know about reading evidence (``reports/knowledge/``)."""
    return data_dir("knowledge")


def sample_session() -> Path:
    """A small opencode export with incidents of every core rule; ships inside the package."""
    return _PKG / "samples" / "sample-session.json"
