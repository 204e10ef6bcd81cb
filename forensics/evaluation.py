"""How often the rules are right: findings matched against hand-labelled sessions.

A label file (``labels.json``, format in ``docs/accuracy.md``) names the rules its labeller
looked for, the incidents found (each with every acceptable anchor) and the traps (tempting spots
that are not incidents). Scoring follows that format's contract:

* a finding matches an incident of the same rule when its anchor is one of the incident's
  anchors; each finding matches at most one incident and each incident at most one finding
  (a maximum matching, so overlapping anchor lists cannot cost a match);
* an unmatched finding of a measured rule is a false positive (named after a trap it hits);
* an incident with ``"confidence": "low"`` is optional unless ``include_low``: matching it counts
  neither way, missing it is no miss;
* a rule not named in a file's ``rules`` is not measured by that file; a rule no file names is
  reported as not measured, never as perfect.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from forensics.config import Config
from forensics.errors import ForensicsError, IngestError
from forensics.findings import Incident

__all__ = ["LabelFile", "RuleScore", "Evaluation", "load_labels", "evaluate", "score_case",
           "label_document"]


class LabelIncident(BaseModel):
    model_config = ConfigDict(extra="allow")

    rule: str
    anchors: list[str] = Field(min_length=1)
    severity: str | None = None
    confidence: Literal["high", "low"] = "high"
    note: str = ""


class LabelTrap(BaseModel):
    model_config = ConfigDict(extra="allow")

    rule: str
    anchors: list[str] = Field(min_length=1)
    note: str = ""


class LabelFile(BaseModel):
    """One ``labels.json``: a session and what a careful reviewer found in it."""

    model_config = ConfigDict(extra="allow")

    case: str
    input: str
    format: str | None = None
    rules: list[str]
    incidents: list[LabelIncident] = Field(default_factory=list)
    traps: list[LabelTrap] = Field(default_factory=list)
    path: Path | None = Field(default=None, exclude=True)
    """Where this label file was read from; ``input`` is relative to its folder."""

    @property
    def input_path(self) -> Path:
        base = self.path.parent if self.path is not None else Path.cwd()
        return (base / Path(self.input).expanduser()).resolve()


class LabelError(ForensicsError):
    """A label file that cannot be used (bad JSON, wrong shape, unknown rule)."""


def load_labels(paths: Iterable[str | Path]) -> list[LabelFile]:
    """Every ``labels.json`` under the given folders (recursively), or the files themselves."""
    found: list[Path] = []
    for p in map(Path, paths):
        p = p.expanduser()
        if p.is_dir():
            found.extend(sorted(p.rglob("labels.json")))
        elif p.is_file():
            found.append(p)
        else:
            raise LabelError(f"{p}: no such file or folder")
    if not found:
        raise LabelError(f"no labels.json under {', '.join(map(str, paths))}")
    return [_load_one(f) for f in found]


def _load_one(path: Path) -> LabelFile:
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise LabelError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except OSError as exc:
        raise LabelError(f"{path}: {exc.strerror or exc}") from None
    try:
        label = LabelFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise LabelError(f"{path}: {where}: {first['msg']}") from None
    label.path = path
    return label


# -- matching ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Miss:
    case: str
    rule: str
    anchor: str
    """The first acceptable anchor of the missed incident."""
    note: str
    severity: str | None


@dataclass(frozen=True)
class FalseAlarm:
    case: str
    rule: str
    anchor: str
    turn: int
    severity: str
    message: str
    trap: str | None
    """The note of the trap the finding fell into, if the labeller named this spot."""


@dataclass
class CaseScore:
    """One label file against the findings of its session(s)."""

    case: str
    rules: list[str]
    tp: dict[str, int] = field(default_factory=dict)
    misses: list[Miss] = field(default_factory=list)
    false_alarms: list[FalseAlarm] = field(default_factory=list)
    optional_hits: dict[str, int] = field(default_factory=dict)


def _slug_of(name: str, aliases: dict[str, str]) -> str:
    return aliases.get(name, name)


def score_case(label: LabelFile, incidents: Sequence[Incident], *, include_low: bool = False,
               aliases: dict[str, str] | None = None) -> CaseScore:
    """Match one session's findings to its labels (see the module docstring for the rules)."""
    aliases = aliases or {}
    measured = [_slug_of(r, aliases) for r in label.rules]
    score = CaseScore(case=label.case, rules=measured)
    for rule in measured:
        wanted = [i for i in label.incidents if _slug_of(i.rule, aliases) == rule]
        found = [f for f in incidents if f.rule == rule]
        pairs = _max_matching(found, wanted)
        counted = optional = 0
        for fi, li in pairs.items():
            if wanted[li].confidence == "low" and not include_low:
                optional += 1
            else:
                counted += 1
        score.tp[rule] = counted
        score.optional_hits[rule] = optional
        matched_labels = set(pairs.values())
        for li, inc in enumerate(wanted):
            if li in matched_labels or (inc.confidence == "low" and not include_low):
                continue
            score.misses.append(Miss(label.case, rule, inc.anchors[0], inc.note, inc.severity))
        traps = [t for t in label.traps if _slug_of(t.rule, aliases) == rule]
        for fi, f in enumerate(found):
            if fi in pairs:
                continue
            trap = next((t.note for t in traps if f.anchor in t.anchors), None)
            score.false_alarms.append(FalseAlarm(label.case, rule, f.anchor, f.turn, f.severity,
                                                 f.message, trap))
    return score


def _max_matching(found: Sequence[Incident], wanted: Sequence[LabelIncident]) -> dict[int, int]:
    """Finding index -> label index, as many pairs as the anchors allow (augmenting paths)."""
    options = [[li for li, inc in enumerate(wanted) if f.anchor in inc.anchors] for f in found]
    owner: dict[int, int] = {}  # label index -> finding index

    def augment(fi: int, seen: set[int]) -> bool:
        for li in options[fi]:
            if li in seen:
                continue
            seen.add(li)
            if li not in owner or augment(owner[li], seen):
                owner[li] = fi
                return True
        return False

    for fi in range(len(found)):
        if options[fi]:
            augment(fi, set())
    return {fi: li for li, fi in owner.items()}


# -- aggregation -------------------------------------------------------------------------------


@dataclass
class RuleScore:
    """One rule over every label file that measures it."""

    rule: str
    code: str
    sessions: int = 0
    tp: int = 0
    fp: int = 0
    fn: int = 0
    optional: int = 0
    """Findings that matched a low-confidence incident (counted neither way)."""

    @property
    def measured(self) -> bool:
        return self.sessions > 0

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    @property
    def f1(self) -> float | None:
        # 2TP / (2TP + FP + FN): defined whenever the rule found or missed anything, so a rule
        # with only false alarms scores 0, not "undefined"
        denominator = 2 * self.tp + self.fp + self.fn
        return 2 * self.tp / denominator if denominator else None

    @property
    def fp_per_10(self) -> float | None:
        return 10 * self.fp / self.sessions if self.sessions else None

    def as_dict(self) -> dict:
        return {"rule": self.rule, "code": self.code, "measured": self.measured,
                "sessions": self.sessions, "tp": self.tp, "fp": self.fp, "fn": self.fn,
                "optional_matches": self.optional, "precision": _round(self.precision),
                "recall": _round(self.recall), "f1": _round(self.f1),
                "fp_per_10_sessions": _round(self.fp_per_10)}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


@dataclass
class Evaluation:
    rules: list[RuleScore]
    total: RuleScore
    """All measured rules together; ``sessions`` counts label files."""
    cases: list[CaseScore]
    errors: list[str]
    include_low: bool

    @property
    def misses(self) -> list[Miss]:
        return [m for c in self.cases for m in c.misses]

    @property
    def false_alarms(self) -> list[FalseAlarm]:
        return [f for c in self.cases for f in c.false_alarms]

    def failed_gates(self, *, min_f1: float | None = None,
                     max_fp_per_10: float | None = None) -> list[str]:
        """What breaks the team's thresholds, one line each (empty when every gate holds)."""
        failed: list[str] = []
        for r in [*self.rules, self.total]:
            if not r.measured:
                continue
            if min_f1 is not None and r.f1 is not None and r.f1 < min_f1:
                failed.append(f"{r.rule}: F1 {r.f1:.2f} < {min_f1:g}")
            if max_fp_per_10 is not None and r.fp_per_10 is not None \
                    and r.fp_per_10 > max_fp_per_10:
                failed.append(f"{r.rule}: {r.fp_per_10:.2f} false alarms per 10 sessions "
                              f"> {max_fp_per_10:g}")
        return failed

    def as_dict(self) -> dict:
        return {
            "include_low": self.include_low,
            "label_files": len(self.cases),
            "rules": [r.as_dict() for r in self.rules],
            "total": self.total.as_dict(),
            "misses": [m.__dict__ for m in self.misses],
            "false_alarms": [f.__dict__ for f in self.false_alarms],
            "errors": self.errors,
        }


def evaluate(labels: Sequence[LabelFile], config: Config | None = None, *,
             include_low: bool = False) -> Evaluation:
    """Scan each labelled session with ``config`` and score the findings against the labels."""
    from forensics.engine import scan_session
    from forensics.ingest import iter_sessions

    config = config or Config()
    specs = config.rules()
    aliases = {alias: s.slug for s in specs for alias in (s.code, s.slug)}
    from forensics.rules import registry

    for s in registry().values():  # labels may name rules the config leaves out
        aliases.setdefault(s.code, s.slug)
    selected = {s.slug for s in specs}
    cases: list[CaseScore] = []
    errors: list[str] = []
    for label in labels:
        unknown = [r for r in label.rules if _slug_of(r, aliases) not in aliases.values()]
        if unknown:
            errors.append(f"{label.path}: unknown rule {', '.join(unknown)}")
        incidents: list[Incident] = []
        read_errors: list = []
        try:
            for session in iter_sessions(label.input_path, format=label.format,
                                         errors=read_errors):
                incidents.extend(scan_session(session, config, specs).incidents)
        except (IngestError, OSError) as exc:
            errors.append(f"{label.path}: input {label.input}: {exc}")
            continue
        errors.extend(f"{label.path}: input: {e}" for e in read_errors)
        # a rule the config leaves out is not measured, even where the label names it
        measured = label.model_copy(update={"rules": [
            r for r in label.rules if _slug_of(r, aliases) in selected]})
        measured.path = label.path
        cases.append(score_case(measured, incidents, include_low=include_low, aliases=aliases))
    scores = {s.slug: RuleScore(s.slug, s.code) for s in specs}
    for case in cases:
        for rule in case.rules:
            r = scores[rule]
            r.sessions += 1
            r.tp += case.tp.get(rule, 0)
            r.optional += case.optional_hits.get(rule, 0)
        for m in case.misses:
            scores[m.rule].fn += 1
        for f in case.false_alarms:
            scores[f.rule].fp += 1
    total = RuleScore("all rules", "ALL", sessions=sum(1 for c in cases if c.rules))
    for r in scores.values():
        total.tp += r.tp
        total.fp += r.fp
        total.fn += r.fn
        total.optional += r.optional
    return Evaluation(list(scores.values()), total, cases, errors, include_low)


# -- rendering ---------------------------------------------------------------------------------


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def table_rows(ev: Evaluation) -> list[list[str]]:
    """The per-rule table: header first, then one row per rule, then all rules together."""
    rows = [["rule", "sessions", "TP", "FP", "FN", "precision", "recall", "F1", "FP/10"]]
    for r in [*ev.rules, ev.total]:
        if not r.measured:
            rows.append([f"{r.code} {r.rule}", "not measured", "", "", "", "", "", "", ""])
            continue
        name = r.rule if r.code == "ALL" else f"{r.code} {r.rule}"
        rows.append([name, str(r.sessions), str(r.tp), str(r.fp), str(r.fn), _pct(r.precision),
                     _pct(r.recall), _pct(r.f1), _pct(r.fp_per_10)])
    return rows


def render_text(ev: Evaluation, *, redact: bool = True) -> str:
    from forensics.report.redact import redact as hide
    from forensics.timeline import shorten

    clean = hide if redact else (lambda s: s)
    rows = table_rows(ev)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                     enumerate(zip(row, widths))).rstrip() for row in rows]
    out.append("")
    low = "counted" if ev.include_low else "optional (--include-low counts them)"
    out.append(f"{len(ev.cases)} labelled sessions; low-confidence incidents {low}")
    if ev.misses:
        out.append("")
        out.append(f"Missed ({len(ev.misses)}):")
        for m in ev.misses:
            out.append(f"  {m.rule:<20} {m.case}  {m.anchor}")
            out.append(f"      label: {clean(shorten(m.note, 300))}")
    if ev.false_alarms:
        out.append("")
        out.append(f"False alarms ({len(ev.false_alarms)}):")
        for f in ev.false_alarms:
            out.append(f"  {f.rule:<20} {f.case}  {f.anchor}  (turn {f.turn}, {f.severity})")
            out.append(f"      finding: {clean(shorten(f.message, 300))}")
            if f.trap:
                out.append(f"      trap: {clean(shorten(f.trap, 300))}")
    for err in ev.errors:
        out.append(f"error: {err}")
    return "\n".join(out) + "\n"


def render_markdown_table(ev: Evaluation) -> str:
    rows = table_rows(ev)
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    for row in rows[1:]:
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def render_json(ev: Evaluation, *, redact: bool = True) -> str:
    doc = ev.as_dict()
    if redact:
        from forensics.report.redact import redact as hide

        for key, fields in (("misses", ("note",)), ("false_alarms", ("message", "trap"))):
            for item in doc[key]:
                for f in fields:
                    if item.get(f):
                        item[f] = hide(item[f])
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"


# -- starting a label file ---------------------------------------------------------------------


def label_document(session_path: Path, results, *, relative_to: Path,
                   rules: Sequence[str], redact: bool = True) -> dict:
    """A starting ``labels.json``: every finding as a candidate incident for a person to confirm
    (keep it, set its confidence) or move to ``traps`` (it is not an incident)."""
    import os

    from forensics.report.redact import redact as hide

    clean = hide if redact else (lambda s: s)
    fmt = results[0].session.format if results else None
    try:
        rel = os.path.relpath(session_path.resolve(), relative_to.resolve())
    except ValueError:  # another drive on Windows
        rel = str(session_path.resolve())
    incidents = [
        {"rule": i.rule, "anchors": [i.anchor], "severity": i.severity, "confidence": "high",
         "note": "UNREVIEWED candidate from forensics: " + clean(i.message)}
        for r in results for i in r.incidents
    ]
    return {"case": session_path.stem, "input": rel, "format": fmt, "rules": list(rules),
            "incidents": incidents, "traps": []}
