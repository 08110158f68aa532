"""An audit shown: a rich table for the terminal, and the Markdown table of docs/harnesses.md.

The Markdown is a function of the audit document alone (no date, no timing), so docs/harnesses.md can be held
equal to the rendering of the committed ``docs/audits/NAME.json`` by a test, between the markers
``<!-- audit:NAME -->`` and ``<!-- /audit:NAME -->``.
"""

from __future__ import annotations

from rich.table import Table

from .model import Audit


def title(audit: Audit) -> str:
    return (f"{audit.harness} {audit.version}: what it does to every command "
            f"(measured; baseline {audit.baseline}, isolation {audit.isolation or 'unknown'})")


def table(audit: Audit) -> Table:
    from ...console import safe

    t = Table("group", "measure", audit.harness, audit.baseline, title=title(audit), show_lines=False)
    last = None
    for r in audit.rows:
        t.add_row(r.group if r.group != last else "", safe(r.measure), safe(r.harness),
                  safe(r.raw if r.raw is not None else "-"))
        last = r.group
    return t


def runs_table(audit: Audit) -> Table:
    t = Table("probe", "transport", "received == R", "exit", "ms", title="runs")
    for r in audit.runs:
        t.add_row(r.probe, r.transport, "yes" if r.received_equals_command else "no",
                  "-" if r.exit_code is None else str(r.exit_code), "-" if r.exec_ms is None else f"{r.exec_ms:.0f}")
    return t


def _text(value: str) -> str:
    """``value`` on one line of a Markdown table: every control character a visible escape (newline and
    carriage return as ``\\n`` and ``\\r``, tab as ``\\t``, ESC as ``\\x1b``, as :func:`..console.safe` shows
    them), so a value read from an audit document can neither start a forged table row nor act on the terminal
    the table is printed to; ``|`` escaped so it stays in its cell."""
    from ...console import safe

    return safe(value).replace("\n", "\\n").replace("\t", "\\t").replace("|", "\\|")


def _cell(value: str | None) -> str:
    if value is None:
        return "-"
    return "`" + _text(value).replace("`", "'") + "`" if value else "` `"


def markdown(audit: Audit) -> str:
    """The audit as one Markdown table (the docs block's body); every value from the document goes through
    :func:`_text`, since ``--from`` renders a document anyone may have written."""
    harness, version, baseline = (_text(v).replace("`", "'") for v in (audit.harness, audit.version, audit.baseline))
    intro = (f"Measured by `quotebench harness audit {harness}` ({harness} {version}; "
             f"every value from a probe run through the route; `{baseline}` is the same probe without the harness; "
             "`*` marks a token that changed between runs):")
    lines = [intro, "",
             f"| group | measure | {harness} | {baseline} |", "|---|---|---|---|"]
    for r in audit.rows:
        lines.append(f"| {_text(r.group)} | {_text(r.measure)} | {_cell(r.harness)} | {_cell(r.raw)} |")
    return "\n".join(lines) + "\n"


def markers(name: str) -> tuple[str, str]:
    return f"<!-- audit:{name} -->", f"<!-- /audit:{name} -->"


def docs_block(doc: str, name: str) -> str | None:
    """What stands between the markers of ``name`` in ``doc`` (without the newlines next to them), or None."""
    start, end = markers(name)
    if start not in doc or end not in doc:
        return None
    return doc.split(start, 1)[1].split(end, 1)[0].strip("\n") + "\n"


def with_block(doc: str, name: str, body: str) -> str:
    """``doc`` with the block of ``name`` replaced by ``body`` (the markers must be there)."""
    start, end = markers(name)
    head, rest = doc.split(start, 1)
    return f"{head}{start}\n{body.rstrip(chr(10))}\n{end}{rest.split(end, 1)[1]}"
