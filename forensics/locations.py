"""Where each agent keeps its sessions by default, so that ``forensics scan`` needs no argument.

One table, ``DEFAULT_LOCATIONS``: an entry per agent and place, a path template per platform
family. Templates use ``~`` (the home folder: ``HOME``, ``USERPROFILE`` on Windows) and
``${VAR}`` / ``${VAR:-fallback}``; an entry whose ``${VAR}`` is unset is skipped. An entry marked
``replaces_defaults`` (``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``) that resolves makes the agent's
other entries be skipped, as the agent itself would not look there either.

A reader module (``forensics.ingest.<format>``) may carry its own ``DEFAULT_LOCATIONS``, added
to the table so that a new agent's reader brings its locations with it. Either a list of
``Location`` or of template strings (every platform), or a mapping of platform (``linux``,
``darwin``, ``windows``) to template strings, where Windows templates may use ``%VAR%`` and any
template ``*`` for one path segment (other keys, such as ``env`` and ``notes``, are prose for
people and ignored here). The agent's name is the module's ``FORMAT`` (else the format name).
"""

from __future__ import annotations

import glob
import importlib
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ALL = ("linux", "darwin", "win32")


@dataclass(frozen=True)
class Location:
    agent: str
    template: str
    platforms: tuple[str, ...] = ALL
    replaces_defaults: bool = False
    several: bool = False
    """The variable may hold several folders separated by commas (``CLAUDE_CONFIG_DIR``)."""


DEFAULT_LOCATIONS: tuple[Location, ...] = (
    # opencode resolves its data dir with xdg-basedir on every platform.
    Location("opencode", "${XDG_DATA_HOME:-~/.local/share}/opencode"),
    Location("opencode", "~/Library/Application Support/opencode", ("darwin",)),
    Location("opencode", "${LOCALAPPDATA}/opencode", ("win32",)),
    # Claude Code: CLAUDE_CONFIG_DIR (comma-separated) replaces ~/.claude and ~/.config/claude.
    Location("claude-code", "${CLAUDE_CONFIG_DIR}/projects", replaces_defaults=True,
             several=True),
    Location("claude-code", "${XDG_CONFIG_HOME:-~/.config}/claude/projects"),
    Location("claude-code", "~/.claude/projects"),
    # Codex CLI: CODEX_HOME replaces ~/.codex.
    Location("codex", "${CODEX_HOME}/sessions", replaces_defaults=True),
    Location("codex", "${CODEX_HOME}/archived_sessions", replaces_defaults=True),
    Location("codex", "~/.codex/sessions"),
    Location("codex", "~/.codex/archived_sessions"),
)


@dataclass(frozen=True)
class Found:
    agent: str
    path: Path
    pattern: str = ""
    """The template, when it has ``*`` segments and so may match many folders."""


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_WINDOWS_VAR = re.compile(r"%([A-Za-z_][A-Za-z0-9_]*)%")
PLATFORM_KEYS = {"linux": "linux", "darwin": "darwin", "windows": "win32", "win32": "win32"}


def platform_family(platform: str | None = None) -> str:
    platform = platform or sys.platform
    return "win32" if platform.startswith(("win", "cygwin")) else (
        "darwin" if platform == "darwin" else "linux")


def expand(template: str, env: Mapping[str, str], *, several: bool = False,
           platform: str | None = None) -> list[Path]:
    """The paths a template names under ``env``; [] when a ``${VAR}`` without fallback is
    unset."""
    values: list[str] = [template]
    for m in _VAR.finditer(template):
        name, fallback = m.group(1), m.group(2)
        value = env.get(name) or None
        if value is None and fallback is None:
            return []
        choices = [value] if value is not None else [fallback or ""]
        if several and value is not None:
            choices = [v.strip() for v in value.split(",") if v.strip()]
        values = [v.replace(m.group(0), c, 1) for v in values for c in choices]
    home = env.get("USERPROFILE" if platform_family(platform) == "win32" else "HOME") \
        or env.get("HOME") or str(Path.home())
    out = []
    for v in values:
        if v == "~" or v.startswith(("~/", "~\\")):
            v = home + v[1:]
        if os.sep == "/":  # a Windows template read elsewhere (tests, a mounted home)
            v = v.replace("\\", "/")
        v = v.rstrip("/\\") or v
        if "*" in v:
            out.extend(Path(m) for m in sorted(glob.glob(v)))
        else:
            out.append(Path(v))
    return out


def reader_locations() -> list[Location]:
    """``DEFAULT_LOCATIONS`` the reader modules declare (new agents' readers)."""
    from forensics.ingest import FORMATS

    out: list[Location] = []
    for fmt, name in FORMATS.items():
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        entries = getattr(module, "DEFAULT_LOCATIONS", ())
        agent = getattr(module, "FORMAT", None) or fmt
        if isinstance(entries, Mapping):
            for key, templates in entries.items():
                platform = PLATFORM_KEYS.get(key)
                if platform is None:
                    continue  # "env", "notes": prose
                out.extend(Location(agent, _dollar_vars(t), (platform,)) for t in templates)
            continue
        for entry in entries:
            out.append(entry if isinstance(entry, Location)
                       else Location(agent, _dollar_vars(str(entry))))
    return out


def _dollar_vars(template: str) -> str:
    """``%APPDATA%`` written as ``${APPDATA}``, so an unset variable skips the entry."""
    return _WINDOWS_VAR.sub(lambda m: "${" + m.group(1) + "}", template)


def table() -> list[Location]:
    known = set(DEFAULT_LOCATIONS)
    return list(DEFAULT_LOCATIONS) + [loc for loc in reader_locations() if loc not in known]


def discover(env: Mapping[str, str] | None = None, *, platform: str | None = None,
             locations: Iterable[Location] | None = None) -> list[Found]:
    """Every default location that exists here, in table order, each folder once."""
    env = os.environ if env is None else env
    family = platform_family(platform)
    entries = [loc for loc in (locations if locations is not None else table())
               if family in loc.platforms]
    replaced = {loc.agent for loc in entries if loc.replaces_defaults
                and expand(loc.template, env, several=loc.several, platform=platform)}
    found: list[Found] = []
    seen: set[str] = set()
    for loc in entries:
        if loc.agent in replaced and not loc.replaces_defaults:
            continue
        for path in expand(loc.template, env, several=loc.several, platform=platform):
            if not path.is_dir():
                continue
            key = os.path.realpath(path)
            if key in seen or any(key.startswith(s + os.sep) for s in seen):
                continue
            seen.add(key)
            found.append(Found(loc.agent, path, loc.template if "*" in loc.template else ""))
    return found


def describe(found: Iterable[Found]) -> str:
    """The line telling what was found where (many folders matching one ``*`` template, such
    as one per project, counted rather than listed)."""
    groups: dict[tuple[str, str], list[Path]] = {}
    for f in found:
        groups.setdefault((f.agent, f.pattern or str(f.path)), []).append(f.path)
    parts = []
    for (agent, pattern), paths in groups.items():
        if len(paths) > 3:
            parts.append(f"{agent} in {len(paths)} folders matching {pattern}")
        else:
            parts.extend(f"{agent} in {p}" for p in paths)
    return "reading the agents' default locations: " + "; ".join(parts)
