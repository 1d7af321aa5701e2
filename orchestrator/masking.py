"""Secret masking: one process-wide set of secret values, replaced by `***` wherever text
leaves the process (console, logs, run folder, diffs).

Secrets are registered when they are resolved from the controller's environment
(`plan/secrets.py`); everything that writes text calls `mask()`.
"""

from __future__ import annotations

import threading

MASK = "***"
MIN_LENGTH = 4  # masking very short values would shred unrelated text

_lock = threading.Lock()
_secrets: set[str] = set()


def register(value: str) -> None:
    """Remember a secret value so that every later `mask()` hides it."""
    if len(value) >= MIN_LENGTH:
        with _lock:
            _secrets.add(value)


def mask(text: str) -> str:
    """`text` with every registered secret value replaced by `***` (longest first)."""
    if not _secrets:
        return text
    for value in sorted(_secrets, key=len, reverse=True):
        if value in text:
            text = text.replace(value, MASK)
    return text


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
