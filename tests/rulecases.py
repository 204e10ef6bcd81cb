"""Rule case files: short scripts of turns with marks, turned into sessions.

A case file is ``tests/fixtures/rules/<CODE>-<slug>.toml`` holding ``[[case]]`` tables, each with a
``name``, a ``why`` (the line of docs/rules.md it covers) and ``[[case.turn]]`` entries. A turn is one of::

    user = "text"                    # UserTurn (queued = true, command = "/x", arguments = "…")
    assistant = "text"               # AssistantTurn (reasoning, error = "APIError", aborted,
                                     #   finish, bash = "cmd" / background = true, calls = [...])
    result = "output"                # ToolResultTurn for the oldest call still without a result
                                     #   (exit, is_error, error, killed, timed_out, aborted, call)
    event = "abort"                  # EventTurn (text, detail = {…})
    gap = 7200                       # seconds of silence before the next turn (resumed sessions)

Marks: ``expect = true`` or ``expect = "high"`` (the rule must flag this turn, with that severity),
``ok = true`` (must not: documents a negative), ``todo = true`` (should be flagged but is not yet:
an expected failure, kept visible). Unmarked turns must not be flagged either.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forensics.model import (
    AssistantTurn,
    EventTurn,
    ProviderError,
    Session,
    ToolCall,
    ToolResultTurn,
    UserTurn,
)

CASES_DIR = Path(__file__).parent / "fixtures" / "rules"


@dataclass
class Case:
    code: str
    name: str
    why: str
    session: Session
    expect: dict[int, str | None] = field(default_factory=dict)
    todo: set[int] = field(default_factory=set)
    ok: set[int] = field(default_factory=set)

    @property
    def id(self) -> str:
        return f"{self.code}-{self.name}"


def load_cases(code: str | None = None) -> list[Case]:
    cases = []
    for path in sorted(CASES_DIR.glob("FX*.toml")):
        file_code = path.name.split("-", 1)[0]
        if code and file_code != code:
            continue
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        for raw in data.get("case", []):
            cases.append(build_case(file_code, raw, source=str(path)))
    return cases


def build_case(code: str, raw: dict[str, Any], *, source: str) -> Case:
    turns: list[Any] = []
    pending: list[ToolCall] = []
    case = Case(code=code, name=raw["name"], why=raw.get("why", ""), session=None)  # type: ignore[arg-type]
    clock = 1_700_000_000.0
    for spec in raw.get("turn", []):
        if "gap" in spec and len(spec) == 1:
            clock += float(spec["gap"])
            continue
        clock += float(spec.get("after", 5))
        ordinal = len(turns) + 1
        anchor = spec.get("anchor", f"m{ordinal}")
        common = {"ordinal": ordinal, "anchor": anchor, "time": clock}
        if "user" in spec:
            turn = UserTurn(text=spec["user"], queued=spec.get("queued", False),
                            command=spec.get("command"), arguments=spec.get("arguments"),
                            **common)
        elif "assistant" in spec:
            calls = []
            if "bash" in spec:
                calls.append({"tool": "bash", "command": spec["bash"],
                              "background": spec.get("background", False)})
            calls.extend(spec.get("calls", []))
            tool_calls = []
            for i, c in enumerate(calls):
                cmd = c.get("command")
                tool_calls.append(ToolCall(
                    call_id=c.get("id", f"call{ordinal}_{i}"), name=c.get("tool", "bash"),
                    input=c.get("input", {"command": cmd} if cmd else {}), command=cmd,
                    background=c.get("background", False), anchor=anchor))
            pending.extend(tool_calls)
            error = spec.get("error")
            turn = AssistantTurn(
                text=spec["assistant"], reasoning=spec.get("reasoning", ""),
                tool_calls=tool_calls, aborted=spec.get("aborted", False),
                error=ProviderError(name=error, message=spec.get("error_message", ""))
                if error else None,
                finish=spec.get("finish"), message_id=anchor, **common)
        elif "result" in spec:
            want = spec.get("call")
            call = next((c for c in pending if want is None or c.call_id == want), None)
            if call is None:
                raise ValueError(f"{source}: case {raw['name']}: result with no open call")
            pending.remove(call)
            status = dict(exit_code=spec.get("exit"), is_error=spec.get("is_error", False),
                          error=spec.get("error"), killed=spec.get("killed", False),
                          timed_out=spec.get("timed_out", False))
            if raw.get("agent") == "codex" and not set(spec) & {"exit", "is_error", "error"}:
                status = _codex_status(spec["result"])  # what the Codex reader would record
            turn = ToolResultTurn(
                call_id=call.call_id, name=call.name, output=spec["result"],
                aborted=spec.get("aborted", False), **status, **common)
        elif "event" in spec:
            turn = EventTurn(event=spec["event"], text=spec.get("text", ""),
                             detail=spec.get("detail", {}), **common)
        else:
            raise ValueError(f"{source}: case {raw['name']}: turn {ordinal} has no kind")
        turns.append(turn)
        mark = spec.get("expect")
        if mark is not None and mark is not False:
            case.expect[ordinal] = mark if isinstance(mark, str) else None
        if spec.get("todo"):
            case.todo.add(ordinal)
        if spec.get("ok"):
            case.ok.add(ordinal)
    case.session = Session(id=f"case-{code}-{raw['name']}", agent=raw.get("agent", "opencode"),
                           format="case", source=source, turns=turns)
    return case


def _codex_status(output: str) -> dict[str, Any]:
    """The status the Codex reader gives a result that recorded none but its text."""
    from forensics.ingest.codex import _parse_output

    parsed = _parse_output(output)
    return dict(exit_code=parsed["exit_code"], is_error=parsed["is_error"],
                error=parsed["error"], killed=parsed["killed"], timed_out=parsed["timed_out"],
                status_in_text=parsed["exit_code"] is None and not parsed["is_error"])
