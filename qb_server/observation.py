"""What a shell call's record looks like to the model: the tool's descriptions and the rendered result.

Its own module, free of the MCP SDK, so that a campaign's offline agents (which read the same observation as
a client of the server) do not import the server to run.
"""

from __future__ import annotations

from typing import Any

from transports.execute import HARNESS
from transports.results.record import Record

SHELL_DESCRIPTION = "Run a command in a bash shell. Returns its stdout, stderr and exit code."
COMMAND_DESCRIPTION = "The command to run."
RECORD_META = "quotebench/record"


HARNESS_TEXT = ("the tool server could not complete this call; this session's files were discarded "
                "and the next call starts afresh")


def render(record: Record) -> tuple[str, dict[str, Any], bool]:
    """The text the model reads, the same as structured content, and whether it is an error."""
    if record.error is not None and record.error.startswith(f"{HARNESS}:"):
        # what failed is in the record and on stderr; the model learns only that the call did not complete
        return f"error: {HARNESS_TEXT}", {"stdout": "", "stderr": "", "exit_code": None, "timed_out": False,
                                          "error": HARNESS_TEXT}, True
    if record.transport_error is not None:
        # what a real pipeline would say, without naming the measured transport to the model
        error = record.transport_error.removeprefix(f"{record.transport}: ")
        return f"error: {error}", {"stdout": "", "stderr": "", "exit_code": None, "timed_out": False,
                                   "error": error}, True
    lines = []
    if record.timed_out:
        lines.append("timed out: the command was killed")
    else:
        lines.append(f"exit code: {record.exit_code}")
    for name, out in (("stdout", record.stdout), ("stderr", record.stderr)):
        if not out.text:
            lines.append(f"{name}: (empty)")
            continue
        body = out.text[:-1] if out.text.endswith("\n") else out.text
        lines.append(f"{name}:\n{body}" + ("\n[output truncated]" if out.truncated else ""))
    structured = {
        "stdout": record.stdout.text, "stderr": record.stderr.text, "exit_code": record.exit_code,
        "timed_out": record.timed_out, "stdout_truncated": record.stdout.truncated,
        "stderr_truncated": record.stderr.truncated,
    }
    is_error = record.timed_out or record.exit_code != 0
    return "\n".join(lines), structured, is_error
