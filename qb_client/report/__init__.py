"""``quotebench report``: the decomposition and statistics of SPEC.md from results JSONL files.

Public API:

* :func:`load_records` - read results files into record dicts (:class:`ReportInputError` on bad input)
* :func:`compute` - records -> the SPEC ``report --json`` document
* :func:`render_terminal` - the document as rich tables on a console
* :func:`render_html` / :func:`write_html` - the document as one self-contained HTML page
* :func:`report_command` - the whole command, as the CLI calls it

Inside: :mod:`.load` reads and checks records, :mod:`.compute` (with :mod:`.stats`, :mod:`.groups`,
:mod:`.paths`, :mod:`.harnesses`, :mod:`.turns`, :mod:`.order`) makes the document, :mod:`.terminal` and
:mod:`.page` (with :mod:`.fmt`, :mod:`.plots`, :mod:`.style`) render it, :mod:`.damaged` lists damaged commands,
:mod:`.lint_check` sets the lint's predictions against the measured damage (``report --lint``), and
:mod:`.shellcheck` ShellCheck's on the routes' wrappers beside them (``--shellcheck``).

May import: ``tasks``, ``transports``; of ``qb_client``: :mod:`qb_client.console`,
:mod:`qb_client.replies` (the config label) and :mod:`qb_client.records`. Never a campaign or the CLI: a
report is made from results files alone. This ``__init__`` only re-exports its own submodules, and none
of them imports it back.
"""

from __future__ import annotations

import json
import sys

from .compute import compute, selection_detail
from .load import ReportInputError, config_label, load_records
from .page import render_html, write_html
from .terminal import render_terminal

__all__ = [
    "ReportInputError", "compute", "config_label", "load_records", "render_html", "render_terminal",
    "report_command", "selection_detail", "write_html",
]


def report_command(paths: list[str], html: str | None, as_json: bool, *, csv_path: str | None = None,
                   damaged: str | None = None, lint: bool = False, shellcheck: bool = False) -> int:
    """Load, compute, print (JSON or tables) to stdout, write the HTML page if asked; the exit code.

    Bad input raises :class:`ReportInputError` (one line naming the file, line and field; exit 2),
    an unwritable ``html`` path included: the page is written before anything is printed. Messages (warnings, where the page went) go to stderr, so ``--json`` leaves one document on stdout.
    """
    if shellcheck:  # before the records are read: a missing program is the first thing to say
        from .shellcheck import find_shellcheck, missing_message

        if find_shellcheck() is None:
            raise ReportInputError(f"report --shellcheck: {missing_message()}")
    records = load_records(paths)
    if csv_path is not None or damaged is not None:
        from .damaged import check_transport, damaged_rows, render_damaged, write_csv

        if damaged is not None:
            check_transport(records, damaged)
        rows = damaged_rows(records, damaged)
        if csv_path is not None:
            write_csv(rows, csv_path)
            print(f"quotebench report: wrote {len(rows)} damaged command(s) to {csv_path}", file=sys.stderr)
        if damaged is not None:  # the list is the answer asked for: no decomposition
            if as_json:
                _print_json(rows)
            else:
                from ..console import out

                render_damaged(rows, out, damaged)
            return 0
    doc = compute(records)
    lint = lint or shellcheck
    if lint:
        from .lint_check import lint_section
        from .shellcheck import ShellCheckMissing

        try:
            doc["lint"] = lint_section(records, shellcheck=shellcheck)
        except ShellCheckMissing as e:
            raise ReportInputError(f"report --shellcheck: {e}") from None
    if html:  # written first: a bad path fails before anything is printed
        write_html(doc, html)
    if as_json:
        _print_json(doc)
    else:
        from ..console import out  # markup and emoji off; the terminal's width, COLUMNS, or room when piped

        render_terminal(doc, out)
        if lint:
            from .lint_check import render_lint

            out.print(render_lint(doc["lint"]))
    if html:
        print(f"quotebench report: wrote {html}", file=sys.stderr)
    return 0


def _print_json(doc: object) -> None:
    text = json.dumps(doc, ensure_ascii=False, indent=2, allow_nan=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a record: keep stdout valid UTF-8
        text = json.dumps(doc, ensure_ascii=True, indent=2, allow_nan=False)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
