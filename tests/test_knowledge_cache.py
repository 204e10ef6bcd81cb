"""The compiled-pattern cache (``forensics.knowledge_cache``): a stored pattern is the
pattern ``re.compile`` makes, and a cache that cannot be used is never an error."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from forensics import knowledge_cache
from forensics.analysis.ledger import _read_needles, needles
from forensics.analysis.phrases import LazyPattern, phrase_pattern, source_of

FIXTURE = Path(__file__).parent / "fixtures" / "ingest" / "claude_basic.jsonl"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("FORENSICS_CACHE_DIR", str(tmp_path / "cache"))
    knowledge_cache.reset()
    yield tmp_path / "cache"
    knowledge_cache.reset()


def _shipped_patterns() -> list[tuple[str, int]]:
    """(source, flags) of every lazy pattern the rule files' knowledge makes (each rule run
    once on a fixture builds its parameters)."""
    import gc

    from forensics.engine import scan_session
    from forensics.ingest import load

    for session in load(FIXTURE):
        scan_session(session)
    found = {source_of(p)[:2]: None for p in gc.get_objects()
             if isinstance(p, LazyPattern) and not source_of(p)[2]}
    return list(found)


def test_every_shipped_pattern_is_what_re_compile_makes_stored_and_read_back(cache_dir):
    shipped = _shipped_patterns()
    assert len(shipped) > 100  # the rule files' knowledge, not a handful
    made = [knowledge_cache.compile(s, f) for s, f in shipped]
    assert made == [re.compile(s, f) for s, f in shipped]  # equal: same program, flags, text
    knowledge_cache.save()
    stored = orjson.loads((cache_dir / "knowledge.json").read_bytes())
    (kept,) = stored.values()
    assert len(kept["patterns"]) >= len(shipped)
    knowledge_cache.reset()
    again = [knowledge_cache.compile(s, f) for s, f in shipped]  # from the file now
    assert not knowledge_cache._state["dirty"]  # nothing was compiled again
    assert again == made
    sample = "Uvicorn running on http://127.0.0.1:8000\nall tests pass\nnpm run dev"
    for a, b in zip(again, made):
        assert [m.span() for m in a.finditer(sample)] == [m.span() for m in b.finditer(sample)]


def test_needles_are_stored_and_read_back(cache_dir):
    pattern = re.compile(r"\bvite(?!st)(?:\s+(?:dev|serve)\b|\s*$)", re.I | re.M)
    first = needles(pattern)
    assert first == ("vite",) == _read_needles(pattern.pattern, pattern.flags, False)
    knowledge_cache.save()
    knowledge_cache.reset()
    assert needles(pattern) == first and not knowledge_cache._state["dirty"]
    assert needles(re.compile(r"a*")) is None  # no needle is stored as such
    knowledge_cache.save()
    knowledge_cache.reset()
    assert needles(re.compile(r"a*")) is None and not knowledge_cache._state["dirty"]


def test_a_bad_pattern_still_raises_and_is_not_stored(cache_dir):
    with pytest.raises(re.error):
        knowledge_cache.compile(r"(unclosed")
    assert not knowledge_cache._state["dirty"]


@pytest.mark.parametrize("content", [b"not json", b"[]", b'{"another python": {}}',
                                     b'{"x": 1}'])
def test_a_damaged_or_foreign_file_is_ignored_and_replaced(cache_dir, content):
    cache_dir.mkdir()
    (cache_dir / "knowledge.json").write_bytes(content)
    assert knowledge_cache.compile(r"\bpytest\b", re.I) == re.compile(r"\bpytest\b", re.I)
    knowledge_cache.save()
    stored = orjson.loads((cache_dir / "knowledge.json").read_bytes())
    assert list(stored) == [knowledge_cache._interpreter()]


def test_a_damaged_entry_is_compiled_again(cache_dir):
    knowledge_cache.compile(r"\bjest\b", re.I)
    knowledge_cache.save()
    path = cache_dir / "knowledge.json"
    data = orjson.loads(path.read_bytes())
    for entry in next(iter(data.values()))["patterns"].values():
        entry[1] = [0, 1, 2]  # not a program _sre accepts
    path.write_bytes(orjson.dumps(data))
    knowledge_cache.reset()
    assert knowledge_cache.compile(r"\bjest\b", re.I) == re.compile(r"\bjest\b", re.I)


def test_no_cache_when_the_folder_is_empty_or_cannot_be_written(tmp_path, monkeypatch):
    monkeypatch.setenv("FORENSICS_CACHE_DIR", "")
    knowledge_cache.reset()
    assert knowledge_cache.cache_file() is None
    assert knowledge_cache.compile(r"\bmake\b") == re.compile(r"\bmake\b")
    knowledge_cache.save()  # nowhere to write: nothing happens
    blocker = tmp_path / "a-file"
    blocker.write_text("in the way")
    monkeypatch.setenv("FORENSICS_CACHE_DIR", str(blocker))  # a file where the folder goes
    knowledge_cache.reset()
    assert knowledge_cache.compile(r"\bcargo\b") == re.compile(r"\bcargo\b")
    knowledge_cache.save()  # an OSError inside: swallowed, no temporary left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
    knowledge_cache.reset()


def test_the_default_location_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("FORENSICS_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert knowledge_cache.cache_file() == tmp_path / "forensics" / "knowledge.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert knowledge_cache.cache_file() == tmp_path / "home" / ".cache" / "forensics" / \
        "knowledge.json"
    monkeypatch.setattr(os.path, "expanduser", lambda path: path)  # no HOME, no passwd entry
    assert knowledge_cache.cache_file() is None


def test_a_phrase_list_makes_the_same_pattern_in_every_process():
    # the cache keys on the pattern's text: set order (string hashing) must not change it
    words = ["tests pass", "all good", "it works", "complete!", "funciona", "通过了", "done"]
    code = ("import sys; from forensics.analysis.phrases import phrase_pattern; "
            f"print(phrase_pattern({words!r}).pattern)")
    texts = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "PYTHONHASHSEED": str(seed)},
                            check=True).stdout for seed in (1, 2, 3, 4)}
    assert texts == {phrase_pattern(words).pattern + "\n"}


def test_a_rule_file_is_parsed_once_and_read_back_as_a_new_copy(cache_dir):
    import tomllib

    from forensics.resources import read_rule_file, rules_dir

    path = next(p for p in sorted(rules_dir().glob("FX*.toml"))
                if "\n[[covered]]\n" in p.read_text(encoding="utf-8"))
    first = read_rule_file(path)
    assert knowledge_cache._state["dirty"]
    knowledge_cache.save()
    knowledge_cache.reset()
    calls = []
    text = path.read_text(encoding="utf-8")
    text = text[:text.find("\n[[covered]]\n") + 1 or len(text)]
    again = knowledge_cache.rule_file(text, lambda t: calls.append(t) or tomllib.loads(t))
    assert again == first and not calls  # from the file, not parsed
    again["params"] = "changed by a caller"
    assert knowledge_cache.rule_file(text, tomllib.loads) == first  # the stored copy is intact
    assert read_rule_file(path, cases=True)["covered"]  # the cases: parsed, never stored


@pytest.mark.parametrize("toml", ["when = 1979-05-27T07:32:00Z", "x = nan", "x = inf",
                                  "big = 99999999999999999999"])
def test_a_rule_file_json_would_change_is_parsed_every_time(cache_dir, toml):
    import tomllib

    parsed = knowledge_cache.rule_file(toml, tomllib.loads)
    assert str(parsed) == str(tomllib.loads(toml))
    assert knowledge_cache._store()["rule_files"] == {}


def test_the_rules_loaded_from_the_cache_are_the_rules_parsed(cache_dir):
    from forensics.resources import read_rule_file, rules_dir

    files = sorted(rules_dir().glob("*.toml"))
    parsed = [read_rule_file(f) for f in files]
    knowledge_cache.save()
    knowledge_cache.reset()
    assert [read_rule_file(f) for f in files] == parsed
    assert not knowledge_cache._state["dirty"]


def test_past_the_cap_the_file_keeps_what_the_run_used(cache_dir, monkeypatch):
    # entries of older versions pile up over upgrades; the file must not freeze at the cap
    cache_dir.mkdir()
    stale = {f"0:old pattern {n}": [0, [1], 0, {}, []] for n in range(50)}
    (cache_dir / "knowledge.json").write_bytes(orjson.dumps({knowledge_cache._interpreter(): {
        "patterns": stale, "needles": {}, "rule_files": {}}}))
    monkeypatch.setattr(knowledge_cache, "MAX_ENTRIES", 10)
    assert knowledge_cache.compile(r"\bnew\b") == re.compile(r"\bnew\b")
    knowledge_cache.save()
    (kept,) = orjson.loads((cache_dir / "knowledge.json").read_bytes()).values()
    assert list(kept["patterns"]) == [r"0:\bnew\b"]
    monkeypatch.setattr(knowledge_cache, "MAX_ENTRIES", 1000)
    knowledge_cache.reset()
    knowledge_cache.compile(r"\bnew\b")
    knowledge_cache.compile(r"\bnewer\b")
    knowledge_cache.save()  # under the cap: everything stays
    (kept,) = orjson.loads((cache_dir / "knowledge.json").read_bytes()).values()
    assert sorted(kept["patterns"]) == [r"0:\bnew\b", r"0:\bnewer\b"]


# -- the methods dataclasses generates ------------------------------------------------------------

_METHODS_SCRIPT = r"""
import dataclasses, marshal, sys
mode = sys.argv[1]
import forensics
if mode == "plain":
    del dataclasses.exec  # the builtin again: dataclasses compiles every method itself
import forensics.cli, forensics.engine, forensics.notebook, forensics.report
from forensics.config import Config
Config().rules()
def canonical(code):
    # what code equality compares (marshal's bytes also hold reference flags that vary)
    consts = tuple(canonical(c) if hasattr(c, "co_code") else repr(c) for c in code.co_consts)
    return (code.co_name, code.co_qualname, code.co_code, consts, code.co_names,
            code.co_varnames, code.co_freevars, code.co_cellvars, code.co_flags,
            code.co_argcount, code.co_kwonlyargcount, code.co_posonlyargcount,
            code.co_firstlineno, code.co_linetable, code.co_exceptiontable, code.co_filename)
methods = []
for name, module in sorted(sys.modules.items()):
    if not name.startswith("forensics"):
        continue
    for cls in vars(module).values():
        if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == name:
            for attr, fn in sorted(vars(cls).items()):
                if callable(fn) and hasattr(fn, "__code__"):
                    methods.append((cls.__qualname__, attr, fn.__qualname__,
                                    canonical(fn.__code__), repr(fn.__annotations__)))
from forensics import knowledge_cache
added = knowledge_cache._state["dirty"]  # a method compiled (not read back) is stored
print(len(methods), len(knowledge_cache._store()["code"]) if added else 0,
      marshal.dumps(methods).hex())
"""


def _methods(mode: str, cache: str) -> tuple[int, int, list]:
    import marshal

    env = {**os.environ, "FORENSICS_CACHE_DIR": cache}
    out = subprocess.run([sys.executable, "-c", _METHODS_SCRIPT, mode], env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    return int(out[0]), int(out[1]), marshal.loads(bytes.fromhex(out[2]))


def test_generated_methods_from_the_cache_are_the_ones_dataclasses_compiles(tmp_path):
    cache = str(tmp_path / "cache")
    count, compiled_filling, filled = _methods("cached", cache)
    _, compiled_warm, warm = _methods("cached", cache)
    _, _, plain = _methods("plain", "")
    assert count > 150  # every method of every forensics dataclass a scan and a report make
    assert compiled_filling > 150 and compiled_warm == 0  # the warm run stored nothing new
    assert filled == warm == plain  # the same byte code, names and qualified names


def _probe_module(name: str = "forensics._probe_for_tests"):
    import types

    module = types.ModuleType(name)
    sys.modules[name] = module
    exec("from dataclasses import dataclass\n"
         "@dataclass(frozen=True)\n"
         "class Probe:\n"
         "    x: int\n"
         "    y: str = 'y'\n", module.__dict__)
    del sys.modules[name]
    return module.Probe


def test_a_damaged_code_entry_is_compiled_again(cache_dir):
    _probe_module()
    knowledge_cache.save()
    path = cache_dir / "knowledge-code.json"
    data = orjson.loads(path.read_bytes())
    codes = next(iter(data.values()))["code"]
    assert codes  # the probe's methods were kept
    for key in codes:
        codes[key] = "not base64 of byte code!"
    path.write_bytes(orjson.dumps(data))
    knowledge_cache.reset()
    probe = _probe_module()
    assert probe(1) == probe(1, "y") and repr(probe(2)) == "Probe(x=2, y='y')"
    assert hash(probe(3)) == hash(probe(3))
    with pytest.raises(AttributeError):  # dataclasses.FrozenInstanceError
        probe(1).x = 2


def test_a_class_outside_forensics_is_left_to_dataclasses(cache_dir):
    from dataclasses import dataclass

    before = dict(knowledge_cache._store()["code"])

    @dataclass
    class Elsewhere:
        a: int

    _probe_module("not_forensics_probe")
    assert knowledge_cache._store()["code"] == before
    assert Elsewhere(1) == Elsewhere(1)


# -- Jinja's compiled templates -------------------------------------------------------------------

def _template_env(folder: Path, compiled: list[str]):
    import jinja2

    class Counting(jinja2.Environment):
        def compile(self, source, name=None, filename=None, raw=False, defer_init=False):
            compiled.append(name)
            return super().compile(source, name, filename, raw, defer_init)

    return Counting(loader=jinja2.FileSystemLoader(str(folder)), auto_reload=False,
                    bytecode_cache=knowledge_cache.template_bytecode_cache())


def test_a_template_compiles_once_and_renders_the_same_from_the_cache(cache_dir, tmp_path):
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "t.j2").write_text("{% for x in xs %}<{{ x }}>{% endfor %}\n")
    compiled: list[str] = []
    assert _template_env(folder, compiled).get_template("t.j2").render(xs=[1, 2]) == "<1><2>"
    knowledge_cache.save()
    knowledge_cache.reset()
    assert _template_env(folder, compiled).get_template("t.j2").render(xs=[3]) == "<3>"
    assert compiled == ["t.j2"]  # the second environment read it back

    (folder / "t.j2").write_text("{{ xs | length }}\n")  # a changed template: compiled again
    knowledge_cache.reset()
    assert _template_env(folder, compiled).get_template("t.j2").render(xs=[3, 4]) == "2"
    assert compiled == ["t.j2", "t.j2"]


def test_a_damaged_template_entry_is_compiled_again(cache_dir, tmp_path):
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "t.j2").write_text("[{{ 6 * 7 }}]")
    compiled: list[str] = []
    _template_env(folder, compiled).get_template("t.j2")
    knowledge_cache.save()
    path = cache_dir / "knowledge.json"
    data = orjson.loads(path.read_bytes())
    kept = next(iter(data.values()))["templates"]
    assert kept
    for key in kept:
        kept[key] = "bm90IGJ5dGUgY29kZQ=="  # base64 of words, not of Jinja's bytecode
    path.write_bytes(orjson.dumps(data))
    knowledge_cache.reset()
    assert _template_env(folder, compiled).get_template("t.j2").render() == "[42]"
    assert compiled == ["t.j2", "t.j2"]


def test_a_users_secret_patterns_are_not_copied_into_the_cache(cache_dir, tmp_path):
    from forensics.redact import builtin_file, load_patterns

    mine = tmp_path / "mine.toml"
    mine.write_text('[[secret]]\nkind = "ours"\npattern = "acme-live-7f3a9c"\n')
    [pattern] = load_patterns(mine)
    assert pattern.regex.search("key acme-live-7f3a9c here")
    shipped = load_patterns(builtin_file(), shipped=True)
    store = knowledge_cache._store()
    assert not any("acme-live" in key for key in store["patterns"])
    assert not any("acme-live" in text for text in store["rule_files"].values())
    assert any(p.regex.pattern in key for p in shipped for key in store["patterns"])


def test_an_exec_hook_set_before_forensics_still_gets_the_other_classes(tmp_path):
    code = ("import builtins, dataclasses\n"
            "seen = []\n"
            "def theirs(source, module_globals=None, *args, **kw):\n"
            "    seen.append((module_globals or {}).get('__name__'))\n"
            "    return builtins.exec(source, module_globals, *args, **kw)\n"
            "dataclasses.exec = theirs\n"
            "import forensics, forensics.model\n"
            "from forensics import knowledge_cache\n"
            "knowledge_cache.keep_generated_code()  # a second call changes nothing\n"
            "@dataclasses.dataclass\n"
            "class Mine:\n"
            "    a: int\n"
            "assert Mine(1) == Mine(1)\n"
            "print(sorted(set(map(str, seen))))")
    env = {**os.environ, "FORENSICS_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True,
                         text=True).stdout.strip()
    assert out == "['__main__']"  # theirs saw this class, none of forensics'


def test_help_reads_the_methods_file_alone(tmp_path):
    """``--help`` makes classes but compiles no pattern: it reads ``knowledge-code.json`` and
    leaves the patterns' file unread (and, adding nothing to it, unwritten)."""
    env = {**os.environ, "FORENSICS_CACHE_DIR": str(tmp_path / "cache")}
    scan = [sys.executable, "-c", "import sys; from forensics.cli import main; "
            f"sys.argv = ['forensics', 'scan', {str(FIXTURE)!r}, '--exit-zero']; main()"]
    subprocess.run(scan, env=env, check=True, capture_output=True)  # fills both files
    patterns_file = tmp_path / "cache" / "knowledge.json"
    before = patterns_file.read_bytes()
    assert (tmp_path / "cache" / "knowledge-code.json").is_file()
    code = ("import sys, io, contextlib\n"
            "from forensics.cli import main\n"
            "from forensics import knowledge_cache\n"
            "sys.argv = ['forensics', '--help']\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n"
            "        main()\n"
            "    except SystemExit:\n"
            "        pass\n"
            "print(sorted(knowledge_cache._state['store'] or {}))")
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True,
                         text=True).stdout.strip()
    assert out == "['code']"
    assert patterns_file.read_bytes() == before
