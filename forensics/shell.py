"""Just enough shell parsing to reason about commands agents run.

Not a shell parser: it splits a command line into simple commands at ``&&``, ``||``, ``;``, ``|``
and newlines (outside quotes), and finds the program each one runs behind wrappers such as
``sudo``, ``env FOO=1``, ``timeout 30`` or ``nohup``.
"""

from __future__ import annotations

import re
import shlex
from functools import lru_cache

WRAPPERS = frozenset({"sudo", "nohup", "setsid", "time", "nice", "exec", "command", "env",
                      "timeout", "stdbuf", "xvfb-run", "caffeinate", "doas", "unbuffer"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SPLIT = re.compile(r"(\|\||&&|[;|\n])")


@lru_cache(maxsize=4096)
def split_commands(command: str) -> tuple[str, ...]:
    """Simple commands of a command line, in order; quotes are respected."""
    parts: list[str] = []
    buf: list[str] = []
    quote: str | None = None
    i, n = 0, len(command)
    while i < n:
        ch = command[i]
        if quote:
            buf.append(ch)
            if ch == "\\" and quote == '"' and i + 1 < n:
                buf.append(command[i + 1])
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
            buf.append(ch)
        elif ch == "\\" and i + 1 < n:
            buf.append(command[i:i + 2])
            i += 1
        elif command.startswith(("&&", "||"), i):
            parts.append("".join(buf))
            buf = []
            i += 1
        elif ch in ";|\n":
            parts.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
        i += 1
    parts.append("".join(buf))
    return tuple(p.strip() for p in parts if p.strip() and not p.strip().startswith("#"))


def words(simple: str) -> list[str]:
    try:
        return shlex.split(simple, comments=False)
    except ValueError:
        return simple.split()


@lru_cache(maxsize=8192)
def program(simple: str) -> tuple[str, tuple[str, ...]]:
    """The program a simple command runs and its arguments, behind wrappers and assignments."""
    toks = words(simple)
    while toks:
        head = toks[0]
        if _ASSIGNMENT.match(head) or head in ("(", "{", "then", "do", "else", "!"):
            toks = toks[1:]
            continue
        base = head.rsplit("/", 1)[-1]
        if base in WRAPPERS:
            toks = toks[1:]
            # drop the wrapper's own options and numeric arguments (timeout 30, nice -n 5)
            while toks and (toks[0].startswith("-") or toks[0].replace(".", "").isdigit()
                            or (base in ("timeout",) and re.fullmatch(r"\d+[smhd]?", toks[0]))):
                toks = toks[1:]
            continue
        return base, tuple(toks[1:])
    return "", ()
