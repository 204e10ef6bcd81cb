"""The report's knowledge files (``reports/knowledge/``): how to read each rule's evidence.

A case study may only say what the transcript, a rule file or a knowledge file says. This module
loads the knowledge files and fills their sentences from the transcript: ``{call}`` becomes a
turn reference, ``{said}`` a quote, ``{command}`` code. A sentence with a placeholder the
evidence has no value for is dropped whole, so no half-filled sentence reaches a reader.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache

from forensics.errors import ConfigError
from forensics.report._prose import Piece, Sentence, S
from forensics.resources import knowledge_dir

Value = Sequence["Piece | str"]
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Explanation:
    signal: str
    because: str


@dataclass(frozen=True)
class Lesson:
    signal: str
    text: str


@dataclass(frozen=True)
class RuleKnowledge:
    code: str
    shows: Mapping[str, str] = field(default_factory=dict)
    """Signal name -> the sentence saying what that signal shows happened."""
    explanations: tuple[Explanation, ...] = ()
    lessons: tuple[Lesson, ...] = ()
    again: Mapping[str, str] = field(default_factory=dict)
    """Signal name -> what a later case study of the session says when an earlier one of the
    same rule had that cause: ``{first}`` points to it, the signal's values say what differs."""


@dataclass(frozen=True)
class Word:
    text: str
    lang: str
    means: str
    kind: str


@dataclass(frozen=True)
class Words:
    words: tuple[Word, ...] = ()
    figure_units: tuple[str, ...] = ()
    pressure_tokens: int = 100_000
    same_cause: str = ""
    """The pointer sentence for a repeated cause whose signal has no ``again`` of its own."""


def _read(name: str) -> dict:
    path = knowledge_dir() / name
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None


@cache
def for_rule(code: str) -> RuleKnowledge:
    """The knowledge file of rule ``code``; an empty one when the rule has none (new rules)."""
    files = sorted(knowledge_dir().glob(f"{code}-*.toml"))
    if not files:
        return RuleKnowledge(code)
    data = _read(files[0].name)
    shows = {name: str(spec.get("shows", "")) for name, spec in data.get("signals", {}).items()
             if spec.get("shows")}
    explanations = tuple(Explanation(str(e["signal"]), str(e["because"]))
                         for e in data.get("explanations", ()))
    lessons = tuple(Lesson(str(e["signal"]), str(e["text"])) for e in data.get("lessons", ()))
    again = {name: str(spec["again"]) for name, spec in data.get("signals", {}).items()
             if spec.get("again")}
    return RuleKnowledge(code, shows, explanations, lessons, again)


@cache
def words() -> Words:
    data = _read("words.toml")
    entries = tuple(Word(str(w["text"]), str(w["lang"]), str(w["means"]), str(w["kind"]))
                    for w in data.get("words", ()))
    units = tuple(str(u) for u in data.get("figures", {}).get("units", ()))
    pressure = int(data.get("context", {}).get("pressure_tokens", 100_000))
    same_cause = str(data.get("retelling", {}).get("same_cause", ""))
    return Words(entries, units, pressure, same_cause)


def fill(template: str, values: Mapping[str, Value]) -> Sentence | None:
    """``template`` with its placeholders replaced by ``values``; None if one has no value."""
    parts: list[Piece | str] = []
    pos = 0
    for m in _PLACEHOLDER.finditer(template):
        value = values.get(m.group(1))
        if value is None:
            return None
        parts.append(Piece("words", template[pos:m.start()]) if template[pos:m.start()] else "")
        parts.extend(value)
        pos = m.end()
    if template[pos:]:
        parts.append(Piece("words", template[pos:]))
    return S(*parts)


def placeholders(template: str) -> list[str]:
    return _PLACEHOLDER.findall(template)
