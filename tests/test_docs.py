"""The user documentation stands alone and says what the code does.

README.md and docs/*.md link only to files of this repository, never talk of
issues, and the query language reference's worked examples and error output
are what greta-stream gives.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import greta_stream

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
REFERENCE = ROOT / "docs" / "QUERY_LANGUAGE.md"

LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
AUTOLINK = re.compile(r"<((?:https?|ftp|mailto):[^>\s]+)>")
ISSUE = re.compile(r"\b(issue|ticket|bug)s?\s*#?\d+", re.IGNORECASE)


def _prose(text: str) -> str:
    """The text outside fenced code blocks (commands and output may hold anything)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """Links of `page` that leave the repository (`root`) or name no file in it."""
    bad = [f"{page.name}: external link {url}" for url in AUTOLINK.findall(_prose(page.read_text()))]
    for target in LINK.findall(_prose(page.read_text())):
        path = target.split("#", 1)[0]
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("//"):
            bad.append(f"{page.name}: external link {target}")
        elif path:
            resolved = (page.parent / path).resolve()
            if not resolved.is_relative_to(root) or not resolved.exists():
                bad.append(f"{page.name}: {target} is not a file of the repository")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_stay_in_the_repository(page: Path) -> None:
    assert broken_links(page) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_talk_of_issues(page: Path) -> None:
    assert ISSUE.findall(page.read_text()) == []


def test_the_checks_catch_what_they_look_for(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("See [the contract](../shared/SEMANTICS.md), [web](https://example.org), <http://x.org>,\n"
                    "[here](README.md#top) and [gone](missing.md); fixed in issue 7.\n")
    (tmp_path / "README.md").write_text("")
    assert broken_links(page, root=tmp_path) == [
        "page.md: external link http://x.org", "page.md: ../shared/SEMANTICS.md is not a file of the repository",
        "page.md: external link https://example.org", "page.md: missing.md is not a file of the repository"]
    assert ISSUE.findall(page.read_text())


def test_readme_links_the_query_language_reference() -> None:
    assert "(docs/QUERY_LANGUAGE.md)" in (ROOT / "README.md").read_text()


def _section(title: str) -> str:
    text = REFERENCE.read_text()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def _stream(spec: str, attrs: dict[str, int] | None = None) -> list[dict]:
    events = []
    for i, token in enumerate(spec.split(", ")):
        event = {"type": token[0].upper(), "time": int(token[1:]), "id": i}
        if attrs and token in attrs:
            event["attr"] = attrs[token]
        events.append(event)
    return events


def _tables(section: str) -> list[list[list[str]]]:
    """Each markdown table of `section` as rows of cells (header and rule dropped)."""
    tables, rows = [], []
    for line in section.splitlines() + [""]:
        if line.startswith("|"):
            rows.append([c.strip().strip("`") for c in line.strip().strip("|").split("|")])
        elif rows:
            tables.append(rows[2:])
            rows = []
    return tables


def test_worked_examples_are_what_evaluate_gives() -> None:
    first, second = _tables(_section("7. Worked examples"))
    small = _stream("a1, b2, a3, a4, b7", {"a1": 5, "a3": 6, "a4": 4})
    for pattern, *expected in first:
        (row,) = greta_stream.evaluate(
            f"RETURN COUNT(*), COUNT(A), MIN(A.attr), MAX(A.attr), SUM(A.attr), AVG(A.attr) "
            f"PATTERN {pattern} WITHIN 100 seconds", small)
        got = [row["count"], row["count_A"], row["min_A_attr"], row["max_A_attr"], row["sum_A_attr"],
               row["avg_A_attr"]]
        assert [float(g) for g, e in zip(got, expected, strict=True) if e] == [float(e) for e in expected if e]
    big = _stream("a1, b2, c2, a3, e3, a4, c5, d6, b7, a8, b9")
    assert len(second) == 6
    for pattern, expected in second:
        (row,) = greta_stream.evaluate(f"RETURN COUNT(*) PATTERN {pattern} WITHIN 100 seconds", big)
        assert row["count"] == int(expected), pattern


@pytest.mark.usefixtures("subprocesses")
def test_error_example_is_what_explain_prints() -> None:
    block = re.search(r"```\n\$ (greta-stream explain -q '([^']*)')\n(.*?)```", _section("8. Errors"), re.DOTALL)
    assert block is not None
    result = subprocess.run([sys.executable, "-m", "greta_stream", "explain", "-q", block.group(2)],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 2
    assert result.stderr == block.group(3)


def test_the_reference_lists_every_input_the_columnar_engine_hands_over() -> None:
    """One list (`INPUT_LIMITS`): what `explain` prints is what the reference says, item for item."""
    from greta_stream.engine.columnar.columns import INPUT_LIMITS

    assert re.findall(r"^- (.*)$", _section("9. Which engine runs"), flags=re.MULTILINE) == list(INPUT_LIMITS)


@pytest.mark.usefixtures("subprocesses")
def test_the_reference_names_a_mistake_in_one_part_as_evaluate_does() -> None:
    """Section 10's example is what `greta-stream evaluate` prints, and it exits 1."""
    section = _section("10. Names the input does not carry")
    query, events, said = re.search(r"\$ greta-stream evaluate -q '(.*?)' -e (\S+)\n(error: [^\n]*)\n", section,
                                    flags=re.DOTALL).groups()
    res = subprocess.run([sys.executable, "-m", "greta_stream", "evaluate", "-q", " ".join(query.split()),
                          "-e", events, "--no-progress"], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 1 and said in res.stderr
