"""Every knowledge entry is exercised: removing it changes some rule case's outcome.

For each entry of each list or table in ``rules/*.toml`` (a list item, a table key, an item of
a table's list), the test removes that one entry, runs the owning rule's cases in process
(``rules/analysis.toml``: every rule's cases) and compares the outcome (the flagged turns and
their severities) with the unchanged file. An entry that changes nothing must be recorded in
the rule file's ``[[covered]]`` tables, which say why it stays:

    [[covered]]
    param = "inert_programs"          # the list or table (``kill_commands.pid`` for a nested one)
    entries = ["man", "less"]         # its entries that no case depends on alone
    why = "…"                         # why they stay: the broader entry or case that covers them

A record must stay true: an entry it names that does change an outcome, or that no longer
exists, fails the test too (a stale record hides a real dependency).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from copy import deepcopy
from pathlib import Path
from typing import Any

import pytest

import forensics.analysis.knowledge as shared_knowledge
import forensics.analysis.outcome  # noqa: F401  (the module, not the package's names)
from forensics.errors import RuleError
from forensics.resources import read_rule_file, rules_dir
from forensics.rules import registry
from rulecases import load_cases

outcome_module = sys.modules["forensics.analysis.outcome"]

Entry = tuple[str, Any]
"""(where, entry): ``where`` is ``param``, ``param.key`` (a nested list); entry a value or key."""


def entries_of(params: dict[str, Any]) -> Iterator[tuple[str, Any, Any]]:
    """(where, entry, params without that one entry) for every list item and table key.

    A table key that other lists name (``default_ports`` and ``reconciling_commands`` name
    ``server_commands`` keys; ``"@server_commands.docker"`` refers to one) goes with its
    mentions, so that the file still loads and the cases, not the loader, tell.
    """
    for name, value in params.items():
        if isinstance(value, list):
            for i, item in enumerate(value):
                rest = deepcopy(params)
                del rest[name][i]
                yield name, item, rest
        elif isinstance(value, dict):
            for key, inner in value.items():
                rest = _without_key(params, name, key)
                yield name, key, rest
                if isinstance(inner, list) and len(inner) > 1:
                    for i, item in enumerate(inner):
                        rest = deepcopy(params)
                        del rest[name][key][i]
                        yield f"{name}.{key}", item, rest


NAMED_BY = {"server_commands": ("default_ports", "reconciling_commands")}
"""Tables whose keys other params name (checked when FX002's Knowledge is built)."""


def _without_key(params: dict[str, Any], table: str, key: str) -> dict[str, Any]:
    rest = deepcopy(params)
    del rest[table][key]
    for name in NAMED_BY.get(table, ()):
        if isinstance(rest.get(name), dict):
            rest[name].pop(key, None)
        elif isinstance(rest.get(name), list):
            rest[name] = [v for v in rest[name] if v != key]
    for name, value in rest.items():
        if isinstance(value, list):
            rest[name] = [v for v in value if v != f"@{table}.{key}"]
    return rest


def covered_records(data: dict[str, Any], source: str) -> dict[tuple[str, Any], str]:
    out: dict[tuple[str, Any], str] = {}
    for record in data.get("covered", []):
        assert record.get("why", "").strip(), f"{source}: a [[covered]] record needs a why"
        for entry in record["entries"]:
            out[(record["param"], entry)] = record["why"]
    return out


def _outcomes(codes: list[str], params_for: dict[str, dict[str, Any]]) -> tuple:
    out = []
    for code in codes:
        spec = registry()[code]
        for case in CASES[code]:
            try:
                found = {f.turn: f.severity for f in spec.run(case.session, params_for[code])}
            except RuleError as exc:  # the file would not load: the entry is required
                found = {"refused": str(exc)}
            out.append((case.id, tuple(sorted(found.items(), key=str))))
    return tuple(out)


CASES = {code: load_cases(code) for code in registry()}


def _report(source: str, unexercised: list[tuple[str, Any]], stale: list[str]) -> str:
    lines = [f"{source}:"]
    if unexercised:
        lines.append("  entries no rule case depends on (add a case, or a [[covered]] record "
                     "saying what covers them):")
        lines += [f"    {where}: {entry!r}" for where, entry in unexercised]
    if stale:
        lines.append("  stale [[covered]] records:")
        lines += [f"    {s}" for s in stale]
    return "\n".join(lines)


@pytest.mark.parametrize("code", sorted(registry()))
def test_every_entry_of_a_rule_file_changes_a_case(code: str) -> None:
    spec = registry()[code]
    data = read_rule_file(Path(spec.path), cases=True)
    records = covered_records(data, spec.path)
    baseline = _outcomes([code], {code: spec.params})
    unexercised, changed, present = [], set(), []
    for where, entry, rest in entries_of(spec.params):
        present.append((where, entry))
        if _outcomes([code], {code: rest}) != baseline:
            changed.add((where, entry))
        elif (where, entry) not in records:
            unexercised.append((where, entry))
    stale = [f"{w}: {e!r} ({'changes a case' if (w, e) in changed else 'no such entry'})"
             for (w, e) in records if (w, e) in changed or (w, e) not in present]
    assert not unexercised and not stale, _report(spec.path, unexercised, stale)


def test_every_entry_of_the_shared_knowledge_changes_a_case(monkeypatch) -> None:
    path = rules_dir() / shared_knowledge.SHARED_FILE
    data = read_rule_file(path, cases=True)
    knowledge = {k: v for k, v in data.items() if k != "covered"}
    records = covered_records(data, str(path))
    codes = sorted(registry())
    defaults = {c: registry()[c].params for c in codes}

    def outcomes_with(shared: dict[str, Any]) -> tuple:
        monkeypatch.setattr(shared_knowledge, "shared", lambda: shared)
        monkeypatch.setattr(outcome_module, "shared", lambda: shared)
        outcome_module.shared_rules.cache_clear()
        outcome_module._telling.cache_clear()
        try:
            return _outcomes(codes, defaults)
        finally:
            outcome_module.shared_rules.cache_clear()
            outcome_module._telling.cache_clear()

    baseline = outcomes_with(knowledge)
    unexercised, changed = [], set()
    for where, entry, rest in entries_of(knowledge):
        if outcomes_with(rest) != baseline:
            changed.add((where, entry))
        elif (where, entry) not in records:
            unexercised.append((where, entry))
    stale = [f"{w}: {e!r}" for (w, e) in records if (w, e) in changed]
    assert not unexercised and not stale, _report(str(path), unexercised, stale)


def test_the_walk_removes_each_entry_once() -> None:
    params = {"a": ["x", "y"], "t": {"k": ["p", "q"], "j": "r"}, "n": 3}
    seen = [(where, entry) for where, entry, _ in entries_of(params)]
    assert seen == [("a", "x"), ("a", "y"), ("t", "k"), ("t.k", "p"), ("t.k", "q"), ("t", "j")]
    _, _, rest = next(entries_of(params))
    assert rest["a"] == ["y"] and params["a"] == ["x", "y"]
