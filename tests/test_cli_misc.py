"""What a newcomer meets on the command line, each pinned as the user sees it."""

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
    from qb_client.cli.around_runs import serve_transport

    assert serve_transport("nested", None) == "nested" and serve_transport(None, None) == "raw"
    assert serve_transport("nested", "nested") == "nested"


def test_offline_effort_typo_is_refused_and_a_label_is_warned(tmp_path: Path) -> None:
    r = qb("run", "--model", "reference", "--effort", "hgih", "--out", str(tmp_path / "c"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "write 'raw:hgih' to use it as one" in r.stderr
    assert not (tmp_path / "c").exists()
    r = qb("run", "--model", "reference", "--effort", "high", "--contracts", "raw", "--transports", "raw",
           "--tasks", "file-write/control", "--out", str(tmp_path / "c"))
    assert r.returncode == 0 and "reference runs offline, so nothing is sent" in r.stderr, r.stderr


def test_server_with_several_transports_is_refused_before_anything_runs(tmp_path: Path) -> None:
    r = qb("run", "--model", "reference", "--server", "http://127.0.0.1:9/mcp", "--transports", "raw,nested",
           "--out", str(tmp_path / "c"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "serves the one transport it was started with" in r.stderr and "rerun" not in r.stderr
    assert not (tmp_path / "c").exists()


def test_errors_a_rerun_resolved_are_dropped(tmp_path: Path) -> None:
    import json

    from qb_client.campaign.errors import prune_resolved

    config = {"provider": "p", "model": "m", "effort": None}
    (tmp_path / "replies.jsonl").write_text(json.dumps({"key": "k1", "reply_id": "k1", "config": config}) + "\n")
    (tmp_path / "results.jsonl").write_text(json.dumps({"reply_id": "k1", "transport": "raw", "config": config})
                                            + "\n")
    lines = [{"stage": "generate", "reply_id": "k1", "config": config},
             {"stage": "generate", "reply_id": "k2", "config": config},
             {"stage": "execute", "reply_id": "k1", "transport": "raw", "config": config},
             {"stage": "execute", "reply_id": "k1", "transport": "nested", "config": config}]
    (tmp_path / "errors.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert prune_resolved(tmp_path) == 2
    left = [json.loads(x) for x in (tmp_path / "errors.jsonl").read_text().splitlines()]
    assert [(x["stage"], x["reply_id"], x.get("transport")) for x in left] == [("generate", "k2", None),
                                                                             ("execute", "k1", "nested")]


def test_readme_numbers_match_the_code() -> None:
    """The README's counts and versions are the code's, not a past run's."""
    from tasks.load import suite
    from tasks.nearmiss import near_misses

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    assert f"fixture and {sum(len(near_misses(t)) for t in suite())} near misses fail" in readme
    assert "[paths.md](paths.md)" in (Path(__file__).parent.parent / "docs" / "README.md").read_text()


def test_tasks_list_help_names_the_columns_it_shows() -> None:
    r = qb("tasks", "list", "--help")
    assert "id, operation and payload" in " ".join(r.stdout.split())
    head = next(line for line in qb("tasks", "list").stdout.splitlines() if "operation" in line)
    assert "id" in head and "payload" in head


def test_help_metavars_read_like_the_command_line() -> None:
    report = qb("report", "--help").stdout
    assert "Usage: quotebench report [OPTIONS] RESULTS.jsonl..." in report
    for wrong in ("<bool>", "<list[Path]>", "<str>", "{RESULTS.jsonl", "<path>"):
        assert wrong not in report + qb("exec", "--help").stdout + qb("serve", "--help").stdout, wrong
    assert "[TRANSPORT]" in qb("serve", "--help").stdout


HEAVY = ("scipy", "matplotlib", "anthropic", "openai", "mcp")
"""Libraries a command imports only when it uses them: each costs 0.4 to 1.3 s of CPU at every start."""


def heavy_imports(*args: str, cwd: Path) -> tuple[int, list[str]]:
    """The exit code of ``quotebench ARGS`` and which of :data:`HEAVY` it imported, read from its ``sys.modules``."""
    code = ("import sys\nfrom qb_client.cli import main\ncode = 0\ntry:\n    main()\nexcept SystemExit as e:\n"
            "    code = e.code\nprint('HEAVY', [m for m in %r if m in sys.modules])\nsys.exit(code)" % (HEAVY,))
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL, cwd=cwd)
    line = next(x for x in r.stdout.splitlines() if x.startswith("HEAVY "))
    return r.returncode, eval(line[6:])  # noqa: S307 - our own print of a list of names


def test_an_offline_run_its_report_and_a_one_line_error_import_no_sdk_scipy_or_matplotlib(tmp_path: Path) -> None:
    out = tmp_path / "c"
    assert heavy_imports("run", "--model", "reference", "--tasks", "file-write/control", "--contracts", "raw",
                         "--transports", "raw", "--out", str(out), "--json", cwd=tmp_path) == (0, [])
    assert heavy_imports("report", str(out / "results.jsonl"), cwd=tmp_path) == (0, [])
    assert heavy_imports("report", str(tmp_path / "absent.jsonl"), cwd=tmp_path) == (2, [])
    assert heavy_imports("run", "--model", "reference", "--effort", "hgih", "--out", str(out), cwd=tmp_path)[0] == 2
    # the page draws its figures with matplotlib: imported when a page is asked for
    assert heavy_imports("report", str(out / "results.jsonl"), "--html", str(tmp_path / "r.html"),
                         cwd=tmp_path) == (0, ["matplotlib"])
