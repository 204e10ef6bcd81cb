"""The Jinja environment and the filters that turn case-study pieces into Markdown or HTML.

One environment per output format, built on first use and kept: templates compile once per
process, which matters when a batch renders thousands of incidents. HTML autoescapes; Markdown
escapes through its own filters (``md``, ``mdquote``, ``mdcode``), because transcript text can hold
``<script>`` and Markdown viewers render raw HTML. Every filter that prints transcript text also
redacts it when the render context says so. Output depends only on the input: no clocks, no
dictionary-order surprises, no absolute paths of this machine.
"""

from __future__ import annotations

import re
from functools import cache
from html import escape
from typing import Any

from forensics import knowledge_cache
from forensics.redact import patterns as _patterns, redact as _redact
from forensics.report._memo import PartMemo, TextMemo
from forensics.report._prose import Piece, Sentence, plain as _plain, shorten as _shorten
from forensics.resources import templates_dir

_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]<>|#"})
"""Each character Markdown could read as markup, backslash-escaped (``str.translate``: one
pass in C, 3-7 times a regex substitution with a template on a transcript's lines)."""
_MD_ANGLE = str.maketrans({"<": "\\<", ">": "\\>"})
# Compiled once: these run on every transcript text of every page (re.sub(str, …) looks the
# pattern up in re's cache at each call).
_SPACES = re.compile(r"\s+")
_BACKTICKS = re.compile(r"`+")
_BLANK_LINE = re.compile(r"\n\s*\n")
_HEADING_MARK = re.compile(r"^\s{0,3}#{1,6}\s+")
_CODE_SPAN = re.compile(r"`([^`\n]+)`")


redacted = TextMemo(_redact, stamp=_patterns)
"""``forensics.redact.redact``, once per text and session: every transcript text is printed
on the session page and the case's own page in both formats, and redacting it costs as much
as the rest of its rendering."""


def _maybe_redact(ctx: Any, text: str) -> str:
    return redacted(text) if ctx.get("redact", True) else text


def md_inline(text: str) -> str:
    """Transcript words inside Markdown prose: no emphasis, links, HTML or table breaks."""
    return _SPACES.sub(" ", text).translate(_MD_SPECIAL)


def md_code_span(text: str) -> str:
    flat = " ".join(text.split()) or " "
    run = max((len(m) for m in _BACKTICKS.findall(flat)), default=0)
    fence = "`" * (run + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def md_code_block(text: str, lang: str = "") -> str:
    run = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, run + 1)
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}"


def md_blockquote(text: str) -> str:
    lines = text.rstrip().splitlines() or [""]
    return "\n".join(("> " + ln.translate(_MD_SPECIAL)).rstrip() for ln in lines)


def clip(text: str, limit: int = 1500) -> str:
    """Keep long transcript blocks readable: head and tail with a marker between."""
    text = text.strip("\n")
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 2 // 3], text[-limit // 3:]
    return f"{head}\n…[{len(text) - len(head) - len(tail)} characters omitted]…\n{tail}"


_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
_STRONG = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_EM = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?![\w*])")


def md_to_html_inline(text: str) -> str:
    """Transcript Markdown as safe inline HTML: everything escaped first, then only code spans,
    bold and italics become tags (so no raw ``**`` and no transcript HTML reach the page)."""
    out: list[str] = []
    pos = 0
    for m in _INLINE_CODE.finditer(text):
        out.append(_emphasis(escape(text[pos:m.start()])))
        out.append(f"<code>{escape(m.group(2).strip())}</code>")
        pos = m.end()
    out.append(_emphasis(escape(text[pos:])))
    return "".join(out)


def _emphasis(escaped: str) -> str:
    escaped = _STRONG.sub(lambda m: f"<strong>{m.group(1) or m.group(2)}</strong>", escaped)
    return _EM.sub(r"<em>\1</em>", escaped)


_FENCE = re.compile(r"^(`{3,}|~{3,})[^\n]*\n(.*?)(?:^\1[ \t]*$|\Z)", re.M | re.S)


def md_to_html_block(text: str) -> str:
    """A transcript message as safe HTML paragraphs, fenced code as ``<pre>``, lists kept as
    lines; headings and tables stay text. Everything is escaped before any tag is added."""
    parts: list[str] = []
    pos = 0
    for m in _FENCE.finditer(text):
        parts += _paragraphs(text[pos:m.start()])
        parts.append(f"<pre><code>{escape(m.group(2).rstrip())}</code></pre>")
        pos = m.end()
    parts += _paragraphs(text[pos:])
    return "".join(parts)


def _paragraphs(text: str) -> list[str]:
    out = []
    for block in _BLANK_LINE.split(text.strip("\n")):
        if block.strip():
            lines = [_HEADING_MARK.sub("", ln) for ln in block.splitlines()]
            out.append("<p>" + "<br>".join(md_to_html_inline(ln) for ln in lines) + "</p>")
    return out


def short_id(anchor: str, keep: int = 14) -> str:
    """A long anchor cut in the middle for tables (the full id goes in a hover title)."""
    if len(anchor) <= keep + 2:
        return anchor
    return f"{anchor[:keep - 5]}…{anchor[-4:]}"


def md_cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def md_message(text: str) -> str:
    """A rule's message or reason in Markdown: its backticked spans as code, the rest escaped."""
    out = []
    for i, chunk in enumerate(_CODE_SPAN.split(text or "")):
        if chunk:
            out.append(md_code_span(chunk).replace("|", "\\|") if i % 2 else md_inline(chunk))
    return "".join(out)


def _md_piece(ctx: Any, piece: Piece) -> str:
    # Our own words and turn references hold no transcript text: nothing to redact.
    text = piece.text if piece.kind in ("text", "ref") else _maybe_redact(ctx, piece.text)
    if piece.kind == "code":
        return md_code_span(text)
    if piece.kind == "quote":
        return f"“{md_inline(_plain(text))}”"
    if piece.kind == "ref":
        return f"**{text}**"
    if piece.kind == "words":
        return md_inline(text)
    return text.translate(_MD_ANGLE)


def _html_piece(ctx: Any, piece: Piece, rows: set[int], prefix: str) -> str:
    text = piece.text if piece.kind in ("text", "ref") else _maybe_redact(ctx, piece.text)
    if piece.kind == "code":
        return f"<code>{escape(text)}</code>"
    if piece.kind == "quote":
        return f"<q>{md_to_html_inline(text)}</q>"
    if piece.kind == "ref":
        if piece.ordinal in rows:
            return f'<a class="ref" href="#{prefix}turn-{piece.ordinal}">{escape(text)}</a>'
        return f'<span class="ref">{escape(text)}</span>'
    return escape(text)


def _build(fmt: str):
    import jinja2
    from markupsafe import Markup

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        autoescape=(fmt == "html"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        # The templates ship with the package and do not change while it runs: no stat of
        # each template file (and of each one it imports) at every render.
        auto_reload=False,
        bytecode_cache=knowledge_cache.template_bytecode_cache(),
    )

    @jinja2.pass_context
    def sentence_md(ctx, sentence: Sentence, rows: Any = None, prefix: str = "") -> str:
        return "".join(_md_piece(ctx, p) for p in sentence)

    @jinja2.pass_context
    def sentence_html(ctx, sentence: Sentence, rows: set[int] | None = None, prefix: str = ""):
        return Markup("".join(_html_piece(ctx, p, rows or set(), prefix) for p in sentence))

    @jinja2.pass_context
    def r(ctx, text: Any) -> str:
        return _maybe_redact(ctx, "" if text is None else str(text))

    def rule_prose_html(text: str):
        """Rule-file prose marks commands with backticks; show them as code."""
        return Markup(_CODE_SPAN.sub(r"<code>\1</code>", str(escape(text))))

    @jinja2.pass_context
    def excerpt(ctx, text: Any, limit: int = 1500) -> str:
        """Redacted head and tail of a long transcript block. A coarse cut first keeps redaction
        cheap on pasted megabytes; the fine cut after it drops any secret split by the first."""
        text = "" if text is None else str(text)
        if len(text) > limit * 2:
            text = text[: limit + 400] + "\n" + text[-(limit // 3 + 400):]
        return clip(_maybe_redact(ctx, text), limit)

    @jinja2.pass_context
    def paragraph_f(ctx, sentences, rows: Any = None, prefix: str = ""):
        """Sentences worded as one paragraph (``narrative.join``). Not remembered: a case's
        sections are rendered once for both its pages (``once``), so a paragraph is rarely
        worded twice (none of archive-60's 4,264 was)."""
        from forensics.report.narrative import join

        fn = sentence_html if fmt == "html" else sentence_md
        return fn(ctx, join(list(sentences)), rows, prefix)

    parts = PartMemo(stamp=_patterns)

    @jinja2.pass_context
    def once(ctx, cs: Any, part: str, prefix: str = "", *, caller):
        """``{% call once(cs, "stakes", px) %}…{% endcall %}``: a section of a case study
        rendered once for both pages that show it (the session's and the case's own)."""
        return parts(cs, (part, prefix, bool(ctx.get("redact", True))), caller)

    env.globals["once"] = once

    def shortid_html(anchor: Any):
        text = str(anchor)
        return Markup(f'<code title="{escape(text)}">{escape(short_id(text))}</code>')

    @jinja2.pass_context
    def mdhtml(ctx, text: Any, limit: int = 1500):
        return Markup(md_to_html_block(excerpt(ctx, text, limit)))

    def mdinline(text: Any):
        return Markup(md_to_html_inline("" if text is None else str(text)))

    env.filters.update(
        mdinline=mdinline,
        paragraph=paragraph_f,
        shortid=shortid_html,
        mdhtml=mdhtml,
        cell=md_cell,
        msg=md_message,
        plain=_plain,
        shorten=lambda text, width=240: _shorten(str(text), width),
        excerpt=excerpt,
        prose=rule_prose_html if fmt == "html" else (lambda text: text),
        sentence=sentence_html if fmt == "html" else sentence_md,
        r=r,
        md=md_inline,
        mdcode=md_code_span,
        mdblock=md_code_block,
        mdquote=md_blockquote,
        clip=clip,
    )
    return env


@cache
def environment(fmt: str):
    """The shared Jinja environment for ``markdown`` or ``html`` (built once per process)."""
    if fmt not in ("markdown", "html"):
        raise ValueError(f"unknown report format {fmt!r}; expected markdown or html")
    return _build(fmt)


def render(template: str, fmt: str, **context: Any) -> str:
    return environment(fmt).get_template(template).render(**context)
