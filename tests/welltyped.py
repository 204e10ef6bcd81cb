"""Does every record a reader built hold values of its declared types?

The model's slots dataclasses check field names at construction, not types (pydantic used to), so
the fuzz tests ask this of whatever the readers build from hostile input. Exact types: an ``int``
where a ``float`` is declared would print ``5`` instead of ``5.0`` in the JSON of the turns, a
``bool`` is no ``int``; ``Any`` values (tool input, event detail) must be plain JSON.
"""

from __future__ import annotations

import types
import typing
from dataclasses import fields, is_dataclass
from functools import cache
from typing import Any, Literal, Union

from forensics.model import Session

JSON_SCALARS = (str, int, float, bool, type(None))


def assert_well_typed(sessions: list[Session]) -> None:
    for s in sessions:
        problems = list(_record_problems(s, f"session {s.id}"))
        assert not problems, problems[:5]


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _record_problems(record: Any, where: str):
    hints = _hints(type(record))
    for f in fields(record):
        yield from _problems(getattr(record, f.name), hints[f.name], f"{where}.{f.name}")


def _problems(value: Any, declared: Any, where: str):
    origin = typing.get_origin(declared)
    if declared is Any:
        yield from _json_problems(value, where)
    elif origin in (Union, types.UnionType):
        options = typing.get_args(declared)
        if type(value) in options and is_dataclass(value):  # a turn of the Turn union
            yield from _record_problems(value, where)
        elif not any(not list(_problems(value, o, where)) for o in options):
            yield f"{where}: {type(value).__name__} {value!r:.60} is none of {declared}"
    elif origin is Literal:
        if type(value) is not str or value not in typing.get_args(declared):
            yield f"{where}: {value!r:.60} is not one of {typing.get_args(declared)}"
    elif origin is list:
        if type(value) is not list:
            yield f"{where}: {type(value).__name__} is not a list"
        else:
            (item,) = typing.get_args(declared)
            for i, v in enumerate(value):
                yield from _problems(v, item, f"{where}[{i}]")
    elif origin is dict:
        if type(value) is not dict:
            yield f"{where}: {type(value).__name__} is not a dict"
        else:
            _, item = typing.get_args(declared)
            for k, v in value.items():
                if type(k) is not str:
                    yield f"{where}: key {k!r:.60} is not a str"
                yield from _problems(v, item, f"{where}[{k!r:.30}]")
    elif declared is type(None):
        if value is not None:
            yield f"{where}: {value!r:.60} is not None"
    elif is_dataclass(declared):
        if type(value) is not declared:
            yield f"{where}: {type(value).__name__} is not a {declared.__name__}"
        else:
            yield from _record_problems(value, where)
    elif type(value) is not declared:
        yield f"{where}: {type(value).__name__} {value!r:.60} is not a {declared.__name__}"


def _json_problems(value: Any, where: str):
    if isinstance(value, dict) and type(value) is dict:
        for k, v in value.items():
            if type(k) is not str:
                yield f"{where}: key {k!r:.60} is not a str"
            yield from _json_problems(v, f"{where}[{k!r:.30}]")
    elif type(value) is list:
        for i, v in enumerate(value):
            yield from _json_problems(v, f"{where}[{i}]")
    elif type(value) not in JSON_SCALARS:
        yield f"{where}: {type(value).__name__} is not JSON"
