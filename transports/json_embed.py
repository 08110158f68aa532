"""`json-naive` and `json-correct`: R embedded in a JSON document, then decoded.

Middleware: the decoded string is handed to an inner transport (``raw`` unless
composed otherwise). `json-naive` pastes R between the quotes of
``{"command": "R"}`` as a template engine would; `json-correct` serializes it.
A strict parser refusing the naive document is a transport error: nothing runs.
"""

from __future__ import annotations

import json

from .base import Delivery, Transport, check_command
from .raw import Raw
from .sandbox import Sandbox


def naive(command: str) -> str:
    return json.loads('{"command": "' + command + '"}', strict=True)["command"]


def correct(command: str) -> str:
    return json.loads(json.dumps({"command": command}))["command"]


class JsonEmbed:
    def __init__(self, name: str, boundary: str, decode, inner: Transport | None = None) -> None:
        self.name = name
        self.boundary = boundary
        self.decode = decode
        self.inner: Transport = inner or Raw()
        self.shell = getattr(self.inner, "shell", None)

    async def deliver(self, command: str, sandbox: Sandbox) -> Delivery:
        if (why := check_command(command)) is not None:
            return Delivery(received=None, execution=None, transport_error=why)
        try:
            decoded = self.decode(command)
        except (ValueError, KeyError, TypeError, RecursionError) as e:
            return Delivery(received=None, execution=None,
                            transport_error=f"{self.name}: the JSON document does not parse: {e}")
        if not isinstance(decoded, str):
            return Delivery(received=None, execution=None,
                            transport_error=f"{self.name}: the command field decoded to {type(decoded).__name__}, not a string")
        return await self.inner.deliver(decoded, sandbox)


def JsonNaive(inner: Transport | None = None) -> JsonEmbed:
    return JsonEmbed("json-naive", 'pasted into {"command": "R"} and parsed with a strict JSON parser', naive, inner)


def JsonCorrect(inner: Transport | None = None) -> JsonEmbed:
    return JsonEmbed("json-correct", "serialized with json.dumps and parsed back (the fix: no damage expected)", correct, inner)
