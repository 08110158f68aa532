"""The properties the paper's identification rests on, for every command.

* ``escaped``, ``tempscript`` and ``json-correct`` reproduce the ``raw`` outcome: received == R, and the same
  verdict (and, but for ``tempscript``, the same exit status).
* ``nested`` leaves a command without double-quote-active characters unchanged, and damages one with them.
* a command with a NUL byte or invalid UTF-8 becomes a recorded transport error, never a crash.
"""

from __future__ import annotations

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tasks.load import get_task
from transports.execute import execute
from transports.sandbox import Limits, isolation_available

FIXES = ("escaped", "tempscript", "json-correct")
LIMITS = Limits(timeout_s=3)

CORPUS = [
    'echo "hello world" > out.txt',
    "printf '%s\\n' 'Don'\\''t \"quote\" me' > motd.txt",
    'printf "%s\\n" "$HOME costs \\$5" > price.txt',
    "echo `echo backtick` $(echo subst) > out.txt",
    "cat > out.txt <<'EOF'\n$literal `not run` \\n \"q\" 'q'\nEOF",
    "cat > out.txt <<EOF\n$HOME `echo x` \\$ \\\\\nEOF",
    'echo "unbalanced',
    "echo 'unbalanced",
    'echo \\',
    "printf 'a\\r\\nb\\r\\n' > out.txt",
    "echo 'ünïcödé ✓ 日本語' > out.txt",
    "line1\nline2\n\nline4 \t",
    "echo a;echo b&&echo c||echo d|cat",
    "for f in *; do echo \"$f\"; done > out.txt",
    "echo -n '-n' '*.log' '[a-z]?' > out.txt",
    "x='a\"b'; echo \"${x}\" > out.txt",
    "echo !! !$ '!' \"!\" > out.txt",
    "echo %s %% 100% > out.txt",
    "printf '%s' \"$(printf '%s' 'nested \"quotes\"')\" > out.txt",
    "echo " + "long-word-" * 2000 + " > out.txt",
    "",
    "   ",
    "\\\"\\'\\`\\$",
    "# just a comment",
    "echo \"\"\"''\"\" > out.txt",
]


def outcome(record):
    # output is not compared: two processes of a pipeline may write their errors in either order
    return (record.verdict.model_dump(), record.exit_code, record.timed_out)


async def run_all(command: str, transports: tuple[str, ...]) -> dict:
    task = get_task("file-write/control")
    return {t: await execute(task, t, command, limits=LIMITS) for t in transports}


def assert_fixes_reproduce_raw(command: str) -> None:
    records = anyio.run(run_all, command, ("raw", *FIXES))
    raw = records["raw"]
    assert raw.received == command and not raw.damaged
    for name in FIXES:
        r = records[name]
        assert r.received == command, name
        assert not r.damaged, name
        if name == "tempscript":
            # $0, error-message prefixes and the exit status of a syntax error differ between
            # `bash -c` and `bash FILE`; the property is about the final state, the verdict.
            # A program starting with - or + is read by `bash -c` as more options (bash's own quirk on
            # the raw path, which escaped and json-correct share); a script file has no such reading.
            if command[:1] in "-+" and command:
                continue
            assert r.verdict == raw.verdict, name
        else:
            assert outcome(r) == outcome(raw), name


@pytest.mark.parametrize("command", CORPUS, ids=range(len(CORPUS)))
def test_fixes_reproduce_raw_on_the_corpus(command: str) -> None:
    assert_fixes_reproduce_raw(command)


shell_text = st.text(
    alphabet=st.sampled_from(list("abc xyz019'\"$`\\!%*?[]{}()<>|&;#~=\n\t\r-_./:") + ["é", "✓"]),
    max_size=60,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(command=shell_text)
def test_fixes_reproduce_raw_for_generated_commands(command: str) -> None:
    assert_fixes_reproduce_raw(command)


@settings(max_examples=25, deadline=None)
@given(command=st.text(alphabet=st.sampled_from(list("abc xyz019'!%*?[]{}()<>|&;#~=\n\t-_./:")), max_size=60))
def test_nested_keeps_commands_without_double_quote_active_characters(command: str) -> None:
    # without " $ ` \ the outer parse of "R" is a single word equal to R
    record = anyio.run(lambda: execute(get_task("file-write/control"), "nested", command, limits=LIMITS))
    assert record.received == command


@pytest.mark.parametrize("command, received", [
    ('echo "hello world" > out.txt', "echo hello"),
    ("echo $QB_UNSET_VARIABLE", "echo "),
    ("echo $HOME", "echo /sandbox/home" if isolation_available() == "bwrap" else None),
    ("echo \\$HOME", "echo $HOME"),
    ("echo `echo hi`", "echo hi"),
])
def test_nested_damage_is_what_bash_does_to_double_quoted_text(command: str, received: str) -> None:
    record = anyio.run(lambda: execute(get_task("file-write/control"), "nested", command, limits=LIMITS))
    if received is not None:
        assert record.received == received
    assert record.damaged


@pytest.mark.parametrize("transport", ["raw", "nested", "nested-single", "escaped", "tempscript", "json-naive",
                                       "json-correct"])
@pytest.mark.parametrize("command", ["echo a\x00b > out.txt", "echo \udcff > out.txt"], ids=["nul", "invalid-utf8"])
def test_unrepresentable_commands_are_transport_errors(transport: str, command: str) -> None:
    record = anyio.run(lambda: execute(get_task("file-write/control"), transport, command))
    assert record.transport_error
    assert record.exit_code is None and record.received is None and record.damaged
    assert not record.verdict.passed
    assert record.verdict.checks[0].check == "transport"


def test_json_naive_parse_failure_runs_nothing() -> None:
    record = anyio.run(lambda: execute(get_task("file-write/control"), "json-naive", 'echo "hello world" > out.txt'))
    assert record.transport_error.startswith("json-naive: the JSON document does not parse")
    assert record.exit_code is None and record.stdout.text == ""


def test_json_naive_decodes_escapes_and_damage_need_not_fail() -> None:
    # \n becomes a real newline inside printf's format: damaged, yet the same bytes land in the file
    record = anyio.run(lambda: execute(get_task("file-write/control"), "json-naive", "printf 'hello world\\n' > out.txt"))
    assert record.received == "printf 'hello world\n' > out.txt"
    assert record.damaged and record.verdict.passed


def test_composed_transport_names() -> None:
    record = anyio.run(lambda: execute(get_task("file-write/control"), "json-correct+nested", "echo hello world > out.txt"))
    assert record.transport == "json-correct+nested"
    assert record.verdict.passed


@pytest.mark.parametrize("command, received", [
    # the outer shell runs R's $(bash ...) first; the boundary is still the inner bash -c that follows
    ("echo \"$(bash -c 'echo sub')\" > out.txt", "echo sub > out.txt"),
    # the paste split the outer text into several commands: the first inner bash is the boundary
    ('echo "; echo "two', "echo "),
    # a bash the inner shell starts itself is not the boundary
    ("bash -c 'echo inner'", "bash -c 'echo inner'"),
])
def test_received_is_the_boundary_shell(command: str, received: str) -> None:
    record = anyio.run(lambda: execute(get_task("file-write/control"), "nested", command, limits=LIMITS))
    assert record.received == received
    assert "QB_" not in record.stdout.text


def test_a_program_too_long_for_one_argument_is_a_transport_error() -> None:
    command = "cat > out.txt <<'EOF'\n" + "x" * 200_000 + "\nEOF"
    task = get_task("file-write/control")
    for transport in ("raw", "nested", "escaped", "json-correct"):
        record = anyio.run(lambda: execute(task, transport, command))
        assert record.transport_error and "longer than the kernel allows" in record.transport_error, transport
        assert record.exit_code is None and not record.verdict.passed
    record = anyio.run(lambda: execute(task, "tempscript", command))  # a script file has no such limit
    assert record.transport_error is None and record.received == command and record.exit_code == 0


def test_tempscript_received_is_what_was_written_even_if_the_script_changes_itself() -> None:
    task = get_task("file-write/control")
    for command in ('rm -- "$0"', 'echo hello world > out.txt; echo "# other" > "$0"'):
        record = anyio.run(lambda: execute(task, "tempscript", command))
        assert record.received == command and not record.damaged


@pytest.mark.needs("bwrap")  # fixed paths need bubblewrap (tests/conftest.py)
def test_the_outer_shell_sees_the_same_paths_on_every_run() -> None:
    task = get_task("file-write/control")
    seen = {anyio.run(lambda: execute(task, "nested", "echo $PATH")).received for _ in range(2)}
    assert seen == {"echo /usr/local/bin:/usr/bin:/bin"}  # the capture shim is not on $PATH
