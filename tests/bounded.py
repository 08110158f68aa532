"""A deadline for tests of hostile input: a hang must fail the test, never stall the suite."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def bounded(fn: Callable[[], Any], seconds: float = 30.0) -> Any:
    """Run ``fn`` in a daemon thread; fail (instead of hanging the suite) if it does not return in time."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"did not return within {seconds} s (blocked?)"
    if "error" in out:
        raise out["error"]
    return out.get("value")
