"""Model providers behind one interface (:class:`Provider`), built by :func:`make_provider`.

Network providers import their SDK lazily (only when chosen), so offline use
(``reference``, ``replay``) needs neither SDK configured.

May import: ``tasks``, ``transports``; of ``qb_client``: :mod:`qb_client.replies` (the contracts'
messages and tools, the reply store read by ``replay:FILE``) and :mod:`qb_client.adapters.agents`. Never a
campaign: campaigns call providers. This ``__init__`` only re-exports its own submodules, and none of
them imports it back.
"""

from .base import ConfigInfo, Generation, GenerationRequest, Provider, ProviderError, Secret, ToolCall, ToolSpec, Usage
from .factory import PROVIDERS, make_provider
from .retry import RetryPolicy

__all__ = [
    "PROVIDERS", "ConfigInfo", "Generation", "GenerationRequest", "Provider", "ProviderError", "RetryPolicy",
    "Secret", "ToolCall", "ToolSpec", "Usage", "make_provider",
]
