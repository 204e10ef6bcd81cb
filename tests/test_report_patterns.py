"""The report's precompiled patterns give what the plain ``re`` calls they replaced gave."""

from __future__ import annotations

import re

from hypothesis import given, settings, strategies as st

from forensics.report import narrative, render

# Transcript-like text: the characters the patterns look for, plus anything else.
texts = st.text(alphabet=st.sampled_from(list(" \t\n`*_#|<>[]\\.!?-$ab1€")) | st.characters(),
                max_size=80)


_MARKUP = r"([\\`*_\[\]<>|#])"  # what Markdown could read as markup, escaped


def _plain_md_inline(text: str) -> str:
    return re.sub(_MARKUP, r"\\\1", re.sub(r"\s+", " ", text))


def _plain_run(text: str) -> int:
    return max((len(m) for m in re.findall(r"`+", text)), default=0)


def _plain_paragraphs(text: str) -> list[str]:
    out = []
    for block in re.split(r"\n\s*\n", text.strip("\n")):
        if block.strip():
            lines = [re.sub(r"^\s{0,3}#{1,6}\s+", "", ln) for ln in block.splitlines()]
            out.append("<p>" + "<br>".join(render.md_to_html_inline(ln) for ln in lines)
                       + "</p>")
    return out


def _plain_md_message(text: str) -> str:
    out = []
    for i, chunk in enumerate(re.split(r"`([^`\n]+)`", text or "")):
        if chunk:
            out.append(render.md_code_span(chunk).replace("|", "\\|") if i % 2
                       else render.md_inline(chunk))
    return "".join(out)


def _plain_figures_in(text: str, limit: int, pattern: re.Pattern[str]) -> tuple[str, ...]:
    out: list[str] = []
    for chunk in re.split(r"(?<=[.!?])\s+|\n+", text or ""):
        chunk = re.sub(r"\*\*|__|`", "", chunk).strip(" -*#|>")
        if 8 < len(chunk) <= 400 and pattern.search(chunk) and not chunk.startswith("$"):
            out.append(chunk)
            if len(out) == limit:
                break
    return tuple(out)


@settings(max_examples=300, deadline=None)
@given(texts)
def test_render_helpers_equal_plain_re(text: str) -> None:
    assert render.md_inline(text) == _plain_md_inline(text)
    lines = text.rstrip().splitlines() or [""]
    assert render.md_blockquote(text) == "\n".join(
        ("> " + re.sub(_MARKUP, r"\\\1", ln)).rstrip() for ln in lines)
    flat = " ".join(text.split()) or " "
    fence = "`" * (_plain_run(flat) + 1)
    assert render.md_code_span(text).startswith(fence)
    assert not render.md_code_span(text).startswith(fence + "`")
    assert render.md_code_block(text).startswith("`" * max(3, _plain_run(text) + 1) + "\n")
    assert render._paragraphs(text) == _plain_paragraphs(text)
    assert render.md_message(text) == _plain_md_message(text)


@settings(max_examples=300, deadline=None)
@given(texts, st.integers(1, 4))
def test_figures_in_equal_plain_re(text: str, limit: int) -> None:
    pattern = re.compile(r"\d")
    assert narrative._figures_in(text, limit, pattern) == _plain_figures_in(text, limit, pattern)


def test_rule_prose_html_marks_code() -> None:
    env = render.environment("html")
    assert str(env.filters["prose"]("run `make test` & <x>")) == \
        "run <code>make test</code> &amp; &lt;x&gt;"


def test_templates_not_reloaded() -> None:
    """Templates are read once per process (``auto_reload=False``): no stat per render."""
    assert render.environment("markdown").auto_reload is False
    assert render.environment("html").auto_reload is False
