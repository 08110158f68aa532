"""``quotebench lint``: what a route will do to a command, predicted from its text alone (docs/lint.md).

Exit status (ShellCheck's convention): 0 when no command is damaged, 1 when one is (with ``--strict`` also
when one's damage is unknown), 2 for bad input: an unknown transport, a ``--file`` line that is not a JSON
string, an unreadable file, a malformed ``--env``. With ``--json`` stdout carries one JSON object per
command, in input order (JSON Lines).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from .app import JSON_OPT, app
from .around_runs import bench_app
from ..ops.bench_lint import LAB
from ..console import fail, out, print_json, safe

MAX_LINT_FILE = 256 << 20
"""The largest ``--file`` read."""


def read_commands(path: Path) -> list[str]:
    """One JSON-encoded string per line; blank lines are skipped; anything else is bad input naming the line."""
    from tasks.safefs import UnsafeRead, read_input

    try:
        data = read_input(path, MAX_LINT_FILE)
    except UnsafeRead as e:
        fail(str(e))
    except OSError as e:
        fail(f"{path}: cannot read: {e.strerror or e}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        fail(f"{path}: not valid UTF-8 (byte {e.start})")
    commands: list[str] = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError) as e:
            fail(f"{path}:{number}: not a JSON string ({str(e).splitlines()[0][:80]})")
        if not isinstance(value, str):
            fail(f"{path}:{number}: a JSON {type(value).__name__}, not a string (one command per line)")
        commands.append(value)
    return commands


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parse_env(pairs: list[str]) -> dict[str, str] | None:
    if not pairs:
        return None
    env: dict[str, str] = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or not name:
            fail(f"--env {pair[:60]!r}: expected NAME=VALUE")
        env[name] = value
    return env


@app.command("lint")
def lint_cmd(
    transport: str = typer.Option(..., "--transport", help="The route (see `transports list`), e.g. nested, ssh, "
                                  "docker-sh, make, json-naive+ssh."),
    command: Optional[str] = typer.Option(None, "--command", help="The command R."),
    file: Optional[Path] = typer.Option(None, "--file", help="Commands, one JSON-encoded string per line."),
    env: list[str] = typer.Option([], "--env", metavar="NAME=VALUE",
                                  help="The outer shell's environment, one variable each (repeatable); given, it is "
                                  "taken as the whole environment, so $NAME of an unset name expands to nothing. "
                                  "Without it every variable the route would expand makes received unknown."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 also when a command's damage is unknown."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per command (JSON Lines)."),
) -> None:
    """Predict, without running anything, whether a route damages a command: the exact text the final shell
    would receive, each span the route reinterprets with its rule, and a safe text that arrives as R."""
    from transports.lint import LintError, lint

    if (command is None) == (file is None):
        fail("give exactly one of --command, --file")
    commands = [command] if command is not None else read_commands(file)  # type: ignore[arg-type]
    environment = parse_env(env)
    damaged = unknown = 0
    for k, text in enumerate(commands):
        try:
            p = lint(text, transport, env=environment)
        except LintError as e:
            fail(f"{file}:{k + 1}: {e}" if file is not None and "transport" not in str(e) else str(e))
        damaged += p.damaged is True
        unknown += p.damaged is None
        if as_json:
            line = json.dumps(p.to_json(), ensure_ascii=False)
            if not line.isascii() and _has_surrogate(line):  # a lone surrogate has no UTF-8: JSON's \u escape
                line = json.dumps(p.to_json())
            print(line, flush=False)
        else:
            from ..records.lint import lint_view

            if k:
                out.print()
            out.print(lint_view(p))
    raise typer.Exit(1 if damaged or (strict and unknown) else 0)


@bench_app.command("lint")
def bench_lint_cmd(
    transports: str = typer.Option(",".join(LAB), "--transports", help="Transports to time (default: the lab's)."),
    rounds: int = typer.Option(5, "--rounds", min=1, help="Timed passes over the corpus per transport (the best "
                               "counts)."),
    as_json: bool = JSON_OPT,
) -> None:
    """The lint's throughput: commands per second per core on each transport over a fixed corpus (the suite's
    reference and habits replies, the hostile corpus), beside the goal of 20,000."""
    from transports.lint import LintError, lint

    from ..ops.bench_lint import throughput

    names = [n.strip() for n in transports.split(",") if n.strip()]
    if not names:
        fail("--transports: name at least one transport")
    for name in names:
        try:
            lint("true", name)
        except LintError as e:
            fail(f"--transports: {e}")
    doc = throughput(names, rounds)
    if as_json:
        print_json(doc)
        return
    from rich.table import Table

    s = doc["sources"]
    t = Table(title=f"lint throughput: {doc['commands']} commands (reference {s['reference']}, habits "
                    f"{s['habits']}, hostile {s['hostile']}), best of {doc['rounds']} passes, CPU time of one core")
    for head in ("transport", "commands/s/core", "µs/command", "goal"):
        t.add_column(head, justify="left" if head == "transport" else "right", no_wrap=True)
    for name, v in doc["transports"].items():
        verdict = f">= {doc['goal_per_s']:,.0f}/s " + ("ok" if v["within_goal"] else "MISSED")
        t.add_row(safe(name), f"{v['commands_per_s']:,.0f}", f"{v['us_per_command']:.1f}", verdict)
    out.print(t)
