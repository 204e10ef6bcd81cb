"""Every example in the README runs as pasted: shell commands against the fixtures (named as the
README names them), configuration blocks loaded, the hook recipes run with the input each agent
sends, the JSON contract compared with real output, the notebook lines executed."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import shlex
import sqlite3
import subprocess
import sys
import tarfile
import tomllib

import orjson
import pytest

from conftest import FIXTURES, REPO
from forensics.config import config_from_dict

README = (REPO / "README.md").read_text(encoding="utf-8")
CLAUDE = FIXTURES / "ingest" / "claude_basic.jsonl"
CODEX = FIXTURES / "ingest" / "codex_basic.jsonl"
SEED_000 = FIXTURES / "seeds" / "seed_000_duplicate_launch.json"
CODEX_ID = "019ba2f2-5f36-7eb1-a791-e8b7d5a45da1"
OPENCODE_ID = "ses_44d1f0c3bffeKp9Lm8Nq7Rs6Tu"
NOT_RUN = ("pip ", "pytest", "python ")
"""Lines about installing and developing forensics, not using it."""


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", README, flags=re.S | re.M)


def tar_of(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict:
    """A working folder and a home holding what the README's examples name."""
    import zstandard

    root = tmp_path_factory.mktemp("readme")
    work, home, bin_dir = root / "work", root / "home", root / "bin"
    for d in (work, home, bin_dir):
        d.mkdir()
    (work / "session.jsonl").write_bytes(CLAUDE.read_bytes())
    (work / "session.json").write_bytes(SEED_000.read_bytes())
    (work / "archive.tar.gz").write_bytes(gzip.compress(tar_of({"a/s.jsonl": CODEX.read_bytes()})))
    (work / "old-sessions.tar.zst").write_bytes(zstandard.ZstdCompressor().compress(
        tar_of({"old/seed.json": SEED_000.read_bytes()})))
    projects = home / ".claude" / "projects" / "-home-dev-shop"
    projects.mkdir(parents=True)
    (projects / "5d2e8f41-7c3a-4b9e-a1d6-3f8c2e9b7a10.jsonl").write_bytes(CLAUDE.read_bytes())
    rollouts = home / ".codex" / "sessions" / "2026" / "01" / "09"
    rollouts.mkdir(parents=True)
    (rollouts / f"rollout-2026-01-09T13-00-00-{CODEX_ID}.jsonl").write_bytes(CODEX.read_bytes())
    opencode = home / ".local" / "share" / "opencode"
    opencode.mkdir(parents=True)
    con = sqlite3.connect(opencode / "opencode.db")
    con.executescript((FIXTURES / "ingest" / "opencode_db.sql").read_text())
    con.close()
    shim = bin_dir / "forensics"  # the README's `forensics` is this checkout's
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m forensics.cli "$@"\n')
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if k not in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME",
                        "NO_COLOR", "FORCE_COLOR")}
    env.update(HOME=str(home), PYTHONPATH=str(REPO), XDG_STATE_HOME=str(root / "state"),
               PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}")
    return {"work": work, "home": home, "env": env}


def shell(command: str, world: dict, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=world["work"], env=world["env"],
                          capture_output=True, text=True, timeout=300, input=stdin)


def commands() -> list[str]:
    out = []
    for block in blocks("sh"):
        for line in block.splitlines():
            line = line.strip()
            parts = [p.strip() for p in line.split("&&")]
            parts = [p for p in parts if p and not p.startswith(NOT_RUN)]
            if parts and "forensics" in parts[0]:
                out.append(" && ".join(parts))
    return out


def test_the_readme_has_the_examples_this_test_runs() -> None:
    cmds = commands()
    assert 'forensics scan "$(forensics sample)"' in cmds  # the quick start
    assert any(c.startswith("forensics baseline") for c in cmds)
    assert any("--baseline" in c for c in cmds)
    assert len(cmds) >= 15


def test_every_shell_example_runs(world: dict) -> None:
    for command in commands():  # in order: the baseline is written before it is used
        proc = shell(command, world)
        assert proc.returncode in (0, 1), (command, proc.stderr)
        for bad in ("Traceback", "internal error", "Usage:", "Error:"):
            assert bad not in proc.stderr, (command, proc.stderr)
        if "--exit-zero" in command:
            assert proc.returncode == 0, command


def test_the_quick_start_finds_every_rule(world: dict) -> None:
    proc = shell('forensics scan "$(forensics sample)"', world)
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[-1].startswith("Found 4 incidents in 1 session")


def test_configuration_examples_load_and_run(world: dict) -> None:
    configs = [b for b in blocks("toml") if "notify" not in b]
    assert configs
    for text in configs:
        cfg = config_from_dict(tomllib.loads(text), source="README")
        assert cfg.rules()
        (world["work"] / "forensics.toml").write_text(text, encoding="utf-8")
        try:
            proc = shell("forensics scan session.json", world)
        finally:
            (world["work"] / "forensics.toml").unlink()
        assert proc.returncode in (0, 1), proc.stderr


def test_the_json_contract_matches_the_output(world: dict) -> None:
    (contract,) = [b for b in blocks("json") if "schema_version" in b]
    documented = json.loads(contract)
    real = orjson.loads(shell("forensics scan session.json --format json", world).stdout)
    assert set(real) == set(documented)
    assert set(real["sessions"][0]) == set(documented["sessions"][0])
    assert set(real["findings"][0]) == set(documented["findings"][0])


def test_claude_code_hook_recipe(world: dict) -> None:
    (settings,) = [json.loads(b) for b in blocks("json") if "hooks" in b]
    command = settings["hooks"]["SessionEnd"][0]["hooks"][0]["command"]
    transcript = world["work"] / "hooked.jsonl"
    transcript.write_bytes(CLAUDE.read_bytes())
    payload = json.dumps({"session_id": "5d2e8f41-7c3a-4b9e-a1d6-3f8c2e9b7a10",
                          "transcript_path": str(transcript), "cwd": str(world["work"]),
                          "hook_event_name": "SessionEnd", "reason": "exit"})
    first = shell(command, world, stdin=payload)
    assert first.returncode == 0, first.stderr
    assert [l.split(": ")[1].split()[0] for l in first.stdout.splitlines()[:-1]] == [
        "FX001", "FX004", "FX004"]
    again = shell(command, world, stdin=payload)  # a Stop hook after the next turn
    assert again.returncode == 0 and again.stdout == ""
    from test_baseline import appended_exchange

    appended_exchange(transcript)
    grown = shell(command, world, stdin=payload)
    assert [l.split(": ")[1].split()[0] for l in grown.stdout.splitlines()[:-1]] == [
        "FX001", "FX004"]
    broken = shell(command, world, stdin="not json")
    assert broken.returncode == 1 and "not the JSON the agent sends" in broken.stderr


def test_codex_notify_recipe(world: dict) -> None:
    (config,) = [tomllib.loads(b) for b in blocks("toml") if "notify" in b]
    notification = json.dumps({"type": "agent-turn-complete", "thread-id": CODEX_ID,
                               "turn-id": "1", "cwd": "/home/dev/shop",
                               "input-messages": ["Summarize"], "last-assistant-message": ""})
    proc = shell(shlex.join([*config["notify"], notification]), world)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count(" FX001 ") == 2 and "rollout-2026-01-09" in proc.stdout
    unknown = shell(shlex.join([*config["notify"], json.dumps({"thread-id": "nope"})]), world)
    assert unknown.returncode == 1 and "no rollout file" in unknown.stderr


def test_opencode_plugin_recipe(world: dict) -> None:
    (plugin,) = blocks("js")
    assert 'event.type === "session.idle"' in plugin
    call = re.search(r"\$`(forensics hook opencode) \$\{event\.properties\.sessionID\}`", plugin)
    assert call
    proc = shell(f"{call.group(1)} {OPENCODE_ID}", world)
    assert proc.returncode == 0, proc.stderr
    scanned = orjson.loads(shell("forensics scan ~/.local/share/opencode -f json", world).stdout)
    expected = [f for f in scanned["findings"]
                if f["session_id"] in (OPENCODE_ID, "ses_44d1e2a07ffeVw5Xy4Za3Bc2De")]
    assert len([l for l in proc.stdout.splitlines() if " FX" in l]) == len(expected)


def test_notebook_example(world: dict, monkeypatch) -> None:
    (code,) = blocks("python")
    monkeypatch.chdir(world["work"])
    monkeypatch.setenv("HOME", str(world["home"]))
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert scope["report"].incidents.height == 3
    assert scope["incidents"].height == 3
