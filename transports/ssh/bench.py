"""Per-execution cost of the ``ssh`` transport against ``raw``, ``nested`` and a bare ``bash -c true``.

Not a test: ``python -m transports.ssh.bench [-n 60] [--fallback-n 10]``. Every figure is the median
wall time of one ``deliver("true", sandbox)`` (one sandbox reused, so fixture costs are out), after a
warm-up; ``bash -c true`` is a plain ``subprocess.run`` with no sandbox (the floor). The first ssh
delivery, which builds the endpoint (keys, server thread, OpenSSH master connection), is reported
separately: it is paid once per process.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from collections.abc import Awaitable, Callable

import anyio

from ..nested import Nested
from ..raw import Raw
from ..sandbox import Sandbox, isolation_available
from .transport import Ssh, shutdown


async def _median_ms(fn: Callable[[], Awaitable[object]], n: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        await fn()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


async def bench(n: int, fallback_n: int) -> dict[str, float | str]:
    """Medians in milliseconds, plus ratios to the bare ``bash -c true``."""
    shutdown()  # measure the endpoint's first build from scratch
    result: dict[str, float | str] = {"isolation": isolation_available(), "n": n}

    async def bare() -> None:
        subprocess.run(["bash", "-c", "true"], check=True)

    with Sandbox.create() as box:
        start = time.perf_counter()
        d = await Ssh(client="openssh").deliver("true", box)
        result["ssh_first_delivery_ms"] = (time.perf_counter() - start) * 1000
        assert d.execution is not None and d.execution.exit_code == 0, d
        cases: dict[str, Callable[[], Awaitable[object]]] = {
            "bash_c_true": bare,
            "raw": lambda: Raw().deliver("true", box),
            "nested": lambda: Nested.deliver("true", box),
            "ssh": lambda: Ssh(client="openssh").deliver("true", box),
        }
        for name, fn in cases.items():
            result[f"{name}_ms"] = await _median_ms(fn, n)
        if fallback_n:
            result["ssh_fallback_asyncssh_ms"] = await _median_ms(
                lambda: Ssh(client="asyncssh").deliver("true", box), fallback_n, warmup=1)
    floor = float(result["bash_c_true_ms"])
    for key in [k for k in result if k.endswith("_ms") and k != "bash_c_true_ms"]:
        result[key.removesuffix("_ms") + "_x_bash"] = float(result[key]) / floor
    return {k: round(v, 2) if isinstance(v, float) else v for k, v in result.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=60)
    parser.add_argument("--fallback-n", type=int, default=10)
    args = parser.parse_args()
    print(json.dumps(anyio.run(bench, args.n, args.fallback_n), indent=1))


if __name__ == "__main__":
    main()
