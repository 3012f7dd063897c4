"""The docs against the code: every ``BACKFILL_`` variable the code reads is in
docs/configuration.md, and every relative link and anchor in README.md, docs/*.md and the
measurement journal (bench/journal.md) resolves.

Plain text, no Spark: both run in `make test-fast`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIGURATION = ROOT / "docs" / "configuration.md"
DOC_PAGES = sorted((ROOT / "docs").glob("*.md"))
JOURNAL = ROOT / "bench" / "journal.md"  # the dated measurements, beside the benchmarks
PAGES = [ROOT / "README.md", *DOC_PAGES, JOURNAL]

# A BACKFILL_ variable named as a whole string literal in Python: how the code reads one (with
# ``env.get("BACKFILL_...")``, ``os.environ.get``, a constant such as ``RETENTION_ENV`` handed
# to them) or hands one to a child process. Messages that merely mention a variable hold it
# inside a longer string, which this does not match.
PY_NAME = re.compile(r"""["'](BACKFILL_[A-Z0-9_]+)["']""")
# In shell scripts and the Makefile: ``$NAME``, ``${NAME...}``, ``$(NAME)``, or ``NAME=value``
# set for the command that follows (which reads it).
SHELL_NAME = re.compile(r"\$[{(]?(BACKFILL_[A-Z0-9_]+)|^\s*(BACKFILL_[A-Z0-9_]+)=", re.MULTILINE)
# The first cell of a row of a markdown table: a variable in backticks.
TABLE_ROW = re.compile(r"^\| `([A-Z][A-Z0-9_]*)` \|", re.MULTILINE)


def _python_sources(*folders: str) -> list[Path]:
    return [path for folder in folders for path in sorted((ROOT / folder).rglob("*.py"))]


def _shell_sources() -> list[Path]:
    scripts = [p for p in sorted((ROOT / "scripts").iterdir()) if p.is_file()]
    ci = [p for p in sorted((ROOT / ".ci").iterdir()) if p.is_file()]
    return [ROOT / "Makefile", *scripts, *ci]


def names_in_python(paths: list[Path]) -> set[str]:
    return {name for path in paths for name in PY_NAME.findall(path.read_text())}


def names_in_shell(paths: list[Path]) -> set[str]:
    return {a or b for path in paths for a, b in SHELL_NAME.findall(path.read_text()) if a or b}


def read_by_the_code() -> set[str]:
    """What the pipeline, its set-up scripts and the benchmarks read."""
    return names_in_python(_python_sources("backfill_assets", "bench")) | names_in_shell(
        _shell_sources()
    )


def read_by_the_tests() -> set[str]:
    """What the test suite and its kit read (this module's examples aside)."""
    here = Path(__file__).resolve()
    sources = _python_sources("backfill_assets_tests", "backfill_assets_testkit")
    return names_in_python([p for p in sources if p != here])


def documented() -> set[str]:
    return set(TABLE_ROW.findall(CONFIGURATION.read_text()))


def test_the_scan_finds_reads_and_not_mentions():
    assert PY_NAME.findall('x = env.get("BACKFILL_LAKE_DIR", "data/lake")') == ["BACKFILL_LAKE_DIR"]
    assert PY_NAME.findall("RETENTION_ENV = 'BACKFILL_RETENTION_DAYS'") == [
        "BACKFILL_RETENTION_DAYS"
    ]
    assert PY_NAME.findall('raise ValueError("bad BACKFILL_BAND_K: nan")') == []
    shell = "X=$BACKFILL_A ${BACKFILL_B:-1} $(BACKFILL_C)\n\tBACKFILL_D=/tmp pytest\n"
    assert {a or b for a, b in SHELL_NAME.findall(shell)} == {
        "BACKFILL_A",
        "BACKFILL_B",
        "BACKFILL_C",
        "BACKFILL_D",
    }


def test_every_variable_the_code_reads_is_in_the_configuration_page():
    code = read_by_the_code()
    assert len(code) > 30  # the scan finds the variables, not a handful of them
    missing = sorted((code | read_by_the_tests()) - documented())
    assert missing == [], f"not in docs/configuration.md's tables: {missing}"


def test_the_configuration_page_lists_no_variable_nothing_reads():
    listed = {name for name in documented() if name.startswith("BACKFILL_")}
    assert sorted(listed - read_by_the_code() - read_by_the_tests()) == []


# Links.

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.DOTALL)
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


def _prose(text: str) -> str:
    """The text outside fenced code blocks; code spans keep their length but lose their text."""
    text = FENCE.sub("", text)
    return CODE_SPAN.sub(lambda m: "`" * len(m.group(0)), text)


def slugs(text: str) -> set[str]:
    """The anchors GitHub makes for a file's headings: the heading's text lowercased, every
    character but letters, digits, ``-``, ``_`` and spaces dropped, spaces made ``-``; the
    second of a name gets ``-1``, the third ``-2``."""
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", text)):
        heading = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def test_slugs_follow_githubs_rules():
    text = "# A b\n## Raw's `raw/orders_valid`, measured\n### A b\n"
    text += "```\n# not a heading\n```\n## A b"
    assert slugs(text) == {"a-b", "raws-raworders_valid-measured", "a-b-1", "a-b-2"}
    assert slugs("## I/O faults, measured") == {"io-faults-measured"}


def links(page: Path) -> list[str]:
    return LINK.findall(_prose(page.read_text()))


def broken(page: Path) -> list[str]:
    bad = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http(s), mailto: not checked
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            bad.append(f"{target}: no such file")
        elif anchor and anchor not in slugs(file.read_text()):
            bad.append(f"{target}: no heading #{anchor} in {file.name}")
    return bad


def test_the_link_scan_sees_links_images_and_not_code(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# Top\n[a](other.md#x) ![b](img/b.png) [c](https://example.com) [d](#top)\n"
        "`[e](not-a-link.md)`\n```\n[f](nor-this.md)\n```\n[g](#nowhere)\n"
    )
    assert links(page) == ["other.md#x", "img/b.png", "https://example.com", "#top", "#nowhere"]
    assert broken(page) == [
        "other.md#x: no such file",
        "img/b.png: no such file",
        "#nowhere: no heading #nowhere in page.md",
    ]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_and_anchor_resolves(page):
    assert broken(page) == []


def test_the_pages_link_to_each_other():
    assert len(DOC_PAGES) >= 7
    readme = {target.partition("#")[0] for target in links(ROOT / "README.md")}
    for page in DOC_PAGES:
        assert f"docs/{page.name}" in readme, f"README.md does not link docs/{page.name}"
    assert "bench/journal.md" in readme, "README.md does not link the measurement journal"
