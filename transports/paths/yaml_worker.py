"""The gha paths' YAML parse, bounded in size and time and never on an event loop.

Why
    PyYAML's pure-Python loader takes seconds on a hostile workflow just under the
    size cap (a flow sequence of 87,000 empty ``?`` keys: 4 s on an idle core, far
    more on a loaded one). Parsed on the event loop, that would freeze every other
    run of a ``replay --concurrency N``: an innocent run beside it would be recorded
    ``timed_out``, its clock being the stalled loop's.

How
    * the input is capped (:data:`MAX_YAML` characters; beyond it, a transport error);
    * up to :data:`INLINE_MAX` characters (a few milliseconds of parsing) the parse runs
      in a worker thread: the loop stays free, and the size bounds the time;
    * beyond that it runs in a fresh Python process (this file, run as a script), killed
      at :data:`PARSE_BOUND_S`: it uses another core, holds no lock of ours, and a parser
      crash or overrun is a one-line transport error, never the harness's.

Why not libyaml
    PyYAML's C loader (``CBaseLoader``, present when ``yaml.__with_libyaml__``) is
    ~1000x faster, but it does not read the same text the same way: on 128,000 random
    short workflows built from YAML's special characters, 2.7% parsed under one loader
    and failed under the other (tabs, a BOM, U+2028 around plain and block scalars),
    and it crashed the process (SIGSEGV) on 100,000 nested ``[``. Switching would change
    ``received`` and verdicts against every record made so far, so the measured
    component stays the pure loader and the bound comes from the size cap and the
    separate process.
"""

from __future__ import annotations

import json
import sys

import yaml

MAX_YAML = 1 << 18
"""The most characters of workflow parsed at all."""
INLINE_MAX = 1 << 14
"""Up to this many characters the parse runs in a thread (bounded by the size); beyond, in a process."""
PARSE_BOUND_S = 60.0
"""The most a parse in its own process may take (a 256 KiB worst case takes ~4 s on an idle core)."""
OUTPUT_CAP = 32 * MAX_YAML
"""The most of the worker's answer read (the step as JSON; its strings come from the input)."""

_LOADER = yaml.BaseLoader
"""The pure-Python base loader: every scalar is text (no YAML 1.1 types), as the runner reads ``run``;
nesting past Python's recursion limit is a RecursionError."""

Step = tuple[dict | None, str]


def first_step(text: str) -> Step:
    """The parsed first step, or None and why (one line). Pure: no I/O, bounded by :data:`MAX_YAML`."""
    if len(text) > MAX_YAML:
        return None, f"the workflow is longer than {MAX_YAML} characters"
    try:
        doc = yaml.load(text, Loader=_LOADER)  # noqa: S506 - the base loader builds only str, list and dict
    except yaml.MarkedYAMLError as e:
        where = f" (line {e.problem_mark.line + 1}, column {e.problem_mark.column + 1})" if e.problem_mark else ""
        return None, "YAML: " + " ".join(" ".join(filter(None, (e.context, e.problem))).split())[:200] + where
    except (yaml.YAMLError, ValueError) as e:
        return None, "YAML: " + " ".join(str(e).split())[:200]
    except RecursionError:
        return None, "YAML: nesting too deep"
    try:
        steps = doc["jobs"]["qb"]["steps"]
        step = steps[0]
    except (TypeError, KeyError, IndexError):
        return None, "the workflow no longer has the step (jobs.qb.steps[0])"
    if not isinstance(step, dict):
        return None, "the step is not a mapping"
    return step, (f"the workflow text gained {len(steps) - 1} more step(s); only the first ran"
                  if len(steps) > 1 else "")


async def parse_first_step(text: str, bound_s: float = PARSE_BOUND_S) -> Step:
    """:func:`first_step` off the caller's event loop: a thread for small text, a process of its own
    (killed at ``bound_s``) beyond :data:`INLINE_MAX`. Never raises for what the text does."""
    import anyio

    if len(text) > MAX_YAML:
        return first_step(text)
    if len(text) <= INLINE_MAX:
        return await anyio.to_thread.run_sync(first_step, text)
    return await _in_process(text, bound_s)


async def _in_process(text: str, bound_s: float) -> Step:
    import subprocess

    import anyio

    proc = await anyio.open_process([sys.executable, "-I", __file__], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = bytearray()
    try:
        with anyio.move_on_after(bound_s) as scope:
            assert proc.stdin is not None and proc.stdout is not None
            await proc.stdin.send(text.encode("utf-8", "surrogateescape"))
            await proc.stdin.aclose()
            async for chunk in proc.stdout:
                out += chunk
                if len(out) > OUTPUT_CAP:
                    break
            await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
        with anyio.CancelScope(shield=True):
            await proc.wait()
            await proc.aclose()
    if scope.cancelled_caught:
        return None, f"YAML: the parse did not finish within {bound_s:g} s (abandoned)"
    if proc.returncode != 0 or len(out) > OUTPUT_CAP:
        why = f"signal {-proc.returncode}" if (proc.returncode or 0) < 0 else f"exit {proc.returncode}"
        return None, f"YAML: the parser failed ({why if len(out) <= OUTPUT_CAP else 'its answer is too long'})"
    answer = json.loads(out)
    return answer["step"], answer["note"]


def _main() -> None:
    """The worker process: the workflow on stdin, ``{"step": ..., "note": ...}`` on stdout."""
    text = sys.stdin.buffer.read(4 * MAX_YAML + 1).decode("utf-8", "surrogateescape")
    step, note = first_step(text)
    sys.stdout.write(json.dumps({"step": step, "note": note}, ensure_ascii=True))


if __name__ == "__main__":
    _main()
