"""``errors.jsonl`` keeps only what is still an error: after a run, a line a later run resolved (the
reply now generated, the execution now recorded) is dropped, so the file answers "what failed and is
still missing", never "what failed once"."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..replies.config import config_label


def _label(line: dict[str, Any]) -> str | None:
    return config_label(line["config"]) if isinstance(line.get("config"), dict) else None


def _read(path: Path) -> list[dict[str, Any]]:
    """Complete JSON objects only (a torn last line is skipped: this is a cleanup, never a refusal)."""
    if not path.is_file():
        return []
    out = []
    for text in path.read_text(encoding="utf-8", errors="surrogateescape").splitlines():
        try:
            doc = json.loads(text)
        except ValueError:
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return out


def prune_resolved(out_dir: Path) -> int:
    """Drop the errors a later run resolved; how many were dropped. The file is replaced atomically."""
    path = out_dir / "errors.jsonl"
    errors = _read(path)
    if not errors:
        return 0
    replies = {(_label(r), r.get(k)) for r in _read(out_dir / "replies.jsonl") for k in ("key", "reply_id")}
    results = {(_label(r), r.get("reply_id"), r.get("transport")) for r in _read(out_dir / "results.jsonl")}

    def resolved(e: dict[str, Any]) -> bool:
        if e.get("stage") == "generate":
            return (_label(e), e.get("reply_id")) in replies
        return (_label(e), e.get("reply_id"), e.get("transport")) in results

    kept = [e for e in errors if not resolved(e)]
    if len(kept) == len(errors):
        return 0
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in kept), encoding="utf-8",
                   errors="surrogateescape")
    os.replace(tmp, path)
    return len(errors) - len(kept)
