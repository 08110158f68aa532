"""The docs travel with the code and cannot silently fall behind it.

* Every relative link in README.md and docs/*.md resolves to a file inside the
  repository, and to a heading of that file where an anchor is given (GitHub's heading
  slugs). Nothing links outside the repository: no ``../`` past its root, no http(s)
  or other scheme, no bare URL that GitHub would turn into a link.
* docs/spec.md names every registered transport and every field of the record (and of
  the objects inside it), so adding either without documenting it fails here.
* ``report --help`` points to the statistics section of docs/spec.md.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from pydantic import BaseModel

from tasks.validate import CheckResult, Verdict
from transports.results.record import ConfigInfo, Guard, Output, Record, Timing, Usage
from transports.registry import known

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SPEC = DOCS / "spec.md"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$", re.M)
AUTOLINK = re.compile(r"<([a-zA-Z][a-zA-Z0-9+.-]*:[^>\s]*)>")
BARE_URL = re.compile(r"(?:https?://|www\.)\S+", re.I)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")


def prose(text: str) -> str:
    """``text`` without fenced code blocks and code spans (links there are not links)."""
    return CODE_SPAN.sub(" ", unfenced(text))


def unfenced(text: str) -> str:
    """``text`` without its fenced code blocks (a ``#`` line there is not a heading)."""
    lines, fence = [], None
    for line in text.splitlines():
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            continue
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip(" `~"):
                fence = None
            continue
        lines.append(line)
    return "\n".join(lines)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: inline markup dropped, lowercased, punctuation removed but
    for hyphens and underscores, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays, its target goes
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").lower()
    kept = "".join(ch for ch in text
                   if ch in " -_" or unicodedata.category(ch)[0] in "LN" or unicodedata.category(ch) == "Mn")
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a markdown page, with GitHub's -1, -2 suffixes for repeats."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in unfenced(page.read_text(encoding="utf-8")).splitlines():
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: Path) -> list[str]:
    text = prose(page.read_text(encoding="utf-8"))
    return INLINE_LINK.findall(text) + REFERENCE_DEF.findall(text) + AUTOLINK.findall(text)


def problems(page: Path, root: Path = ROOT) -> list[str]:
    """Every link of ``page`` that leaves ``root`` or does not resolve, one line each."""
    found = []
    text = prose(page.read_text(encoding="utf-8"))
    for url in BARE_URL.findall(INLINE_LINK.sub(" ", AUTOLINK.sub(" ", text))):
        found.append(f"{url}: a bare URL (GitHub links it)")
    for target in links(page):
        if not target:
            found.append("an empty link target")
            continue
        if SCHEME.match(target) or target.startswith("//"):
            found.append(f"{target}: points outside the repository")
            continue
        path_part, _, anchor = target.partition("#")
        dest = page if not path_part else Path(os.path.normpath(page.parent / path_part))
        if dest != root and root not in dest.parents:
            found.append(f"{target}: leaves the repository")
            continue
        if not dest.exists():
            found.append(f"{target}: no such file")
            continue
        if anchor:
            if dest.suffix != ".md":
                found.append(f"{target}: an anchor into a file that is not markdown")
            elif anchor not in anchors(dest):
                found.append(f"{target}: no heading '#{anchor}' in {dest.relative_to(root)}")
    return found


def code_words(page: Path) -> set[str]:
    """Every code span of ``page`` whole, and every word inside one (``{check, ok, detail}`` names three)."""
    spans = [m.group(2).strip() for m in CODE_SPAN.finditer(page.read_text(encoding="utf-8"))]
    return set(spans) | {w for s in spans for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", s)}


def test_the_docs_exist() -> None:
    for name in ("README.md", "spec.md", "sandbox.md", "extending.md"):
        assert (DOCS / name).is_file(), name


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_link_resolves_inside_the_repository(page: Path) -> None:
    assert problems(page) == []


def test_the_readme_links_the_docs() -> None:
    targets = {t.partition("#")[0] for t in links(ROOT / "README.md")}
    assert {"docs/README.md", "docs/spec.md", "docs/sandbox.md", "docs/extending.md"} <= targets


def test_the_link_checker_catches_what_it_must(tmp_path: Path) -> None:
    """The checker itself, on a small repository with one link of each bad kind and good ones it must accept."""
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "docs" / "other.md").write_text("# Other\n\n## Statistics\n", encoding="utf-8")
    (repo / "tool.py").write_text("", encoding="utf-8")
    (tmp_path / "outside.md").write_text("# Outside\n", encoding="utf-8")
    page = repo / "docs" / "page.md"
    page.write_text(
        "# Title\n\n## A `code` heading, with punctuation!\n\n## Title\n\n"
        "[a](#title-1) [b](#a-code-heading-with-punctuation) [c](other.md#statistics) [d](../tool.py)\n"
        "[e](../../outside.md) [f](https://example.com/x) [g](nope.md) [h](#nope) [i](other.md#words)\n"
        "[j](../tool.py#top) <http://example.com/y> see www.example.com/z\n"
        "```\n[in code](https://example.com/code)\n```\n`[span](https://example.com/span)`\n",
        encoding="utf-8",
    )
    assert problems(page, repo) == [
        "www.example.com/z: a bare URL (GitHub links it)",
        "../../outside.md: leaves the repository",
        "https://example.com/x: points outside the repository",
        "nope.md: no such file",
        "#nope: no heading '#nope' in docs/page.md",
        "other.md#words: no heading '#words' in docs/other.md",
        "../tool.py#top: an anchor into a file that is not markdown",
        "http://example.com/y: points outside the repository",
    ]


def test_github_slugs() -> None:
    assert slug("Words") == "words"
    assert slug("The `ssh` master") == "the-ssh-master"
    assert slug("Contract x transport") == "contract-x-transport"
    assert slug("What is hostile?") == "what-is-hostile"
    assert slug("Y_cell and `--json`") == "y_cell-and---json"


@pytest.mark.parametrize("name", known())
def test_every_transport_is_in_the_spec(name: str) -> None:
    assert name in code_words(SPEC), f"transport {name} is not documented in docs/spec.md"


@pytest.mark.parametrize("field", list(Record.model_fields))
def test_every_record_field_is_in_the_spec(field: str) -> None:
    assert field in code_words(SPEC), f"record field {field} is not documented in docs/spec.md"


@pytest.mark.parametrize("model", [ConfigInfo, Output, Usage, Timing, Verdict, CheckResult, Guard],
                         ids=lambda m: m.__name__)
def test_every_nested_record_field_is_in_the_spec(model: type[BaseModel]) -> None:
    missing = [f for f in model.model_fields if f not in code_words(SPEC)]
    assert missing == [], f"{model.__name__} fields not documented in docs/spec.md: {missing}"


def test_report_help_points_to_the_statistics() -> None:
    env = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1"}
    done = subprocess.run([*QB, "report", "--help"], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0
    assert "docs/spec.md#statistics" in done.stdout
    assert "statistics" in anchors(SPEC)
