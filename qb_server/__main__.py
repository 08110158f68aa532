"""``python -m qb_server``: serve over stdio (default) or streamable HTTP.

Exit status 2 with a one-line message on stderr for a bad option (unknown
transport or task, a remote address without a token), before anything is
served; stdout carries nothing but MCP messages.
"""

from __future__ import annotations

import argparse
import os
import sys

from .config import DEFAULT_IDLE_S, DEFAULT_RECLAIM_S, DEFAULT_TASK


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m qb_server", description="QuoteBench MCP tool server")
    p.add_argument("--transport", default="raw", help="transport name (default raw; composed names allowed)")
    p.add_argument("--task", default=DEFAULT_TASK, help=f"task id (default {DEFAULT_TASK})")
    p.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    p.add_argument("--tool-name", default="bash", help="name of the shell tool (default bash)")
    p.add_argument("--control", action="store_true", help="add the qb_ control tools (for harnesses)")
    p.add_argument("--guard", action="store_true",
                   help="lint every call first; where the path would change it, deliver the safe text instead")
    p.add_argument("--lint", action="store_true", help="offer a lint tool beside the shell tool")
    p.add_argument("--record", metavar="FILE", help="append one JSON record per call and per session end")
    p.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --http address (needs --token)")
    p.add_argument("--token", help="require Authorization: Bearer TOKEN (default: $QB_SERVE_TOKEN)")
    p.add_argument("--idle-timeout", type=float, default=DEFAULT_IDLE_S, help="end sessions idle this long (s)")
    p.add_argument("--reclaim-idle", type=float, default=DEFAULT_RECLAIM_S,
                   help="when a new session does not fit, end the least recently used session idle this long "
                        f"(s, default {DEFAULT_RECLAIM_S:g})")
    p.add_argument("--allow-no-isolation", action="store_true",
                   help="serve even where no sandbox isolation (bubblewrap) is available")
    p.add_argument("--timeout", type=float, default=None,
                   help="wall-clock limit of one command in seconds (default 10, the sandbox's)")
    p.add_argument("--memory", metavar="SIZE", help="memory cap per sandboxed run (default 1G; also QB_MEMORY)")
    p.add_argument("--disk", metavar="SIZE", help="disk cap per sandbox, as root (default 1G; also QB_DISK)")
    p.add_argument("--host-budget", metavar="SIZE",
                   help="what all sandboxes together may ask of the host: open sandboxes x disk + running "
                        "commands x memory (default: half of the RAM)")
    p.add_argument("--suite", default="public", metavar="public|DIR",
                   help="the task suite: the public one, or a directory written by `quotebench tasks generate`")
    p.add_argument("--userland", default="gnu", metavar="gnu|busybox|uutils",
                   help="whose coreutils, sed, grep, find ... commands get")
    return p


def _apply(args: argparse.Namespace) -> int | None:
    """The process-wide settings (suite, userland, caps), as ``quotebench serve`` sets them; the host budget."""
    from tasks.load import select_suite
    from transports.sandbox import parse_size, set_default_limits, set_default_userland

    set_default_limits(memory=parse_size(args.memory, "--memory") if args.memory is not None else None,
                       disk=parse_size(args.disk, "--disk") if args.disk is not None else None)
    select_suite(args.suite)
    try:
        set_default_userland(args.userland)
    except ValueError as e:  # UserlandError: one line naming the userland
        raise ValueError(f"--userland: {e}") from None
    return parse_size(args.host_budget, "--host-budget") if args.host_budget is not None else None


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from transports.sandbox import isolation_refusal

    try:
        host_budget = _apply(args)
    except ValueError as e:
        print(f"quotebench serve: {e}", file=sys.stderr)
        return 2

    from .app import serve

    if not args.allow_no_isolation and (why := isolation_refusal("serve")):
        print(f"quotebench serve: {why}", file=sys.stderr)  # the same refusal as `quotebench serve`
        return 2

    try:
        serve(transport=args.transport, task=args.task, http=args.http, tool_name=args.tool_name,
              control=args.control, record=args.record, allow_remote=args.allow_remote,
              token=args.token or os.environ.get("QB_SERVE_TOKEN") or None, idle_timeout=args.idle_timeout,
              timeout=args.timeout, host_budget=host_budget, reclaim_idle=args.reclaim_idle, guard=args.guard,
              lint_tool=args.lint)
    except ValueError as e:
        print(f"quotebench serve: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
