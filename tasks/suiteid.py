"""Which suite a directory of family files is: ``public`` (the packaged files) or a generated suite's id.

A generated suite is identified by its generator version and a hash of its
family files' bytes, ``gen-v1-<hash12>``: the same seed and generator version give
the same files, hence the same id, and any edit gives another id. A directory of
family files without a generator manifest is ``dir-<hash12>``. The id never holds
the seed: records carry it, and the seed is what keeps a split private.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from .safefs import UnsafeRead, list_regular, read_capped

PUBLIC = "public"
PUBLIC_DIR = Path(__file__).parent / "families"
MANIFEST = "suite.json"


MAX_SUITE_FILE = 1 << 20


def content_digest(directory: Path, contents: Mapping[str, bytes] | None = None) -> str:
    """sha256 over the family files (name and bytes, in name order), first 12 hex digits. ``contents``: the
    files' bytes by name, already read (by the loader's checked reads); else they are read here, checked."""
    if contents is None:
        contents = {p.name: read_capped(p, MAX_SUITE_FILE) for p in list_regular(directory, "*.toml")}
    h = hashlib.sha256()
    for name in sorted(contents):
        h.update(name.encode() + b"\0" + contents[name] + b"\0")
    return h.hexdigest()[:12]


def generator_version(directory: Path) -> int | None:
    """The generator version named by the directory's manifest, or None (no manifest, or not one of ours).

    A manifest that is a FIFO, a device, a symlink or over 1 MiB is :class:`UnsafeRead` (never waited on)."""
    try:
        doc = json.loads(read_capped(directory / MANIFEST, MAX_SUITE_FILE).decode("utf-8"))
    except UnsafeRead:
        raise
    except (OSError, ValueError, RecursionError):
        return None
    v = doc.get("generator_version") if isinstance(doc, dict) else None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def suite_id(directory: Path, contents: Mapping[str, bytes] | None = None) -> str:
    if directory.resolve() == PUBLIC_DIR.resolve():
        return PUBLIC
    v = generator_version(directory)
    digest = content_digest(directory, contents)
    return f"gen-v{v}-{digest}" if v is not None else f"dir-{digest}"
