"""Commands about this machine: ``doctor`` (what each transport, path and agent harness needs, and whether
it is here) and ``components install`` (install ahead of time what quotebench can install). The data is
:mod:`qb_client.ops.doctor`'s, read from the transports themselves."""

from __future__ import annotations

from typing import Optional

import typer

from .app import CONTEXT, JSON_OPT, app
from ..console import fail, out, print_json, safe

components_app = typer.Typer(no_args_is_help=True, context_settings=CONTEXT,
                             help="Components the routes need that quotebench can install (npm packages and Python "
                                  "venvs).")
app.add_typer(components_app, name="components")


@app.command("doctor")
def doctor_cmd(as_json: bool = JSON_OPT) -> None:
    """What each transport, path, agent harness and integration needs from this machine, and whether it is
    here. Exit 0 when everything required is present, 1 otherwise. Installs nothing."""
    from rich.table import Table

    from ..ops.doctor import report

    doc = report()
    if as_json:
        print_json(doc)
        raise typer.Exit(0 if doc["ready"] else 1)
    comps = {c["name"]: c for c in doc["components"]}
    table = Table("component", "kind", "package", "version", "status", "where / why not", title="components")
    for c in doc["components"]:
        status = "present" if c["present"] else ("missing (optional)" if c["optional"] else "MISSING")
        table.add_row(safe(c["name"]), c["kind"], safe(c["package"]), safe(c["version"] or ""), status,
                      safe(c["detail"] + (f"; {c['note']}" if c["note"] else "")))
    out.print(table)
    for s in doc["sections"]:
        if not s["entries"]:
            out.print(f"{s['title']}: {safe(s.get('note', 'none'))}", soft_wrap=True)
            continue
        t = Table("name", "needs", "ready", title=s["title"])
        for e in s["entries"]:
            needs = ", ".join(n + ("" if comps[n]["present"] else " (missing)") + (" (optional)" if comps[n]["optional"]
                                                                                  else "") for n in e["needs"])
            t.add_row(safe(e["name"]), safe(e["problem"] or needs or "-"), "yes" if e["ready"] else "NO")
        out.print(t)
    missing = [c for c in doc["components"] if not c["present"] and not c["optional"]]
    for c in missing:
        out.print(f"missing: {safe(c['name'])}: {safe(c['how'])}", soft_wrap=True)
    out.print("ready: every required component is present" if doc["ready"] else
              f"not ready: {len(missing)} required component(s) missing; records on the paths that need them "
              "are harness errors, left out of every rate", soft_wrap=True)
    raise typer.Exit(0 if doc["ready"] else 1)


@components_app.command("install")
def components_install(
    names: Optional[list[str]] = typer.Argument(None, metavar="[NAME...]",
                                                help="Components to install (default: every installable one)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Install components ahead of time (the npm packages and Python venvs `doctor` lists: shell-quote, the
    agent harnesses, harbor), for a machine that will run offline later; one line per component. Idempotent:
    an installed one is left as it is. Exit 1 if any install failed."""
    from ..ops.doctor import install

    try:
        results = install(list(names or []))
    except ValueError as e:
        fail(str(e))
    if as_json:
        print_json({"components": results})
    else:
        for r in results:
            out.print(f"{safe(r['name'])}: {'' if r['ok'] else 'FAILED: '}{safe(r['detail'])}", soft_wrap=True)
    raise typer.Exit(0 if all(r["ok"] for r in results) else 1)
