"""The per-command wall clock of ``exec``, ``replay`` and ``run`` (``--timeout`` / ``--exec-timeout``).

Limits reach a sandbox through :func:`transports.execute.execute` (and ``chain``), whose ``limits``
argument is a :class:`transports.sandbox.Limits`; memory and disk there default to the process-wide
caps (``--memory``, ``--disk``), so only the wall clock is set here. Like those caps it is set once per
process by the command line, before anything runs, and read by replay and the campaigns.
"""

from __future__ import annotations

from transports.sandbox import Limits

MAX_TIMEOUT_S = 24 * 3600.0
_timeout_s: float | None = None


def check_timeout(seconds: float, option: str = "--timeout") -> float:
    """A positive number of seconds, at most a day; ValueError (one line) otherwise."""
    if not 0 < seconds <= MAX_TIMEOUT_S:
        raise ValueError(f"{option} must be a positive number of seconds (at most a day), not {seconds:g}")
    return float(seconds)


def set_command_timeout(seconds: float | None, option: str = "--timeout") -> None:
    """Every later command run by this process gets ``seconds`` of wall clock (None: the sandbox's default)."""
    global _timeout_s
    _timeout_s = None if seconds is None else check_timeout(seconds, option)


def command_limits() -> Limits | None:
    """The limits for one command: None (the sandbox's defaults) unless a timeout was set."""
    return None if _timeout_s is None else Limits(timeout_s=_timeout_s)
