"""Two probes several test files share: the CLI run in this process, and which runs asked for the network.

``cli``: ``quotebench ARGS`` through its real entry point (bad input becomes one line and exit 2 there), without
the cost of a subprocess. ``network_asked``: wraps ``Sandbox.run``, whose real code still runs every time, and
lists each run's ``network`` flag, so a test can say the harness had only its own network namespace.
"""

from __future__ import annotations

import sys

import pytest

from qb_client.cli import main
from transports.sandbox import Sandbox


def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, str]:
    """``quotebench ARGS`` in this process: (exit status, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["quotebench", *args])
    with pytest.raises(SystemExit) as ended:
        main()
    got = capsys.readouterr()
    return int(ended.value.code or 0), got.out, got.err


def network_asked(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The ``network`` flag of every ``Sandbox.run`` from now on, in order (the real run goes on)."""
    seen: list[bool] = []
    real = Sandbox.run

    async def recording(self, argv, **kw):  # type: ignore[no-untyped-def]
        seen.append(bool(kw.get("network", False)))
        return await real(self, argv, **kw)

    monkeypatch.setattr(Sandbox, "run", recording)
    return seen
