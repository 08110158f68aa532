"""What every deployment path carries, set in one place: the name and what a ``-safe`` twin fixes are
derived from the route's name, so the catalogue's pairing rule (``X`` and ``X-safe``) cannot drift."""

from __future__ import annotations

from ..shells import Shell


class Route:
    """Base of the path transports (see :mod:`transports.paths`): ``source`` and ``component`` are class
    attributes of each route; the rest is set here."""

    source: str
    component: str

    def __init__(self, route: str, safe: bool, shell: Shell, *, boundary: str, fix: str) -> None:
        self.safe = safe
        self.name = f"{route}-safe" if safe else route
        self.fixes: str | None = route if safe else None
        self.shell = shell
        self.boundary = fix if safe else boundary
