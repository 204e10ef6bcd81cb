"""The rule registry: rule files (``rules/*.toml``) joined to their detection code.

A rule is data for what it is (identity, prose, severity, parameters, examples) and code for how
it detects. ``@rule("FX003")`` registers the detection function; ``registry()`` joins every TOML
file to exactly one function and refuses any mismatch: a file without code, code without a file,
a file name that is not ``{id}-{slug}.toml``, ``[params]`` keys that are not the rule's
parameters, duplicate ids or slugs. ``rule_files()`` is the files alone (identity, kind,
parameters), for what chooses or names rules without running them.

A detection function takes the session and one typed parameters object:
``def rule(session, params: RetryLoopParams)``, where the class has ``param_names`` (the
``[params]`` keys) and ``from_params(raw)``, which compiles the lists once
(``forensics.analysis.params.build`` makes one object per parameter set, not per session). A
rule file with an empty ``[params]`` takes ``forensics.analysis.params.NoParams``.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from forensics.analysis.params import NoParams
from forensics.analysis.params import build as build_params
from forensics.errors import ConfigError, RuleError
from forensics.findings import Finding
from forensics.model import Session
from forensics.resources import read_rule_file, rules_dir

RuleFunc = Callable[..., Iterator[Finding]]

_IMPLEMENTATIONS: dict[str, RuleFunc] = {}

KINDS = ("rule", "harness")
"""What a rule file's ``kind`` may say; ``rule`` when it says nothing."""


def rule(code: str) -> Callable[[RuleFunc], RuleFunc]:
    """Register the detection function for rule ``code`` (its metadata lives in rules/)."""

    def register(func: RuleFunc) -> RuleFunc:
        if code in _IMPLEMENTATIONS:
            raise RuleError(f"{code} is implemented twice")
        _IMPLEMENTATIONS[code] = func
        return func

    return register


@dataclass(frozen=True)
class Example:
    kind: str  # "positive" | "negative"
    text: str


@dataclass(frozen=True)
class RuleSpec:
    """A rule file joined to its implementation."""

    code: str
    slug: str
    title: str
    severity: str
    status: str
    summary: str
    rationale: str
    remediation: str
    falsepositives: tuple[str, ...]
    params: dict[str, Any]
    func: RuleFunc = field(repr=False, compare=False)
    examples: tuple[Example, ...] = ()
    path: str = ""
    params_class: type = field(default=NoParams, repr=False, compare=False)
    """The typed parameters class the function takes."""
    kind: str = "rule"
    """``rule`` (the assistant's mistake) or ``harness`` (an event of the harness worth a row:
    an abort, a provider error, a compaction; never a reason for exit status 1)."""

    @property
    def is_harness(self) -> bool:
        return self.kind == "harness"

    def run(self, session: Session, params: dict[str, Any] | None = None) -> Iterator[Finding]:
        raw = params if params is not None else self.params
        return self.func(session, build_params(self.params_class, raw))


def _import_rule_modules() -> None:
    import forensics.rules as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("fx"):
            importlib.import_module(f"{pkg.__name__}.{info.name}")


def _params_class(func: RuleFunc) -> type | None:
    """The typed parameters class of ``func(session, params: Cls)``, if it takes one."""
    positional = [p for p in inspect.signature(func).parameters.values()
                  if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    if len(positional) != 2:
        return None
    cls = typing.get_type_hints(func).get(positional[1].name)
    if isinstance(cls, type) and hasattr(cls, "from_params") and hasattr(cls, "param_names"):
        return cls
    return None


@dataclass(frozen=True)
class RuleFile:
    """A rule file read without its detection code: its identity, kind and parameters. Enough
    to choose rules by name and to say what a run's findings depend on (``batch``'s config
    key), so a batch rerun that scans nothing imports no rule module."""

    code: str
    slug: str
    kind: str
    path: str
    params: dict[str, Any]
    data: dict[str, Any] = field(repr=False, compare=False)
    """The whole parsed file, for ``registry`` to join."""

    @property
    def is_harness(self) -> bool:
        return self.kind == "harness"


def _read_rule_file(path) -> RuleFile:
    where = str(path)
    try:
        data = read_rule_file(path)
    except ValueError as exc:  # tomllib.TOMLDecodeError, or a file that is not UTF-8
        raise RuleError(f"{where}: {exc}") from None
    missing = [k for k in ("id", "slug", "title", "severity", "summary") if k not in data]
    if missing:
        raise RuleError(f"{where}: missing {', '.join(missing)}")
    code, slug = data["id"], data["slug"]
    if path.name != f"{code}-{slug}.toml":
        raise RuleError(f"{where}: file name must be {code}-{slug}.toml")
    kind = data.get("kind", "rule")
    if kind not in KINDS:
        raise RuleError(f"{where}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
    return RuleFile(code=code, slug=slug, kind=kind, path=where,
                    params=dict(data.get("params", {})), data=data)


@cache
def rule_files() -> dict[str, RuleFile]:
    """Every rule file, keyed by code, in code order. Raises ``RuleError`` on a file that is
    not a rule file, and on duplicate ids or slugs."""
    files: dict[str, RuleFile] = {}
    slugs: set[str] = set()
    for path in sorted(rules_dir().glob("FX*.toml")):
        file = _read_rule_file(path)
        if file.code in files or file.slug in slugs:
            raise RuleError(f"{path}: duplicate rule id or slug ({file.code}, {file.slug})")
        files[file.code] = file
        slugs.add(file.slug)
    return files


def _load_spec(path, func: RuleFunc | None) -> RuleSpec:
    """The rule file at ``path`` joined to ``func``."""
    return _joined(_read_rule_file(path), func)


def _joined(file: RuleFile, func: RuleFunc | None) -> RuleSpec:
    where, data, params = file.path, file.data, file.params
    if func is None:
        raise RuleError(f"{where}: no implementation registered for {file.code}")
    params_class = _params_class(func)
    if params_class is None:
        raise RuleError(f"{where}: {func.__name__} must take (session, params: <class with "
                        "param_names and from_params>)")
    expected = set(params_class.param_names)
    if set(params) != expected:
        raise RuleError(
            f"{where}: [params] keys {sorted(params)} differ from {func.__name__}'s "
            f"parameters {sorted(expected)}"
        )
    try:
        build_params(params_class, params)  # built once per process, checked at load
    except RuleError as exc:
        raise RuleError(f"{where}: {exc}") from None
    examples = tuple(
        Example(kind=e.get("kind", "positive"), text=e.get("text", ""))
        for e in data.get("examples", [])
    )
    return RuleSpec(
        code=file.code,
        slug=file.slug,
        title=data["title"],
        severity=data["severity"],
        status=data.get("status", "stable"),
        summary=data["summary"],
        rationale=data.get("rationale", ""),
        remediation=data.get("remediation", ""),
        falsepositives=tuple(data.get("falsepositives", [])),
        params=params,
        func=func,
        examples=examples,
        path=where,
        params_class=params_class,
        kind=file.kind,
    )


@cache
def registry() -> dict[str, RuleSpec]:
    """Every rule, keyed by code, in code order. Raises ``RuleError`` on any mismatch."""
    _import_rule_modules()
    specs = {code: _joined(file, _IMPLEMENTATIONS.get(code))
             for code, file in rule_files().items()}
    orphans = sorted(set(_IMPLEMENTATIONS) - set(specs))
    if orphans:
        raise RuleError(f"rules implemented without a rule file: {', '.join(orphans)}")
    return specs


def resolve(names: list[str] | tuple[str, ...]) -> list[RuleSpec]:
    """Rules named by code (``FX001``), code prefix (``FX``) or slug, in registry order."""
    specs = registry()
    return [specs[f.code] for f in resolve_files(names)]


def resolve_files(names: list[str] | tuple[str, ...]) -> list[RuleFile]:
    """The rule files ``resolve`` would choose, without importing any rule's code."""
    files = rule_files()
    chosen: list[RuleFile] = []
    for name in names:
        hits = [
            f for f in files.values()
            if name.lower() == f.slug or f.code.lower().startswith(name.lower()) or name == "ALL"
        ]
        if not hits:
            known = ", ".join(f"{f.code} {f.slug}" for f in files.values())
            raise ConfigError(f"unknown rule {name!r}; known rules: {known}")
        chosen.extend(h for h in hits if h not in chosen)
    return sorted(chosen, key=lambda f: f.code)
