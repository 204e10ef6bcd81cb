"""docs/rules.md is the page the rule cases and code comments cite: it must name every rule the
registry has, with the severity its rule file gives, cite only parameters that exist, and every
section a citation names must be on it."""

from __future__ import annotations

import re

from conftest import REPO
from forensics.rules import registry

PAGE = (REPO / "docs" / "rules.md").read_text(encoding="utf-8")
CITATION = re.compile(r'docs/rules\.md,?\s+"([^"\n]+)"')
"""``docs/rules.md, "Common ground"`` or ``docs/rules.md "retry-loop"``: the section it names."""


def headings() -> list[str]:
    return re.findall(r"^#+ (.+)$", PAGE, flags=re.M)


def section(code: str, slug: str) -> str:
    """The text of the rule's section: its ``##`` heading, or its bullet under Harness events."""
    heading = re.search(rf"^## `{slug}` \({code}\)\n(.*?)(?=^## |\Z)", PAGE, flags=re.S | re.M)
    if heading:
        return heading.group(1)
    bullet = re.search(rf"^\* \*\*`{slug}` \({code}\):\*\*(.*?)(?=^\* |\Z)", PAGE,
                       flags=re.S | re.M)
    assert bullet, f"docs/rules.md has no section for {code} {slug}"
    return bullet.group(1)


def test_every_rule_has_a_section_with_its_rule_files_severity():
    specs = registry()
    assert len(specs) >= 11
    for spec in specs.values():
        text = section(spec.code, spec.slug)
        if spec.is_harness:
            harness = PAGE[PAGE.index("## Harness events"):]
            assert f"`{spec.slug}` ({spec.code})" in harness, spec.code
            assert "`low`" in harness.split("\n\n")[1], "harness events are low findings"
        else:
            assert "Severity" in text, spec.code
            assert f"`{spec.severity}`" in text, (spec.code, spec.severity)
            assert "Anchor" in text, spec.code


def test_the_parameters_it_names_exist():
    params = {name for spec in registry().values() for name in spec.params}
    format_fields = "".join(p.read_text(encoding="utf-8")
                            for p in (REPO / "forensics" / "ingest").glob("*.py"))
    named = set(re.findall(r"`([a-z]+(?:_[a-z]+)+)`", PAGE))
    assert {"server_commands", "check_claims", "resultless_tools"} <= named
    unknown = {n for n in named if n not in params and n not in format_fields}
    assert not unknown, f"docs/rules.md names parameters no rule file has: {sorted(unknown)}"


def test_every_section_a_citation_names_is_on_the_page():
    titles = [h.replace("`", "") for h in headings()]
    cited: list[tuple[str, str]] = []
    for folder in ("forensics", "tests", "docs", "bench", "rules"):
        for path in (REPO / folder).rglob("*"):
            if path.suffix not in (".py", ".md", ".toml") or not path.is_file():
                continue
            for name in CITATION.findall(path.read_text(encoding="utf-8", errors="replace")):
                cited.append((str(path.relative_to(REPO)), name.strip()))
    assert len(cited) >= 12, cited  # the rule case files' headers alone cite eleven
    missing = [(where, name) for where, name in cited
               if not any(t.startswith(name) or t.startswith(f"{name} (") for t in titles)]
    assert not missing, f"citations of sections docs/rules.md lacks: {missing}"


def test_the_readme_points_at_it_and_repeats_no_line():
    readme = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert any("`docs/rules.md`" in line for line in readme)
    doubled = [a for a, b in zip(readme, readme[1:]) if a.strip() and a == b]
    assert not doubled, f"README repeats a line: {doubled}"
