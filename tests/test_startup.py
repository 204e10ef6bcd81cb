"""What a command's start-up leaves out stays out, and leaving it out changes nothing.

A scan reads the rule files without their ``[[covered]]`` records, coerces its options without
pydantic validators, skips pydantic's plugin look-up, works out the ledger's fast-skip programs
without a regular expression per name, reads server patterns' needles without compiling them,
and makes findings without pydantic; each is held here to give what the eager way gave (no
timing assertions: the figures are in docs/performance.md).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from enum import Enum
from pathlib import Path
from typing import Optional

import pytest
import typer._coercion
import typer.main
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from forensics import _typer_coercion
from forensics.analysis.ledger import _WORD_RUN, _stands_alone
from forensics.analysis.phrases import source_of
from forensics.cli import app
from forensics.resources import RULE_CASES_HEADER, read_rule_file, rules_dir

RULE_FILES = sorted(rules_dir().glob("*.toml"))


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_a_rule_file_without_its_cases_is_the_rest_of_the_file(path: Path) -> None:
    """The ``[[covered]]`` records come last in every rule file, so reading up to the first
    one loses nothing else: a table after them would be lost by a scan, and fails here."""
    whole = tomllib.loads(path.read_text(encoding="utf-8"))
    cases = whole.pop("covered", None)
    assert read_rule_file(path) == whole
    assert read_rule_file(path, cases=True) == {**whole, **({"covered": cases} if cases else {})}


def test_a_bad_rule_file_is_reported_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "FX999-x.toml"
    path.write_text('id = "FX999"\nslug = "x"\ntitle = oops\n' + RULE_CASES_HEADER
                    + 'param = "p"\n', encoding="utf-8")
    with pytest.raises(tomllib.TOMLDecodeError, match="line 3"):
        read_rule_file(path)


def _run(code: str, env: dict[str, str] | None = None) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, **(env or {})})
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_scan_parses_no_rule_cases() -> None:
    """Every TOML text a scan parses is held: none of them holds a ``[[covered]]`` record,
    and the rule files were read (so the scan did load them, only without their cases)."""
    code = ("import tomllib\nparsed = []\nloads = tomllib.loads\n"
            "tomllib.loads = lambda text, **kw: parsed.append(text) or loads(text, **kw)\n"
            "from typer.testing import CliRunner\nfrom forensics.cli import app\n"
            "from forensics.resources import sample_session\n"
            "result = CliRunner().invoke(app, ['scan', str(sample_session())])\n"
            "assert result.exit_code == 1, result.output\n"
            "print(sum('[[covered]]' in t for t in parsed), sum('[params]' in t for t in parsed))")
    # without the knowledge cache, which would hand back the parsed files without parsing
    with_cases, rule_files = map(int, _run(code, {"FORENSICS_CACHE_DIR": ""}).split())
    assert with_cases == 0
    assert rule_files == len(list(rules_dir().glob("FX*.toml")))


def test_the_command_skips_pydantic_plugins_unless_the_user_chose() -> None:
    """``main`` sets ``PYDANTIC_DISABLE_PLUGINS`` for its own process only when unset; the
    library (a notebook importing forensics) leaves the environment alone."""
    code = ("import os, sys\nsys.argv = ['forensics', '--version']\n"
            "import forensics, forensics.cli\nbefore = os.environ.get('PYDANTIC_DISABLE_PLUGINS')\n"
            "try:\n    forensics.cli.main()\nexcept SystemExit:\n    pass\n"
            "print(before, os.environ.get('PYDANTIC_DISABLE_PLUGINS'))")
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-2:] == ["None", "__all__"]
    assert _run(code, {"PYDANTIC_DISABLE_PLUGINS": "logfire"}).split()[-2:] == ["logfire", "logfire"]


# -- typer's coercion without pydantic -----------------------------------------------------------

def _samples(annotation) -> list:
    """Values click may hand a parameter of ``annotation``: good ones and ones typer refuses."""
    origin = getattr(annotation, "__origin__", None)
    if origin is list:
        (item,) = annotation.__args__
        one = _samples(item)
        return [tuple(one[:2]), tuple(one), [one[0]], one[0], ()]
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        members = list(annotation)
        return [*members, *(m.value for m in members), members[0].value.upper(), "bogus", 3]
    if annotation is int or annotation == Optional[int]:
        return ["1", "0", "2", "16", "123456789012345678901234567890", "-1", "+3", "007", "1_000",
                " 4", "4 ", "٣", "1.5", "", "x", 0, 1, 5, -2, True, 1.5, b"1"]
    return ["x", "", "ünï -", "a/b", "-", 7, b"bytes", True, 1.5]


def _good(annotation) -> list:
    """Values of ``annotation`` the plain coercion takes alone: a string, a choice, a list of
    those (none for the kinds left to typer)."""
    origin = getattr(annotation, "__origin__", None)
    if origin is list:
        return [tuple(v) for v in (_good(annotation.__args__[0]),) if v]
    if annotation is str:
        return ["x", ""]
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return [*annotation, *(m.value for m in annotation)]
    if annotation is int or annotation == Optional[int]:
        return ["1", "2", "16", 3]
    return []


def _outcome(runtime, value, param, ctx):
    try:
        made = runtime.coerce(value, param=param, ctx=ctx)
    except Exception as exc:  # noqa: BLE001 - the error itself is the outcome compared
        return ("error", type(exc).__name__, str(exc))
    return ("value", type(made), made)


COMMANDS = typer.main.get_command(app).commands


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_is_coerced_as_typer_coerces_it(name: str) -> None:
    """For every parameter of every command, the plain coercion gives typer's own value (same
    type) or typer's own error for each sample, and never builds a pydantic validator for a
    string, a choice or a list of those."""
    assert _typer_coercion.install()  # this typer coerces through pydantic: the shortcut is on
    command = COMMANDS[name]
    ctx = command.make_context(name, [], resilient_parsing=True)
    checked = 0
    for param in command.params:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None:
            continue
        typer_way = typer._coercion.build_runtime_param(descriptor)
        plain = typer.core.build_runtime_param(descriptor)
        for value in _samples(descriptor.annotation):
            assert _outcome(plain, value, param, ctx) == _outcome(typer_way, value, param, ctx), \
                (name, param.name, value)
            checked += 1
        fresh = typer.core.build_runtime_param(descriptor)
        for value in _good(descriptor.annotation):
            fresh.coerce(value, param=param, ctx=ctx)
            assert fresh.typer_way is None, (name, param.name, value)
    assert checked or not command.params


def test_a_scan_builds_no_pydantic_validator_for_its_options() -> None:
    code = ("import sys\nfrom typer.testing import CliRunner\nfrom forensics.cli import app\n"
            "from forensics.resources import sample_session\n"
            "result = CliRunner().invoke(app, ['scan', str(sample_session()), '-f', 'jsonl', "
            "'--select', 'FX0', '--ignore', 'FX004', '--fail-on', 'medium'])\n"
            "assert result.exit_code == 1, result.output\n"
            "print('typer._adapters' in sys.modules)")
    assert _run(code) == "False"


def test_a_batch_with_a_worker_count_builds_no_pydantic_validator(tmp_path) -> None:
    code = ("import sys\nfrom typer.testing import CliRunner\nfrom forensics.cli import app\n"
            "from forensics.resources import sample_session\n"
            f"result = CliRunner().invoke(app, ['batch', str(sample_session()), '-o', "
            f"{str(tmp_path / 'out')!r}, '-j', '1', '--no-progress'])\n"
            "assert result.exit_code in (0, 1), result.output\n"
            "print('typer._adapters' in sys.modules)")
    assert _run(code) == "False"



def test_a_typer_that_builds_parameters_otherwise_gets_its_own_way(monkeypatch) -> None:
    """Should a typer's parameter class take other arguments than the shortcut passes, each
    parameter is built typer's own way and the command runs as before."""
    from forensics.resources import sample_session

    build = typer._coercion.RuntimeParam.__init__

    def refusing(self, *args, **kwargs):
        if type(self).__name__ == "PlainRuntimeParam":
            raise TypeError("unexpected keyword argument 'parameter_info'")
        build(self, *args, **kwargs)

    monkeypatch.setattr(typer._coercion.RuntimeParam, "__init__", refusing)
    result = CliRunner().invoke(app, ["scan", str(sample_session()), "-f", "jsonl",
                                      "--fail-on", "medium"])
    assert result.exit_code == 1, result.output
    assert '"code":"FX002"' in result.stdout

# -- the ledger's fast-skip programs -------------------------------------------------------------

NAME_CHARS = st.sampled_from("ab-_.[1é ")


@settings(max_examples=400, deadline=None)
@given(st.text(NAME_CHARS, max_size=4), st.text(NAME_CHARS, max_size=30))
def test_a_name_stands_alone_as_the_regular_expression_says(name: str, text: str) -> None:
    expected = re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None
    assert _stands_alone(name, text, set(_WORD_RUN.findall(text))) == expected


def test_the_needles_of_a_lazy_pattern_are_read_without_compiling_it() -> None:
    """Every shipped server pattern (and one that does not compile, read as its text) has the
    needles its compiled pattern has, and is still uncompiled after they were read."""
    from forensics.analysis.ledger import Knowledge, needles
    from forensics.analysis.phrases import LazyPattern, compile_later
    from forensics.rules import registry

    servers = [pat for _, pat in Knowledge.build(**registry()["FX002"].params).servers]
    fresh = [compile_later(*source_of(p)[:2], literal_if_invalid=True) for p in servers]
    fresh.append(compile_later(r"node server.js (", re.I, literal_if_invalid=True))
    for lazy in fresh:
        found = needles(lazy)
        assert "search" not in vars(lazy), lazy  # not compiled by reading them
        source, flags, _ = source_of(lazy)
        try:
            compiled = re.compile(source, flags)
        except re.error:
            compiled = re.compile(re.escape(source), flags)
        assert found == needles(compiled), source
    assert all(isinstance(p, LazyPattern) for p in fresh)


def test_findings_refuse_what_their_types_refuse_and_keep_lists() -> None:
    """The findings are dataclasses now (no pydantic on the scan path): they still refuse a
    severity or evidence kind outside their ``Literal`` and an unknown field, and a tuple of
    evidence turns is kept as a list, as the pydantic models kept it."""
    from forensics.findings import Evidence, Finding

    made = Finding(turn=3, anchor="a", severity="high", severity_reason="r", message="m",
                   evidence=(1, 2), facts=(Evidence(kind="reply", role="r", turn=3, anchor="a"),))
    assert made.evidence == [1, 2] and isinstance(made.facts, list)
    with pytest.raises(ValueError, match="severity"):
        Finding(turn=3, anchor="a", severity="critical", severity_reason="r", message="m")
    with pytest.raises(ValueError, match="evidence kind"):
        Evidence(kind="guess", role="r", turn=1, anchor="a")
    with pytest.raises(TypeError):
        Evidence(kind="reply", role="r", turn=1, anchor="a", colour="red")  # type: ignore[call-arg]
