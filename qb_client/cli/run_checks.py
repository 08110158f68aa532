"""Checks ``quotebench run`` makes before anything is generated, so a campaign never fails (or runs under
a wrong label) halfway through for a reason its command line already showed."""

from __future__ import annotations

from ..console import fail, message

OFFLINE = ("reference", "habits", "replay")


def check_offline_effort(provider: str, efforts: list[str]) -> None:
    """An offline agent sends no effort: its effort is only the config's label. A word no provider
    documents (``hgih``) is refused, since it would label a whole campaign by a typo; ``raw:WORD`` is a
    label on purpose; a documented one is kept, with a warning that nothing is sent."""
    if provider not in OFFLINE:
        return
    from ..adapters.providers.effort import RAW_PREFIX, UNSET, allowed_efforts

    words = [e for e in efforts if e != UNSET and not e.startswith(RAW_PREFIX)]
    # the documented values are read from the SDKs' types, whose import costs 3 s of CPU: only for a word to check
    known = {v for p in ("anthropic", "openai", "openai-chat") for v in allowed_efforts(p) or ()} if words else set()
    for e in words:
        if e not in known:
            fail(f"--effort '{e}': not an effort any provider documents ({', '.join(sorted(known))}); {provider} "
                 f"is offline and takes it as a label only: write '{RAW_PREFIX}{e}' to use it as one")
    labels = [e for e in efforts if e != UNSET]
    if labels:
        message(f"quotebench: warning: --effort {','.join(labels)}: {provider} runs offline, so nothing is sent; "
                "the effort only labels the config", style="yellow")


def check_server(server: str | None, contracts: list[str], transports: list[str]) -> None:
    """A running ``quotebench serve --control`` serves one transport, so ``--server`` with several would fail
    after generating every reply; refuse it before anything runs."""
    if server and "native" in contracts and len(transports) > 1:
        fail(f"--server {server} serves the one transport it was started with, but --transports names "
             f"{len(transports)} ({', '.join(transports)}): give one transport per run (start one server per "
             "transport), or leave out --server to use the in-process server for all of them")


def parse_params(text: str | None) -> dict:
    """``--params``: a JSON object, or nothing."""
    from transports.results.store import loads

    if not text:
        return {}
    try:
        params = loads(text)
    except ValueError as e:
        fail(f"--params: not valid JSON ({e})")
    if not isinstance(params, dict):
        fail("--params: must be a JSON object, e.g. '{\"temperature\": 0}'")
    return params
