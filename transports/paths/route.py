"""What every deployment path carries, set in one place: the name and what a ``-safe`` twin fixes are
derived from the route's name, so the catalogue's pairing rule (``X`` and ``X-safe``) cannot drift."""

from __future__ import annotations

from ..components import Component
from ..shells import Shell


class Route:
    """Base of the path transports (see :mod:`transports.paths`): ``source`` and ``component`` are class
    attributes of each route; the rest is set here.

    ``route_needs``: what the route needs from the machine beyond its final shell (programs, packages;
    :mod:`transports.components`), next to the route so that ``quotebench doctor`` and the check before
    each execution read the route itself; ``fix_needs``: the ``-safe`` twin's, when they differ."""

    source: str
    component: str
    route_needs: tuple[Component, ...] = ()
    fix_needs: tuple[Component, ...] | None = None

    @property
    def needs(self) -> tuple[Component, ...]:
        """This entry's needs (the final shell is added by :func:`transports.components.needs_of`)."""
        return self.fix_needs if self.safe and self.fix_needs is not None else self.route_needs

    def __init__(self, route: str, safe: bool, shell: Shell, *, boundary: str, fix: str) -> None:
        self.safe = safe
        self.name = f"{route}-safe" if safe else route
        self.fixes: str | None = route if safe else None
        self.shell = shell
        self.boundary = fix if safe else boundary
