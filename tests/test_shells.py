"""The final shell as a dimension: every terminal transport runs its final shell as
bash, dash, zsh or busybox ash, the real programs; the fixes reproduce raw on the same shell."""

from __future__ import annotations

import anyio
import pytest

from tasks.load import get_task, load_suite
from transports.execute import execute
from transports.registry import UnknownTransportError, get, validate_name
from transports.sandbox import Limits

from bulk import many

pytestmark = pytest.mark.needs("dash", "zsh", "busybox")

SHELLS = ("dash", "zsh", "busybox")
LIMITS = Limits(timeout_s=5)
TASK = get_task("file-write/control")


def rec(transport: str, command: str, task=TASK):
    return anyio.run(lambda: execute(task, transport, command, limits=LIMITS))


@pytest.mark.parametrize("shell", SHELLS)
def test_the_final_shell_is_the_real_program(shell: str) -> None:
    probe = "cat /proc/$$/comm; :"  # the trailing : keeps zsh from exec-ing cat in its own place
    for transport in ("raw", "nested", "nested-single", "escaped", "tempscript"):
        sent = probe.replace("$", "\\$") if transport == "nested" else probe  # the outer parse eats one level
        r = rec(f"{transport}@{shell}", sent)
        assert r.stdout.text == f"{shell}\n", (transport, r.stdout.text, r.stderr.text)
        assert r.shell == shell and r.transport == f"{transport}@{shell}"
        assert r.received == probe


def test_bash_is_the_default_and_at_bash_is_dropped_from_the_name() -> None:
    assert validate_name("raw@bash") == "raw" and validate_name("json-naive+nested@bash") == "json-naive+nested"
    r = rec("raw@bash", "cat /proc/$$/comm; :")
    assert r.transport == "raw" and r.shell == "bash" and r.stdout.text == "bash\n"


@pytest.mark.parametrize("bad, message", [
    ("raw@fish", "unknown final shell 'fish' (known: bash, dash, zsh, busybox)"),
    ("raw@", "'raw@': a final shell must follow '@' (e.g. raw@dash)"),
    ("json-naive@dash", "'json-naive@dash': name the final shell on the terminal transport (e.g. json-naive+raw@dash)"),
])
def test_bad_shell_names_are_one_line_errors(bad: str, message: str) -> None:
    with pytest.raises(UnknownTransportError) as e:
        get(bad)
    assert str(e.value) == message


def test_middleware_composes_with_a_final_shell() -> None:
    r = rec("json-correct+raw@dash", 'printf "%s\\n" "$0" > out.txt; cat out.txt')
    assert r.shell == "dash" and r.stdout.text == "dash\n"


@pytest.mark.parametrize("shell", SHELLS)
def test_a_bashism_means_something_else_on_the_final_shell(shell: str) -> None:
    command = "printf '%s\\n' hello world > out.txt; [[ -n x ]] && echo bash-only"
    on_bash, on_other = rec("raw", command), rec(f"raw@{shell}", command)
    assert on_bash.stdout.text == "bash-only\n"
    assert (on_other.stdout.text == "bash-only\n") == (shell in ("zsh", "busybox"))  # both know [[ ]]; dash does not


@pytest.mark.parametrize("shell", SHELLS)
def test_the_fixes_reproduce_raw_on_the_same_shell(shell: str) -> None:
    """The 112 reference solutions: escaped and tempscript on a shell give raw's verdict on that shell,
    and received == R."""
    commands = [(t, c) for t in load_suite() for c in (t.solution, t.solution_disclosed)]
    bases = many(f"raw@{shell}", commands)
    for fix in ("escaped", "tempscript"):
        for (task, command), base, r in zip(commands, bases, many(f"{fix}@{shell}", commands)):
            assert r.received == command, (fix, shell, task.id)
            assert r.verdict.passed == base.verdict.passed, (fix, shell, task.id)


@pytest.mark.parametrize("shell", SHELLS)
def test_nested_damage_is_the_outer_parse_whatever_the_final_shell(shell: str) -> None:
    command = "echo hello $HOME `echo x` > out.txt"
    assert rec(f"nested@{shell}", command).received == rec("nested", command).received == "echo hello /sandbox/home x > out.txt"
