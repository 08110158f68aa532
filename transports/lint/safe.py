"""The safe text for a route: R encoded for the route's parser so that the final shell receives exactly R,
or, where no text can survive the route, the ``-safe`` twin that carries R in a script file.

Every encoding here is checked before it is offered: a candidate is ``safe`` only when the route's
predictor says it arrives as exactly R (an unknown prediction is never offered), or, on a one-layer paste
route, when :mod:`.paste` proves it arrives as R by how it is built.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from .model import Outcome, Safe

def dq_escape(command: str) -> str:
    """R for the inside of bash's double quotes: each \\ " $ ` escaped, so the parse gives R back (the
    backslashes first, so the ones added after are not doubled)."""
    return command.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`")


def sq_escape(command: str) -> str:
    """R for the inside of single quotes: each ' closed, escaped and reopened."""
    return command.replace("'", "'\\''")


def shlex_dq_escape(command: str) -> str:
    """R for the inside of shlex's double quotes, which honour only \\" and \\\\."""
    return command.replace("\\", "\\\\").replace('"', '\\"')


def ssh_escape(command: str) -> str:
    """R for ``ssh host "R"``: double-quote escapes, and a leading ``-`` put after ssh's own ``--`` word."""
    text = dq_escape(command)
    return '--" "' + text if command.startswith("-") else text


def json_escape(command: str) -> str:
    """R for the inside of a JSON string."""
    return json.dumps(command, ensure_ascii=False)[1:-1]


def gha_scalar(command: str) -> str:
    """R as a YAML double-quoted scalar with every ``${{`` neutralised: the runner's script is R."""
    from ..paths.gha import double_quoted
    from ..paths.gha_expr import neutralise

    return double_quoted(neutralise(command))


ENCODERS: dict[str, Callable[[str], str]] = {
    "nested": dq_escape,
    "docker-sh": dq_escape,
    "ssh": ssh_escape,
    "nested-single": sq_escape,
    "shlex-sh": shlex_dq_escape,
    "gha-run": gha_scalar,
    "make": lambda r: r.replace("$", "$$"),
}
"""Route base name -> the encoding a careful sender applies to R."""
TWINS: dict[str, str] = {"nested": "escaped", "nested-single": "escaped", "ssh": "ssh-safe",
                         "docker-sh": "docker-sh-safe", "shlex-sh": "shlex-sh-safe", "make": "make-safe",
                         "gha-run": "gha-run-safe", "gha-block": "gha-block-safe", "tmux": "tmux-safe",
                         "shell-quote-eval": "shell-quote-eval-safe", "json-naive": "json-correct"}
"""Route base name -> the registered transport that carries any R exactly (a script file where needed)."""


def twin(name: str) -> str:
    """The fix for a whole transport name: each unsafe layer replaced by its twin, the final shell kept where
    the twin takes one (a deployment path's twin has the path's fixed shell)."""
    from ..registry import UnknownTransportError, validate_name

    parts = []
    for part in name.split("+"):
        base, at, shell = part.partition("@")
        fixed = TWINS.get(base, base)
        if at:
            try:
                fixed = validate_name(f"{fixed}@{shell}")
            except UnknownTransportError:
                pass
        parts.append(fixed)
    return "+".join(parts)


def arrives(outcome: Outcome, command: str) -> bool:
    return outcome.known and outcome.transport_error is None and not outcome.split and outcome.received == command


def choose(name: str, layers: list[str], command: str, predict: Callable[[str], Outcome],
           own: Outcome, proven: Callable[[str, str], bool] | None = None) -> Safe:
    """The safe delivery of ``command`` on ``name`` (``layers``: its base names, outermost first);
    ``predict(text)`` is the lint's prediction for a text on the same route; ``own``: R's own;
    ``proven(R, text)``: True where ``text``, the route's encoding of R, arrives as R by construction (:mod:`.paste`), so the
    check by ``predict`` would say the same."""
    if arrives(own, command):
        return Safe("as-is", command, name)
    text = command
    for base in reversed(layers):  # the innermost layer's encoding first, each outer layer wrapping it
        if base == "json-naive":
            text = json_escape(text)
        elif base in ENCODERS:
            text = ENCODERS[base](text)
    if text != command and ((proven is not None and proven(command, text)) or arrives(predict(text), command)):
        return Safe("escaped", text, name)
    fix = twin(name)
    return Safe("script" if fix != name else "unknown", None, fix,
                "no text survives this route; send R through the twin, which carries it in a script file"
                if fix != name else "no encoding of R is known to survive this route")
