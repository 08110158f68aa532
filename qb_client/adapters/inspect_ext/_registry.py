"""The module Inspect loads through the ``inspect_ai`` entry point (pyproject): it registers the
``quotebench/quotebench`` task and the offline ``quotebench/reference`` model by importing them."""

from .reference_model import reference
from .task import quotebench

__all__ = ["quotebench", "reference"]
