"""The audit document (``quotebench harness audit NAME --json``): one row per measured fact, and the runs.

Stability
    A row's ``stable`` says whether its values are expected to be the same on every audit of the same release
    on the same system: values that change from one run to the next (a port, a session id, a temporary name)
    are measured as such, by comparing the audit's own runs, and shown with ``*`` in place of the tokens that
    changed; a row built from one run's volatile text (the model's preview of a long output) is ``stable:
    false``. ``runs`` (times, exit statuses) is never stable. ``tests/test_harness_audit.py`` compares a live
    audit with the committed one on every stable row.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

SCHEMA = 1


class Row(BaseModel):
    """One measured fact: what R saw through the harness, and through ``raw`` on the same final shell."""

    key: str = Field(description="stable identifier, e.g. 'shell.flags', 'env.CLAUDECODE', 'type.grep'")
    group: str = Field(description="the table section: shell, rc, names, env, cwd, io, status, output, time, "
                                   "set-e, trimming, constructs")
    measure: str = Field(description="what is measured, one line")
    harness: str = Field(description="the value through the harness")
    raw: str | None = Field(None, description="the value through raw on the route's final shell; null where "
                                              "it does not apply (what the model is told)")
    stable: bool = True
    how: str = Field("", description="how it was measured (probe file, exec trace, courier log)")


class Run(BaseModel):
    """One probe run (never stable: times and the machine's load vary)."""

    probe: str
    transport: str
    received_equals_command: bool
    received_note: str | None = None
    transport_error: str | None = None
    exit_code: int | None = None
    timed_out: bool = False
    exec_ms: float | None = None
    crashes: list[str] = Field(default_factory=list, description="earlier attempts whose harness died of a signal "
                                                                  "before it started a final shell (run again)")


class Audit(BaseModel):
    """What a harness does to every command, measured by probes sent through its real route."""

    schema_version: int = SCHEMA
    harness: str
    version: str
    route: str = Field(description="the route's boundary, as the route states it")
    baseline: str = Field(description="the raw transport the rows compare with: raw on the route's final shell")
    isolation: str | None = None
    rows: list[Row]
    runs: list[Run]

    def stable_rows(self) -> dict[str, Row]:
        return {r.key: r for r in self.rows if r.stable}
