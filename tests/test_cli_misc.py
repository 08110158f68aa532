"""Issue 21, item 6: what a newcomer hit on the command line, each pinned as the user sees it."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

QB = [sys.executable, "-c", "from qb_client.cli import main; main()"]


def qb(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*QB, *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                          env={**os.environ, "COLUMNS": "200", **(env or {})}, cwd=cwd)


def test_dash_v_prints_the_version() -> None:
    r = qb("-V")
    assert (r.returncode, r.stdout) == (0, f"quotebench {version('quotebench')}\n"), r.stderr


def test_a_global_option_after_the_command_says_where_it_goes() -> None:
    r = qb("exec", "--transport", "raw", "--command", "true", "--memory", "2G")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "--memory is a global option: give it before the command, quotebench --memory VALUE exec ..." in r.stderr


def test_serve_takes_the_transport_as_a_word_or_from_the_environment(tmp_path: Path) -> None:
    """The MCP Inspector's CLI takes --transport for itself: `quotebench serve nested` and QB_TRANSPORT work."""
    for args, env in ((["serve", "bogus-word"], {}), (["serve"], {"QB_TRANSPORT": "bogus-word"})):
        r = qb(*args, env=env)
        assert r.returncode == 2 and r.stderr.startswith("quotebench: error: unknown transport 'bogus-word'"), r.stderr
    r = qb("serve", "nested", "--transport", "raw")
    assert r.returncode == 2 and "the transport is given twice" in r.stderr
    from qb_client.cli_tools import serve_transport

    assert serve_transport("nested", None) == "nested" and serve_transport(None, None) == "raw"
    assert serve_transport("nested", "nested") == "nested"
