"""Which design a campaign runs: the native tool kind and the turn budget, and the config variant that
keeps each design apart in labels, resume keys and reports (:attr:`transports.results.record.ConfigInfo.variant`).

``--native-tool builtin`` (the default where the provider has a built-in shell tool: ``anthropic``,
``openai``) offers the provider's own shell tool; ``function`` offers the MCP function tool ``bash``, the
only choice for ``openai-chat`` and the offline providers. The variant names ``builtin`` whenever the
native contract is run with it, and ``turns=K`` for K > 1, so ``anthropic:m@high+builtin`` and
``anthropic:m@high`` (the function tool, as every campaign before this option) are two configs that a
report never pools.
"""

from __future__ import annotations

from ..replies.contracts import BUILTIN_PROVIDERS, NATIVE_TOOL_KINDS


def resolve_native_tool(provider: str, asked: str | None) -> str:
    """The tool kind for a provider: its default when not asked; a ``ValueError`` (one line) when asked for
    one it does not have."""
    if asked is None:
        return "builtin" if provider in BUILTIN_PROVIDERS else "function"
    if asked not in NATIVE_TOOL_KINDS:
        raise ValueError(f"--native-tool '{asked}': one of {', '.join(NATIVE_TOOL_KINDS)}")
    if asked == "builtin" and provider not in BUILTIN_PROVIDERS:
        raise ValueError(f"--native-tool builtin: {provider} has no built-in shell tool (only "
                         f"{', '.join(BUILTIN_PROVIDERS)} do); use --native-tool function")
    return asked


def check_turns(provider: str, turns: int) -> int:
    if turns < 1:
        raise ValueError(f"--turns {turns}: must be 1 (one-shot) or more")
    if turns > 1 and provider == "replay":
        raise ValueError(f"--turns {turns}: a reply store cannot answer a chain (each reply after turn 1 depends on "
                         "what the transport did, so the multi-turn arm has no fixed-reply replay)")
    return turns


def variant_for(native_tool: str | None, turns: int) -> str | None:
    """The config variant: ``builtin`` when the native contract runs with the built-in tool, ``turns=K`` for
    K > 1, joined by ``+``; None for the one-shot function-tool design."""
    parts = (["builtin"] if native_tool == "builtin" else []) + ([f"turns={turns}"] if turns > 1 else [])
    return "+".join(parts) or None
