"""Deployment paths: the catalogue, each path's received against its real component, and
every ``-safe`` fix reproducing ``raw`` on the same final shell over the 112 reference solutions
and a hostile corpus (verdict equal, received == R)."""

from __future__ import annotations

import shlex
import subprocess

import anyio
import pytest

from tasks.load import get_task, load_suite
from transports.execute import execute
from transports.harnesses import HARNESSES
from transports.registry import catalogue, get
from transports.sandbox import Limits

from bulk import many

pytestmark = pytest.mark.needs("dash", "zsh", "node", "npm", "make", "tmux")

LIMITS = Limits(timeout_s=5)
TASK = get_task("file-write/control")
ROWS = catalogue()
PATH_ROWS = [r for r in ROWS if r["source"] and "laboratory" not in r["source"] and r["name"] not in HARNESSES]
"""The deployment paths; the agent harness routes (transports.harnesses) have no -safe twin (docs/harnesses.md)
and their own tests (tests/test_harness_claude_code.py)."""
SAFE = [r["name"] for r in PATH_ROWS if r.get("fixes")]
HOSTILE = [
    'echo "hello world" > out.txt',
    "printf '%s\\n' 'Don'\\''t \"quote\" me' > motd.txt",
    "echo `echo backtick` $(echo subst) $HOME \\$5 > out.txt",
    "cat > out.txt <<'EOF'\n$literal `not run` \\n \"q\" 'q'\nEOF",
    "echo !! !$ '!' \"!\" ; echo a;b > out.txt",
    "echo 'unbalanced",
    "x='a\"b'; echo \"${x}\" # comment > out.txt",
    "printf 'a\\tb\\n' > 'sp ace.txt'; echo -n '-n' '*.log' '[a-z]?' ${{ github.x }} $$ >> out.txt",
    "line1\nline2\n\nline4 \t",
]


def rec(transport: str, command: str, task=TASK):
    return anyio.run(lambda: execute(task, transport, command, limits=LIMITS))


def test_every_path_has_its_metadata_and_a_safe_twin() -> None:
    names = {r["name"] for r in ROWS}
    assert PATH_ROWS, "no deployment path is registered"
    for r in PATH_ROWS:
        assert r["boundary"] and r["source"] and r["component"] and r["shell"], r
        base, at, shell = r["name"].partition("@")
        if r.get("fixes"):
            assert r["fixes"] in names and r["name"] == f"{r['fixes'].partition('@')[0]}-safe{at}{shell}"
        else:
            assert f"{base}-safe{at}{shell}" in names, f"{r['name']} has no -safe fix"


@pytest.mark.parametrize("safe", SAFE)
def test_the_safe_fix_reproduces_raw_on_the_same_shell(safe: str) -> None:
    shell = get(safe).shell.name  # type: ignore[attr-defined]
    # a route that reports the final shell's status its own way (make: 2 for any failure) says how
    route_exit = getattr(get(safe), "route_exit_code", lambda code: code)
    base_name = "raw" if shell == "bash" else f"raw@{shell}"
    commands = [(t, c) for t in load_suite() for c in (t.solution, t.solution_disclosed)]
    commands += [(TASK, c) for c in HOSTILE]
    bases = baselines(base_name, commands)
    for (task, command), base, fixed in zip(commands, bases, many(safe, commands)):
        assert fixed.transport_error is None, (safe, task.id, command, fixed.transport_error)
        assert fixed.received == command, (safe, task.id, command)
        assert fixed.verdict.passed == base.verdict.passed, (safe, task.id, command, _why(base), _why(fixed))
        assert fixed.exit_code == route_exit(base.exit_code), (safe, task.id, command)


def _why(r) -> tuple:
    """What a record says of its run, for a failure message: a verdict alone cannot tell a slow machine's
    timeout from a command that failed."""
    return (r.exit_code, r.timed_out, r.error, r.stderr.text[-300:], r.verdict.checks[0].detail[-200:])


_BASELINES: dict[str, list] = {}


def baselines(base_name: str, commands: list) -> list:
    """raw on a shell, once per shell for the whole module (every safe path on that shell compares with it)."""
    if base_name not in _BASELINES:
        _BASELINES[base_name] = many(base_name, commands)
    return _BASELINES[base_name]


def real_host_parse(outer: str) -> str:
    """What real bash hands the program word of ``sh -c "..."``: the test's own capture program in sh's place."""
    probe = "printf %s \"$2\""
    done = subprocess.run(["bash", "-c", outer.replace("sh -c", f"bash -c '{probe}' x -c", 1)],
                          capture_output=True, timeout=10, env={"PATH": "/usr/bin:/bin", "HOME": "/sandbox/home"})
    return done.stdout.decode()


@pytest.mark.parametrize("command", [c for c in HOSTILE if "'" not in c.split('"')[0] and "\n" not in c][:5])
def test_docker_sh_received_is_the_host_shells_double_quote_parse(command: str) -> None:
    r = rec("docker-sh", command)
    if r.received is not None and "$$" not in command:
        assert r.received == real_host_parse('sh -c "' + command + '"')


@pytest.mark.parametrize("command", HOSTILE)
def test_shlex_sh_received_is_what_python_shlex_hands_sh(command: str) -> None:
    r = rec("shlex-sh", command)
    try:
        argv = shlex.split('sh -c "' + command + '"')
    except ValueError as e:
        assert r.transport_error == f"shlex-sh: shlex.split: {e}" and r.exit_code is None
        return
    assert r.received == argv[2]
    assert r.shell == "dash"


def test_shlex_keeps_dollar_and_backticks_for_the_final_shell() -> None:
    command = "echo $0 `echo bt` > out.txt; cat out.txt"  # bash's outer parse would have expanded both
    r = rec("shlex-sh", command)
    assert r.received == command
    assert r.stdout.text == "sh bt\n"
    assert rec("docker-sh", command).received == "echo bash bt > out.txt; cat out.txt"
