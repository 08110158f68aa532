"""The README's deployment-paths table is the catalogue that `transports list` prints."""

from __future__ import annotations

import re
from pathlib import Path

from transports.registry import catalogue, catalogue_markdown

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readme_table_is_the_catalogue() -> None:
    text = README.read_text(encoding="utf-8")
    m = re.search(r"<!-- paths:begin -->\n(.*?)<!-- paths:end -->", text, re.S)
    assert m, "README.md has no paths:begin/paths:end markers"
    assert m.group(1) == catalogue_markdown(), "regenerate with: quotebench transports list --markdown"


def test_the_issue_s_named_paths_are_all_there() -> None:
    names = {r["name"] for r in catalogue()}
    for path in ("docker-sh", "shell-quote-eval", "tmux", "gha-run", "gha-block", "make", "shlex-sh", "ssh@zsh"):
        assert path in names and (f"{path}-safe" in names or f"{path.replace('@', '-safe@')}" in names), path
