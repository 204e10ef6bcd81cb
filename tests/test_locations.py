"""Zero-argument ``scan``/``report``/``batch``: every agent's default location, over a fake home."""

from __future__ import annotations

import sqlite3
import sys
import types
from pathlib import Path

import orjson
from typer.testing import CliRunner

from conftest import FIXTURES
from forensics.cli import app
from forensics.locations import Found, Location, discover, expand

CLAUDE = FIXTURES / "ingest" / "claude_basic.jsonl"
CODEX = FIXTURES / "ingest" / "codex_basic.jsonl"
CLEAN_ENV = {"XDG_DATA_HOME": "", "XDG_CONFIG_HOME": "", "CLAUDE_CONFIG_DIR": "",
             "CODEX_HOME": "", "LOCALAPPDATA": ""}


def put(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def opencode_dir(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(root / "opencode.db")
    con.executescript((FIXTURES / "ingest" / "opencode_db.sql").read_text())
    con.close()
    return root


def fake_home(tmp: Path) -> Path:
    home = tmp / "home"
    put(home / ".claude" / "projects" / "-home-dev-shop" / "s.jsonl", CLAUDE.read_bytes())
    put(home / ".codex" / "sessions" / "2026" / "01" / "09" / "rollout.jsonl", CODEX.read_bytes())
    opencode_dir(home / ".local" / "share" / "opencode")
    return home


def found(home: Path, **env: str) -> list[tuple[str, str]]:
    return [(f.agent, str(f.path.relative_to(home.parent)))
            for f in discover({**CLEAN_ENV, "HOME": str(home), **env}, platform="linux")]


def test_linux_defaults(tmp_path: Path) -> None:
    home = fake_home(tmp_path)
    assert found(home) == [("opencode", "home/.local/share/opencode"),
                           ("claude-code", "home/.claude/projects"),
                           ("codex", "home/.codex/sessions")]


def test_environment_variables_move_the_locations(tmp_path: Path) -> None:
    home = fake_home(tmp_path)
    opencode_dir(tmp_path / "xdg" / "opencode")
    for name in ("a", "b"):
        put(tmp_path / name / "projects" / "p" / "s.jsonl", CLAUDE.read_bytes())
    put(tmp_path / "cx" / "sessions" / "r.jsonl", CODEX.read_bytes())
    # XDG_DATA_HOME replaces ~/.local/share: the home's opencode folder is not read
    assert found(home, XDG_DATA_HOME=str(tmp_path / "xdg"),
                 CLAUDE_CONFIG_DIR=f"{tmp_path / 'a'},{tmp_path / 'b'}",
                 CODEX_HOME=str(tmp_path / "cx")) == [
        ("opencode", "xdg/opencode"),
        ("claude-code", "a/projects"),  # CLAUDE_CONFIG_DIR replaces ~/.claude
        ("claude-code", "b/projects"),
        ("codex", "cx/sessions"),
    ]


def test_xdg_config_claude_and_archived_codex(tmp_path: Path) -> None:
    home = tmp_path / "home"
    put(home / ".config" / "claude" / "projects" / "p" / "s.jsonl", CLAUDE.read_bytes())
    put(home / ".codex" / "archived_sessions" / "r.jsonl", CODEX.read_bytes())
    assert found(home) == [("claude-code", "home/.config/claude/projects"),
                           ("codex", "home/.codex/archived_sessions")]


def test_windows_and_macos(tmp_path: Path) -> None:
    home = tmp_path / "home"
    put(home / ".claude" / "projects" / "p" / "s.jsonl", CLAUDE.read_bytes())
    opencode_dir(tmp_path / "AppData" / "Local" / "opencode")
    win = discover({**CLEAN_ENV, "USERPROFILE": str(home),
                    "LOCALAPPDATA": str(tmp_path / "AppData" / "Local")}, platform="win32")
    assert win == [Found("opencode", tmp_path / "AppData" / "Local" / "opencode"),
                   Found("claude-code", home / ".claude" / "projects")]
    opencode_dir(home / "Library" / "Application Support" / "opencode")
    mac = discover({**CLEAN_ENV, "HOME": str(home)}, platform="darwin")
    assert [f.agent for f in mac] == ["opencode", "claude-code"]
    assert mac[0].path == home / "Library" / "Application Support" / "opencode"


def test_template_expansion() -> None:
    env = {"HOME": "/h", "X": "/x"}
    assert expand("${X:-~/d}/a", env) == [Path("/x/a")]
    assert expand("${Y:-~/d}/a", env) == [Path("/h/d/a")]
    assert expand("${Y}/a", env) == []
    assert expand("${X}/p", {"X": "/a, /b"}, several=True) == [Path("/a/p"), Path("/b/p")]


def test_a_reader_brings_its_own_locations(tmp_path: Path, monkeypatch) -> None:
    """A new agent's reader module declares DEFAULT_LOCATIONS; discovery picks them up."""
    from forensics.ingest import FORMATS

    module = types.ModuleType("fake_cline_reader")
    module.AGENT = "cline"
    module.DEFAULT_LOCATIONS = [
        "~/.config/Code/User/globalStorage/saoudrizwan.claude-dev/tasks",
        Location("cline", "${APPDATA}/Code/User/globalStorage/saoudrizwan.claude-dev/tasks",
                 ("win32",)),
    ]
    monkeypatch.setitem(sys.modules, "fake_cline_reader", module)
    monkeypatch.setitem(FORMATS, "cline", "fake_cline_reader")
    home = tmp_path / "home"
    (home / ".config/Code/User/globalStorage/saoudrizwan.claude-dev/tasks").mkdir(parents=True)
    assert found(home) == [
        ("cline", "home/.config/Code/User/globalStorage/saoudrizwan.claude-dev/tasks")]


def test_a_reader_declares_locations_per_platform(tmp_path: Path, monkeypatch) -> None:
    """The per-platform mapping the new readers use: ``~``, ``%VAR%`` on Windows, ``*`` for one
    segment (a project id), and prose keys that discovery ignores."""
    from forensics.ingest import FORMATS
    from forensics.locations import describe

    module = types.ModuleType("fake_gemini_reader")
    module.FORMAT = "gemini-cli"
    module.DEFAULT_LOCATIONS = {
        "linux": ["~/.gemini/tmp/*/chats/"],
        "darwin": ["~/.gemini/tmp/*/chats/"],
        "windows": ["%USERPROFILE%\\.gemini\\tmp\\*\\chats\\"],
        "env": ["no environment variable moves ~/.gemini"],
        "notes": ["subagents: chats/<parentSessionId>/"],
    }
    monkeypatch.setitem(sys.modules, "fake_gemini_reader", module)
    monkeypatch.setitem(FORMATS, "gemini-cli", "fake_gemini_reader")
    home = tmp_path / "home"
    for project in ("p1", "p2", "p3", "p4"):
        (home / ".gemini" / "tmp" / project / "chats").mkdir(parents=True)
    (home / ".gemini" / "tmp" / "p5").mkdir()  # no chats/: not a match
    assert found(home) == [("gemini-cli", f"home/.gemini/tmp/p{n}/chats") for n in range(1, 5)]
    win = discover({**CLEAN_ENV, "USERPROFILE": str(home)}, platform="win32")
    assert [f.path for f in win] == [home / ".gemini" / "tmp" / f"p{n}" / "chats"
                                     for n in range(1, 5)]
    assert discover({**CLEAN_ENV, "HOME": str(home)}, platform="win32") == []  # no USERPROFILE
    line = describe(discover({**CLEAN_ENV, "HOME": str(home)}, platform="linux"))
    assert line == ("reading the agents' default locations: gemini-cli in 4 folders matching "
                    "~/.gemini/tmp/*/chats/")


def test_zero_argument_scan_says_what_it_read_where(tmp_path: Path) -> None:
    home = fake_home(tmp_path)
    env = {**CLEAN_ENV, "HOME": str(home)}
    out = CliRunner().invoke(app, ["scan", "-f", "json"], env=env)
    assert out.exit_code == 1, out.stderr
    assert out.stderr.splitlines()[0] == (
        f"forensics: reading the agents' default locations: opencode in "
        f"{home}/.local/share/opencode; claude-code in {home}/.claude/projects; "
        f"codex in {home}/.codex/sessions")
    agents = {s["agent"] for s in orjson.loads(out.stdout)["sessions"]}
    assert agents == {"opencode", "claude-code", "codex"}
    codex_only = CliRunner().invoke(app, ["scan", "-f", "json", "--agent", "codex"], env=env)
    assert {s["agent"] for s in orjson.loads(codex_only.stdout)["sessions"]} == {"codex"}
    report = CliRunner().invoke(app, ["report", "-o", str(tmp_path / "r")], env=env)
    assert report.exit_code == 1 and "wrote" in report.stdout
    batch = CliRunner().invoke(app, ["batch", "-o", str(tmp_path / "b"), "-j", "1",
                                     "--no-progress"], env=env)
    assert batch.exit_code == 1 and "from 3 sources" in batch.stdout


def test_zero_argument_scan_with_nothing_found(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    out = CliRunner().invoke(app, ["scan"], env={**CLEAN_ENV, "HOME": str(tmp_path / "home")})
    assert out.exit_code == 2
    assert "no path given and no agent data in the default locations" in out.stderr
    assert f"{tmp_path}/home/.claude/projects" in out.stderr
