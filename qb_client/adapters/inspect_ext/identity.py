"""Who answered and which reply it was, for a sample run by Inspect.

The scorer stamps these on the records it makes, and the import derives the
same values from the log, so a record read from a log and a record made by
``quotebench replay`` of the imported reply carry the same config, reply id
and draw. Why these choices:

* ``provider`` is ``inspect`` and ``model`` Inspect's full model name
  (``google/gemini-2.5-pro``): a run through Inspect never pools with a run of
  our own driver under the same label, and the label still names the model.
* ``reply_id`` hashes the sample's run uuid, unique per (eval, sample, epoch):
  importing a log twice repeats the same ids (nothing doubles), and two evals
  of the same model get different ids.
* ``draw`` is the epoch minus one, so epochs are our draws.
"""

from __future__ import annotations

import hashlib
from typing import Any

from transports.results.record import ConfigInfo

PROVIDER = "inspect"
_SCALARS = (str, int, float, bool)


def config_for(model: str, generate_config: Any) -> ConfigInfo:
    """The config of a model run with an Inspect ``GenerateConfig`` (effort and the scalar parameters set)."""
    effort = (getattr(generate_config, "reasoning_effort", None) or getattr(generate_config, "effort", None)
              or "unset")
    params: dict[str, Any] = {}
    if generate_config is not None:
        for key, value in generate_config.model_dump(exclude_none=True).items():
            if key not in ("reasoning_effort", "effort") and isinstance(value, _SCALARS):
                params[key] = value
    return ConfigInfo(provider=PROVIDER, model=model, effort=str(effort), params=params)


def reply_id_of(sample_uuid: str) -> str:
    return "i-" + hashlib.sha256(sample_uuid.encode()).hexdigest()[:16]


def draw_of(epoch: int) -> int:
    return epoch - 1
