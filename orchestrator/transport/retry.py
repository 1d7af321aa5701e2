"""The one retry policy of the transports: transient connection failures are retried with a
bounded exponential backoff; everything else fails at once.

Transient means `ConnectError` (refused, reset, timed out, SSH banner, a session dropped
mid-command) unless it is a `PermanentConnectError` (a host name that does not resolve, no
common algorithms, a port that accepts and then stays silent for the whole connect_timeout:
retrying would only multiply that wait). `AuthError`, `HostKeyError` and `CommandFailed`
are never retried: trying again cannot fix them. Each retry is logged and reported through
`on_retry(host, attempt, error)` before the wait, so the runner can show it live.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from orchestrator.errors import ConnectError

if TYPE_CHECKING:
    import tenacity  # imported at run time only once a try failed

log = logging.getLogger("orchestrator.transport")

T = TypeVar("T")
RetryCallback = Callable[[str, int, Exception], None]


class PermanentConnectError(ConnectError):
    """A connection failure that waiting cannot fix (unknown host name, no common cipher)."""


@dataclass(frozen=True)
class Backoff:
    """Wait `first` seconds after the first failure, doubling up to `maximum`."""

    first: float = 0.2
    maximum: float = 5.0

    def delays(self, retries: int) -> list[float]:
        """The waits before each of `retries` retries (for messages and tests)."""
        return [min(self.first * 2**n, self.maximum) for n in range(retries)]


def is_transient(error: BaseException) -> bool:
    return isinstance(error, ConnectError) and not isinstance(error, PermanentConnectError)


def _announcer(host: str, on_retry: RetryCallback | None) -> Callable[[tenacity.RetryCallState], None]:
    """What tenacity calls before each wait: the failed attempt, reported once (by the
    caller's event when it listens, as a log line otherwise)."""

    def before_sleep(state: tenacity.RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        if not isinstance(error, Exception):  # pragma: no cover - tenacity always sets it
            return
        wait = state.next_action.sleep if state.next_action else 0.0
        (log.debug if on_retry is not None else log.warning)(
            "%s: attempt %d failed (%s); retrying in %.1f s",
            host,
            state.attempt_number,
            error,
            wait,
        )
        if on_retry is not None:
            on_retry(host, state.attempt_number, error)

    return before_sleep


def call_with_retries(
    attempt: Callable[[], T],
    *,
    host: str,
    retries: int,
    backoff: Backoff,
    on_retry: RetryCallback | None = None,
) -> T:
    """`attempt()`, tried again up to `retries` times while it raises a transient error.

    `attempt` must raise only orch errors. After the last try the final `ConnectError` is
    raised with the number of attempts added to its message.
    """
    try:
        return attempt()  # the usual case: tenacity is imported only once a try failed
    except ConnectError as error:
        if retries == 0 or not is_transient(error):
            raise
        replay: list[ConnectError] = [error]
    import tenacity

    def again() -> T:  # the failure above is tenacity's first attempt: same waits and numbers
        if replay:
            raise replay.pop()
        return attempt()

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(retries + 1),
        wait=tenacity.wait_exponential(multiplier=backoff.first, max=backoff.maximum),
        retry=tenacity.retry_if_exception(is_transient),
        before_sleep=_announcer(host, on_retry),
        reraise=True,
    )
    try:
        return retrying(again)
    except ConnectError as error:
        if retries == 0 or not is_transient(error):
            raise
        text = error.message.removeprefix(f"{host}: ")
        raise ConnectError(
            f"{text} (gave up after {retries + 1} attempts)", host=host, hint=error.hint
        ) from error
