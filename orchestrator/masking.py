"""Secret masking: one process-wide set of secret values, replaced by `***` wherever text
leaves the process (console, logs, run folder, diffs).

Secrets are registered when they are resolved from the controller's environment
(`plan/secrets.py`); everything that writes text calls `mask()`. Text is masked before it
is cut or encoded: a secret cut in half, or written as JSON (a `"` becomes `\"`), would no
longer be found. `mask_data()` masks every string of a structure before it is encoded, and
`dumps()` is the JSON encoding every record uses.
"""

from __future__ import annotations

import json
import threading
from typing import Any

MASK = "***"
MIN_LENGTH = 4  # masking very short values would shred unrelated text

_lock = threading.Lock()
_secrets: set[str] = set()


def register(value: str) -> None:
    """Remember a secret value so that every later `mask()` hides it, and its forms in JSON
    text (`"` as `\"`, non-ASCII as `\u00e9`): a server may repeat it inside JSON."""
    if len(value) >= MIN_LENGTH:
        with _lock:
            _secrets.update({value, json.dumps(value)[1:-1],
                             json.dumps(value, ensure_ascii=False)[1:-1]})


def mask(text: str) -> str:
    """`text` with every registered secret value replaced by `***` (longest first)."""
    if not _secrets:
        return text
    for value in sorted(_secrets, key=len, reverse=True):
        if value in text:
            text = text.replace(value, MASK)
    return text


def mask_data(value: Any) -> Any:
    """`value` (dicts, lists, tuples, strings; keys too) with every string masked."""
    if not _secrets:
        return value
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return {mask_data(key): mask_data(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [mask_data(item) for item in value]
    return value


def mask_bytes(raw: bytes, limit: int) -> bytes:
    """The first `limit` bytes of `raw` after masking (read a byte a character, so a secret
    is found whatever the encoding around it): a server's bytes quoted in a message."""
    if not _secrets:
        return raw[:limit]
    return mask(raw.decode("latin-1")).encode("latin-1")[:limit]


def dumps(value: Any, **options: Any) -> str:
    """JSON of `value`, its strings masked before encoding (and the text after, for what
    `default=` turns into text)."""
    return mask(json.dumps(mask_data(value), **options))


def register_url(url: str) -> None:
    """Mask the credentials a URL carries (`http://user:secret@host/`): the userinfo as a
    whole, so even a short password never shows."""
    _scheme, found, rest = url.partition("://")
    userinfo, at, _ = rest.partition("/")[0].rpartition("@")
    if found and at and userinfo:
        with _lock:
            _secrets.add(userinfo)  # whatever its length: it is delimited by :// and @
        register(userinfo.partition(":")[2])


def clear() -> None:
    """Forget all secrets (tests)."""
    with _lock:
        _secrets.clear()
