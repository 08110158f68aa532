"""What the transports' wrapping functions do, pinned exactly (found by mutation testing, docs/mutation.md).

The property tests compare outcomes on a corpus; these pin the pieces a mutant could change unseen:
the exact outer program of each paste, json-naive's strictness and its non-string refusal, that a
composed JSON transport really hands R to its inner transport, and which final shell a record names.
"""

from __future__ import annotations

import anyio

from tasks.load import get_task
from transports import escaped, nested, nested_single
from transports.execute import execute
from transports.registry import shell_of
from transports.sandbox import Limits

LIMITS = Limits(timeout_s=3)


def run(transport: str, command: str):
    return anyio.run(lambda: execute(get_task("file-write/control"), transport, command, limits=LIMITS))


def test_each_paste_builds_exactly_its_outer_program() -> None:
    r = "echo 'it''s' \"$x\""
    assert nested.wrap("bash", r) == "bash -c \"echo 'it''s' \"$x\"\""
    assert nested_single.wrap("dash", r) == "dash -c 'echo 'it''s' \"$x\"'"
    assert escaped.wrap("bash", r) == "bash -c 'echo '\"'\"'it'\"'\"''\"'\"'s'\"'\"' \"$x\"'"


def test_nested_single_ends_the_quoting_at_a_quote_of_r() -> None:
    # bash -c 'echo 'a b' > out.txt' splits into the words "echo a" and "b > out.txt": the inner shell's
    # program is "echo a" ("b > out.txt" becomes its $0, and nothing is redirected)
    record = run("nested-single", "echo 'a b' > out.txt")
    assert record.received == "echo a"
    assert record.damaged


def test_json_naive_is_a_strict_parser_a_raw_tab_is_refused() -> None:
    record = run("json-naive", "printf 'a\tb' > out.txt")  # a literal TAB inside the JSON string
    assert record.transport_error is not None
    assert record.transport_error.startswith("json-naive: the JSON document does not parse: Invalid control character")
    assert record.exit_code is None and record.received is None


def test_json_naive_refuses_a_command_field_that_is_not_a_string() -> None:
    # the paste closes the string and sets "command" again: the last key wins, and it is a number
    record = run("json-naive", 'x", "command": 1, "y": "z')
    assert record.transport_error == "json-naive: the command field decoded to int, not a string"
    assert record.exit_code is None and record.received is None


def test_a_composed_json_transport_delivers_through_its_inner_transport() -> None:
    # nested's outer shell expands $HOME inside the double quotes; raw would deliver R unchanged
    for name in ("json-naive+nested", "json-correct+nested"):
        record = run(name, "echo '$HOME' > out.txt")
        assert record.transport == name
        assert record.received is not None and record.received.startswith("echo '/"), (name, record.received)
        assert "$HOME" not in record.received and record.damaged


def test_the_final_shell_of_a_terminal_or_composed_transport() -> None:
    assert shell_of("raw@dash") == "dash"
    assert shell_of("tempscript@zsh") == "zsh"
    assert shell_of("json-naive+raw@dash") == "dash"
    assert shell_of("json-correct+tempscript@busybox") == "busybox"
    assert shell_of("json-naive") == "bash"
