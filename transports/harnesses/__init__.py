"""Real agent harnesses as deployment paths: the released harness itself, driven offline, is the route.

What this room owns
    The frame every harness route shares (:mod:`.harness`: install on first use into the per-user cache, a
    scripted fake model server, the *courier* (:mod:`.courier`), started beside the harness inside the
    sandbox on 127.0.0.1, and ``received`` from the kernel's exec trace), the quote removal of a harness's
    wrapper by bash itself (:mod:`.dequote`), and one module per harness (:mod:`.claude_code`,
    :mod:`.mini_swe_agent`, :mod:`.codex`, :mod:`.gemini_cli`, :mod:`.openai_agents`). Also the harness as the
    agent (:mod:`.agent`: one multi-turn run whose model is reached through :mod:`.relay`, a byte relay on the
    sandbox's loopback to the host's recording proxy).

What it may import
    ``transports`` below it (``base``, ``capture``, ``components``, ``needs``, ``sandbox``, ``shells``,
    ``paths.route``, ``paths.npm_cache``, ``paths.venv_cache``) and ``tasks.safefs``. Imported by the registry (and the doctor,
    through it), and by ``qb_client.campaign.harness_run`` (:mod:`.agent`). The courier and relay scripts import
    nothing of the project: they run in the sandbox. Nor does :mod:`.agents_driver`, the program
    :mod:`.openai_agents` runs with the Agents SDK in the sandbox.

How it differs from :mod:`transports.paths`
    A path reproduces a route's boundary with its real component (a library, tmux, make). Here the component
    is the whole harness, so ``received`` is what that release really handed its shell, and a route has a
    ``-safe`` twin only when an encoding of R could change what it delivers (none so far: docs/harnesses.md).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module

from ..base import Transport


def _lazy(module: str, cls: str) -> Callable[[], Transport]:
    """A factory that imports ``transports.harnesses.<module>`` only when the route is first built."""
    def make() -> Transport:
        return getattr(import_module(f"{__name__}.{module}"), cls)()
    return make


HARNESSES: dict[str, Callable[[], Transport]] = {
    "claude-code": _lazy("claude_code", "ClaudeCode"),
    "mini-swe-agent": _lazy("mini_swe_agent", "MiniSweAgent"),
    "codex": _lazy("codex", "Codex"),
    "gemini-cli": _lazy("gemini_cli", "GeminiCli"),
    "openai-agents": _lazy("openai_agents", "OpenAIAgents"),
}
"""Name -> factory, in the order the catalogue and ``quotebench doctor`` list them."""
