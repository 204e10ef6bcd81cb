"""Typer's coercion of command-line values, without building pydantic validators at each start.

Typer (from 0.2x on) coerces every parameter of the command that runs through a pydantic
``TypeAdapter`` it builds then: 17 for ``scan``, about 30 ms of CPU per run (with the pydantic
modules that only they import), to turn strings into the same strings. For the kinds of value
our commands take (a string, an enum choice, a list of those) the adapter only calls typer's
own functions (``_parse_cli_str``, ``coerce_cli_choice``); here those functions are called
directly, and a plainly written whole number within its bounds (``batch -j 2``) is
``int``'s. Anything else (paths, other numbers, a value a function refuses, a parameter with
its own parser) goes typer's way, through the adapter built on first need, so every error
message and every other conversion is typer's. ``install`` does nothing on a typer without
these internals (older typers coerce through click and never build adapters).
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Optional, get_args, get_origin

_TYPER_WAY = object()
"""What ``_plain`` answers for a value it leaves to typer."""


def install() -> bool:
    """Make typer's parameters coerce plain values without pydantic; False if this typer has no
    such coercion (nothing to change)."""
    try:
        import typer.core as core
        from typer._coercion import RuntimeParam, build_runtime_param
        from typer._param_types import coerce_cli_choice
    except ImportError:
        return False
    if getattr(core, "build_runtime_param", None) is not build_runtime_param:
        return getattr(core.build_runtime_param, "plain", False)

    class PlainRuntimeParam(RuntimeParam):
        """A parameter coerced by typer's own functions; typer's adapter only when needed."""

        def __init__(self, descriptor: Any) -> None:
            super().__init__(parameter_info=descriptor.parameter_info,
                             annotation=descriptor.annotation)
            object.__setattr__(self, "descriptor", descriptor)
            object.__setattr__(self, "typer_way", None)

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            made = _plain(self.annotation, value, self.parameter_info, ctx, coerce_cli_choice)
            if made is not _TYPER_WAY:
                return made
            if self.typer_way is None:
                object.__setattr__(self, "typer_way", build_runtime_param(self.descriptor))
            return self.typer_way._coerce_value(value, param=param, ctx=ctx)

    def plain_or_typer(descriptor: Any) -> Any:
        if descriptor.file_annotation is not None or descriptor.parameter_info.parser is not None:
            return build_runtime_param(descriptor)
        try:
            return PlainRuntimeParam(descriptor)
        except Exception:  # a typer whose parameters are built otherwise: entirely typer's way
            return build_runtime_param(descriptor)

    plain_or_typer.plain = True  # type: ignore[attr-defined]
    core.build_runtime_param = plain_or_typer
    return True


def _plain(annotation: Any, value: Any, info: Any, ctx: Any, coerce_cli_choice) -> Any:
    """``value`` as typer's adapter for ``annotation`` makes it, or ``_TYPER_WAY``."""
    if get_origin(annotation) is list:
        (item,) = get_args(annotation)
        if not isinstance(value, (list, tuple)):
            return _TYPER_WAY
        items = [_plain(item, v, info, ctx, coerce_cli_choice) for v in value]
        return _TYPER_WAY if any(i is _TYPER_WAY for i in items) else items
    if annotation is str:
        return value if type(value) is str else _TYPER_WAY
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        try:
            return coerce_cli_choice(value, choices=list(annotation),
                                     case_sensitive=info.case_sensitive, ctx=ctx)
        except ValueError:  # typer's adapter says why, in its words
            return _TYPER_WAY
    if annotation is int or annotation == Optional[int]:  # None never gets here (typer's)
        return _plain_int(value, info)
    return _TYPER_WAY


def _plain_int(value: Any, info: Any) -> Any:
    """A whole number written plainly (``8``, not ``+8``, ``08``, ``8_000`` or ``٨``) within the
    parameter's bounds; anything else, and every error, is typer's."""
    if type(value) is str and (value == "0" or (value[:1] in "123456789" and value.isascii()
                                                  and value.isdigit())):
        number = int(value)
    elif type(value) is int:
        number = value
    else:
        return _TYPER_WAY
    low, high = getattr(info, "min", None), getattr(info, "max", None)
    if (low is not None and number < low) or (high is not None and number > high):
        return _TYPER_WAY
    return number
