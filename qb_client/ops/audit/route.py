"""What the audit asks of a harness route, and only that: the route object itself says how to run it, which exec
is its final shell, which shell that is and what its launcher sets. Read through the frame's own methods, and
its optional hooks (``final_shell_in``, ``run_env``) where a route has them, so nothing here is per harness."""

from __future__ import annotations

from transports.harnesses import HARNESSES
from transports.harnesses.harness import HarnessRoute
from transports.sandbox.exectrace import Exec, Trace


class AuditError(RuntimeError):
    """The audit could not be made: an unknown harness, or a component the route needs is missing."""


def route_of(name: str) -> HarnessRoute:
    factory = HARNESSES.get(name)
    if factory is None:
        raise AuditError(f"unknown harness '{name}' (known: {', '.join(HARNESSES)})")
    route = factory()
    if not isinstance(route, HarnessRoute):
        raise AuditError(f"harness '{name}' is not a HarnessRoute; it cannot be audited")
    return route


def final_shell(route: HarnessRoute, trace: Trace | None) -> Exec | None:
    """The route's final shell exec, as the route itself picks it: ``final_shell_in`` (the whole trace, forks
    included) where the frame has it, else ``final_shell`` on the trace's execs."""
    pick = getattr(route, "final_shell_in", None)
    if pick is not None:
        return pick(trace).exec
    return route.final_shell(list(trace.execs) if trace is not None else []).exec


def launcher_names(route: HarnessRoute) -> set[str]:
    """The variables the route's launcher sets for the harness: its ``env``, ``url_var`` and, where the frame has
    it, ``run_env``'s names."""
    names = set(route.env()) | {route.url_var}
    run_env = getattr(route, "run_env", None)
    return names | (set(run_env("/run-dir")) if run_env is not None else set())


def baseline_name(route: HarnessRoute) -> str:
    return "raw" if route.shell.name == "bash" else f"raw@{route.shell.name}"
