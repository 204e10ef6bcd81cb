"""Run forensics where the agent runs: when a session ends (or a turn completes), print the
findings of that session not printed before.

Each agent tells its hook which session it was, in its own way:

* Claude Code (``SessionEnd`` / ``Stop`` hooks): a JSON object on standard input with
  ``session_id`` and ``transcript_path``.
* Codex CLI (``notify`` in ``~/.codex/config.toml``): a JSON object as the last argument, with
  ``thread-id`` (the session id, which the rollout file's name ends with).
* opencode (a plugin calling ``forensics hook opencode <sessionID>`` on ``session.idle``): the
  session id; its data dir is found as ``scan`` finds it.

Findings already printed for a session are remembered in a small state file (fingerprints per
session), so a ``Stop`` hook that fires after every turn prints each finding once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from forensics.errors import ForensicsError

AGENTS = ("claude-code", "codex", "opencode")


@dataclass
class HookTarget:
    """Which session the hook is about and where to read it."""

    agent: str
    session_id: str | None
    paths: list[str]


def default_state_file(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or os.path.join(
        env.get("HOME") or str(Path.home()), ".local", "state")
    return Path(base) / "forensics" / "hook-seen.json"


def _payload(text: str | None, what: str) -> dict:
    try:
        data = json.loads(text or "")
    except json.JSONDecodeError as exc:
        raise ForensicsError(f"{what}: not the JSON the agent sends ({exc})") from None
    if not isinstance(data, dict):
        raise ForensicsError(f"{what}: expected a JSON object")
    return data


def target(agent: str, argument: str | None, stdin_text: str | None,
           env: Mapping[str, str] | None = None) -> HookTarget:
    env = os.environ if env is None else env
    if agent == "claude-code":
        data = _payload(stdin_text, "Claude Code hook input on standard input")
        path = data.get("transcript_path")
        if not isinstance(path, str) or not path:
            raise ForensicsError("Claude Code hook input has no transcript_path")
        sid = data.get("session_id")
        return HookTarget(agent, sid if isinstance(sid, str) else None, [path])
    if agent == "codex":
        data = _payload(argument, "Codex notify argument")
        sid = data.get("thread-id") or data.get("thread_id") or data.get("session_id")
        if not isinstance(sid, str) or not sid:
            raise ForensicsError("Codex notify argument has no thread-id")
        return HookTarget(agent, sid, [str(_codex_rollout(sid, env))])
    if agent == "opencode":
        if not argument:
            raise ForensicsError("opencode hook: give the session id (event.properties.sessionID)")
        from forensics.locations import discover

        dirs = [str(f.path) for f in discover(env) if f.agent == "opencode"]
        if not dirs:
            raise ForensicsError("opencode hook: no opencode data dir found")
        return HookTarget(agent, argument, dirs)
    raise ForensicsError(f"unknown agent {agent!r} for a hook; known: {', '.join(AGENTS)}")


def _codex_rollout(sid: str, env: Mapping[str, str]) -> Path:
    """The newest rollout file named after the session (``rollout-<time>-<id>.jsonl``)."""
    from forensics.locations import discover

    found = [p for f in discover(env) if f.agent == "codex"
             for p in f.path.rglob(f"*{sid}*.jsonl")]
    if not found:
        raise ForensicsError(f"Codex session {sid}: no rollout file in the Codex sessions folder")
    return max(found, key=lambda p: p.stat().st_mtime)


def unseen(results, state: Path) -> list:
    """The results with the findings printed before removed; the state learns the rest."""
    from forensics.engine import ScanResult

    try:
        seen: dict[str, list[str]] = json.loads(state.read_text(encoding="utf-8"))
        if not isinstance(seen, dict):
            seen = {}
    except (OSError, ValueError):
        seen = {}
    out = []
    for r in results:
        known = set(seen.get(r.session.id, []))
        new = [i for i in r.incidents if i.fingerprint not in known]
        seen[r.session.id] = sorted(known | {i.fingerprint for i in new})
        out.append(ScanResult(session=r.session, incidents=new, crashes=r.crashes))
    state.parent.mkdir(parents=True, exist_ok=True)
    tmp = state.with_suffix(".tmp")
    tmp.write_text(json.dumps(seen, indent=1, sort_keys=True), encoding="utf-8")
    tmp.replace(state)
    return out
