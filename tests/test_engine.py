"""The rule registry, configuration and engine: joins refused, overrides checked, crashes isolated.

Property tests build random sessions straight from the turn model and check what every rule must
hold on any input: determinism, anchors that point at real turns, evidence inside the session.
"""

from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics import rules as rules_pkg
from forensics.analysis.params import resolve_references
from forensics.analysis.phrases import compiled_now
from forensics.config import config_from_dict, load_config
from forensics.engine import scan_session
from forensics.errors import ConfigError, RuleError
from forensics.findings import Finding
from forensics.model import (
    AssistantTurn,
    EventTurn,
    ProviderError,
    Session,
    ToolCall,
    ToolResultTurn,
    UserTurn,
)
from forensics.resources import rules_dir
from forensics.rules import _load_spec, registry, resolve

# -- registry ---------------------------------------------------------------------------------


def test_every_rule_file_is_joined_to_its_code() -> None:
    specs = registry()
    assert [s.code for s in specs.values()] == [
        "FX001", "FX002", "FX003", "FX004", "FX005", "FX006", "FX007", "FX008",
        "FX101", "FX102", "FX103"]
    assert [s.slug for s in specs.values()] == [
        "empty-response", "duplicate-launch", "ignored-tool-error", "user-resend",
        "unverified-claim", "retry-loop", "dangling-call", "user-correction",
        "interrupted-turn", "provider-error", "context-compaction"]
    assert {s.code for s in specs.values() if s.kind == "harness"} == {"FX101", "FX102", "FX103"}
    assert all(s.severity == "low" for s in specs.values() if s.is_harness)
    for spec in specs.values():
        assert Path(spec.path).name == f"{spec.code}-{spec.slug}.toml"
        assert spec.params_class.param_names == set(spec.params)
        assert [p.name for p in inspect.signature(spec.func).parameters.values()] == [
            "session", "params"]
        assert spec.title and spec.summary and spec.rationale and spec.remediation
        assert spec.falsepositives, f"{spec.code} lists no false positives"


def _write_rule(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


@dataclass(frozen=True)
class _DummyParams:
    param_names: ClassVar[frozenset[str]] = frozenset({"threshold"})
    threshold: int

    @classmethod
    def from_params(cls, raw):
        return cls(raw["threshold"])


def _dummy(session: Session, params: _DummyParams):
    yield from ()


def _keyword_style(session: Session, *, threshold: int):
    yield from ()


def test_registry_refuses_an_unknown_kind(tmp_path: Path) -> None:
    path = _write_rule(tmp_path, "FX009-x.toml",
                       'id="FX009"\nslug="x"\ntitle="t"\nseverity="low"\nsummary="s"\n'
                       'kind="event"\n[params]\nthreshold=1\n')
    with pytest.raises(RuleError, match="kind must be one of rule, harness, not 'event'"):
        _load_spec(path, _dummy)


def test_kind_defaults_to_rule(tmp_path: Path) -> None:
    path = _write_rule(tmp_path, "FX009-x.toml",
                       'id="FX009"\nslug="x"\ntitle="t"\nseverity="low"\nsummary="s"\n'
                       '[params]\nthreshold=1\n')
    assert _load_spec(path, _dummy).kind == "rule"


def test_registry_refuses_wrong_file_name(tmp_path: Path) -> None:
    path = _write_rule(tmp_path, "FX001-wrong.toml",
                       'id="FX001"\nslug="empty-response"\ntitle="t"\nseverity="high"\n'
                       'summary="s"\n[params]\nthreshold=1\n')
    with pytest.raises(RuleError, match="file name must be FX001-empty-response.toml"):
        _load_spec(path, _dummy)


def test_registry_refuses_params_that_differ_from_the_function(tmp_path: Path) -> None:
    path = _write_rule(tmp_path, "FX009-x.toml",
                       'id="FX009"\nslug="x"\ntitle="t"\nseverity="high"\nsummary="s"\n'
                       '[params]\nthreshhold=1\n')
    with pytest.raises(RuleError, match="differ from"):
        _load_spec(path, _dummy)


def test_registry_refuses_keyword_only_parameters(tmp_path: Path) -> None:
    path = _write_rule(tmp_path, "FX009-x.toml",
                       'id="FX009"\nslug="x"\ntitle="t"\nseverity="high"\nsummary="s"\n'
                       '[params]\nthreshold=1\n')
    with pytest.raises(RuleError, match="_keyword_style must take .session, params"):
        _load_spec(path, _keyword_style)


def test_a_rule_gets_its_params_built_once_per_parameter_set(tmp_path: Path) -> None:
    path = _write_rule(tmp_path, "FX009-x.toml",
                       'id="FX009"\nslug="x"\ntitle="t"\nseverity="high"\nsummary="s"\n'
                       '[params]\nthreshold=1\n')
    seen = []

    def rule_func(session: Session, params: _DummyParams):
        seen.append(params)
        yield from ()

    spec = _load_spec(path, rule_func)
    session = Session(id="s", source="s", agent="claude-code", format="claude-code", turns=[])
    for raw in (None, None, {"threshold": 1}, {"threshold": 2}):
        list(spec.run(session, raw))
    assert [p.threshold for p in seen] == [1, 1, 1, 2]
    assert seen[0] is seen[1] is seen[2] and seen[3] is not seen[0]


@dataclass(frozen=True)
class _ListParams:
    param_names: ClassVar[frozenset[str]] = frozenset({"names", "more"})
    names: tuple[str, ...]

    @classmethod
    def from_params(cls, raw):
        return cls(tuple(raw["names"]))


def test_every_rule_may_refer_to_another_list_of_its_params() -> None:
    from forensics.analysis.params import build

    built = build(_ListParams, {"names": ["a", "@more"], "more": ["b", "c"]})
    assert built.names == ("a", "b", "c")
    with pytest.raises(RuleError, match="names no list"):
        build(_ListParams, {"names": ["@nothing"], "more": []})


def test_registry_refuses_a_file_without_code(tmp_path: Path) -> None:
    path = _write_rule(tmp_path, "FX009-x.toml",
                       'id="FX009"\nslug="x"\ntitle="t"\nseverity="high"\nsummary="s"\n')
    with pytest.raises(RuleError, match="no implementation"):
        _load_spec(path, None)


def test_registry_refuses_code_without_a_file(monkeypatch) -> None:
    registry.cache_clear()
    monkeypatch.setitem(rules_pkg._IMPLEMENTATIONS, "FX999", _dummy)
    try:
        with pytest.raises(RuleError, match="FX999"):
            registry()
    finally:
        monkeypatch.delitem(rules_pkg._IMPLEMENTATIONS, "FX999")
        registry.cache_clear()
    assert "FX001" in registry()


def test_rule_files_ship_with_the_code() -> None:
    names = sorted(p.name for p in rules_dir().glob("FX*.toml"))
    assert names == ["FX001-empty-response.toml", "FX002-duplicate-launch.toml",
                     "FX003-ignored-tool-error.toml", "FX004-user-resend.toml",
                     "FX005-unverified-claim.toml", "FX006-retry-loop.toml",
                     "FX007-dangling-call.toml",
                     "FX008-user-correction.toml",
                     "FX101-interrupted-turn.toml", "FX102-provider-error.toml",
                     "FX103-context-compaction.toml"]


@pytest.mark.parametrize("name, codes", [
    ("FX003", ["FX003"]), ("user-resend", ["FX004"]), ("FX", sorted(registry())),
    ("ALL", sorted(registry())), ("FX10", ["FX101", "FX102", "FX103"]),
    ("FX00", [c for c in sorted(registry()) if c.startswith("FX00")]),
])
def test_selection_by_code_prefix_or_slug(name: str, codes: list[str]) -> None:
    assert [s.code for s in resolve([name])] == codes


def test_unknown_rule_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown rule 'FX042'"):
        resolve(["FX042"])


@given(st.lists(st.sampled_from(["ALL", "FX", "FX0", "FX1", "FX00", "FX002", "fx003",
                                 "user-resend", "interrupted-turn", "empty-response"]),
                min_size=1, max_size=4))
def test_the_rule_files_choose_what_the_registry_chooses(names: list[str]) -> None:
    """A batch rerun's config key and every command's name check read the rule files only
    (``resolve_files``); a run's rules are the same choice joined to their code."""
    files = rules_pkg.resolve_files(names)
    assert [f.code for f in files] == [s.code for s in resolve(names)]
    specs = registry()
    assert all(f.params == specs[f.code].params and f.kind == specs[f.code].kind
               and f.path == specs[f.code].path for f in files)


def test_a_config_checks_rule_names_without_importing_any_rule() -> None:
    """Naming rules is checked against the rule files, so an unknown name fails (and a batch
    rerun works out its key) before any rule module is imported."""
    import subprocess
    import sys

    code = ("import sys\nfrom forensics.config import Config\nfrom forensics.errors import "
            "ConfigError\nConfig(select=['FX00'], ignore=['user-resend']).rule_files()\n"
            "try:\n    Config(select=['FX042']).rule_files()\nexcept ConfigError as e:\n"
            "    print(e)\nprint(sorted(m for m in sys.modules if m.startswith("
            "('forensics.rules.', 'forensics.analysis.session', 'forensics.analysis.ledger'))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    error, loaded = proc.stdout.splitlines()
    assert error.startswith("unknown rule 'FX042'")
    assert loaded == "[]"


# -- configuration ----------------------------------------------------------------------------


def test_config_overrides_and_extends_params() -> None:
    cfg = config_from_dict({
        "ignore": ["user-resend"],
        "rules": {"user-resend": {"similarity": 0.8},
                  "FX003": {"extend-probe_commands": ["my-probe"]}},
    })
    assert [s.code for s in cfg.rules()] == [c for c in sorted(registry()) if c != "FX004"]
    spec4, spec3 = registry()["FX004"], registry()["FX003"]
    assert cfg.params_for(spec4)["similarity"] == 0.8
    assert cfg.params_for(spec3)["probe_commands"][-1] == "my-probe"
    assert len(cfg.params_for(spec3)["probe_commands"]) == len(spec3.params["probe_commands"]) + 1
    assert spec3.params["probe_commands"][-1] != "my-probe", "the rule file's value is untouched"


def test_every_pattern_of_the_rule_files_compiles() -> None:
    """The rule files' patterns compile on first use (start-up): this holds each of them to
    compiling, as the load did before."""
    for spec in registry().values():
        with compiled_now():
            spec.params_class.from_params(resolve_references(spec.params))


def test_a_bad_pattern_in_the_config_fails_at_load_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "forensics.toml"
    path.write_text('[rules.retry-loop]\nextend-polling_patterns = ["(unclosed"]\n',
                    encoding="utf-8")
    with pytest.raises(ConfigError, match=r"forensics.toml: \[rules.retry-loop\] bad regular "
                                          r"expression '\(unclosed': missing \)"):
        load_config(path)
    with pytest.raises(ConfigError, match=r"forensics.toml: \[rules.retry-loop\] .*'@nolist' "
                                          "names no list"):
        config_from_dict({"rules": {"retry-loop": {"extend-polling_patterns": ["@nolist"]}}},
                         source=str(path))


@pytest.mark.parametrize("data, message", [
    ({"rules": {"user-resend": {"similarty": 0.8}}}, "no parameter 'similarty'"),
    ({"rules": {"user-resend": {"similarity": "high"}}}, "must be float"),
    ({"rules": {"no-such-rule": {}}}, "names no rule"),
    ({"selct": ["FX001"]}, "unknown key"),
    ({"select": "FX001"}, "must be a list"),
    ({"rules": {"FX003": {"extend-probe_commands": "x"}}}, "extends lists and tables only"),
])
def test_config_errors_name_the_problem(data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_dict(data, source="forensics.toml")


def test_a_retired_parameter_is_said_and_ignored(capsys) -> None:
    """A configuration written for an earlier release (FX003's ``death_words``, which a user
    extended so that their own death pattern was tried) still loads; the note names the file
    and the key, and the user's pattern fires on its own needles."""
    from forensics.analysis.outcome import outcome
    from forensics.model import ToolResultTurn
    from forensics.rules.fx003_ignored_tool_error import IgnoredToolErrorParams

    cfg = config_from_dict({"rules": {"ignored-tool-error": {
        "extend-death_words": ["Bus error"], "extend-death_patterns": [r"^Bus error\b"]}}},
        source="forensics.toml")
    assert capsys.readouterr().err == (
        "forensics: forensics.toml: [rules.ignored-tool-error] extend-death_words is no longer "
        "read (the death patterns' own needles decide which outputs are searched); remove it\n")
    spec = registry()["FX003"]
    assert "death_words" not in cfg.params_for(spec)
    rules = IgnoredToolErrorParams.from_params(cfg.params_for(spec)).outcome_rules
    result = ToolResultTurn(ordinal=1, anchor="a", call_id="c", exit_code=0,
                            output="Bus error\n" + "x" * 9000)
    assert outcome(result, "make", rules).cause == "death"


def test_config_from_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname="x"\n[tool.forensics]\nselect=["FX001"]\n', encoding="utf-8")
    cfg = load_config(tmp_path / "pyproject.toml")
    assert [s.code for s in cfg.rules()] == ["FX001"]


def test_bad_toml_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "forensics.toml"
    path.write_text("select = [", encoding="utf-8")
    with pytest.raises(ConfigError, match="forensics.toml"):
        load_config(path)


# -- engine -----------------------------------------------------------------------------------


def _session(turns) -> Session:
    for i, t in enumerate(turns, 1):
        t.ordinal = i
    return Session(id="s", agent="opencode", format="case", source="mem", turns=turns)


def test_a_crashing_rule_is_reported_and_the_others_still_run(monkeypatch) -> None:
    session = _session([UserTurn(ordinal=0, anchor="u1", text="hi"),
                        AssistantTurn(ordinal=0, anchor="a1", text="")])
    spec = registry()["FX004"]

    def boom(session, **params):
        raise ValueError("secret-token-in-a-local")

    original = type(spec).run
    monkeypatch.setattr(type(spec), "run", lambda self, s, p=None: boom(s) if self.code ==
                        "FX004" else original(self, s, p))
    result = scan_session(session)
    assert [i.rule for i in result.incidents] == ["empty-response"]
    assert [c.code for c in result.crashes] == ["FX004"]
    assert "ValueError" in result.crashes[0].error
    assert "secret-token" not in result.crashes[0].error, "no locals or messages leak"


# -- properties over random sessions ------------------------------------------------------------

commands = st.sampled_from([
    "npm run dev", "nohup python -m http.server 8000 &", "pytest -q", "grep -r x .",
    "kill 1234", "pkill -f http.server", "curl -s localhost:8000/health", "vite", "ls /nope",
    "docker compose up -d", "uvicorn app:app --port 8001", "cargo build",
])
texts = st.sampled_from(["", " ", "(no content)", "done", "All tests pass ✅", "retry", "继续",
                         "it failed", "Ready.", "run the tests please", "npm run dev"])


@st.composite
def sessions(draw) -> Session:
    turns = []
    open_calls: list[ToolCall] = []
    for i in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["user", "assistant", "result", "event"]))
        anchor = f"t{i}"
        if kind == "user":
            turns.append(UserTurn(ordinal=0, anchor=anchor, text=draw(texts),
                                  queued=draw(st.booleans())))
        elif kind == "assistant":
            calls = [ToolCall(call_id=f"c{i}_{j}", name="bash", command=draw(commands),
                              input={}, anchor=anchor)
                     for j in range(draw(st.integers(0, 2)))]
            open_calls.extend(calls)
            error = ProviderError(name="APIError") if draw(st.booleans()) and not calls else None
            turns.append(AssistantTurn(ordinal=0, anchor=anchor, text=draw(texts),
                                       reasoning=draw(texts), tool_calls=calls,
                                       aborted=draw(st.booleans()) and not calls, error=error))
        elif kind == "result" and open_calls:
            call = open_calls.pop(0)
            turns.append(ToolResultTurn(
                ordinal=0, anchor=call.anchor, call_id=call.call_id, name="bash",
                output=draw(st.sampled_from(["", "Killed", "EADDRINUSE", "ok", "Traceback"])),
                exit_code=draw(st.sampled_from([None, 0, 1, 137])),
                is_error=draw(st.booleans()), timed_out=draw(st.booleans())))
        else:
            turns.append(EventTurn(ordinal=0, anchor=anchor, event=draw(st.sampled_from(
                ["abort", "interrupt", "api_error", "compaction", "turn_complete",
                 "notification"]))))
    return _session(turns)


@settings(max_examples=150, deadline=None)
@given(sessions())
def test_rules_are_deterministic_and_anchor_real_turns(session: Session) -> None:
    first = scan_session(session)
    again = scan_session(copy.deepcopy(session))
    assert not first.crashes, [str(c) for c in first.crashes]
    assert [i.dump() for i in first.incidents] == [i.dump() for i in again.incidents]
    for incident in first.incidents:
        assert 1 <= incident.turn <= len(session.turns)
        assert session.turn(incident.turn).anchor == incident.anchor
        assert all(1 <= o <= len(session.turns) for o in incident.evidence_turns)
        assert incident.severity in ("high", "medium", "low") and incident.severity_reason


def test_finding_fields_are_required() -> None:
    with pytest.raises(Exception):
        Finding(turn=1, anchor="a", severity="urgent", severity_reason="", message="")


def test_a_death_pattern_of_the_users_own_fires_without_the_shipped_words() -> None:
    """FX003 skips outputs that hold none of its death patterns' needles; the needles come
    from the patterns in use, so a configuration's own death line (``Bus error``) is found."""
    from forensics.analysis.outcome import outcome
    from forensics.model import ToolResultTurn
    from forensics.rules.fx003_ignored_tool_error import IgnoredToolErrorParams

    params = {**registry()["FX003"].params,
              "death_patterns": [*registry()["FX003"].params["death_patterns"], r"^Bus error\b"]}
    rules = IgnoredToolErrorParams.from_params(params).outcome_rules
    result = ToolResultTurn(ordinal=1, anchor="a", call_id="c", exit_code=0,
                            output="compiling\nBus error\n" + "x" * 9000)
    died = outcome(result, "make", rules)
    assert (died.kind, died.cause, died.words) == ("failed", "death", "Bus error")
    assert outcome(ToolResultTurn(ordinal=1, anchor="a", call_id="c", exit_code=0,
                                  output="bus error"), "make", rules).kind == "ok"  # cased
