"""Rule parameters as one typed object, built once per parameter set.

A rule file's ``[params]`` is data; every rule takes one typed parameters object, of a class
with ``from_params(raw)`` and ``param_names``. ``build`` makes that object once per distinct
``raw`` (a user config that extends a list makes a second one, never one per session).

Knowledge lists can refer to each other instead of repeating entries: a list entry
``"@name"`` stands for every entry of the list ``name`` of the same ``[params]``, and
``"@table.key"`` for one value of the table ``table`` (``"@server_commands.docker"``).
``build`` resolves references before ``from_params`` sees the params, after a user's
``extend-…`` has been applied, so an extension of the referred list reaches every list that
refers to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar

from forensics.errors import RuleError


class TypedParams(Protocol):
    param_names: frozenset[str]

    @classmethod
    def from_params(cls, raw: Mapping[str, Any]) -> "TypedParams": ...


P = TypeVar("P")


class NoParams:
    """The parameters of a rule whose file has an empty ``[params]``."""

    param_names: frozenset[str] = frozenset()

    @classmethod
    def from_params(cls, raw: Mapping[str, Any]) -> "NoParams":
        return cls()

_BUILT: dict[tuple[type, Any], Any] = {}
_BY_OBJECT: dict[tuple[type, int], tuple[Mapping[str, Any], Any]] = {}
"""The same ``raw`` object again (every session of a scan passes the rule file's dict): found
without freezing it, which costs more than some rules' whole run on a session."""


def freeze(value: Any) -> Any:
    """A hashable copy of a parameter value (tables and lists become tuples)."""
    if isinstance(value, Mapping):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def build(cls: type[P], raw: Mapping[str, Any]) -> P:
    """``cls.from_params(raw)``, made once per distinct ``raw`` (params are not changed in
    place once a rule has run on them)."""
    seen = _BY_OBJECT.get((cls, id(raw)))
    if seen is not None and seen[0] is raw:
        return seen[1]
    key = (cls, freeze(raw))
    made = _BUILT.get(key)
    if made is None:
        if len(_BUILT) > 64:
            _BUILT.clear()
        resolved = resolve_references(raw)
        made = _BUILT[key] = cls.from_params(resolved)  # type: ignore[attr-defined]
    if len(_BY_OBJECT) > 64:
        _BY_OBJECT.clear()
    _BY_OBJECT[(cls, id(raw))] = (raw, made)  # holding raw keeps its id from being reused
    return made


def resolve_references(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` with every ``"@list"`` / ``"@table.key"`` list entry replaced by what it names."""
    out = dict(raw)
    for name, value in raw.items():
        if isinstance(value, list):
            out[name] = _expand(raw, name, value, (name,))
    return out


def _expand(raw: Mapping[str, Any], name: str, entries: list[Any],
            seen: tuple[str, ...]) -> list[Any]:
    result: list[Any] = []
    for entry in entries:
        if not (isinstance(entry, str) and entry.startswith("@")):
            result.append(entry)
            continue
        target, _, key = entry[1:].partition(".")
        if target in seen:
            raise RuleError(f"[params] {name}: reference {entry!r} refers to itself")
        value = raw.get(target)
        if key:
            if not isinstance(value, Mapping) or key not in value:
                raise RuleError(f"[params] {name}: {entry!r} names no entry {key!r} of {target}")
            result.append(value[key])
        elif isinstance(value, list):
            result.extend(_expand(raw, target, value, (*seen, target)))
        else:
            raise RuleError(f"[params] {name}: {entry!r} names no list of these params")
    return result


def require_names(raw: Mapping[str, Any], list_name: str, table: str,
                  values: Any) -> None:
    """Refuse entries of ``list_name`` that do not name an entry of the table ``table``."""
    known = set(raw.get(table, {}))
    unknown = sorted(set(values) - known)
    if unknown:
        raise RuleError(f"[params] {list_name}: {', '.join(unknown)} name no entry of {table}")
