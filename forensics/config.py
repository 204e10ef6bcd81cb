"""User configuration: which rules run and with which parameters.

Read from the nearest ``forensics.toml`` (top level) or ``[tool.forensics]`` in
``pyproject.toml``, in the working folder or above it::

    select = ["FX001", "duplicate-launch"]
    ignore = ["user-resend"]

    [rules.duplicate-launch]            # by slug or code
    default_ports = { myserver = 9000 } # replaces the rule file's value
    extend-server_commands = { my-daemon = 'my-daemon +serve' }  # adds to a table

Every key is checked against the rule's ``[params]`` on load; a typo is a ``ConfigError`` naming
the file and key, not a silently ignored setting.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forensics.analysis.params import build as build_params
from forensics.analysis.phrases import compiled_now
from forensics.errors import ConfigError, RuleError
from forensics.rules import RuleFile, RuleSpec, registry, resolve_files


@dataclass
class Config:
    select: list[str] = field(default_factory=lambda: ["ALL"])
    ignore: list[str] = field(default_factory=list)
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Code -> the full parameter set after overrides."""
    source: str | None = None
    secret_patterns: list[str] = field(default_factory=list)
    """Extra redaction pattern files (``secret-patterns``), absolute paths."""

    def rules(self) -> list[RuleSpec]:
        specs = registry()
        return [specs[f.code] for f in self.rule_files()]

    def rule_files(self) -> list[RuleFile]:
        """The chosen rules' files, without their code: validates the names (``ConfigError``)
        at the cost of reading the rule files, not of importing the rules."""
        chosen = resolve_files(self.select)
        dropped = {f.code for f in resolve_files(self.ignore)} if self.ignore else set()
        return [f for f in chosen if f.code not in dropped]

    def params_for(self, spec: RuleSpec | RuleFile) -> dict[str, Any]:
        return self.params.get(spec.code, spec.params)


def find_config(start: Path | None = None) -> Path | None:
    """The nearest ``forensics.toml``, or ``pyproject.toml`` with ``[tool.forensics]``, in
    ``start`` or the folders above it (as ruff finds its settings from a subfolder)."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        for candidate in (folder / "forensics.toml", folder / "pyproject.toml"):
            if not candidate.is_file():
                continue
            if candidate.name == "pyproject.toml" and not _has_our_table(candidate):
                continue
            return candidate
    return None


def _has_our_table(pyproject: Path) -> bool:
    """Whether a ``pyproject.toml`` has ``[tool.forensics]``. Most projects' files never
    name forensics; they are not parsed (``tomllib`` is 5 ms of a small scan's start-up)."""
    try:
        text = pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    if "forensics" not in text:
        return False
    import tomllib

    try:
        return "forensics" in tomllib.loads(text).get("tool", {})
    except tomllib.TOMLDecodeError:
        return False


def load_config(path: Path | None = None, *, discover: bool = True) -> Config:
    """The config at ``path`` (or discovered in the working folder), validated."""
    if path is None and discover:
        path = find_config()
    if path is None:
        return Config()
    import tomllib

    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if Path(path).name == "pyproject.toml":
        data = data.get("tool", {}).get("forensics", {})
    return config_from_dict(data, source=str(path))


def config_from_dict(data: dict[str, Any], *, source: str = "<config>") -> Config:
    unknown = set(data) - {"select", "ignore", "rules", "secret-patterns"}
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {', '.join(sorted(unknown))}; "
                          "expected select, ignore, secret-patterns, [rules.<rule>]")
    cfg = Config(source=source)
    extra = data.get("secret-patterns", [])
    if not isinstance(extra, list) or not all(isinstance(v, str) for v in extra):
        raise ConfigError(f"{source}: secret-patterns must be a list of TOML file paths")
    base = Path(source).parent if source != "<config>" else Path.cwd()
    cfg.secret_patterns = [str((base / v).resolve()) for v in extra]
    if cfg.secret_patterns:
        from forensics.redact import use_extra_files

        use_extra_files(cfg.secret_patterns)
    for key in ("select", "ignore"):
        if key in data:
            value = data[key]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{source}: {key} must be a list of rule codes or slugs")
            setattr(cfg, key, value)
    try:
        cfg.rule_files()
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    specs = registry()
    by_name = {s.code: s for s in specs.values()} | {s.slug: s for s in specs.values()}
    for name, overrides in data.get("rules", {}).items():
        spec = by_name.get(name)
        if spec is None:
            raise ConfigError(f"{source}: [rules.{name}] names no rule")
        cfg.params[spec.code] = _checked(spec, _apply(spec, overrides, source), source)
    return cfg


def _checked(spec: RuleSpec, params: dict[str, Any], source: str) -> dict[str, Any]:
    """``params`` once built, every pattern compiled now (the rule files' wait for their first
    use): a bad pattern or ``@`` reference of the user's is an error at load, naming the file."""
    try:
        with compiled_now():
            build_params(spec.params_class, params)
    except re.error as exc:
        raise ConfigError(f"{source}: [rules.{spec.slug}] bad regular expression "
                          f"{exc.pattern!r}: {exc.msg}") from None
    except RuleError as exc:
        raise ConfigError(f"{source}: [rules.{spec.slug}] {exc}") from None
    return params


def _apply(spec: RuleSpec, overrides: dict[str, Any], source: str) -> dict[str, Any]:
    params = dict(spec.params)
    retired: Mapping[str, str] = getattr(spec.params_class, "retired_params", {})
    for key, value in overrides.items():
        extend = key.startswith("extend-")
        name = key.removeprefix("extend-")
        if name in retired and name not in params:  # an older release's: said, not fatal
            sys.stderr.write(f"forensics: {source}: [rules.{spec.slug}] {key} is no longer "
                             f"read ({retired[name]}); remove it\n")
            continue
        if name not in params:
            raise ConfigError(
                f"{source}: [rules.{spec.slug}] has no parameter {name!r}; "
                f"known: {', '.join(sorted(params))}"
            )
        default = params[name]
        if extend:
            if isinstance(default, list) and isinstance(value, list):
                params[name] = default + value
            elif isinstance(default, dict) and isinstance(value, dict):
                params[name] = default | value
            else:
                raise ConfigError(f"{source}: {key} extends lists and tables only")
            continue
        if not _same_type(default, value):
            raise ConfigError(
                f"{source}: [rules.{spec.slug}] {name} must be {type(default).__name__}, "
                f"got {type(value).__name__}"
            )
        params[name] = value
    return params


def _same_type(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, (int, float)):
        return isinstance(value, (int, float))
    return isinstance(value, type(default))
