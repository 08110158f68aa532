"""Model providers behind one interface (:class:`Provider`), built by :func:`make_provider`.

Network providers import their SDK lazily (only when chosen), so offline use
(``reference``, ``replay``) needs neither SDK configured.
"""

from .base import ConfigInfo, Generation, GenerationRequest, Provider, ProviderError, Secret, ToolCall, ToolSpec, Usage
from .factory import PROVIDERS, make_provider
from .retry import RetryPolicy

__all__ = [
    "PROVIDERS", "ConfigInfo", "Generation", "GenerationRequest", "Provider", "ProviderError", "RetryPolicy",
    "Secret", "ToolCall", "ToolSpec", "Usage", "make_provider",
]
