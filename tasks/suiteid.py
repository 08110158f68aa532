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
from pathlib import Path

PUBLIC = "public"
PUBLIC_DIR = Path(__file__).parent / "families"
MANIFEST = "suite.json"


def content_digest(directory: Path) -> str:
    """sha256 over the family files (name and bytes, in name order), first 12 hex digits."""
    h = hashlib.sha256()
    for p in sorted(directory.glob("*.toml")):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def generator_version(directory: Path) -> int | None:
    """The generator version named by the directory's manifest, or None (no manifest, or not one of ours)."""
    try:
        doc = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    v = doc.get("generator_version") if isinstance(doc, dict) else None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def suite_id(directory: Path) -> str:
    if directory.resolve() == PUBLIC_DIR.resolve():
        return PUBLIC
    v = generator_version(directory)
    digest = content_digest(directory)
    return f"gen-v{v}-{digest}" if v is not None else f"dir-{digest}"
