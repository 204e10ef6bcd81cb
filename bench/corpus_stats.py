"""Measure the shapes the generator imitates, from the real corpus (run once, by hand).

Prints size quantiles (user text, assistant text, reasoning, tool output, tool-call input) and
the tool-call mix per format. Only numbers leave this script; the corpus content never does.
The constants in ``bench/generate.py`` were copied from its output.

    python bench/corpus_stats.py [/work/shared/corpus]
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import orjson

QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0)


def quantiles(values: list[int]) -> list[int]:
    if not values:
        return []
    s = sorted(values)
    return [s[min(len(s) - 1, int(q * (len(s) - 1)))] for q in QUANTILES]


class Stats:
    def __init__(self) -> None:
        self.user: list[int] = []
        self.assistant: list[int] = []
        self.reasoning: list[int] = []
        self.tool_output: list[int] = []
        self.tools: Counter[str] = Counter()
        self.calls_per_reply: list[int] = []
        self.bytes = 0
        self.records = 0

    def show(self, name: str) -> None:
        print(f"== {name}: {self.bytes / 1e6:.1f} MB, {self.records} records")
        for field in ("user", "assistant", "reasoning", "tool_output", "calls_per_reply"):
            vals = getattr(self, field)
            print(f"  {field:<16} n={len(vals):<6} q{QUANTILES}={quantiles(vals)}")
        total = sum(self.tools.values()) or 1
        mix = {k: round(v / total, 3) for k, v in self.tools.most_common(12)}
        print(f"  tool mix        {mix}")


def _text_of(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def opencode(path: Path, st: Stats) -> None:
    doc = orjson.loads(path.read_bytes())
    for m in doc.get("messages", []):
        st.records += 1
        role = m["info"].get("role")
        calls = 0
        for p in m.get("parts", []):
            t = p.get("type")
            if t == "text" and not p.get("synthetic"):
                (st.user if role == "user" else st.assistant).append(len(p.get("text", "")))
            elif t == "reasoning":
                st.reasoning.append(len(p.get("text", "")))
            elif t == "tool":
                calls += 1
                st.tools[p.get("tool", "?")] += 1
                state = p.get("state", {})
                st.tool_output.append(len(state.get("output") or state.get("error") or ""))
        if role == "assistant":
            st.calls_per_reply.append(calls)


def claude(path: Path, st: Stats) -> None:
    for raw in path.open("rb"):
        try:
            rec = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        st.records += 1
        msg = rec.get("message") or {}
        content = msg.get("content")
        if rec.get("type") == "user" and not rec.get("isMeta"):
            if isinstance(content, str):
                st.user.append(len(content))
            elif isinstance(content, list):
                for b in content:
                    if b.get("type") == "tool_result":
                        st.tool_output.append(len(_text_of(b.get("content"))))
                    elif b.get("type") == "text":
                        st.user.append(len(b.get("text", "")))
        elif rec.get("type") == "assistant" and isinstance(content, list):
            calls = 0
            for b in content:
                if b.get("type") == "text":
                    st.assistant.append(len(b.get("text", "")))
                elif b.get("type") == "thinking":
                    st.reasoning.append(len(b.get("thinking", "")))
                elif b.get("type") == "tool_use":
                    calls += 1
                    st.tools[b.get("name", "?")] += 1
            st.calls_per_reply.append(calls)


def codex(path: Path, st: Stats) -> None:
    for raw in path.open("rb"):
        try:
            rec = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        st.records += 1
        p = rec.get("payload") or {}
        if rec.get("type") == "event_msg" and p.get("type") == "user_message":
            st.user.append(len(p.get("message") or ""))
        elif rec.get("type") != "response_item":
            continue
        kind = p.get("type")
        if kind == "message" and p.get("role") == "assistant":
            st.assistant.append(len(_text_of(p.get("content"))))
        elif kind == "reasoning":
            st.reasoning.append(sum(len(s.get("text", "")) for s in p.get("summary") or []))
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            st.tools[p.get("name") or kind] += 1
        elif kind in ("function_call_output", "custom_tool_call_output"):
            out = p.get("output")
            st.tool_output.append(len(out if isinstance(out, str) else orjson.dumps(out)))


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/shared/corpus")
    for name, sub, fn in (("opencode", "opencode", opencode), ("claude", "claude", claude),
                          ("codex", "codex", codex)):
        st = Stats()
        for f in sorted((root / sub).iterdir()):
            if "jazzyalex" in f.name:  # schema fixtures, not real sessions
                continue
            st.bytes += f.stat().st_size
            fn(f, st)
        st.show(name)


if __name__ == "__main__":
    main()
